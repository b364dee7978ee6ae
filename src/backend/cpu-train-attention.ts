// The CPU backend's training attention (causal over packed sequences, GQA) and its backward: the fast path of
// attentionPackedReference and attentionBackwardReference (cpu-backward.ts), run by kernels/cpu/train_attention.wasm.
// Profiled at the quick start's shape, those plain loops were a third of a LoRA training step on the CPU. The kernel
// computes the same sums in the same order (f64, d and j ascending from +0, Math.max's max, JavaScript's Math.exp
// imported), so the results are equal bit for bit (test/cpu-simd.test.ts). Its operands are copied into the arena's
// scratch, one call per op; heads that kv heads do not divide, or an arena that cannot hold them, take the reference.

import type { Tensor } from './backend.js';
import { attentionBackwardReference, attentionOperands, attentionPackedReference } from './cpu-backward.js';
import { cpuArena } from './cpu-arena.js';
import { homeOf, roundUp, stage } from './cpu-dense.js';
import { f32Of, tensor } from './cpu-tensor.js';
import { ONE_THREAD, type CpuThreads } from './cpu-threads.js';

/** Work of each token (its keys times its heads' dimensions): what the shares balance. */
function tokenWork(pos: Int32Array, heads: number, hd: number): number[] {
  return Array.from(pos, (p) => (p + 1) * heads * hd);
}

/**
 * The shares of [0, T) for `threads`: contiguous token ranges of nearly equal work, each starting at a token of
 * `cuts` (where a share may begin), as many as the work pays for.
 */
function tokenShares(threads: CpuThreads, work: readonly number[], cuts: readonly number[]): Array<[number, number]> {
  const before = [0]; // before[t]: the work of the tokens ahead of t
  for (const w of work) before.push(before[before.length - 1]! + w);
  const total = before[work.length]!;
  const parts = threads.sharesFor(total);
  const starts = [0];
  for (let i = 1; i < parts; i++) {
    const cut = cuts.find((c) => c > starts[starts.length - 1]! && before[c]! >= (total * i) / parts);
    if (cut === undefined) break;
    starts.push(cut);
  }
  return starts.map((start, i) => [start, starts[i + 1] ?? work.length]);
}

export function attentionPacked(q: Tensor, k: Tensor, v: Tensor, positions: Tensor, heads: number, kvHeads: number, threads: CpuThreads = ONE_THREAD): Tensor {
  const { qs, ks, vs, pos, headDim: hd } = attentionOperands(q, k, v, positions, heads, kvHeads);
  const T = pos.length;
  const shares = tokenShares(threads, tokenWork(pos, heads, hd), Array.from({ length: T }, (_, t) => t));
  // [q | k | v | pos | out | per share: p f64 [T] and acc f64 [hd]]
  const scratch = T * 8 + hd * 8 + 32;
  const s = heads % kvHeads === 0 ? stage([qs.length * 4, ks.length * 4, vs.length * 4, T * 4, qs.length * 4, shares.length * scratch], homeOf()) : undefined;
  if (!s) return attentionPackedReference(q, k, v, positions, heads, kvHeads);
  [qs, ks, vs].forEach((values, i) => s.f32(i, values.length).set(values));
  new Int32Array(cpuArena().memory(s.memory).buffer, s.at[3], T).set(pos);
  const [qAt, kAt, vAt, posAt, outAt, scratchAt] = s.at as [number, number, number, number, number, number];
  const [qRow, kvRow] = [heads * hd * 4, kvHeads * hd * 4];
  // A share's token t0 reads its keys from row t0 - pos[t0] on: k's and v's addresses move with q's, the kernel's
  // row arithmetic (t - pos[t]) is relative to them.
  threads.run(shares.map(([t0, t1], i) => {
    const p = scratchAt + i * scratch;
    return [{ fn: 'attentionForward', memory: s.memory, args: [qAt + t0 * qRow, kAt + t0 * kvRow, vAt + t0 * kvRow, posAt + t0 * 4, t1 - t0, heads, heads / kvHeads, kvHeads, hd, p, p + roundUp(T * 8, 16), outAt + t0 * qRow, 1 / Math.sqrt(hd)] }];
  }));
  return tensor(s.f32(4, qs.length).slice(), [T, heads * hd], 'f32');
}

/**
 * Tokens where a share of the backward may begin: no later token reads a key before it (t - pos[t] >= the cut for
 * every t after it), so the shares' dk and dv rows, which each sums over its own tokens, do not overlap.
 */
function backwardCuts(pos: Int32Array): number[] {
  const cuts: number[] = [];
  let reach = Infinity; // min over t >= c of t - pos[t]
  for (let t = pos.length - 1; t >= 0; t--) {
    reach = Math.min(reach, t - pos[t]!);
    if (reach >= t) cuts.push(t);
  }
  return cuts.reverse();
}

export function attentionBackward(dOut: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, positions: Tensor, seqEnds: Tensor, heads: number, kvHeads: number, threads: CpuThreads = ONE_THREAD): [Tensor, Tensor, Tensor] {
  const { qs, ks, vs, pos, headDim: hd } = attentionOperands(q, k, v, positions, heads, kvHeads, seqEnds);
  const [g, os] = [f32Of(dOut), f32Of(out)];
  const T = pos.length;
  const shares = tokenShares(threads, tokenWork(pos, heads, 2 * hd), backwardCuts(pos));
  // [g | o | q | k | v | pos | dq | dk: f64 | dv: f64 | per share: p f64 [T] and acc f64 [hd]]
  const scratch = T * 8 + hd * 8 + 32;
  const s = heads % kvHeads === 0 ? stage([g.length * 4, os.length * 4, qs.length * 4, ks.length * 4, vs.length * 4, T * 4, qs.length * 4, ks.length * 8, vs.length * 8, shares.length * scratch], homeOf()) : undefined;
  if (!s) return attentionBackwardReference(dOut, q, k, v, out, positions, seqEnds, heads, kvHeads);
  [g, os, qs, ks, vs].forEach((values, i) => s.f32(i, values.length).set(values));
  new Int32Array(cpuArena().memory(s.memory).buffer, s.at[5], T).set(pos);
  const [dk, dv] = [s.f64(7, ks.length).fill(0), s.f64(8, vs.length).fill(0)];
  const [gAt, oAt, qAt, kAt, vAt, posAt, dqAt, dkAt, dvAt, scratchAt] = s.at as [number, number, number, number, number, number, number, number, number, number];
  const [qRow, kvRow] = [heads * hd * 4, kvHeads * hd * 4];
  threads.run(shares.map(([t0, t1], i) => {
    const p = scratchAt + i * scratch;
    return [{ fn: 'attentionBackward', memory: s.memory, args: [gAt + t0 * qRow, oAt + t0 * qRow, qAt + t0 * qRow, kAt + t0 * kvRow, vAt + t0 * kvRow, posAt + t0 * 4, t1 - t0, heads, heads / kvHeads, kvHeads, hd, p, p + roundUp(T * 8, 16), dqAt + t0 * qRow, dkAt + t0 * kvRow * 2, dvAt + t0 * kvRow * 2, 1 / Math.sqrt(hd)] }];
  }));
  return [tensor(s.f32(6, qs.length).slice(), q.shape, 'f32'), tensor(new Float32Array(dk), k.shape, 'f32'), tensor(new Float32Array(dv), v.shape, 'f32')];
}
