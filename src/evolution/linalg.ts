// Small dense linear algebra in float64 for the SVD crossover: products, transposes and the one-sided Jacobi SVD
// of the small (2r × 2r) matrices it factorises. Matrices are row-major Float64Arrays with explicit dimensions.

import { loadCpuKernel, reserve } from '../backend/kernel-files.js';

export interface Matrix {
  rows: number;
  cols: number;
  data: Float64Array; // [rows, cols]
}

export const matrix = (rows: number, cols: number, data = new Float64Array(rows * cols)): Matrix => ({ rows, cols, data });

const checkProduct = (a: Matrix, b: Matrix) => {
  if (a.cols !== b.rows) throw new RangeError(`multiply: [${a.rows}, ${a.cols}] · [${b.rows}, ${b.cols}]`);
};

/** a·b, each output summed in k order (a row of b skipped where a's entry is zero): the reference of multiply. */
export function multiplyReference(a: Matrix, b: Matrix): Matrix {
  checkProduct(a, b);
  const [rows, inner, cols] = [a.rows, a.cols, b.cols];
  const [x, y, out] = [a.data, b.data, new Float64Array(rows * cols)];
  for (let i = 0; i < rows; i++)
    for (let k = 0; k < inner; k++) {
      const xik = x[i * inner + k]!;
      if (xik === 0) continue;
      for (let j = 0, o = i * cols, yk = k * cols; j < cols; j++) out[o + j]! += xik * y[yk + j]!;
    }
  return matrix(rows, cols, out);
}

export function transpose(a: Matrix): Matrix {
  const out = matrix(a.cols, a.rows);
  for (let i = 0; i < a.rows; i++) for (let j = 0; j < a.cols; j++) out.data[j * a.rows + i] = a.data[i * a.cols + j]!;
  return out;
}

const JACOBI_SWEEPS = 60;

/** Columns p and q (each `rows` long, stored one after another) turned by the plane rotation (c, s). */
function rotate(x: Float64Array, rows: number, p: number, q: number, c: number, s: number): void {
  for (let i = 0, xp = p * rows, xq = q * rows; i < rows; i++) {
    const a = x[xp + i]!;
    const b = x[xq + i]!;
    x[xp + i] = c * a - s * b;
    x[xq + i] = s * a + c * b;
  }
}

/**
 * Σ x[p + i]·x[q + i] for i < length in four interleaved sums (i mod 4), added as (s0 + s2) + (s1 + s3), then
 * the last length % 4 terms in order (four chains of dependent adds, not one: small_matrices.wat's two f64x2 sums).
 */
function dotInFours(x: Float64Array, p: number, q: number, length: number): number {
  let [s0, s1, s2, s3] = [0, 0, 0, 0];
  const quadsEnd = length - (length % 4);
  for (let i = 0; i < quadsEnd; i += 4) {
    s0 += x[p + i]! * x[q + i]!;
    s1 += x[p + i + 1]! * x[q + i + 1]!;
    s2 += x[p + i + 2]! * x[q + i + 2]!;
    s3 += x[p + i + 3]! * x[q + i + 3]!;
  }
  let sum = s0 + s2 + (s1 + s3);
  for (let i = quadsEnd; i < length; i++) sum += x[p + i]! * x[q + i]!;
  return sum;
}

/**
 * One-sided Jacobi (Hestenes): plane rotations of pairs of w's columns (each `rows` long, stored one after
 * another) until every pair is orthogonal; the columns are then u_j·s_j. Squared norms are recomputed at each
 * sweep and carried through its rotations (a rotation that zeroes the pair's product γ moves t·γ from one norm
 * to the other), so a pair costs one product, not three. The reference of kernels/cpu/small_matrices.wat, which
 * runs these steps (SIMD rotations) with equal results, bit for bit.
 */
