// The CPU backend's dense products, most of a forward pass's and a training step's time:
//   matmul:           out[t, n] = f32(Σ_k x[t, k]·w[n, k] + bias[n])     x̂·Wᵀ   x [T, K], w [N, K] -> [T, N]
//   matmulBackward:   out[t, k] = f32(Σ_n dy[t, n]·w[n, k])              dy·W   dy [T, N], w [N, K] -> [T, K]
//   outerProductSum:  out[s·I + i, j] = f32(scale_s·Σ_p u[r_p, i]·v[r_p, j])   weight gradients (backend.ts)
// f32 values, f64 sums from +0 in the reference's order. The *Reference functions are the plain loops; the others
// run kernels/cpu/dense.wasm (SIMD, one output per f64 lane, the same sums in the same order: equal bit for bit).
// The kernel reads weights in place when they live in the CPU arena (uploadWeight puts them there); activations,
// and weights that live elsewhere, are copied into its scratch. Tokens against an f16 weight read a copy of it
// laid out for SIMD without shuffles (rowBlocks, matmulBlocks). The helpers below (stage, padRows, ...) serve
// cpu-lora.ts too.

import { assert, type DenseSums, type Tensor } from './backend.js';
import { cpuArena } from './cpu-arena.js';
import { colsOf, f32Of, i32Of, rowsOf, tensor } from './cpu-tensor.js';
import { ONE_THREAD, type CpuThreads, type KernelCall } from './cpu-threads.js';

/** x [T, K] against w [N, K] (matmul), or dy [T, N] against w [N, K] (matmulBackward). */
export function shapes(what: 'matmul' | 'matmulBackward', a: Tensor, w: Tensor): { T: number; N: number; K: number } {
  const [T, inner] = [rowsOf(a), colsOf(a)];
  const [N, K] = w.shape as [number, number];
  if (what === 'matmul') assert(inner === K, `matmul: x has ${inner} columns but the weight has ${K}`);
  else assert(inner === N, `matmulBackward: dy has ${inner} columns but the weight has ${N} rows`);
  return { T, N, K };
}

export function matmulReference(x: Tensor, w: Tensor, bias?: Tensor): Tensor {
  const { T, N, K } = shapes('matmul', x, w);
  const [xs, ws, b] = [f32Of(x), f32Of(w), bias ? f32Of(bias) : undefined];
  const out = new Float32Array(T * N);
  for (let t = 0; t < T; t++) {
    for (let n = 0; n < N; n++) {
      let sum = 0;
      for (let k = 0; k < K; k++) sum += xs[t * K + k]! * ws[n * K + k]!;
      out[t * N + n] = sum + (b ? b[n]! : 0);
    }
  }
  return tensor(out, [T, N], 'f32');
}

export function matmulBackwardReference(dy: Tensor, w: Tensor): Tensor {
  const { T, N, K } = shapes('matmulBackward', dy, w);
  const [g, ws] = [f32Of(dy), f32Of(w)];
  const out = new Float32Array(T * K);
  const row = new Float64Array(K);
  for (let t = 0; t < T; t++) {
    row.fill(0);
    for (let n = 0; n < N; n++) {
      const gn = g[t * N + n]!;
      for (let k = 0; k < K; k++) row[k] = row[k]! + gn * ws[n * K + k]!;
    }
    out.set(row, t * K);
  }
  return tensor(out, [T, K], 'f32');
}

export function outerProductSumReference(u: Tensor, v: Tensor, order: Tensor, offsets: Tensor, scales?: Tensor): Tensor {
  const [I, J] = [colsOf(u), colsOf(v)];
  assert(rowsOf(u) === rowsOf(v), `outerProductSum: u has ${rowsOf(u)} rows, v ${rowsOf(v)}`);
  const [us, vs, rows, bounds] = [f32Of(u), f32Of(v), i32Of(order), i32Of(offsets)];
  const S = bounds.length - 1;
  const sc = scales ? f32Of(scales) : undefined;
  const out = new Float32Array(S * I * J);
  const acc = new Float64Array(I * J);
  for (let s = 0; s < S; s++) {
    acc.fill(0);
    for (let p = bounds[s]!; p < bounds[s + 1]!; p++) {
      const r = rows[p]!;
      for (let i = 0; i < I; i++) {
        const ui = us[r * I + i]!;
        for (let j = 0; j < J; j++) acc[i * J + j] = acc[i * J + j]! + ui * vs[r * J + j]!;
      }
    }
    const scale = sc ? sc[s]! : 1;
    for (let e = 0; e < I * J; e++) out[s * I * J + e] = scale * acc[e]!;
  }
  return tensor(out, [S * I, J], 'f32');
}

export const roundUp = (n: number, multiple: number) => Math.ceil(n / multiple) * multiple;

