// The hashed Gaussian noise of mutation (src/backend/noise.ts): its table-based logarithm, cosine and sine of the
// 24-bit uniforms against the library functions, and the noise it makes against the standard normal.
import { describe, expect, it } from 'vitest';
import { cosOfUniform, logOfUniform, perturbInPlace, sinOfUniform } from '../src/backend/noise.js';

/** Every k near the ends of [1, 2^24] and near each power of two, and a stride through the rest. */
function uniformsToCheck(): number[] {
  const ks = new Set<number>();
  for (let k = 1; k <= 2 ** 24; k += 9973) ks.add(k);
  for (let e = 0; e <= 24; e++) for (let j = -3; j <= 3; j++) ks.add(2 ** e + j);
  for (let j = 0; j < 3000; j++) [1 + j, 2 ** 24 - j].forEach((k) => ks.add(k));
  return [...ks].filter((k) => k >= 1 && k <= 2 ** 24);
}

describe('Box–Muller from tables', () => {
  it('ln, cos and sin of u = k / 2^24 agree with Math.log, Math.cos and Math.sin to 1e-15', () => {
    for (const k of uniformsToCheck()) {
      const exact = Math.log(k / 2 ** 24);
      expect(Math.abs(logOfUniform(k) - exact), `ln at k = ${k}`).toBeLessThanOrEqual(4e-16 * Math.max(1, Math.abs(exact)));
      const angle = (2 * Math.PI * k) / 2 ** 24;
      expect(Math.abs(cosOfUniform(k) - Math.cos(angle)), `cos at k = ${k}`).toBeLessThanOrEqual(1e-15);
      expect(Math.abs(sinOfUniform(k) - Math.sin(angle)), `sin at k = ${k}`).toBeLessThanOrEqual(1e-15);
    }
    expect(logOfUniform(2 ** 24)).toBe(0); // u = 1
    expect(cosOfUniform(2 ** 24)).toBe(1);
  });

  it('the noise has the moments and the tails of the standard normal', () => {
    const n = 200_000;
    const z = new Float32Array(n);
    perturbInPlace(z, 1, 11, 3, 1);
    const mean = z.reduce((s, v) => s + v, 0) / n;
    const variance = z.reduce((s, v) => s + (v - mean) ** 2, 0) / n;
    const fourth = z.reduce((s, v) => s + (v - mean) ** 4, 0) / n / variance ** 2;
    expect(Math.abs(mean)).toBeLessThan(5 / Math.sqrt(n)); // 5 standard errors
    expect(Math.abs(variance - 1)).toBeLessThan(5 * Math.sqrt(2 / n));
    expect(Math.abs(fourth - 3)).toBeLessThan(0.1); // kurtosis of the normal: 3
    // P(|z| > 2) = 0.0455 and P(|z| > 3) = 0.0027 for the standard normal.
    const beyond = (t: number) => z.filter((v) => Math.abs(v) > t).length / n;
    expect(Math.abs(beyond(2) - 0.0455)).toBeLessThan(0.003);
    expect(Math.abs(beyond(3) - 0.0027)).toBeLessThan(0.0006);
    // The pairs' two normals (cos and sin of one angle) are uncorrelated.
    let cross = 0;
    for (let i = 0; i < n; i += 2) cross += z[i]! * z[i + 1]!;
    expect(Math.abs(cross / (n / 2))).toBeLessThan(5 / Math.sqrt(n / 2));
  });
});
