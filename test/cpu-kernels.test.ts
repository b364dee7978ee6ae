// The CPU kernels (kernels/cpu/*.wasm: the SVD crossover's Gram, combine, Jacobi rotations and small products)
// against their plain-loop references, the references against sums computed here, and the committed binaries
// against their text (dense.wasm's, attention.wasm's and train_attention.wasm's are tested in cpu-simd.test.ts,
// dense_f32.wasm's in cpu-dense-f32.test.ts).
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { combine, combineReference, gram, gramReference, type VectorRef } from '../src/backend/stacked-vectors.js';
import { matrix, multiply, multiplyReference, orthogonalizeColumns, orthogonalizeColumnsReference } from '../src/evolution/linalg.js';
// @ts-expect-error: a plain .mjs build script, without types
import { compileFused, compileWat, FUSED_KERNELS } from '../kernels/cpu/build.mjs';

const bits = (a: Float32Array | Float64Array) => Array.from(new Uint32Array(a.buffer, a.byteOffset, a.byteLength / 4));

/** n vectors (padded to 4 inside the kernel; overlapping when strided), lengths around the 128-value block, keep outputs. */
const cases = [
  [1, 1, 1, 1],
  [3, 127, 3, 2],
  [5, 128, 1, 4],
  [6, 129, 3, 5],
  [8, 300, 1, 3],
  [32, 261, 16, 16],
] as const;

function vectorsOf(n: number, length: number, stride: number, keep: number) {
  const data = Float32Array.from({ length: (n + keep) * length * stride + 7 }, (_, i) => Math.sin(i * 1.7) + (i % 5) / 4);
  const vectors = Array.from({ length: n }, (_, i): VectorRef => [data, stride === 1 ? i * length + 3 : i + 2]);
  const value = (i: number, k: number) => data[vectors[i]![1] + k * stride]!;
  const mix = Float64Array.from({ length: n * keep }, (_, i) => Math.cos(i) / (1 + i));
  return { vectors, value, mix };
}

describe('stacked vectors (the SVD crossover on the CPU)', () => {
  it('the references equal sums computed here, for any count, length and stride', () => {
    for (const [n, length, stride, keep] of cases) {
      const { vectors, value, mix } = vectorsOf(n, length, stride, keep);
      const g = gramReference(vectors, length, stride);
      for (let i = 0; i < n; i++)
        for (let j = 0; j < n; j++) {
          const dot = Array.from({ length }, (_, k) => value(i, k) * value(j, k)).reduce((s, v) => s + v, 0);
          expect(g[i * n + j]).toBeCloseTo(dot, 9);
        }
      const out = new Float32Array(keep * length * stride);
      combineReference(vectors, mix, Array.from({ length: keep }, (_, j): VectorRef => [out, j * length * stride]), length, stride);
      for (let j = 0; j < keep; j++)
        for (let k = 0; k < length; k++) {
          const expected = Array.from({ length: n }, (_, i) => mix[i * keep + j]! * value(i, k)).reduce((s, v) => s + v, 0);
          expect(out[j * length * stride + k * stride]).toBeCloseTo(expected, 5);
        }
    }
  });

  it('the WebAssembly kernel equals the references bit for bit, reading and writing vectors in place', () => {
    for (const [n, length, stride, keep] of cases) {
      const { vectors, mix } = vectorsOf(n, length, stride, keep);
      expect(bits(gram(vectors, length, stride))).toEqual(bits(gramReference(vectors, length, stride)));
      // Outputs interleaved with values that must come back untouched (B columns: stride R, keep below R).
      const [fast, reference] = [0, 1].map(() => Float32Array.from({ length: keep * length * stride + 5 }, (_, i) => -i));
      const outputsIn = (out: Float32Array) => Array.from({ length: keep }, (_, j): VectorRef => [out, stride === 1 ? j * length + 5 : j * length * stride + 1]);
      combine(vectors, mix, outputsIn(fast!), length, stride);
      combineReference(vectors, mix, outputsIn(reference!), length, stride);
      expect(bits(fast!)).toEqual(bits(reference!));
    }
  });

  it('bad shapes and outputs sharing elements with the vectors get clear errors', () => {
    expect(() => gram([[new Float32Array(10), 4]], 4, 2)).toThrow(/runs past 10 values/);
    expect(() => gram([], 4, 1)).toThrow(/needs vectors of at least one value/);
    const data = new Float32Array(64);
    expect(() => combine([[data, 0]], [1], [[data, 8]], 16, 1)).toThrow(/shares elements with the vectors/);
    expect(() => combine([[data, 0]], [1], [[data, 6]], 8, 3)).toThrow(/shares elements with the vectors/);
    combine([[data, 0]], [1], [[data, 1]], 8, 3); // interleaved, disjoint: allowed
    expect(() => combine([[data, 0]], [1, 2], [[data, 32]], 16, 1)).toThrow(/2-value mix for 1 vectors and 1 outputs/);
  });

});

