// A micro-batch's memory goes back to the CPU arena the moment the micro-batch is done (CpuBackend.free releases
// its blocks), not when the garbage collector gets to its arrays: a generation micro-batch's KV cache, a training
// micro-batch's tape (its activations and logits) and the step's gradients (Backend.keep). The arena holds the same
// bytes after a generation or a step as before it, and held each micro-batch's while it ran, and no more. The bits
// are those of the whole batch (test/micro-batch.test.ts, test/cpu-threads.test.ts).
import { describe, expect, it } from 'vitest';
import { CpuBackend } from '../src/backend/cpu.js';
import { cpuArena } from '../src/backend/cpu-arena.js';
import { Pacer } from '../src/engine/pacer.js';
import { randomModel } from '../src/model/checkpoint.js';
import { TINY_CONFIGS } from '../src/model/config.js';
import { generate, type GenerationRequest } from '../src/model/generate.js';
import { LlamaModel } from '../src/model/llama.js';
import { LoraBank } from '../src/model/lora-bank.js';
import { LORA_MODULES, randomAdapter } from '../src/model/peft.js';
import { AdamW } from '../src/train/adamw.js';
import { LlamaTrainer } from '../src/train/llama-backward.js';
import { policyGradientStep, type RlSample } from '../src/train/steps.js';

const config = { ...TINY_CONFIGS['qwen2-tiny']!, vocabSize: 96 };
const heldBytes = () => Array.from({ length: cpuArena().count }, (_, i) => cpuArena().heldBytes(i)).reduce((a, b) => a + b, 0);

describe('the CPU arena', () => {
  it("takes back a generation micro-batch's KV cache when it is done: held bytes after a generation are those before it", async () => {
    const backend = new CpuBackend({ threads: 2 });
    const model = LlamaModel.upload(backend, config, randomModel(config, 4));
    const bank = new LoraBank(backend, config, 2, 4, LORA_MODULES);
    [0, 1].forEach((slot) => bank.load(slot, randomAdapter(config, { rank: 4, targets: LORA_MODULES, seed: slot, init: 'gaussian' })));
    const requests: GenerationRequest[] = Array.from({ length: 5 }, (_, i) => ({ requestId: i, prompt: [1 + i, 2, 3, 4 + i], adapter: (i % 3) - 1, maxTokens: 6, seed: 9 }));
    // a KV position is 2 layers × k and v × 64 values: 512 bytes; 8 positions a micro-batch (two requests of 4 + 6 positions need 20)
    const cacheBytes = (requests: number) => requests * 10 * 512;
    const before = heldBytes();
    const during: number[] = [];
    const pacer = new Pacer({ onProgress: () => during.push(heldBytes() - before) });
    const results = await generate(model, requests, { bank, batchTokens: 8, pacer });
    expect(heldBytes()).toBe(before);
    // each request a micro-batch of its own (a cache of 10 positions each: 5,120 bytes and the block's slack), one at a time
    expect(Math.min(...during)).toBeGreaterThanOrEqual(cacheBytes(1));
    expect(Math.max(...during)).toBeLessThan(cacheBytes(2));
    expect(results.map((r) => r.tokens.length)).toEqual(requests.map(() => 6));
    backend.destroy();
  });

  it("takes back a training micro-batch's tape when it is done, and the step's gradients after the update", async () => {
    const backend = new CpuBackend({ threads: 1 });
    const model = LlamaModel.upload(backend, config, randomModel(config, 4));
    const bank = new LoraBank(backend, config, 2, 4, LORA_MODULES);
    [0, 1].forEach((slot) => bank.load(slot, randomAdapter(config, { rank: 4, targets: LORA_MODULES, seed: slot, init: 'gaussian' })));
    const optimizer = AdamW.forBank(backend, bank, config.numLayers, { lr: 0.01, maxGradNorm: 1 });
    const trainer = new LlamaTrainer(model, bank);
    const samples: RlSample[] = [40, 20, 40].map((length, i) => ({ tokens: Array.from({ length }, (_, t) => 1 + ((t * 5 + i) % 90)), adapter: i % 2, promptLength: 3, advantage: i - 1 }));
    const before = heldBytes();
    const during: number[] = [];
    const pacer = new Pacer({ onProgress: () => during.push(heldBytes() - before) });
    await policyGradientStep(trainer, optimizer, samples, { reduction: 'token', entropyCoef: 0.01 }, { batchTokens: 40, pacer });
    expect(heldBytes()).toBe(before);
    // qwen2-tiny (hidden 64, 2 layers, MLP 128): a token's tape is at least its layers' 2·(4·64 + 2·32 + 3·128) values,
    // beside the gradients (every LoRA factor of 2 adapters: 2 layers × 7 modules × 2 factors, at most 4 × 128
    // values each); the micro-batches are one sample each (40, then 20 + 40 > 40)
    const tapeBytes = (tokens: number) => tokens * 2 * (4 * 64 + 2 * 32 + 3 * 128) * 4;
    const gradientBytes = 2 * 2 * 7 * 2 * 4 * 128 * 4;
    expect(Math.max(...during)).toBeGreaterThanOrEqual(tapeBytes(40));
    // no more than one micro-batch's tape at a time
    expect(Math.max(...during)).toBeLessThan(2 * tapeBytes(40) + gradientBytes);
    backend.destroy();
  });
});
