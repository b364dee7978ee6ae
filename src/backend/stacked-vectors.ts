// The SVD crossover's two heavy loops on the CPU, shared by the host operators (src/evolution/operators.ts) and
// the CPU backend's twins of kernels/evolve_gram.wgsl and kernels/evolve_combine.wgsl. The vectors are the
// stacked rows of [A1; A2] or columns of [B1 B2], read in place:
//   v_i[k] = data_i[base_i + k·stride]      i < n, k < length   (A rows: stride 1; B columns: stride R)
//   gram:     G[i, j] = Σ_k v_i[k]·v_j[k]                     [n, n], float64, summed block by block over k
//   combine:  out_j[k] = f32(Σ_i mix[i, j]·v_i[k])            mix [n, keep]; out_j written through its own ref
// `gram` and `combine` run kernels/cpu/stacked_vectors.wasm (SIMD, register tiles: 15-25x the plain loops);
// gramReference and combineReference are those plain loops, which the kernel matches bit for bit (same sums in
// the same order). The kernel reads and writes only its own memory: the spans of the arrays that the vectors
// cover are copied in (merged where they overlap) and the outputs' spans copied back.

import { assert } from './backend.js';
import { loadCpuKernel, reserve } from './kernel-files.js';

export type VectorRef = readonly [data: Float32Array, base: number];

/** k values per block (the kernel's BLOCK): the Gram sums each block, then adds the blocks in order. */
const BLOCK = 128;
const padded4 = (n: number) => Math.ceil(n / 4) * 4;

function checkVectors(what: string, vectors: readonly VectorRef[], length: number, stride: number): void {
  assert(vectors.length > 0 && Number.isInteger(length) && length > 0 && Number.isInteger(stride) && stride > 0, `${what}: needs vectors of at least one value and a positive stride (got ${vectors.length} vectors of ${length}, stride ${stride})`);
  for (const [data, base] of vectors) assert(Number.isInteger(base) && base >= 0 && base + (length - 1) * stride < data.length, `${what}: a vector of ${length} from ${base} with stride ${stride} runs past ${data.length} values`);
}

export function gramReference(vectors: readonly VectorRef[], length: number, stride: number): Float64Array<ArrayBuffer> {
  checkVectors('gram', vectors, length, stride);
  const n = vectors.length;
  const value = (i: number, k: number) => vectors[i]![0][vectors[i]![1] + k * stride]!;
  const g = new Float64Array(n * n);
  for (let i = 0; i < n; i++)
    for (let j = i; j < n; j++) {
      let total = 0;
      for (let k0 = 0; k0 < length; k0 += BLOCK) {
        let partial = 0;
        for (let k = k0; k < Math.min(k0 + BLOCK, length); k++) partial += value(i, k) * value(j, k);
        total += partial;
      }
      g[i * n + j] = g[j * n + i] = total;
    }
  return g;
}

export function combineReference(vectors: readonly VectorRef[], mix: ArrayLike<number>, outputs: readonly VectorRef[], length: number, stride: number): void {
  const [n, keep] = [vectors.length, outputs.length];
  assert(mix.length === n * keep, `combine: a ${mix.length}-value mix for ${n} vectors and ${keep} outputs`);
  checkVectors('combine', vectors, length, stride);
  checkVectors('combine (outputs)', outputs, length, stride);
  const out = Array.from({ length: keep }, () => new Float64Array(length)); // every output before any write
  for (let j = 0; j < keep; j++)
    for (let k = 0; k < length; k++) {
      let sum = 0;
      for (let i = 0; i < n; i++) sum += mix[i * keep + j]! * vectors[i]![0][vectors[i]![1] + k * stride]!;
      out[j]![k] = sum;
    }
  outputs.forEach(([data, base], j) => out[j]!.forEach((v, k) => (data[base + k * stride] = v)));
}

interface StackedVectorsKernel {
  gram(bases: number, n: number, length: number, stride: number, block: number, sums: number): void;
  combine(bases: number, n: number, keep: number, length: number, stride: number, mix: number, block: number, result: number): void;
}

let kernel: ReturnType<typeof loadCpuKernel<StackedVectorsKernel>> | undefined; // one per thread, its memory reused

const stackedVectorsKernel = () => (kernel ??= loadCpuKernel<StackedVectorsKernel>('stacked_vectors'));

interface Span {
  data: Float32Array;
  start: number; // [start, end) of data
  end: number;
  at: number; // where it lies in the kernel's f32 region
  written: boolean; // holds outputs: copied back
}

/**
 * The spans of the arrays that the vectors cover, merged where they overlap, laid end to end from f32
 * index 0, and each vector's base there. Vectors from `outputsFrom` on are written: their spans are copied back.
 */
