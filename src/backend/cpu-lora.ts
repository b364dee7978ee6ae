// The LoRA products of the CPU backend, per token through its adapter's slot (a negative slot: no adapter):
//   shrink:          h[t, j] = Σ_k x[t, k]·A[slot·R + j, k]                 x [T, K], A [S·R, K] -> h [T, R]
//   expand:          y[t, n] += scale_slot·Σ_j h[t, j]·B[slot·N + n, j]     B [S·N, R], onto y [T, N]
//   expandBackward:  dh[t, j] = scale_slot·Σ_n dy[t, n]·B[slot·N + n, j]
//   shrinkBackward:  dx[t, k] += Σ_j dh[t, j]·A[slot·R + j, k]
// f64 sums from +0 in the reference's order, f32 results. The *Reference functions are the plain loops; the
// others run kernels/cpu/dense.wasm once per run of consecutive tokens with the same slot (matmul for the first
// two, matmulBackward for the others), equal bit for bit. The banks live in the CPU arena (uploadPacked puts them
// there through uploadWeight) and are read in place.

import type { Tensor } from './backend.js';
import { homeOf, padRows, roundUp, stage, unpadRows, weightBytes } from './cpu-dense.js';
import { ONE_THREAD, type CpuThreads, type KernelCall } from './cpu-threads.js';
import { colsOf, concatColumns, f32Of, i32Of, rowsOf, tensor } from './cpu-tensor.js';

export function loraShrinkReference(x: Tensor, a: Tensor, adapters: Tensor, rank: number): Tensor {
  const [T, K] = [rowsOf(x), colsOf(x)];
  const [xs, as, ids] = [f32Of(x), f32Of(a), i32Of(adapters)];
  const out = new Float32Array(T * rank);
  for (let t = 0; t < T; t++) {
    const slot = ids[t]!;
    if (slot < 0) continue;
    for (let j = 0; j < rank; j++) {
      let sum = 0;
      const row = (slot * rank + j) * K;
      for (let k = 0; k < K; k++) sum += xs[t * K + k]! * as[row + k]!;
      out[t * rank + j] = sum;
    }
  }
  return tensor(out, [T, rank], 'f32');
}

export function loraExpandReference(y: Tensor, h: Tensor, b: Tensor, adapters: Tensor, scales: Tensor): void {
  const [T, N] = [rowsOf(y), colsOf(y)];
  const rank = colsOf(h);
  const [ys, hs, bs, ids, sc] = [f32Of(y), f32Of(h), f32Of(b), i32Of(adapters), f32Of(scales)];
  for (let t = 0; t < T; t++) {
    const slot = ids[t]!;
    if (slot < 0) continue;
    for (let n = 0; n < N; n++) {
      let sum = 0;
      const row = (slot * N + n) * rank;
      for (let j = 0; j < rank; j++) sum += hs[t * rank + j]! * bs[row + j]!;
      ys[t * N + n] = ys[t * N + n]! + sc[slot]! * sum;
    }
  }
}

export function loraExpandBackwardReference(dy: Tensor, b: Tensor, adapters: Tensor, scales: Tensor, rank: number): Tensor {
  const [T, N] = [rowsOf(dy), colsOf(dy)];
  const [g, bs, ids, sc] = [f32Of(dy), f32Of(b), i32Of(adapters), f32Of(scales)];
  const out = new Float32Array(T * rank);
  for (let t = 0; t < T; t++) {
    const slot = ids[t]!;
    if (slot < 0) continue;
    for (let j = 0; j < rank; j++) {
      let sum = 0;
      for (let n = 0; n < N; n++) sum += g[t * N + n]! * bs[(slot * N + n) * rank + j]!;
      out[t * rank + j] = sc[slot]! * sum;
    }
  }
  return tensor(out, [T, rank], 'f32');
}

