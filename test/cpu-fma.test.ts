// kernels/cpu/dense_fma.wasm (dense.wat with its multiply-adds fused, kernels/cpu/build.mjs) against the plain
// dense.wasm, bit for bit: matmul, matmulBlocks and matmulBackward over ragged shapes, every output range cut as
// 1 to 4 threads cut it, accumulating or not, with f32 subnormals, -0 and sums that cancel. Every product there is
// of two f32 values, exact in f64, so fusing it changes no bit; with activations that are not f32 values the two
// builds differ, which shows that the fused build really fuses (V8 emits vfmadd where the CPU has FMA3) and that
// this comparison would see it. The other CPU tests (cpu-simd, cpu-threads) run the fused build, the default.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cpuKernelBuild, cpuKernelModule } from '../src/backend/kernel-files.js';
import { hugeEnds, random, sameEndColumns, sameEndRows } from './cpu-inputs.js';

type Dense = Record<'matmul' | 'matmulBlocks' | 'matmulBackward', (...args: number[]) => void>;

const memory = new WebAssembly.Memory({ initial: 64, maximum: 1024, shared: true });
const instance = (build: string) => new WebAssembly.Instance(cpuKernelModule(build), { env: { memory } }).exports as unknown as Dense;
const builds = () => ({ plain: instance('dense'), fused: instance(cpuKernelBuild('dense')) });
/** Whether the CPU has FMA3 (Linux's flags; elsewhere the check below is skipped). */
const hasFma = (() => {
  try {
    return /\bfma\b/.test(readFileSync('/proc/cpuinfo', 'utf8'));
  } catch {
    return false;
  }
})();
const roundUp = (n: number, to: number) => Math.ceil(n / to) * to;

/** Regions laid end to end in `memory` from byte 0, 16-byte aligned, each with 32 bytes of slack (the kernels read past a row's end). */
function layout(bytes: number[]): number[] {
  let end = 0;
  return bytes.map((size) => {
    const at = end;
    end += roundUp(size + 32, 16);
    if (end > memory.buffer.byteLength) memory.grow(Math.ceil((end - memory.buffer.byteLength) / 65536));
    return at;
  });
}
const f64At = (at: number, values: ArrayLike<number>) => new Float64Array(memory.buffer, at, values.length).set(values);
const f32At = (at: number, values: ArrayLike<number>) => new Float32Array(memory.buffer, at, values.length).set(values);
const bitsAt = (at: number, length: number) => Array.from(new Uint32Array(memory.buffer, at, length));

/** Output ranges of [0, total) in multiples of `unit` (the last ending at total), as `threads` threads cut them. */
function ranges(total: number, unit: number, threads: number): [number, number][] {
  const units = Math.ceil(total / unit);
  return Array.from({ length: threads }, (_, i): [number, number] => [Math.min(total, Math.floor((units * i) / threads) * unit), Math.min(total, Math.floor((units * (i + 1)) / threads) * unit)]).filter(([a, b]) => a < b);
}

/** Activations: f32 values (the CPU backend stages f32 tensors as f64) with f32 subnormals and -0, the sums cancelling in most rows. */
function activations(r: ReturnType<typeof random>, rows: number, cols: number, trial: number): Float32Array {
  const a = r.floats(rows * cols);
  if (trial % 3 !== 0) hugeEnds(a, cols);
  if (trial % 4 === 1) [a[0], a[a.length >> 1], a[a.length - 1]] = [2 ** -140, -0, -(2 ** -149)];
  return a;
}
function weights(r: ReturnType<typeof random>, N: number, K: number, trial: number): Float32Array {
  const w = r.floats(N * K, 8);
  if (trial % 4 === 1) [w[0], w[w.length >> 1], w[w.length - 1]] = [2 ** -130, -0, -(2 ** -126)];
  return trial % 3 !== 0 ? sameEndRows(sameEndColumns(w, K), N, K) : w;
}

/** w [N, K] as matmulBlocks reads it: [⌈N/16⌉][K][16] (src/backend/cpu-dense.ts rowBlocks), rows past N zero. */
function rowBlocks(w: Float32Array, N: number, K: number): Float32Array {
  const blocks = new Float32Array(roundUp(N, 16) * K);
  for (let n = 0; n < N; n++) for (let k = 0; k < K; k++) blocks[Math.floor(n / 16) * 16 * K + k * 16 + (n % 16)] = w[n * K + k]!;
  return blocks;
}

/** Runs `call` for each build over each thread count's ranges, from the same starting output; every result's bits. */
function outputsOf(dense: Dense[], outAt: number, outLength: number, start: Float32Array, total: number, unit: number, call: (d: Dense, first: number, end: number) => void) {
  const results: number[][] = [];
  for (const d of dense)
    for (let threads = 1; threads <= 4; threads++) {
      f32At(outAt, start);
      for (const [first, end] of ranges(total, unit, threads)) call(d, first, end);
      results.push(bitsAt(outAt, outLength));
    }
  return results;
}

