// The hashed noise of weight-space mutation: a pure function of (seed, stream, index), so a child is the same
// whichever backend, batch or order makes it. The host operators (src/evolution/operators.ts) and the CPU
// backend's twin of kernels/evolve_mutate.wgsl share this code.

import { hashPrefix, hashU32, mix32 } from './sampling.js';

/** Uniform in (0, 1]: never 0, so Box–Muller's log stays finite. */
export const toUniform = (bits: number) => ((bits >>> 8) + 1) / 16777216;
export const uniform = (seed: number, stream: number, index: number) => toUniform(hashU32(seed, stream, index));

const SPARSE_SALT = 0x5bd1e995;

/**
 * x[i] += scale · z_i in place, z_2k and z_2k+1 the two Box–Muller normals of pair k; with fraction < 1 only the
 * entries whose uniform(seed ^ salt, stream, i) <= fraction move.
 */
export function perturbInPlace(x: Float32Array, scale: number, seed: number, stream: number, fraction: number): void {
  const moved = (i: number) => fraction >= 1 || uniform(seed ^ SPARSE_SALT, stream, i) <= fraction;
  const prefix = hashPrefix(seed, stream); // hashU32(seed, stream, pair) = mix32(prefix ^ pair)
  for (let i = 0; i < x.length; i += 2) {
    const h = mix32((prefix ^ (i >>> 1)) >>> 0);
    const radius = Math.sqrt(-2 * Math.log(toUniform(h)));
    const angle = 2 * Math.PI * toUniform(hashU32(h, stream, 0x9e3779b9));
    if (moved(i)) x[i] = x[i]! + scale * radius * Math.cos(angle);
    if (i + 1 < x.length && moved(i + 1)) x[i + 1] = x[i + 1]! + scale * radius * Math.sin(angle);
  }
}