export function orthogonalizeColumnsReference(w: Float64Array, rows: number, cols: number): void {
  const norms = new Float64Array(cols);
  for (let sweep = 0; sweep < JACOBI_SWEEPS; sweep++) {
    for (let j = 0; j < cols; j++) norms[j] = dotInFours(w, j * rows, j * rows, rows);
    let rotated = false;
    for (let p = 0; p < cols - 1; p++)
      for (let q = p + 1; q < cols; q++) {
        const gamma = dotInFours(w, p * rows, q * rows, rows);
        const [alpha, beta] = [norms[p]!, norms[q]!];
        if (gamma === 0 || Math.abs(gamma) <= 1e-15 * Math.sqrt(alpha * beta)) continue;
        rotated = true;
        const zeta = (beta - alpha) / (2 * gamma);
        const t = Math.sign(zeta || 1) / (Math.abs(zeta) + Math.sqrt(1 + zeta * zeta));
        const c = 1 / Math.sqrt(1 + t * t);
        rotate(w, rows, p, q, c, c * t);
        norms[p] = Math.max(0, alpha - t * gamma);
        norms[q] = Math.max(0, beta + t * gamma);
      }
    if (!rotated) break;
  }
}

interface SmallMatricesKernel {
  orthogonalizeColumns(w: number, rows: number, cols: number, norms: number, sweeps: number): void;
  multiply(out: number, x: number, y: number, rows: number, inner: number, cols: number): void;
}

let kernel: ReturnType<typeof loadCpuKernel<SmallMatricesKernel>> | undefined; // one per thread, its memory reused
const smallMatrices = () => (kernel ??= loadCpuKernel<SmallMatricesKernel>('small_matrices'));

/** orthogonalizeColumnsReference, run by kernels/cpu/small_matrices.wasm. */
export function orthogonalizeColumns(w: Float64Array, rows: number, cols: number): void {
  const k = smallMatrices();
  const [wAt, normsAt] = reserve(k.memory, [w.byteLength, cols * 8]) as [number, number];
  const staged = new Float64Array(k.memory.buffer, wAt, w.length);
  staged.set(w);
  k.orthogonalizeColumns(wAt, rows, cols, normsAt, JACOBI_SWEEPS);
  w.set(staged);
}

/** multiplyReference, run by kernels/cpu/small_matrices.wasm. */
export function multiply(a: Matrix, b: Matrix): Matrix {
  checkProduct(a, b);
  const k = smallMatrices();
  const [outAt, aAt, bAt] = reserve(k.memory, [a.rows * b.cols * 8, a.data.byteLength, b.data.byteLength]) as [number, number, number];
  new Float64Array(k.memory.buffer, aAt, a.data.length).set(a.data);
  new Float64Array(k.memory.buffer, bAt, b.data.length).set(b.data);
  k.multiply(outAt, aAt, bAt, a.rows, a.cols, b.cols);
  return matrix(a.rows, b.cols, new Float64Array(k.memory.buffer, outAt, a.rows * b.cols).slice());
}

/**
 * SVD by one-sided Jacobi: a [m, n] = u [m, p] · diag(s) · vᵀ [p, n], p = min(m, n), singular values descending.
 * Rotations run in a fixed order, so the result is deterministic. Only the columns of a (or of aᵀ when it is
 * wide) turn; v comes after, as aᵀ·u_j / s_j (zero where s_j is): its columns lose orthogonality where s_j is
 * tiny, but u·S·vᵀ = u·uᵀ·a stays exact, and that product is what the crossover uses.
 */
export function svd(a: Matrix): { u: Matrix; s: Float64Array; v: Matrix } {
  if (a.rows < a.cols) {
    const t = svd(transpose(a));
    return { u: t.v, s: t.s, v: t.u };
  }
  const { rows: m, cols: n } = a;
  const w = transpose(a).data; // column j at j·m: columns converge to u_j·s_j
  orthogonalizeColumns(w, m, n);
  const norms = new Float64Array(n);
  for (let j = 0; j < n; j++) norms[j] = Math.sqrt(dotInFours(w, j * m, j * m, m));
  const order = Array.from(norms.keys()).sort((x, y) => norms[y]! - norms[x]! || x - y);
  const [u, s] = [matrix(m, n), new Float64Array(n)];
  for (let rank = 0; rank < n; rank++) {
    const j = order[rank]!;
    s[rank] = norms[j]!;
    if (norms[j]! > 0) for (let i = 0; i < m; i++) u.data[i * n + rank] = w[j * m + i]! / norms[j]!;
  }
  const v = multiply(transpose(a), u); // then each column over its s (zero where s is)
  for (let i = 0; i < n; i++) for (let rank = 0; rank < n; rank++) v.data[i * n + rank] = s[rank]! > 0 ? v.data[i * n + rank]! / s[rank]! : 0;
  return { u, s, v };
}
