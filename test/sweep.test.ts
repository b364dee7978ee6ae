// Sweeps: the grid expands to the runs it should (variants, ranges, overrides), a bad grid is refused before
// anything runs with the field named, unequal compute is refused; `populora sweep` runs the grid in processes
// (each run folder ordinary: the same run hash as running its scenario directly), and a sweep killed outright
// (kill -9) or stopped (SIGINT) continues with --resume to the runs an uninterrupted sweep makes.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { beforeAll, describe, expect, it } from 'vitest';
import { runScenario } from '../src/sim/run.js';
import { parseScenario } from '../src/scenario/scenario.js';
import { planSweep } from '../src/sweep/grid.js';
import type { SweepState } from '../src/sweep/state.js';

const BASE = `
  name: tiny
  seed: 1
  steps: 4
  backend: cpu
  model: { preset: tiny, seed: 1 }
  population: { subpopulations: 2, teachers: 1, students: 1, lora: { rank: 4 } }
  tasks: { perTeacher: 1 }
  matchmaking: { policy: cross, studentsPerTask: 1 }
  sampling: { answersPerStudent: 2, maxTokens: 16 }
  rl: { lr: 0.01 }
  checkpointEvery: 1`;
// Equal compute: 6 proposals and 12 answers per step in both variants.
const SWEEP = `name: tiny
scenario:${BASE}
overrides: { rl.lr: 0.02 }
variants:
  single: { population.subpopulations: 1, tasks.perTeacher: 2, matchmaking: { policy: self } }
  cross: {}
grid:
  seed: [1..2]
`;

const folder = () => mkdtempSync(join(tmpdir(), 'populora-sweep-'));
const sweepFile = (text: string) => {
  const file = join(folder(), 'tiny.yaml');
  writeFileSync(file, text);
  return file;
};
const cli = (...args: string[]) => spawnSync(process.execPath, ['dist/src/cli/main.js', ...args], { encoding: 'utf8' });
const stateOf = (out: string) => JSON.parse(readFileSync(join(out, 'sweep.json'), 'utf8')) as SweepState;
const refusal = (text: string) => {
  try {
    planSweep(sweepFile(text));
  } catch (error) {
    return (error as Error).message.replace(/^.*tiny\.yaml/, 'tiny.yaml');
  }
  throw new Error('the sweep was not refused');
};

