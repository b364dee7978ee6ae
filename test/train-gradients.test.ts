// The training backward against central finite differences of the independent float64 forward pass
// (reference-llama.ts), and the batching guarantees: an adapter's gradient does not depend on its batch.
import seedrandom from 'seedrandom';
import { describe, expect, it } from 'vitest';
import type { Backend } from '../src/backend/backend.js';
import { CpuBackend } from '../src/backend/cpu.js';
import { randomModel, type HostTensor, type ModelWeights } from '../src/model/checkpoint.js';
import { TINY_CONFIGS, type LlamaConfig } from '../src/model/config.js';
import { LlamaModel } from '../src/model/llama.js';
import { LoraBank } from '../src/model/lora-bank.js';
import { LORA_MODULES, randomAdapter, type LoraAdapter, type LoraModule } from '../src/model/peft.js';
import { packSequences, type TrainSequence } from '../src/train/batch.js';
import { LlamaTrainer, loraGradKey, type Gradients } from '../src/train/llama-backward.js';
import { logLikelihoodWeights } from '../src/train/objective.js';
import { gradientsOf } from '../src/train/steps.js';
import { loraDelta64, maxAbs, maxAbsDiff, referenceLogits, type DeltaFn } from './reference-llama.js';
import { gpu } from './webgpu.js';

const cpu = new CpuBackend();
const configs = [['tiny', TINY_CONFIGS['tiny']!], ['qwen2-tiny', TINY_CONFIGS['qwen2-tiny']!]] as const;

/** Σ_{t >= 1} log p(tokens[t] | tokens[<t]) in float64. */
function logLikelihood64(c: LlamaConfig, w: ModelWeights, tokens: number[], delta?: DeltaFn): number {
  const logits = referenceLogits(c, w, tokens, delta);
  const V = c.vocabSize;
  let total = 0;
  for (let t = 1; t < tokens.length; t++) {
    const row = logits.subarray((t - 1) * V, t * V);
    const max = Math.max(...row);
    const logZ = max + Math.log(row.reduce((s, z) => s + Math.exp(z - max), 0));
    total += row[tokens[t]!]! - logZ;
  }
  return total;
}

function tokensOf(c: LlamaConfig, n: number, seed: string): number[] {
  const rng = seedrandom(seed);
  return Array.from({ length: n }, () => Math.floor(rng() * c.vocabSize));
}

/** Gradients of Σ log p(next token) over every sequence, on the trainer's backend. */
async function logLikelihoodGradients(trainer: LlamaTrainer, sequences: TrainSequence[], mode: 'lora' | 'full'): Promise<Gradients> {
  const { config, maxContext } = trainer.model;
  const batch = packSequences(sequences, config.vocabSize, maxContext);
  return (await gradientsOf(trainer, batch, mode, (logProbs) => logLikelihoodWeights(batch, logProbs))).grads;
}

async function slotGradient(bank: LoraBank, grads: Gradients, slot: number): Promise<LoraAdapter> {
  return bank.readSlotOf(slot, (layer, module) => ({ a: grads.get(loraGradKey(layer, module, 'a'))!, b: grads.get(loraGradKey(layer, module, 'b'))! }));
}

function setup(backend: Backend, c: LlamaConfig, adapters: LoraAdapter[], storage: 'f32' | 'f16' = 'f32') {
  const model = LlamaModel.upload(backend, c, randomModel(c, 3), { maxContext: 64, storage });
  const bank = new LoraBank(backend, c, adapters.length, 4, LORA_MODULES);
  adapters.forEach((a, slot) => bank.load(slot, a));
  return { model, bank, trainer: new LlamaTrainer(model, bank) };
}

const adaptersFor = (c: LlamaConfig) => [
  randomAdapter(c, { rank: 4, alpha: 8, targets: [...LORA_MODULES], seed: 21, init: 'gaussian' }),
  randomAdapter(c, { rank: 2, alpha: 3, targets: ['q_proj', 'v_proj', 'down_proj'], seed: 22, init: 'gaussian' }),
  randomAdapter(c, { rank: 4, alpha: 4, targets: ['k_proj', 'o_proj', 'gate_proj', 'up_proj'], seed: 23, init: 'gaussian' }),
];

