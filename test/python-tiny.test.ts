// The shipped code model, models/python-tiny, and the code domain's held-out set: the set is the model's own
// held-out tasks with the outputs the host's CPython gives (an independent oracle), drawn by the evaluation's seed
// alone; the model reproduces its card's greedy code_o score exactly and solves far more than a random model of its
// shape; and scenarios/code.yaml on it has proposals that validate, answers that are right and rewards that move.

import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CpuBackend } from '../src/backend/cpu.js';
import { domainNamed } from '../src/domains/index.js';
import { heldOutTasks } from '../src/domains/python/held-out.js';
import { solveRate } from '../src/domains/python/pretraining.js';
import type { CodeTask } from '../src/domains/python/tasks.js';
import { PythonVerifierPool } from '../src/domains/python/verifier-pool.js';
import { loadModel, randomModel } from '../src/model/checkpoint.js';
import { LlamaModel } from '../src/model/llama.js';
import { loadTokenizer } from '../src/model/tokenizer.js';
import { runScenario } from '../src/sim/run.js';
import { loadScenario } from '../src/scenario/scenario.js';
import { cpythonOutputs } from './cpython-reference.js';

const MODEL = 'models/python-tiny';
const shipped = JSON.parse(readFileSync(join(MODEL, 'held_out.json'), 'utf8')) as { code_o: CodeTask[]; code_i: CodeTask[] };

describe('the code domain\'s held-out set', () => {
  it('is models/python-tiny\'s held-out tasks, code_o and code_i alternating, with the outputs the host CPython gives', () => {
    const all = heldOutTasks(1, 400);
    expect(all).toEqual(shipped.code_o.flatMap((o, i) => [o, shipped.code_i[i]!]));
    expect(domainNamed('python').heldOutTasks).toBe(heldOutTasks);
    const sample = all.filter((_, i) => i % 10 === 0);
    expect(cpythonOutputs(sample).map((outputs) => outputs[0])).toEqual(sample.map((t) => t.outputs[0]));
  });

  it('draws its tasks by the seed alone, in the set\'s order; more tasks than the set is an error naming the field', () => {
    const [a, b, c] = [heldOutTasks(5, 100), heldOutTasks(5, 100), heldOutTasks(6, 100)];
    expect(a).toEqual(b);
    expect(a).not.toEqual(c);
    const all = heldOutTasks(1, 400);
    const positions = a.map((t) => all.indexOf(t));
    expect(positions.every((p, i) => p >= 0 && (i === 0 || p > positions[i - 1]!))).toBe(true);
    expect(new Set(a.map((t) => t.type))).toEqual(new Set(['code_o', 'code_i']));
    expect(() => heldOutTasks(1, 401)).toThrow(/^field "evaluation\.tasks": the python domain has 400 held-out tasks; ask for at most 400$/);
  });

  it('splits into a validation and a test part: each a program\'s code_o and code_i tasks, 100 programs a part', () => {
    const all = heldOutTasks(1, 400);
    const [validation, test] = [heldOutTasks(1, 200, 'validation'), heldOutTasks(1, 200, 'test')];
    expect(validation).toEqual(all.filter((_, i) => i % 4 < 2));
    expect(test).toEqual(all.filter((_, i) => i % 4 >= 2));
    for (const part of [validation, test]) {
      expect(part.filter((t) => t.type === 'code_o')).toHaveLength(100);
      expect(new Set(part.map((t) => t.program)).size).toBe(100);
    }
    const testPrograms = new Set(test.map((t) => t.program));
    expect(validation.some((t) => testPrograms.has(t.program))).toBe(false);
    const sample = heldOutTasks(7, 50, 'test');
    expect(sample.every((t) => test.includes(t))).toBe(true);
    expect(() => heldOutTasks(1, 201, 'validation')).toThrow(/^field "evaluation\.tasks": the python domain has 200 held-out tasks in its validation part; ask for at most 200$/);
  });
});

describe('models/python-tiny', () => {
  const verifier = new PythonVerifierPool(2);
  afterAll(() => verifier.close());

  it('reproduces its card\'s greedy code_o score exactly, far above a random model of its shape', async () => {
    const { config, weights, tokenizerFile } = loadModel(MODEL);
    const tokenizer = loadTokenizer(tokenizerFile!);
    const log = JSON.parse(readFileSync(join(MODEL, 'pretrain_log.json'), 'utf8')) as { scenario: { eval: { maxTokens: number } }; evaluations: Array<{ scores: Record<string, number> }> };
    const options = { maxTokens: log.scenario.eval.maxTokens };
    const cpu = new CpuBackend();
    const trained = await solveRate(LlamaModel.upload(cpu, config, weights), tokenizer, verifier, shipped.code_o, options);
    expect(trained).toBe(log.evaluations.at(-1)!.scores['code_o']);
    const random = await solveRate(LlamaModel.upload(cpu, config, randomModel(config, 0)), tokenizer, verifier, shipped.code_o.slice(0, 50), { maxTokens: 16 });
    expect(trained).toBeGreaterThan(0.1);
    expect(random).toBeLessThan(0.03);
  }, 300_000);

  it('plays scenarios/code.yaml: in two steps proposals validate, answers are right, teachers earn rewards', async () => {
    const scenario = { ...loadScenario('scenarios/code.yaml'), steps: 2 };
    const outDir = mkdtempSync(join(tmpdir(), 'populora-code-'));
    await runScenario(scenario, { outDir });
    const metrics = readFileSync(join(outDir, 'metrics.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { validity: number; solveRate: number | null; teacherReward: number; distinctPrograms: number });
    expect(Math.max(...metrics.map((m) => m.validity))).toBeGreaterThan(0.2);
    expect(Math.max(...metrics.map((m) => m.solveRate ?? 0))).toBeGreaterThan(0);
    expect(metrics.some((m) => m.teacherReward > -1)).toBe(true); // not every proposal an invalid one's -1
    expect(metrics.at(-1)!.distinctPrograms).toBeGreaterThan(1);
  }, 600_000);
});
