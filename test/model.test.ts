import seedrandom from 'seedrandom';
import { describe, expect, it } from 'vitest';
import type { Backend, KvCache, Tensor } from '../src/backend/backend.js';
import { CpuBackend } from '../src/backend/cpu.js';
import { roundToF16 } from '../src/backend/half.js';
import { randomModel, type ModelWeights } from '../src/model/checkpoint.js';
import { TINY_CONFIGS, type LlamaConfig } from '../src/model/config.js';
import { generate, type GenerationRequest } from '../src/model/generate.js';
import { LlamaModel, type ForwardBatch } from '../src/model/llama.js';
import { LoraBank } from '../src/model/lora-bank.js';
import { denseDelta, LORA_MODULES, randomAdapter, type LoraAdapter, type LoraModule } from '../src/model/peft.js';
import { maxAbs, maxAbsDiff, referenceLogits } from './reference-llama.js';
import { gpu } from './webgpu.js';

const cpu = new CpuBackend();
const tiny = TINY_CONFIGS['tiny']!; // GQA: 4 heads over 2 kv heads, untied
const qwen = TINY_CONFIGS['qwen2-tiny']!; // q/k/v biases, tied embeddings

function randomTokens(c: LlamaConfig, n: number, seed: string): number[] {
  const rng = seedrandom(seed);
  return Array.from({ length: n }, () => Math.floor(rng() * c.vocabSize));
}

function adapters(c: LlamaConfig): LoraAdapter[] {
  return [
    randomAdapter(c, { rank: 4, alpha: 8, targets: [...LORA_MODULES], seed: 11, init: 'gaussian' }),
    randomAdapter(c, { rank: 2, alpha: 3, targets: ['q_proj', 'v_proj', 'down_proj'], seed: 12, init: 'gaussian' }),
    randomAdapter(c, { rank: 4, alpha: 4, targets: ['k_proj', 'o_proj', 'gate_proj', 'up_proj'], seed: 13, init: 'gaussian' }),
  ];
}

function bankOf(backend: Backend, c: LlamaConfig, list: LoraAdapter[]): LoraBank {
  const bank = new LoraBank(backend, c, list.length, 4, LORA_MODULES);
  list.forEach((a, slot) => bank.load(slot, a));
  return bank;
}

/** Relative closeness: max |a - b| <= tol * (1 + max |reference|). */
function expectClose(actual: ArrayLike<number>, reference: ArrayLike<number>, tol: number): void {
  expect(maxAbsDiff(actual, reference)).toBeLessThanOrEqual(tol * (1 + maxAbs(reference)));
}

/** Several sequences prefilled in one forward call; returns each sequence's logits [len, V]. */
async function batchedLogits(model: LlamaModel, sequences: number[][], adapterOf: number[], bank?: LoraBank): Promise<Float32Array[]> {
  const flat = { tokens: [] as number[], slots: [] as number[], positions: [] as number[], adapters: [] as number[] };
  sequences.forEach((seq, s) =>
    seq.forEach((token, p) => {
      flat.tokens.push(token);
      flat.slots.push(s);
      flat.positions.push(p);
      flat.adapters.push(adapterOf[s]!);
    }),
  );
  const T = flat.tokens.length;
  const cache = model.createKvCache(sequences.length, Math.max(...sequences.map((s) => s.length)));
  const all = Int32Array.from({ length: T }, (_, t) => t);
  const logits = model.forward({ tokens: Int32Array.from(flat.tokens), slots: Int32Array.from(flat.slots), positions: Int32Array.from(flat.positions), adapters: Int32Array.from(flat.adapters), logitRows: all }, cache, bank);
  const values = await model.backend.readF32(logits);
  model.freeKvCache(cache);
  const V = model.config.vocabSize;
  let offset = 0;
  return sequences.map((seq) => values.slice((offset += seq.length) * V - seq.length * V, offset * V));
}

/**
 * The forward as it was before the fused ops: every op its own call (16 a layer, 2 more per LoRA module), on the
 * weights' per-module views. The reference the fused forward is held to.
 */
function unfusedForward(model: LlamaModel, batch: ForwardBatch, cache: KvCache, bank?: LoraBank): Tensor {
  const [b, c] = [model.backend, model.config];
  const ids = (a: Int32Array) => b.uploadI32(a, [a.length]);
  const [tokens, slots, positions, adapters] = [ids(batch.tokens), ids(batch.slots), ids(batch.positions), ids(batch.adapters)];
  const linear = (x: Tensor, l: number, module: LoraModule) => {
    const y = b.matmul(x, model.layers[l]!.proj[module], model.layers[l]!.bias[module]);
    if (bank?.targets(module)) bank.apply(y, x, l, module, adapters);
    return y;
  };
  const x = b.embedding(model.embedTokens, tokens);
  model.layers.forEach((layer, l) => {
    const h = b.rmsNorm(x, layer.inputNorm, c.rmsNormEps);
    const [q, k, v] = [linear(h, l, 'q_proj'), linear(h, l, 'k_proj'), linear(h, l, 'v_proj')];
    b.ropeInPlace(q, positions, model.rope, c.numHeads, c.headDim);
    b.ropeInPlace(k, positions, model.rope, c.numKvHeads, c.headDim);
    b.kvWrite(cache, l, k, v, slots, positions);
    b.addInPlace(x, linear(b.attention(q, cache, l, slots, positions, c.numHeads), l, 'o_proj'));
    const h2 = b.rmsNorm(x, layer.postAttentionNorm, c.rmsNormEps);
    b.addInPlace(x, linear(b.swiglu(linear(h2, l, 'gate_proj'), linear(h2, l, 'up_proj')), l, 'down_proj'));
  });
  return b.matmul(b.rmsNorm(b.gatherRows(x, ids(batch.logitRows)), model.finalNorm, c.rmsNormEps), model.lmHead);
}

