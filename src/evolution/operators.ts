// Weight-space evolution operators on LoRA adapters (the CPU reference). Every child has its parents' rank,
// target modules and shapes. Randomness comes from a counter-based hash of (seed, stream, index), so a child is
// a pure function of its parents, the operator's parameters and the seed.
//
//   mutate:      A += σ·rms(A)·z, B += σ·rms(B)·z  (z ~ N(0, 1); optionally some modules/layers, a fraction of entries)
//   crossover:   svd          best rank-r approximation of w1·ΔW1 + w2·ΔW2 (ΔW = scale·B·A), never formed densely
//                module       each (layer, module) taken whole from one parent
//                rank         each rank-1 component (row j of A with column j of B) from one parent
//                interpolate  w1·factors1 + w2·factors2 (does NOT preserve the delta: B·A is bilinear)

import { perturbInPlace, uniform } from '../backend/noise.js';
import { combine, gram, type VectorRef } from '../backend/stacked-vectors.js';
import { LORA_MODULES, loraScale, type LoraAdapter, type LoraFactors, type LoraModule } from '../model/peft.js';
import { matrix, multiply, svd, transpose, type Matrix } from './linalg.js';

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

/** One stream per (layer, module, factor), so perturbing one never shifts another. */
export const noiseStream = (layer: number, module: LoraModule, factor: 0 | 1) => ((layer * LORA_MODULES.length + LORA_MODULES.indexOf(module)) * 2 + factor) * 2;

function rms(x: Float32Array): number {
  let sum = 0;
  for (let i = 0; i < x.length; i++) sum += x[i]! * x[i]!;
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
    const out = x.slice();
    perturbInPlace(out, o.sigma * rms(x), o.seed, stream, fraction);
    return out;
  };
  return mapFactors(adapter, (l, m, f) => {
    if ((o.modules && !o.modules.includes(m)) || (o.layers && !o.layers.includes(l))) return { a: f.a.slice(), b: f.b.slice() };
    return { a: perturb(f.a, noiseStream(l, m, 0)), b: perturb(f.b, noiseStream(l, m, 1)) };
  });
}

/** c1·x1 + c2·x2, element by element. */
function blend(x1: Float32Array, c1: number, x2: Float32Array, c2: number): Float32Array {
  const out = new Float32Array(x1.length);
  for (let i = 0; i < x1.length; i++) out[i] = c1 * x1[i]! + c2 * x2[i]!;
  return out;
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
        return { a: blend(f1.a, w1, f2.a, w2), b: blend(f1.b, w1, f2.b, w2 * ratio) };
      case 'svd':
        return svdCrossover(f1, f2, r, inFeatures, outFeatures, w1, w2 * ratio);
    }
  });
}

/**
 * An orthogonal factorisation X = Q·R through the Gram matrix G = XᵀX [n, n] (rank-revealing CholeskyQR): a
 * Cholesky factorisation with diagonal pivoting, G[perm, perm] = L·Lᵀ, stopped at the k pivots above round-off,
 * gives R = Lᵀ with its columns put back in place [k, n], and Q = X[:, pivots]·R₁⁻¹ [m, k] (R₁ the leading k×k
 * triangle). One pass over X, and Q is never formed: callers need only Q·M = X·(P·R₁⁻¹·M).
 */
function gramFactor(gram: Matrix): { r: Matrix; toQ: (m: Matrix) => Matrix } {
  const n = gram.rows;
  const g = gram.data;
  const perm = Array.from({ length: n }, (_, i) => i);
  const l = new Float64Array(n * n); // l[i, t]: row i of L, in pivot order
  const diagonal = Array.from({ length: n }, (_, i) => g[i * n + i]!);
  const cutoff = Math.max(...diagonal) * n * 1e-14;
  let k = 0;
  for (; k < n; k++) {
    let pivot = k;
    for (let i = k + 1; i < n; i++) if (diagonal[perm[i]!]! > diagonal[perm[pivot]!]!) pivot = i;
    if (!(diagonal[perm[pivot]!]! > cutoff)) break;
    [perm[k], perm[pivot]] = [perm[pivot]!, perm[k]!];
    for (let t = 0; t < k; t++) [l[k * n + t], l[pivot * n + t]] = [l[pivot * n + t]!, l[k * n + t]!];
    const root = Math.sqrt(diagonal[perm[k]!]!);
    l[k * n + k] = root;
    for (let i = k + 1; i < n; i++) {
      let sum = g[perm[i]! * n + perm[k]!]!;
      for (let t = 0; t < k; t++) sum -= l[i * n + t]! * l[k * n + t]!;
      l[i * n + k] = sum / root;
      diagonal[perm[i]!]! -= l[i * n + k]! ** 2;
    }
  }
  k = Math.max(1, k);
  const r = matrix(k, n);
  for (let i = 0; i < n; i++) for (let t = 0; t < Math.min(k, i + 1); t++) r.data[t * n + perm[i]!] = l[i * n + t]!;
  // R₁⁻¹ by back substitution: R₁ = Lᵀ restricted to the first k pivots (upper triangular).
  const inverse = new Float64Array(k * k);
  for (let c = 0; c < k; c++) {
    for (let i = c; i >= 0; i--) {
      let sum = i === c ? 1 : 0;
      for (let t = i + 1; t <= c; t++) sum -= l[t * n + i]! * inverse[t * k + c]!;
      inverse[i * k + c] = l[i * n + i]! > 0 ? sum / l[i * n + i]! : 0;
    }
  }
  const inverseRoot = matrix(n, k); // P·R₁⁻¹: row perm[i] holds row i of R₁⁻¹
  for (let i = 0; i < k; i++) for (let c = 0; c < k; c++) inverseRoot.data[perm[i]! * k + c] = inverse[i * k + c]!;
  return { r, toQ: (m) => multiply(inverseRoot, m) };
}

