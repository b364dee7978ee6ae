// Training behaviour: the losses' per-token weights, advantages, AdamW, and short runs that must learn.
import seedrandom from 'seedrandom';
import { describe, expect, it } from 'vitest';
import type { Backend } from '../src/backend/backend.js';
import { CpuBackend } from '../src/backend/cpu.js';
import { randomModel } from '../src/model/checkpoint.js';
import { TINY_CONFIGS } from '../src/model/config.js';
import { generate } from '../src/model/generate.js';
import { LlamaModel } from '../src/model/llama.js';
import { LoraBank } from '../src/model/lora-bank.js';
import { LORA_MODULES, randomAdapter } from '../src/model/peft.js';
import { AdamW } from '../src/train/adamw.js';
import { groupAdvantages } from '../src/train/advantages.js';
import { packSequences } from '../src/train/batch.js';
import { LlamaTrainer } from '../src/train/llama-backward.js';
import { policyGradientWeights, trainedTokenMask, type PolicyGradientOptions } from '../src/train/objective.js';
import { crossEntropyStep, policyGradientStep, readLogProbs } from '../src/train/steps.js';
import { gpu } from './webgpu.js';

const cpu = new CpuBackend();
const tiny = TINY_CONFIGS['tiny']!;

describe('loss weights', () => {
  // Sequence 0 (adapter 0): prompt 2, completion 2; sequence 1 (adapter 1): prompt 1, completion 3.
  const batch = packSequences([{ tokens: [1, 2, 3, 4], adapter: 0 }, { tokens: [5, 6, 7, 8], adapter: 1 }], 64, 64);
  const promptLengths = [2, 1];

  it('train exactly the tokens that predict a completion token', () => {
    expect(Array.from(trainedTokenMask(batch, promptLengths))).toEqual([0, 1, 1, 0, 1, 1, 1, 0]);
  });

  it('average per adapter, so an adapter does not feel the other adapters\' share of the batch', () => {
    const logProbs = new Float32Array(16);
    const w = policyGradientWeights({ batch, promptLengths, advantages: [2, -3], logProbs }, { reduction: 'token' });
    expect(Array.from(w.logpWeight)).toEqual([0, 1, 1, 0, -1, -1, -1, 0]); // A / tokens: 2/2 and -3/3
  });

  it('are minus the derivative of the reported loss, with PPO clipping, KL and entropy terms', () => {
    const rng = seedrandom('pg');
    const logProbs = Float32Array.from({ length: 16 }, (_, i) => (i % 2 ? 1 + rng() : -1 - rng()));
    const oldLogProbs = Float32Array.from({ length: 8 }, (_, t) => logProbs[t * 2]! + (t % 3 === 0 ? 0.5 : -0.05));
    const referenceLogProbs = Float32Array.from({ length: 8 }, () => -1 - rng());
    const options: PolicyGradientOptions = { reduction: 'sequence', clip: 0.2, klCoef: 0.3, entropyCoef: 0.01 };
    const inputs = { batch, promptLengths, advantages: [0.7, -1.2], logProbs, oldLogProbs, referenceLogProbs };
    const w = policyGradientWeights(inputs, options);
    const h = 2 ** -10; // exact next to f32 log-probs in (-2, -1)
    for (let t = 0; t < 8; t++) {
      const at = (step: number) => {
        const moved = logProbs.slice();
        moved[t * 2] = moved[t * 2]! + step;
        return policyGradientWeights({ ...inputs, logProbs: moved }, options).loss;
      };
      const derivative = (at(h) - at(-h)) / (2 * h);
      expect(-derivative).toBeCloseTo(w.logpWeight[t]!, 4);
    }
    expect(w.clipFraction).toBeGreaterThan(0); // the 0.5 shift pushed some ratios past 1 ± 0.2
  });
});

