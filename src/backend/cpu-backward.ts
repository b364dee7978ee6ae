// The CPU reference of the backward ops (backend.ts, "Backward ops"): the plain chain rule, f64 accumulation,
// f32 results. The WGSL twins in kernels/ are tested against these, and these against finite differences.
// logitsBackward is logitsBackwardReference's fast path (the same bits); training attention's is cpu-train-attention.ts.
// matmulBackward and outerProductSum (the dense products) live in cpu-dense.ts, the LoRA products in cpu-lora.ts.

import { assert, numel, type AdamWHyper, type Tensor } from './backend.js';
import { colsOf, f32Of, i32Of, rowsOf, tensor } from './cpu-tensor.js';
import { rowsOnThreads } from './cpu-dense.js';
import { logitsBackwardRows, logProbsRows, swigluBackwardRange, swigluRange } from './cpu-rows.js';
import { ONE_THREAD, type CpuThreads } from './cpu-threads.js';

/** Softmax of one row in f64, with its log-normaliser.   row: [V] */
function softmax(row: Float32Array): { p: Float64Array; logZ: number } {
  let max = -Infinity;
  for (const z of row) max = Math.max(max, z);
  const p = new Float64Array(row.length);
  let total = 0;
  for (let v = 0; v < row.length; v++) total += p[v] = Math.exp(row[v]! - max);
  for (let v = 0; v < row.length; v++) p[v] = p[v]! / total;
  return { p, logZ: max + Math.log(total) };
}

function entropyOf(p: Float64Array): number {
  let h = 0;
  for (const pv of p) if (pv > 0) h -= pv * Math.log(pv);
  return h;
}

export function logProbsReference(logits: Tensor, targets: Tensor): Tensor {
  const [T, V] = [rowsOf(logits), colsOf(logits)];
  const [zs, ys] = [f32Of(logits), i32Of(targets)];
  assert(ys.length === T, `logProbs: ${ys.length} targets for ${T} logit rows`);
  const out = new Float32Array(T * 2);
  for (let t = 0; t < T; t++) {
    const row = zs.subarray(t * V, (t + 1) * V);
    const { p, logZ } = softmax(row);
    out[t * 2] = row[ys[t]!]! - logZ;
    out[t * 2 + 1] = entropyOf(p);
  }
  return tensor(out, [T, 2], 'f32');
}

export function logitsBackwardReference(logits: Tensor, targets: Tensor, logpWeight: Tensor, entropyWeight: Tensor): Tensor {
  const [T, V] = [rowsOf(logits), colsOf(logits)];
  const [zs, ys, cw, ew] = [f32Of(logits), i32Of(targets), f32Of(logpWeight), f32Of(entropyWeight)];
  const out = new Float32Array(T * V);
  for (let t = 0; t < T; t++) {
    const { p } = softmax(zs.subarray(t * V, (t + 1) * V));
    const h = entropyOf(p);
    for (let v = 0; v < V; v++) {
      const pv = p[v]!;
      const logp = pv > 0 ? Math.log(pv) : 0;
      out[t * V + v] = -cw[t]! * ((v === ys[t] ? 1 : 0) - pv) + ew[t]! * pv * (logp + h);
    }
  }
  return tensor(out, [T, V], 'f32');
}

let rowScratch = new Float64Array(0);
/** The work of a softmax row's value (two exps' and a log's worth of multiply-adds), and of a SwiGLU element. */
const SOFTMAX_WORK = 32;
const SWIGLU_WORK = 16;

/**
 * The references' fast paths, equal bit for bit (cpu-rows.ts holds the shared loops): each log p taken once (the
 * reference takes it twice, for the entropy and for the gradient: with the exp, most of its time at bench-small's
 * vocabulary of 4096), into scratch reused across rows and calls; on threads, each its own rows.
 */
export function logitsBackward(logits: Tensor, targets: Tensor, logpWeight: Tensor, entropyWeight: Tensor, threads: CpuThreads = ONE_THREAD): Tensor {
  const [T, V] = [rowsOf(logits), colsOf(logits)];
  const [zs, ys, cw, ew] = [f32Of(logits), i32Of(targets), f32Of(logpWeight), f32Of(entropyWeight)];
  const threaded = rowsOnThreads(threads, T, T * V * SOFTMAX_WORK, [zs, ys, cw, ew], [V], 2 * V * 8, (at, count, memory) => ({ fn: 'logitsBackward', memory, args: [at[0]!, at[1]!, at[2]!, at[3]!, at[4]!, count, V, at[5]!] }));
  if (threaded) return tensor(threaded[0]!, [T, V], 'f32');
  const out = new Float32Array(T * V);
  logitsBackwardRows(zs, ys, cw, ew, out, T, V, scratchOf(V));
  return tensor(out, [T, V], 'f32');
}

