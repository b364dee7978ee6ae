// Run reports: one self-contained report.html (uPlot and its stylesheet inlined, the data embedded; it opens
// without a network) with plots over steps, the matchmaking matrix and the lineage tree of a run, or several runs
// on the same axes (`populora compare`), and the summary table of final and mean metrics printed beside it.

import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, join, resolve } from 'node:path';
import { checkpointProblems, checkpointSteps } from '../runtime/checkpoints.js';
import { readJsonFile } from '../runtime/durable.js';
import type { StepMetrics } from '../runtime/metrics.js';
import { renderPage, type PageRun } from './page.js';

export class ReportError extends Error {}

export interface RunData extends PageRun {
  dir: string;
  steps: StepMetrics[];
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
  const scenario = readJsonFile<{ name?: string }>(join(dir, 'scenario.json'), 'each checkpoint\'s manifest.json records the scenario the run was started with (its "scenario" field)');
  return { name: scenario.name ?? basename(resolve(dir)), dir, steps, lineage };
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

/** Writes the report of one run or, with several, the comparison; returns the file written. */
export function writeReport(runs: readonly RunData[], outFile: string): string {
  if (runs.length === 0) throw new ReportError('a report needs at least one run folder');
  const title = runs.length === 1 ? `populora run ${runs[0]!.name}` : `populora: ${runs.map((r) => r.name).join(' vs ')}`;
  const summary = summaryRows(runs);
  const summaryHtml = `<table class="summary"><tr>${Object.keys(summary[0]!).map((k) => `<th>${escapeHtml(k)}</th>`).join('')}</tr>${summary.map((row) => `<tr>${Object.values(row).map((v) => `<td>${escapeHtml(String(v))}</td>`).join('')}</tr>`).join('')}</table>`;
  const data: PageRun[] = runs.map(({ name, steps, lineage }) => ({ name, steps, lineage }));
  const body = `<p class="note">${runs.map((r) => `${escapeHtml(r.name)}: ${escapeHtml(r.dir)}, ${r.steps.length} steps`).join('; ')}</p>
${summaryHtml}
<div id="charts"></div>
<div id="tables"></div>
<script id="runs" type="application/json">${embedJson(data)}</script>
<script>(${renderPage.toString()})(JSON.parse(document.getElementById('runs').textContent));</script>`;
  writeFileSync(outFile, uplotPage(title, body));
  return outFile;
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