function stage(refs: readonly VectorRef[], length: number, stride: number, outputsFrom: number): { spans: Span[]; bases: Int32Array; floats: number } {
  const reach = (length - 1) * stride + 1;
  const byArray = new Map<Float32Array, number[]>();
  refs.forEach(([data], v) => (byArray.get(data) ?? byArray.set(data, []).get(data)!).push(v));
  const spans: Span[] = [];
  const spanOf = new Array<Span>(refs.length);
  let floats = 0;
  for (const [data, members] of byArray) {
    members.sort((x, y) => refs[x]![1] - refs[y]![1]);
    let span: Span | undefined;
    for (const v of members) {
      const base = refs[v]![1];
      if (!span || base >= span.end) {
        if (span) floats += span.end - span.start;
        span = { data, start: base, end: base + reach, at: floats, written: false };
        spans.push(span);
      }
      span.end = Math.max(span.end, base + reach);
      span.written ||= v >= outputsFrom;
      spanOf[v] = span;
    }
    if (span) floats += span.end - span.start;
  }
  return { spans, bases: Int32Array.from(refs, ([, base], v) => spanOf[v]!.at + base - spanOf[v]!.start), floats };
}

export function gram(vectors: readonly VectorRef[], length: number, stride: number): Float64Array<ArrayBuffer> {
  checkVectors('gram', vectors, length, stride);
  const k = stackedVectorsKernel();
  const n = vectors.length;
  const width = padded4(n);
  const { spans, bases, floats } = stage(vectors, length, stride, n);
  const [dataAt, basesAt, blockAt, sumsAt] = reserve(k.memory, [floats * 4, n * 4, BLOCK * width * 8, width * width * 8]) as [number, number, number, number];
  const data = new Float32Array(k.memory.buffer, dataAt, floats);
  for (const s of spans) data.set(s.data.subarray(s.start, s.end), s.at);
  new Int32Array(k.memory.buffer, basesAt, n).set(bases);
  const sums = new Float64Array(k.memory.buffer, sumsAt, width * width).fill(0);
  k.gram(basesAt, n, length, stride, blockAt, sumsAt);
  const g = new Float64Array(n * n);
  for (let i = 0; i < n; i++) for (let j = i; j < n; j++) g[i * n + j] = g[j * n + i] = sums[i * width + j]!;
  return g;
}

/** True when two vectors of the same array share an element (both step by `stride`). */
const alias = ([data1, base1]: VectorRef, [data2, base2]: VectorRef, length: number, stride: number) =>
  data1 === data2 && (base1 - base2) % stride === 0 && Math.abs(base1 - base2) < length * stride;

/** The outputs may interleave with the vectors but not share an element with them (the kernel works block by block). */
export function combine(vectors: readonly VectorRef[], mix: ArrayLike<number>, outputs: readonly VectorRef[], length: number, stride: number): void {
  const [n, keep] = [vectors.length, outputs.length];
  assert(mix.length === n * keep, `combine: a ${mix.length}-value mix for ${n} vectors and ${keep} outputs`);
  checkVectors('combine', vectors, length, stride);
  checkVectors('combine (outputs)', outputs, length, stride);
  assert(!outputs.some((o) => vectors.some((v) => alias(o, v, length, stride))), 'combine: an output shares elements with the vectors it is made from');
  const k = stackedVectorsKernel();
  const [width, keepWidth] = [padded4(n), padded4(keep)];
  const { spans, bases, floats } = stage([...vectors, ...outputs], length, stride, n);
  const [dataAt, basesAt, mixAt, blockAt, resultAt] = reserve(k.memory, [floats * 4, (n + keep) * 4, n * keepWidth * 8, BLOCK * width * 8, BLOCK * keepWidth * 8]) as [number, number, number, number, number];
  // The outputs' spans go in too: values between an output's elements come back unchanged.
  const data = new Float32Array(k.memory.buffer, dataAt, floats);
  for (const s of spans) data.set(s.data.subarray(s.start, s.end), s.at);
  new Int32Array(k.memory.buffer, basesAt, n + keep).set(bases);
  const mixPadded = new Float64Array(k.memory.buffer, mixAt, n * keepWidth).fill(0);
  for (let i = 0; i < n; i++) for (let j = 0; j < keep; j++) mixPadded[i * keepWidth + j] = mix[i * keep + j]!;
  k.combine(basesAt, n, keep, length, stride, mixAt, blockAt, resultAt);
  for (const s of spans) if (s.written) s.data.set(data.subarray(s.at, s.at + s.end - s.start), s.start);
}