export function logProbs(logits: Tensor, targets: Tensor, threads: CpuThreads = ONE_THREAD): Tensor {
  const [T, V] = [rowsOf(logits), colsOf(logits)];
  const [zs, ys] = [f32Of(logits), i32Of(targets)];
  assert(ys.length === T, `logProbs: ${ys.length} targets for ${T} logit rows`);
  const threaded = rowsOnThreads(threads, T, T * V * SOFTMAX_WORK, [zs, ys], [2], 2 * V * 8, (at, count, memory) => ({ fn: 'logProbs', memory, args: [at[0]!, at[1]!, at[2]!, count, V, at[3]!] }));
  if (threaded) return tensor(threaded[0]!, [T, 2], 'f32');
  const out = new Float32Array(T * 2);
  logProbsRows(zs, ys, out, T, V, scratchOf(V));
  return tensor(out, [T, 2], 'f32');
}

export function swigluBackward(dy: Tensor, gate: Tensor, up: Tensor, threads: CpuThreads = ONE_THREAD): [Tensor, Tensor] {
  const [dys, gs, us] = [f32Of(dy), f32Of(gate), f32Of(up)];
  const n = gs.length;
  const threaded = rowsOnThreads(threads, n, n * SWIGLU_WORK, [dys, gs, us], [1, 1], 0, (at, count, memory) => ({ fn: 'swigluBackward', memory, args: [at[0]!, at[1]!, at[2]!, at[3]!, at[4]!, count] }));
  const [dGate, dUp] = threaded ?? [new Float32Array(n), new Float32Array(n)];
  if (!threaded) swigluBackwardRange(dys, gs, us, dGate!, dUp!, n);
  return [tensor(dGate!, gate.shape, 'f32'), tensor(dUp!, up.shape, 'f32')];
}

export function swiglu(gate: Tensor, up: Tensor, threads: CpuThreads = ONE_THREAD): Tensor {
  const [gs, us] = [f32Of(gate), f32Of(up)];
  const n = gs.length;
  const threaded = rowsOnThreads(threads, n, n * SWIGLU_WORK, [gs, us], [1], 0, (at, count, memory) => ({ fn: 'swiglu', memory, args: [at[0]!, at[1]!, at[2]!, count] }));
  const out = threaded?.[0] ?? new Float32Array(n);
  if (!threaded) swigluRange(gs, us, out, n);
  return tensor(out, gate.shape, 'f32');
}

function scratchOf(V: number): Float64Array {
  if (rowScratch.length < 2 * V) rowScratch = new Float64Array(2 * V);
  return rowScratch;
}

function inverseRms(xs: Float32Array, t: number, D: number, eps: number): number {
  let sumSquares = 0;
  for (let d = 0; d < D; d++) sumSquares += xs[t * D + d]! ** 2;
  return 1 / Math.sqrt(sumSquares / D + eps);
}

export function rmsNormBackward(dy: Tensor, x: Tensor, weight: Tensor, eps: number): Tensor {
  // y = x·r·w, r = (mean(x²) + eps)^-½  =>  dx = r·(g∘w) - x·r³·Σ(g∘w∘x)/D
  const [T, D] = [rowsOf(x), colsOf(x)];
  const [g, xs, w] = [f32Of(dy), f32Of(x), f32Of(weight)];
  const out = new Float32Array(T * D);
  for (let t = 0; t < T; t++) {
    const r = inverseRms(xs, t, D, eps);
    let dot = 0;
    for (let d = 0; d < D; d++) dot += g[t * D + d]! * w[d]! * xs[t * D + d]!;
    for (let d = 0; d < D; d++) out[t * D + d] = r * g[t * D + d]! * w[d]! - (xs[t * D + d]! * r ** 3 * dot) / D;
  }
  return tensor(out, [T, D], 'f32');
}

