// The fused ops of a decoder layer (backend.ts "Fused ops", kernels/linear.wgsl) against the unfused sequence of
// plain ops they replace:
//   - the CPU twins are that sequence: bit for bit;
//   - on WebGPU, the GPU thread layout does each step's own arithmetic: bit for bit with the unfused kernels;
//     the CPU layout (lavapipe's default) sums in another order: within the tolerance of kernels.test.ts;
//   - both layouts agree with the CPU reference within tolerance, and are batch-invariant: a row alone (the
//     one-row variant), among a few and among 64 (eight-row tiles, adapter segments) gives the same bits.
// Shapes are small and odd: K odd (an f16 row's last word half empty), widths off the tile sizes.
import seedrandom from 'seedrandom';
import { afterAll, describe, expect, it } from 'vitest';
import { uploadPacked, uploadStepRows, type Backend, type KvCache, type LinearOp, type StepRows, type Tensor, type WeightStorage } from '../src/backend/backend.js';
import { CpuBackend } from '../src/backend/cpu.js';
import { createWebGpuBackend } from '../src/backend/webgpu.js';
import { gpu } from './webgpu.js';

const TOLERANCE = 1e-4;
const cpu = new CpuBackend();
const bits = (a: Float32Array) => Array.from(new Uint32Array(a.buffer, a.byteOffset, a.length));

type Epilogue = 'store' | 'residual' | 'swiglu' | 'ropeKv';

/** Host data of one fused linear and what it reads. */
interface Case {
  T: number;
  K: number;
  widths: number[];
  storage: WeightStorage;
  epilogue: Epilogue;
  x: Float32Array;
  weights: Float32Array[];
  biases?: Float32Array[];
  normWeight?: Float32Array;
  gather?: Int32Array; // logit rows (store only)
  lora?: { rank: number; slots: number; targeted: boolean[]; a: Float32Array[]; b: Float32Array[]; scales: Float32Array };
  adapters: Int32Array;
  positions: Int32Array;
  slots: Int32Array;
  y0?: Float32Array; // residual
  rope?: { heads: number; kvHeads: number; headDim: number; table: Float32Array; tableRows: number; cacheSlots: number; maxLen: number };
}

function random(name: string) {
  const rng = seedrandom(name);
  return {
    floats: (n: number, scale = 1) => Float32Array.from({ length: n }, () => (2 * rng() - 1) * scale),
    ints: (n: number, below: number) => Int32Array.from({ length: n }, () => Math.floor(rng() * below)),
  };
}

/** A case: epilogue, storage, with or without norm, bias, LoRA (some parts untargeted), gathered rows. */
function makeCase(name: string, epilogue: Epilogue, options: { T?: number; K?: number; width?: number; storage?: WeightStorage; norm?: boolean; bias?: boolean; lora?: boolean; gather?: boolean } = {}): Case {
  const r = random(name);
  const T = options.T ?? 64;
  const rope = epilogue === 'ropeKv' ? { heads: 3, kvHeads: 1, headDim: 6, tableRows: 40, cacheSlots: 5, maxLen: 30 } : undefined;
  const K = options.K ?? 67;
  const width = options.width ?? (epilogue === 'swiglu' ? 21 : 29);
  const widths = rope ? [rope.heads * rope.headDim, rope.kvHeads * rope.headDim, rope.kvHeads * rope.headDim] : epilogue === 'swiglu' ? [width, width] : epilogue === 'residual' ? [width] : [13, 5];
  const rank = 5;
  const slots = 4;
  const targeted = widths.map((_, p) => p !== 1 || widths.length === 1); // part 1 untargeted where there are several
  return {
    T, K, widths, epilogue,
    storage: options.storage ?? 'f16',
    x: r.floats(T * K, 2),
    weights: widths.map((n) => r.floats(n * K, 0.3)),
    biases: options.bias ? widths.map((n) => r.floats(n)) : undefined,
    normWeight: options.norm ? r.floats(K) : undefined,
    gather: options.gather ? r.ints(11, T) : undefined,
    lora: options.lora ? { rank, slots, targeted, a: widths.filter((_, p) => targeted[p]).map(() => r.floats(slots * rank * K, 0.3)), b: widths.filter((_, p) => targeted[p]).map((n) => r.floats(slots * n * rank, 0.3)), scales: Float32Array.from([0.5, 2, -1, 1.5]) } : undefined,
    // adapters in runs, so that segments of one adapter pass the 8 rows of a tile; -1: the base model alone
    adapters: Int32Array.from({ length: T }, (_, t) => [-1, 0, 2, 2, 3, 1][Math.floor(t / 5) % 6]! - (t % 7 === 3 ? 1 : 0)),
    // every row its own cache cell: rows writing one cell would leave it to the order of the writes
    positions: Int32Array.from({ length: T }, (_, t) => Math.floor(t / (rope?.cacheSlots ?? 1))),
    slots: Int32Array.from({ length: T }, (_, t) => t % (rope?.cacheSlots ?? 1)),
    y0: epilogue === 'residual' ? r.floats(T * widths[0]!) : undefined,
    rope: rope && { ...rope, table: r.floats(rope.tableRows * rope.headDim) },
  };
}

