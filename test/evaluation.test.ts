// The held-out evaluation and TrueSkill in a run: the held-out set is the one models/arith-tiny was scored on
// (its model card: 45.0% greedy); members whose adapters still equal the base model score what the base model
// scores through pretrain.ts's own evaluation path; a held-out task a teacher proposed stops counting; TrueSkill
// ratings (μ, σ) reach the metrics, are checkpointed, and a resumed run ends with an uninterrupted run's log.
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { evaluatorHandler, initialEvaluatorState, type EvaluationReport, type EvaluatorMessage, type EvaluatorState } from '../actors/evaluator.js';
import { EVALUATOR, POPULATION_MANAGER, type GenerateRequest } from '../actors/protocol.js';
import type { VerifierMessage } from '../actors/verifier.js';
import { CpuBackend } from '../src/backend/cpu.js';
import { heldOutIndex } from '../src/domains/domain.js';
import { heldOutTasks } from '../src/domains/arith/held-out.js';
import { domainNamed } from '../src/domains/index.js';
import { loadModel } from '../src/model/checkpoint.js';
import { LlamaModel } from '../src/model/llama.js';
import { loadTokenizer } from '../src/model/tokenizer.js';
import type { StepMetrics } from '../src/sim/metrics.js';
import { readCheckpointState, runScenario } from '../src/sim/run.js';
import type { World } from '../src/runtime/world.js';
import { parseScenario } from '../src/scenario/scenario.js';
import { deduceSolveRate } from '../src/domains/arith/pretraining.js';

const arith = domainNamed('arith');

