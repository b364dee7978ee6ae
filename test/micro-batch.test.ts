// Phases in micro-batches give the whole batch's bits (DESIGN.md, "Speed without losing batch invariance"):
// generation under a KV budget, its prompts prefilled in chunks of any size, yields each request's tokens of the
// whole batch; a policy-gradient step in micro-batches of whole samples gives the whole batch's adapters, optimizer
// state and report, its gradient being each sample's own gradient added up in sample order (held against samples
// trained alone and added on the host); the logits of the trained rows alone give the gradient of every row's; and a
// run gives the same hash, metrics and checkpoints with a budget of one sequence, a few, and unbounded, on the CPU
// backend and on WebGPU, a resume taking any budget.
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Backend } from '../src/backend/backend.js';
import { CpuBackend } from '../src/backend/cpu.js';
import { microBatches, resolveBudget } from '../src/engine/budget.js';
import { LocalEngineCore } from '../src/engine/core.js';
import { domainNamed } from '../src/domains/index.js';
import { randomModel } from '../src/model/checkpoint.js';
import { TINY_CONFIGS } from '../src/model/config.js';
import { generate, type GenerationRequest } from '../src/model/generate.js';
import { LlamaModel } from '../src/model/llama.js';
import { LoraBank } from '../src/model/lora-bank.js';
import { LORA_MODULES, randomAdapter, type LoraAdapter } from '../src/model/peft.js';
import { AdamW, joinSlotStates } from '../src/train/adamw.js';
import { packSequences } from '../src/train/batch.js';
import { LlamaTrainer, type Gradients } from '../src/train/llama-backward.js';
import { PolicyGradientLoss, type PolicyGradientOptions } from '../src/train/objective.js';
import { policyGradientStep, readLogProbs, type RlSample } from '../src/train/steps.js';
import { readEventLog } from '../src/runtime/event-log.js';
import { replayRun } from '../src/sim/replay.js';
import { runScenario } from '../src/sim/run.js';
import { parseScenario } from '../src/scenario/scenario.js';
import { gpu } from './webgpu.js';

const config = { ...TINY_CONFIGS['qwen2-tiny']!, vocabSize: 96 };
const weights = randomModel(config, 4);
const adapters = [0, 1, 2].map((seed) => randomAdapter(config, { rank: 4, targets: LORA_MODULES, seed, init: 'gaussian' }));
const backends: Array<[string, Backend | undefined]> = [['cpu', new CpuBackend()], ['webgpu', gpu]];

function setUp(backend: Backend) {
  const model = LlamaModel.upload(backend, config, weights);
  const bank = new LoraBank(backend, config, adapters.length, 4, LORA_MODULES);
  adapters.forEach((a, slot) => bank.load(slot, a));
  return { model, bank };
}

/** Every value of every factor of an adapter, in order (to compare adapters bit for bit). */
const valuesOf = (a: LoraAdapter) => a.layers.flatMap((layer) => Object.values(layer).flatMap((f) => [...f!.a, ...f!.b]));