/** Scratch regions in one memory of the arena for one op's kernel calls (addresses `at`), valid until its next op. */
export interface Staged {
  memory: number; // which memory of the arena: the kernels run on it
  at: number[];
  /** Region i as `length` f32 values. */
  f32(i: number, length: number): Float32Array;
  f64(i: number, length: number): Float64Array;
  /** Region i holds `values` as f64 (the kernels read activations in f64). */
  putF64(i: number, values: Float32Array): void;
  /** Where the kernel reads weight w: in place in the arena, else copied into region i (sized by weightBytes). */
  weight(i: number, w: Float32Array): number;
}

/**
 * The memory of the arena an op runs in: that of the first of `arrays` the arena holds (the weight it reads: its
 * activations are copied there), else the newest (-1: the arena has none).
 */
export function homeOf(...arrays: Float32Array[]): number {
  const arena = cpuArena();
  for (const a of arrays) {
    const memory = arena.memoryOf(a);
    if (memory !== undefined) return memory;
  }
  return arena.count - 1;
}

/** The scratch a weight takes in memory `memory`: none where it lives there, else a copy. */
export const weightBytes = (w: Float32Array, memory: number) => (cpuArena().addressOf(w, memory) === undefined ? w.length * 4 : 0);

/** Undefined when that memory cannot hold the regions: the caller runs its reference instead. */
export function stage(bytes: readonly number[], memory: number): Staged | undefined {
  const arena = cpuArena();
  const at = memory >= 0 ? arena.scratch(bytes, memory) : undefined;
  if (!at) return undefined;
  const buffer = arena.memory(memory).buffer;
  const f32 = (i: number, length: number) => new Float32Array(buffer, at[i], length);
  return {
    memory,
    at,
    f32,
    f64: (i, length) => new Float64Array(buffer, at[i], length),
    putF64: (i, values) => new Float64Array(buffer, at[i], values.length).set(values),
    weight: (i, w) => arena.addressOf(w, memory) ?? (f32(i, w.length).set(w), at[i]!),
  };
}

/**
 * A row loop of cpu-rows.ts over `rows` rows on threads: `inputs` (whole rows each) copied into the arena, each
 * share's call made by `call` from its rows' addresses (its first row's: inputs, then outputs of `outputWidths` f32
 * a row, then its own scratch of `scratchBytes`), the outputs copied out. Undefined where one thread does the work
 * (too little for more) or the arena cannot hold it: the caller runs the loop over its own arrays.
 */
export function rowsOnThreads(threads: CpuThreads, rows: number, work: number, inputs: readonly (Float32Array | Int32Array)[], outputWidths: readonly number[], scratchBytes: number, call: (at: number[], count: number, memory: number) => KernelCall): Float32Array[] | undefined {
  if (threads.sharesFor(work) < 2) return undefined;
  const s = stage([...inputs.map((a) => a.byteLength), ...outputWidths.map((w) => rows * w * 4), threads.count * scratchBytes], homeOf());
  if (!s) return undefined;
  const buffer = cpuArena().memory(s.memory).buffer;
  inputs.forEach((a, i) => new Uint8Array(buffer, s.at[i], a.byteLength).set(new Uint8Array(a.buffer, a.byteOffset, a.byteLength)));
  const widths = [...inputs.map((a) => a.byteLength / rows), ...outputWidths.map((w) => w * 4)]; // bytes a row
  let share = 0;
  threads.runRanges(rows, 1, work, (first, end) => [call([...widths.map((w, i) => s.at[i]! + first * w), s.at[widths.length]! + share++ * scratchBytes], end - first, s.memory)]);
  return outputWidths.map((w, o) => s.f32(inputs.length + o, rows * w).slice());
}

/** Rows [T, width] into rows [T, padded] (the padding left as it is). */
export function padRows(out: Float32Array, rows: Float32Array, T: number, width: number, padded: number): void {
  if (padded === width) return out.set(rows);
  for (let t = 0; t < T; t++) out.set(rows.subarray(t * width, (t + 1) * width), t * padded);
}

/** Rows [T, padded] into `out` [T, width] (a new array by default). */
export function unpadRows(rows: Float32Array, T: number, width: number, padded: number, out: Float32Array = new Float32Array(T * width)): Float32Array {
  if (padded === width) out.set(rows);
  else for (let t = 0; t < T; t++) out.set(rows.subarray(t * padded, t * padded + width), t * width);
  return out;
}

