import { describe, expect, it } from 'vitest';
import { TINY_CONFIGS, type LlamaConfig } from '../src/model/config.js';
import { matrix, multiply, svd, transpose } from '../src/evolution/linalg.js';
import { CROSSOVER_KINDS, crossover, mutate } from '../src/evolution/operators.js';
import { planReplacements, type Member, type SelectionOptions } from '../src/evolution/selection.js';
import { denseDelta, LORA_MODULES, loraModuleShape, randomAdapter, type LoraAdapter } from '../src/model/peft.js';
import { maxAbs, maxAbsDiff } from './reference-llama.js';

const config: LlamaConfig = { ...TINY_CONFIGS['tiny']!, hiddenSize: 24, intermediateSize: 40, numHeads: 4, numKvHeads: 2, headDim: 6 };
const parent = (seed: number, alpha = 8): LoraAdapter => randomAdapter(config, { rank: 4, alpha, targets: ['q_proj', 'v_proj', 'down_proj'], seed, init: 'gaussian' });
const bits = (a: Float32Array) => Array.from(new Uint32Array(a.buffer, a.byteOffset, a.length));
const frobenius = (a: ArrayLike<number>) => Math.sqrt(Array.from(a).reduce((s, v) => s + v * v, 0));

function eachFactor(a: LoraAdapter, f: (layer: number, module: (typeof LORA_MODULES)[number]) => void): void {
  a.layers.forEach((layer, l) => a.targetModules.forEach((m) => layer[m] && f(l, m)));
}

describe('linear algebra', () => {
  it('SVD: hand-computed singular values, reconstruction, descending order', () => {
    expect(Array.from(svd(matrix(2, 2, Float64Array.of(3, 0, 0, -4))).s)).toEqual([4, 3]);
    const a = matrix(5, 3, Float64Array.from({ length: 15 }, (_, i) => Math.cos(i * 0.7) + i / 10));
    for (const m of [a, transpose(a)]) {
      const { u, s, v } = svd(m);
      const us = matrix(u.rows, u.cols, u.data.map((x, i) => x * s[i % u.cols]!));
      expect(maxAbsDiff(multiply(us, transpose(v)).data, m.data)).toBeLessThan(1e-12);
      expect([...s]).toEqual([...s].sort((x, y) => y - x));
    }
  });
});

describe('svd crossover', () => {
  const [p1, p2] = [parent(1), parent(2, 5)];

  it('of a parent with itself reproduces its delta; with weights (1, 0) reproduces parent 1', () => {
    for (const [a, b, w] of [[p1, p1, [0.5, 0.5]], [p1, p2, [1, 0]]] as const) {
      const child = crossover(a, b, { kind: 'svd', weights: w, seed: 1 });
      eachFactor(child, (l, m) => {
        const expected = denseDelta(config, p1, l, m);
        expect(maxAbsDiff(denseDelta(config, child, l, m), expected)).toBeLessThan(1e-5 * (1 + maxAbs(expected)));
      });
    }
  });

  it('is the optimal rank-r approximation of w1·ΔW1 + w2·ΔW2 (dense SVD, Eckart–Young)', () => {
    const [w1, w2] = [0.7, 0.6];
    const child = crossover(p1, p2, { kind: 'svd', weights: [w1, w2], seed: 1 });
    const interpolated = crossover(p1, p2, { kind: 'interpolate', weights: [w1, w2], seed: 1 });
    eachFactor(child, (l, m) => {
      const { inFeatures, outFeatures } = loraModuleShape(config, m);
      const [d1, d2] = [denseDelta(config, p1, l, m), denseDelta(config, p2, l, m)];
      const target = Float64Array.from(d1, (v, i) => w1 * v + w2 * d2[i]!);
      const { s } = svd(matrix(outFeatures, inFeatures, target));
      expect(s.filter((v) => v > 1e-9).length).toBeGreaterThan(4); // the blend has rank 2r: truncation matters
      const childDelta = denseDelta(config, child, l, m);
      const error = frobenius(childDelta.map((v, i) => v - target[i]!));
      const bound = Math.sqrt(s.slice(4).reduce((sum, v) => sum + v * v, 0));
      expect(error).toBeCloseTo(bound, 4);
      const other = frobenius(denseDelta(config, interpolated, l, m).map((v, i) => v - target[i]!));
      expect(error).toBeLessThanOrEqual(other + 1e-6); // no rank-r adapter does better
    });
  });
});