describe('micro-batches', () => {
  it('are consecutive runs of sequences within the budget, one sequence at least, a KV cache counted as a rectangle', () => {
    expect(microBatches([3, 4, 2, 5, 1], 7)).toEqual([[0, 2], [2, 4], [4, 5]]); // 3+4, 2+5, 1
    expect(microBatches([3, 4, 2, 5, 1], 1)).toEqual([[0, 1], [1, 2], [2, 3], [3, 4], [4, 5]]);
    expect(microBatches([3, 4, 2, 5, 1], Infinity)).toEqual([[0, 5]]);
    expect(microBatches([3, 4, 2, 5, 1], 9, true)).toEqual([[0, 2], [2, 3], [3, 4], [4, 5]]); // 2·4; 2·5 > 9
  });

  it('take their budget from the setting, or from the memory there is within the device\'s binding', () => {
    const backend = { maxBindingBytes: Infinity };
    expect(resolveBudget('unbounded', config, backend)).toMatchObject({ generationTokens: Infinity, trainingTokens: Infinity });
    // qwen2-tiny: a KV position is 2 layers × 2 × 32 values (512 bytes); a training token 2·(4·64 + 2·64 + 2·32 + 3·128) + 2·96 + 64 values
    const trainingTokenBytes = (2 * (4 * 64 + 2 * 64 + 2 * 32 + 3 * 128) + 2 * 96 + 64) * 4;
    // a number: that many training tokens, and generation's KV cache in the same memory (within a binding)
    expect(resolveBudget(64, config, backend)).toMatchObject({ generationTokens: Math.floor((64 * trainingTokenBytes) / 512), trainingTokens: 64 });
    expect(resolveBudget(64, config, { maxBindingBytes: 256 * 100 }).generationTokens).toBe(100); // the keys of 100 positions (2 layers × 32 values) fill the binding
    expect(resolveBudget(64, config, { maxBindingBytes: 256 }).generationTokens).toBe(64); // never fewer positions than training tokens
    const auto = resolveBudget('auto', config, backend, 2 ** 20);
    expect(auto).toMatchObject({ generationTokens: 2 ** 19 / 512, trainingTokens: Math.floor(2 ** 19 / trainingTokenBytes) });
    expect(resolveBudget('auto', config, { maxBindingBytes: 128 * 4 * 10 }, 2 ** 30).trainingTokens).toBe(10); // ten rows of the widest activation (the MLP's 128) in a binding
    expect(() => resolveBudget(0, config, backend)).toThrow(/batchTokens must be a whole number >= 1/);
  });
});

