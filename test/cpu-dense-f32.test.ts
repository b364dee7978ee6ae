// The f32-sum dense products (src/backend/cpu-dense-f32.ts, kernels/cpu/dense_f32.wat) against their plain loops,
// matmulF32Reference and matmulBackwardF32Reference, bit for bit. Forward: both kernels (row blocks for f16 weights
// and short x; row-major for f32 weights and x past the block path's budget), shapes around their tiles (16 rows x
// 2 tokens, 4 rows x 8 tokens), with and without bias; backward: the row-major tile loop over w's columns, shapes
// around its tiles (4 columns x 8 tokens) and token blocks, f16 and f32 weights. Both with -0, subnormals and sums
// that cancel (so that another order of the sum shows in the bits); at 1 to 4 threads; past 2 GiB of the arena; a
// sequence alone and inside a batch; and hand-computed cases where f32 sums and f64 sums differ.
import { afterAll, describe, expect, it } from 'vitest';
import type { Tensor, WeightStorage } from '../src/backend/backend.js';
import { cpuArena } from '../src/backend/cpu-arena.js';
import { hasRowBlocks, matmulBackwardReference, matmulReference, MAX_BLOCK_X_BYTES } from '../src/backend/cpu-dense.js';
import { matmulBackwardF32, matmulBackwardF32Reference, matmulF32, matmulF32Reference } from '../src/backend/cpu-dense-f32.js';
import { f32Of } from '../src/backend/cpu-tensor.js';
import { CpuThreads, ONE_THREAD } from '../src/backend/cpu-threads.js';
import { CpuBackend } from '../src/backend/cpu.js';
import { bits, hugeEnds, random, sameEndColumns, sameEndRows } from './cpu-inputs.js';

/**
 * 2 GiB held first (untouched: no memory used), so that every weight, row block and scratch region here lies past
 * 2^31 bytes, where an address no longer fits a signed i32 (a 0.5B model's arena reaches it), as in cpu-threads.test.ts.
 */
const ballast = cpuArena().f32(2 ** 29 + 2 ** 20);
const cpu = new CpuBackend();
/** 1 to 4 threads, each cutting even the smallest product (a share may hold a single multiply-add). */
const THREADS = [1, 2, 3, 4].map((n) => CpuThreads.open(n, 1));
afterAll(() => THREADS.forEach((t) => t.close()));

/** A weight [N, K] in the arena (read in place), or for f32 also in a plain array (copied into the kernel's scratch). */
const weight = (values: Float32Array, N: number, K: number, storage: WeightStorage, inArena: boolean): Tensor =>
  inArena || storage === 'f16' ? cpu.uploadWeight(values, [N, K], storage) : cpu.upload(values, [N, K]);

/**
 * x [T, K] (or dy [T, N]) with cancelling rows (+H first, −H last: w's rows, or columns, end as they start), -0 and
 * f32 subnormals sprinkled in.
 */
function inputs(r: ReturnType<typeof random>, T: number, K: number): Float32Array {
  const xs = hugeEnds(r.floats(T * K), K);
  for (let i = 1; i < xs.length; i += 7) xs[i] = r.pick([-0, 2 ** -140, -(2 ** -120), 2 ** -100]); // products below 2^-126 are f32 subnormals
  return xs;
}

/** Each of `tokens` rows of `product` over all T rows of `a` [T, width] equals that row's product alone. */
function expectRowsAsAlone(product: (a: Tensor) => Tensor, a: Float32Array, T: number, width: number, tokens: readonly number[], what: string): void {
  const batch = bits(product(cpu.upload(a, [T, width])));
  const outWidth = batch.length / T;
  for (const t of tokens) {
    const alone = bits(product(cpu.upload(a.slice(t * width, (t + 1) * width), [1, width])));
    expect(batch.slice(t * outWidth, (t + 1) * outWidth), `${what}, token ${t}`).toEqual(alone);
  }
}

/**
 * Each output of an f32-sum reference is its products (`products(t, o)`) summed in order, each sum rounded to f32;
 * and most differ from the f64 sums (cancelling inputs), so the two references cannot be mistaken for each other.
 */
function expectPlainF32Loop(f32Sums: Float32Array, f64Sums: Float32Array, T: number, products: (t: number, o: number) => number[]): void {
  const outWidth = f32Sums.length / T;
  let differ = 0;
  for (let t = 0; t < T; t++)
    for (let o = 0; o < outWidth; o++) {
      expect(f32Sums[t * outWidth + o]).toBe(products(t, o).reduce((sum, p) => Math.fround(sum + p), 0));
      if (f32Sums[t * outWidth + o] !== f64Sums[t * outWidth + o]) differ++;
    }
  expect(differ).toBeGreaterThan(f32Sums.length / 2);
}

