import { describe, expect, it } from 'vitest';
import { hashU32, sampleRow, uniform01 } from '../src/backend/sampling.js';

const row = (requestId: number, temperature = 1, topP = 1) => ({ temperature, topP, seed: 1234, requestId, position: 5 });

/** Empirical frequencies of each token over `n` request ids. */
function frequencies(logits: number[], n: number, temperature = 1, topP = 1): number[] {
  const counts = logits.map(() => 0);
  const l = Float32Array.from(logits);
  for (let id = 0; id < n; id++) counts[sampleRow(l, row(id, temperature, topP))]! += 1;
  return counts.map((c) => c / n);
}

describe('the counter-based hash', () => {
  it('is a pure function of (seed, requestId, position) and sensitive to each', () => {
    expect(hashU32(1, 2, 3)).toBe(hashU32(1, 2, 3));
    const variants = new Set([hashU32(1, 2, 3), hashU32(2, 2, 3), hashU32(1, 3, 3), hashU32(1, 2, 4), hashU32(0, 0, 0)]);
    expect(variants.size).toBe(5);
  });

  it('gives uniform draws in [0, 1) (chi-square over 16 bins)', () => {
    const n = 32_000;
    const bins = new Array(16).fill(0);
    for (let i = 0; i < n; i++) {
      const u = uniform01(7, i, i % 13);
      expect(u).toBeGreaterThanOrEqual(0);
      expect(u).toBeLessThan(1);
      bins[Math.floor(u * 16)] += 1;
    }
    const expected = n / 16;
    const chiSquare = bins.reduce((s, b) => s + (b - expected) ** 2 / expected, 0);
    expect(chiSquare).toBeLessThan(37.7); // 15 degrees of freedom, p = 0.001
  });
});

describe('sampleRow', () => {
  it('is greedy at temperature 0, lowest index winning ties', () => {
    expect(sampleRow(Float32Array.from([1, 3, 2, 3]), row(0, 0))).toBe(1);
    expect(sampleRow(Float32Array.from([-5, -1, -1]), row(9, 0))).toBe(1);
  });

  it('draws tokens with softmax(logits / T) frequencies', () => {
    const logits = [0.5, 1.5, -1, 0];
    for (const temperature of [1, 0.5]) {
      const z = logits.map((l) => Math.exp(l / temperature));
      const total = z.reduce((a, b) => a + b);
      frequencies(logits, 20_000, temperature).forEach((f, v) => expect(Math.abs(f - z[v]! / total)).toBeLessThan(0.015));
    }
  });

  it('keeps the smallest top set whose mass reaches topP', () => {
    const logits = [0.5, 0.3, 0.15, 0.05].map(Math.log); // probabilities 0.5, 0.3, 0.15, 0.05
    const tight = frequencies(logits, 4000, 1, 0.7);
    expect(tight[2]).toBe(0);
    expect(tight[3]).toBe(0);
    expect(Math.abs(tight[0]! - 0.5 / 0.8)).toBeLessThan(0.03); // renormalised over the kept set
    const wider = frequencies(logits, 4000, 1, 0.85);
    expect(wider[2]).toBeGreaterThan(0);
    expect(wider[3]).toBe(0);
  });

  it('never picks a masked token, even the most likely one', () => {
    const logits = Float32Array.from([9, 0, 0, 8]);
    for (let id = 0; id < 200; id++) {
      const v = sampleRow(logits, row(id), (t) => t !== 0);
      expect(v).not.toBe(0);
    }
    expect(sampleRow(logits, row(0, 0), (t) => t !== 0)).toBe(3);
    expect(() => sampleRow(logits, row(0), () => false)).toThrow(/allows no token/);
  });
});