const MODEL = 'models/arith-tiny';
const fresh = () => mkdtempSync(join(tmpdir(), 'populora-eval-'));
const metricsOf = (dir: string) => readFileSync(join(dir, 'metrics.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as StepMetrics);

async function baseModelScore(count: number): Promise<number> {
  const backend = new CpuBackend();
  const { config, weights, tokenizerFile } = loadModel(MODEL);
  const model = LlamaModel.upload(backend, config, weights);
  try {
    return await deduceSolveRate(model, loadTokenizer(tokenizerFile!), heldOutTasks(1, count));
  } finally {
    model.destroy();
  }
}

describe('the held-out set', () => {
  it('is the 200 tasks models/arith-tiny was scored on: the base model solves 45.0% of them, as its model card says', async () => {
    expect(await baseModelScore(200)).toBe(0.45);
    expect(heldOutTasks(1, 200).every((t) => t.type === 'deduce')).toBe(true);
    expect(heldOutTasks(2, 5)).not.toEqual(heldOutTasks(1, 5));
  });

  it('splits into a validation and a test part, pairs of positions alternating, that score the whole set between them', async () => {
    const [all, validation, test] = [heldOutTasks(1, 200), heldOutTasks(1, 100, 'validation'), heldOutTasks(1, 100, 'test')];
    expect(validation).toEqual(all.filter((_, i) => i % 4 < 2));
    expect(test).toEqual(all.filter((_, i) => i % 4 >= 2));
    expect(heldOutTasks(1, 200, 'all')).toEqual(all);
    expect(heldOutTasks(1, 30, 'validation')).toEqual(validation.slice(0, 30)); // a smaller part is a prefix of a larger one
    const { config, weights, tokenizerFile } = loadModel(MODEL);
    const model = LlamaModel.upload(new CpuBackend(), config, weights);
    const score = (tasks: typeof all) => deduceSolveRate(model, loadTokenizer(tokenizerFile!), tasks);
    const [onValidation, onTest] = [await score(validation), await score(test)];
    expect((onValidation + onTest) / 2).toBeCloseTo(await baseModelScore(200), 12); // two halves of the 200
  });
});

describe('a run with a held-out evaluation', () => {
  it('scores every member greedily (before evolution): adapters that still equal the base model score what the base model does', async () => {
    // lr 1e-12: the adapters move by about 1e-12 (Adam's steps are about lr), too little to change a greedy answer
    const scenario = parseScenario(
      `name: eval\nseed: 2\nsteps: 2\nbackend: cpu\nmodel: { path: ${MODEL} }\npopulation: { subpopulations: 2, teachers: 1, students: 1, lora: { rank: 4 } }\ntasks: { perTeacher: 1 }\nmatchmaking: { policy: cross, studentsPerTask: 1 }\nsampling: { answersPerStudent: 2, maxTokens: 24 }\nrl: { lr: 1e-12 }\nevolution: { every: 2, fraction: 0.5 }\nevaluation: { tasks: 40, every: 1 }\n`,
      'eval.yaml',
    );
    const { outDir } = await runScenario(scenario, { outDir: fresh() });
    const metrics = metricsOf(outDir);
    const expected = await baseModelScore(40);
    for (const m of metrics) {
      expect(m.heldOut, `step ${m.step}`).not.toBeNull();
      const { heldOut } = m;
      expect(heldOut).toMatchObject({ tasks: 40, excluded: 0 }); // no teacher of this run proposed a held-out task
      for (const [id, rate] of Object.entries(heldOut!.members)) expect(rate, id).toBeCloseTo(expected, 12);
      expect(heldOut!.solveRate).toBeCloseTo(expected, 12);
      expect(heldOut!.best).toBeCloseTo(expected, 12);
      expect(heldOut!.solveRateAllTasks).toBeCloseTo(expected, 12);
    }
    expect(metrics.at(-1)!.evolution.length).toBeGreaterThan(0); // evolution at the last step waited for the evaluation, then happened
    const summary = JSON.parse(readFileSync(join(outDir, 'summary.json'), 'utf8')) as { last: StepMetrics };
    expect(summary.last.heldOut).toEqual(metrics.at(-1)!.heldOut);
  });
});

describe('evaluation.part in a scenario', () => {
  const text = (evaluation: string) => `name: part\nseed: 1\nsteps: 1\nbackend: cpu\nmodel: { path: ${MODEL} }\npopulation: { subpopulations: 2 }\nevaluation: ${evaluation}\n`;
  it('names a part, is absent when not given, and a bad one is refused naming the field and the parts', () => {
    expect(parseScenario(text('{ tasks: 20, part: test }'), 'p.yaml').evaluation).toEqual({ tasks: 20, every: 0, seed: 1, part: 'test' });
    expect('part' in parseScenario(text('{ tasks: 20 }'), 'p.yaml').evaluation!).toBe(false);
    expect(() => parseScenario(text('{ part: train }'), 'p.yaml')).toThrow(/^p\.yaml: field "evaluation\.part": expected one of all, validation, test$/);
  });
});

describe('the evaluator', () => {
  /** The parts of a world a handler uses, recording what it sends and reports. */
  function fakeWorld() {
    const sent: Array<{ to: string; message: unknown }> = [];
    const reports: Array<{ kind: string; data: unknown }> = [];
    let id = 100;
    const world = { requestId: () => id++, send: (_from: string, to: string, message: unknown) => sent.push({ to, message }), report: (kind: string, data: unknown) => reports.push({ kind, data }) } as unknown as World;
    return { world, sent, reports };
  }

  it('drops a held-out task a teacher proposed from its score (not from the whole set\'s), per adapter', () => {
    const tasks = heldOutTasks(1, 4);
    const handle = evaluatorHandler({ domain: arith, prompts: null, tasks });
    const { world, sent, reports } = fakeWorld();
    const step = (state: EvaluatorState, message: EvaluatorMessage) => handle(state, message, world, EVALUATOR);
    expect(heldOutIndex(tasks)({ ...tasks[2]! })).toBe(2); // the matchmaker's lookup: a proposal of the same task
    const otherInput = { ...tasks[2]!, inputs: [tasks[2]!.inputs[0]! + 1] };
    expect(heldOutIndex(tasks)(otherInput)).toBeUndefined();
    let state = step(initialEvaluatorState(), { type: 'proposed', heldOut: [2] });
    state = step(state, { type: 'evaluate', replyTo: POPULATION_MANAGER, members: [{ id: 'teacher-0-0', role: 'teacher', slot: 0 }, { id: 'student-0-0', role: 'student', slot: 1 }, { id: 'student-1-0', role: 'student', slot: 2 }] });
    const generate = sent.pop()!.message as GenerateRequest;
    expect(generate.requests.map((r) => [r.slot, r.prompt])).toEqual([0, 1, 2].flatMap((slot) => [0, 1, 2, 3].map((i) => [slot, arith.solvePrompt(tasks[i]!, null)])));
    expect(generate.requests.every((r) => r.greedy === true && r.format === 'answer/deduce')).toBe(true);
    state = step(state, { type: 'generated', results: generate.requests.map((r) => ({ requestId: r.requestId, text: '0' })) });
    const check = sent.pop()!.message as Extract<VerifierMessage, { type: 'check' }>;
    expect(check.requests.map((r) => r.answers.length)).toEqual([3, 3, 3, 3]); // one answer per adapter for each task
    // request i is slot floor(i / 4), task i % 4. Slot 0 right on task 2 only (the proposed one); slot 1 on tasks
    // 0 and 1; slot 2 on tasks 0 and 2, its answer to task 1 a fault (not counted).
    const right = new Set([2, 4, 5, 8, 10].map((i) => generate.requests[i]!.requestId));
    const fault = generate.requests[9]!.requestId;
    state = step(state, { type: 'checked', results: generate.requests.map((r) => (r.requestId === fault ? { requestId: r.requestId, fault: 'worker died' } : { requestId: r.requestId, check: { correct: right.has(r.requestId), reason: '' } })) });
    const members = { 'teacher-0-0': { role: 'teacher', solveRate: 0 / 3, solveRateAllTasks: 1 / 4 }, 'student-0-0': { role: 'student', solveRate: 2 / 3, solveRateAllTasks: 2 / 4 }, 'student-1-0': { role: 'student', solveRate: 1 / 2, solveRateAllTasks: 2 / 3 } } as const;
    expect(reports).toEqual([{ kind: 'evaluation', data: { tasks: 3, excluded: 1, faults: 1, members } satisfies EvaluationReport }]);
    expect(sent.pop()).toEqual({ to: 'population-manager', message: { type: 'evaluated' } });
    expect(state.answers).toEqual([]);
  });
});

describe('TrueSkill in a run', () => {
  const text = `name: ts\nseed: 4\nsteps: 3\nbackend: cpu\nmodel: { preset: tiny, seed: 1 }\npopulation: { subpopulations: 2, teachers: 1, students: 1, lora: { rank: 4 } }\ntasks: { perTeacher: 1 }\nmatchmaking: { policy: pfsp, studentsPerTask: 1, options: { winRate: observed } }\nsampling: { answersPerStudent: 2, maxTokens: 16 }\nrl: { lr: 0.01 }\nrating: { system: trueskill }\nevolution: { every: 2, fraction: 0.5 }\ncheckpointEvery: 1\n`;

  it('records μ and σ, checkpoints them with the pairs\' history, and resumes to the uninterrupted log', async () => {
    const scenario = parseScenario(text, 'ts.yaml');
    const uninterrupted = await runScenario(scenario, { outDir: fresh() });
    const metrics = metricsOf(uninterrupted.outDir);
    for (const member of Object.values(metrics.at(-1)!.members)) expect(member.sigma).toBeGreaterThan(0);
    // σ shrinks as members play (a replaced member starts again from 25/3)
    const sigmas = metrics.map((m) => m.members['teacher-0-0']!.sigma!);
    expect(Math.min(...sigmas)).toBeLessThan(25 / 3);
    const state = readCheckpointState(join(uninterrupted.outDir, 'checkpoints', 'step-1'));
    const manager = new Map(state.actorStates).get('population-manager') as { members: Array<{ sigma?: number }>; history?: Record<string, { answers: number }> };
    expect(manager.members.every((m) => typeof m.sigma === 'number')).toBe(true);
    expect(Object.values(manager.history ?? {}).reduce((n, h) => n + h.answers, 0)).toBeGreaterThan(0);

    const dir = fresh();
    await runScenario(scenario, { outDir: dir, stopAfterSteps: 2 });
    const resumed = await runScenario(scenario, { outDir: dir, resume: true });
    expect(resumed.hash).toBe(uninterrupted.hash);
    expect(readFileSync(join(dir, 'metrics.jsonl'), 'utf8')).toBe(readFileSync(join(uninterrupted.outDir, 'metrics.jsonl'), 'utf8'));
  });
});
