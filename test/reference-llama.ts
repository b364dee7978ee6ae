// An independent Llama forward pass for tests: one sequence, float64, no KV cache, no Backend: the maths
// written out directly (HF LlamaForCausalLM semantics), with an optional dense delta per weight.
import type { ModelWeights } from '../src/model/checkpoint.js';
import type { LlamaConfig } from '../src/model/config.js';
import { ropeInverseFrequencies } from '../src/model/config.js';
import { loraModuleShape, loraScale, type LoraAdapter, type LoraModule } from '../src/model/peft.js';

type Matrix = Float64Array; // row-major
/** Added to the named weight of the given layer before use: [out, in]. */
export type DeltaFn = (layer: number, module: LoraModule) => ArrayLike<number> | undefined;

function linear(x: Matrix, T: number, K: number, w: Float32Array, N: number, delta?: ArrayLike<number>, bias?: Float32Array): Matrix {
  const y = new Float64Array(T * N);
  for (let t = 0; t < T; t++)
    for (let n = 0; n < N; n++) {
      let s = bias ? bias[n]! : 0;
      for (let k = 0; k < K; k++) s += x[t * K + k]! * (w[n * K + k]! + (delta ? delta[n * K + k]! : 0));
      y[t * N + n] = s;
    }
  return y;
}

function rmsNorm(x: Matrix, T: number, D: number, w: Float32Array, eps: number): Matrix {
  const y = new Float64Array(T * D);
  for (let t = 0; t < T; t++) {
    let ss = 0;
    for (let d = 0; d < D; d++) ss += x[t * D + d]! ** 2;
    const r = 1 / Math.sqrt(ss / D + eps);
    for (let d = 0; d < D; d++) y[t * D + d] = x[t * D + d]! * r * w[d]!;
  }
  return y;
}

function rope(x: Matrix, T: number, heads: number, hd: number, inv: Float64Array): void {
  for (let t = 0; t < T; t++)
    for (let h = 0; h < heads; h++)
      for (let i = 0; i < hd / 2; i++) {
        const base = (t * heads + h) * hd;
        const [c, s] = [Math.cos(t * inv[i]!), Math.sin(t * inv[i]!)];
        const [a, b] = [x[base + i]!, x[base + hd / 2 + i]!];
        x[base + i] = a * c - b * s;
        x[base + hd / 2 + i] = b * c + a * s;
      }
}

/** Logits [T, V] of one sequence. */
export function referenceLogits(c: LlamaConfig, w: ModelWeights, tokens: number[], delta: DeltaFn = () => undefined): Float64Array {
  const T = tokens.length;
  const { hiddenSize: D, intermediateSize: F, numHeads: H, numKvHeads: Hkv, headDim: hd, vocabSize: V } = c;
  const inv = ropeInverseFrequencies(c);
  let x = new Float64Array(T * D);
  tokens.forEach((id, t) => x.set(w.embedTokens.data.subarray(id * D, (id + 1) * D), t * D));
  w.layers.forEach((L, l) => {
    const h = rmsNorm(x, T, D, L.inputNorm.data, c.rmsNormEps);
    const q = linear(h, T, D, L.qProj.data, H * hd, delta(l, 'q_proj'), L.qBias?.data);
    const k = linear(h, T, D, L.kProj.data, Hkv * hd, delta(l, 'k_proj'), L.kBias?.data);
    const v = linear(h, T, D, L.vProj.data, Hkv * hd, delta(l, 'v_proj'), L.vBias?.data);
    rope(q, T, H, hd, inv);
    rope(k, T, Hkv, hd, inv);
    const att = new Float64Array(T * H * hd);
    for (let t = 0; t < T; t++)
      for (let head = 0; head < H; head++) {
        const kv = Math.floor(head / (H / Hkv));
        const scores = Array.from({ length: t + 1 }, (_, j) => {
          let s = 0;
          for (let d = 0; d < hd; d++) s += q[(t * H + head) * hd + d]! * k[(j * Hkv + kv) * hd + d]!;
          return s / Math.sqrt(hd);
        });
        const m = Math.max(...scores);
        const e = scores.map((s) => Math.exp(s - m));
        const z = e.reduce((a, b) => a + b, 0);
        for (let d = 0; d < hd; d++) att[(t * H + head) * hd + d] = e.reduce((a, p, j) => a + (p / z) * v[(j * Hkv + kv) * hd + d]!, 0);
      }
    const o = linear(att, T, H * hd, L.oProj.data, D, delta(l, 'o_proj'));
    x = x.map((value, i) => value + o[i]!);
    const h2 = rmsNorm(x, T, D, L.postAttentionNorm.data, c.rmsNormEps);
    const g = linear(h2, T, D, L.gateProj.data, F, delta(l, 'gate_proj'));
    const u = linear(h2, T, D, L.upProj.data, F, delta(l, 'up_proj'));
    const act = g.map((gi, i) => (gi / (1 + Math.exp(-gi))) * u[i]!);
    const down = linear(act, T, F, L.downProj.data, D, delta(l, 'down_proj'));
    x = x.map((value, i) => value + down[i]!);
  });
  const n = rmsNorm(x, T, D, w.norm.data, c.rmsNormEps);
  return linear(n, T, D, (w.lmHead ?? w.embedTokens).data, V);
}

export function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) throw new Error(`lengths differ: ${a.length} vs ${b.length}`);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

export function maxAbs(a: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]!));
  return m;
}

/** scale·B·A in float64 for every module the adapter targets, with one factor optionally replaced. */
export function loraDelta64(c: LlamaConfig, adapter: LoraAdapter, replace?: { layer: number; module: LoraModule; factor: 'a' | 'b'; values: Float64Array }): DeltaFn {
  return (layer, module) => {
    const f = adapter.layers[layer]![module];
    if (!f) return undefined;
    const swap = (name: 'a' | 'b') => (replace && replace.layer === layer && replace.module === module && replace.factor === name ? replace.values : f[name]);
    const [a, b] = [swap('a'), swap('b')];
    const { inFeatures: K, outFeatures: N } = loraModuleShape(c, module);
    const r = adapter.rank;
    const delta = new Float64Array(N * K);
    for (let n = 0; n < N; n++) for (let j = 0; j < r; j++) for (let k = 0; k < K; k++) delta[n * K + k] = delta[n * K + k]! + loraScale(adapter) * b[n * r + j]! * a[j * K + k]!;
    return delta;
  };
}
