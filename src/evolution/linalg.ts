// Small dense linear algebra in float64 for the SVD crossover: products, transposes and the one-sided Jacobi SVD
// of the small (2r × 2r) matrices it factorises. Matrices are row-major Float64Arrays with explicit dimensions.

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

/**
 * SVD by one-sided Jacobi (Hestenes): a [m, n] = u [m, p] · diag(s) · vᵀ [p, n], p = min(m, n), singular values
 * descending. Rotations run in a fixed order, so the result is deterministic. Works on columns stored
 * contiguously (column-major copies), which is what every rotation reads.
 */
export function svd(a: Matrix): { u: Matrix; s: Float64Array; v: Matrix } {
  if (a.rows < a.cols) {
    const t = svd(transpose(a));
    return { u: t.v, s: t.s, v: t.u };
  }
  const { rows: m, cols: n } = a;
  const w = transpose(a).data; // column j at j·m: columns converge to u·s
  const v = new Float64Array(n * n); // column j at j·n
  for (let i = 0; i < n; i++) v[i * n + i] = 1;
  for (let sweep = 0; sweep < JACOBI_SWEEPS; sweep++) {
    let rotated = false;
    for (let p = 0; p < n - 1; p++)
      for (let q = p + 1; q < n; q++) {
        let alpha = 0;
        let beta = 0;
        let gamma = 0;
        for (let i = 0, wp = p * m, wq = q * m; i < m; i++) {
          const x = w[wp + i]!;
          const y = w[wq + i]!;
          alpha += x * x;
          beta += y * y;
          gamma += x * y;
        }
        if (Math.abs(gamma) <= 1e-15 * Math.sqrt(alpha * beta) || gamma === 0) continue;
        rotated = true;
        const zeta = (beta - alpha) / (2 * gamma);
        const t = Math.sign(zeta || 1) / (Math.abs(zeta) + Math.sqrt(1 + zeta * zeta));
        const c = 1 / Math.sqrt(1 + t * t);
        const s = c * t;
        rotate(w, m, p, q, c, s);
        rotate(v, n, p, q, c, s);
      }
    if (!rotated) break;
  }
  const norms = Array.from({ length: n }, (_, j) => {
    let sum = 0;
    for (let i = 0; i < m; i++) sum += w[j * m + i]! ** 2;
    return Math.sqrt(sum);
  });
  const order = norms.map((_, j) => j).sort((x, y) => norms[y]! - norms[x]! || x - y);
  const u = matrix(m, n);
  const vOut = matrix(n, n);
  const s = new Float64Array(n);
  order.forEach((j, rank) => {
    s[rank] = norms[j]!;
    for (let i = 0; i < m; i++) u.data[i * n + rank] = norms[j]! > 0 ? w[j * m + i]! / norms[j]! : 0;
    for (let i = 0; i < n; i++) vOut.data[i * n + rank] = v[j * n + i]!;
  });
  return { u, s, v: vOut };
}