/** The rows [first, first + count) of a case, as a case of their own. */
function sliceRows(c: Case, first: number, count: number): Case {
  const rows = <T extends Float32Array | Int32Array>(a: T, width: number) => a.slice(first * width, (first + count) * width) as T;
  return { ...c, T: count, x: rows(c.x, c.K), adapters: rows(c.adapters, 1), positions: rows(c.positions, 1), slots: rows(c.slots, 1), y0: c.y0 && rows(c.y0, c.widths[0]!) };
}

interface Outputs {
  out: Float32Array;
  cacheK?: Float32Array;
  cacheV?: Float32Array;
}

function stepRows(b: Backend, c: Case): StepRows {
  return uploadStepRows(b, { tokens: new Int32Array(c.T), slots: c.slots, positions: c.positions, adapters: c.lora ? c.adapters : c.adapters.map(() => -1), logitRows: c.gather ?? Int32Array.from({ length: c.T }, (_, t) => t) });
}

function cacheOf(b: Backend, c: Case): KvCache | undefined {
  const rope = c.rope;
  return rope && b.createKvCache({ layers: 2, slots: rope.cacheSlots, maxLen: rope.maxLen, kvHeads: rope.kvHeads, headDim: rope.headDim });
}

async function outputs(b: Backend, out: Tensor, cache?: KvCache): Promise<Outputs> {
  return { out: await b.readF32(out), ...(cache && { cacheK: await b.readF32(cache.k), cacheV: await b.readF32(cache.v) }) };
}

/** The fused op, one dispatch (two with LoRA: the shrink). */
async function fused(b: Backend, c: Case): Promise<Outputs> {
  const rows = stepRows(b, c);
  const norm = c.normWeight && { weight: b.upload(c.normWeight, [c.K]), eps: 1e-5 };
  const x = b.upload(c.x, [c.T, c.K]);
  let lora: LinearOp['lora'];
  if (c.lora) {
    const { rank, slots, targeted } = c.lora;
    const a = uploadPacked(b, c.lora.a.map((data) => ({ rows: slots * rank, data })), [c.K], 'f32');
    const bFactors = uploadPacked(b, c.lora.b.map((data, i) => ({ rows: slots * c.widths.filter((_, p) => targeted[p])[i]!, data })), [rank], 'f32');
    const h = b.loraShrinkSegments(x, a, rows, rank, norm);
    let index = 0;
    lora = { h, b: bFactors, of: targeted.map((t) => (t ? index++ : -1)), scales: b.upload(c.lora.scales, [slots]), rank };
  }
  const op: LinearOp = {
    x, norm, lora, gather: c.gather !== undefined,
    w: uploadPacked(b, c.weights.map((data, p) => ({ rows: c.widths[p]!, data })), [c.K], c.storage),
    bias: c.biases && uploadPacked(b, c.biases.map((data) => ({ rows: data.length, data })), [], 'f32'),
  };
  const cache = cacheOf(b, c);
  if (c.epilogue === 'store') return outputs(b, b.linear(op, rows));
  if (c.epilogue === 'swiglu') return outputs(b, b.linearSwiglu(op, rows));
  if (c.epilogue === 'ropeKv') return outputs(b, b.linearRopeKv(op, rows, { table: b.upload(c.rope!.table, [c.rope!.tableRows, c.rope!.headDim]), heads: c.rope!.heads, cache: cache!, layer: 1 }), cache);
  const y = b.upload(c.y0!, [c.T, c.widths[0]!]);
  b.linearResidual(op, rows, y);
  return outputs(b, y);
}