describe('small matrices (the SVD of the crossover core)', () => {
  it('the kernel turns the columns as the reference does, bit for bit, into orthogonal columns', () => {
    for (const [rows, cols] of [[1, 1], [2, 3], [7, 5], [32, 32], [33, 16]] as const) {
      const w = Float64Array.from({ length: rows * cols }, (_, i) => Math.sin(i * 2.3) * (1 + (i % 4)));
      const [fast, reference] = [w.slice(), w.slice()];
      orthogonalizeColumns(fast, rows, cols);
      orthogonalizeColumnsReference(reference, rows, cols);
      expect(bits(fast)).toEqual(bits(reference));
      const column = (j: number) => fast.subarray(j * rows, (j + 1) * rows);
      const dot = (x: Float64Array, y: Float64Array) => x.reduce((s, v, i) => s + v * y[i]!, 0);
      for (let p = 0; p < cols; p++)
        for (let q = p + 1; q < cols; q++) expect(Math.abs(dot(column(p), column(q)))).toBeLessThanOrEqual(1e-13 * dot(w, w));
      // Rotations keep the Frobenius norm.
      expect(dot(fast, fast)).toBeCloseTo(dot(w, w), 8);
    }
  });

  it('the product kernel equals the reference bit for bit, and the reference equals a triple loop', () => {
    for (const [rows, inner, cols] of [[1, 1, 1], [2, 3, 5], [7, 4, 1], [32, 32, 32], [33, 16, 7]] as const) {
      // Some entries of a are zero: both skip those rows of b.
      const a = matrix(rows, inner, Float64Array.from({ length: rows * inner }, (_, i) => (i % 5 === 2 ? 0 : Math.sin(i * 0.9))));
      const b = matrix(inner, cols, Float64Array.from({ length: inner * cols }, (_, i) => Math.cos(i * 1.3) / (1 + (i % 3))));
      const reference = multiplyReference(a, b);
      expect(bits(multiply(a, b).data)).toEqual(bits(reference.data));
      for (let i = 0; i < rows; i++)
        for (let j = 0; j < cols; j++) {
          let sum = 0;
          for (let k = 0; k < inner; k++) sum += a.data[i * inner + k]! * b.data[k * cols + j]!;
          expect(reference.data[i * cols + j]).toBe(sum);
        }
    }
    expect(() => multiply(matrix(2, 3), matrix(2, 3))).toThrow(/multiply: \[2, 3\] · \[2, 3\]/);
  });
});

describe('kernels/cpu binaries', () => {
  it('each committed .wasm is what its .wat compiles to (run npm run build:wasm after editing one)', async () => {
    const directory = new URL('../kernels/cpu/', import.meta.url).pathname;
    const sources = readdirSync(directory).filter((f) => f.endsWith('.wat'));
    expect(sources.sort()).toEqual(['attention.wat', 'dense.wat', 'dense_f32.wat', 'small_matrices.wat', 'stacked_vectors.wat', 'train_attention.wat']);
    for (const source of sources) {
      const built = (await compileWat(directory + source)) as Buffer;
      expect(built.equals(readFileSync(directory + source.replace(/\.wat$/, '.wasm'))), source).toBe(true);
    }
    expect(FUSED_KERNELS).toEqual(['dense']);
    const fused = (await compileFused(`${directory}dense.wat`)) as Buffer;
    expect(fused.equals(readFileSync(`${directory}dense_fma.wasm`)), 'dense_fma.wasm').toBe(true);
  });
});
