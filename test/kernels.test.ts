// Every WGSL kernel against the CPU reference (the oracle), on shapes that are not multiples of the workgroup
// sizes, and the batch-invariance property of DESIGN.md rule 3: a row computed alone is bit-identical to the
// same row computed among 64 others.
//
// Tolerance: max |gpu − cpu| <= tol · (1 + max |cpu|), tol = 1e-4 for f32 sums (the CPU accumulates in f64, the
// GPU in f32 in another order). f16-stored weights need no looser bound here: both backends hold exactly the same
// f16-rounded values (checked bit for bit below), so only the summation differs.
import seedrandom from 'seedrandom';
import { afterAll, describe, expect, it } from 'vitest';
import { MAX_CONTEXT, single, uploadStepRows, type Backend, type KvCache, type SampleRow, type Tensor, type WeightStorage } from '../src/backend/backend.js';
import { CpuBackend } from '../src/backend/cpu.js';
import { roundToF16 } from '../src/backend/half.js';
import { createWebGpuBackend } from '../src/backend/webgpu.js';
import { gpu } from './webgpu.js';

const TOLERANCE = 1e-4;
const STORAGES: WeightStorage[] = ['f32', 'f16'];
const cpu = new CpuBackend();

/** Seeded draws; each test makes its own stream so tests do not shift one another. */
function random(name: string) {
  const rng = seedrandom(name);
  return {
    floats: (n: number, scale = 1) => Float32Array.from({ length: n }, () => (2 * rng() - 1) * scale),
    ints: (n: number, below: number) => Int32Array.from({ length: n }, () => Math.floor(rng() * below)),
    pick: <T>(options: readonly T[]) => options[Math.floor(rng() * options.length)]!,
  };
}

const bits = (a: Float32Array) => Array.from(new Uint32Array(a.buffer, a.byteOffset, a.length));
const rowOf = (data: Float32Array, cols: number, row: number) => data.slice(row * cols, (row + 1) * cols);

function expectClose(actual: Float32Array, reference: Float32Array, tol = TOLERANCE): void {
  expect(actual.length).toBe(reference.length);
  let [diff, scale] = [0, 0];
  for (let i = 0; i < actual.length; i++) {
    diff = Math.max(diff, Math.abs(actual[i]! - reference[i]!));
    scale = Math.max(scale, Math.abs(reference[i]!));
  }
  expect(Number.isNaN(diff)).toBe(false);
  expect(diff).toBeLessThanOrEqual(tol * (1 + scale));
}

/** Runs `op` on both backends from the same host inputs; returns [gpu, cpu] results. */
async function both(op: (b: Backend) => Tensor): Promise<[Float32Array, Float32Array]> {
  return [await gpu!.readF32(op(gpu!)), await cpu.readF32(op(cpu))];
}

// Kernels with two thread layouts (attention.wgsl; linear.wgsl in fused.test.ts) run both, whatever the adapter.
const layouts = gpu && { gpu: await createWebGpuBackend({ layout: 'gpu' }), cpu: await createWebGpuBackend({ layout: 'cpu' }) };
afterAll(() => Object.values(layouts || {}).forEach((be) => be.destroy()));