/** The unfused sequence the model ran before: rmsNorm, a matmul and a LoRA shrink + expand per part, the epilogue's op. */
async function unfused(b: Backend, c: Case): Promise<Outputs> {
  const ids = (a: Int32Array) => b.uploadI32(a, [a.length]);
  const adapters = ids(c.adapters);
  let x = b.upload(c.x, [c.T, c.K]);
  if (c.gather) x = b.gatherRows(x, ids(c.gather));
  if (c.normWeight) x = b.rmsNorm(x, b.upload(c.normWeight, [c.K]), 1e-5);
  let targetedIndex = 0;
  const parts = c.weights.map((data, p) => {
    const y = b.matmul(x, b.uploadWeight(data, [c.widths[p]!, c.K], c.storage), c.biases && b.upload(c.biases[p]!, [c.widths[p]!]));
    if (c.lora?.targeted[p]) {
      const { rank, slots } = c.lora;
      const i = targetedIndex++;
      const h = b.loraShrink(x, b.upload(c.lora.a[i]!, [slots * rank, c.K]), adapters, rank);
      b.loraExpandInPlace(y, h, b.upload(c.lora.b[i]!, [slots * c.widths[p]!, rank]), adapters, b.upload(c.lora.scales, [slots]));
    }
    return y;
  });
  if (c.epilogue === 'swiglu') return outputs(b, b.swiglu(parts[0]!, parts[1]!));
  if (c.epilogue === 'residual') {
    const y = b.upload(c.y0!, [c.T, c.widths[0]!]);
    b.addInPlace(y, parts[0]!);
    return outputs(b, y);
  }
  if (c.epilogue === 'ropeKv') {
    const { heads, kvHeads, headDim, table, tableRows } = c.rope!;
    const [q, k, v] = parts as [Tensor, Tensor, Tensor];
    const [positions, tableTensor] = [ids(c.positions), b.upload(table, [tableRows, headDim])];
    b.ropeInPlace(q, positions, tableTensor, heads, headDim);
    b.ropeInPlace(k, positions, tableTensor, kvHeads, headDim);
    const cache = cacheOf(b, c)!;
    b.kvWrite(cache, 1, k, v, ids(c.slots), positions);
    return outputs(b, q, cache);
  }
  const values = await Promise.all(parts.map((t) => b.readF32(t))); // store: the parts side by side
  const N = c.widths.reduce((a, n) => a + n, 0);
  const out = new Float32Array(x.shape[0]! * N);
  for (let t = 0; t < x.shape[0]!; t++) {
    let first = 0;
    values.forEach((v, p) => {
      out.set(v.subarray(t * c.widths[p]!, (t + 1) * c.widths[p]!), t * N + first);
      first += c.widths[p]!;
    });
  }
  return { out };
}

function expectClose(actual: Float32Array, reference: Float32Array): void {
  expect(actual.length).toBe(reference.length);
  let [diff, scale] = [0, 0];
  for (let i = 0; i < actual.length; i++) {
    diff = Math.max(diff, Math.abs(actual[i]! - reference[i]!));
    scale = Math.max(scale, Math.abs(reference[i]!));
  }
  expect(diff).toBeLessThanOrEqual(TOLERANCE * (1 + scale));
}

function expectSame(actual: Outputs, expected: Outputs): void {
  expect(bits(actual.out)).toEqual(bits(expected.out));
  if (expected.cacheK) {
    expect(bits(actual.cacheK!)).toEqual(bits(expected.cacheK));
    expect(bits(actual.cacheV!)).toEqual(bits(expected.cacheV!));
  }
}

// Every epilogue with what the model gives it (norm, bias, LoRA) ...
const MODEL_CASES: Array<[string, Epilogue, Parameters<typeof makeCase>[2]]> = [
  ['q|k|v: norm, bias, LoRA, RoPE and the KV write', 'ropeKv', { norm: true, bias: true, lora: true }],
  ['o or down: LoRA and the residual', 'residual', { lora: true }],
  ['gate|up: norm, LoRA and SwiGLU', 'swiglu', { norm: true, lora: true }],
  ['the LM head: gathered rows, norm', 'store', { gather: true, norm: true }],
];
// ... and variants: f32 weights, no LoRA, parts side by side. (The GPU layout runs the model's cases only: lavapipe
// compiles each of its variants for up to a minute, every lane of a divergent load its own branch.)
const CASES: typeof MODEL_CASES = [
  ...MODEL_CASES,
  ['q|k|v with f32 weights, no LoRA', 'ropeKv', { storage: 'f32', norm: true }],
  ['gate|up with f32 weights', 'swiglu', { storage: 'f32', norm: true, lora: true }],
  ['two parts stored side by side, LoRA on one', 'store', { bias: true, lora: true }],
];

describe('fused ops on the cpu backend', () => {
  it.each(CASES)('%s: the unfused sequence, bit for bit', async (name, epilogue, options) => {
    const c = makeCase(name, epilogue, { ...options, T: 19 });
    expectSame(await fused(cpu, c), await unfused(cpu, c));
  });
});

// The default layout follows the adapter (the CPU layout on lavapipe); the other one is asked for.
const gpuLayout = gpu && (await createWebGpuBackend({ layout: 'gpu' }));
const cpuLayout = gpu && (await createWebGpuBackend({ layout: 'cpu' }));
afterAll(() => [gpuLayout, cpuLayout].forEach((b) => b?.destroy()));

