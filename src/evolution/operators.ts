// Weight-space evolution operators on LoRA adapters (the CPU reference). Every child has its parents' rank,
// target modules and shapes. Randomness comes from a counter-based hash of (seed, stream, index), so a child is
// a pure function of its parents, the operator's parameters and the seed.
//
//   mutate:      A += σ·rms(A)·z, B += σ·rms(B)·z  (z ~ N(0, 1); optionally some modules/layers, a fraction of entries)
//   crossover:   svd          best rank-r approximation of w1·ΔW1 + w2·ΔW2 (ΔW = scale·B·A), never formed densely
//                module       each (layer, module) taken whole from one parent
//                rank         each rank-1 component (row j of A with column j of B) from one parent
//                interpolate  w1·factors1 + w2·factors2 (does NOT preserve the delta: B·A is bilinear)

import { hashU32 } from '../backend/sampling.js';
import { LORA_MODULES, loraScale, type LoraAdapter, type LoraFactors, type LoraModule } from '../model/peft.js';
import { matrix, multiply, qr, svd, transpose, type Matrix } from './linalg.js';

export type CrossoverKind = 'svd' | 'module' | 'rank' | 'interpolate';
export const CROSSOVER_KINDS: readonly CrossoverKind[] = ['svd', 'module', 'rank', 'interpolate'];

export interface MutationOptions {
  sigma: number; // noise std relative to each matrix's RMS
  seed: number;
  modules?: readonly LoraModule[]; // default: every targeted module
  layers?: readonly number[]; // default: every layer
  fraction?: number; // share of entries perturbed (sparse mutation); default 1
}

export interface CrossoverOptions {
  kind: CrossoverKind;
  weights?: readonly [number, number]; // svd/interpolate: blend weights; module/rank: w1 = chance to take parent 1
  seed: number;
}

/** Uniform in (0, 1]: never 0, so Box–Muller's log stays finite. */
const uniform = (seed: number, stream: number, index: number) => ((hashU32(seed, stream, index) >>> 8) + 1) / 16777216;
const gaussian = (seed: number, stream: number, index: number) =>
  Math.sqrt(-2 * Math.log(uniform(seed, stream, 2 * index))) * Math.cos(2 * Math.PI * uniform(seed, stream + 0x40000000, 2 * index + 1));

/** One stream per (layer, module, factor), so perturbing one never shifts another. */
export const noiseStream = (layer: number, module: LoraModule, factor: 0 | 1) => ((layer * LORA_MODULES.length + LORA_MODULES.indexOf(module)) * 2 + factor) * 2;
const SPARSE_SALT = 0x5bd1e995;

function rms(x: Float32Array): number {
  let sum = 0;
  for (const v of x) sum += v * v;
  return Math.sqrt(sum / x.length);
}

function mapFactors(adapter: LoraAdapter, f: (layer: number, module: LoraModule, factors: LoraFactors) => LoraFactors): LoraAdapter {
  return {
    ...adapter,
    targetModules: [...adapter.targetModules],
    layers: adapter.layers.map((layer, l) => {
      const out: Partial<Record<LoraModule, LoraFactors>> = {};
      for (const m of adapter.targetModules) if (layer[m]) out[m] = f(l, m, layer[m]);
      return out;
    }),
  };
}

export function mutate(adapter: LoraAdapter, o: MutationOptions): LoraAdapter {
  if (!(o.sigma >= 0)) throw new RangeError(`mutation sigma must be >= 0, got ${o.sigma}`);
  const fraction = o.fraction ?? 1;
  if (!(fraction > 0 && fraction <= 1)) throw new RangeError(`mutation fraction must be in (0, 1], got ${fraction}`);
  const perturb = (x: Float32Array, stream: number) => {
    const scale = o.sigma * rms(x);
    return x.map((v, i) => (fraction < 1 && uniform(o.seed ^ SPARSE_SALT, stream, i) > fraction ? v : v + scale * gaussian(o.seed, stream, i)));
  };
  return mapFactors(adapter, (l, m, f) => {
    if ((o.modules && !o.modules.includes(m)) || (o.layers && !o.layers.includes(l))) return { a: f.a.slice(), b: f.b.slice() };
    return { a: perturb(f.a, noiseStream(l, m, 0)), b: perturb(f.b, noiseStream(l, m, 1)) };
  });
}