describe('advantages', () => {
  it('are whitened within each group, and zero for a group with one reward value', () => {
    const rewards = [1, 0, 0, 1, 1, 5, 5, 7];
    const groups = ['a', 'a', 'a', 'a', 'b', 'c', 'c', 'c'];
    const adv = groupAdvantages(rewards, groups);
    for (const g of ['a', 'c']) {
      const values = adv.filter((_, i) => groups[i] === g);
      const mean = values.reduce((s, v) => s + v, 0) / values.length;
      const variance = values.reduce((s, v) => s + (v - mean) ** 2, 0) / values.length;
      expect(mean).toBeCloseTo(0, 9);
      expect(variance).toBeCloseTo(1, 4);
    }
    expect(adv[4]).toBe(0);
    expect(groupAdvantages([1, 3], ['x', 'x'], 'center')).toEqual([-1, 1]);
  });
});

describe('AdamW', () => {
  it('updates only the active slots, clips by each slot\'s own global norm, and keeps per-slot step counts', async () => {
    const a = cpu.upload(Float32Array.of(1, 1, 1, 1), [2, 2]); // slot 0: row 0, slot 1: row 1
    const b = cpu.upload(Float32Array.of(0, 0), [2, 1]);
    const optimizer = new AdamW(cpu, new Map([['a', { tensor: a, slotSize: 2 }], ['b', { tensor: b, slotSize: 1 }]]), 2, { lr: 0.1, maxGradNorm: 1 });
    const grads = new Map([['a', cpu.upload(Float32Array.of(3, 0, 1, 1), [2, 2])], ['b', cpu.upload(Float32Array.of(4, 0), [2, 1])]]);
    const { gradNorms } = await optimizer.step(grads, [0]);
    expect(gradNorms.get(0)).toBeCloseTo(5, 6); // √(3² + 0² + 4²), slot 1 inactive
    expect(gradNorms.has(1)).toBe(false);
    // First step: m̂/√v̂ = sign(g) for every nonzero g, whatever the clipping scale.
    expect(Array.from(await cpu.readF32(a))).toEqual([Math.fround(1 - 0.1), 1, 1, 1]);
    expect((await cpu.readF32(b))[0]).toBeCloseTo(-0.1, 6);
    expect([optimizer.stepCount(0), optimizer.stepCount(1)]).toEqual([1, 0]);
  });
});

describe('AdamW slot state', () => {
  it('copySlot makes a child continue exactly as its parent would; resetSlot starts it fresh', async () => {
    const param = cpu.upload(Float32Array.of(1, 2, 1, 2), [2, 2]);
    const optimizer = new AdamW(cpu, new Map([['w', { tensor: param, slotSize: 2 }]]), 2, { lr: 0.1 });
    const grad = (values: number[]) => new Map([['w', cpu.upload(Float32Array.from(values), [2, 2])]]);
    await optimizer.step(grad([0.5, -1, 0, 0]), [0]);
    await optimizer.step(grad([0.2, 0.3, 0, 0]), [0]);
    await optimizer.copySlot(0, 1);
    cpu.write(param, (await cpu.readF32(param)).slice(0, 2), 2); // the child starts from the parent's weights
    await optimizer.step(grad([0.1, 0.7, 0.1, 0.7]), [0, 1]);
    const after = await cpu.readF32(param);
    expect(after.slice(2)).toEqual(after.slice(0, 2));
    expect(optimizer.stepCount(1)).toBe(3);
    optimizer.resetSlot(1);
    expect(optimizer.stepCount(1)).toBe(0);
  });
});

/** Probability mass the model (through bank slot 0) puts on tokens below 16 after `prompt`. */
async function targetMass(model: LlamaModel, bank: LoraBank, prompt: number[]): Promise<number> {
  const logits = await model.logits(prompt, 0, bank);
  const row = logits.slice((prompt.length - 1) * tiny.vocabSize);
  const max = Math.max(...row);
  const e = Array.from(row, (z) => Math.exp(z - max));
  return e.slice(0, 16).reduce((s, v) => s + v, 0) / e.reduce((s, v) => s + v, 0);
}

