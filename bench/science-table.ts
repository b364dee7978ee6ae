// The table of docs/science.md: each group of runs (a sweep's groups, or single runs) against the base model on
// the runs' held-out tasks (the part their scenarios name: validation while choosing settings, test once for the
// chosen ones). Each run is scored on the tasks of its last evaluation that no teacher of the run proposed (those
// were trained on), and the base model on the same tasks, greedily, through the engine and verifier a run uses
// (bench/science-runs.ts). Per group, over its seeds: the students' mean, the best and the worst student, each
// with a 95% percentile-bootstrap interval, and each less the base with the exact sign-flip test over the seeds
// (8 seeds: 256 sign patterns, so p >= 0.008); the same differences tested over the tasks (each task's mean
// verdict over the group's students and seeds less the base's, a sign-flip test over tasks: does the gain hold
// across the task distribution, not only on these runs); the students above the base; and the students' mean
// against the first group (or --against), paired by seed. Prints a markdown table; writes JSON.
//
//   node dist/bench/science-table.js SWEEP_OR_RUN... [--against GROUP] [--out FILE.json]

import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { parseArgs } from 'node:util';
import { benchArgs, BenchUsageError } from './args.js';
import { baseVerdicts, lastEvaluation, runFolders, scenarioOf } from './science-runs.js';
import { bootstrapMean, mean, pairedPermutationTest, type Interval, type TestResult } from '../src/report/stats.js';
import { Streams } from '../src/runtime/streams.js';
import type { Scenario } from '../src/scenario/scenario.js';

const options = {
  against: { type: 'string' },
  out: { type: 'string', default: 'bench/results/science-table.json' },
} as const;
const args = benchArgs(import.meta.url, { options, allowPositionals: true });
const { positionals } = parseArgs({ options, allowPositionals: true, args: process.argv.slice(2) });

/** One run: each student's score and the base's, on the tasks of the run's held-out set that it kept. */
interface RunScores {
  dir: string;
  group: string;
  seed: number;
  kept: number[]; // indices of the tasks scored
  base: number;
  students: Record<string, number>;
  studentVerdicts: Record<string, boolean[]>; // over the whole set (for the per-task test)
  baseVerdicts: boolean[];
}

const baseCache = new Map<string, Promise<boolean[]>>();
/** The base's verdicts for a scenario's evaluation (the same for every run of the same domain, model, tasks and budget). */
function baseFor(scenario: Scenario): Promise<boolean[]> {
  const key = JSON.stringify([scenario.domain, scenario.model, scenario.evaluation, scenario.sampling.maxTokens, scenario.prompts ?? null, scenario.tasks.fuel]);
  if (!baseCache.has(key)) baseCache.set(key, baseVerdicts(scenario).then((b) => b.verdicts));
  return baseCache.get(key)!;
}

const share = (verdicts: readonly boolean[], kept: readonly number[]) => kept.filter((i) => verdicts[i]).length / kept.length;

async function scoresOf(dir: string, group: string): Promise<RunScores> {
  const scenario = scenarioOf(dir);
  const evaluation = lastEvaluation(dir);
  const base = await baseFor(scenario);
  const kept = base.map((_, i) => i).filter((i) => !evaluation.excluded.has(i));
  const studentVerdicts = Object.fromEntries([...evaluation.verdicts].filter(([id]) => id.startsWith('student-')).sort(([a], [b]) => (a < b ? -1 : 1)));
  if (Object.keys(studentVerdicts).length === 0) throw new BenchUsageError(`${dir}: its last evaluation scored no student`);
  const students = Object.fromEntries(Object.entries(studentVerdicts).map(([id, v]) => [id, share(v, kept)]));
  return { dir, group, seed: scenario.seed, kept, base: share(base, kept), students, studentVerdicts, baseVerdicts: base };
}

interface GroupRow {
  group: string;
  runs: number;
  seeds: number[];
  base: number; // mean over runs of the base's score on each run's kept tasks
  students: Interval;
  best: Interval;
  worst: Interval;
  vsBase: { students: TestResult; best: TestResult; worst: TestResult };
  vsBaseOverTasks: TestResult; // the students' per-task mean verdict less the base's, over tasks
  aboveBase: { students: number; of: number; seedsAllAbove: number };
  vsReference: TestResult | null;
}

const streams = new Streams(20_250_601);

