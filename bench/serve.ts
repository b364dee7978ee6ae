// What the dashboard (populora serve) costs on a large run folder: indexing its event log once (cold) and a step at
// a time as a run writes it (what every poll does), the JSON a page fetches, and in headless Chromium (Debian's,
// through playwright-core) the run page's load until the sample browser is drawn and until the report's plots are,
// a step switch (a step never shown, and one shown before), a member filter, and the runs list's load. Beside
// them, as a baseline, the run's static report.html (src/report/: the same plots) opened in the same browser.
// Each figure is the median (and the slowest) of --repeats; the load average is recorded with them.
// Without --run it first makes the folder: a 100-step run of 16 members (2 sub-populations of 4 teachers and 4
// students) of the arith toy on the CPU backend (scenarios/quickstart.yaml's settings otherwise; minutes).
// Prints a table; writes JSON.
//
//   node dist/bench/serve.js [--run DIR] [--repeats 5] [--dir DIR] [--out bench/results/serve.json]

import { spawnSync } from 'node:child_process';
import { appendFileSync, existsSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { chromium, type Page } from 'playwright-core';
import { benchArgs, BenchUsageError } from './args.js';
import { jsonText } from '../src/runtime/durable.js';
import { LogTail } from '../src/serve/log-tail.js';
import { RunFolder } from '../src/serve/run-folder.js';
import { SampleIndex } from '../src/serve/samples.js';
import { startDashboard } from '../src/serve/server.js';

const args = benchArgs(import.meta.url, { options: { run: { type: 'string' }, repeats: { type: 'string', default: '5' }, dir: { type: 'string', default: tmpdir() }, out: { type: 'string', default: 'bench/results/serve.json' } } });
const repeats = Number(args.repeats);
if (!Number.isInteger(repeats) || repeats < 1) throw new BenchUsageError(`--repeats must be a whole number of at least 1, got ${args.repeats}`);
const cli = join(dirname(new URL(import.meta.url).pathname), '..', 'src', 'cli', 'main.js');
const chromiumPath = ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'].find(existsSync);
if (!chromiumPath) throw new BenchUsageError('no Chromium at /usr/bin/chromium (apt-get install chromium)');

/** The run folder: the one given, or a 100-step 16-member arith run made now. */
function runFolder(): string {
  if (args.run) {
    if (!existsSync(join(args.run, 'events.msgpack'))) throw new BenchUsageError(`--run ${args.run}: not a run folder (no events.msgpack)`);
    return resolve(args.run);
  }
  const root = mkdtempSync(join(args.dir, 'populora-bench-serve-'));
  const quickstart = readFileSync(join(dirname(cli), '..', '..', '..', 'scenarios', 'quickstart.yaml'), 'utf8');
  const scenario = quickstart.replace('name: quickstart', 'name: serve-bench-16').replace('steps: 12', 'steps: 100').replace('backend: auto', 'backend: cpu').replace('teachers: 2', 'teachers: 4').replace('students: 2', 'students: 4').replace('checkpointEvery: 4', 'checkpointEvery: 25');
  writeFileSync(join(root, 'serve-bench-16.yaml'), scenario);
  console.log(`making the run folder (100 steps, 16 members, CPU backend) in ${root}/run ...`);
  const made = spawnSync(process.execPath, [cli, 'run', join(root, 'serve-bench-16.yaml'), '--out', join(root, 'run')], { stdio: 'inherit' });
  if (made.status !== 0) throw new Error('the run failed');
  return join(root, 'run');
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const stats = (xs: number[]) => ({ medianMs: median(xs), maxMs: Math.max(...xs), samples: xs.length });
const time = (f: () => void) => {
  const start = performance.now();
  f();
  return performance.now() - start;
};

const dir = runFolder();
const loadAverageAtStart = loadavg();
const scenario = JSON.parse(readFileSync(join(dir, 'scenario.json'), 'utf8')) as { steps: number; population: { subpopulations: number; teachers: number; students: number } };
const members = scenario.population.subpopulations * (scenario.population.teachers + scenario.population.students);
const logBytes = statSync(join(dir, 'events.msgpack')).size;

// The index: once over the whole log (a page's first visit), and a step at a time as a growing log is polled.
const cold: number[] = [];
let index: SampleIndex | null = null;
for (let i = 0; i < repeats; i++) {
  const folder = new RunFolder('bench', dir, dir, dir, () => 0);
  folder.refresh();
  cold.push(time(() => (index = folder.samples())));
}
const events = index!.events;
const answers = index!.stepNumbers.reduce((n, s) => n + index!.step(s)!.answers.length, 0);
const proposals = index!.stepNumbers.reduce((n, s) => n + index!.step(s)!.proposals.length, 0);
const growing = join(mkdtempSync(join(args.dir, 'populora-bench-serve-log-')), 'events.msgpack');
writeFileSync(growing, '');
const tail = new LogTail(growing);
const incremental = new SampleIndex(4);
const bytes = readFileSync(join(dir, 'events.msgpack'));
const perStep: number[] = [];
const steps = new LogTail(join(dir, 'events.msgpack'));
const ends: number[] = []; // byte offset after each step's last record
for (let read = steps.read(); read.events.length > 0; read = steps.read()) for (const e of read.events) ends[e.step] = e.offset + e.bytes;
let from = 0;
for (const end of ends) {
  appendFileSync(growing, bytes.subarray(from, end));
  from = end;
  perStep.push(time(() => tail.read().events.forEach((e) => incremental.add(e))));
}

// The server and the browser.
const dashboard = await startDashboard({ dirs: [dir], port: 0, host: '127.0.0.1', pollMs: 1000 });
const id = basename(dir); // a run folder named on its own is served under its name
const base = `http://127.0.0.1:${dashboard.port}`;
const browser = await chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
const lastStep = index!.lastStep;
const api = { run: [] as number[], step: [] as number[], runKiB: 0, stepKiB: 0 };
for (let i = 0; i < repeats; i++) {
  let start = performance.now();
  const run = await fetch(`${base}/api/run/${encodeURIComponent(id)}`, { headers: { 'Accept-Encoding': 'gzip' } });
  const runBody = await run.arrayBuffer();
  api.run.push(performance.now() - start);
  start = performance.now();
  const step = await fetch(`${base}/api/run/${encodeURIComponent(id)}/step/${(i * 7) % (lastStep + 1)}`);
  const stepBody = await step.arrayBuffer();
  api.step.push(performance.now() - start);
  [api.runKiB, api.stepKiB] = [runBody.byteLength / 1024, stepBody.byteLength / 1024];
}

async function fresh(): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  return context.newPage();
}
/** ms from navigation start until `selector` matches (the page's own clock: what a user waits). */
async function loadUntil(page: Page, url: string, selector: string): Promise<number> {
  await page.goto(url);
  await page.waitForSelector(selector, { timeout: 120_000 });
  return page.evaluate(() => performance.now());
}
/** ms from a click on `button` until the body says step `step` is drawn. */
const switchTo = (page: Page, button: string, step: number) =>
  page.evaluate(
    ([button, step]) =>
      new Promise<number>((done) => {
        const start = performance.now();
        const check = () => (document.body.dataset.shownStep === String(step) ? done(performance.now() - start) : requestAnimationFrame(check));
        document.getElementById(button as string)!.click();
        check();
      }),
    [button, step] as const,
  );

const browserTimes = { samples: [] as number[], plots: [] as number[], newStep: [] as number[], seenStep: [] as number[], member: [] as number[], list: [] as number[], report: [] as number[] };
const reportFile = join(dir, 'report.html');
for (let i = 0; i < repeats; i++) {
  let page = await fresh();
  browserTimes.samples.push(await loadUntil(page, `${base}/run/${encodeURIComponent(id)}`, `body[data-shown-step="${lastStep}"]`));
  await page.waitForSelector('body[data-charts]', { timeout: 120_000 });
  browserTimes.plots.push(await page.evaluate(() => performance.now()));
  await page.uncheck('#follow');
  for (let k = 1; k <= 5; k++) browserTimes.newStep.push(await switchTo(page, 'prev', lastStep - k)); // never shown in this page
  for (let k = 4; k >= 0; k--) browserTimes.seenStep.push(await switchTo(page, 'next', lastStep - k)); // shown a moment ago
  browserTimes.member.push(
    await page.evaluate(() => {
      const select = document.getElementById('member') as HTMLSelectElement;
      const start = performance.now();
      select.value = select.options[1]!.value;
      select.dispatchEvent(new Event('change'));
      return performance.now() - start; // the redraw is synchronous
    }),
  );
  await page.context().close();
  page = await fresh();
  browserTimes.list.push(await loadUntil(page, `${base}/`, 'body[data-listed]'));
  if (existsSync(reportFile)) browserTimes.report.push(await loadUntil(page, `file://${reportFile}`, 'body[data-rendered="true"]'));
  await page.context().close();
}
await browser.close();
await dashboard.close();

const rows = [
  { what: 'index the whole log (first visit)', ...stats(cold) },
  { what: 'index one more step (a poll while the run writes)', ...stats(perStep) },
  { what: `GET /api/run (all metrics: ${api.runKiB.toFixed(0)} KiB of JSON, sent gzipped)`, ...stats(api.run) },
  { what: `GET /api/run/…/step/N (${api.stepKiB.toFixed(0)} KiB of JSON)`, ...stats(api.step) },
  { what: 'run page: load until the samples are drawn', ...stats(browserTimes.samples) },
  { what: 'run page: load until the plots are drawn', ...stats(browserTimes.plots) },
  { what: 'step switch to a step not shown before', ...stats(browserTimes.newStep) },
  { what: 'step switch to a step shown before', ...stats(browserTimes.seenStep) },
  { what: 'member filter (redraw of the step)', ...stats(browserTimes.member) },
  { what: 'runs list: load until listed', ...stats(browserTimes.list) },
  ...(browserTimes.report.length > 0 ? [{ what: 'baseline: report.html until its plots are drawn', ...stats(browserTimes.report) }] : []),
];
const folder = { dir, steps: scenario.steps, members, events, logMiB: logBytes / 2 ** 20, proposals, answers, answersPerStep: answers / (lastStep + 1) };
console.log(`run folder: ${folder.steps} steps, ${members} members, ${events} events (${folder.logMiB.toFixed(1)} MiB), ${proposals} proposals and ${answers} answers (${folder.answersPerStep.toFixed(0)} a step)`);
console.table(rows.map((r) => ({ what: r.what, 'median ms': r.medianMs.toFixed(1), 'max ms': r.maxMs.toFixed(1), samples: r.samples })));
const report = browserTimes.report.length > 0 ? median(browserTimes.report) : null;
if (report !== null) console.log(`run page until its plots are drawn / report.html until its plots are: ${(median(browserTimes.plots) / report).toFixed(2)}x; until the samples are: ${(median(browserTimes.samples) / report).toFixed(2)}x`);
const result = {
  folder,
  repeats,
  rows,
  ratios: report === null ? null : { runPagePlotsOverReport: median(browserTimes.plots) / report, runPageSamplesOverReport: median(browserTimes.samples) / report, wholeIndexOverOneStep: median(cold) / median(perStep) },
  machine: { cpus: cpus().length, model: cpus()[0]?.model, memoryGiB: totalmem() / 2 ** 30, node: process.version, chromium: spawnSync(chromiumPath, ['--version'], { encoding: 'utf8' }).stdout.trim(), loadAverageAtStart, loadAverageAtEnd: loadavg() },
};
writeFileSync(args.out, jsonText(result));
console.log(`written: ${args.out}`);