describe('a sweep file', () => {
  it('expands to every combination of variant and grid value, variants fastest, with the overrides applied', () => {
    const plan = planSweep(sweepFile(SWEEP));
    expect(plan.runs.map((r) => r.dir)).toEqual(['single_seed-1', 'cross_seed-1', 'single_seed-2', 'cross_seed-2']);
    expect(plan.runs.map((r) => r.group)).toEqual(['single', 'cross', 'single', 'cross']);
    const [single, cross] = plan.runs;
    expect(single!.overrides).toEqual({ 'rl.lr': 0.02, 'population.subpopulations': 1, 'tasks.perTeacher': 2, matchmaking: { policy: 'self' }, seed: 1 });
    expect(single!.scenario).toMatchObject({ name: 'tiny.single_seed-1', seed: 1, rl: { lr: 0.02 }, population: { subpopulations: 1 }, matchmaking: { policy: 'self', studentsPerTask: 1 } });
    expect(cross!.scenario).toMatchObject({ seed: 1, population: { subpopulations: 2 }, matchmaking: { policy: 'cross', studentsPerTask: 1 } });
    for (const run of plan.runs) expect(run.compute).toEqual({ proposalsPerStep: 6, answersPerStep: 12, maxTokens: 16, steps: 4 });
    // a grid of two fields, without variants
    const grid = planSweep(sweepFile(`scenario:${BASE}\ngrid:\n  seed: [3, 4]\n  rl.lr: [0.01, 0.1]\n`));
    expect(grid.runs.map((r) => [r.dir, r.group])).toEqual([
      ['seed-3_lr-0.01', 'lr=0.01'],
      ['seed-3_lr-0.1', 'lr=0.1'],
      ['seed-4_lr-0.01', 'lr=0.01'],
      ['seed-4_lr-0.1', 'lr=0.1'],
    ]);
  });

  it('refuses a bad grid before anything runs, naming the field', () => {
    const grid = (line: string) => `scenario:${BASE}\ngrid:\n  ${line}\n`;
    expect(refusal(grid('matchmaking.polcy: [self]'))).toBe('tiny.yaml: override "matchmaking.polcy" = "self" (run polcy-self): field "matchmaking": unknown field(s) "polcy"');
    expect(refusal(grid('seed: [1, many]'))).toBe('tiny.yaml: override "seed" = "many" (run seed-many): field "seed": expected a number');
    expect(refusal(grid('matchmaking.policy: [cross, selff]'))).toBe('tiny.yaml: override "matchmaking.policy" = "selff" (run policy-selff): field "matchmaking.policy": expected one of self, within, cross, random, rating, pfsp');
    expect(refusal(grid('seed.x: [1]'))).toBe('tiny.yaml: override "seed.x": "seed" is 1 in the base scenario, not a section with fields');
    expect(refusal(grid('seed: 3..1'))).toBe('tiny.yaml: field "grid.seed": expected a list of values, e.g. [1, 2, 3] or [1..8]');
    expect(refusal(grid('seed: [3..1]'))).toBe('tiny.yaml: field "grid.seed": the range "3..1" must run upwards and hold at most 10001 values');
    // a mistake that no override names: the run's overrides are listed
    expect(refusal(`scenario:${BASE}\nvariants:\n  self: { matchmaking.policy: self, population.teachers: 2 }\n`)).toBe('tiny.yaml: run self (matchmaking.policy="self", population.teachers=2): field "population.students": under "self" every teacher solves its own tasks through a student twin that shares its adapter, so "students" must equal "teachers" (2)');
    expect(refusal(`grid: { seed: [1] }\n`)).toBe('tiny.yaml: field "(top level)": give the base scenario either as `base: FILE` or inline as `scenario:`, one of them');
  });

  it('refuses unequal compute unless told, naming two runs that differ', () => {
    const unequal = `scenario:${BASE}\ngrid:\n  sampling.answersPerStudent: [2, 4]\n`;
    expect(refusal(unequal)).toBe('tiny.yaml: the runs do not spend equal compute (answersPerStudent-2: 6 proposals and 12 answers per step; answersPerStudent-4: 6 proposals and 24 answers per step): make the variants\' population, tasks.perTeacher, matchmaking.studentsPerTask and sampling.answersPerStudent agree, or set "equalCompute: false" to run them anyway');
    expect(planSweep(sweepFile(`${unequal}equalCompute: false\n`)).runs).toHaveLength(2);
  });
});

