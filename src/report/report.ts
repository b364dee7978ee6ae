// Run reports: one self-contained report.html (uPlot and its stylesheet inlined, the data embedded; it opens
// without a network) with plots over steps, the matchmaking matrix and the lineage tree of a run, or several runs
// on the same axes (`populora compare`), and the summary table of final and mean metrics printed beside it. When
// compared runs repeat a scenario with other seeds, the comparison is by group (across-seeds.ts): mean curves
// with 95% bootstrap bands, the groups' headline values with intervals, and tests against the first group.

import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, dirname, join, resolve } from 'node:path';
import { checkpointProblems, checkpointSteps } from '../sim/checkpoints.js';
import { readJsonFile } from '../runtime/durable.js';
import type { StepMetrics } from '../sim/metrics.js';
import { groupBySeed, groupCurves, presentHeadlines, summarizeGroups, testGroups, type GroupSummary, type GroupTest, type RunGroup } from './across-seeds.js';
import { renderPage, type PageGroups, type PageRun } from './page.js';

export class ReportError extends Error {}

export interface RunData extends PageRun {
  dir: string;
  steps: StepMetrics[];
  scenario: Record<string, unknown>; // scenario.json
  group?: string; // the label its sweep gave its group (sweep.json beside the run folder)
}

/** A run folder's metrics, lineage and name, after verifying its checkpoints against their manifests. */
export function loadRun(dir: string): RunData {
  const metricsFile = join(dir, 'metrics.jsonl');
  if (!existsSync(join(dir, 'scenario.json'))) throw new ReportError(`${dir}: not a run folder (no scenario.json)`);
  if (!existsSync(metricsFile)) throw new ReportError(`${dir}: the run has no metrics.jsonl yet (no step finished)`);
  for (const step of checkpointSteps(dir)) {
    const [problem] = checkpointProblems(dir, step).problems;
    if (problem) throw new ReportError(`${problem}; populora replay ${dir} names every difference in the run folder`);
  }
  const steps = readFileSync(metricsFile, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line, i) => {
      try {
        return JSON.parse(line) as StepMetrics;
      } catch {
        throw new ReportError(`${metricsFile}: line ${i + 1} is not JSON (a run cut off mid-write? resume it with populora run --resume ${dir})`);
      }
    });
  const lineageFile = join(dir, 'lineage.json');
  const lineage = existsSync(lineageFile) ? readJsonFile<PageRun['lineage']>(lineageFile, `to get it back, run the scenario again (the same scenario gives the same run): populora run ${join(dir, 'scenario.json')} --out ANOTHER_FOLDER`) : [];
  const scenario = readJsonFile<Record<string, unknown> & { name?: string }>(join(dir, 'scenario.json'), 'each checkpoint\'s manifest.json records the scenario the run was started with (its "scenario" field)');
  return { name: scenario.name ?? basename(resolve(dir)), dir, steps, lineage, scenario, group: sweepGroupOf(dir) };
}

/** The group label of a sweep's run, from the sweep.json in the folder above it (if any). */
function sweepGroupOf(dir: string): string | undefined {
  const file = join(dirname(resolve(dir)), 'sweep.json');
  if (!existsSync(file)) return undefined;
  try {
    const sweep = JSON.parse(readFileSync(file, 'utf8')) as { runs?: Array<{ dir?: string; group?: string }> };
    return sweep.runs?.find((r) => r.dir === basename(resolve(dir)))?.group;
  } catch {
    return undefined; // a damaged sweep.json only costs the label; the groups are found from the scenarios
  }
}

const require = createRequire(import.meta.url);
const uplotFile = (file: string) => readFileSync(require.resolve(`uplot/dist/${file}`), 'utf8');

/** `<` escaped so that no text in the data can close the script element it is embedded in. */
const embedJson = (value: unknown) => JSON.stringify(value).replace(/</g, '\\u003c');
const escapeHtml = (text: string) => text.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);

const STYLE = `
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; }
#charts { display: flex; flex-wrap: wrap; gap: 16px; }
.chart { border: 1px solid #ddd; border-radius: 6px; padding: 8px 12px; }
.chart h3 { margin: 4px 0 8px; font-size: 15px; }
.note, .empty { color: #666; font-size: 12px; margin: 4px 0; }
table.matrix { border-collapse: collapse; font-size: 12px; }
table.matrix td, table.matrix th { border: 1px solid #ccc; padding: 3px 6px; text-align: right; }
ul.lineage { font-size: 13px; }
table.summary { border-collapse: collapse; } table.summary td, table.summary th { border: 1px solid #ccc; padding: 3px 8px; }`;