for (const [name, backend] of backends) {
  describe.runIf(backend)(`phases in micro-batches on ${name}`, () => {
    const b = backend!;
    const lavapipe = name === 'webgpu'; // a software GPU: fewer budgets, to keep the suite's time

    it('generate each request\'s tokens of the whole batch, alone or sharing a prefill, whatever the budget and the prefill chunks, in either loop', async () => {
      const { model, bank } = setUp(b);
      // requests 5 and 6 prefill request 1's tokens with its adapter (a shared prefill), request 7 with another adapter
      const prompts = [[5], [7, 8, 9, 10, 11, 12, 13], [20, 21, 22], [30, 31, 32, 33, 34, 35, 36, 37, 38], [40, 41], [7, 8, 9, 10, 11, 12, 13], [7, 8, 9, 10, 11, 12, 50], [7, 8, 9, 10, 11, 12, 13]];
      const adapter = [-1, 0, 1, 2, -1, 0, 0, 1];
      const requests: GenerationRequest[] = prompts.map((prompt, i) => ({ requestId: 100 + i, prompt, adapter: adapter[i]!, maxTokens: [6, 9, 0, 5, 7, 8, 6, 9][i]!, seed: 3, temperature: i === 3 ? 0 : 1, stopTokens: i === 1 ? [17, 40] : [] }));
      const reference = await generate(model, requests, { bank });
      expect(reference.map((r) => r.tokens.length)).toEqual(expect.arrayContaining([6, 0])); // some requests ran to maxTokens
      expect(reference[5]!.tokens).not.toEqual(reference[1]!.tokens); // the same prefill, its own draws
      // a budget of 1: a request a micro-batch, each with its own cache and its own prefill
      for (const [batchTokens, prefillChunkTokens] of lavapipe ? [[1, 3]] : [[1, 1], [12, 3], [30, 256], [Infinity, 2]]) {
        expect(await generate(model, requests, { bank, batchTokens, prefillChunkTokens }), `budget ${batchTokens}, chunks of ${prefillChunkTokens}`).toEqual(reference);
        if (!lavapipe) expect(await generate(model, requests, { bank, batchTokens, prefillChunkTokens, loop: 'host' }), `host loop, budget ${batchTokens}`).toEqual(reference);
      }
    });

    it('train to the whole batch\'s adapters, optimizer state and report with any budget', async () => {
      const { model } = setUp(b);
      const samples: RlSample[] = [
        { tokens: [1, 2, 3, 4, 5, 6], adapter: 0, promptLength: 3, advantage: 1.5 },
        { tokens: [7, 8, 9, 10], adapter: 1, promptLength: 1, advantage: -0.5 },
        { tokens: [11, 12, 13, 14, 15, 16, 17, 18, 19], adapter: 0, promptLength: 4, advantage: -1 },
        { tokens: [20, 21, 22], adapter: 2, promptLength: 2, advantage: 0.25 },
        { tokens: [23, 24, 25, 26, 27], adapter: 1, promptLength: 2, advantage: 2 },
        { tokens: [28, 29, 30, 31], adapter: 0, promptLength: 3, advantage: 0.75 },
      ];
      const options: PolicyGradientOptions = { reduction: 'sequence', klCoef: 0.05, entropyCoef: 0.01 };
      const trainWith = async (batchTokens: number) => {
        const bank = new LoraBank(b, config, adapters.length, 4, LORA_MODULES);
        adapters.forEach((a, slot) => bank.load(slot, a));
        const optimizer = AdamW.forBank(b, bank, config.numLayers, { lr: 0.01, maxGradNorm: 1 });
        const trainer = new LlamaTrainer(model, bank);
        const report = await policyGradientStep(trainer, optimizer, samples, options, { batchTokens });
        const state = { adapters: await Promise.all([0, 1, 2].map(async (slot) => valuesOf(await bank.read(slot)))), optimizer: await optimizer.exportState() };
        trainer.destroy();
        optimizer.destroy();
        bank.destroy();
        return { report: { ...report, gradNorms: [...report.gradNorms] }, state };
      };
      const whole = await trainWith(Infinity);
      expect(whole.state.adapters[0]).not.toEqual(valuesOf(adapters[0]!)); // the step moved the adapters
      for (const batchTokens of lavapipe ? [9] : [1, 9, 20]) expect(await trainWith(batchTokens), `budget ${batchTokens}`).toEqual(whole);
    });

    it('compute the trained rows\' logits alone, to the gradients and log-probs of every row\'s', async () => {
      const { model, bank } = setUp(b);
      const trainer = new LlamaTrainer(model, bank);
      const batch = packSequences([{ tokens: [3, 4, 5, 6, 7, 8], adapter: 0 }, { tokens: [9, 10, 11, 12], adapter: 2 }], config.vocabSize, 64);
      const rows = Int32Array.of(2, 3, 4, 7, 8);
      const logpWeight = Float32Array.from(batch.tokens, (_, t) => (rows.includes(t) ? 0.5 - t / 10 : 0));
      const entropyWeight = Float32Array.from(batch.tokens, (_, t) => (rows.includes(t) ? 0.01 * t : 0));
      const gradientsOf = async (logitRows?: Int32Array) => {
        const tape = trainer.forward(batch, logitRows);
        const logProbs = await readLogProbs(trainer, tape);
        const grads = trainer.backward(tape, logpWeight, entropyWeight, 'lora');
        trainer.freeTape(tape);
        return { logProbs: [...rows].map((t) => [logProbs[t * 2], logProbs[t * 2 + 1]]), grads: await readAll(b, grads) };
      };
      const all = await gradientsOf();
      expect(await gradientsOf(rows)).toEqual(all);
      expect(() => trainer.backward(trainer.forward(batch, rows), Float32Array.from(batch.tokens, () => 1), entropyWeight, 'lora')).toThrow(/row 0 has a loss weight but no logits/);
    });
  });
}

