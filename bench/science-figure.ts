// The figures of docs/science.md: line charts over steps, one panel per quantity, drawn as SVG from the JSON that
// bench/science-diagnose.ts and bench/science-probe.ts write (their means over seeds), then rendered to PNG by
// headless Chromium (--png; the SVG alone without it). Panels:
//   diagnose JSON: per group, the students' held-out score (validation part) and their answer log-likelihood
//                  (unmasked, and under the grammar where there is one) at each checkpoint, the base model's as a line
//   probe JSON:    per probe, the held-out score and answer log-likelihood of the oracle-taught student
//
//   node dist/bench/science-figure.js --diagnose FILE.json [--probe A.json,B.json,...] --out docs/science/x.svg [--png]

import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { benchArgs, BenchUsageError } from './args.js';

const args = benchArgs(import.meta.url, {
  options: {
    diagnose: { type: 'string' },
    probe: { type: 'string' },
    out: { type: 'string' },
    png: { type: 'boolean', default: false },
    title: { type: 'string', default: '' },
  },
});
if (!args.out || (!args.diagnose && !args.probe)) throw new BenchUsageError('give --out FILE.svg and --diagnose FILE.json and/or --probe FILES');

interface Series {
  name: string;
  points: Array<[number, number]>;
}
interface Panel {
  title: string;
  series: Series[];
  base?: number; // a horizontal reference line
}

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf'];
const escape = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** One panel: axes with 5 ticks each, a polyline per series, the base as a dashed line, a legend. */
function panelSvg(panel: Panel, x0: number, y0: number, width: number, height: number): string {
  const all = panel.series.flatMap((s) => s.points);
  const ys = [...all.map((p) => p[1]), ...(panel.base === undefined ? [] : [panel.base])];
  const [xMin, xMax] = [Math.min(...all.map((p) => p[0])), Math.max(...all.map((p) => p[0]))];
  let [yMin, yMax] = [Math.min(...ys), Math.max(...ys)];
  if (yMax - yMin < 1e-9) [yMin, yMax] = [yMin - 1, yMax + 1];
  const pad = { left: 60, right: 10, top: 28, bottom: 34 };
  const [w, h] = [width - pad.left - pad.right, height - pad.top - pad.bottom];
  const sx = (x: number) => x0 + pad.left + ((x - xMin) / Math.max(xMax - xMin, 1e-9)) * w;
  const sy = (y: number) => y0 + pad.top + (1 - (y - yMin) / (yMax - yMin)) * h;
  const parts = [`<text x="${x0 + pad.left}" y="${y0 + 18}" font-size="14" font-weight="bold">${escape(panel.title)}</text>`];
  parts.push(`<rect x="${x0 + pad.left}" y="${y0 + pad.top}" width="${w}" height="${h}" fill="none" stroke="#999"/>`);
  for (let k = 0; k <= 4; k++) {
    const [xv, yv] = [xMin + ((xMax - xMin) * k) / 4, yMin + ((yMax - yMin) * k) / 4];
    parts.push(`<text x="${sx(xv)}" y="${y0 + pad.top + h + 16}" font-size="11" text-anchor="middle">${Math.round(xv)}</text>`);
    parts.push(`<text x="${x0 + pad.left - 6}" y="${sy(yv) + 4}" font-size="11" text-anchor="end">${yv.toFixed(Math.abs(yMax - yMin) < 1 ? 2 : 1)}</text>`);
  }
  parts.push(`<text x="${x0 + pad.left + w / 2}" y="${y0 + height - 2}" font-size="11" text-anchor="middle">step</text>`);
  if (panel.base !== undefined) parts.push(`<line x1="${sx(xMin)}" x2="${sx(xMax)}" y1="${sy(panel.base)}" y2="${sy(panel.base)}" stroke="#000" stroke-dasharray="5,4"/><text x="${sx(xMax) - 4}" y="${sy(panel.base) - 4}" font-size="11" text-anchor="end">base model</text>`);
  panel.series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length]!;
    parts.push(`<polyline fill="none" stroke="${color}" stroke-width="2" points="${s.points.map(([x, y]) => `${sx(x).toFixed(1)},${sy(y).toFixed(1)}`).join(' ')}"/>`);
    parts.push(`<text x="${x0 + pad.left + 8}" y="${y0 + pad.top + 16 + 14 * i}" font-size="11" fill="${color}">${escape(s.name)}</text>`);
  });
  return parts.join('\n');
}

const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;

interface DiagnoseRun {
  group: string;
  baseScore: number | null;
  evaluations: Array<{ step: number; members: Record<string, Record<string, number>> }>;
  likelihood: Array<{ step: number; members: Record<string, { logLikelihood: number; maskedLogLikelihood?: number }> }>;
}

