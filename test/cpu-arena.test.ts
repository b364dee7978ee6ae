// The CPU arena past one WebAssembly memory (src/backend/cpu-arena.ts): weights, caches and row blocks fill a memory
// up to its fill limit, then the next opens, and every kernel runs in the memory of the weight it reads. Here the
// limit is 96 KiB instead of 3 GiB, so a small model spreads over many memories, and its logits, decode steps and
// gradients (at one thread, and at three whose workers receive the memories opened after they started) equal the
// plain-loop reference bit for bit. And a model the CPU backend cannot hold is refused from its configuration alone,
// before anything is allocated, naming the model, its bytes, the limit and what to do.
import { totalmem } from 'node:os';
import { describe, expect, it } from 'vitest';
import type { Tensor } from '../src/backend/backend.js';
import { cpuArena, MAX_MEMORY_BYTES } from '../src/backend/cpu-arena.js';
import { f32Of } from '../src/backend/cpu-tensor.js';
import { CpuBackend } from '../src/backend/cpu.js';
import { randomModel, type ModelWeights } from '../src/model/checkpoint.js';
import { TINY_CONFIGS, type LlamaConfig } from '../src/model/config.js';
import { checkHostMemoryFit, cpuWeightBytes, DeviceLimitError } from '../src/model/device-fit.js';
import { LlamaModel } from '../src/model/llama.js';
import { LoraBank } from '../src/model/lora-bank.js';
import { LORA_MODULES, randomAdapter } from '../src/model/peft.js';
import { packSequences } from '../src/train/batch.js';
import { LlamaTrainer } from '../src/train/llama-backward.js';

const FILL_BYTES = 96 * 1024;
const arena = cpuArena(FILL_BYTES); // first, before any backend: the process's arena takes this limit

const bits = (t: Tensor | Float32Array) => {
  const a = t instanceof Float32Array ? t : f32Of(t);
  return Array.from(new Uint32Array(a.buffer, a.byteOffset, a.length));
};

/** A model's logits, decode steps and LoRA gradients on `backend`, and which memory holds each layer's q|k|v. */
async function outputs(backend: CpuBackend, config: LlamaConfig, weights: ModelWeights, storage: 'f32' | 'f16') {
  const model = LlamaModel.upload(backend, config, weights, { storage, maxContext: 16 });
  const bank = new LoraBank(backend, config, 2, 4, LORA_MODULES);
  for (let slot = 0; slot < 2; slot++) bank.load(slot, randomAdapter(config, { rank: 4, targets: [...LORA_MODULES], seed: slot, init: 'gaussian' }));
  const logits = bits(await model.logits([1, 5, 9, 3, 7, 2, 11], 1, bank));
  const cache = model.createKvCache(2, 16);
  const steps = [];
  for (let position = 0; position < 3; position++) {
    const rows = Int32Array.of(0, 1);
    steps.push(bits(await backend.readF32(model.forward({ tokens: rows.map((s) => 3 * s + position + 1), slots: rows, positions: rows.map(() => position), adapters: Int32Array.of(1, 0), logitRows: rows }, cache, bank))));
  }
  const trainer = new LlamaTrainer(model, bank);
  const tape = trainer.forward(packSequences([{ tokens: [1, 4, 6, 8, 10], adapter: 0 }, { tokens: [1, 3, 5, 7], adapter: 1 }], config.vocabSize, 16));
  const T = tape.batch.tokens.length;
  const grads = trainer.backward(tape, Float32Array.from({ length: T }, (_, t) => (t % 3) / 7), new Float32Array(T), 'lora');
  return { logits, steps, grads: Object.fromEntries([...grads].map(([key, g]) => [key, bits(g)])), homes: model.layers.map((l) => arena.memoryOf(f32Of(l.qkv.whole))) };
}