/** Rows a block of the row-block layout holds. */
const BLOCK_ROWS = 16;
// matmulBlocks streams every token's x (as f64) through each block, where the row-major kernel tiles tokens by 32: it
// runs while x fits this (half a core's L2 here: 73 tokens at d 896, 13 at the 0.5B down projection's 4,864, so
// 8 × 8 decode's too: 1.3x the row-major kernel there, bench/cpu-bandwidth.ts), the row-major kernel past it (long
// prompts, training). x in f32 (matmulBlocksF32) takes twice the tokens: 146 at d 896, 26 at 4,864.
export const MAX_BLOCK_X_BYTES = 512 * 1024;
// The row blocks made in this process, all weights together, at most: they double an f16 weight's memory. 2 GiB
// holds a 0.5B model's (1.84 GiB, its tied LM head included); at 1 GiB, its last 6 layers and its LM head, 46% of a
// token's multiply-adds, took the row-major kernel, half as fast for a lone token.
const MAX_ROW_BLOCK_BYTES = 2 * 2 ** 30;
let rowBlockBytes = 0;

/** Each f16 weight's copy in row blocks, made at its first product (null: over the budget, or the arena is full). */
const rowBlocksOf = new WeakMap<Float32Array, Float32Array | null>();

/** Whether w's row blocks exist (tests: a product went through them). */
export const hasRowBlocks = (w: Tensor): boolean => w.dtype === 'f16' && rowBlocksOf.get(f32Of(w)) != null;

/**
 * w [N, K] as blocks of 16 rows interleaved by k, [⌈N/16⌉][K][16] (rows past N zero), in the arena: matmulBlocks
 * reads a k's values of two rows with one load instead of pairing rows with shuffles (2x as fast for a lone token,
 * 1.3-1.7x for more). Only for f16 weights: they are read-only on this backend (write, adamwInPlace and the
 * evolution operators refuse them), so the copy cannot go stale. It doubles their memory, so it is made at a weight's first product (a model
 * used only through matmulBackward never makes it).
 */
export function rowBlocks(w: Tensor): Float32Array | undefined {
  if (w.dtype !== 'f16') return undefined;
  const ws = f32Of(w);
  let blocks = rowBlocksOf.get(ws);
  if (blocks === undefined) {
    const [N, K] = w.shape as [number, number];
    const bytes = roundUp(N, BLOCK_ROWS) * K * 4;
    blocks = rowBlockBytes + bytes <= MAX_ROW_BLOCK_BYTES ? (cpuArena().f32(bytes / 4) ?? null) : null;
    if (blocks) {
      rowBlockBytes += bytes;
      blocks.fill(0);
      for (let n = 0; n < N; n++) {
        const at = Math.floor(n / BLOCK_ROWS) * K * BLOCK_ROWS + (n % BLOCK_ROWS);
        for (let k = 0; k < K; k++) blocks[at + k * BLOCK_ROWS] = ws[n * K + k]!;
      }
    }
    rowBlocksOf.set(ws, blocks);
  }
  return blocks ?? undefined;
}

/**
 * x [T, K] against an f16 weight through its row blocks, summed in f64 (dense.wasm's matmulBlocks: x staged as f64)
 * or f32 (dense_f32.wasm's matmulBlocksF32, cpu-dense-f32.ts: x as it is); undefined past MAX_BLOCK_X_BYTES or
 * without the blocks.
 */
export function matmulThroughBlocks(xs: Float32Array, w: Tensor, T: number, N: number, K: number, bias: Tensor | undefined, threads: CpuThreads, sums: DenseSums): Tensor | undefined {
  const xBytes = sums === 'f64' ? 8 : 4;
  if (T * K * xBytes > MAX_BLOCK_X_BYTES) return undefined;
  const blocks = rowBlocks(w);
  const nPad = roundUp(N, BLOCK_ROWS);
  const s = blocks && stage([T * K * xBytes, nPad * 4, T * nPad * 4], homeOf(blocks));
  if (!blocks || !s) return undefined;
  if (sums === 'f64') s.putF64(0, xs);
  else s.f32(0, T * K).set(xs);
  const b = s.f32(1, nPad).fill(0);
  if (bias) b.set(f32Of(bias).subarray(0, N));
  const wAt = cpuArena().addressOf(blocks, s.memory)!;
  const [xAt, bAt, outAt] = s.at as [number, number, number];
  threads.runRanges(N, BLOCK_ROWS, T * N * K, (first, end) => [
    sums === 'f64'
      ? { fn: 'matmulBlocks', memory: s.memory, args: [xAt, T, K, wAt, N, bAt, outAt, 0, 1, first, end] }
      : { fn: 'matmulBlocksF32', memory: s.memory, args: [xAt, T, K, wAt, N, bAt, outAt, first, end] },
  ]);
  return tensor(unpadRows(s.f32(2, T * nPad), T, N, nPad), [T, N], 'f32');
}

