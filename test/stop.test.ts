// Stopping a run inside a long step, and seeing where the step is: the engine reports each phase's tokens done (of
// how many) and pauses between pieces of its work, where a stop at once abandons the step; the run folder then
// resumes from its last checkpoint to the uninterrupted run. With real signals to a real `populora run`: the first
// says the run will stop after the step in progress and how to stop at once, the second stops at once.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CpuBackend } from '../src/backend/cpu.js';
import { EXIT_ABANDONED } from '../src/cluster/errors.js';
import { Pacer, RunStopped, type PhaseProgress } from '../src/engine/pacer.js';
import { randomModel } from '../src/model/checkpoint.js';
import { TINY_CONFIGS } from '../src/model/config.js';
import { generate } from '../src/model/generate.js';
import { LlamaModel } from '../src/model/llama.js';
import { LoraBank } from '../src/model/lora-bank.js';
import { randomAdapter } from '../src/model/peft.js';
import { AdamW } from '../src/train/adamw.js';
import { LlamaTrainer } from '../src/train/llama-backward.js';
import { policyGradientStep } from '../src/train/steps.js';
import { runScenario } from '../src/sim/run.js';
import { parseScenario } from '../src/scenario/scenario.js';

const bin = join(import.meta.dirname, '..', 'dist', 'src', 'cli', 'main.js');
const fresh = () => join(mkdtempSync(join(tmpdir(), 'populora-stop-')), 'run');

// Steps of a second or more of compute: long enough for two signals to arrive inside one.
const text = `
name: long-steps
seed: 9
steps: 2
backend: cpu
model: { preset: tiny, seed: 2 }
population: { subpopulations: 2, teachers: 2, students: 2, lora: { rank: 4 } }
tasks: { perTeacher: 4, types: [deduce, abduce] }
matchmaking: { policy: cross, studentsPerTask: 2 }
sampling: { answersPerStudent: 6, maxTokens: 48 }
checkpointEvery: 1
`;
const scenario = parseScenario(text, 'long-steps.yaml');
const light = { ...scenario, population: { ...scenario.population, teachers: 1, students: 1 }, tasks: { ...scenario.tasks, perTeacher: 1 }, matchmaking: { ...scenario.matchmaking, studentsPerTask: 1 } };

describe('the engine\'s work', () => {
  const config = TINY_CONFIGS['tiny']!;
  const model = LlamaModel.upload(new CpuBackend(), config, randomModel(config, 3));
  /** A pacer whose stop is asked for by the event loop's next turn: only work that pauses sees it. */
  const stoppedSoon = () => {
    const now = new AbortController();
    setImmediate(() => now.abort('the test'));
    return new Pacer({ stopNow: now.signal });
  };
  const requests = [{ requestId: 1, prompt: [1, 2, 3], adapter: -1, maxTokens: 8, seed: 1 }];

  it('pauses between decode steps and between layers, where a stop at once ends it', async () => {
    await expect(generate(model, requests, { pacer: stoppedSoon() })).rejects.toThrow(new RunStopped('the test'));
    const bank = new LoraBank(model.backend, config, 1, 2, ['q_proj']);
    bank.load(0, randomAdapter(config, { rank: 2, targets: ['q_proj'], seed: 1, init: 'gaussian' }));
    const [trainer, optimizer] = [new LlamaTrainer(model, bank), AdamW.forBank(model.backend, bank, config.numLayers, { lr: 0.1 })];
    const samples = [{ tokens: [1, 2, 3, 4], adapter: 0, promptLength: 2, advantage: 1 }];
    await expect(policyGradientStep(trainer, optimizer, samples, { reduction: 'token' }, { pacer: stoppedSoon() })).rejects.toThrow(RunStopped);
    expect(optimizer.stepCount(0)).toBe(0); // stopped before the update
    await policyGradientStep(trainer, optimizer, samples, { reduction: 'token' }, { pacer: new Pacer() });
    expect(optimizer.stepCount(0)).toBe(1);
  });
});