describe.each(configs)('LoRA gradients of the %s model', (_name, c) => {
  const weights = randomModel(c, 3);
  const adapter = adaptersFor(c)[0]!;
  const tokens = tokensOf(c, 7, 'fd');

  it('match central finite differences of the float64 forward pass', async () => {
    const { bank, trainer } = setup(cpu, c, [adapter]);
    const grads = await slotGradient(bank, await logLikelihoodGradients(trainer, [{ tokens, adapter: 0 }], 'lora'), 0);
    const rng = seedrandom('entries');
    const h = 1e-4;
    for (let probe = 0; probe < 24; probe++) {
      const layer = Math.floor(rng() * c.numLayers);
      const module = LORA_MODULES[probe % LORA_MODULES.length]!;
      const factor = probe % 2 === 0 ? 'a' : 'b';
      const original = Float64Array.from(adapter.layers[layer]![module]![factor]);
      const index = Math.floor(rng() * original.length);
      const at = (value: number) => {
        const values = original.slice();
        values[index] = value;
        return logLikelihood64(c, weights, tokens, loraDelta64(c, adapter, { layer, module, factor, values }));
      };
      const numeric = (at(original[index]! + h) - at(original[index]! - h)) / (2 * h);
      const analytic = grads.layers[layer]![module]![factor][index]!;
      expect(Math.abs(analytic - numeric), `${layer}.${module}.${factor}[${index}]`).toBeLessThanOrEqual(2e-4 * (1 + Math.abs(numeric)));
    }
  });

  it('give each adapter of a mixed batch exactly the gradient it gets alone', async () => {
    const list = adaptersFor(c);
    const { bank, trainer } = setup(cpu, c, list);
    const sequences = [0, 1, 2, 0, 2].map((slot, i) => ({ tokens: tokensOf(c, 4 + i, `mix${i}`), adapter: slot }));
    const mixed = await logLikelihoodGradients(trainer, sequences, 'lora');
    for (const slot of [0, 1, 2]) {
      const alone = await logLikelihoodGradients(trainer, sequences.filter((s) => s.adapter === slot), 'lora');
      const [fromMixed, fromAlone] = [await slotGradient(bank, mixed, slot), await slotGradient(bank, alone, slot)];
      expect(fromMixed).toEqual(fromAlone);
    }
  });
});

/** A copy of the weights with one entry of one tensor moved by `step`. */
function nudged(w: ModelWeights, pick: (w: ModelWeights) => HostTensor, index: number, step: number): ModelWeights {
  const copy = structuredClone(w);
  const t = pick(copy);
  t.data[index] = t.data[index]! + step;
  return copy;
}

describe.each(configs)('full-parameter gradients of the %s model', (_name, c) => {
  it('match central finite differences of the float64 forward pass', async () => {
    const weights = randomModel(c, 3);
    const model = LlamaModel.upload(cpu, c, weights, { maxContext: 64, storage: 'f32' });
    const trainer = new LlamaTrainer(model);
    const tokens = tokensOf(c, 6, 'full');
    const grads = await logLikelihoodGradients(trainer, [{ tokens, adapter: -1 }], 'full');
    const probes: [string, (w: ModelWeights) => HostTensor][] = [
      ['model.embed_tokens.weight', (w) => w.embedTokens],
      ['model.norm.weight', (w) => w.norm],
      ['model.layers.0.input_layernorm.weight', (w) => w.layers[0]!.inputNorm],
      ['model.layers.1.post_attention_layernorm.weight', (w) => w.layers[1]!.postAttentionNorm],
      ['model.layers.0.self_attn.q_proj.weight', (w) => w.layers[0]!.qProj],
      ['model.layers.1.self_attn.k_proj.weight', (w) => w.layers[1]!.kProj],
      ['model.layers.0.mlp.down_proj.weight', (w) => w.layers[0]!.downProj],
      ['model.layers.1.mlp.gate_proj.weight', (w) => w.layers[1]!.gateProj],
      ...(c.attentionBias ? [['model.layers.0.self_attn.v_proj.bias', (w: ModelWeights) => w.layers[0]!.vBias!] as [string, (w: ModelWeights) => HostTensor]] : []),
      ...(c.tieWordEmbeddings ? [] : [['lm_head.weight', (w: ModelWeights) => w.lmHead!] as [string, (w: ModelWeights) => HostTensor]]),
    ];
    const h = 1e-2; // exact in f32 next to weights of order 1, so the nudge itself is not rounded away
    for (const [name, pick] of probes) {
      const analytic = await cpu.readF32(grads.get(name)!);
      // Entries with a gradient: the embedding rows of the tokens used, anything elsewhere.
      const candidates = name === 'model.embed_tokens.weight' ? [tokens[2]! * c.hiddenSize + 5, tokens[4]! * c.hiddenSize + 17] : [3, analytic.length - 2];
      for (const index of candidates) {
        const numeric = (logLikelihood64(c, nudged(weights, pick, index, h), tokens) - logLikelihood64(c, nudged(weights, pick, index, -h), tokens)) / (2 * h);
        expect(Math.abs(analytic[index]! - numeric), `${name}[${index}]`).toBeLessThanOrEqual(2e-3 * (1 + Math.abs(numeric)));
      }
    }
  });
});