describe('operators', () => {
  const [p1, p2] = [parent(1), parent(2)];

  it('every kind gives a child of exactly the parents rank, modules and shapes', () => {
    for (const kind of CROSSOVER_KINDS) {
      const child = crossover(p1, p2, { kind, seed: 3 });
      expect([child.rank, child.alpha, child.targetModules]).toEqual([p1.rank, p1.alpha, p1.targetModules]);
      eachFactor(p1, (l, m) => {
        expect(child.layers[l]![m]!.a.length).toBe(p1.layers[l]![m]!.a.length);
        expect(child.layers[l]![m]!.b.length).toBe(p1.layers[l]![m]!.b.length);
      });
    }
    const mutant = mutate(p1, { sigma: 0.1, seed: 1 });
    expect([mutant.rank, mutant.targetModules]).toEqual([p1.rank, p1.targetModules]);
  });

  it('module and rank crossovers copy whole pieces of one parent, preserving its delta', () => {
    const byModule = crossover(p1, p2, { kind: 'module', seed: 4 });
    const sources = new Set<number>();
    eachFactor(byModule, (l, m) => {
      const from = [p1, p2].findIndex((p) => bits(p.layers[l]![m]!.a).join() === bits(byModule.layers[l]![m]!.a).join() && bits(p.layers[l]![m]!.b).join() === bits(byModule.layers[l]![m]!.b).join());
      expect(from).toBeGreaterThanOrEqual(0);
      sources.add(from);
    });
    expect(sources.size).toBe(2);
    const byRank = crossover(p1, p2, { kind: 'rank', seed: 4 });
    eachFactor(byRank, (l, m) => {
      const { inFeatures, outFeatures } = loraModuleShape(config, m);
      for (let j = 0; j < 4; j++) {
        const row = Array.from(byRank.layers[l]![m]!.a.subarray(j * inFeatures, (j + 1) * inFeatures));
        const from = [p1, p2].find((p) => Array.from(p.layers[l]![m]!.a.subarray(j * inFeatures, (j + 1) * inFeatures)).join() === row.join())!;
        for (let n = 0; n < outFeatures; n++) expect(byRank.layers[l]![m]!.b[n * 4 + j]).toBe(from.layers[l]![m]!.b[n * 4 + j]);
      }
    });
  });

  it('folds a different parent scale into B, so module crossover keeps each module delta', () => {
    const other = parent(2, 3); // alpha 3 instead of 8
    const child = crossover(p1, other, { kind: 'module', weights: [0, 1], seed: 1 }); // everything from parent 2
    eachFactor(child, (l, m) => expect(maxAbsDiff(denseDelta(config, child, l, m), denseDelta(config, other, l, m))).toBeLessThan(1e-6));
  });

  it('mutation: sigma 0 is the identity; same seed same child; noise scaled to each matrix RMS', () => {
    const same = mutate(p1, { sigma: 0, seed: 9 });
    eachFactor(p1, (l, m) => expect(bits(same.layers[l]![m]!.b)).toEqual(bits(p1.layers[l]![m]!.b)));
    const [x, y, z] = [mutate(p1, { sigma: 0.2, seed: 5 }), mutate(p1, { sigma: 0.2, seed: 5 }), mutate(p1, { sigma: 0.2, seed: 6 })];
    eachFactor(p1, (l, m) => {
      expect(bits(x.layers[l]![m]!.a)).toEqual(bits(y.layers[l]![m]!.a));
      expect(bits(x.layers[l]![m]!.a)).not.toEqual(bits(z.layers[l]![m]!.a));
    });
    const big = randomAdapter(config, { rank: 4, targets: ['down_proj'], seed: 1, init: 'gaussian' });
    const noisy = mutate(big, { sigma: 0.5, seed: 2 });
    const [a0, a1] = [big.layers[0]!.down_proj!.a, noisy.layers[0]!.down_proj!.a];
    const noise = a1.map((v, i) => v - a0[i]!);
    const ratio = frobenius(noise) / frobenius(a0); // = σ · ‖z‖ / √n ≈ σ
    expect(ratio).toBeGreaterThan(0.45);
    expect(ratio).toBeLessThan(0.55);
  });

  it('mutation options: only the given modules and layers; a sparse fraction of entries', () => {
    const some = mutate(p1, { sigma: 0.3, seed: 1, modules: ['v_proj'], layers: [1] });
    eachFactor(p1, (l, m) => {
      const changed = bits(some.layers[l]![m]!.a).join() !== bits(p1.layers[l]![m]!.a).join();
      expect(changed).toBe(m === 'v_proj' && l === 1);
    });
    const sparse = mutate(p1, { sigma: 0.3, seed: 1, fraction: 0.25 });
    let [changed, total] = [0, 0];
    eachFactor(p1, (l, m) => sparse.layers[l]![m]!.a.forEach((v, i) => ((total += 1), (changed += v !== p1.layers[l]![m]!.a[i] ? 1 : 0))));
    expect(changed / total).toBeGreaterThan(0.2);
    expect(changed / total).toBeLessThan(0.3);
  });

  it('mismatched parents get a clear error', () => {
    const otherRank = randomAdapter(config, { rank: 2, targets: ['q_proj', 'v_proj', 'down_proj'], seed: 1, init: 'gaussian' });
    expect(() => crossover(p1, otherRank, { kind: 'svd', seed: 1 })).toThrow(/not compatible for crossover: rank 4 vs 2/);
    const otherModules = randomAdapter(config, { rank: 4, targets: ['q_proj'], seed: 1, init: 'gaussian' });
    expect(() => crossover(p1, otherModules, { kind: 'module', seed: 1 })).toThrow(/target modules \[q_proj, v_proj, down_proj\] vs \[q_proj\]/);
  });
});