/** A self-contained page: uPlot and its stylesheet inlined, the title as its heading, then `body`. */
function uplotPage(title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>
<style>${uplotFile('uPlot.min.css')}${STYLE}</style>
<script>${uplotFile('uPlot.iife.min.js')}</script>
</head><body>
<h1>${escapeHtml(title)}</h1>
${body}
</body></html>
`;
}

const htmlTable = (rows: ReadonlyArray<Record<string, string | number>>, className = 'summary') =>
  rows.length === 0 ? '' : `<table class="${className}"><tr>${Object.keys(rows[0]!).map((k) => `<th>${escapeHtml(k)}</th>`).join('')}</tr>${rows.map((row) => `<tr>${Object.values(row).map((v) => `<td>${escapeHtml(String(v))}</td>`).join('')}</tr>`).join('')}</table>`;

/** The runs' groups across seeds, when some scenario was run with more than one seed (else null). */
export function seedGroups(runs: readonly RunData[]): RunGroup<RunData>[] | null {
  if (runs.length < 2) return null;
  const groups = groupBySeed(runs);
  return groups.some((g) => g.runs.length >= 2) ? groups : null;
}

/** Writes the report of one run or, with several, the comparison; returns the file written. */
export function writeReport(runs: readonly RunData[], outFile: string): string {
  writeFileSync(outFile, reportPage(runs));
  return outFile;
}

/** The report of one run or, with several, the comparison, as one self-contained page (`populora serve` shows it too). */
export function reportPage(runs: readonly RunData[]): string {
  if (runs.length === 0) throw new ReportError('a report needs at least one run folder');
  const groups = seedGroups(runs);
  const title = runs.length === 1 ? `populora run ${runs[0]!.name}` : groups ? `populora: ${groups.map((g) => g.label).join(' vs ')}` : `populora: ${runs.map((r) => r.name).join(' vs ')}`;
  const data: PageRun[] = runs.map(({ name, steps, lineage }) => ({ name, steps, lineage }));
  const grouped = groups ? groupedPage(groups) : null;
  const tables = grouped ? `${grouped.html}<details><summary>every run</summary>${htmlTable(summaryRows(runs))}</details>` : htmlTable(summaryRows(runs));
  const body = `<p class="note">${runs.map((r) => `${escapeHtml(r.name)}: ${escapeHtml(r.dir)}, ${r.steps.length} steps`).join('; ')}</p>
${tables}
<div id="charts"></div>
<div id="tables"></div>
<script id="runs" type="application/json">${embedJson(data)}</script>
<script id="groups" type="application/json">${embedJson(grouped?.data ?? null)}</script>
<script>(${renderPage.toString()})(JSON.parse(document.getElementById('runs').textContent), JSON.parse(document.getElementById('groups').textContent));</script>`;
  return uplotPage(title, body);
}

/** The grouped comparison: its tables (HTML) and the curves the page plots. */
function groupedPage(groups: RunGroup<RunData>[]): { html: string; data: PageGroups } {
  const runs = groups.flatMap((g) => g.runs);
  const headlines = presentHeadlines(runs);
  const longest = runs.reduce((a, b) => (b.steps.length > a.steps.length ? b : a));
  const steps = longest.steps.map((m) => m.step);
  const window = steps.length >= 30 ? Math.round(steps.length / 10) : 1;
  const curves = groupCurves(groups, headlines, steps, window);
  const html = `<h2>Groups across seeds</h2>
<p class="note">Runs whose scenarios differ only in their seed form a group. Each value is the mean over the group's runs of one value per run (${headlines.map((h) => `${h.title.toLowerCase()}: ${h.summary}`).join('; ')}), with its 95% percentile-bootstrap interval over the runs.</p>
${htmlTable(groupSummaryRows(summarizeGroups(groups, headlines), headlines), 'summary groups')}
<h2>Against ${escapeHtml(groups[0]!.label)}</h2>
<p class="note">Two-sided permutation tests of the difference in means (paired by seed, a sign-flip test, when both groups ran the same seeds; exact when every arrangement could be counted); effect size: Cohen's d (paired: the mean difference over its standard deviation).</p>
${htmlTable(groupTestRows(testGroups(groups, headlines)), 'summary tests')}`;
  const data: PageGroups = { steps, window, headlines: headlines.map((h) => ({ key: h.key, title: h.title, sparse: h.sparse === true })), groups: groups.map((g, i) => ({ label: g.label, runs: g.runs.length, curves: curves[i]! })) };
  return { html, data };
}

const interval = (v: { mean: number; low: number; high: number } | null, digits: number) => (v === null ? '-' : `${v.mean.toFixed(digits)} [${v.low.toFixed(digits)}, ${v.high.toFixed(digits)}]`);
const digitsOf = (key: string) => (['coverage', 'distinctExpressions', 'taskSize'].includes(key) ? 1 : 3);

/** The groups' table: runs, seeds, and each headline's mean [95% interval]. */
export function groupSummaryRows(summaries: readonly GroupSummary[], headlines: ReadonlyArray<{ key: string; title: string }>): Array<Record<string, string | number>> {
  return summaries.map((s) => ({ group: s.label, runs: s.runs, seeds: s.seeds.join(' '), ...Object.fromEntries(headlines.map((h) => [h.title, interval(s.values[h.key] ?? null, digitsOf(h.key))])) }));
}

/** The tests' table: group, baseline, metric, difference, p-value, effect size. */
export function groupTestRows(tests: readonly GroupTest[]): Array<Record<string, string | number>> {
  return tests.map((t) => ({
    group: t.label,
    'vs': t.baseline,
    metric: t.metric,
    difference: t.result.difference.toFixed(3),
    p: `${t.result.p < 0.001 ? t.result.p.toExponential(1) : t.result.p.toFixed(3)}${t.result.exact ? '' : ' (sampled)'}`,
    'effect size': t.result.effectSize === null ? '-' : t.result.effectSize.toFixed(2),
    test: t.result.kind === 'paired' ? 'paired sign-flip' : 'permutation',
  }));
}

const meanOf = (values: Array<number | null | undefined>) => {
  const present = values.filter((v): v is number => typeof v === 'number' && Number.isFinite(v));
  return present.length === 0 ? null : present.reduce((a, b) => a + b, 0) / present.length;
};
const show = (v: number | null | undefined, digits = 2) => (v === null || v === undefined ? '-' : v.toFixed(digits));

/** Per run: final and mean of the headline metrics (the table `populora compare` prints, and the report shows). */
export function summaryRows(runs: readonly RunData[]): Array<Record<string, string | number>> {
  return runs.map((run) => {
    const last = run.steps.at(-1);
    const mean = (get: (m: StepMetrics) => number | null) => show(meanOf(run.steps.map(get)));
    return {
      run: run.name,
      steps: run.steps.length,
      'solve rate (final / mean)': `${show(last?.solveRate)} / ${mean((m) => m.solveRate)}`,
      'teacher reward (final / mean)': `${show(last?.teacherReward)} / ${mean((m) => m.teacherReward)}`,
      'validity (final / mean)': `${show(last?.validity)} / ${mean((m) => m.validity)}`,
      'task size (final / mean)': `${show(last?.taskSize, 1)} / ${show(meanOf(run.steps.map((m) => m.taskSize)), 1)}`,
      'coverage (final)': last?.coverage ?? 0,
      replacements: run.lineage.length,
    };
  });
}

/** A pretraining run's loss curve and its held-out scores (each a share in [0, 1], by name) as one self-contained page. */
export function writeLossCurve(file: string, title: string, losses: readonly number[], evaluations: ReadonlyArray<{ step: number; scores: Record<string, number> }>): void {
  const steps = losses.map((_, i) => i + 1);
  const names = [...new Set(evaluations.flatMap((e) => Object.keys(e.scores)))];
  const scores = names.map((name) => steps.map((step) => evaluations.find((e) => e.step === step)?.scores[name] ?? null));
  const colors = ['#d62728', '#2ca02c', '#ff7f0e', '#9467bd'];
  const series = names.map((name, i) => ({ label: `held-out ${name}`, stroke: colors[i % colors.length], scale: 'score', spanGaps: true, points: { show: true } }));
  const data = embedJson([steps, losses, ...scores]);
  const body = `<div id="chart" class="chart"></div>
<script>
const data = ${data};
new uPlot({ width: 800, height: 360, scales: { x: { time: false }, score: { range: [0, 1] } },
  axes: [{ label: 'step' }, { label: 'cross-entropy (nats/token)' }, { side: 1, scale: 'score', label: 'held-out score', grid: { show: false } }],
  series: [{ label: 'step' }, { label: 'training loss', stroke: '#1f77b4', width: 1 }, ...${embedJson(series)}] },
  data, document.getElementById('chart'));
</script>`;
  writeFileSync(file, uplotPage(title, body));
}
