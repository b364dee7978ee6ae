// Training the policy a grammar sampled (src/train/grammar-policy.ts, rl.maskedLogProbs): with a sequence's
// allowed tokens, log p and the entropy a training forward reads are those of the distribution renormalised over
// the allowed tokens, computed independently in float64 (reference-llama.ts), on the CPU and on WebGPU; the LoRA
// gradient is that renormalised log-likelihood's (central finite differences); the masks a completion is trained
// under are the ones generate() sampled it under (every sampled token allowed, padded ids forbidden); a run with
// the option trains differently from one without, and a domain without a grammar refuses it.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import seedrandom from 'seedrandom';
import { describe, expect, it } from 'vitest';
import type { Backend } from '../src/backend/backend.js';
import { CpuBackend } from '../src/backend/cpu.js';
import { domainNamed } from '../src/domains/index.js';
import { loadModel, randomModel } from '../src/model/checkpoint.js';
import { TINY_CONFIGS } from '../src/model/config.js';
import { generate } from '../src/model/generate.js';
import { LlamaModel } from '../src/model/llama.js';
import { LoraBank } from '../src/model/lora-bank.js';
import { LORA_MODULES, randomAdapter } from '../src/model/peft.js';
import { tokenTexts } from '../src/model/token-texts.js';
import { loadTokenizer } from '../src/model/tokenizer.js';
import { parseScenario, ScenarioError } from '../src/scenario/scenario.js';
import { runScenario } from '../src/sim/run.js';
import { packSequences, type TrainSequence } from '../src/train/batch.js';
import { completionMasks, isAllowed, writeForbidden, type AllowedTokens } from '../src/train/grammar-policy.js';
import { LlamaTrainer, loraGradKey } from '../src/train/llama-backward.js';
import { logLikelihoodWeights } from '../src/train/objective.js';
import { gradientsOf, readLogProbs } from '../src/train/steps.js';
import { loraDelta64, referenceLogits } from './reference-llama.js';
import { gpu } from './webgpu.js';

const c = TINY_CONFIGS['tiny']!;
const weights = randomModel(c, 3);
const adapter = randomAdapter(c, { rank: 4, alpha: 8, targets: [...LORA_MODULES], seed: 21, init: 'gaussian' });
const rng = seedrandom('grammar');
const tokens = Array.from({ length: 8 }, () => Math.floor(rng() * c.vocabSize));
const bitmask = (allowed: (v: number) => boolean) => {
  const mask = new Uint32Array(Math.ceil(c.vocabSize / 32));
  for (let v = 0; v < c.vocabSize; v++) if (allowed(v)) mask[v >>> 5] = mask[v >>> 5]! | (1 << (v & 31));
  return mask;
};
// positions 4..7 masked: each keeps its own token and about a third of the others
const allowed: AllowedTokens = { start: 4, masks: tokens.slice(4).map((token) => bitmask((v) => v === token || rng() < 0.35)) };

/** Per predicted position t (token t+1): log π and the entropy of π, π renormalised over the allowed tokens where masked; float64. */
function reference64(delta = loraDelta64(c, adapter)): Array<{ logp: number; entropy: number }> {
  const logits = referenceLogits(c, weights, tokens, delta);
  const V = c.vocabSize;
  return tokens.slice(1).map((next, t) => {
    const mask = t + 1 >= allowed.start ? allowed.masks[t + 1 - allowed.start]! : null;
    const row = Array.from(logits.subarray(t * V, (t + 1) * V)).map((z, v) => (mask && !isAllowed(mask, v) ? -Infinity : z));
    const max = Math.max(...row);
    const logZ = max + Math.log(row.reduce((s, z) => s + Math.exp(z - max), 0));
    const entropy = row.reduce((h, z) => (z === -Infinity ? h : h - Math.exp(z - logZ) * (z - logZ)), 0);
    return { logp: row[next]! - logZ, entropy };
  });
}

function trainerOn(backend: Backend) {
  const model = LlamaModel.upload(backend, c, weights, { maxContext: 64 });
  const bank = new LoraBank(backend, c, 1, 4, LORA_MODULES);
  bank.load(0, adapter);
  return { bank, trainer: new LlamaTrainer(model, bank) };
}

const sequence: TrainSequence = { tokens, adapter: 0, allowed };