describe.skipIf(!gpu)('WGSL kernels against the CPU reference', () => {
  const b = gpu!;

  it('describes its device in one line', () => {
    expect(b.name).toBe('webgpu');
    expect(b.deviceDescription.length).toBeGreaterThan(0);
    expect(b.deviceDescription).not.toContain('\n');
  });

  it.each(STORAGES)('matmul with %s weights, with and without bias, T in {1, 7, 70} x K in {1, 3, 67, 130} x N in {1, 5, 33}', async (storage) => {
    const r = random(`matmul ${storage}`);
    for (const T of [1, 7, 70]) {
      for (const K of [1, 3, 67, 130]) {
        for (const N of [1, 5, 33]) {
          const [x, w, bias] = [r.floats(T * K), r.floats(N * K), r.floats(N)];
          expectClose(...(await both((be) => be.matmul(be.upload(x, [T, K]), be.uploadWeight(w, [N, K], storage)))));
          expectClose(...(await both((be) => be.matmul(be.upload(x, [T, K]), be.uploadWeight(w, [N, K], storage), be.upload(bias, [N])))));
        }
      }
    }
  });

  it('holds f16 weights exactly as the CPU rounds them (round to nearest even), odd column counts included', async () => {
    const r = random('f16 storage');
    const values = Float32Array.from([...r.floats(40, 10), 65504, 65520, 1e-8, -6.1e-5, 2 ** -24, 0.1, 1 / 3]); // 47 values
    for (const shape of [[1, 47], [47, 1]] as [number, number][]) {
      const stored = await b.readF32(b.uploadWeight(values, shape, 'f16'));
      expect(bits(stored)).toEqual(bits(roundToF16(values)));
    }
  });

  it('embedding (f32 and f16 tables) and gatherRows copy rows exactly', async () => {
    const r = random('embedding');
    const [V, D, M] = [19, 13, 11];
    const table = r.floats(V * D);
    const tokens = r.ints(M, V);
    for (const storage of STORAGES) {
      const [g, c] = await both((be) => be.embedding(be.uploadWeight(table, [V, D], storage), be.uploadI32(tokens, [M])));
      expect(bits(g)).toEqual(bits(c));
    }
    const rows = Int32Array.from([18, 0, 5, 5]);
    const [g, c] = await both((be) => be.gatherRows(be.upload(table, [V, D]), be.uploadI32(rows, [4])));
    expect(bits(g)).toEqual(bits(c));
  });

  it('rmsNorm, addInPlace, swiglu and rope on odd sizes', async () => {
    const r = random('elementwise');
    for (const [T, D] of [[1, 1], [7, 3], [70, 301], [2, 1000]] as const) {
      const [x, y, w] = [r.floats(T * D, 3), r.floats(T * D, 3), r.floats(D)];
      expectClose(...(await both((be) => be.rmsNorm(be.upload(x, [T, D]), be.upload(w, [D]), 1e-5))));
      expectClose(...(await both((be) => be.swiglu(be.upload(x, [T, D]), be.upload(y, [T, D])))));
      const [sumGpu, sumCpu] = await both((be) => {
        const acc = be.upload(x, [T, D]);
        be.addInPlace(acc, be.upload(y, [T, D]));
        return acc;
      });
      expect(bits(sumGpu)).toEqual(bits(sumCpu)); // one f32 addition: exact
    }
    for (const [T, heads, headDim] of [[1, 1, 2], [7, 3, 10], [70, 2, 64]] as const) {
      const maxLen = 90;
      const [q, table, positions] = [r.floats(T * heads * headDim), r.floats(maxLen * headDim), r.ints(T, maxLen)];
      expectClose(...(await both((be) => {
        const t = be.upload(q, [T, heads * headDim]);
        be.ropeInPlace(t, be.uploadI32(positions, [T]), be.upload(table, [maxLen, headDim]), heads, headDim);
        return t;
      })));
    }
  });

  /** A KV cache whose slots are filled by kvWrite for positions 0..fill[s]-1, with seeded keys and values. */
  function filledCache(be: Backend, name: string, dims: Omit<KvCache, 'k' | 'v'>, fill: number[], layer: number): KvCache {
    const r = random(name);
    const width = dims.kvHeads * dims.headDim;
    const cache = be.createKvCache(dims);
    const slots = Int32Array.from(fill.flatMap((n, s) => Array<number>(n).fill(s)));
    const positions = Int32Array.from(fill.flatMap((n) => [...Array(n).keys()]));
    const T = slots.length;
    be.kvWrite(cache, layer, be.upload(r.floats(T * width), [T, width]), be.upload(r.floats(T * width), [T, width]), be.uploadI32(slots, [T]), be.uploadI32(positions, [T]));
    return cache;
  }

  it.each([
    // GQA (3 query heads per kv head), three slots, contexts past the 64 threads of a workgroup
    { layers: 2, slots: 3, maxLen: 300, kvHeads: 2, headDim: 12, heads: 6, fill: [300, 0, 11], layer: 1 },
    // a layer size that is not a multiple of the storage offset alignment: the whole cache is bound
    { layers: 3, slots: 3, maxLen: 5, kvHeads: 1, headDim: 6, heads: 2, fill: [5, 2, 1], layer: 2 },
    // multi-head (no grouping), one slot, head size 64
    { layers: 1, slots: 1, maxLen: 40, kvHeads: 2, headDim: 64, heads: 2, fill: [40], layer: 0 },
  ])('kvWrite then attention, both thread layouts: $heads heads over $kvHeads kv heads, head size $headDim, layer $layer', async ({ heads, fill, layer, ...dims }) => {
    const r = random(`attention ${dims.maxLen}`);
    const queries = fill.flatMap((n, s) => (n === 0 ? [] : [[s, 0], [s, n - 1], [s, Math.floor(n / 2)]]));
    const [slots, positions] = [Int32Array.from(queries.map((q) => q[0]!)), Int32Array.from(queries.map((q) => q[1]!))];
    const T = queries.length;
    const q = r.floats(T * heads * dims.headDim, 2);
    const run = (be: Backend) => {
      const cache = filledCache(be, `cache ${dims.maxLen}`, dims, fill, layer);
      return { cache, out: be.attention(be.upload(q, [T, heads * dims.headDim]), cache, layer, be.uploadI32(slots, [T]), be.uploadI32(positions, [T]), heads) };
    };
    const c = run(cpu);
    for (const be of [layouts!.gpu, layouts!.cpu]) {
      const g = run(be);
      expectClose(await be.readF32(g.out), await cpu.readF32(c.out));
      expect(bits(await be.readF32(g.cache.k))).toEqual(bits(await cpu.readF32(c.cache.k))); // kvWrite is a copy
      expect(bits(await be.readF32(g.cache.v))).toEqual(bits(await cpu.readF32(c.cache.v)));
      [g.cache.k, g.cache.v, g.out].forEach((t) => be.free(t));
    }
  });

  it.each(STORAGES)('loraShrink and loraExpandInPlace with %s banks and mixed adapters, including none (-1)', async (storage) => {
    const r = random(`lora ${storage}`);
    for (const [T, K, N, rank] of [[9, 45, 23, 5], [1, 3, 1, 1], [70, 67, 33, 16], [7, 130, 5, 9]] as const) {
      const slots = 3;
      const [x, a, bb, y0] = [r.floats(T * K), r.floats(slots * rank * K), r.floats(slots * N * rank), r.floats(T * N)];
      const adapters = Int32Array.from({ length: T }, (_, t) => (t === 1 ? -1 : r.pick([-1, 0, 1, 2])));
      const scales = Float32Array.from([0.5, 2, -1]);
      const shrink = (be: Backend) => be.loraShrink(be.upload(x, [T, K]), be.uploadWeight(a, [slots * rank, K], storage), be.uploadI32(adapters, [T]), rank);
      const [hGpu, hCpu] = await both(shrink);
      expectClose(hGpu, hCpu);
      const [yGpu, yCpu] = await both((be) => {
        const y = be.upload(y0, [T, N]);
        be.loraExpandInPlace(y, be.upload(hCpu, [T, rank]), be.uploadWeight(bb, [slots * N, rank], storage), be.uploadI32(adapters, [T]), be.upload(scales, [slots]));
        return y;
      });
      expectClose(yGpu, yCpu);
      for (let t = 0; t < T; t++) {
        if (adapters[t]! >= 0) continue;
        expect(bits(rowOf(hGpu, rank, t))).toEqual(bits(new Float32Array(rank))); // no adapter: h = 0
        expect(bits(rowOf(yGpu, N, t))).toEqual(bits(rowOf(y0, N, t))); // and y untouched
      }
    }
  });

  it.each(STORAGES)("loraShrink's and loraExpandInPlace's two thread layouts make the same sums, bit for bit, with %s banks", async (storage) => {
    const r = random(`lora layouts ${storage}`);
    const cpuLayouts = await Promise.all([1, 8].map((serialUnits) => createWebGpuBackend({ layout: 'cpu', serialUnits })));
    // tiles of 8 rows of one adapter, of several, of none; odd K past several 32-lane rounds; rank past 64 threads;
    // N past a workgroup's columns
    for (const [T, K, N, rank] of [[37, 601, 133, 16], [20, 64, 700, 5], [1, 3, 1, 1], [11, 130, 9, 70]] as const) {
      const slots = 3;
      const [x, a, bb, y0] = [r.floats(T * K), r.floats(slots * rank * K), r.floats(slots * N * rank), r.floats(T * N)];
      const adapters = Int32Array.from({ length: T }, (_, t) => (t < 16 ? [2, 0][t >> 3]! : t % 7 === 0 ? -1 : r.pick([-1, 0, 1, 2])));
      const scales = Float32Array.from([0.5, 2, -1]);
      const run = async (be: Backend) => {
        const ids = be.uploadI32(adapters, [T]);
        const h = be.loraShrink(be.upload(x, [T, K]), be.uploadWeight(a, [slots * rank, K], storage), ids, rank);
        const y = be.upload(y0, [T, N]);
        be.loraExpandInPlace(y, h, be.uploadWeight(bb, [slots * N, rank], storage), ids, be.upload(scales, [slots]));
        return [bits(await be.readF32(h)), bits(await be.readF32(y))];
      };
      const reference = await run(layouts!.gpu);
      for (const be of [layouts!.cpu, ...cpuLayouts]) expect(await run(be)).toEqual(reference);
    }
    cpuLayouts.forEach((be) => be.destroy());
  });

  describe('sample', () => {
    const [M, V] = [160, 517];
    const r = random('sample');
    const logits = r.floats(M * V, 4);
    const rows: SampleRow[] = Array.from({ length: M }, (_, m) => ({
      temperature: [0, 0.3, 0.7, 1, 1.6][m % 5]!,
      topP: [1, 0.95, 0.5, 0.1][Math.floor(m / 5) % 4]!,
      seed: 12345,
      requestId: 1000 + m,
      position: m * 7,
    }));
    const draw = (be: Backend, l: Float32Array, rs: SampleRow[], mask?: Int32Array) =>
      be.readI32(be.sample(be.upload(l, [rs.length, V]), rs, mask && be.uploadI32(mask, [rs.length, Math.ceil(V / 32)])));

    it('draws the CPU reference token on every row: greedy, temperature and top-p', async () => {
      const [g, c] = [await draw(b, logits, rows), await draw(cpu, logits, rows)];
      expect(Array.from(g)).toEqual(Array.from(c));
      expect(new Set(g).size).toBeGreaterThan(M / 2); // really sampling, not always the argmax
    });

    it('respects the token mask: a masked-out maximum is never chosen', async () => {
      const words = Math.ceil(V / 32);
      const mask = new Int32Array(M * words);
      const peaked = logits.slice();
      for (let m = 0; m < M; m++) {
        peaked[m * V + (m * 13) % V] = 50; // the maximum, masked out below
        for (let v = m % 3; v < V; v += 3) if (v !== (m * 13) % V) mask[m * words + (v >>> 5)]! |= 1 << (v & 31);
      }
      const [g, c] = [await draw(b, peaked, rows, mask), await draw(cpu, peaked, rows, mask)];
      expect(Array.from(g)).toEqual(Array.from(c));
      g.forEach((token, m) => {
        expect(token % 3).toBe(m % 3);
        expect(token).not.toBe((m * 13) % V);
      });
      const none = await draw(b, logits.slice(0, V), [rows[1]!], new Int32Array(words));
      expect(none[0]).toBe(-1); // nothing allowed: -1 (the CPU reference throws)
    });
  });

  describe('batch invariance: a row alone is bit-identical to the same row among 64', () => {
    const T = 64;

    it.each(STORAGES)('matmul with %s weights and bias (decode and batched variants)', async (storage) => {
      const r = random(`invariance matmul ${storage}`);
      const [K, N] = [131, 37];
      const [x, w, bias] = [r.floats(T * K), r.floats(N * K), r.floats(N)];
      const [weight, biasTensor] = [b.uploadWeight(w, [N, K], storage), b.upload(bias, [N])];
      const batch = await b.readF32(b.matmul(b.upload(x, [T, K]), weight, biasTensor));
      for (let t = 0; t < T; t++) {
        const alone = await b.readF32(b.matmul(b.upload(rowOf(x, K, t), [1, K]), weight, biasTensor));
        expect(bits(alone)).toEqual(bits(rowOf(batch, N, t)));
      }
      const pair = await b.readF32(b.matmul(b.upload(x.slice(5 * K, 7 * K), [2, K]), weight, biasTensor));
      expect(bits(pair)).toEqual(bits(batch.slice(5 * N, 7 * N))); // rows landing in another tile position
    });

    it.each(['gpu', 'cpu'] as const)('rmsNorm, %s layout: close to the CPU reference, a row alone the same bits', async (layout) => {
      const be = layouts![layout];
      const r = random('invariance rmsnorm');
      const D = 301;
      const [x, weights] = [r.floats(T * D, 3), r.floats(D)];
      const w = be.upload(weights, [D]);
      const batch = await be.readF32(be.rmsNorm(be.upload(x, [T, D]), w, 1e-6));
      expectClose(batch, await cpu.readF32(cpu.rmsNorm(cpu.upload(x, [T, D]), cpu.upload(weights, [D]), 1e-6)));
      for (let t = 0; t < T; t += 9) expect(bits(await be.readF32(be.rmsNorm(be.upload(rowOf(x, D, t), [1, D]), w, 1e-6)))).toEqual(bits(rowOf(batch, D, t)));
    });


    it.each(['gpu', 'cpu'] as const)('attention over mixed slots and positions, %s layout', async (layout) => {
      const b = layouts![layout];
      const r = random('invariance attention');
      const dims = { layers: 1, slots: 4, maxLen: 150, kvHeads: 2, headDim: 16 };
      const heads = 4;
      const cache = filledCache(b, 'invariance cache', dims, [150, 3, 77, 150], 0);
      const slots = r.ints(T, 4);
      const positions = Int32Array.from(slots, (s) => Math.floor(r.floats(1)[0]! ** 2 * [150, 3, 77, 150][s]!));
      const width = heads * dims.headDim;
      const q = r.floats(T * width);
      const attend = (t0: number, n: number) =>
        b.readF32(b.attention(b.upload(q.slice(t0 * width, (t0 + n) * width), [n, width]), cache, 0, b.uploadI32(slots.slice(t0, t0 + n), [n]), b.uploadI32(positions.slice(t0, t0 + n), [n]), heads));
      const batch = await attend(0, T);
      for (let t = 0; t < T; t++) expect(bits(await attend(t, 1))).toEqual(bits(rowOf(batch, width, t)));
    });

    it('loraShrink and loraExpandInPlace with a different adapter per row', async () => {
      const r = random('invariance lora');
      const [K, N, rank, slots] = [67, 29, 8, 5];
      const [x, y0] = [r.floats(T * K), r.floats(T * N)];
      const adapters = Int32Array.from({ length: T }, () => r.pick([-1, 0, 1, 2, 3, 4]));
      const [a, bank, scales] = [b.upload(r.floats(slots * rank * K), [slots * rank, K]), b.upload(r.floats(slots * N * rank), [slots * N, rank]), b.upload(r.floats(slots), [slots])];
      const apply = async (t0: number, n: number) => {
        const ids = b.uploadI32(adapters.slice(t0, t0 + n), [n]);
        const h = b.loraShrink(b.upload(x.slice(t0 * K, (t0 + n) * K), [n, K]), a, ids, rank);
        const y = b.upload(y0.slice(t0 * N, (t0 + n) * N), [n, N]);
        b.loraExpandInPlace(y, h, bank, ids, scales);
        return [await b.readF32(h), await b.readF32(y)];
      };
      const [hBatch, yBatch] = await apply(0, T);
      for (let t = 0; t < T; t++) {
        const [h, y] = await apply(t, 1);
        expect(bits(h!)).toEqual(bits(rowOf(hBatch!, rank, t)));
        expect(bits(y!)).toEqual(bits(rowOf(yBatch!, N, t)));
      }
    });

    it('sample', async () => {
      const r = random('invariance sample');
      const V = 300;
      const logits = r.floats(T * V, 5);
      const rows: SampleRow[] = Array.from({ length: T }, (_, m) => ({ temperature: r.pick([0, 0.5, 1, 2]), topP: r.pick([1, 0.9, 0.3]), seed: 7, requestId: m, position: 3 * m }));
      const batch = await b.readI32(b.sample(b.upload(logits, [T, V]), rows));
      for (let m = 0; m < T; m++) expect((await b.readI32(b.sample(b.upload(rowOf(logits, V, m), [1, V]), [rows[m]!])))[0]).toBe(batch[m]);
    });
  });

  // The trainer runs rmsNorm then matmul where inference runs the fused linear's norm and product in one; on the
  // CPU layout they make the same sums (both normalise through include/row_rms.wgsl and the same x̂ product), for a
  // lone row (the one-row variant) and for tiles of 16.
  it.each(STORAGES)('cpu layout: rmsNorm then matmul, with %s weights, is the fused linear with its norm, bit for bit', async (storage) => {
    const be = layouts!.cpu;
    const r = random(`norm then matmul ${storage}`);
    const [K, N] = [131, 37];
    const [w, g] = [be.uploadWeight(r.floats(N * K), [N, K], storage), be.upload(r.floats(K), [K])];
    for (const T of [1, 64]) {
      const x = be.upload(r.floats(T * K, 3), [T, K]);
      const rows = uploadStepRows(be, { tokens: new Int32Array(T), slots: new Int32Array(T), positions: new Int32Array(T), adapters: new Int32Array(T).fill(-1), logitRows: Int32Array.from({ length: T }, (_, t) => t) });
      const unfused = await be.readF32(be.matmul(be.rmsNorm(x, g, 1e-6), w));
      expect(bits(await be.readF32(be.linear({ x, w: single(w), norm: { weight: g, eps: 1e-6 } }, rows))), `T ${T}`).toEqual(bits(unfused));
    }
  });

  describe('memory and ordering', () => {
    it('gives the same bits when the same calls run twice', async () => {
      const r = random('twice');
      const [T, K, N] = [6, 50, 29];
      const [x, w, g] = [r.floats(T * K), b.uploadWeight(r.floats(N * K), [N, K], 'f16'), b.upload(r.floats(N), [N])];
      const run = () => b.readF32(b.swiglu(b.rmsNorm(b.matmul(b.upload(x, [T, K]), w), g, 1e-5), b.matmul(b.upload(x, [T, K]), w)));
      expect(bits(await run())).toEqual(bits(await run()));
    });

    it('reuses freed buffers without corrupting pending work', async () => {
      const r = random('free');
      const [T, K, N] = [5, 40, 24];
      const [x1, x2, w] = [r.floats(T * K), r.floats(T * K), r.floats(N * K)];
      const weight = b.uploadWeight(w, [N, K], 'f32');
      const input = b.upload(x1, [T, K]);
      const first = b.matmul(input, weight);
      b.free(input);
      b.free(input); // a second free of the same tensor is ignored
      const reused = b.upload(x2, [T, K]); // takes input's buffer while `first` is still unsubmitted
      const second = b.matmul(reused, weight);
      const scratch = b.matmul(reused, weight);
      b.free(scratch);
      const cleared = b.zeros([T, N]); // takes scratch's buffer, stale values and all
      const cpuWeight = cpu.uploadWeight(w, [N, K], 'f32');
      expectClose(await b.readF32(first), await cpu.readF32(cpu.matmul(cpu.upload(x1, [T, K]), cpuWeight)));
      expectClose(await b.readF32(second), await cpu.readF32(cpu.matmul(cpu.upload(x2, [T, K]), cpuWeight)));
      expect(Array.from(await b.readF32(cleared))).toEqual(Array.from(new Float32Array(T * N)));
    });

    it('orders write() after the work recorded before it', async () => {
      const r = random('write');
      const [T, K, rank] = [3, 20, 4];
      const [x, a0, a1] = [r.floats(T * K), r.floats(rank * K), r.floats(rank * K)];
      const run = async (be: Backend) => {
        const [input, bank, ids] = [be.upload(x, [T, K]), be.zeros([rank, K]), be.uploadI32(new Int32Array(T), [T])];
        be.write(bank, a0, 0);
        const before = be.loraShrink(input, bank, ids, rank);
        be.write(bank, a1.subarray(K), K); // rows 1.. of the bank change after `before` was recorded
        const after = be.loraShrink(input, bank, ids, rank);
        return [await be.readF32(before), await be.readF32(after)];
      };
      const [g, c] = [await run(b), await run(cpu)];
      expectClose(g[0]!, c[0]!);
      expectClose(g[1]!, c[1]!);
    });
  });

  describe('errors', () => {
    it('names a shape mismatch', () => {
      const r = random('errors');
      expect(() => b.matmul(b.upload(r.floats(6), [2, 3]), b.uploadWeight(r.floats(8), [2, 4], 'f32'))).toThrow(/matmul: x has 3 columns but the weight has 4/);
      expect(() => b.upload(r.floats(5), [2, 3])).toThrow(/5 values for shape \[2, 3\]/);
      expect(() => b.loraShrink(b.upload(r.floats(6), [2, 3]), b.upload(r.floats(8), [2, 4]), b.uploadI32(new Int32Array(2), [2]), 2)).toThrow(/loraShrink: the A bank \[2, 4\]/);
    });

    it('names the shape and the device limit of a weight whose rows are too large to bind (larger matrices are split into row blocks)', () => {
      expect(() => b.uploadWeight(new Float32Array(0), [2, 3_000_000_000], 'f16')).toThrow(/a row of the f16 weight \[2, 3000000000\] needs 6000000000 bytes, over this device's maxStorageBufferBindingSize of \d+ bytes/);
    });

    it('refuses contexts beyond MAX_CONTEXT in attention', () => {
      const cache = b.createKvCache({ layers: 1, slots: 1, maxLen: MAX_CONTEXT + 1, kvHeads: 1, headDim: 2 });
      const ids = b.uploadI32(new Int32Array(1), [1]);
      expect(() => b.attention(b.upload(new Float32Array(2), [1, 2]), cache, 0, ids, ids, 1)).toThrow(/contexts up to 4096/);
    });

    it('rejects a pending read with a clear error when its backend is destroyed', async () => {
      const other = await createWebGpuBackend();
      const pending = other.readF32(other.upload(Float32Array.of(1, 2, 3), [3]));
      other.destroy();
      await expect(pending).rejects.toThrow(/destroyed/);
      expect(() => other.upload(Float32Array.of(1), [1])).toThrow(/destroyed/);
      expect(Array.from(await b.readF32(b.upload(Float32Array.of(4), [1])))).toEqual([4]); // the shared instance lives on
    });
  });
});

describe.skipIf(!gpu)('WebGPU uploads and reads', () => {
  it('keep order and content when one submission stages more than the upload arena, and for large tensors', async () => {
    const b = gpu!;
    // 20 tensors of 256 KiB (5 MiB: past the 4 MiB arena, so a submission is cut mid-way), one of 5 MiB (its own
    // staging buffer), and a tensor rewritten after being read by recorded work (order with dispatches).
    const tensors = Array.from({ length: 20 }, (_, i) => Float32Array.from({ length: 65536 }, (_, j) => i * 1e5 + j));
    const uploaded = tensors.map((data) => b.upload(data, [data.length]));
    const large = Float32Array.from({ length: 5 * 262144 + 3 }, (_, j) => -j);
    const largeTensor = b.upload(large, [large.length]);
    const y = b.upload(Float32Array.of(10, 20, 30), [1, 3]);
    const sum = b.upload(Float32Array.of(1, 2, 3), [1, 3]);
    b.addInPlace(sum, y);
    b.write(y, Float32Array.of(100, 200, 300), 0);
    const later = b.upload(Float32Array.of(1, 2, 3), [1, 3]);
    b.addInPlace(later, y);
    const firstMismatch = (a: Float32Array, e: Float32Array) => (a.length !== e.length ? -2 : a.findIndex((v, j) => v !== e[j]));
    for (const [i, t] of uploaded.entries()) expect(firstMismatch(await b.readF32(t), tensors[i]!), `tensor ${i}`).toBe(-1);
    expect(firstMismatch(await b.readF32(largeTensor), large)).toBe(-1);
    expect([...(await b.readF32(sum))]).toEqual([11, 22, 33]);
    expect([...(await b.readF32(later))]).toEqual([101, 202, 303]);
    [...uploaded, largeTensor, y, sum, later].forEach((t) => b.free(t));
  });
});

describe.skipIf(!gpu)('evolution kernels against the CPU reference', () => {
  it('gramsInto (several Grams, different n, one call) and combineInPlace, for rows and strided columns, lengths off the tile size', async () => {
    const cpu = new CpuBackend();
    const rng = seedrandom('evolve-kernels');
    const data = Float32Array.from({ length: 6000 }, () => rng() * 2 - 1);
    const relative = (actual: Float32Array, expected: Float32Array) => actual.reduce((m, v, i) => Math.max(m, Math.abs(v - expected[i]!)), 0) / Math.max(...expected.map(Math.abs));
    for (const [n, keep, length, stride] of [[10, 4, 45, 1], [6, 3, 77, 9], [64, 2, 33, 66]] as const) {
      // Vector i starts at 1 + i (columns of a row-major [length, stride] block) or 1 + i·length (rows); the
      // outputs follow the inputs, never overlapping them.
      const at = (i: number) => 1 + i * (stride === 1 ? length : 1);
      const bases = Int32Array.from({ length: 2 + n + keep }, (_, i) => (i < 2 ? 0 : at(i - 2)));
      const mix = Float32Array.from({ length: n * keep }, () => rng() * 2 - 1);
      const half = Math.ceil(n / 2); // a second Gram of the first vectors, after the first: its own n and offset
      const run = async (b: Backend) => {
        const x = b.upload(data, [data.length]);
        const out = b.zeros([2 + n * n + half * half]);
        const basesTensor = b.uploadI32(bases, [bases.length]);
        const mixTensor = b.upload(Float32Array.of(9, ...mix), [1 + n * keep]);
        b.gramsInto(out, basesTensor, [{ x, first: 2, n, length, stride, outOffset: 2 }, { x, first: 2, n: half, length, stride, outOffset: 2 + n * n }]);
        b.combineInPlace(x, basesTensor, 2, mixTensor, 1, n, keep, length, stride);
        const result = [await b.readF32(out), await b.readF32(x)] as const;
        [x, out, basesTensor, mixTensor].forEach((t) => b.free(t));
        return result;
      };
      const [[gramCpu, xCpu], [gramGpu, xGpu]] = await Promise.all([run(cpu), run(gpu!)]);
      expect(relative(gramGpu, gramCpu), `gram n ${n} length ${length} stride ${stride}`).toBeLessThan(1e-5);
      expect([gramGpu[0], gramGpu[1]]).toEqual([0, 0]); // before outOffset: untouched
      for (let i = 0; i < half; i++) for (let j = 0; j < half; j++) expect(gramCpu[2 + n * n + i * half + j]).toBe(gramCpu[2 + i * n + j]);
      expect(relative(xGpu, xCpu), `combine n ${n} keep ${keep}`).toBeLessThan(1e-5);
    }
  });
});
