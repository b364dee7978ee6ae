// Small dense linear algebra in float64 for the SVD crossover: products, transposes and the one-sided Jacobi SVD
// of the small (2r × 2r) matrices it factorises. Matrices are row-major Float64Arrays with explicit dimensions.

import { loadCpuKernel, reserve } from '../backend/kernel-files.js';

export interface Matrix {
  rows: number;
  cols: number;
  data: Float64Array; // [rows, cols]
}

export const matrix = (rows: number, cols: number, data = new Float64Array(rows * cols)): Matrix => ({ rows, cols, data });

export function multiply(a: Matrix, b: Matrix): Matrix {
  if (a.cols !== b.rows) throw new RangeError(`multiply: [${a.rows}, ${a.cols}] · [${b.rows}, ${b.cols}]`);
  const out = matrix(a.rows, b.cols);
  for (let i = 0; i < a.rows; i++)
    for (let k = 0; k < a.cols; k++) {
      const aik = a.data[i * a.cols + k]!;
      if (aik === 0) continue;
      for (let j = 0; j < b.cols; j++) out.data[i * b.cols + j]! += aik * b.data[k * b.cols + j]!;
    }
  return out;
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

const squaredNorm = (x: Float64Array, from: number, length: number) => {
  let sum = 0;
  for (let i = from; i < from + length; i++) sum += x[i]! * x[i]!;
  return sum;
};

/**
 * One-sided Jacobi (Hestenes): plane rotations of pairs of w's columns (each `rows` long, stored one after
 * another) until every pair is orthogonal; the columns are then u_j·s_j. Squared norms are recomputed at each
 * sweep and carried through its rotations (a rotation that zeroes the pair's product γ moves t·γ from one norm
 * to the other), so a pair costs one product, not three. The reference of kernels/cpu/jacobi.wat, which runs
 * these steps (SIMD rotations) with equal results, bit for bit.
 */
export function orthogonalizeColumnsReference(w: Float64Array, rows: number, cols: number): void {
  const norms = new Float64Array(cols);
  for (let sweep = 0; sweep < JACOBI_SWEEPS; sweep++) {
    for (let j = 0; j < cols; j++) norms[j] = squaredNorm(w, j * rows, rows);
    let rotated = false;
    for (let p = 0; p < cols - 1; p++)
      for (let q = p + 1; q < cols; q++) {
        let gamma = 0;
        for (let i = 0, wp = p * rows, wq = q * rows; i < rows; i++) gamma += w[wp + i]! * w[wq + i]!;
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

interface JacobiKernel {
  orthogonalizeColumns(w: number, rows: number, cols: number, norms: number, sweeps: number): void;
}

let jacobi: ReturnType<typeof loadCpuKernel<JacobiKernel>> | undefined; // one per thread, its memory reused

/** orthogonalizeColumnsReference, run by kernels/cpu/jacobi.wasm. */
export function orthogonalizeColumns(w: Float64Array, rows: number, cols: number): void {
  jacobi ??= loadCpuKernel<JacobiKernel>('jacobi');
  const [wAt, normsAt] = reserve(jacobi.memory, [w.byteLength, cols * 8]) as [number, number];
  const staged = new Float64Array(jacobi.memory.buffer, wAt, w.length);
  staged.set(w);
  jacobi.orthogonalizeColumns(wAt, rows, cols, normsAt, JACOBI_SWEEPS);
  w.set(staged);
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
  const norms = Array.from({ length: n }, (_, j) => Math.sqrt(squaredNorm(w, j * m, m)));
  const order = norms.map((_, j) => j).sort((x, y) => norms[y]! - norms[x]! || x - y);
  const [u, s] = [matrix(m, n), new Float64Array(n)];
  order.forEach((j, rank) => {
    s[rank] = norms[j]!;
    if (norms[j]! > 0) for (let i = 0; i < m; i++) u.data[i * n + rank] = w[j * m + i]! / norms[j]!;
  });
  const v = multiply(transpose(a), u); // then each column over its s (zero where s is)
  for (let i = 0; i < n * n; i++) v.data[i] = s[i % n]! > 0 ? v.data[i]! / s[i % n]! : 0;
  return { u, s, v };
}
