// Runs across seeds (`populora compare`): runs whose scenarios differ only in `seed` (and `name`) form a group;
// per group, the mean curve of each headline metric over steps with a 95% bootstrap band across seeds, a summary
// table of per-run headline values (their mean and 95% interval over the group's seeds), and a permutation test
// of each group against the first (paired by seed when both groups ran the same seeds) with its effect size.
// The draws come from streams seeded by COMPARE_SEED and named by metric and group: a report does not change
// when it is made again.

import { canonical } from '../runtime/event-log.js';
import type { StepMetrics } from '../sim/metrics.js';
import { Streams } from '../runtime/streams.js';
import { bootstrapMean, pairedPermutationTest, permutationTest, type Interval, type TestResult } from './stats.js';

export const COMPARE_SEED = 20_250_601;

/** What grouping needs of a run: its scenario (scenario.json), metrics, and the label a sweep gave its group. */
export interface SeededRun {
  name: string;
  steps: StepMetrics[];
  scenario: Record<string, unknown>;
  group?: string; // from the sweep's sweep.json, when the run is one of a sweep's
}

export interface RunGroup<R extends SeededRun = SeededRun> {
  label: string;
  runs: R[];
}

const seedOf = (run: SeededRun) => run.scenario.seed as number;
const withoutSeed = (scenario: Record<string, unknown>) => {
  const { seed: _, name: __, ...rest } = scenario;
  return JSON.stringify(canonical(rest));
};

/** Groups runs whose scenarios differ in nothing but seed and name; in the order first met. */
export function groupBySeed<R extends SeededRun>(runs: readonly R[]): RunGroup<R>[] {
  const groups = new Map<string, R[]>();
  for (const run of runs) {
    const key = withoutSeed(run.scenario);
    groups.set(key, [...(groups.get(key) ?? []), run]);
  }
  const lists = [...groups.values()];
  const labels = differingFields(lists.map((list) => list[0]!.scenario));
  return lists.map((list, i) => {
    const sweepLabels = new Set(list.map((r) => r.group));
    const fromSweep = sweepLabels.size === 1 ? list[0]!.group : undefined;
    return { label: fromSweep ?? (labels[i] || list[0]!.name), runs: list };
  });
}

/** Per scenario: "field=value, ..." over the fields (seed and name aside) in which the scenarios differ. */
function differingFields(scenarios: ReadonlyArray<Record<string, unknown>>): string[] {
  const flat = scenarios.map((s) => flatten(JSON.parse(withoutSeed(s)) as unknown));
  const fields = [...new Set(flat.flatMap((f) => [...f.keys()]))].sort();
  const differing = fields.filter((field) => new Set(flat.map((f) => f.get(field) ?? '(absent)')).size > 1);
  return flat.map((f) => differing.map((field) => `${field}=${f.get(field) ?? '(absent)'}`).join(', '));
}

function flatten(value: unknown, path = '', into = new Map<string, string>()): Map<string, string> {
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    for (const [key, inner] of Object.entries(value)) flatten(inner, path ? `${path}.${key}` : key, into);
  } else into.set(path, typeof value === 'string' ? value : JSON.stringify(value));
  return into;
}

const finite = (v: number | null | undefined): v is number => typeof v === 'number' && Number.isFinite(v);
const meanOver = (steps: StepMetrics[], get: (m: StepMetrics) => number | null | undefined) => {
  const values = steps.map(get).filter(finite);
  return values.length === 0 ? null : values.reduce((a, b) => a + b, 0) / values.length;
};
const lastOf = (steps: StepMetrics[], get: (m: StepMetrics) => number | null | undefined) => steps.map(get).filter(finite).at(-1) ?? null;

/** A headline metric: its per-step value (for curves) and its one value per run (for the table and tests). */
export interface Headline {
  key: string;
  title: string;
  perStep: (m: StepMetrics) => number | null | undefined;
  perRun: (steps: StepMetrics[]) => number | null;
  summary: string; // how perRun summarises the steps
  sparse?: boolean; // only some steps have a value (evaluations): its curve is not smoothed
}

const averaged = (key: string, title: string, perStep: Headline['perStep']): Headline => ({ key, title, perStep, perRun: (steps) => meanOver(steps, perStep), summary: 'mean over steps' });
const final = (key: string, title: string, perStep: Headline['perStep'], sparse = false): Headline => ({ key, title, perStep, perRun: (steps) => lastOf(steps, perStep), summary: 'at the last step', sparse });

export const HEADLINES: Headline[] = [
  averaged('solveRate', 'Student solve rate', (m) => m.solveRate),
  averaged('teacherReward', 'Teacher reward', (m) => m.teacherReward),
  averaged('validity', 'Task validity', (m) => m.validity),
  averaged('taskSize', 'Task size (AST nodes)', (m) => m.taskSize),
  averaged('extremeSolveRateShare', 'Tasks solved by all or none', (m) => m.extremeSolveRateShare),
  final('coverage', 'Coverage (bins seen)', (m) => m.coverage),
  final('distinctExpressions', 'Distinct expressions seen', (m) => m.distinctExpressions),
  averaged('taskEntropy', 'Task entropy over bins (bits)', (m) => m.taskEntropy),
  final('heldOut', 'Held-out solve rate (students, greedy)', (m) => m.heldOut?.solveRate, true),
  final('heldOutBest', 'Held-out solve rate (best student)', (m) => m.heldOut?.best, true),
  final('heldOutAllTasks', 'Held-out solve rate, whole set (students)', (m) => m.heldOut?.solveRateAllTasks, true),
];

