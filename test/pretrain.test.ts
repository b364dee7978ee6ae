// Pretraining the toy domain's base model: the corpus is what the verifier accepts, a short run lowers the loss
// and repeats itself bit for bit, a real `populora pretrain` stopped by signals leaves a folder that says which step
// it holds (the weights of that step, reached another way), and the shipped models/arith-tiny solves held-out deduce tasks well above a
// random model and well below perfect (so the population has something to learn).

import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CpuBackend } from '../src/backend/cpu.js';
import { EXIT_ABANDONED } from '../src/cluster/errors.js';
import { corpusExample, randomTask } from '../src/domains/arith/corpus.js';
import { scan, isComplete } from '../src/domains/arith/grammar.js';
import { answerFormat, checkAnswer, proposalFormat, validateProposal, type ArithTask, type ArithTaskType } from '../src/domains/arith/tasks.js';
import { loadModel, randomModel } from '../src/model/checkpoint.js';
import { LlamaModel } from '../src/model/llama.js';
import { loadTokenizer } from '../src/model/tokenizer.js';
import { Streams } from '../src/runtime/streams.js';
import { arithCorpusSchema, arithEvalSchema, arithTokenizer, deduceSolveRate } from '../src/domains/arith/pretraining.js';
import { domainSettings, learningRate, parsePretrainScenario, pretrain } from '../src/train/pretrain.js';
import { killWorkerProcesses, spawnCli, until } from './cli-process.js';

const cpu = new CpuBackend();

describe('the pretraining corpus', () => {
  it('holds only well-formed, correct text: proposals the verifier accepts, answers it marks right', () => {
    const rng = new Streams(5).stream('corpus');
    const options = { maxDepth: 2, inputAbs: 9 };
    for (let i = 0; i < 300; i++) {
      const example = corpusExample(rng, options);
      const [kind, type] = example.kind.split('/') as ['solve' | 'propose', ArithTaskType];
      const format = kind === 'propose' ? proposalFormat(type) : answerFormat(type);
      const state = scan(format, example.completion);
      expect(state && isComplete(format, state), example.completion).toBe(true);
      if (kind === 'propose') {
        expect(validateProposal(type, example.completion).valid).toBe(true);
        continue;
      }
      // Rebuild the task from the prompt's text and check the completion the verifier's way.
      const [expr, inputText, valueText] = example.prompt.trim().split(';');
      if (type === 'induce') {
        expect(example.prompt).toMatch(/;\?\?\n$/);
        continue;
      }
      const x = Number(inputText!.replace('x=', ''));
      const task = validateProposal(type, `${expr};${type === 'deduce' ? x : example.completion}`);
      if (!task.valid) throw new Error(task.reason);
      if (type === 'deduce') expect(checkAnswer(task.task, example.completion).correct).toBe(true);
      else expect(String(task.task.outputs[0])).toBe(valueText!.replace('=', ''));
    }
  });
});