describe.skipIf(!gpu)('fused ops on webgpu', () => {
  const layouts = { gpu: gpuLayout!, cpu: cpuLayout! };

  describe.each(CASES)('%s', (name, epilogue, options) => {
    const c = makeCase(name, epilogue, options);
    const tested = MODEL_CASES.some(([modelCase]) => modelCase === name) ? (['gpu', 'cpu'] as const) : (['cpu'] as const);

    it.each(tested)('%s layout: close to the CPU reference', async (layout) => {
      const [actual, reference] = [await fused(layouts[layout], c), await fused(cpu, c)];
      expectClose(actual.out, reference.out);
      if (reference.cacheK) {
        expectClose(actual.cacheK!, reference.cacheK);
        expectClose(actual.cacheV!, reference.cacheV!);
      }
    });

    if (tested.length === 2) {
      it('gpu layout: the unfused kernels, bit for bit', async () => {
        expectSame(await fused(layouts.gpu, c), await unfused(layouts.gpu, c));
      });
    }

    it.each(tested)('%s layout: batch-invariant (a row alone, among a few, among 64)', async (layout) => {
      if (c.gather) return; // the LM head's rows are gathered: invariance is the rows of the cases without
      const b = layouts[layout];
      const all = await fused(b, c);
      const width = all.out.length / c.T;
      // rows 5-7 and 11-16: tiles of one adapter (the expand reads B once for the tile)
      for (const [first, count] of [[0, 1], [9, 1], [30, 1], [63, 1], [5, 3], [11, 6], [20, 9]] as const) {
        const part = await fused(b, sliceRows(c, first, count));
        expect(bits(part.out)).toEqual(bits(all.out.slice(first * width, (first + count) * width)));
      }
    });
  });

  it.each(['gpu', 'cpu'] as const)('%s layout: the LoRA shrink leaves rows without an adapter alone and splits long segments', async (layout) => {
    const b = layouts[layout];
    const c = makeCase('segments', 'store', { lora: true, norm: true });
    const rows = stepRows(b, c);
    expect(rows.longestTile).toBe(8); // runs of one adapter longer than a tile
    const a = uploadPacked(b, c.lora!.a.map((data) => ({ rows: c.lora!.slots * c.lora!.rank, data })), [c.K], 'f32');
    const norm = { weight: b.upload(c.normWeight!, [c.K]), eps: 1e-5 };
    const h = await b.readF32(b.loraShrinkSegments(b.upload(c.x, [c.T, c.K]), a, rows, c.lora!.rank, norm));
    const reference = await cpu.readF32(cpu.loraShrinkSegments(cpu.upload(c.x, [c.T, c.K]), uploadPacked(cpu, c.lora!.a.map((data) => ({ rows: c.lora!.slots * c.lora!.rank, data })), [c.K], 'f32'), stepRows(cpu, c), c.lora!.rank, { weight: cpu.upload(c.normWeight!, [c.K]), eps: 1e-5 }));
    const width = h.length / c.T;
    const withAdapter = (values: Float32Array) => Float32Array.from({ length: values.length }, (_, i) => (c.adapters[Math.floor(i / width)]! >= 0 ? values[i]! : 0));
    expectClose(withAdapter(h), reference);
  });
});

// The CPU layout's register tiles: the units a thread computes (1 to 8, 4 pairs) and the rows of a tile (1, 8, 16)
// decide which thread computes an output, never its sum; K here spans several staged chunks (256 values of k at
// 16 rows, 512 at 8), odd, and the widths several rounds of a workgroup's threads.
const unitLayouts = gpu && (await Promise.all([1, 8].map((serialUnits) => createWebGpuBackend({ layout: 'cpu', serialUnits }))));
afterAll(() => unitLayouts?.forEach((b) => b.destroy()));

describe.skipIf(!gpu)("the cpu layout's register tiles", () => {
  const WIDE_CASES: Array<[string, Epilogue, Parameters<typeof makeCase>[2]]> = [
    ['o or down, K over three chunks', 'residual', { lora: true, K: 601, width: 150 }],
    ['gate|up, K over three chunks', 'swiglu', { norm: true, lora: true, K: 601, width: 150 }],
  ];
  it.each(WIDE_CASES)('%s: close to the CPU reference, the same bits at 1 and 8 units a thread, batch-invariant', async (name, epilogue, options) => {
    const c = makeCase(name, epilogue, options);
    const [one, eight] = [await fused(unitLayouts![0]!, c), await fused(unitLayouts![1]!, c)];
    expectClose(eight.out, (await fused(cpu, c)).out);
    expectSame(eight, one);
    const width = eight.out.length / c.T;
    for (const [first, count] of [[0, 1], [5, 3], [20, 9]] as const) { // one row (TM 1), a tile of 8, of 16
      const part = await fused(unitLayouts![1]!, sliceRows(c, first, count));
      expect(bits(part.out)).toEqual(bits(eight.out.slice(first * width, (first + count) * width)));
    }
  });
});
