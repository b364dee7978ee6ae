// The actor runtime end to end on the CPU backend: a run is a pure function of its scenario (twice → the same
// hash; 1 or 2 verifier workers → the same hash), replay names the first tampered event, a resumed run's log
// equals an uninterrupted one's, and the recorded messages keep each policy's pairing rule.
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { EventLog, readEventLog, type RunEvent } from '../src/runtime/event-log.js';
import { replayRun } from '../src/sim/replay.js';
import { runScenario } from '../src/sim/run.js';
import { parseScenario, type Scenario } from '../src/scenario/scenario.js';
import type { StepMetrics } from '../src/sim/metrics.js';
import { editDeliveries, resultsOf } from './edit-deliveries.js';

const base = `
name: test
seed: 3
steps: 2
backend: cpu
model: { preset: tiny, seed: 1 }
population: { subpopulations: 2, teachers: 1, students: 1, lora: { rank: 4 } }
tasks: { perTeacher: 1 }
matchmaking: { policy: cross, studentsPerTask: 1 }
sampling: { answersPerStudent: 2, maxTokens: 16 }
rl: { lr: 0.01 }
evolution: { every: 2, fraction: 0.5 }
`;
const scenarioOf = (extra = '') => parseScenario(base + extra, 'test.yaml');
const fresh = () => mkdtempSync(join(tmpdir(), 'populora-run-'));
const run = (scenario: Scenario, options: Partial<Parameters<typeof runScenario>[1]> = {}) => runScenario(scenario, { outDir: fresh(), ...options });
/** Every (student, teacher) pair the matchmaker's recorded `assign` messages made. */
const assignments = (events: RunEvent[]) =>
  events
    .filter((e) => e.type === 'assign')
    .flatMap((e) => {
      const { to, message } = e.payload as { to: string; message: { tasks: Array<{ teacher: string }> } };
      return message.tasks.map((t) => ({ student: to, teacher: t.teacher }));
    });