describe('matmulF32 equals matmulF32Reference bit for bit', () => {
  it('holds its arrays past 2 GiB of the arena', () => {
    expect(ballast!.length).toBe(2 ** 29 + 2 ** 20);
    expect(f32Of(cpu.uploadWeight(new Float32Array(8), [2, 4], 'f32')).byteOffset).toBeGreaterThan(2 ** 31);
  });

  it('hand-computed: 1 + 2^-24 + 2^-24 sums to 1 in f32 (each add rounds back to 1), 1 + 2^-23 in f64', () => {
    for (const storage of ['f32', 'f16'] as const) {
      const x = cpu.upload(Float32Array.of(1, 2 ** -24, 2 ** -24), [1, 3]);
      const w = cpu.uploadWeight(Float32Array.of(1, 1, 1), [1, 3], storage);
      expect(f32Of(matmulF32(x, w))[0], storage).toBe(1);
      expect(f32Of(matmulF32Reference(x, w))[0]).toBe(1);
      expect(f32Of(matmulReference(x, w))[0]).toBe(1 + 2 ** -23); // the f64 sums the shipped kernels equal
      expect(hasRowBlocks(w), storage).toBe(storage === 'f16');
    }
  });

  it('over shapes around the tiles, f16 (row blocks) and f32 (row-major) weights, with and without bias, at 1-4 threads', () => {
    const r = random('f32 sums');
    let trial = 0;
    for (const N of [1, 15, 16, 17, 37, 64])
      for (const K of [1, 3, 17, 64, 96])
        for (const T of [1, 2, 3, 8, 9]) {
          trial++;
          const storage = trial % 2 ? 'f16' : 'f32';
          const ws = sameEndColumns(r.floats(N * K, 4), K);
          if (trial % 3 === 0) [ws[0], ws[ws.length >> 1], ws[ws.length - 1]] = [2 ** -20, -0, -(2 ** -17)]; // f16 subnormals, -0
          const w = weight(ws, N, K, storage, trial % 4 !== 2);
          const x = cpu.upload(inputs(r, T, K), [T, K]);
          const bias = trial % 5 < 3 ? cpu.upload(Float32Array.from(r.floats(N), (v, n) => (n % 4 === 1 ? -0 : v)), [N]) : undefined;
          const what = `T ${T}, N ${N}, K ${K}, ${storage}${bias ? ', bias' : ''}`;
          const expected = bits(matmulF32Reference(x, w, bias));
          expect(bits(matmulF32(x, w, bias, ONE_THREAD)), what).toEqual(expected);
          expect(hasRowBlocks(w), what).toBe(storage === 'f16');
          for (const threads of THREADS) expect(bits(matmulF32(x, w, bias, threads)), `${what}, ${threads.count} threads`).toEqual(expected);
        }
  });

  it('x past the row blocks\' budget takes the row-major kernel, f16 weights too', () => {
    const r = random('f32 sums, long x');
    const [N, K] = [37, 96];
    const T = Math.floor(MAX_BLOCK_X_BYTES / (K * 4)) + 5; // 1,370 tokens: not a multiple of 8 (nor of the token blocks)
    for (const storage of ['f16', 'f32'] as const) {
      const w = cpu.uploadWeight(sameEndColumns(r.floats(N * K, 4), K), [N, K], storage);
      const x = cpu.upload(inputs(r, T, K), [T, K]);
      const bias = cpu.upload(r.floats(N), [N]);
      const expected = bits(matmulF32Reference(x, w, bias));
      for (const threads of [ONE_THREAD, THREADS[2]!]) expect(bits(matmulF32(x, w, bias, threads)), `${storage}, ${threads.count} threads`).toEqual(expected);
      expect(hasRowBlocks(w), storage).toBe(false);
    }
  });

  it('K past a chunk of the row-major kernel (1,024 steps) and T past its token block (64): sums go on across chunks, the bias added once', () => {
    const r = random('f32 sums, chunks');
    const [N, K, T] = [21, 2100, 70]; // chunks of 1,024, 1,024, 52 steps; token blocks of 64 and 8 (Tpad 72)
    for (const storage of ['f16', 'f32'] as const) {
      const w = cpu.uploadWeight(sameEndColumns(r.floats(N * K, 4), K), [N, K], storage);
      const x = cpu.upload(inputs(r, T, K), [T, K]);
      const bias = cpu.upload(r.floats(N), [N]);
      const expected = bits(matmulF32Reference(x, w, bias));
      for (const threads of [ONE_THREAD, THREADS[2]!]) expect(bits(matmulF32(x, w, bias, threads)), `${storage}, ${threads.count} threads`).toEqual(expected);
    }
  });

  it('a sequence gives the same row alone and at any place in a batch (tiles of 2 and 1 tokens, of 8 and padding)', () => {
    const r = random('f32 sums, batch');
    const [N, K, T] = [37, 64, 11];
    for (const storage of ['f16', 'f32'] as const) {
      const w = cpu.uploadWeight(sameEndColumns(r.floats(N * K, 4), K), [N, K], storage);
      expectRowsAsAlone((x) => matmulF32(x, w), inputs(r, T, K), T, K, [0, 1, 7, 8, 10], storage);
    }
  });

  it('the reference is the plain f32 loop (k ascending, each product and sum rounded), not the f64 sums', () => {
    const r = random('f32 sums, references');
    const [T, N, K] = [3, 16, 64];
    const x = cpu.upload(inputs(r, T, K), [T, K]);
    const w = cpu.uploadWeight(sameEndColumns(r.floats(N * K, 4), K), [N, K], 'f32');
    const [xs, ws] = [f32Of(x), f32Of(w)];
    expectPlainF32Loop(f32Of(matmulF32Reference(x, w)), f32Of(matmulReference(x, w)), T, (t, n) => Array.from({ length: K }, (_, k) => Math.fround(xs[t * K + k]! * ws[n * K + k]!)));
  });
});