/** Two sequences prefilled together (one with an adapter), then a decode step of both. */
function twoSteps(c: LlamaConfig): ForwardBatch[] {
  const prompt = randomTokens(c, 7, 'two steps');
  return [
    { tokens: Int32Array.from(prompt), slots: Int32Array.from([0, 0, 0, 0, 1, 1, 1]), positions: Int32Array.from([0, 1, 2, 3, 0, 1, 2]), adapters: Int32Array.from([1, 1, 1, 1, -1, -1, -1]), logitRows: Int32Array.from([3, 6]) },
    { tokens: Int32Array.from([5, 9]), slots: Int32Array.from([0, 1]), positions: Int32Array.from([4, 3]), adapters: Int32Array.from([1, -1]), logitRows: Int32Array.from([0, 1]) },
  ];
}

describe.each([['tiny', tiny], ['qwen2-tiny', qwen]] as const)('%s model on the cpu backend', (_name, config) => {
  const weights = randomModel(config, 5);
  const model = LlamaModel.upload(cpu, config, weights, { maxContext: 64 });
  const tokens = randomTokens(config, 9, 'seq');

  it('matches an independent float64 forward pass', async () => {
    expectClose(await model.logits(tokens), referenceLogits(config, weights, tokens), 1e-5);
  });

  it('with a LoRA adapter equals the base plus the dense delta scale·B·A', async () => {
    const list = adapters(config);
    const bank = bankOf(cpu, config, list);
    for (const [slot, adapter] of list.entries()) {
      const expected = referenceLogits(config, weights, tokens, (layer, module) => (adapter.layers[layer]![module] ? denseDelta(config, adapter, layer, module) : undefined));
      const withAdapter = await model.logits(tokens, slot, bank);
      expectClose(withAdapter, expected, 1e-5);
      expect(maxAbsDiff(withAdapter, await model.logits(tokens))).toBeGreaterThan(1e-3); // the delta is not negligible
    }
  });

  it('reads back from the bank exactly the adapter it was given, at its own rank', async () => {
    const list = adapters(config);
    const bank = bankOf(cpu, config, list);
    expect(await bank.read(1)).toEqual(list[1]); // rank 2 in a rank-4 bank
    await expect(new LoraBank(cpu, config, 2, 4, LORA_MODULES).read(1)).rejects.toThrow(/slot 1 is empty/);
    expect(() => bank.load(3, list[0]!)).toThrow(/slot 3 outside \[0, 3\)/);
  });

  it('fused, gives the unfused sequence of ops bit for bit (prefill and decode, with LoRA)', async () => {
    const bank = bankOf(cpu, config, adapters(config));
    const [fusedCache, unfusedCache] = [model.createKvCache(2, 8), model.createKvCache(2, 8)];
    for (const batch of twoSteps(config)) {
      const [fused, plain] = [await cpu.readF32(model.forward(batch, fusedCache, bank)), await cpu.readF32(unfusedForward(model, batch, unfusedCache, bank))];
      expect(new Uint32Array(fused.buffer)).toEqual(new Uint32Array(plain.buffer));
    }
  });

  it('decodes with the KV cache exactly as a full recompute would (greedy)', async () => {
    const prompt = tokens.slice(0, 4);
    const [result] = await generate(model, [{ requestId: 1, prompt, adapter: -1, maxTokens: 6, seed: 0, temperature: 0 }]);
    const sequence = [...prompt];
    for (let i = 0; i < 6; i++) {
      const logits = referenceLogits(config, weights, sequence).slice((sequence.length - 1) * config.vocabSize);
      sequence.push(logits.indexOf(Math.max(...logits)));
    }
    expect(result!.tokens).toEqual(sequence.slice(prompt.length));
  });
});