describe('a self-play run', () => {
  it('is a function of its scenario: the same hash twice, and with 1 or 2 verifier workers', async () => {
    const scenario = scenarioOf();
    const first = await run(scenario);
    const second = await run(scenario, { verifierWorkers: 2 });
    expect(second.hash).toBe(first.hash);
    expect(first.events).toBeGreaterThan(50);
    const other = await run({ ...scenario, seed: 4 });
    expect(other.hash).not.toBe(first.hash);

    const { events } = readEventLog(join(first.outDir, 'events.msgpack'));
    // Every phase happened: proposals, validations, assignments, answers, checks, training, ratings, evolution.
    for (const type of ['propose', 'generate', 'generated', 'validate', 'validated', 'offers', 'assign', 'check', 'checked', 'outcomes', 'train', 'rate', 'evolve', 'evolved']) {
      expect(events.some((e) => e.type === type), type).toBe(true);
    }
    // cross: no teacher's task goes to a student of its own sub-population.
    const assigned = assignments(events);
    expect(assigned.length).toBeGreaterThan(0);
    for (const { student, teacher } of assigned) expect(teacher.split('-')[1]).not.toBe(student.split('-')[1]);
    const metrics = readFileSync(join(first.outDir, 'metrics.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as StepMetrics);
    expect(metrics.map((m) => m.step)).toEqual([0, 1]);
    const lineage = JSON.parse(readFileSync(join(first.outDir, 'lineage.json'), 'utf8'));
    expect(lineage.length).toBe(2); // evolution after step 1: half of each role (two teachers, two students)
    expect(lineage[0]).toMatchObject({ step: 1, parents: [expect.stringMatching(/\.g0$/)] });
  });

  it('makes the same SVD-crossover children with the factorisations on 1 or 2 threads', async () => {
    const scenario = scenarioOf();
    // Two of each role per sub-population: the bottom half of each role is replaced by crossovers of the top half.
    const population = { ...scenario.population, teachers: 2, students: 2 };
    const evolving = { ...scenario, steps: 3, population, evolution: { ...scenario.evolution, every: 1, crossoverProbability: 1, crossover: 'svd' as const } };
    const [inline, pooled] = [await run({ ...evolving, evolution: { ...evolving.evolution, threads: 1 } }), await run({ ...evolving, evolution: { ...evolving.evolution, threads: 2 } })];
    expect(pooled.hash).toBe(inline.hash);
    const lineage = JSON.parse(readFileSync(join(inline.outDir, 'lineage.json'), 'utf8')) as Array<{ operator: string; step: number }>;
    expect(lineage.filter((l) => l.operator === 'crossover' && l.step < 2).length).toBeGreaterThan(0); // children that then play
    const adapters = (dir: string) => readdirSync(join(dir, 'checkpoints', 'step-3')).filter((m) => m.includes('-')).map((m) => readFileSync(join(dir, 'checkpoints', 'step-3', m, 'adapter_model.safetensors')));
    expect(adapters(pooled.outDir)).toEqual(adapters(inline.outDir));
  });

  it('replays identically, and names the first event of a tampered log', async () => {
    const first = await run(scenarioOf());
    expect(await replayRun(first.outDir)).toMatchObject({ identical: true, hash: first.hash });

    const file = join(first.outDir, 'events.msgpack');
    const { events } = readEventLog(file);
    const index = events.findIndex((e) => e.type === 'checked');
    const tampered = structuredClone(events);
    const { check } = (tampered[index]!.payload as { message: { results: Array<{ check: { correct: boolean } }> } }).message.results[0]!;
    check.correct = !check.correct;
    const log = new EventLog(file);
    tampered.forEach((e) => log.append(e));
    log.close();
    const verdict = await replayRun(first.outDir);
    expect(verdict).toMatchObject({ identical: false, index, recorded: { type: 'checked', step: tampered[index]!.step } });
  });

  it('resumed after a crash, ends with the same log as an uninterrupted run', async () => {
    const long = { ...scenarioOf('checkpointEvery: 1\n'), steps: 3 };
    const uninterrupted = await run(long);
    const dir = fresh();
    const crashed = await runScenario(long, { outDir: dir, stopAfterSteps: 2 });
    expect(crashed.stepsRun).toBe(2);
    const resumed = await runScenario(long, { outDir: dir, resume: true });
    expect(resumed.stepsRun).toBe(1);
    expect(resumed.hash).toBe(uninterrupted.hash);
    expect(readFileSync(join(dir, 'metrics.jsonl'), 'utf8')).toBe(readFileSync(join(uninterrupted.outDir, 'metrics.jsonl'), 'utf8'));
  });

  it('pairs by each policy\'s rule: self solves its own tasks, within stays in its sub-population', async () => {
    const self = await run({ ...scenarioOf(), matchmaking: { policy: 'self', studentsPerTask: 1 } });
    for (const { student, teacher } of assignments(readEventLog(join(self.outDir, 'events.msgpack')).events)) expect(student).toBe(teacher.replace('teacher', 'student'));
    const within = await run({ ...scenarioOf(), matchmaking: { policy: 'within', studentsPerTask: 1 } });
    const assigns = assignments(readEventLog(join(within.outDir, 'events.msgpack')).events);
    expect(assigns.length).toBeGreaterThan(0);
    for (const { student, teacher } of assigns) expect(teacher.split('-')[1]).toBe(student.split('-')[1]);
  });

  it('stops at a failing actor, naming it, its step and message, with every event up to the failure on disk', async () => {
    // A verifier that answers for a proposal nobody made: the teacher's handler throws on it in step 1.
    const corrupt = editDeliveries('verifier', (deliveries, world) => {
      if (world.step === 1) for (const d of deliveries) if (d.message.type === 'validated') resultsOf(d)[0]!.requestId = 99999;
    });
    const outDir = fresh();
    await expect(runScenario({ ...scenarioOf(), steps: 3 }, { outDir, wrapService: corrupt })).rejects.toThrow(/^actor teacher-\d-0 failed at step 1 on message "validated": no proposal with request id 99999$/);
    const { events, tornTailBytes } = readEventLog(join(outDir, 'events.msgpack'));
    expect(tornTailBytes).toBe(0);
    expect(events.at(-1)!.step).toBe(1);
    expect(events.some((e) => e.type === 'validated' && e.step === 1)).toBe(true);
    expect(readFileSync(join(outDir, 'metrics.jsonl'), 'utf8').trim().split('\n')).toHaveLength(1); // step 0 was complete
  });

  it('drops a proposal and an answer the verifier could not judge (faults): counted, neither rewarded nor penalised', async () => {
    const faulted: number[] = [];
    const faulty = editDeliveries('verifier', (deliveries, world) => {
      for (const kind of ['validated', 'checked']) {
        const first = deliveries.find((d) => d.message.type === kind);
        if (world.step !== 0 || !first || faulted.length >= 2 || (kind === 'checked') !== (faulted.length === 1)) continue;
        const results = resultsOf<{ requestId: number; fault?: string }>(first);
        faulted.push(results[0]!.requestId);
        results[0] = { requestId: results[0]!.requestId, fault: 'infrastructure fault: injected by the test' };
      }
    });
    const result = await run(scenarioOf(), { wrapService: faulty });
    expect(faulted).toHaveLength(2);
    const [step0] = readFileSync(join(result.outDir, 'metrics.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as StepMetrics);
    expect(step0!.verifierFaults).toBe(2);
    const trained = readEventLog(join(result.outDir, 'events.msgpack'))
      .events.filter((e) => e.type === 'train' && e.step === 0)
      .flatMap((e) => (e.payload as { message: { samples: Array<{ requestId: number }> } }).message.samples.map((sample) => sample.requestId));
    expect(trained.length).toBeGreaterThan(0);
    for (const id of faulted) expect(trained).not.toContain(id);
  });

  it('refuses a token budget too small for the domain, naming the field', async () => {
    const scenario = scenarioOf();
    await expect(run({ ...scenario, sampling: { ...scenario.sampling, maxTokens: 8 } })).rejects.toThrow(/field "sampling.maxTokens": 8 tokens cannot hold/);
  });
});