export function rmsNormWeightGrad(dy: Tensor, x: Tensor, eps: number): Tensor {
  const [T, D] = [rowsOf(x), colsOf(x)];
  const [g, xs] = [f32Of(dy), f32Of(x)];
  const acc = new Float64Array(D);
  for (let t = 0; t < T; t++) {
    const r = inverseRms(xs, t, D, eps);
    for (let d = 0; d < D; d++) acc[d] = acc[d]! + g[t * D + d]! * xs[t * D + d]! * r;
  }
  return tensor(Float32Array.from(acc), [D], 'f32');
}

export interface PackedAttention {
  qs: Float32Array;
  ks: Float32Array;
  vs: Float32Array;
  pos: Int32Array;
  heads: number;
  kvHeads: number;
  headDim: number;
}

/** Attention probabilities of token t, head h over keys t - pos[t] .. t (f64). */
function probabilities(a: PackedAttention, t: number, h: number): Float64Array {
  const { qs, ks, pos, heads, kvHeads, headDim } = a;
  const kvHead = Math.floor(h / (heads / kvHeads));
  const start = t - pos[t]!;
  const scale = 1 / Math.sqrt(headDim);
  const p = new Float64Array(pos[t]! + 1);
  for (let j = 0; j < p.length; j++) {
    let dot = 0;
    for (let d = 0; d < headDim; d++) dot += qs[(t * heads + h) * headDim + d]! * ks[((start + j) * kvHeads + kvHead) * headDim + d]!;
    p[j] = dot * scale;
  }
  const max = Math.max(...p);
  let total = 0;
  for (let j = 0; j < p.length; j++) total += p[j] = Math.exp(p[j]! - max);
  for (let j = 0; j < p.length; j++) p[j] = p[j]! / total;
  return p;
}

/** The operands of training attention, checked (seqEnds, when given: the backward's one end per token). */
export function attentionOperands(q: Tensor, k: Tensor, v: Tensor, positions: Tensor, heads: number, kvHeads: number, seqEnds?: Tensor): PackedAttention {
  const headDim = colsOf(q) / heads;
  assert(Number.isInteger(headDim) && colsOf(k) === kvHeads * headDim, `attention: q [${q.shape.join(', ')}] and k [${k.shape.join(', ')}] do not fit ${heads} and ${kvHeads} heads`);
  const pos = i32Of(positions);
  pos.forEach((p, t) => assert(p >= 0 && p <= t, `attention: position ${p} of token ${t} reaches before the batch`));
  assert(seqEnds === undefined || i32Of(seqEnds).length === pos.length, 'attentionBackward: one sequence end per token');
  return { qs: f32Of(q), ks: f32Of(k), vs: f32Of(v), pos, heads, kvHeads, headDim };
}

export function attentionPackedReference(q: Tensor, k: Tensor, v: Tensor, positions: Tensor, heads: number, kvHeads: number): Tensor {
  const a = attentionOperands(q, k, v, positions, heads, kvHeads);
  const { vs, pos, headDim } = a;
  const T = pos.length;
  const out = new Float32Array(T * heads * headDim);
  for (let t = 0; t < T; t++) {
    for (let h = 0; h < heads; h++) {
      const p = probabilities(a, t, h);
      const kvHead = Math.floor(h / (heads / kvHeads));
      for (let d = 0; d < headDim; d++) {
        let sum = 0;
        for (let j = 0; j < p.length; j++) sum += p[j]! * vs[((t - pos[t]! + j) * kvHeads + kvHead) * headDim + d]!;
        out[(t * heads + h) * headDim + d] = sum;
      }
    }
  }
  return tensor(out, [T, heads * headDim], 'f32');
}

