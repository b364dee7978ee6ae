// The researcher's view of runs: report.html rendered in headless Chromium (every plot drawn, with as many points
// as the metrics hold), `populora compare` with its summary table, and `populora export` to PEFT + population.json.
// Chromium may be missing on a developer's machine (the test then skips), never in CI (POPULORA_REQUIRE_CHROMIUM).

import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadPeftAdapter } from '../src/model/peft.js';
import { loadRun, writeReport } from '../src/report/report.js';
import type { StepMetrics } from '../src/sim/metrics.js';
import { readCheckpointState, runScenario } from '../src/sim/run.js';
import { parseScenario } from '../src/scenario/scenario.js';

const scenarioText = (policy: string, subpopulations: number) => `
name: report-${policy}
seed: 3
steps: 4
backend: cpu
model: { preset: tiny, seed: 1 }
population: { subpopulations: ${subpopulations}, teachers: 1, students: 1, lora: { rank: 4 } }
tasks: { perTeacher: 1 }
matchmaking: { policy: ${policy}, studentsPerTask: 1 }
sampling: { answersPerStudent: 2, maxTokens: 16 }
rl: { lr: 0.01 }
evolution: { every: 2, fraction: 0.5 }
checkpointEvery: 2
`;

const browser = ['chromium', 'chromium-browser', 'google-chrome'].find((name) => spawnSync(name, ['--version'], { encoding: 'utf8' }).status === 0);
if (!browser && process.env.POPULORA_REQUIRE_CHROMIUM === '1') throw new Error('POPULORA_REQUIRE_CHROMIUM=1 but no chromium on PATH (.ci/install-chromium installs it)');
const headless = (...args: string[]) => execFileSync(browser!, ['--headless', '--no-sandbox', '--disable-gpu', '--hide-scrollbars', ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 60_000 });