async function banditRun(backend: Backend, steps: number) {
  const model = LlamaModel.upload(backend, tiny, randomModel(tiny, 8), { maxContext: 32, storage: 'f32' });
  const bank = new LoraBank(backend, tiny, 1, 4, LORA_MODULES);
  bank.load(0, randomAdapter(tiny, { rank: 4, alpha: 8, targets: [...LORA_MODULES], seed: 4, init: 'peft' }));
  const trainer = new LlamaTrainer(model, bank);
  const optimizer = AdamW.forBank(backend, bank, tiny.numLayers, { lr: 0.02, maxGradNorm: 1 });
  const prompt = [1, 7, 9];
  const before = await targetMass(model, bank, prompt);
  for (let step = 0; step < steps; step++) {
    const requests = Array.from({ length: 32 }, (_, i) => ({ requestId: step * 32 + i, prompt, adapter: 0, maxTokens: 1, seed: 99 }));
    const results = await generate(model, requests, { bank });
    const rewards = results.map((r) => (r.tokens[0]! < 16 ? 1 : 0));
    const advantages = groupAdvantages(rewards, rewards.map(() => 'all'));
    await policyGradientStep(trainer, optimizer, results.map((r, i) => ({ tokens: [...prompt, ...r.tokens], adapter: 0, promptLength: prompt.length, advantage: advantages[i]! })), { reduction: 'token' });
  }
  return { before, after: await targetMass(model, bank, prompt), adapter: await bank.read(0) };
}

describe('training runs', () => {
  it('policy gradient on a bandit (reward the tokens below 16) moves probability onto them', async () => {
    const { before, after } = await banditRun(cpu, 12);
    expect(after).toBeGreaterThan(before + 0.3);
  });

  it('full-parameter training lowers the cross-entropy of a tiny model on a fixed corpus', async () => {
    const model = LlamaModel.upload(cpu, tiny, randomModel(tiny, 9), { maxContext: 32, storage: 'f32' });
    const trainer = new LlamaTrainer(model);
    const optimizer = AdamW.forTensors(cpu, trainer.parameters(), { lr: 0.01, maxGradNorm: 1 });
    const corpus = [[1, 10, 11, 12, 13, 14, 15, 2], [1, 20, 21, 22, 23, 24, 2], [1, 10, 11, 12, 30, 31, 2]].map((tokens) => ({ tokens, adapter: -1 }));
    const losses: number[] = [];
    for (let step = 0; step < 30; step++) losses.push((await crossEntropyStep(trainer, optimizer, corpus, 'full')).loss);
    expect(losses.at(-1)!).toBeLessThan(losses[0]! * 0.3);
  });

  it('is deterministic: the same run gives bit-identical adapters', async () => {
    const [first, second] = [await banditRun(cpu, 2), await banditRun(cpu, 2)];
    expect(second.adapter).toEqual(first.adapter);
  });

  it.skipIf(!gpu)('on webgpu, learns the bandit too and repeats itself bit for bit', async () => {
    const [first, second] = [await banditRun(gpu!, 12), await banditRun(gpu!, 12)];
    expect(first.after).toBeGreaterThan(first.before + 0.3);
    expect(second.adapter).toEqual(first.adapter);
  });
});

describe('the trainer\'s forward', () => {
  it('gives the inference forward\'s logits and log-probs', async () => {
    const model = LlamaModel.upload(cpu, tiny, randomModel(tiny, 2), { maxContext: 32 });
    const trainer = new LlamaTrainer(model);
    const tokens = [1, 5, 9, 33, 2, 60];
    const tape = trainer.forward(packSequences([{ tokens, adapter: -1 }], tiny.vocabSize, 32));
    const [trained, inferred] = [await cpu.readF32(tape.logits), await model.logits(tokens)];
    trained.forEach((z, i) => expect(z).toBeCloseTo(inferred[i]!, 5));
    const logProbs = await readLogProbs(trainer, tape);
    const V = tiny.vocabSize;
    const row = Array.from(inferred.slice(0, V));
    const logZ = Math.log(row.reduce((s, z) => s + Math.exp(z), 0));
    expect(logProbs[0]).toBeCloseTo(row[5]! - logZ, 5);
    trainer.freeTape(tape);
  });
});
