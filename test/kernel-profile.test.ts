// Kernel profiles from timestamp queries (Backend.timeKernels, src/backend/webgpu-profiler.ts) and the bench's table
// over them (bench/kernel-profile.ts): one timing per dispatch, in order, naming the kernel a forward's documented
// sequence dispatches (llama.ts) with the parameters its shapes give; profiling changes no result; more dispatches
// than one query set holds are all timed; an error inside the work stops the profile. And the table's byte and FLOP
// models against cases worked by hand.
import { describe, expect, it } from 'vitest';
import type { Backend, KernelTiming } from '../src/backend/backend.js';
import { randomModel } from '../src/model/checkpoint.js';
import { TINY_CONFIGS } from '../src/model/config.js';
import { LlamaModel } from '../src/model/llama.js';
import { LoraBank } from '../src/model/lora-bank.js';
import { LORA_MODULES, randomAdapter } from '../src/model/peft.js';
import { profilePhase } from '../bench/kernel-profile.js';
import { gpu } from './webgpu.js';

const config = TINY_CONFIGS.tiny!;
const bits = (a: Float32Array) => Array.from(new Uint32Array(a.buffer));

describe.skipIf(!gpu)('timeKernels on WebGPU', () => {
  const b = gpu!;
  const model = gpu && LlamaModel.upload(b, config, randomModel(config, 3), { storage: 'f16', maxContext: 32 });
  const bank = gpu && new LoraBank(b, config, 2, 4, LORA_MODULES);
  bank?.load(1, randomAdapter(config, { rank: 4, targets: [...LORA_MODULES], seed: 9, init: 'gaussian' }));
  const T = 5;
  const batch = { tokens: Int32Array.from([3, 1, 4, 1, 5]), slots: new Int32Array(T), positions: Int32Array.from([0, 1, 2, 3, 4]), adapters: new Int32Array(T).fill(1), logitRows: Int32Array.from([4]) };

  it("times each dispatch of a forward, in order, as llama.ts's sequence names them, and changes no result", async () => {
    const cache = model!.createKvCache(1, 32);
    const plain = await b.readF32(model!.forward(batch, cache, bank));
    const before = b.dispatches();
    let profiled: Float32Array = new Float32Array();
    const timings = await b.timeKernels!(async () => {
      profiled = await b.readF32(model!.forward(batch, cache, bank));
    });
    expect(timings).toHaveLength(b.dispatches() - before);
    // embedding; per layer: shrink, q|k|v, attention, shrink, o, shrink, gate|up, shrink, down; the LM head
    const layer = ['linear', 'linear', 'attention', 'linear', 'linear', 'linear', 'linear', 'linear', 'linear'];
    expect(timings.map((t) => t.kernel)).toEqual(['embedding', ...layer, ...layer, 'linear']);
    const qkv = timings[2]!;
    const { hiddenSize: D, numHeads: H, numKvHeads: Hkv, headDim: hd } = config;
    expect(qkv.constants).toMatchObject({ EPILOGUE: 3, NORM: 1, LORA: 1, WEIGHT_F16: 1 });
    expect(qkv.params).toMatchObject({ T, K: D, N: (H + 2 * Hkv) * hd, rank: 4 });
    expect((qkv.params.colEnd as number[]).slice(0, 3)).toEqual([H * hd, (H + Hkv) * hd, (H + 2 * Hkv) * hd]);
    expect(timings[3]!.params).toMatchObject({ T, heads: H, kvHeads: Hkv, headDim: hd });
    expect(timings.at(-1)!.constants).toMatchObject({ GATHER: 1 });
    expect(timings.at(-1)!.params).toMatchObject({ T: 1, N: config.vocabSize });
    // A timer's resolution is not a kernel's duration: lavapipe (Mesa 25.0) times a short dispatch at 0 ns. What the
    // hardware guarantees is a finite, non-negative time each, and some time in all for a whole forward.
    for (const t of timings) expect(Number.isFinite(t.gpuNs) && t.gpuNs >= 0).toBe(true);
    expect(timings.reduce((sum, t) => sum + t.gpuNs, 0)).toBeGreaterThan(0);
    expect(bits(profiled)).toEqual(bits(plain));
    model!.freeKvCache(cache);
  });

  it('times every dispatch past what one query set holds (2048), across the submissions it takes', async () => {
    const acc = b.zeros([4]);
    const one = b.upload(Float32Array.from([1, 1, 1, 1]), [4]);
    const count = 2100;
    const timings = await b.timeKernels!(async () => {
      for (let i = 0; i < count; i++) b.addInPlace(acc, one);
    });
    expect(timings).toHaveLength(count);
    expect(timings.every((t) => t.kernel === 'add' && t.params.n === 4)).toBe(true);
    expect(Array.from(await b.readF32(acc))).toEqual([count, count, count, count]);
  });

  it('stops profiling when the work throws, and reports the work’s error', async () => {
    await expect(b.timeKernels!(async () => {
      b.addInPlace(b.zeros([4]), b.zeros([4]));
      throw new Error('the work failed');
    })).rejects.toThrow('the work failed');
    const [acc, x] = [b.zeros([4]), b.zeros([4])];
    const again = await b.timeKernels!(async () => b.addInPlace(acc, x));
    expect(again.map((t) => t.kernel)).toEqual(['add']);
  });
});

