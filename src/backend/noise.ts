// The hashed noise of weight-space mutation: a pure function of (seed, stream, index), so a child is the same
// whichever backend, batch or order makes it. The host operators (src/evolution/operators.ts) and the CPU
// backend's twin of kernels/evolve_mutate.wgsl share this code.

import { hashPrefix, hashU32, mix32 } from './sampling.js';

/** The 24-bit uniform of a hash as the whole number k in [1, 2^24]: toUniform is k / 2^24. */
const uniformBits = (bits: number) => (bits >>> 8) + 1;
/** Uniform in (0, 1]: never 0, so Box–Muller's log stays finite. */
export const toUniform = (bits: number) => uniformBits(bits) / 16777216;
export const uniform = (seed: number, stream: number, index: number) => toUniform(hashU32(seed, stream, index));

const SPARSE_SALT = 0x5bd1e995;

// Box–Muller takes the logarithm, cosine and sine of the hash's 24-bit uniforms u = k / 2^24 (k whole, 1 to 2^24).
// Math.log, Math.cos and Math.sin took three quarters of a mutation's time; tables over the bits of k do it in a
// few multiply-adds, within 1e-15 of them (2e-16 relative, except ln u near u = 1: 1e-16 absolute there):
//   ln u  = (e - 24)·ln 2 + ln(c) + ln(1 + d)   k = 2^e·m, m in [1, 2); c = 1 + t/4096 from the top 12 bits t of
//                                               m's fraction; d = (m - c)/c < 2^-12: four terms of its series
//   2π·u  = a + b                               a = 2π·(k >> 12)/4096, b = 2π·(k & 4095)/2^24: cos and sin of the
//                                               sum from tables of cos and sin of a and of b
const TOP_BITS = 4096;
const logOfTop = Float64Array.from({ length: TOP_BITS }, (_, t) => Math.log1p(t / TOP_BITS)); // ln(c)
const inverseOfTop = Float64Array.from({ length: TOP_BITS }, (_, t) => 1 / (2 ** 23 + t * 2 ** 11)); // 1/c, m scaled by 2^23
const angleOf = (k: number) => (2 * Math.PI * k) / 2 ** 24;
const [cosHigh, sinHigh] = [Math.cos, Math.sin].map((f) => Float64Array.from({ length: TOP_BITS + 1 }, (_, h) => f(angleOf(h * TOP_BITS)))) as [Float64Array, Float64Array];
const [cosLow, sinLow] = [Math.cos, Math.sin].map((f) => Float64Array.from({ length: TOP_BITS }, (_, l) => f(angleOf(l)))) as [Float64Array, Float64Array];

/** ln(k / 2^24) for a whole k in [1, 2^24]. */
export function logOfUniform(k: number): number {
  const e = 31 - Math.clz32(k); // k in [2^e, 2^(e + 1))
  const m = e <= 23 ? k << (23 - e) : k >>> 1; // k scaled into [2^23, 2^24): m·2^-23 in [1, 2), exactly
  const t = (m >>> 11) & (TOP_BITS - 1);
  const d = (m & 2047) * inverseOfTop[t]!;
  return (e - 24) * Math.LN2 + logOfTop[t]! + d * (1 - d * (0.5 - d * (1 / 3 - d * 0.25)));
}

/** cos(2π·k / 2^24) for a whole k in [0, 2^24]. */
export const cosOfUniform = (k: number) => cosHigh[k >>> 12]! * cosLow[k & 4095]! - sinHigh[k >>> 12]! * sinLow[k & 4095]!;
/** sin(2π·k / 2^24) for a whole k in [0, 2^24]. */
export const sinOfUniform = (k: number) => sinHigh[k >>> 12]! * cosLow[k & 4095]! + cosHigh[k >>> 12]! * sinLow[k & 4095]!;

/**
 * x[i] += scale · z_i in place, z_2k and z_2k+1 the two Box–Muller normals of pair k; with fraction < 1 only the
 * entries whose uniform(seed ^ salt, stream, i) <= fraction move.
 */
export function perturbInPlace(x: Float32Array, scale: number, seed: number, stream: number, fraction: number): void {
  // Whether entry i moves: all of them, or those of a sparse mutation (a function of the entry alone).
  const dense = fraction >= 1;
  const sparseSeed = seed ^ SPARSE_SALT;
  const prefix = hashPrefix(seed, stream); // hashU32(seed, stream, pair) = mix32(prefix ^ pair)
  for (let i = 0; i < x.length; i += 2) {
    const h = mix32((prefix ^ (i >>> 1)) >>> 0);
    const radius = Math.sqrt(-2 * logOfUniform(uniformBits(h)));
    const k = uniformBits(hashU32(h, stream, 0x9e3779b9));
    if (dense || uniform(sparseSeed, stream, i) <= fraction) x[i] = x[i]! + scale * radius * cosOfUniform(k);
    if (i + 1 < x.length && (dense || uniform(sparseSeed, stream, i + 1) <= fraction)) x[i + 1] = x[i + 1]! + scale * radius * sinOfUniform(k);
  }
}