describe('generation', () => {
  const weights = randomModel(tiny, 6);
  const model = LlamaModel.upload(cpu, tiny, weights, { maxContext: 64 });
  const base: GenerationRequest = { requestId: 3, prompt: [1, 2, 3], adapter: -1, maxTokens: 12, seed: 9, temperature: 1.5 };

  it('ends at a stop token and keeps it', async () => {
    const [free] = await generate(model, [base]);
    const stop = free!.tokens[4]!;
    const [stopped] = await generate(model, [{ ...base, stopTokens: [stop] }]);
    expect(stopped!.finishReason).toBe('stop');
    expect(stopped!.tokens).toEqual(free!.tokens.slice(0, free!.tokens.indexOf(stop) + 1));
    expect(free!.finishReason).toBe('length');
  });

  it('only emits tokens the mask allows', async () => {
    const words = Math.ceil(tiny.vocabSize / 32);
    const even = new Uint32Array(words).fill(0x55555555); // every even token id
    const [result] = await generate(model, [base], { mask: () => even });
    expect(result!.tokens).toHaveLength(base.maxTokens);
    result!.tokens.forEach((t) => expect(t % 2).toBe(0));
  });

  it('rejects a token outside the vocabulary and an over-long request, naming them', async () => {
    await expect(generate(model, [{ ...base, prompt: [1, 999] }])).rejects.toThrow(/token id 999 .*vocabulary/);
    await expect(generate(model, [{ ...base, maxTokens: 100 }])).rejects.toThrow(/exceeds the context length 64/);
  });
});

describe.skipIf(!gpu)('the model on webgpu', () => {
  const backend = gpu!;
  const weights = randomModel(qwen, 8);
  const list = adapters(qwen);

  function upload(b: Backend, w: ModelWeights, storage: 'f32' | 'f16') {
    return { model: LlamaModel.upload(b, qwen, w, { storage, maxContext: 64 }), bank: bankOf(b, qwen, list) };
  }

  it.each(['f32', 'f16'] as const)('agrees with the cpu backend (%s weights, adapters on)', async (storage) => {
    const onGpu = upload(backend, weights, storage);
    const onCpu = upload(cpu, weights, storage);
    const tokens = randomTokens(qwen, 11, 'gpu-vs-cpu');
    for (const slot of [-1, 0, 1]) {
      expectClose(await onGpu.model.logits(tokens, slot, onGpu.bank), await onCpu.model.logits(tokens, slot, onCpu.bank), 1e-4);
    }
    if (storage === 'f16') expect(roundToF16(weights.layers[0]!.qProj.data)).not.toEqual(weights.layers[0]!.qProj.data);
  });

  it("gives a sequence's logits bit for bit whether alone or in a batch of mixed adapters", async () => {
    const { model, bank } = upload(backend, weights, 'f16');
    const sequences = [randomTokens(qwen, 5, 'a'), randomTokens(qwen, 13, 'b'), randomTokens(qwen, 1, 'c'), randomTokens(qwen, 8, 'd')];
    const adapterOf = [1, -1, 2, 0];
    const together = await batchedLogits(model, sequences, adapterOf, bank);
    for (const [s, seq] of sequences.entries()) {
      const [alone] = await batchedLogits(model, [seq], [adapterOf[s]!], bank);
      expect(new Uint32Array(alone!.buffer)).toEqual(new Uint32Array(together[s]!.buffer));
    }
    const again = await batchedLogits(model, sequences, adapterOf, bank);
    again.forEach((logits, s) => expect(new Uint32Array(logits.buffer)).toEqual(new Uint32Array(together[s]!.buffer)));
  });

  it('agrees with the unfused sequence of ops on the same device (prefill and decode, with LoRA)', async () => {
    const { model, bank } = upload(backend, weights, 'f16');
    const [fusedCache, unfusedCache] = [model.createKvCache(2, 8), model.createKvCache(2, 8)];
    for (const batch of twoSteps(qwen)) {
      expectClose(await backend.readF32(model.forward(batch, fusedCache, bank)), await backend.readF32(unfusedForward(model, batch, unfusedCache, bank)), 1e-4);
    }
  });

  it('decodes a token in 5 dispatches a layer + 3 (4 more a layer with LoRA on all seven modules)', async () => {
    const { model } = upload(backend, weights, 'f16');
    const bank = new LoraBank(backend, qwen, 2, 4, LORA_MODULES);
    bank.load(0, list[0]!);
    for (const [adapter, perLayer] of [[-1, 5], [0, 9]] as const) {
      const request: GenerationRequest = { requestId: 1, prompt: [3], adapter, maxTokens: 3, seed: 1 };
      const before = backend.dispatches();
      await generate(model, [request], { bank }); // three decode steps (a one-token prompt needs no prefill): 3 forwards and 3 samplings
      expect((backend.dispatches() - before) / 3).toBe(perLayer * qwen.numLayers + 3); // embedding, LM head, sampling
    }
  });

  it('samples the same tokens for a request alone as in a mixed batch', async () => {
    const { model, bank } = upload(backend, weights, 'f16');
    const requests: GenerationRequest[] = [0, 1, 2, 3, 4].map((i) => ({ requestId: 40 + i, prompt: randomTokens(qwen, 2 + 3 * i, `p${i}`), adapter: i - 1 < 3 ? i - 1 : -1, maxTokens: 10 + i, seed: 77, temperature: 0.9, topP: 0.9 }));
    const batched = await generate(model, requests, { bank });
    for (const [i, request] of requests.entries()) {
      const [alone] = await generate(model, [request], { bank });
      expect(alone!.tokens).toEqual(batched[i]!.tokens);
    }
    expect(new Set(batched.map((r) => r.tokens.join())).size).toBe(requests.length);
  });
});