/** Headlines that some run has a value of (held-out scores only where runs were evaluated). */
export const presentHeadlines = (runs: readonly SeededRun[]) => HEADLINES.filter((h) => runs.some((r) => h.perRun(r.steps) !== null));

export interface GroupSummary {
  label: string;
  runs: number;
  seeds: number[];
  values: Record<string, Interval | null>; // by headline key: mean over the group's runs and its 95% interval
}

export function summarizeGroups(groups: readonly RunGroup[], headlines: readonly Headline[]): GroupSummary[] {
  const streams = new Streams(COMPARE_SEED);
  return groups.map((group, g) => ({
    label: group.label,
    runs: group.runs.length,
    seeds: group.runs.map(seedOf),
    values: Object.fromEntries(headlines.map((h) => [h.key, bootstrapMean(group.runs.map((r) => h.perRun(r.steps)).filter(finite), streams.stream('summary', h.key, g))])),
  }));
}

export interface GroupTest {
  label: string; // the group tested against the baseline
  baseline: string;
  metric: string;
  result: TestResult;
}

/**
 * Each group against the first, per headline. Paired by seed (a sign-flip test) when both groups ran the same
 * seeds, each once; otherwise a two-sample permutation test.
 */
export function testGroups(groups: readonly RunGroup[], headlines: readonly Headline[]): GroupTest[] {
  const streams = new Streams(COMPARE_SEED);
  const [baseline, ...others] = groups;
  if (!baseline) return [];
  return others.flatMap((group, g) =>
    headlines.flatMap((h): GroupTest[] => {
      const rng = streams.stream('test', h.key, g);
      const pairs = pairedBySeed(baseline, group, h);
      const result = pairs
        ? pairedPermutationTest(pairs.map((p) => p[1]), pairs.map((p) => p[0]), rng)
        : (() => {
            const [a, b] = [group.runs.map((r) => h.perRun(r.steps)).filter(finite), baseline.runs.map((r) => h.perRun(r.steps)).filter(finite)];
            return a.length > 0 && b.length > 0 ? permutationTest(a, b, rng) : null;
          })();
      return result ? [{ label: group.label, baseline: baseline.label, metric: h.title, result }] : [];
    }),
  );
}

/** [baseline value, group value] per seed, when both groups have the same seeds once each, with values. */
function pairedBySeed(baseline: RunGroup, group: RunGroup, h: Headline): Array<[number, number]> | null {
  const bySeed = (g: RunGroup) => new Map(g.runs.map((r) => [seedOf(r), h.perRun(r.steps)]));
  const [a, b] = [bySeed(baseline), bySeed(group)];
  if (a.size !== baseline.runs.length || b.size !== group.runs.length || a.size !== b.size || a.size < 2) return null;
  const pairs: Array<[number, number]> = [];
  for (const [seed, value] of a) {
    const other = b.get(seed);
    if (other === undefined || !finite(value) || !finite(other)) return null;
    pairs.push([value, other]);
  }
  return pairs;
}

/** A group's curve of one metric: per step, the mean over its runs and the 95% bootstrap band. */
export interface GroupCurve {
  mean: Array<number | null>;
  low: Array<number | null>;
  high: Array<number | null>;
}

/**
 * Per group and headline, over `steps`: each run's values smoothed by a trailing mean of `window` steps, then
 * their mean across the group's runs and its band (1000 resamples a point).
 */
export function groupCurves(groups: readonly RunGroup[], headlines: readonly Headline[], steps: readonly number[], window: number): Array<Record<string, GroupCurve>> {
  const streams = new Streams(COMPARE_SEED);
  return groups.map((group, g) =>
    Object.fromEntries(
      headlines.map((h) => {
        const smoothed = group.runs.map((run) => trailingMean(steps.map((step) => run.steps.find((m) => m.step === step)).map((m) => (m ? h.perStep(m) : null)), h.sparse ? 1 : window));
        const curve: GroupCurve = { mean: [], low: [], high: [] };
        steps.forEach((_, i) => {
          const interval = bootstrapMean(smoothed.map((values) => values[i]).filter(finite), streams.stream('curve', h.key, g, i), { resamples: 1000 });
          curve.mean.push(interval?.mean ?? null);
          curve.low.push(interval?.low ?? null);
          curve.high.push(interval?.high ?? null);
        });
        return [h.key, curve];
      }),
    ),
  );
}

export function trailingMean(values: ReadonlyArray<number | null | undefined>, window: number): Array<number | null> {
  return values.map((_, i) => {
    const present = values.slice(Math.max(0, i - window + 1), i + 1).filter(finite);
    return present.length === 0 ? null : present.reduce((a, b) => a + b, 0) / present.length;
  });
}