describe('pretraining', () => {
  afterEach(killWorkerProcesses); // a signalled pretraining a failed test left running
  const scenario = (out: string) => parsePretrainScenario(`name: t\nseed: 2\nmodel: { preset: tiny }\ntrain: { steps: 12, batch: 8, lr: 0.01 }\neval: { tasks: 20 }\nout: ${out}\n`, 't.yaml');

  it('lowers the loss, and the same scenario gives the same weights bit for bit', async () => {
    const [a, b] = [mkdtempSync(join(tmpdir(), 'populora-pretrain-')), mkdtempSync(join(tmpdir(), 'populora-pretrain-'))];
    const first = await pretrain(scenario(a), cpu);
    await pretrain(scenario(b), cpu);
    expect(mean(first.losses.slice(-3))).toBeLessThan(mean(first.losses.slice(0, 3)) * 0.8);
    expect(readFileSync(join(a, 'model.safetensors')).equals(readFileSync(join(b, 'model.safetensors')))).toBe(true);
    expect(first.evaluations.map((e) => e.step)).toEqual([12]);
    const saved = loadModel(a); // a Hugging Face folder: config, weights, tokenizer
    expect(saved.tokenizerFile).not.toBeNull();
    expect(saved.config.vocabSize).toBe(first.config.vocabSize);
  });

  it('leaves the model of its last evaluation when stopped later: the weights of a run of that many steps', async () => {
    const [cut, short] = [mkdtempSync(join(tmpdir(), 'populora-pretrain-')), mkdtempSync(join(tmpdir(), 'populora-pretrain-'))];
    const stopAt6 = (p: { step: number }) => {
      if (p.step === 6) throw new Error('stopped');
    };
    const everyFour = (out: string, steps: number) => parsePretrainScenario(`name: t\nseed: 2\nmodel: { preset: tiny }\ntrain: { steps: ${steps}, batch: 8, lr: 0.01 }\neval: { tasks: 20, every: 4 }\nout: ${out}\n`, 't.yaml');
    await expect(pretrain(everyFour(cut, 12), cpu, { onStep: stopAt6 })).rejects.toThrow('stopped');
    await pretrain(everyFour(short, 4), cpu);
    expect(readFileSync(join(cut, 'model.safetensors')).equals(readFileSync(join(short, 'model.safetensors')))).toBe(true);
  });

  it('stops at the first signal after the step in progress, scored and saved; at the second at once, the folder keeping its last evaluation', async () => {
    const scenarioFile = (out: string) => {
      const file = join(mkdtempSync(join(tmpdir(), 'populora-pretrain-')), 'long.yaml');
      writeFileSync(file, `name: long\nseed: 2\nbackend: cpu\nmodel: { preset: tiny }\ntrain: { steps: 5000, batch: 8, lr: 0.01 }\neval: { tasks: 20, every: 3 }\nout: ${out}\n`);
      return file;
    };
    const readLog = (out: string) => JSON.parse(readFileSync(join(out, 'pretrain_log.json'), 'utf8')) as { steps: number; stopped: boolean; losses: number[]; evaluations: Array<{ step: number }> };
    /** The weights at step k by another way: the same scenario evaluated every k steps, killed after step k. */
    const weightsAt = async (k: number) => {
      const out = mkdtempSync(join(tmpdir(), 'populora-pretrain-'));
      const kill = (p: { step: number }) => {
        if (p.step === k) throw new Error('killed');
      };
      const scenario = parsePretrainScenario(`name: long\nseed: 2\nmodel: { preset: tiny }\ntrain: { steps: 5000, batch: 8, lr: 0.01 }\neval: { tasks: 20, every: ${k} }\nout: ${out}\n`, 't.yaml');
      await expect(pretrain(scenario, cpu, { onStep: kill })).rejects.toThrow('killed');
      return readFileSync(join(out, 'model.safetensors'));
    };

    // The first signal, once the first evaluation's folder is written: the run ends after the step in progress.
    const calm = mkdtempSync(join(tmpdir(), 'populora-pretrain-'));
    const first = spawnCli(['pretrain', scenarioFile(calm)]);
    await until(() => existsSync(join(calm, 'README.md')), 'the first evaluation writes the model folder');
    first.child.kill('SIGINT');
    expect((await first.exit).code, first.stderr()).toBe(130);
    expect(first.stderr()).toContain('SIGINT: finishing the step in progress, then scoring and saving the model and stopping (Ctrl-C again stops at once)');
    const calmLog = readLog(calm);
    expect(calmLog.stopped).toBe(true);
    expect(calmLog.losses.length).toBe(calmLog.steps);
    expect(calmLog.evaluations.at(-1)!.step).toBe(calmLog.steps); // scored where it stopped, on or off the every-3 grid
    expect(first.stdout()).toContain(`stopped on SIGINT after step ${calmLog.steps} of 5000`);
    expect(readFileSync(join(calm, 'README.md'), 'utf8')).toContain(`**Step ${calmLog.steps} of 5000.** Its pretraining was stopped there`);
    expect(readFileSync(join(calm, 'model.safetensors')).equals(await weightsAt(calmLog.steps))).toBe(true);

    // Both signals at once: it exits before another step, and the folder is the last evaluation's, whole.
    const hurried = mkdtempSync(join(tmpdir(), 'populora-pretrain-'));
    const second = spawnCli(['pretrain', scenarioFile(hurried)]);
    await until(() => existsSync(join(hurried, 'README.md')), 'the first evaluation writes the model folder');
    second.child.kill('SIGTERM');
    second.child.kill('SIGINT');
    expect((await second.exit).code, second.stderr()).toBe(EXIT_ABANDONED);
    const hurriedLog = readLog(hurried);
    expect(hurriedLog.stopped).toBe(false);
    expect(hurriedLog.steps % 3).toBe(0); // an evaluation of the grid, not one made for the stop
    expect(second.stdout()).toContain(`stopped at once; ${hurried} holds the model saved at step ${hurriedLog.steps}, with its log and card`);
    expect(readFileSync(join(hurried, 'README.md'), 'utf8')).toContain(`**Step ${hurriedLog.steps} of 5000.** This is the model its pretraining scored and saved at step ${hurriedLog.steps}`);
    expect(readFileSync(join(hurried, 'model.safetensors')).equals(await weightsAt(hurriedLog.steps))).toBe(true);
  }, 120_000);

  it('schedules the learning rate: constant, or a cosine from lr at the first step down to lr / 10 at the last', () => {
    const train = { steps: 101, batch: 1, lr: 0.002, maxGradNorm: 1 };
    expect(learningRate({ ...train, schedule: 'constant' }, 70)).toBe(0.002);
    const cosine = Array.from({ length: 101 }, (_, step) => learningRate({ ...train, schedule: 'cosine' }, step));
    expect(cosine[0]).toBeCloseTo(0.002, 12);
    expect(cosine[50]).toBeCloseTo(0.0011, 12); // halfway: the mean of lr and lr / 10
    expect(cosine[100]).toBeCloseTo(0.0002, 12);
    expect(cosine.every((lr, i) => i === 0 || lr < cosine[i - 1]!)).toBe(true);
  });

  it('refuses an unknown field of the pretraining scenario, naming it', () => {
    expect(() => parsePretrainScenario('name: t\nseed: 1\nmodel: { preset: tiny }\ntrain: { steps: 1, epochs: 2 }\nout: x\n', 'p.yaml')).toThrow(/^p\.yaml: field "train": unknown field\(s\) "epochs"$/);
  });
});

const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

describe('the shipped base model, models/arith-tiny', () => {
  it('solves held-out deduce tasks well above a random model and well below perfect', async () => {
    const card = parsePretrainScenario(readFileSync('scenarios/pretrain/arith-tiny.yaml', 'utf8'), 'arith-tiny.yaml');
    if (card.domain !== 'arith') throw new Error('arith-tiny.yaml is an arith scenario');
    // The held-out tasks of its pretraining scenario: drawn from their own stream, never in the training text.
    const rng = new Streams(card.seed).stream('held-out');
    const tasks: ArithTask[] = Array.from({ length: arithEvalSchema.parse(domainSettings(card).eval).tasks }, () => randomTask(rng, 'deduce', arithCorpusSchema.parse(card.corpus)));
    const { config, weights, tokenizerFile } = loadModel('models/arith-tiny');
    const trained = await deduceSolveRate(LlamaModel.upload(cpu, config, weights), loadTokenizer(tokenizerFile!), tasks);
    const random = await deduceSolveRate(LlamaModel.upload(cpu, config, randomModel(config, 0)), arithTokenizer().tokenizer, tasks);
    expect(trained).toBeGreaterThan(Math.max(0.1, 5 * random));
    expect(trained).toBeLessThan(0.9);
  });
});
