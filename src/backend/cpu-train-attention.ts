// The CPU backend's training attention (causal over packed sequences, GQA) and its backward: the fast path of
// attentionPackedReference and attentionBackwardReference (cpu-backward.ts), run by kernels/cpu/train_attention.wasm.
// Profiled at the quick start's shape, those plain loops were a third of a LoRA training step on the CPU. The kernel
// computes the same sums in the same order (f64, d and j ascending from +0, Math.max's max, JavaScript's Math.exp
// imported), so the results are equal bit for bit (test/cpu-simd.test.ts). Its operands are copied into the arena's
// scratch, one call per op; heads that kv heads do not divide, or an arena that cannot hold them, take the reference.

import type { Tensor } from './backend.js';
import { attentionBackwardReference, attentionOperands, attentionPackedReference } from './cpu-backward.js';
import { cpuArena } from './cpu-arena.js';
import { stage } from './cpu-dense.js';
import { f32Of, tensor } from './cpu-tensor.js';
import { loadCpuKernel } from './kernel-files.js';

interface TrainAttentionKernel {
  forward(q: number, k: number, v: number, pos: number, T: number, heads: number, group: number, kvHeads: number, hd: number, p: number, acc: number, out: number, scale: number): void;
  backward(g: number, o: number, q: number, k: number, v: number, pos: number, T: number, heads: number, group: number, kvHeads: number, hd: number, p: number, acc: number, dq: number, dk: number, dv: number, scale: number): void;
}

let kernel: TrainAttentionKernel | undefined; // one per thread, on the thread's arena (loaded after stage() found it)
const trainAttentionKernel = () => (kernel ??= loadCpuKernel<TrainAttentionKernel>('train_attention', { memory: cpuArena().memory!, exp: Math.exp }));

export function attentionPacked(q: Tensor, k: Tensor, v: Tensor, positions: Tensor, heads: number, kvHeads: number): Tensor {
  const { qs, ks, vs, pos, headDim: hd } = attentionOperands(q, k, v, positions, heads, kvHeads);
  const T = pos.length;
  // [q | k | v | pos | p: f64 [T] | acc: f64 [hd] | out]
  const s = heads % kvHeads === 0 ? stage([qs.length * 4, ks.length * 4, vs.length * 4, T * 4, T * 8, hd * 8, qs.length * 4]) : undefined;
  if (!s) return attentionPackedReference(q, k, v, positions, heads, kvHeads);
  [qs, ks, vs].forEach((values, i) => s.f32(i, values.length).set(values));
  new Int32Array(cpuArena().memory!.buffer, s.at[3], T).set(pos);
  const at = s.at;
  trainAttentionKernel().forward(at[0]!, at[1]!, at[2]!, at[3]!, T, heads, heads / kvHeads, kvHeads, hd, at[4]!, at[5]!, at[6]!, 1 / Math.sqrt(hd));
  return tensor(s.f32(6, qs.length).slice(), [T, heads * hd], 'f32');
}

export function attentionBackward(dOut: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, positions: Tensor, seqEnds: Tensor, heads: number, kvHeads: number): [Tensor, Tensor, Tensor] {
  const { qs, ks, vs, pos, headDim: hd } = attentionOperands(q, k, v, positions, heads, kvHeads, seqEnds);
  const [g, os] = [f32Of(dOut), f32Of(out)];
  const T = pos.length;
  // [g | o | q | k | v | pos | p: f64 [T] | acc: f64 [hd] | dq | dk: f64 | dv: f64]
  const s = heads % kvHeads === 0 ? stage([g.length * 4, os.length * 4, qs.length * 4, ks.length * 4, vs.length * 4, T * 4, T * 8, hd * 8, qs.length * 4, ks.length * 8, vs.length * 8]) : undefined;
  if (!s) return attentionBackwardReference(dOut, q, k, v, out, positions, seqEnds, heads, kvHeads);
  [g, os, qs, ks, vs].forEach((values, i) => s.f32(i, values.length).set(values));
  new Int32Array(cpuArena().memory!.buffer, s.at[5], T).set(pos);
  const [dk, dv] = [s.f64(9, ks.length).fill(0), s.f64(10, vs.length).fill(0)];
  const at = s.at;
  trainAttentionKernel().backward(at[0]!, at[1]!, at[2]!, at[3]!, at[4]!, at[5]!, T, heads, heads / kvHeads, kvHeads, hd, at[6]!, at[7]!, at[8]!, at[9]!, at[10]!, 1 / Math.sqrt(hd));
  return [tensor(s.f32(8, qs.length).slice(), q.shape, 'f32'), tensor(new Float32Array(dk), k.shape, 'f32'), tensor(new Float32Array(dv), v.shape, 'f32')];
}
