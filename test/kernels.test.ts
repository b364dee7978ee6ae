// Every WGSL kernel against the CPU reference, on shapes that are not multiples of the workgroup sizes,
// and batch invariance: a row computed alone is bit-identical to the same row among many others.
import seedrandom from 'seedrandom';
import { describe, expect, it } from 'vitest';
import type { Backend, KvCache, SampleRow, Tensor } from '../src/backend/backend.js';
import { CpuBackend } from '../src/backend/cpu.js';
import { maxAbs, maxAbsDiff } from './reference-llama.js';
import { gpu } from './webgpu.js';

const cpu = new CpuBackend();
const rng = seedrandom('kernels');
const randoms = (n: number, scale = 1) => Float32Array.from({ length: n }, () => (2 * rng() - 1) * scale);
const ints = (n: number, below: number) => Int32Array.from({ length: n }, () => Math.floor(rng() * below));
const bits = (a: Float32Array) => Array.from(new Uint32Array(a.buffer, a.byteOffset, a.length));

/** max |gpu − cpu| <= tol · (1 + max |cpu|) */
function expectClose(actual: Float32Array, reference: Float32Array, tol = 1e-5): void {
  expect(actual.length).toBe(reference.length);
  expect(maxAbsDiff(actual, reference)).toBeLessThanOrEqual(tol * (1 + maxAbs(reference)));
}

/** Runs `op` on both backends with the same host inputs, returning both results as f32. */
async function both(op: (b: Backend) => Tensor): Promise<[Float32Array, Float32Array]> {
  return [await gpu!.readF32(op(gpu!)), await cpu.readF32(op(cpu))];
}

function rowsOf(data: Float32Array, cols: number, rows: number[]): Float32Array {
  const out = new Float32Array(rows.length * cols);
  rows.forEach((r, i) => out.set(data.subarray(r * cols, (r + 1) * cols), i * cols));
  return out;
}