function summarise(group: string, runs: RunScores[], reference: RunScores[] | null): GroupRow {
  const rng = (what: string) => streams.stream('science-table', group.replaceAll('/', '|'), what);
  const byRun = (f: (r: RunScores) => number) => runs.map(f);
  const studentsMean = byRun((r) => mean(Object.values(r.students)));
  const best = byRun((r) => Math.max(...Object.values(r.students)));
  const worst = byRun((r) => Math.min(...Object.values(r.students)));
  const base = byRun((r) => r.base);
  const tasks = runs[0]!.baseVerdicts.length;
  const perTask = Array.from({ length: tasks }, (_, i) => {
    const verdicts = runs.filter((r) => r.kept.includes(i)).flatMap((r) => Object.values(r.studentVerdicts).map((v) => (v[i] ? 1 : 0)));
    return verdicts.length === 0 ? null : { students: mean(verdicts), base: runs[0]!.baseVerdicts[i] ? 1 : 0 };
  }).filter((t): t is { students: number; base: number } => t !== null);
  const all = runs.flatMap((r) => Object.values(r.students).map((s) => s > r.base));
  const paired = (a: number[], what: string) => pairedPermutationTest(a, base, rng(what));
  let vsReference: TestResult | null = null;
  if (reference) {
    const seeds = runs.map((r) => r.seed).filter((s) => reference.some((q) => q.seed === s));
    const of = (list: RunScores[]) => seeds.map((s) => list.find((r) => r.seed === s)!).map((r) => mean(Object.values(r.students)));
    if (seeds.length > 0) vsReference = pairedPermutationTest(of(runs), of(reference), rng('reference'));
  }
  return {
    group,
    runs: runs.length,
    seeds: runs.map((r) => r.seed),
    base: mean(base),
    students: bootstrapMean(studentsMean, rng('students'))!,
    best: bootstrapMean(best, rng('best'))!,
    worst: bootstrapMean(worst, rng('worst'))!,
    vsBase: { students: paired(studentsMean, 'students-base'), best: paired(best, 'best-base'), worst: paired(worst, 'worst-base') },
    vsBaseOverTasks: pairedPermutationTest(perTask.map((t) => t.students), perTask.map((t) => t.base), rng('tasks')),
    aboveBase: { students: all.filter(Boolean).length, of: all.length, seedsAllAbove: runs.filter((r) => Object.values(r.students).every((s) => s > r.base)).length },
    vsReference,
  };
}

const f3 = (x: number) => x.toFixed(3);
const interval = (i: Interval) => `${f3(i.mean)} [${f3(i.low)}, ${f3(i.high)}]`;
const test = (t: TestResult) => `${t.difference >= 0 ? '+' : ''}${f3(t.difference)} (p ${t.p < 0.001 ? t.p.toExponential(1) : t.p.toFixed(3)})`;

const folders = runFolders(positionals);
const runs: RunScores[] = [];
for (const { dir, group } of folders) {
  process.stderr.write(`scoring ${dir}\n`);
  runs.push(await scoresOf(dir, group));
}
const groups = [...new Set(runs.map((r) => r.group))];
const referenceGroup = args.against ?? groups[0]!;
if (!groups.includes(referenceGroup)) throw new BenchUsageError(`--against ${referenceGroup}: no such group (the groups: ${groups.join(', ')})`);
const rows = groups.map((g) => summarise(g, runs.filter((r) => r.group === g), g === referenceGroup ? null : runs.filter((r) => r.group === referenceGroup)));

console.log(`\n| group | runs | base | students' mean | best student | worst student | mean - base (seeds) | mean - base (tasks) | best - base | worst - base | students above base | seeds with all above | mean vs ${referenceGroup} |`);
console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|');
for (const r of rows) {
  console.log(`| ${r.group} | ${r.runs} | ${f3(r.base)} | ${interval(r.students)} | ${interval(r.best)} | ${interval(r.worst)} | ${test(r.vsBase.students)} | ${test(r.vsBaseOverTasks)} | ${test(r.vsBase.best)} | ${test(r.vsBase.worst)} | ${r.aboveBase.students}/${r.aboveBase.of} | ${r.aboveBase.seedsAllAbove}/${r.runs} | ${r.vsReference ? test(r.vsReference) : '-'} |`);
}
mkdirSync(dirname(args.out!), { recursive: true });
writeFileSync(args.out!, JSON.stringify({ reference: referenceGroup, rows, runs: runs.map(({ studentVerdicts: _, baseVerdicts: __, ...r }) => r) }, null, 1) + '\n');
console.log(`\nwrote ${args.out}`);