const cli = (...args: string[]) => spawnSync(process.execPath, ['dist/src/cli/main.js', ...args], { encoding: 'utf8' });
const metricsOf = (dir: string) => readFileSync(join(dir, 'metrics.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as StepMetrics);
const present = (values: Array<number | null | undefined>) => values.filter((v) => typeof v === 'number' && Number.isFinite(v)).length;

let cross: string;
let single: string;
beforeAll(async () => {
  const root = mkdtempSync(join(tmpdir(), 'populora-report-'));
  cross = (await runScenario(parseScenario(scenarioText('cross', 2), 'cross.yaml'), { outDir: join(root, 'cross') })).outDir;
  single = (await runScenario(parseScenario(scenarioText('self', 1), 'self.yaml'), { outDir: join(root, 'self') })).outDir;
});

describe.skipIf(!browser)('run reports in headless Chromium', () => {
  it('draws every plot of a run with its data points, the matchmaking matrix and the lineage tree', () => {
    const file = writeReport([loadRun(cross)], join(cross, 'report.html'));
    const dom = headless('--dump-dom', `file://${resolve(file)}`);
    expect(dom).toContain('data-rendered="true"');
    const charts = [...dom.matchAll(/<section class="chart" data-points="(\d+)"><h3>([^<]+)<\/h3>/g)].map((m) => ({ title: m[2]!, points: Number(m[1]) }));
    expect(charts.map((c) => c.title)).toEqual(['Student solve rate per member', 'Student solve rate per sub-population', 'Teacher reward', 'Task validity', 'Task complexity', 'Problem-space coverage', 'Task entropy over bins (bits)', 'Ratings', 'Training loss']);
    for (const chart of charts) expect(chart.points, chart.title).toBeGreaterThan(0);
    expect(dom.match(/<canvas/g)).toHaveLength(charts.length); // uPlot drew each one

    // The points drawn are the metrics' values, counted independently from metrics.jsonl.
    const metrics = metricsOf(cross);
    const students = Object.keys(metrics.at(-1)!.members).filter((id) => id.startsWith('student'));
    const solvePoints = present(metrics.map((m) => m.solveRate)) + students.reduce((n, id) => n + present(metrics.map((m) => m.members[id]?.solveRate)), 0);
    expect(charts[0]!.points).toBe(solvePoints);
    expect(charts[3]!.points).toBe(present(metrics.map((m) => m.validity)));

    const lineage = JSON.parse(readFileSync(join(cross, 'lineage.json'), 'utf8')) as unknown[];
    expect(lineage.length).toBeGreaterThan(0);
    expect(dom).toContain(`data-records="${lineage.length}"`);
    const pairs = new Set(metrics.flatMap((m) => m.matches.map((p) => `${p.teacher} ${p.student}`)));
    expect(dom).toContain(`data-cells="${pairs.size}"`);

    const artifacts = resolve('out/test-artifacts');
    mkdirSync(artifacts, { recursive: true });
    const screenshot = join(artifacts, 'report.png');
    headless('--window-size=1300,2400', `--screenshot=${screenshot}`, `file://${resolve(file)}`);
    expect(existsSync(screenshot)).toBe(true);
    console.log(`report screenshot (CI artifact): ${screenshot}`);
  });

  it("plots the verifier's wall-clock share and throughput of a run made by populora run (which keeps a clock)", () => {
    const root = mkdtempSync(join(tmpdir(), 'populora-timing-'));
    const file = join(root, 'cross.yaml');
    writeFileSync(file, scenarioText('cross', 2));
    const ran = cli('run', file, '--out', join(root, 'run'));
    expect(ran.status, ran.stderr).toBe(0);
    const metrics = metricsOf(join(root, 'run'));
    const dom = headless('--dump-dom', `file://${join(root, 'run', 'report.html')}`);
    const points = (title: string) => Number(new RegExp(`<section class="chart" data-points="(\\d+)"><h3>${title.replace(/[()]/g, '\\$&')}</h3>`).exec(dom)?.[1]);
    expect(points('Verifier (wall clock, not replayed)')).toBe(present(metrics.map((m) => m.timing?.verifierShare)));
    expect(points('Verifier (wall clock, not replayed)')).toBe(metrics.length);
    expect(points('Verifier throughput (per second of its time)')).toBe(present(metrics.flatMap((m) => [m.timing?.validationsPerSecond, m.timing?.checksPerSecond])));
  });

  it('puts several runs on the same axes, and prints their summary table', () => {
    const out = join(mkdtempSync(join(tmpdir(), 'populora-compare-')), 'compare.html');
    const compared = cli('compare', cross, single, '--out', out);
    expect(compared.status, compared.stderr).toBe(0);
    expect(compared.stdout).toContain('report-cross');
    expect(compared.stdout).toContain('report-self');
    expect(compared.stdout).toContain(`report: ${out}`);
    const dom = headless('--dump-dom', `file://${resolve(out)}`);
    const solve = /<section class="chart" data-points="(\d+)"><h3>Student solve rate<\/h3>/.exec(dom);
    expect(Number(solve![1])).toBe(present(metricsOf(cross).map((m) => m.solveRate)) + present(metricsOf(single).map((m) => m.solveRate)));
    expect(dom).toContain('report-cross: who met whom');
    expect(dom).toContain('report-self: lineage');
  });
});

describe.skipIf(!browser)('a comparison across seeds in headless Chromium', () => {
  it('groups runs that differ only in seed: mean curves with bands, intervals, and paired tests against the first group', async () => {
    const root = mkdtempSync(join(tmpdir(), 'populora-groups-'));
    const dirs: string[] = [];
    for (const lr of ['0.01', '0.5']) {
      for (const seed of [3, 4]) {
        const text = scenarioText('cross', 2).replace('seed: 3', `seed: ${seed}`).replace('steps: 4', 'steps: 3').replace('lr: 0.01', `lr: ${lr}`).replace('name: report-cross', `name: g-${lr}-${seed}`) + 'evaluation: { tasks: 8, every: 2 }\n';
        dirs.push((await runScenario(parseScenario(text, 'g.yaml'), { outDir: join(root, `${lr}-${seed}`) })).outDir);
      }
    }
    const out = join(root, 'compare.html');
    const compared = cli('compare', ...dirs, '--out', out);
    expect(compared.status, compared.stderr).toBe(0);
    const dom = headless('--dump-dom', `file://${resolve(out)}`);
    expect(dom).toContain('data-rendered="true"');
    const charts = [...dom.matchAll(/<section class="chart" data-points="(\d+)"><h3>([^<]+)<\/h3>/g)].map((m) => ({ title: m[2]!, points: Number(m[1]) }));
    expect(charts.map((c) => c.title)).toContain('Held-out solve rate (students, greedy)');
    // Each group's curve has a mean, a high and a low point at every step where one of its runs has a value.
    const metrics = dirs.map(metricsOf);
    const pointsOf = (get: (m: StepMetrics) => number | null | undefined) =>
      [metrics.slice(0, 2), metrics.slice(2)].reduce((n, group) => n + 3 * [0, 1, 2].filter((step) => group.some((run) => typeof get(run[step]!) === 'number')).length, 0);
    expect(charts.find((c) => c.title === 'Student solve rate')!.points).toBe(pointsOf((m) => m.solveRate));
    expect(charts.find((c) => c.title === 'Held-out solve rate (students, greedy)')!.points).toBe(pointsOf((m) => m.heldOut?.solveRate));
    expect(dom.match(/<canvas/g)).toHaveLength(charts.filter((c) => c.points > 0).length);
    // The groups' table: the mean over each group's runs of their mean solve rates, computed here from metrics.jsonl.
    const runMean = (run: StepMetrics[]) => { const v = run.map((m) => m.solveRate).filter((x): x is number => x !== null); return v.reduce((a, b) => a + b, 0) / v.length; };
    for (const [label, group] of [['rl.lr=0.01', metrics.slice(0, 2)], ['rl.lr=0.5', metrics.slice(2)]] as const) {
      const row = new RegExp(`<tr><td>${label.replace('.', '\\.')}</td><td>2</td><td>3 4</td><td>([0-9.-]+) \\[`).exec(dom);
      expect(row, label).not.toBeNull();
      expect(Number(row![1])).toBeCloseTo((runMean(group[0]!) + runMean(group[1]!)) / 2, 3);
    }
    expect(dom).toContain('paired sign-flip');
    expect(compared.stdout).toContain('2 group(s) of runs that differ only in seed');
    const screenshot = join(resolve('out/test-artifacts'), 'compare-groups.png');
    mkdirSync(resolve('out/test-artifacts'), { recursive: true });
    headless('--window-size=1300,2400', `--screenshot=${screenshot}`, `file://${resolve(out)}`);
    expect(existsSync(screenshot)).toBe(true);
  });
});

describe('populora export', () => {
  it('writes every member\'s adapter at the step in PEFT layout, and population.json with roles, ratings and lineage', () => {
    const out = join(mkdtempSync(join(tmpdir(), 'populora-export-')), 'population');
    const exported = cli('export', cross, '--step', '4', '--out', out);
    expect(exported.status, exported.stderr).toBe(0);
    const population = JSON.parse(readFileSync(join(out, 'population.json'), 'utf8'));
    const state = readCheckpointState(join(cross, 'checkpoints', 'step-4'));
    const manager = new Map(state.actorStates).get('population-manager') as { members: Array<{ id: string; rating: number; role: string; generation: number }> };
    expect(population).toMatchObject({ run: 'report-cross', step: 4 });
    expect(population.members.map((m: { id: string; role: string; rating: number }) => [m.id, m.role, m.rating])).toEqual(manager.members.map((m) => [m.id, m.role, m.rating]));
    for (const member of population.members as Array<{ id: string; generation: number; lineage: Array<{ child: string }> }>) {
      const adapter = loadPeftAdapter(join(out, member.id));
      expect(adapter.rank).toBe(4);
      // A replaced member's lineage ends with the record that made its adapter.
      if (member.generation > 0) expect(member.lineage.at(-1)!.child).toBe(`${member.id}.g${member.generation}`);
      else expect(member.lineage).toEqual([]);
    }
    expect(population.members.some((m: { generation: number }) => m.generation > 0)).toBe(true);
  });

  it('names the checkpoints a run has when asked for another step', () => {
    const result = cli('export', cross, '--step', '3', '--out', join(mkdtempSync(join(tmpdir(), 'populora-export-')), 'x'));
    expect(result.status).toBe(1);
    expect(result.stderr.trim()).toBe(`populora: ${cross}: no checkpoint at step 3; the run has step 2, step 4`);
  });
});