describe.skipIf(!gpu)('WGSL kernels against the CPU reference', () => {
  const b = gpu!;

  it.each([
    [1, 1, 1], [7, 3, 5], [70, 67, 33], [9, 130, 17], [33, 64, 8],
  ])('matmul T=%i K=%i N=%i, f32 and f16 weights, with and without bias', async (T, K, N) => {
    const [x, w, bias] = [randoms(T * K), randoms(N * K), randoms(N)];
    for (const storage of ['f32', 'f16'] as const) {
      const [g, c] = await both((be) => be.matmul(be.upload(x, [T, K]), be.uploadWeight(w, [N, K], storage)));
      expectClose(g, c);
      const [gb, cb] = await both((be) => be.matmul(be.upload(x, [T, K]), be.uploadWeight(w, [N, K], storage), be.upload(bias, [N])));
      expectClose(gb, cb);
    }
  });

  it('matmul rows are bit-identical alone and in a batch of 64', async () => {
    const [T, K, N] = [64, 131, 37];
    const [x, w] = [randoms(T * K), randoms(N * K)];
    for (const storage of ['f32', 'f16'] as const) {
      const weight = b.uploadWeight(w, [N, K], storage);
      const batch = await b.readF32(b.matmul(b.upload(x, [T, K]), weight));
      for (const row of [0, 9, 63]) {
        const alone = await b.readF32(b.matmul(b.upload(x.slice(row * K, (row + 1) * K), [1, K]), weight));
        expect(bits(alone)).toEqual(bits(rowsOf(batch, N, [row])));
      }
    }
  });

  it('embedding (f32, f16) and gatherRows', async () => {
    const [V, D] = [19, 13];
    const table = randoms(V * D);
    const tokens = ints(11, V);
    for (const storage of ['f32', 'f16'] as const) expectClose(...(await both((be) => be.embedding(be.uploadWeight(table, [V, D], storage), be.uploadI32(tokens, [11])))));
    expectClose(...(await both((be) => be.gatherRows(be.upload(table, [V, D]), be.uploadI32(Int32Array.from([18, 0, 5, 5]), [4])))));
  });

  it('rmsNorm, add, swiglu and rope on odd sizes', async () => {
    const [T, D] = [5, 301];
    const [x, y, w] = [randoms(T * D, 3), randoms(T * D, 3), randoms(D)];
    expectClose(...(await both((be) => be.rmsNorm(be.upload(x, [T, D]), be.upload(w, [D]), 1e-5))));
    expectClose(...(await both((be) => be.swiglu(be.upload(x, [T, D]), be.upload(y, [T, D])))));
    expectClose(...(await both((be) => {
      const acc = be.upload(x, [T, D]);
      be.addInPlace(acc, be.upload(y, [T, D]));
      return acc;
    })));
    const [heads, headDim, maxLen] = [3, 10, 40];
    const q = randoms(T * heads * headDim);
    const table = randoms(maxLen * headDim);
    const positions = ints(T, maxLen);
    expectClose(...(await both((be) => {
      const t = be.upload(q, [T, heads * headDim]);
      be.ropeInPlace(t, be.uploadI32(positions, [T]), be.upload(table, [maxLen, headDim]), heads, headDim);
      return t;
    })));
  });

  function attentionCase(be: Backend, layer: number): { cache: KvCache; out: Tensor } {
    const dims = { layers: 2, slots: 3, maxLen: 70, kvHeads: 2, headDim: 12 };
    const heads = 6; // GQA: 3 query heads per kv head
    const width = dims.kvHeads * dims.headDim;
    const cache = be.createKvCache(dims);
    const attnRng = seedrandom('attention');
    const values = (n: number) => Float32Array.from({ length: n }, () => 2 * attnRng() - 1);
    // Fill slot 0 up to 69 and slot 2 up to 10, then attend from a mixture of positions.
    const slots = Int32Array.from([...Array(70).fill(0), ...Array(11).fill(2)]);
    const positions = Int32Array.from([...Array(70).keys(), ...Array(11).keys()]);
    const T = slots.length;
    be.kvWrite(cache, layer, be.upload(values(T * width), [T, width]), be.upload(values(T * width), [T, width]), be.uploadI32(slots, [T]), be.uploadI32(positions, [T]));
    const query = Int32Array.from([0, 69, 33, 2, 10]);
    const querySlots = Int32Array.from([0, 0, 0, 2, 2]);
    const out = be.attention(be.upload(values(5 * heads * dims.headDim), [5, heads * dims.headDim]), cache, layer, be.uploadI32(querySlots, [5]), be.uploadI32(query, [5]), heads);
    return { cache, out };
  }

  it('kvWrite then GQA attention over several slots and positions', async () => {
    const [g, c] = [attentionCase(b, 1), attentionCase(cpu, 1)];
    expectClose(await b.readF32(g.out), await cpu.readF32(c.out));
    expectClose(await b.readF32(g.cache.k), await cpu.readF32(c.cache.k), 0);
  });

  it('lora shrink and expand with mixed adapters, including none (-1)', async () => {
    const [T, K, N, rank, slots] = [9, 45, 23, 5, 3];
    const [x, a, bb, y0] = [randoms(T * K), randoms(slots * rank * K), randoms(slots * N * rank), randoms(T * N)];
    const adapters = Int32Array.from([0, -1, 2, 1, 1, -1, 0, 2, 2]);
    const scales = Float32Array.from([0.5, 2, -1]);
    const run = (be: Backend) => {
      const ids = be.uploadI32(adapters, [T]);
      const h = be.loraShrink(be.upload(x, [T, K]), be.upload(a, [slots * rank, K]), ids, rank);
      const y = be.upload(y0, [T, N]);
      be.loraExpandInPlace(y, h, be.upload(bb, [slots * N, rank]), ids, be.upload(scales, [slots]));
      return y;
    };
    const [g, c] = await both(run);
    expectClose(g, c);
    expect(bits(rowsOf(g, N, [1, 5]))).toEqual(bits(rowsOf(y0, N, [1, 5]))); // rows without an adapter untouched
    const alone = await b.readF32((() => {
      const ids = b.uploadI32(Int32Array.from([2]), [1]);
      const h = b.loraShrink(b.upload(x.slice(2 * K, 3 * K), [1, K]), b.upload(a, [slots * rank, K]), ids, rank);
      const y = b.upload(y0.slice(2 * N, 3 * N), [1, N]);
      b.loraExpandInPlace(y, h, b.upload(bb, [slots * N, rank]), ids, b.upload(scales, [slots]));
      return y;
    })());
    expect(bits(alone)).toEqual(bits(rowsOf(g, N, [2])));
  });

  it('sample: greedy exactly, temperature/top-p as the reference, masks respected, batch-invariant', async () => {
    const [M, V] = [40, 301];
    const logits = randoms(M * V, 4);
    const rows: SampleRow[] = Array.from({ length: M }, (_, m) => ({ temperature: m % 4 === 0 ? 0 : 0.5 + (m % 3) * 0.4, topP: m % 2 ? 0.8 : 1, seed: 99, requestId: 1000 + m, position: m * 7 }));
    const sample = async (be: Backend, mask?: Int32Array) => be.readI32(be.sample(be.upload(logits, [M, V]), rows, mask && be.uploadI32(mask, [M, mask.length / M])));
    const [g, c] = [await sample(b), await sample(cpu)];
    rows.forEach((r, m) => r.temperature === 0 && expect(g[m]).toBe(c[m]));
    // Sums in a different order can move a draw that lands within float rounding of a boundary; allow one.
    expect(Array.from(g).filter((token, m) => token !== c[m]).length).toBeLessThanOrEqual(1);

    const words = Math.ceil(V / 32);
    const mask = new Int32Array(M * words);
    for (let m = 0; m < M; m++) for (let v = m % 3; v < V; v += 3) mask[m * words + (v >>> 5)]! |= 1 << (v & 31);
    const masked = await sample(b, mask);
    masked.forEach((token, m) => expect(token % 3).toBe(m % 3));

    for (const m of [0, 5, 39]) {
      const alone = await b.readI32(b.sample(b.upload(logits.slice(m * V, (m + 1) * V), [1, V]), [rows[m]!]));
      expect(alone[0]).toBe(g[m]);
    }
  });

  it('gives the same bits when the same call runs twice, and after buffers are recycled', async () => {
    const [T, K, N] = [6, 50, 29];
    const [x, w] = [randoms(T * K), randoms(N * K)];
    const weight = b.uploadWeight(w, [N, K], 'f16');
    const first = await b.readF32(b.matmul(b.upload(x, [T, K]), weight));
    for (let i = 0; i < 5; i++) {
      const junk = b.upload(randoms(T * N), [T, N]);
      b.free(junk); // the next output reuses this buffer
    }
    const again = await b.readF32(b.matmul(b.upload(x, [T, K]), weight));
    expect(bits(again)).toEqual(bits(first));
  });

  it('reports a shape mismatch by name', () => {
    expect(() => b.matmul(b.upload(randoms(6), [2, 3]), b.uploadWeight(randoms(8), [2, 4], 'f32'))).toThrow(/matmul: x has 3 columns but the weight has 4/);
    expect(() => b.upload(randoms(5), [2, 3])).toThrow(/5 values for shape \[2, 3\]/);
  });
});