/** Threads each own whole rows n of w (8 at a time, the kernel's tile). */
export function matmul(x: Tensor, w: Tensor, bias?: Tensor, threads: CpuThreads = ONE_THREAD): Tensor {
  const { T, N, K } = shapes('matmul', x, w);
  const [xs, ws] = [f32Of(x), f32Of(w)];
  const blocked = matmulThroughBlocks(xs, w, T, N, K, bias, threads, 'f64');
  if (blocked) return blocked;
  const nPad = roundUp(N, 8);
  const home = homeOf(ws);
  const s = stage([T * K * 8, weightBytes(ws, home), nPad * 4, T * nPad * 4], home);
  if (!s) return matmulReference(x, w, bias);
  s.putF64(0, xs);
  const b = s.f32(2, nPad).fill(0);
  if (bias) b.set(f32Of(bias).subarray(0, N));
  const wAt = s.weight(1, ws);
  threads.runRanges(N, 8, T * N * K, (first, end) => [{ fn: 'matmul', memory: s.memory, args: [s.at[0]!, T, K, wAt, N, s.at[2]!, s.at[3]!, 0, 1, first, end] }]);
  return tensor(unpadRows(s.f32(3, T * nPad), T, N, nPad), [T, N], 'f32');
}

/** Threads each own whole columns k of w (8 at a time). */
export function matmulBackward(dy: Tensor, w: Tensor, threads: CpuThreads = ONE_THREAD): Tensor {
  const { T, N, K } = shapes('matmulBackward', dy, w);
  const [g, ws] = [f32Of(dy), f32Of(w)];
  const kPad = roundUp(K, 8);
  const home = homeOf(ws);
  const s = stage([T * N * 8, weightBytes(ws, home), T * kPad * 4], home);
  if (!s) return matmulBackwardReference(dy, w);
  s.putF64(0, g);
  const wAt = s.weight(1, ws);
  threads.runRanges(K, 8, T * N * K, (first, end) => [{ fn: 'matmulBackward', memory: s.memory, args: [s.at[0]!, T, N, wAt, K, s.at[2]!, 0, 1, first, end] }]);
  return tensor(unpadRows(s.f32(2, T * kPad), T, K, kPad), [T, K], 'f32');
}

/** Every segment staged first, then threads each own a range of every segment's rows i. */
export function outerProductSum(u: Tensor, v: Tensor, order: Tensor, offsets: Tensor, scales?: Tensor, threads: CpuThreads = ONE_THREAD): Tensor {
  const [I, J] = [colsOf(u), colsOf(v)];
  assert(rowsOf(u) === rowsOf(v), `outerProductSum: u has ${rowsOf(u)} rows, v ${rowsOf(v)}`);
  const [us, vs, rows, bounds] = [f32Of(u), f32Of(v), i32Of(order), i32Of(offsets)];
  const S = bounds.length - 1;
  const sc = scales ? f32Of(scales) : undefined;
  const jPad = roundUp(J, 8);
  const counts = Array.from({ length: S }, (_, seg) => bounds[seg + 1]! - bounds[seg]!);
  const P = counts.reduce((a, b) => a + b, 0);
  const s = stage([I * P * 8, P * J * 4, S * I * jPad * 4], homeOf());
  if (!s) return outerProductSumReference(u, v, order, offsets, scales);
  // As matmulBackward, a segment at a time: g = the segment's rows of u, transposed [I, count]; w = its rows of v
  // [count, J]; out [I, jPad]. Segment seg's g starts at I·before, its w at J·before (before: the rows ahead of it).
  const before = counts.map((_, seg) => counts.slice(0, seg).reduce((a, b) => a + b, 0));
  const [uT, vRows] = [s.f64(0, I * P), s.f32(1, P * J)];
  for (let seg = 0; seg < S; seg++) {
    const [first, count, at] = [bounds[seg]!, counts[seg]!, before[seg]!];
    for (let p = 0; p < count; p++) {
      const r = rows[first + p]!;
      assert(r >= 0 && r < rowsOf(u), `outerProductSum: row ${r} outside [0, ${rowsOf(u)})`);
      for (let i = 0; i < I; i++) uT[I * at + i * count + p] = us[r * I + i]!;
      vRows.set(vs.subarray(r * J, (r + 1) * J), (at + p) * J);
    }
  }
  const [gAt, wAt, outAt] = s.at as [number, number, number];
  threads.runRanges(I, 1, I * P * J, (i0, i1) =>
    counts.map((count, seg) => ({ fn: 'matmulBackward', memory: s.memory, args: [gAt + (I * before[seg]! + i0 * count) * 8, i1 - i0, count, wAt + before[seg]! * J * 4, J, outAt + (seg * I + i0) * jPad * 4, 0, sc ? sc[seg]! : 1, 0, J] })),
  );
  return tensor(unpadRows(s.f32(2, S * I * jPad), S * I, J, jPad), [S * I, J], 'f32');
}