export function loraShrinkBackwardReference(dx: Tensor, dh: Tensor, a: Tensor, adapters: Tensor): void {
  const [T, K] = [rowsOf(dx), colsOf(dx)];
  const rank = colsOf(dh);
  const [out, hs, as, ids] = [f32Of(dx), f32Of(dh), f32Of(a), i32Of(adapters)];
  for (let t = 0; t < T; t++) {
    const slot = ids[t]!;
    if (slot < 0) continue;
    for (let k = 0; k < K; k++) {
      let sum = 0;
      for (let j = 0; j < rank; j++) sum += hs[t * rank + j]! * as[(slot * rank + j) * K + k]!;
      out[t * K + k] = out[t * K + k]! + sum;
    }
  }
}


/**
 * Runs of consecutive tokens with the same adapter slot (slots < 0 left out); undefined when a slot lies past the
 * bank's `slots`: the reference then runs (it reads such a slot's rows as NaN; the WGSL kernels skip the row).
 */
function runsOf(adapters: Tensor, slots: number): Run[] | undefined {
  const ids = i32Of(adapters);
  const runs: Run[] = [];
  for (let t = 0; t < ids.length; t++) {
    const slot = ids[t]!;
    if (slot < 0) continue;
    if (slot >= slots) return undefined;
    const last = runs[runs.length - 1];
    if (last && last.slot === slot && last.first + last.count === t) last.count++;
    else runs.push({ slot, first: t, count: 1 });
  }
  return runs;
}

type Run = { slot: number; first: number; count: number };

/**
 * The runs' tokens cut into one contiguous range a thread (as many as `work` pays for), each thread's runs clipped
 * to its range: `calls` makes a thread's kernel calls from its runs. Every token's outputs are one thread's.
 */
function runByTokens(threads: CpuThreads, runs: readonly Run[], T: number, work: number, calls: (runs: Run[]) => KernelCall[]): void {
  threads.runRanges(T, 1, work, (a, b) =>
    calls(runs.flatMap(({ slot, first, count }) => {
      const [from, to] = [Math.max(first, a), Math.min(first + count, b)];
      return to > from ? [{ slot, first: from, count: to - from }] : [];
    })),
  );
}

export function loraShrink(x: Tensor, a: Tensor, adapters: Tensor, rank: number, threads: CpuThreads = ONE_THREAD): Tensor {
  return loraShrinkParts(x, [a], adapters, rank, threads);
}

/**
 * loraShrink of each of `parts` (A factors [S·R, K] sharing the input x) side by side, [T, parts·R]: the shrinks
 * of a fused linear's modules with x staged once, one output, no copies between (a decode step at batch 1 makes
 * 28 of these calls: their staging, not their sums, was most of their time).
 */
export function loraShrinkParts(x: Tensor, parts: readonly Tensor[], adapters: Tensor, rank: number, threads: CpuThreads = ONE_THREAD): Tensor {
  const [T, K, P] = [rowsOf(x), colsOf(x), parts.length];
  const xs = f32Of(x);
  const runs = runsOf(adapters, Math.min(...parts.map((a) => rowsOf(a) / rank)));
  const rPad = roundUp(rank, 8);
  const weights = parts.map((a) => f32Of(a));
  const home = homeOf(...weights);
  const s = runs && stage([T * K * 8, rPad * 4, P * T * rPad * 4, ...weights.map((w) => weightBytes(w, home))], home);
  if (!runs || !s) return concatColumns(parts.map((a) => loraShrinkReference(x, a, adapters, rank)));
  s.putF64(0, xs);
  s.f32(1, rPad).fill(0);
  const sums = s.f32(2, P * T * rPad).fill(0); // part p's rows [T, rPad] at p·T·rPad
  const aAt = weights.map((as, p) => s.weight(3 + p, as));
  runByTokens(threads, runs, T, T * P * rank * K, (mine) =>
    aAt.flatMap((at, p) => mine.map(({ slot, first, count }): KernelCall => ({ fn: 'matmul', memory: s.memory, args: [s.at[0]! + first * K * 8, count, K, at + slot * rank * K * 4, rank, s.at[1]!, s.at[2]! + (p * T + first) * rPad * 4, 0, 1, 0, rank] }))),
  );
  const out = new Float32Array(T * P * rank);
  for (let p = 0; p < P; p++) for (let t = 0; t < T; t++) out.set(sums.subarray((p * T + t) * rPad, (p * T + t) * rPad + rank), (t * P + p) * rank);
  return tensor(out, [T, P * rank], 'f32');
}

