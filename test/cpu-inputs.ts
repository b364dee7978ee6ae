// Inputs for the CPU backend's tests (test/cpu-simd.test.ts, test/cpu-threads.test.ts): seeded draws, f32 bits to
// compare exactly, and inputs whose sums cancel so that the order of a sum shows in its bits.
import seedrandom from 'seedrandom';
import type { Tensor } from '../src/backend/backend.js';
import { f32Of } from '../src/backend/cpu-tensor.js';

/** A tensor's (or an array's) f32 values as their bit patterns: equal arrays are equal bit for bit, -0 and NaNs included. */
export const bits = (t: Tensor | Float32Array) => {
  const a = t instanceof Float32Array ? t : f32Of(t);
  return Array.from(new Uint32Array(a.buffer, a.byteOffset, a.length));
};

/** Seeded draws; `floats` spreads magnitudes over 2^±spread (weights get a small spread: f16 must hold them). */
export function random(name: string) {
  const rng = seedrandom(name);
  return {
    floats: (n: number, spread = 16) => Float32Array.from({ length: n }, () => (2 * rng() - 1) * 2 ** Math.floor((2 * rng() - 1) * spread)),
    int: (below: number) => Math.floor(rng() * below),
    pick: <T>(options: readonly T[]) => options[Math.floor(rng() * options.length)]!,
  };
}

/**
 * Cancellation that makes the order of a sum visible. f64 sums of f32 products hide their order below f32's
 * precision, so random inputs alone would not catch a kernel that adds in another order. Here a sum's first term is
 * +H·c and its last −H·c (H = 2^40, the same c at both ends): the big terms cancel exactly, and every term between
 * them was added at H's scale, so another order gives other f32 bits.
 */
export const H = 2 ** 40;
/** Each row [.., cols] of `a` starts with +H and ends with −H. */
export function hugeEnds(a: Float32Array, cols: number): Float32Array {
  for (let r = 0; r < a.length / cols; r++) [a[r * cols], a[r * cols + cols - 1]] = [H, -H];
  return a;
}
/** Each row of `w` ends with its first value. */
export function sameEndColumns(w: Float32Array, cols: number): Float32Array {
  for (let r = 0; r < w.length / cols; r++) w[r * cols + cols - 1] = w[r * cols]!;
  return w;
}
/** In each group of `rows` rows of `w`, the last row is the first one again. */
export function sameEndRows(w: Float32Array, rows: number, cols: number): Float32Array {
  for (let g = 0; g < w.length / (rows * cols); g++) w.copyWithin((g * rows + rows - 1) * cols, g * rows * cols, (g * rows + 1) * cols);
  return w;
}