describe('an engine core\'s state (a checkpoint\'s)', () => {
  it('reads every slot at once to what its slots read one by one give', async () => {
    const b = new CpuBackend();
    const model = LlamaModel.upload(b, config, weights);
    const settings = { domain: domainNamed('arith'), vocab: { texts: Array.from({ length: config.vocabSize }, (_, t) => String(t)), eos: 2 }, rl: { reduction: 'token' as const }, optimizer: { lr: 0.05, maxGradNorm: 1 }, lora: { rank: 4, modules: LORA_MODULES }, evolutionThreads: 1 };
    const core = new LocalEngineCore(model, settings, [0, 1, 2]);
    await core.load(adapters, null);
    await core.train([{ tokens: [1, 2, 3, 4], adapter: 1, promptLength: 2, advantage: 1 }, { tokens: [5, 6, 7], adapter: 2, promptLength: 1, advantage: -1 }]);
    const slots = (await core.exportSlots()).map(([, state]) => state);
    expect(await core.state()).toEqual({ adapters: slots.map((s) => s.adapter), optimizer: joinSlotStates(slots.map((s) => s.optimizer)) });
    await core.close();
  });
});

describe('a policy-gradient step\'s gradient', () => {
  it('is each sample\'s gradient alone, added up in sample order (on the host, in f32)', async () => {
    const b = new CpuBackend();
    const { model, bank } = setUp(b);
    const trainer = new LlamaTrainer(model, bank);
    const samples = [
      { tokens: [1, 2, 3, 4, 5], adapter: 1, promptLength: 2, advantage: 1 },
      { tokens: [6, 7, 8, 9], adapter: 0, promptLength: 1, advantage: -2 },
      { tokens: [10, 11, 12, 13, 14, 15], adapter: 1, promptLength: 3, advantage: 0.5 },
      { tokens: [16, 17, 18], adapter: 1, promptLength: 1, advantage: -1 },
    ];
    const whole = packSequences(samples, config.vocabSize, 64);
    const loss = new PolicyGradientLoss(whole, samples.map((s) => s.promptLength), samples.map((s) => s.advantage), { reduction: 'token', entropyCoef: 0.02 });
    const tape = trainer.forward(whole);
    const weights = loss.weigh(0, await readLogProbs(trainer, tape));
    const batched = await readAll(b, trainer.backward(tape, weights.logpWeight, weights.entropyWeight, 'lora'));
    const added = new Map<string, Float32Array>();
    for (const [s, sample] of samples.entries()) {
      const alone = packSequences([sample], config.vocabSize, 64);
      const [first, count] = [whole.starts[s]!, sample.tokens.length];
      const own = trainer.forward(alone);
      const grads = await readAll(b, trainer.backward(own, weights.logpWeight.slice(first, first + count), weights.entropyWeight.slice(first, first + count), 'lora'));
      for (const [key, values] of grads) added.set(key, Float32Array.from(values, (v, i) => Math.fround((added.get(key)?.[i] ?? 0) + v)));
    }
    expect(batched).toEqual(added);
  });
});

const runText = (batchTokens: string, backend: string, preset = 'tiny') => `
name: budgets
seed: 7
steps: 3
backend: ${backend}
model: { preset: ${preset}, seed: 1 }
population: { subpopulations: 2, teachers: 1, students: 1, lora: { rank: 4, modules: [q_proj, v_proj, gate_proj, down_proj] } }
tasks: { perTeacher: 2, types: [deduce, abduce] }
matchmaking: { policy: cross, studentsPerTask: 1 }
sampling: { answersPerStudent: 3, maxTokens: 12 }
rl: { lr: 0.02, klCoef: 0.01 }
evolution: { every: 2, fraction: 0.5 }
checkpointEvery: 1
batchTokens: ${batchTokens}
`;

/** Every file of a run folder but its lock, by path: its bytes. */
function folderFiles(dir: string): Map<string, string> {
  const files = new Map<string, string>();
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    files.set(path.slice(dir.length), readFileSync(path).toString('base64'));
  }
  return files;
}