describe('inside a step', () => {
  it('the engine reports each phase\'s tokens done, of how many, up to the whole', async () => {
    const reports: PhaseProgress[] = [];
    await runScenario({ ...light, steps: 1 }, { outDir: fresh(), onProgress: (p) => reports.push(p) });
    for (const phase of ['generate', 'train'] as const) {
      const mine = reports.filter((p) => p.phase === phase);
      expect(mine.length, phase).toBeGreaterThanOrEqual(4); // training: after each of the tiny model's 2 layers, forward and backward
      expect(mine.every((p) => p.done <= p.total && Number.isInteger(p.done)), phase).toBe(true);
      expect(mine.some((p) => p.done === p.total), `${phase} reaches its total`).toBe(true);
    }
    // training runs each token forward and backward: twice the tokens of the step's trained sequences
    const train = reports.filter((p) => p.phase === 'train');
    expect(train.at(-1)!.done).toBe(train.at(-1)!.total);
    expect(train.slice(1).every((p, i) => p.total !== train[i]!.total || p.done >= train[i]!.done)).toBe(true);
  });

  it('a stop at once abandons the step; the folder resumes from its checkpoint to the uninterrupted run', async () => {
    const uninterrupted = await runScenario(light, { outDir: fresh() });
    const outDir = fresh();
    const now = new AbortController();
    const stopped = runScenario(light, { outDir, stopNow: now.signal, onProgress: (p) => p.phase === 'train' && existsSync(join(outDir, 'checkpoints', 'step-1')) && now.abort('SIGINT') });
    await expect(stopped).rejects.toThrow(RunStopped);
    expect(readdirSync(join(outDir, 'checkpoints'))).toEqual(['step-1']); // step 1 was abandoned in its training
    expect(existsSync(join(outDir, 'run.lock'))).toBe(false);
    const resumed = await runScenario(light, { outDir, resume: true });
    expect([resumed.stepsRun, resumed.hash]).toEqual([1, uninterrupted.hash]);
  });
});

describe('populora run and two signals', () => {
  it('says at the first that it stops after the step and how to stop at once, stops at once at the second, and resumes to the uninterrupted run', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'populora-stop-')), 'long-steps.yaml');
    writeFileSync(file, text);
    const out = fresh();
    const child = spawn('node', [bin, 'run', file, '--out', out, '--batch-tokens', '64'], { stdio: ['ignore', 'pipe', 'pipe'] });
    const output = { stdout: '', stderr: '' };
    const seen = (stream: 'stdout' | 'stderr', text: string) => new Promise<void>((resolve) => child[stream].on('data', (chunk) => ((output[stream] += chunk), output[stream].includes(text) && resolve())));
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    await seen('stdout', 'micro-batches: 64 tokens a training micro-batch'); // set up: step 0 begins
    child.kill('SIGTERM');
    await seen('stderr', 'SIGTERM: finishing the step in progress, then saving a checkpoint and stopping (SIGTERM again stops at once)');
    child.kill('SIGINT');
    expect(await exited, output.stderr).toBe(EXIT_ABANDONED); // the step in progress abandoned (a clean stop after it: 130)
    expect(output.stderr).toContain('SIGINT again: stopping now, inside the step; the run resumes from its last checkpoint');
    expect(output.stdout).toContain(`stopped at once on SIGINT, inside a step; continue the run from its start with: populora run --resume ${out}`);
    expect(existsSync(join(out, 'checkpoints'))).toBe(false); // step 0 never finished
    expect(readFileSync(join(out, 'metrics.jsonl'), 'utf8')).toBe('');

    const resumed = await runScenario(parseScenario(readFileSync(join(out, 'scenario.json'), 'utf8'), 'scenario.json'), { outDir: out, resume: true });
    const uninterrupted = await runScenario(scenario, { outDir: fresh() });
    expect([resumed.stepsRun, resumed.hash]).toEqual([2, uninterrupted.hash]);
  });
});