describe.skipIf(!gpu)('training on webgpu', () => {
  for (const [name, c] of configs) {
    it(`gives the cpu reference's LoRA gradients for a mixed batch (${name})`, async () => {
      const list = adaptersFor(c);
      const sequences = [0, 1, 2, 0].map((slot, i) => ({ tokens: tokensOf(c, 5 + i, `gpu${i}`), adapter: slot }));
      const onCpu = setup(cpu, c, list);
      const onGpu = setup(gpu!, c, list);
      const [expected, actual] = [await logLikelihoodGradients(onCpu.trainer, sequences, 'lora'), await logLikelihoodGradients(onGpu.trainer, sequences, 'lora')];
      for (const slot of [0, 1, 2]) {
        const [e, a] = [await slotGradient(onCpu.bank, expected, slot), await slotGradient(onGpu.bank, actual, slot)];
        for (const [layer, modules] of e.layers.entries()) {
          for (const [module, f] of Object.entries(modules)) {
            const g = a.layers[layer]![module as LoraModule]!;
            expect(maxAbsDiff(g.a, f.a), `slot ${slot} ${layer}.${module}.a`).toBeLessThanOrEqual(1e-4 * (1 + maxAbs(f.a)));
            expect(maxAbsDiff(g.b, f.b), `slot ${slot} ${layer}.${module}.b`).toBeLessThanOrEqual(1e-4 * (1 + maxAbs(f.b)));
          }
        }
      }
      const alone = await logLikelihoodGradients(onGpu.trainer, sequences.filter((s) => s.adapter === 1), 'lora');
      expect(await slotGradient(onGpu.bank, alone, 1)).toEqual(await slotGradient(onGpu.bank, actual, 1));
    });

    it(`gives the cpu reference's full-parameter gradients (${name})`, async () => {
      const weights = randomModel(c, 3);
      const sequences = [{ tokens: tokensOf(c, 6, 'g1'), adapter: -1 }, { tokens: tokensOf(c, 3, 'g2'), adapter: -1 }];
      const trainers = [cpu, gpu!].map((b) => new LlamaTrainer(LlamaModel.upload(b, c, weights, { maxContext: 64, storage: 'f32' })));
      const [expected, actual] = [await logLikelihoodGradients(trainers[0]!, sequences, 'full'), await logLikelihoodGradients(trainers[1]!, sequences, 'full')];
      expect([...actual!.keys()].sort()).toEqual([...expected!.keys()].sort());
      for (const [key, tensor] of expected!) {
        const [e, a] = [await cpu.readF32(tensor), await gpu!.readF32(actual!.get(key)!)];
        expect(maxAbsDiff(a, e), key).toBeLessThanOrEqual(1e-4 * (1 + maxAbs(e)));
      }
    });
  }
});