/**
 * Best rank-r approximation of w1·B1·A1 + w2·B2·A2 (the scale is common to both, so it is left out):
 *   P = [B1 B2] [out, 2r], Q = [A1; A2]ᵀ [in, 2r];  P = Qp·Rp, Q = Qq·Rq;  core = Rp·diag(w1, w2)·Rqᵀ = U·S·Vᵀ
 *   child B = Qp·U_r·√S_r,  child A = (Qq·V_r·√S_r)ᵀ       cost O((in + out)·r²): no dense [out, in] matrix
 */
function svdCrossover(f1: LoraFactors, f2: LoraFactors, r: number, inFeatures: number, outFeatures: number, w1: number, w2: number): LoraFactors {
  const range = (count: number) => Array.from({ length: count }, (_, j) => j);
  const rowsOfA = [...range(r).map((j): VectorRef => [f1.a, j * inFeatures]), ...range(r).map((j): VectorRef => [f2.a, j * inFeatures])]; // [A1; A2]
  const columnsOfB = [...range(r).map((j): VectorRef => [f1.b, j]), ...range(r).map((j): VectorRef => [f2.b, j])]; // [B1 B2]
  const { mixB, mixA } = svdMixes(matrix(2 * r, 2 * r, gram(columnsOfB, outFeatures, r)), matrix(2 * r, 2 * r, gram(rowsOfA, inFeatures, 1)), r, w1, w2);
  // Rows of A and columns of B past the blend's rank (when it is below r) stay zero.
  const [a, b] = [new Float32Array(r * inFeatures), new Float32Array(outFeatures * r)];
  combine(rowsOfA, mixA.data, range(mixA.cols).map((j) => [a, j * inFeatures]), inFeatures, 1);
  combine(columnsOfB, mixB.data, range(mixB.cols).map((j) => [b, j]), outFeatures, r);
  return { a, b };
}

/**
 * The small part of the SVD crossover, from the Gram matrices of the stacked factors ([2r, 2r] each: of the
 * columns of [B1 B2] and of the rows of [A1; A2]) to the mixes that make the child: child B = [B1 B2]·mixB,
 * child A = mixAᵀ·[A1; A2], each mix [2r, keep]. Shared by the host operator and the device one.
 */
export function svdMixes(gramB: Matrix, gramA: Matrix, r: number, w1: number, w2: number): { mixB: Matrix; mixA: Matrix } {
  const p = gramFactor(gramB);
  const q = gramFactor(gramA);
  const weighted = matrix(p.r.rows, 2 * r, p.r.data.slice()); // Rp·diag(w1, w2): columns of [B1 B2] weighted
  for (let i = 0; i < weighted.rows; i++) for (let j = 0; j < 2 * r; j++) weighted.data[i * 2 * r + j]! *= j < r ? w1 : w2;
  const { u, s, v } = svd(multiply(weighted, transpose(q.r))); // core [kp, kq]
  const keep = Math.min(r, s.length);
  const scaled = (m: Matrix) => {
    const out = matrix(m.rows, keep);
    for (let i = 0; i < m.rows; i++) for (let j = 0; j < keep; j++) out.data[i * keep + j] = m.data[i * m.cols + j]! * Math.sqrt(s[j]!);
    return out;
  };
  return { mixB: p.toQ(scaled(u)), mixA: q.toQ(scaled(v)) };
}