describe('a training forward with a grammar\'s allowed tokens', () => {
  for (const [name, backend] of [['cpu', new CpuBackend()], ['webgpu', gpu]] as const) {
    it.skipIf(!backend)(`reads log p and the entropy of the renormalised distribution (${name})`, async () => {
      const { trainer } = trainerOn(backend!);
      const batch = packSequences([sequence], c.vocabSize, 64);
      const tape = trainer.forward(batch);
      const values = await readLogProbs(trainer, tape);
      trainer.freeTape(tape);
      reference64().forEach(({ logp, entropy }, t) => {
        expect(values[t * 2]!, `log p at ${t}`).toBeCloseTo(logp, 4);
        expect(values[t * 2 + 1]!, `entropy at ${t}`).toBeCloseTo(entropy, 4);
      });
      // without the masks, the masked positions read the whole vocabulary's (lower) log p
      const plain = await readLogProbs(trainer, trainer.forward(packSequences([{ tokens, adapter: 0 }], c.vocabSize, 64)));
      expect(plain[6 * 2]!).toBeLessThan(values[6 * 2]! - 1e-3);
    });
  }

  it('gives the LoRA gradient of the renormalised log-likelihood (central finite differences)', async () => {
    const { bank, trainer } = trainerOn(new CpuBackend());
    const batch = packSequences([sequence], c.vocabSize, 64);
    const { grads } = await gradientsOf(trainer, batch, 'lora', (logProbs) => logLikelihoodWeights(batch, logProbs));
    const gradient = await bank.readSlotOf(0, (layer, module) => ({ a: grads.get(loraGradKey(layer, module, 'a'))!, b: grads.get(loraGradKey(layer, module, 'b'))! }));
    const probe = seedrandom('probes');
    const h = 1e-4;
    for (let k = 0; k < 16; k++) {
      const layer = Math.floor(probe() * c.numLayers);
      const module = LORA_MODULES[k % LORA_MODULES.length]!;
      const factor = k % 2 === 0 ? 'a' : 'b';
      const original = Float64Array.from(adapter.layers[layer]![module]![factor]);
      const index = Math.floor(probe() * original.length);
      const at = (value: number) => {
        const values = original.slice();
        values[index] = value;
        return reference64(loraDelta64(c, adapter, { layer, module, factor, values })).reduce((s, r) => s + r.logp, 0);
      };
      const numeric = (at(original[index]! + h) - at(original[index]! - h)) / (2 * h);
      const analytic = gradient.layers[layer]![module]![factor][index]!;
      expect(Math.abs(analytic - numeric), `${layer}.${module}.${factor}[${index}]`).toBeLessThanOrEqual(2e-4 * (1 + Math.abs(numeric)));
    }
  });

  it('refuses a sequence whose token is outside its mask, or a mask past the sequence', () => {
    const bias = new Float32Array(tokens.length * c.vocabSize);
    const forbidding = { start: 5, masks: [bitmask((v) => v !== tokens[5])] };
    expect(() => writeForbidden(bias, c.vocabSize, 0, forbidding, tokens)).toThrow(/token \d+ at position 5 is outside the grammar's mask there/);
    expect(() => writeForbidden(bias, c.vocabSize, 0, { start: tokens.length, masks: [bitmask(() => true)] }, tokens)).toThrow(/positions 1 to 7 are predicted/);
  });
});

describe('the masks a completion is trained under', () => {
  it('are the ones generate() sampled it under: every sampled token allowed, the padded ids never', async () => {
    const arith = domainNamed('arith');
    const { config, weights: arithWeights, tokenizerFile } = loadModel('models/arith-tiny');
    const tokenizer = loadTokenizer(tokenizerFile!);
    const vocab = tokenTexts(tokenizer, config.vocabSize);
    const model = LlamaModel.upload(new CpuBackend(), config, arithWeights);
    const formats = ['proposal/deduce', 'proposal/induce', 'answer/deduce', 'answer/abduce', 'answer/induce'] as const;
    const prompts = ['=?\n', '??\n', 'x*3;x=4;=?\n', 'x+7;x=?;=9\n', '1:2,2:4,3:6;??\n'];
    const maxTokens = 24;
    const requests = formats.flatMap((_, f) => Array.from({ length: 6 }, (__, i) => ({ requestId: f * 6 + i, prompt: tokenizer.encodePrompt(prompts[f]!), adapter: -1, maxTokens, seed: 5, temperature: 1.5, stopTokens: [vocab.eos] })));
    const results = await generate(model, requests, { mask: { automata: requests.map((r) => arith.tokenAutomaton!(formats[Math.floor(r.requestId / 6)]!, vocab)) } });
    for (const [i, result] of results.entries()) {
      const masks = completionMasks(arith.tokenMask!(formats[Math.floor(i / 6)]!, vocab)!, vocab, result.tokens, maxTokens);
      const prompt = requests[i]!.prompt;
      const whole = [...prompt, ...result.tokens];
      expect(() => writeForbidden(new Float32Array(whole.length * config.vocabSize), config.vocabSize, 0, { start: prompt.length, masks }, whole)).not.toThrow();
      for (const mask of masks) for (let v = tokenizer.vocabSize; v < config.vocabSize; v++) expect(isAllowed(mask, v)).toBe(false);
    }
  });
});

describe('rl.maskedLogProbs in a scenario', () => {
  const text = (extra: string) => `name: masked\nseed: 4\nsteps: 2\nbackend: cpu\nmodel: { path: models/arith-tiny }\npopulation: { subpopulations: 2, teachers: 1, students: 1, lora: { rank: 4 } }\ntasks: { perTeacher: 1 }\nmatchmaking: { policy: cross, studentsPerTask: 1 }\nsampling: { answersPerStudent: 2, maxTokens: 24 }\nrl: { lr: 0.01${extra} }\n`;

  it('trains the same samples with another loss, and is absent from a scenario that does not name it', async () => {
    const [plain, masked] = [parseScenario(text(''), 'plain.yaml'), parseScenario(text(', maskedLogProbs: true'), 'masked.yaml')];
    expect('maskedLogProbs' in plain.rl).toBe(false);
    const fresh = () => mkdtempSync(join(tmpdir(), 'populora-masked-'));
    const [a, b] = [await runScenario({ ...plain, steps: 1 }, { outDir: fresh() }), await runScenario({ ...masked, steps: 1 }, { outDir: fresh() })];
    expect(b.hash).toBe(a.hash); // one step: the same proposals, answers and rewards
    expect(b.last!.trainLoss).not.toBe(a.last!.trainLoss); // trained as the renormalised distribution
  });

  it('is refused for a domain that samples without a grammar, naming the field', () => {
    const python = `name: p\nseed: 1\nsteps: 1\nbackend: cpu\nmodel: { path: models/python-tiny }\ndomain: python\npopulation: { subpopulations: 2 }\nrl: { maskedLogProbs: true }\n`;
    expect(() => parseScenario(python, 'p.yaml')).toThrow(ScenarioError);
    expect(() => parseScenario(python, 'p.yaml')).toThrow(/p\.yaml: field "rl\.maskedLogProbs": the python domain samples without a grammar/);
  });
});