describe('a run', () => {
  const fresh = () => mkdtempSync(join(tmpdir(), 'populora-budget-'));

  it('is the same with a budget of one sequence, a few, or unbounded: hash, metrics, checkpoints (cpu)', async () => {
    const runs = [];
    for (const batchTokens of ['unbounded', '1', '40']) {
      const outDir = fresh();
      const result = await runScenario(parseScenario(runText(batchTokens, 'cpu'), 'budgets.yaml'), { outDir });
      runs.push({ hash: result.hash, files: folderFiles(outDir) });
    }
    const [reference, ...others] = runs;
    expect([...reference!.files.keys()].filter((f) => f.endsWith('.safetensors')).length).toBeGreaterThan(0);
    for (const other of others) {
      expect(other.hash).toBe(reference!.hash);
      for (const [file, bytes] of reference!.files) if (file !== '/scenario.json') expect(other.files.get(file), file).toBe(bytes);
    }
  });

  it('resumes and replays with other budgets than it started with, to the uninterrupted run', async () => {
    const uninterrupted = await runScenario(parseScenario(runText('unbounded', 'cpu'), 'budgets.yaml'), { outDir: fresh() });
    const outDir = fresh();
    await runScenario(parseScenario(runText('1', 'cpu'), 'budgets.yaml'), { outDir, stopAfterSteps: 2 });
    const resumed = await runScenario(parseScenario(readFileSync(join(outDir, 'scenario.json'), 'utf8'), 'scenario.json'), { outDir, resume: true, batchTokens: 25 });
    expect(resumed.hash).toBe(uninterrupted.hash);
    expect(await replayRun(outDir, { batchTokens: 7 })).toMatchObject({ identical: true, hash: uninterrupted.hash }); // a replay with a third
  });

  it('gives an answer its own token budget (sampling.answerMaxTokens), a proposal the scenario\'s maxTokens', async () => {
    const longest = async (answerMaxTokens: string) => {
      const outDir = fresh();
      await runScenario(parseScenario(runText('auto', 'cpu').replace('maxTokens: 12 }', `maxTokens: 12${answerMaxTokens} }`).replace('steps: 3', 'steps: 1'), 'budgets.yaml'), { outDir });
      const generated = readEventLog(join(outDir, 'events.msgpack')).events.filter((e) => e.type === 'generated').map((e) => e.payload as { to: string; message: { results: Array<{ text: string }> } });
      const of = (who: string) => Math.max(...generated.filter((g) => g.to.startsWith(who)).flatMap((g) => g.message.results.map((r) => r.text.length)));
      return { answers: of('student'), proposals: of('teacher') };
    };
    const [free, short] = [await longest(''), await longest(', answerMaxTokens: 2')];
    expect(free.answers).toBeGreaterThan(2); // a character a token: an answer of 3 characters or more
    expect(short.answers).toBeLessThanOrEqual(2);
    expect(short.proposals).toBe(free.proposals);
  });

  it.runIf(gpu)('is the same with a budget of one sequence or unbounded on WebGPU', async () => {
    const hashes = [];
    for (const batchTokens of ['unbounded', '1']) {
      const outDir = fresh();
      const result = await runScenario(parseScenario(runText(batchTokens, 'webgpu', 'qwen2-tiny'), 'budgets.yaml'), { outDir, backend: gpu });
      hashes.push({ hash: result.hash, adapters: [...folderFiles(outDir)].filter(([file]) => file.includes('checkpoints/')) });
    }
    expect(hashes[1]).toEqual(hashes[0]);
  });
});

/** Every gradient's values, by key. */
async function readAll(b: Backend, grads: Gradients): Promise<Map<string, Float32Array>> {
  const out = new Map<string, Float32Array>();
  for (const [key, g] of [...grads].sort(([x], [y]) => (x < y ? -1 : 1))) {
    out.set(key, await b.readF32(g));
    b.free(g);
  }
  return out;
}