describe('selection', () => {
  const members: Member[] = [];
  for (const role of ['teacher', 'student'] as const)
    for (const sub of ['a', 'b'])
      for (let i = 0; i < 8; i++) members.push({ id: `${role}-${sub}-${i}`, role, subPopulation: sub, fitness: i * 1.5 + (sub === 'b' ? 100 : 0) + (role === 'student' ? 0.25 : 0) });
  const byId = new Map(members.map((m) => [m.id, m]));
  const base: SelectionOptions = { policy: { kind: 'truncation', fraction: 0.25 }, crossoverProbability: 0.5, groupBy: 'role-and-subpopulation', optimizerState: 'inherit', seed: 3, step: 10 };

  it('truncation replaces the bottom q of each group with children of its top q (or two survivors)', () => {
    const plan = planReplacements(members, base);
    expect(plan).toHaveLength(8); // 2 of 8 in each of 4 groups
    for (const r of plan) {
      const loser = byId.get(r.replaced)!;
      expect(Number(loser.id.at(-1))).toBeLessThan(2); // the two least fit of its group
      for (const p of r.parents.map((id) => byId.get(id)!)) expect([p.role, p.subPopulation]).toEqual([loser.role, loser.subPopulation]);
      if (r.operator === 'mutate') expect(Number(r.parents[0]!.at(-1))).toBeGreaterThanOrEqual(6); // from the top q
      else expect(r.parents.every((id) => Number(id.at(-1)) >= 2)).toBe(true); // survivors
      expect(r.inheritOptimizerFrom).toBe(r.parents[0]);
    }
    expect(new Set(plan.map((r) => r.operator))).toEqual(new Set(['mutate', 'crossover']));
    expect(planReplacements([...members].reverse(), base)).toEqual(plan); // input order does not matter
    expect(planReplacements(members, { ...base, step: 11 })).not.toEqual(plan);
  });

  it('grouping by role lets sub-populations breed together but never roles', () => {
    const plan = planReplacements(members, { ...base, groupBy: 'role' });
    expect(plan).toHaveLength(8);
    for (const r of plan) {
      expect(byId.get(r.replaced)!.subPopulation).toBe('a'); // the weaker sub-population loses
      r.parents.forEach((p) => expect(byId.get(p)!.role).toBe(byId.get(r.replaced)!.role));
    }
  });

  it('tournament parents are survivors; PBT copies a top member and perturbs it', () => {
    for (const r of planReplacements(members, { ...base, policy: { kind: 'tournament', fraction: 0.25, size: 3 } })) {
      r.parents.forEach((p) => expect(Number(p.at(-1))).toBeGreaterThanOrEqual(2));
    }
    const pbt = planReplacements(members, { ...base, policy: { kind: 'pbt', fraction: 0.25 }, optimizerState: 'reset' });
    pbt.forEach((r) => {
      expect(r.operator).toBe('mutate');
      expect(Number(r.parents[0]!.at(-1))).toBeGreaterThanOrEqual(6);
      expect(r.inheritOptimizerFrom).toBeNull();
    });
  });
});