describe('dense_fma.wasm (multiply-adds fused) equals dense.wasm bit for bit', () => {
  it('is the build the CPU backend runs here (Node 20 with the relaxed SIMD flag it sets, or Node 22)', () => {
    expect(cpuKernelBuild('dense')).toBe(process.env.POPULORA_CPU_FMA === '0' ? 'dense' : 'dense_fma');
    expect(cpuKernelBuild('attention')).toBe('attention'); // attention sums exp(·)·v, not products of f32 values: never fused
  });

  it('matmul, matmulBlocks and matmulBackward over ragged shapes, cut for 1 to 4 threads, accumulating or not', () => {
    const { plain, fused } = builds();
    const r = random('fma');
    for (let trial = 0; trial < 40; trial++) {
      const [T, K, N] = [r.pick([1, 2, 3, 5, 9]), r.pick([1, 3, 4, 7, 17, 33, 64]), r.pick([1, 7, 8, 9, 15, 16, 17, 33, 48])];
      const [accumulate, scale] = [trial % 2, r.pick([1, 0.125, -3])];
      const what = `T ${T}, K ${K}, N ${N}, accumulate ${accumulate}, scale ${scale}`;
      const [x, w, g, bias] = [activations(r, T, K, trial), weights(r, N, K, trial), activations(r, T, N, trial + 1), r.floats(N)];

      const nPad = roundUp(N, 8);
      const [xAt, wAt, biasAt, outAt] = layout([T * K * 8, N * K * 4, nPad * 4, T * nPad * 4]);
      [f64At(xAt!, x), f32At(wAt!, w), f32At(biasAt!, [...bias, ...new Array(nPad - N).fill(0)])];
      const matmul = outputsOf([plain, fused], outAt!, T * nPad, r.floats(T * nPad), N, 8, (d, first, end) => d.matmul(xAt!, T, K, wAt!, N, biasAt!, outAt!, accumulate, scale, first, end));
      for (const result of matmul.slice(1)) expect(result, `matmul, ${what}`).toEqual(matmul[0]);

      const nPad16 = roundUp(N, 16);
      const [xbAt, blocksAt, bias16At, out16At] = layout([T * K * 8, nPad16 * K * 4, nPad16 * 4, T * nPad16 * 4]);
      [f64At(xbAt!, x), f32At(blocksAt!, rowBlocks(w, N, K)), f32At(bias16At!, [...bias, ...new Array(nPad16 - N).fill(0)])];
      const blocks = outputsOf([plain, fused], out16At!, T * nPad16, r.floats(T * nPad16), N, 16, (d, first, end) => d.matmulBlocks(xbAt!, T, K, blocksAt!, N, bias16At!, out16At!, accumulate, scale, first, end));
      for (const result of blocks.slice(1)) expect(result, `matmulBlocks, ${what}`).toEqual(blocks[0]);

      const kPad = roundUp(K, 8);
      const [gAt, wbAt, outKAt] = layout([T * N * 8, N * K * 4, T * kPad * 4]);
      [f64At(gAt!, g), f32At(wbAt!, w)];
      const backward = outputsOf([plain, fused], outKAt!, T * kPad, r.floats(T * kPad), K, 8, (d, first, end) => d.matmulBackward(gAt!, T, N, wbAt!, K, outKAt!, accumulate, scale, first, end));
      for (const result of backward.slice(1)) expect(result, `matmulBackward, ${what}`).toEqual(backward[0]);
    }
  });

  // On a CPU with FMA3 (every x64 of this project's machines; V8 falls back to a multiplication and an addition without it)
  it.runIf(hasFma)(
    'differs where a product is not exact in f64 (activations that are not f32 values): the fused build does fuse',
    () => {
      const { plain, fused } = builds();
      // Σ_k x[k]·w[k] over k = 0, 1 with x = ±(1 + 2^-40) (an f64, not an f32) and w = 1 + 2^-20: each product is
      // 1 + 2^-20 + 2^-40 + 2^-60, whose last term f64 drops. Unfused: +p - p = 0. Fused: the second product enters
      // exact, so the sum is -2^-60, an f32 too.
      const [T, K, N] = [1, 2, 16];
      const x = [1 + 2 ** -40, -(1 + 2 ** -40)];
      const w = Float32Array.from({ length: N * K }, () => 1 + 2 ** -20);
      const [xAt, blocksAt, biasAt, outAt] = layout([T * K * 8, N * K * 4, N * 4, T * N * 4]);
      [f64At(xAt!, x), f32At(blocksAt!, rowBlocks(w, N, K)), f32At(biasAt!, new Float32Array(N))];
      const [withPlain, withFused] = [plain, fused].map((d) => (d.matmulBlocks(xAt!, T, K, blocksAt!, N, biasAt!, outAt!, 0, 1, 0, N), Array.from(new Float32Array(memory.buffer, outAt!, N))));
      expect(withPlain).toEqual(new Array(N).fill(0));
      expect(withFused).toEqual(new Array(N).fill(-(2 ** -60)));
    },
  );
});