describe('matmulBackwardF32 equals matmulBackwardF32Reference bit for bit', () => {
  it('hand-computed: dy = [1, 2^-24, 2^-24] against a w of ones [3, 1] sums to 1 in f32, 1 + 2^-23 in f64', () => {
    for (const storage of ['f32', 'f16'] as const) {
      const dy = cpu.upload(Float32Array.of(1, 2 ** -24, 2 ** -24), [1, 3]);
      const w = cpu.uploadWeight(Float32Array.of(1, 1, 1), [3, 1], storage);
      expect(f32Of(matmulBackwardF32(dy, w))[0], storage).toBe(1);
      expect(f32Of(matmulBackwardF32Reference(dy, w))[0]).toBe(1);
      expect(f32Of(matmulBackwardReference(dy, w))[0]).toBe(1 + 2 ** -23); // the f64 sums the shipped kernels equal
    }
  });

  it('over shapes around the tiles and token blocks, f16 and f32 weights, in the arena and not, at 1-4 threads', () => {
    const r = random('f32 sums, backward');
    let trial = 0;
    // [T, N]: T past 8 (several tiles), past 64 (several token blocks), and N = 2,000 past the chunks of 512 steps
    const tokens: Array<[number, number]> = [[1, 1], [2, 3], [9, 17], [8, 64], [3, 96], [150, 37], [90, 2000]];
    for (const [T, N] of tokens)
      for (const K of [1, 3, 4, 5, 17, 37]) {
        trial++;
        const storage = trial % 2 ? 'f16' : 'f32';
        const ws = sameEndRows(r.floats(N * K, 4), N, K);
        if (trial % 3 === 0) [ws[0], ws[ws.length >> 1], ws[ws.length - 1]] = [2 ** -20, -0, -(2 ** -17)]; // f16 subnormals, -0
        const w = weight(ws, N, K, storage, trial % 4 !== 2);
        const dy = cpu.upload(inputs(r, T, N), [T, N]);
        const what = `T ${T}, N ${N}, K ${K}, ${storage}`;
        const expected = bits(matmulBackwardF32Reference(dy, w));
        expect(bits(matmulBackwardF32(dy, w, ONE_THREAD)), what).toEqual(expected);
        for (const threads of THREADS) expect(bits(matmulBackwardF32(dy, w, threads)), `${what}, ${threads.count} threads`).toEqual(expected);
      }
  });

  it('a sequence gives the same row alone and at any place in a batch (tiles of 8 tokens and padding)', () => {
    const r = random('f32 sums, backward batch');
    const [N, K, T] = [37, 21, 11];
    for (const storage of ['f16', 'f32'] as const) {
      const w = cpu.uploadWeight(sameEndRows(r.floats(N * K, 4), N, K), [N, K], storage);
      expectRowsAsAlone((dy) => matmulBackwardF32(dy, w), inputs(r, T, N), T, N, [0, 7, 8, 10], storage);
    }
  });

  it('the reference is the plain f32 loop (n ascending, each product and sum rounded), not the f64 sums', () => {
    const r = random('f32 sums, backward references');
    const [T, N, K] = [3, 64, 16];
    const dy = cpu.upload(inputs(r, T, N), [T, N]);
    const w = cpu.uploadWeight(sameEndRows(r.floats(N * K, 4), N, K), [N, K], 'f32');
    const [g, ws] = [f32Of(dy), f32Of(w)];
    expectPlainF32Loop(f32Of(matmulBackwardF32Reference(dy, w)), f32Of(matmulBackwardReference(dy, w)), T, (t, k) => Array.from({ length: N }, (_, n) => Math.fround(g[t * N + n]! * ws[n * K + k]!)));
  });
});