export function attentionBackwardReference(dOut: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, positions: Tensor, seqEnds: Tensor, heads: number, kvHeads: number): [Tensor, Tensor, Tensor] {
  // S = q·kᵀ/√hd, P = softmax(S), O = P·V:  dV_j = Σ_t P_tj dO_t;  dS_tj = P_tj (dO_t·V_j - dO_t·O_t);
  // dQ_t = Σ_j dS_tj K_j / √hd;  dK_j = Σ_t dS_tj Q_t / √hd   (GQA: a kv head sums over its query heads)
  const a = attentionOperands(q, k, v, positions, heads, kvHeads, seqEnds);
  const { qs, ks, vs, pos, headDim } = a;
  const [g, os] = [f32Of(dOut), f32Of(out)];
  const T = pos.length;
  const scale = 1 / Math.sqrt(headDim);
  const dq = new Float32Array(T * heads * headDim);
  const [dk, dv] = [new Float64Array(T * kvHeads * headDim), new Float64Array(T * kvHeads * headDim)];
  for (let t = 0; t < T; t++) {
    for (let h = 0; h < heads; h++) {
      const p = probabilities(a, t, h);
      const kvHead = Math.floor(h / (heads / kvHeads));
      const qRow = (t * heads + h) * headDim;
      let dOutDotOut = 0;
      for (let d = 0; d < headDim; d++) dOutDotOut += g[qRow + d]! * os[qRow + d]!;
      const dqRow = new Float64Array(headDim);
      for (let j = 0; j < p.length; j++) {
        const kvRow = ((t - pos[t]! + j) * kvHeads + kvHead) * headDim;
        let dOutDotV = 0;
        for (let d = 0; d < headDim; d++) dOutDotV += g[qRow + d]! * vs[kvRow + d]!;
        const dScore = p[j]! * (dOutDotV - dOutDotOut) * scale;
        for (let d = 0; d < headDim; d++) {
          dqRow[d] = dqRow[d]! + dScore * ks[kvRow + d]!;
          dk[kvRow + d] = dk[kvRow + d]! + dScore * qs[qRow + d]!;
          dv[kvRow + d] = dv[kvRow + d]! + p[j]! * g[qRow + d]!;
        }
      }
      dq.set(dqRow, qRow);
    }
  }
  return [tensor(dq, q.shape, 'f32'), tensor(Float32Array.from(dk), k.shape, 'f32'), tensor(Float32Array.from(dv), v.shape, 'f32')];
}

export function sumSquaresBySlot(x: Tensor, slotSize: number, first = 0, count = numel(x.shape) / slotSize - first): Tensor {
  const xs = f32Of(x);
  assert(xs.length % slotSize === 0, `sumSquaresBySlot: ${xs.length} elements are not whole slots of ${slotSize}`);
  assert(Number.isInteger(first) && Number.isInteger(count) && first >= 0 && count > 0 && (first + count) * slotSize <= xs.length, `sumSquaresBySlot: slots ${first} .. ${first + count - 1} are not among the ${xs.length / slotSize}`);
  const out = new Float32Array(count);
  for (let s = 0; s < count; s++) {
    let sum = 0;
    for (let i = (first + s) * slotSize; i < (first + s + 1) * slotSize; i++) sum += xs[i]! ** 2;
    out[s] = sum;
  }
  return tensor(out, [out.length], 'f32');
}

export function adamwInPlace(param: Tensor, grad: Tensor, m: Tensor, v: Tensor, slotSize: number, slotParams: Tensor, hyper: AdamWHyper): void {
  assert(param.dtype !== 'f16', 'adamwInPlace: f16 weights are read-only on the CPU backend (cpu-dense.ts keeps copies of them); train with f32 storage');
  const [ps, gs, ms, vs, sp] = [f32Of(param), f32Of(grad), f32Of(m), f32Of(v), f32Of(slotParams)];
  assert([gs, ms, vs].every((a) => a.length === ps.length), 'adamwInPlace: param, grad, m and v differ in size');
  assert(ps.length === numel(slotParams.shape) / 4 * slotSize, `adamwInPlace: ${ps.length} elements for ${numel(slotParams.shape) / 4} slots of ${slotSize}`);
  const { beta1, beta2, eps, weightDecay } = hyper;
  for (let s = 0; s * slotSize < ps.length; s++) {
    const lr = sp[s * 4]!;
    const gradScale = sp[s * 4 + 1]!;
    const c1 = sp[s * 4 + 2]!;
    const c2 = sp[s * 4 + 3]!;
    if (lr === 0) continue;
    for (let i = s * slotSize; i < (s + 1) * slotSize; i++) {
      const g = gs[i]! * gradScale;
      ms[i] = beta1 * ms[i]! + (1 - beta1) * g;
      vs[i] = beta2 * vs[i]! + (1 - beta2) * g * g;
      ps[i] = ps[i]! - lr * ((ms[i]! * c1) / (Math.sqrt(vs[i]! * c2) + eps) + weightDecay * ps[i]!);
    }
  }
}