describe('a model over several WebAssembly memories', () => {
  it('runs every kernel in its weight\'s memory: logits, decode and gradients equal the plain reference, at 1 and 3 threads', async () => {
    expect(arena.fillBytes).toBe(FILL_BYTES);
    const config: LlamaConfig = { ...TINY_CONFIGS['qwen2-tiny']!, numLayers: 4 };
    const weights = randomModel(config, 3);
    const [one, three] = [new CpuBackend({ threads: 1 }), new CpuBackend({ threads: 3, minWorkPerShare: 1 })];
    const before = arena.count; // the workers of `three` started with these memories; the models open the rest
    const f32 = await outputs(one, config, weights, 'f32');
    const f16 = await outputs(three, config, weights, 'f16'); // f16 weights: their row blocks open memories too
    expect(arena.count).toBeGreaterThan(before + 2);
    expect(new Set(f32.homes).size).toBeGreaterThan(2); // the layers' weights lie in several memories
    expect(new Set(f16.homes).size).toBeGreaterThan(2);
    for (let i = 0; i < arena.count; i++) expect(arena.heldBytes(i)).toBeLessThanOrEqual(FILL_BYTES);
    const plain = new CpuBackend({ simd: false }); // the plain loops: the reference
    const { homes: _f32, ...f32Reference } = await outputs(plain, config, weights, 'f32');
    const { homes: _f16, ...f16Reference } = await outputs(plain, config, weights, 'f16');
    expect({ ...f32, homes: undefined }).toEqual({ ...f32Reference, homes: undefined });
    expect({ ...f16, homes: undefined }).toEqual({ ...f16Reference, homes: undefined });
    [one, three, plain].forEach((b) => b.destroy());
  });
});

describe('a model the CPU backend cannot hold', () => {
  const limits = { maxMatrixBytes: MAX_MEMORY_BYTES - 2 ** 20, totalBytes: totalmem() };

  it('is counted from its configuration: Qwen2.5-0.5B\'s weights as the CPU backend holds them (2 GiB of f32) fit', () => {
    const qwen = cpuWeightBytes(TINY_CONFIGS['qwen2.5-0.5b-shape']!);
    // 151,936 x 896 embedding (tied), 24 layers of (896 + 2·128) x 896 + 896 x 896 + 2 · 4864 x 896 + 896 x 4864, norms
    const layer = (896 + 256) * 896 + 896 * 896 + 2 * 4864 * 896 + 896 * 4864;
    expect(qwen.total).toBe(4 * (151_936 * 896 + 24 * layer + 49 * 896));
    expect(qwen.largest.name).toBe('model.embed_tokens.weight');
    expect(() => checkHostMemoryFit(TINY_CONFIGS['qwen2.5-0.5b-shape']!, 'f16', limits)).not.toThrow();
  });

  it('is refused at load, before any weight is read or allocated: a model past the machine\'s memory, a matrix past 4 GiB', () => {
    const layers = Math.ceil(totalmem() / (4 * 12 * 4096 * 4096)) + 1; // each layer ~12 · 4096² weights: past the machine's memory
    const huge: LlamaConfig = { ...TINY_CONFIGS['tiny']!, hiddenSize: 4096, intermediateSize: 11008, numHeads: 32, numKvHeads: 32, headDim: 128, numLayers: layers, vocabSize: 32000 };
    const noWeights = {} as ModelWeights; // upload must refuse before it touches them
    const backend = new CpuBackend();
    const load = (config: LlamaConfig) => () => LlamaModel.upload(backend, config, noWeights, { storage: 'f16' });
    expect(load(huge)).toThrow(DeviceLimitError);
    expect(load(huge)).toThrow(new RegExp(`^llama \\(hidden 4096, ${layers} layers, vocabulary 32000\\): its weights need ${cpuWeightBytes(huge).total} bytes \\(.* GiB\\) on the CPU backend as f32 \\(the CPU backend keeps f16 weights as f32 values\\), over this machine's .* GiB of memory; use a smaller model, or WebGPU with f16 weights`));
    const wideVocabulary: LlamaConfig = { ...TINY_CONFIGS['tiny']!, hiddenSize: 4096, numHeads: 32, numKvHeads: 8, headDim: 128, vocabSize: 300_000 }; // 300,000 x 4096 f32: 4.6 GiB
    expect(load(wideVocabulary)).toThrow(/^llama \(hidden 4096, 2 layers, vocabulary 300000\): model\.embed_tokens\.weight \[300000, 4096\] needs 4915200000 bytes \(4\.6 GiB\) as f32 .*, over the 4\.0 GiB one WebAssembly memory of the CPU backend holds .*; run it on WebGPU/);
    backend.destroy();
  });
});