describe("the bench's per-kernel table", () => {
  const timing = (kernel: string, constants: Record<string, number>, params: Record<string, number>, gpuNs: number): KernelTiming => ({ kernel, constants, params, groups: [1, 1], gpuNs });
  /** A backend whose timeKernels returns fixed timings: only the table's sums are under test. */
  const replaying = (timings: KernelTiming[]) => ({ deviceDescription: 'replay', timeKernels: async (work: () => Promise<void>) => (await work(), timings) }) as unknown as Backend;

  it('sums by kernel and variant, and gives GB/s and GFLOP/s from bytes and FLOPs worked by hand', async () => {
    const linear = { WEIGHT_F16: 1, EPILOGUE: 1, NORM: 0, LORA: 0, GATHER: 0, SEGMENTS: 0 };
    // [T 2, K 8] · [N 4, K 8]ᵀ, f16 weights, added to the residual: weights 4·8·2 = 64 B, x 2·8·4 = 64, out 2·4·4 = 32,
    // the residual read 32: 192 bytes; 2·2·4·8 = 128 FLOPs. Twice, 100 ns and 300 ns: 384 B and 256 FLOPs in 400 ns.
    const profile = await profilePhase(replaying([
      timing('linear', linear, { T: 2, K: 8, N: 4 }, 100),
      timing('add', {}, { n: 4 }, 600),
      timing('linear', linear, { T: 2, K: 8, N: 4 }, 300),
      // attention: 3 rows over a mean context of 10, 2 heads sharing 1 KV head of 4: K and V 3·10·4·2·4 = 960 B,
      // q in and out 2·3·2·4·4 = 192 B; 4·3·2·10·4 = 960 FLOPs, in 1000 ns
      timing('attention', {}, { T: 3, heads: 2, kvHeads: 1, headDim: 4 }, 1000),
    ]), 'decode', { storage: 'f16', adapters: 0, meanContext: 10 }, async () => {});
    expect(profile.gpuMs).toBeCloseTo(2000 / 1e6, 12);
    const row = (kernel: string) => profile.kernels.find((k) => k.kernel === kernel)!;
    expect(profile.kernels.map((k) => k.kernel)).toEqual(['attention', 'add', 'linear: matmul+residual']); // by GPU time
    expect(row('linear: matmul+residual')).toMatchObject({ dispatches: 2, share: 0.2 });
    expect(row('linear: matmul+residual').gbPerS).toBeCloseTo(384 / 400, 12);
    expect(row('linear: matmul+residual').gflopPerS).toBeCloseTo(256 / 400, 12);
    expect(row('attention').gbPerS).toBeCloseTo(1152 / 1000, 12);
    expect(row('attention').gflopPerS).toBeCloseTo(960 / 1000, 12);
    expect(row('add')).toMatchObject({ gbPerS: null, gflopPerS: null }); // no model: shown as "—"
  });

  it('counts a LoRA shrink by the A factors of every adapter in the batch', async () => {
    // 3 adapters' A factors [parts·rank 8, K 16] f32: 3·8·16·4 = 1536 B, x 4·16·4 = 256, h 4·8·4 = 128; 2·4·8·16 = 1024 FLOPs
    const shrink = timing('linear', { SEGMENTS: 1, WEIGHT_F16: 0, EPILOGUE: 0, LORA: 0 }, { T: 4, K: 16, N: 8 }, 1000);
    const profile = await profilePhase(replaying([shrink]), 'prefill', { storage: 'f16', adapters: 3, meanContext: 1 }, async () => {});
    expect(profile.kernels[0]).toMatchObject({ kernel: 'linear: lora shrink (segments)', dispatches: 1, share: 1 });
    expect(profile.kernels[0]!.gbPerS).toBeCloseTo(1920 / 1000, 12);
    expect(profile.kernels[0]!.gflopPerS).toBeCloseTo(1024 / 1000, 12);
  });
});