describe('populora sweep', () => {
  let file: string;
  let uninterrupted: SweepState;
  beforeAll(() => {
    file = sweepFile(SWEEP);
  });

  it('refuses a bad grid in one line, and creates nothing', () => {
    const out = join(folder(), 'bad');
    const result = cli('sweep', sweepFile(`scenario:${BASE}\ngrid:\n  rl.lrr: [0.1]\n`), '--out', out);
    expect(result.status).toBe(1);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    expect(result.stderr).toMatch(/^populora: .*tiny\.yaml: override "rl\.lrr" = 0\.1 \(run lrr-0\.1\): field "rl": unknown field\(s\) "lrr"\n$/);
    expect(existsSync(out)).toBe(false);
  });

  it('runs every run as an ordinary run folder, N at a time, and lists them in sweep.json', async () => {
    const out = join(folder(), 'sweep');
    const result = cli('sweep', file, '--out', out, '--parallel', '2');
    expect(result.status, result.stderr + result.stdout).toBe(0);
    expect(result.stdout).toContain('equal compute: 6 proposals and 12 answers per step in every run');
    uninterrupted = stateOf(out);
    expect(uninterrupted.runs.map((r) => [r.dir, r.status, r.attempts])).toEqual(['single_seed-1', 'cross_seed-1', 'single_seed-2', 'cross_seed-2'].map((dir) => [dir, 'finished', 1]));
    expect(uninterrupted.compute).toEqual({ equal: true, proposalsPerStep: [6], answersPerStep: [12] });
    expect(new Set(uninterrupted.runs.map((r) => r.hash)).size).toBe(4);
    // The same run hash as the run's scenario run directly, in this process.
    const scenarioFile = join(out, 'scenarios', 'cross_seed-2.json');
    const direct = await runScenario(parseScenario(readFileSync(scenarioFile, 'utf8'), scenarioFile), { outDir: join(folder(), 'direct') });
    expect(direct.hash).toBe(uninterrupted.runs[3]!.hash);
    expect(readdirSync(join(out, 'cross_seed-2')).sort()).toEqual(['checkpoints', 'events.msgpack', 'lineage.json', 'metrics.jsonl', 'report.html', 'scenario.json', 'summary.json']);
    // compare takes the sweep's folder for its runs, and groups them across seeds
    const compared = cli('compare', out, '--out', join(out, 'compare.html'));
    expect(compared.status, compared.stderr).toBe(0);
    expect(compared.stdout).toContain('2 group(s) of runs that differ only in seed');
    expect(compared.stdout).toContain('paired sign-flip');
    // a resume refuses a sweep file that no longer makes the same runs, naming the run and field
    const changed = sweepFile(SWEEP.replace('rl.lr: 0.02', 'rl.lr: 0.03'));
    const refused = cli('sweep', changed, '--out', out, '--resume');
    expect(refused.status).toBe(1);
    expect(refused.stderr).toContain(`no longer makes the sweep recorded in ${join(out, 'sweep.json')}: run single_seed-1's field "rl.lr" was 0.02, now 0.03`);
    const again = cli('sweep', file, '--out', out);
    expect(again.stderr).toContain(`${out} already holds a sweep: continue it with --resume, or choose another --out`);
  });

  it('continues after kill -9 and after SIGINT with --resume, to the runs an uninterrupted sweep makes', async () => {
    const out = join(folder(), 'killed');
    const start = (...extra: string[]) => spawn(process.execPath, ['dist/src/cli/main.js', 'sweep', file, '--out', out, '--parallel', '1', ...extra], { stdio: ['ignore', 'pipe', 'pipe'] });
    const exited = (child: ReturnType<typeof start>) => new Promise<{ code: number | null; output: string }>((resolve) => {
      let output = '';
      child.stdout!.on('data', (d) => (output += d));
      child.stderr!.on('data', (d) => (output += d));
      child.on('exit', (code) => resolve({ code, output }));
    });
    const when = async (ready: () => boolean) => {
      while (!ready()) await sleep(100);
    };

    // kill -9 while the second run is between checkpoints: its process stops at the end of its step (pdeathsig)
    const first = start();
    const firstExit = exited(first);
    await when(() => existsSync(join(out, 'cross_seed-1', 'checkpoints', 'step-1')));
    first.kill('SIGKILL');
    await firstExit;
    const killed = stateOf(out);
    expect(killed.runs[0]!.status).toBe('finished');
    expect(killed.runs[1]!.status).toBe('running'); // as the sweep last wrote it

    // resume, then SIGINT during the third run
    const second = start('--resume');
    const secondExit = exited(second);
    await when(() => existsSync(join(out, 'single_seed-2', 'checkpoints', 'step-1')));
    second.kill('SIGINT');
    const stopped = await secondExit;
    expect(stopped.code, stopped.output).toBe(130);
    expect(stopped.output).toContain(`continue the sweep with: populora sweep ${file} --out ${out} --resume`);
    expect(stateOf(out).runs.map((r) => r.status)).toEqual(['finished', 'finished', 'stopped', 'pending']);

    const third = exited(start('--resume'));
    const done = await third;
    expect(done.code, done.output).toBe(0);
    const state = stateOf(out);
    expect(state.runs.map((r) => r.status)).toEqual(['finished', 'finished', 'finished', 'finished']);
    expect(state.runs.map((r) => r.attempts)).toEqual([1, 2, 2, 1]); // the finished first run was kept
    expect(state.runs.map((r) => r.hash)).toEqual(uninterrupted.runs.map((r) => r.hash));
  });
});