/** Parents must share rank, modules, layers and shapes; scales may differ (they are folded into B). */
export function checkCompatible(p1: LoraAdapter, p2: LoraAdapter): void {
  const problems: string[] = [];
  if (p1.rank !== p2.rank) problems.push(`rank ${p1.rank} vs ${p2.rank}`);
  if ([...p1.targetModules].sort().join() !== [...p2.targetModules].sort().join()) problems.push(`target modules [${p1.targetModules.join(', ')}] vs [${p2.targetModules.join(', ')}]`);
  if (p1.layers.length !== p2.layers.length) problems.push(`${p1.layers.length} vs ${p2.layers.length} layers`);
  // Shapes are compared only between structurally alike parents: a rank mismatch alone explains them all.
  if (problems.length === 0) p1.layers.forEach((layer, l) => {
    for (const m of p1.targetModules) {
      const [f1, f2] = [layer[m], p2.layers[l]?.[m]];
      if (!f1 !== !f2) problems.push(`layer ${l} ${m} present in only one parent`);
      else if (f1 && f2 && (f1.a.length !== f2.a.length || f1.b.length !== f2.b.length)) problems.push(`layer ${l} ${m} shapes differ`);
    }
  });
  if (problems.length > 0) throw new RangeError(`parents are not compatible for crossover: ${problems.slice(0, 3).join('; ')}${problems.length > 3 ? ` (and ${problems.length - 3} more)` : ''}`);
}

export function crossover(p1: LoraAdapter, p2: LoraAdapter, o: CrossoverOptions): LoraAdapter {
  checkCompatible(p1, p2);
  const [w1, w2] = o.weights ?? [0.5, 0.5];
  if (!Number.isFinite(w1) || !Number.isFinite(w2)) throw new RangeError(`crossover weights must be finite numbers, got ${w1}, ${w2}`);
  const r = p1.rank;
  const scale1 = loraScale(p1);
  const ratio = loraScale(p2) / scale1; // the child keeps parent 1's scale: parent 2's B is rescaled by this
  return mapFactors(p1, (l, m, f1) => {
    const f2 = p2.layers[l]![m]!;
    const inFeatures = f1.a.length / r;
    const outFeatures = f1.b.length / r;
    const stream = noiseStream(l, m, 0);
    switch (o.kind) {
      case 'module':
        return uniform(o.seed, stream, 0) <= w1 ? { a: f1.a.slice(), b: f1.b.slice() } : { a: f2.a.slice(), b: f2.b.map((v) => v * ratio) };
      case 'rank': {
        const a = f1.a.slice();
        const b = f1.b.slice();
        for (let j = 0; j < r; j++) {
          if (uniform(o.seed, stream, j) <= w1) continue;
          a.set(f2.a.subarray(j * inFeatures, (j + 1) * inFeatures), j * inFeatures);
          for (let n = 0; n < outFeatures; n++) b[n * r + j] = f2.b[n * r + j]! * ratio;
        }
        return { a, b };
      }
      case 'interpolate':
        return { a: f1.a.map((v, i) => w1 * v + w2 * f2.a[i]!), b: f1.b.map((v, i) => w1 * v + w2 * ratio * f2.b[i]!) };
      case 'svd':
        return svdCrossover(f1, f2, r, inFeatures, outFeatures, w1, w2 * ratio);
    }
  });
}

/**
 * Best rank-r approximation of w1·B1·A1 + w2·B2·A2 (the scale is common to both, so it is left out):
 *   P = [B1 B2] [out, 2r], Q = [A1; A2]ᵀ [in, 2r];  P = Qp·Rp, Q = Qq·Rq;  core = Rp·diag(w1, w2)·Rqᵀ = U·S·Vᵀ
 *   child B = Qp·U_r·√S_r,  child A = √S_r·V_rᵀ·Qqᵀ      (cost O((in + out)·r²), no dense [out, in] matrix)
 */
function svdCrossover(f1: LoraFactors, f2: LoraFactors, r: number, inFeatures: number, outFeatures: number, w1: number, w2: number): LoraFactors {
  const stackedB = matrix(outFeatures, 2 * r);
  for (let n = 0; n < outFeatures; n++)
    for (let j = 0; j < r; j++) {
      stackedB.data[n * 2 * r + j] = f1.b[n * r + j]!;
      stackedB.data[n * 2 * r + r + j] = f2.b[n * r + j]!;
    }
  const stackedA = matrix(2 * r, inFeatures);
  stackedA.data.set(f1.a, 0);
  stackedA.data.set(f2.a, r * inFeatures);
  const { q: qb, r: rb } = qr(stackedB); // [out, kb], [kb, 2r]
  const { q: qa, r: ra } = qr(transpose(stackedA)); // [in, ka], [ka, 2r]
  const weighted: Matrix = matrix(rb.rows, 2 * r);
  for (let i = 0; i < rb.rows; i++) for (let j = 0; j < 2 * r; j++) weighted.data[i * 2 * r + j] = rb.data[i * 2 * r + j]! * (j < r ? w1 : w2);
  const { u, s, v } = svd(multiply(weighted, transpose(ra))); // core [kb, ka]
  const left = multiply(qb, u); // [out, p]
  const right = multiply(qa, v); // [in, p]
  const a = new Float32Array(r * inFeatures);
  const b = new Float32Array(outFeatures * r);
  for (let j = 0; j < Math.min(r, s.length); j++) {
    const root = Math.sqrt(s[j]!);
    for (let n = 0; n < outFeatures; n++) b[n * r + j] = left.data[n * left.cols + j]! * root;
    for (let k = 0; k < inFeatures; k++) a[j * inFeatures + k] = right.data[k * right.cols + j]! * root;
  }
  return { a, b };
}