/** Per group, the mean over its runs of each step's value (steps every run has). */
function groupSeries(runs: DiagnoseRun[], values: (run: DiagnoseRun) => Map<number, number>): Series[] {
  const groups = [...new Set(runs.map((r) => r.group))];
  return groups.map((group) => {
    const maps = runs.filter((r) => r.group === group).map(values);
    const steps = [...maps[0]!.keys()].filter((s) => maps.every((m) => m.has(s))).sort((a, b) => a - b);
    return { name: basename(group), points: steps.map((s): [number, number] => [s, mean(maps.map((m) => m.get(s)!))]) };
  });
}

function diagnosePanels(file: string): Panel[] {
  const { runs } = JSON.parse(readFileSync(file, 'utf8')) as { runs: DiagnoseRun[] };
  const base = runs[0]!.likelihood[0]?.members.base;
  const studentsMean = (members: Record<string, number>) => mean(Object.entries(members).filter(([id]) => id.startsWith('student')).map(([, v]) => v));
  const score = (r: DiagnoseRun) => new Map(r.evaluations.map((e) => [e.step + 1, studentsMean(Object.fromEntries(Object.entries(e.members).map(([id, byType]) => [id, mean(Object.values(byType))])))]));
  const likelihood = (key: 'logLikelihood' | 'maskedLogLikelihood') => (r: DiagnoseRun) => new Map(r.likelihood.filter((l) => l.step > 0).map((l) => [l.step, studentsMean(Object.fromEntries(Object.entries(l.members).map(([id, v]) => [id, v[key] ?? NaN])))]));
  const panels: Panel[] = [
    { title: 'held-out score (validation part), students\' mean', series: groupSeries(runs, score), ...(runs[0]!.baseScore === null ? {} : { base: runs[0]!.baseScore }) },
    { title: 'log p(right answer, EOS | prompt), nats, whole vocabulary', series: groupSeries(runs, likelihood('logLikelihood')), ...(base ? { base: base.logLikelihood } : {}) },
  ];
  if (base?.maskedLogLikelihood !== undefined) panels.push({ title: 'the same, renormalised over the grammar\'s tokens', series: groupSeries(runs, likelihood('maskedLogLikelihood')), base: base.maskedLogLikelihood });
  return panels;
}

function probePanels(files: string[]): Panel[] {
  const probes = files.map((file) => ({ name: basename(file, '.json').replace(/^science-probe-/, ''), ...(JSON.parse(readFileSync(file, 'utf8')) as { rows: Array<{ step: number; score: number; logLikelihood: number }> }) }));
  const base = probes[0]!.rows[0]!;
  return [
    { title: 'oracle-taught student: held-out score', series: probes.map((p) => ({ name: p.name, points: p.rows.map((r): [number, number] => [r.step, r.score]) })), base: base.score },
    { title: 'oracle-taught student: answer log-likelihood (nats)', series: probes.map((p) => ({ name: p.name, points: p.rows.map((r): [number, number] => [r.step, r.logLikelihood]) })), base: base.logLikelihood },
  ];
}

const panels = [...(args.diagnose ? diagnosePanels(args.diagnose) : []), ...(args.probe ? probePanels(args.probe.split(',')) : [])];
const [panelWidth, panelHeight, columns] = [520, 300, 2];
const rows = Math.ceil(panels.length / columns);
const titleHeight = args.title ? 30 : 0;
const [width, height] = [panelWidth * columns, panelHeight * rows + titleHeight];
const svg = [
  `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif">`,
  `<rect width="100%" height="100%" fill="#fff"/>`,
  ...(args.title ? [`<text x="10" y="20" font-size="16" font-weight="bold">${escape(args.title)}</text>`] : []),
  ...panels.map((p, i) => panelSvg(p, (i % columns) * panelWidth, titleHeight + Math.floor(i / columns) * panelHeight, panelWidth, panelHeight)),
  '</svg>',
].join('\n');
mkdirSync(dirname(args.out), { recursive: true });
writeFileSync(args.out, svg + '\n');
console.log(`wrote ${args.out} (${panels.length} panels)`);
if (args.png) {
  const browser = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find(existsSync);
  if (!browser) throw new BenchUsageError('--png needs Chromium (/usr/bin/chromium)');
  const png = args.out.replace(/\.svg$/, '') + '.png';
  execFileSync(browser, ['--headless', '--no-sandbox', '--disable-gpu', '--hide-scrollbars', `--window-size=${width},${height}`, `--screenshot=${resolve(png)}`, `file://${resolve(args.out)}`], { stdio: 'ignore', timeout: 60_000 });
  console.log(`wrote ${png}`);
}