export function loraExpand(y: Tensor, h: Tensor, b: Tensor, adapters: Tensor, scales: Tensor, threads: CpuThreads = ONE_THREAD): void {
  const [T, N] = [rowsOf(y), colsOf(y)];
  const rank = colsOf(h);
  const [ys, hs, bs, sc] = [f32Of(y), f32Of(h), f32Of(b), f32Of(scales)];
  const runs = runsOf(adapters, rowsOf(b) / N);
  const nPad = roundUp(N, 8);
  const home = homeOf(bs);
  const s = runs && stage([T * rank * 8, weightBytes(bs, home), nPad * 4, T * nPad * 4], home);
  if (!runs || !s) return loraExpandReference(y, h, b, adapters, scales);
  s.putF64(0, hs);
  s.f32(2, nPad).fill(0);
  const out = s.f32(3, T * nPad);
  padRows(out, ys, T, N, nPad);
  const bAt = s.weight(1, bs);
  runByTokens(threads, runs, T, T * N * rank, (mine) => mine.map(({ slot, first, count }) => ({ fn: 'matmul', memory: s.memory, args: [s.at[0]! + first * rank * 8, count, rank, bAt + slot * N * rank * 4, N, s.at[2]!, s.at[3]! + first * nPad * 4, 1, sc[slot]!, 0, N] })));
  unpadRows(out, T, N, nPad, ys);
}

export function loraExpandBackward(dy: Tensor, b: Tensor, adapters: Tensor, scales: Tensor, rank: number, threads: CpuThreads = ONE_THREAD): Tensor {
  const [T, N] = [rowsOf(dy), colsOf(dy)];
  const [g, bs, sc] = [f32Of(dy), f32Of(b), f32Of(scales)];
  const runs = runsOf(adapters, rowsOf(b) / N);
  const rPad = roundUp(rank, 8);
  const home = homeOf(bs);
  const s = runs && stage([T * N * 8, weightBytes(bs, home), T * rPad * 4], home);
  if (!runs || !s) return loraExpandBackwardReference(dy, b, adapters, scales, rank);
  s.putF64(0, g);
  s.f32(2, T * rPad).fill(0);
  const bAt = s.weight(1, bs);
  runByTokens(threads, runs, T, T * N * rank, (mine) => mine.map(({ slot, first, count }) => ({ fn: 'matmulBackward', memory: s.memory, args: [s.at[0]! + first * N * 8, count, N, bAt + slot * N * rank * 4, rank, s.at[2]! + first * rPad * 4, 0, sc[slot]!, 0, rank] })));
  return tensor(unpadRows(s.f32(2, T * rPad), T, rank, rPad), [T, rank], 'f32');
}

export function loraShrinkBackward(dx: Tensor, dh: Tensor, a: Tensor, adapters: Tensor, threads: CpuThreads = ONE_THREAD): void {
  const [T, K] = [rowsOf(dx), colsOf(dx)];
  const rank = colsOf(dh);
  const [dxs, hs, as] = [f32Of(dx), f32Of(dh), f32Of(a)];
  const runs = runsOf(adapters, rowsOf(a) / rank);
  const kPad = roundUp(K, 8);
  const home = homeOf(as);
  const s = runs && stage([T * rank * 8, weightBytes(as, home), T * kPad * 4], home);
  if (!runs || !s) return loraShrinkBackwardReference(dx, dh, a, adapters);
  s.putF64(0, hs);
  const out = s.f32(2, T * kPad);
  padRows(out, dxs, T, K, kPad);
  const aAt = s.weight(1, as);
  runByTokens(threads, runs, T, T * rank * K, (mine) => mine.map(({ slot, first, count }) => ({ fn: 'matmulBackward', memory: s.memory, args: [s.at[0]! + first * rank * 8, count, rank, aAt + slot * rank * K * 4, K, s.at[2]! + first * kPad * 4, 1, 1, 0, K] })));
  unpadRows(out, T, K, kPad, dxs);
}
