// The dashboard in a real browser (Debian's Chromium, headless, driven by playwright-core): the runs list updates
// while a run writes, without a reload; the sample browser shows the proposals and answers the event log holds
// for a chosen step and member (the log read independently, test/serve-helpers.ts); the filters and the search
// keep what they say; text a model wrote renders as text, with the page's Content-Security-Policy bypassed so
// that escaping alone is tested; a sweep's page follows its runs and compares the finished ones. A screenshot of
// each page is kept in out/test-artifacts/ (serve-*.png).

import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDashboard, type Dashboard } from '../src/serve/server.js';
import { planSweep } from '../src/sweep/grid.js';
import { initialState, writeSweepState, type SweepState } from '../src/sweep/state.js';
import { runScenario } from '../src/sim/run.js';
import { CHROMIUM_ARGS, chromiumPath, HOSTILE, HOSTILE_ID, hostileRun, logOf, SMALL_SCENARIO, smallRun, stepFromLog } from './serve-helpers.js';

const ARTIFACTS = resolve('out/test-artifacts');

let root: string;
let served: string;
let small: string;
let dashboard: Dashboard;
let browser: Browser;

beforeAll(async () => {
  if (!chromiumPath) return;
  root = mkdtempSync(join(tmpdir(), 'populora-serve-browser-'));
  served = join(root, 'runs');
  small = await smallRun(join(served, 'small'));
  hostileRun(join(served, 'hostile'));
  dashboard = await startDashboard({ dirs: [served], port: 0, host: '127.0.0.1', pollMs: 100 });
  browser = await chromium.launch({ executablePath: chromiumPath, args: CHROMIUM_ARGS });
  mkdirSync(ARTIFACTS, { recursive: true });
});
afterAll(async () => {
  await browser?.close();
  await dashboard?.close();
});

async function open(path: string, options: { bypassCSP?: boolean } = {}): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 }, bypassCSP: options.bypassCSP ?? false });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('pageerror', (error) => errors.push(error.message));
  (page as Page & { errors: string[] }).errors = errors;
  await page.goto(`http://127.0.0.1:${dashboard.port}${path}`);
  return page;
}
const errorsOf = (page: Page) => (page as Page & { errors: string[] }).errors;

/** Each row of a sample table: its data attributes and its cells' text. */
type Row = { request: string; valid?: string; cells: string[] };
const rowsOf = (page: Page, table: 'proposals' | 'answers'): Promise<Row[]> =>
  page.$$eval(`#${table} tbody tr`, (rows) => rows.map((row) => ({ ...(row as HTMLElement).dataset, cells: [...row.children].map((cell) => (cell as HTMLElement).innerText) }) as Row));

async function showStep(page: Page, step: number): Promise<void> {
  await page.waitForSelector(`body[data-shown-step="${step}"]`);
}

describe.skipIf(!chromiumPath)('populora serve in headless Chromium', () => {
  it('updates the runs list while a run writes, without reloading the page', async () => {
    const page = await open('/');
    await page.waitForSelector('body[data-listed]');
    await page.evaluate(() => {
      (window as any).__sameDocument = true;
      (window as any).__seen = [];
      new MutationObserver(() => {
        const row = document.querySelector<HTMLElement>('tr[data-id="runs/live"]');
        if (row) (window as any).__seen.push(`${row.dataset.status} ${row.dataset.step}`);
      }).observe(document.querySelector('#list tbody')!, { childList: true, subtree: true });
    });
    const scenario = join(root, 'live.yaml');
    writeFileSync(scenario, SMALL_SCENARIO.replace('name: serve-test', 'name: live').replace('steps: 4', 'steps: 6').replace('checkpointEvery: 2', 'checkpointEvery: 3'));
    const child = spawn(process.execPath, ['dist/src/cli/main.js', 'run', scenario, '--out', join(served, 'live')], { stdio: 'ignore' });
    const exited = new Promise<number | null>((done) => child.on('exit', done));
    await page.waitForSelector('tr[data-id="runs/live"][data-status="finished"][data-step="6"]', { timeout: 60_000 });
    expect(await exited).toBe(0);
    const seen = (await page.evaluate(() => (window as any).__seen)) as string[];
    const running = seen.filter((s) => s.startsWith('running ')).map((s) => Number(s.split(' ')[1]));
    expect(running.some((step) => step > 0 && step < 6), `states seen: ${seen.join(', ')}`).toBe(true);
    expect(await page.evaluate(() => (window as any).__sameDocument)).toBe(true); // the same document: nothing reloaded
    const cells = await page.$$eval('tr[data-id="runs/live"] td', (tds) => tds.map((td) => (td as HTMLElement).innerText.trim()));
    expect(cells.slice(0, 3)).toEqual(['live', 'finished', '6 / 6']);
    await page.screenshot({ path: join(ARTIFACTS, 'serve-runs.png') });
    expect(errorsOf(page)).toEqual([]);
  });

  it("shows a chosen step and member's proposals and answers as the event log holds them, and moves between steps", async () => {
    const events = logOf(small);
    const page = await open('/run/runs%2Fsmall#step=2&member=student-0-1');
    await showStep(page, 2);
    let expected = stepFromLog(events, 2);
    const given = expected.assigned.filter((a) => a.student === 'student-0-1').map((a) => a.taskId);
    expect((await rowsOf(page, 'proposals')).map((r) => Number(r.request)).sort((a, b) => a - b)).toEqual(given.sort((a, b) => a - b));
    const answers = await rowsOf(page, 'answers');
    const mine = expected.answers.filter((a) => a.student === 'student-0-1');
    expect(answers.map((r) => [Number(r.request), r.cells[6], r.cells[7]!.split(':')[0]])).toEqual(mine.map((a) => [a.requestId, a.text, a.correct ? 'correct' : 'wrong']));
    expect(mine.length).toBeGreaterThan(0);

    await page.click('#prev');
    await showStep(page, 1);
    await page.selectOption('#member', 'teacher-1-0');
    expected = stepFromLog(events, 1);
    const proposals = await rowsOf(page, 'proposals');
    const theirs = expected.proposals.filter((p) => p.teacher === 'teacher-1-0');
    expect(proposals.map((r) => [Number(r.request), r.cells[4], r.valid])).toEqual(theirs.map((p) => [p.requestId, p.text, String(p.valid)]));
    expect(new URL(page.url()).hash).toBe('#step=1&member=teacher-1-0'); // a view to link to
    // The matchmaking matrix at the step is the step's metrics line; the lineage as of the step.
    expect(await page.$eval('#step-matrix', (t) => (t as HTMLElement).dataset.cells)).toBe(String(expected.outcomes.length > 0 ? new Set(expected.outcomes.map((o) => `${o.teacher} ${o.student}`)).size : 0));
    await page.click('#first');
    await showStep(page, 0);
    expect(await page.$eval('#step-lineage', (t) => (t as HTMLElement).dataset.records)).toBe('0');
    await page.click('#last');
    await showStep(page, 3);
    expect(Number(await page.$eval('#step-lineage', (t) => (t as HTMLElement).dataset.records))).toBeGreaterThan(0);
    await page.waitForSelector(`body[data-charts="4"]`); // the report's plots, drawn from the 4 metrics lines
    expect(await page.$$eval('#charts section.chart', (charts) => charts.length)).toBeGreaterThan(5);
    expect(errorsOf(page)).toEqual([]);
  });

  it('keeps what each filter and the search say, counted against the log', async () => {
    const expected = stepFromLog(logOf(small), 1);
    const page = await open('/run/runs%2Fsmall#step=1');
    await showStep(page, 1);
    expect((await rowsOf(page, 'proposals')).length).toBe(expected.proposals.length);
    expect((await rowsOf(page, 'answers')).length).toBe(expected.answers.length);

    await page.selectOption('#type', 'abduce');
    expect((await rowsOf(page, 'proposals')).map((r) => Number(r.request))).toEqual(expected.proposals.filter((p) => expected.proposalTypes.get(p.requestId) === 'abduce').map((p) => p.requestId));
    expect((await rowsOf(page, 'answers')).map((r) => Number(r.request))).toEqual(expected.answers.filter((a) => expected.answerTypes.get(a.requestId) === 'abduce').map((a) => a.requestId));
    await page.selectOption('#type', '');

    await page.selectOption('#validity', 'invalid');
    expect((await rowsOf(page, 'proposals')).map((r) => Number(r.request))).toEqual(expected.proposals.filter((p) => p.valid === false).map((p) => p.requestId));
    expect(await rowsOf(page, 'answers')).toEqual([]);
    await page.selectOption('#validity', '');

    // Solved by none and by all: the students' outcomes, summed per task.
    const rate = (taskId: number) => {
      const mine = expected.outcomes.filter((o) => o.taskId === taskId);
      return mine.length === 0 ? null : mine.reduce((n, o) => n + o.correct, 0) / mine.reduce((n, o) => n + o.total, 0);
    };
    for (const [choice, value] of [['none', 0], ['all', 1]] as const) {
      await page.selectOption('#solved', choice);
      expect((await rowsOf(page, 'proposals')).map((r) => Number(r.request)), choice).toEqual(expected.proposals.filter((p) => rate(p.requestId) === value).map((p) => p.requestId));
    }
    await page.selectOption('#solved', '');

    await page.selectOption('#answers', 'wrong');
    expect((await rowsOf(page, 'answers')).map((r) => Number(r.request))).toEqual(expected.answers.filter((a) => a.correct === false).map((a) => a.requestId));
    await page.selectOption('#answers', '');

    await page.selectOption('#student', 'student-1-1');
    expect((await rowsOf(page, 'answers')).map((r) => Number(r.request))).toEqual(expected.answers.filter((a) => a.student === 'student-1-1').map((a) => a.requestId));
    await page.selectOption('#student', '');

    const needle = expected.proposals[0]!.text;
    await page.fill('#search', needle);
    const found = await rowsOf(page, 'proposals');
    expect(found.map((r) => Number(r.request))).toContain(expected.proposals[0]!.requestId);
    expect(found.every((r) => r.cells.join(' ').includes(needle))).toBe(true);
    await page.fill('#search', '');
    await page.screenshot({ path: join(ARTIFACTS, 'serve-samples.png') });
    expect(errorsOf(page)).toEqual([]);
  });

  it('shows a model\'s markup and script as the text it is: escaping alone (the page\'s CSP bypassed) keeps it inert', async () => {
    const page = await open('/run/runs%2Fhostile#step=0', { bypassCSP: true });
    await showStep(page, 0);
    await page.waitForSelector('body[data-charts="1"]'); // the report's tables too, with the run's hostile name
    const proposal = (await rowsOf(page, 'proposals'))[0]!;
    expect(proposal.cells[4]).toBe(HOSTILE); // visible as written
    expect(proposal.cells[3]).toBe(`prompt ${HOSTILE}`);
    const answer = (await rowsOf(page, 'answers'))[0]!;
    expect([answer.cells[6], answer.cells[7]]).toEqual([HOSTILE, `wrong: wrong ${HOSTILE}`]);
    expect(await page.$eval('#title', (h) => h.textContent)).toBe(`hostile ${HOSTILE}`);
    expect(await page.$eval('#tables', (t) => t.textContent)).toContain(`hostile ${HOSTILE}: who met whom`);
    const child = `student-1-0${HOSTILE_ID}.g1`; // a member id with markup in it, through the lineage
    expect(await page.$eval('#step-lineage', (t) => t.textContent)).toContain(child);
    expect(await page.$eval('#tables', (t) => t.textContent)).toContain(child);
    expect(await page.$eval('#step-matrix', (t) => t.textContent)).toContain(`student-1-0${HOSTILE_ID}`);
    expect(await page.evaluate(() => (window as any).__pwned)).toBeUndefined(); // no script of the run's ran
    expect(await page.$$eval('main img, main script', (nodes) => nodes.length)).toBe(0);

    const event = await open('/run/runs%2Fhostile/event/2', { bypassCSP: true });
    await event.waitForSelector('body[data-ready]');
    expect(await event.$eval('#event', (pre) => pre.textContent)).toContain(JSON.stringify(HOSTILE).slice(1, -1));
    expect(await event.evaluate(() => (window as any).__pwned)).toBeUndefined();
    expect(await event.$$eval('main img, main script', (nodes) => nodes.length)).toBe(0);
    await event.screenshot({ path: join(ARTIFACTS, 'serve-event.png') });
    expect([...errorsOf(page), ...errorsOf(event)]).toEqual([]);
  });

  it("follows a sweep's runs as they finish, and compares the finished ones as populora compare does", async () => {
    const sweepFile = join(root, 'sweep.yaml');
    const scenario = SMALL_SCENARIO.replace('steps: 4', 'steps: 2').replace('checkpointEvery: 2', 'checkpointEvery: 0').trim().split('\n').map((line) => `  ${line}`).join('\n');
    writeFileSync(sweepFile, `name: tiny-sweep\nscenario:\n${scenario}\ngrid:\n  seed: [11, 12]\n`);
    const plan = planSweep(sweepFile);
    const dir = join(served, 'tiny-sweep');
    const state: SweepState = initialState(plan, 1);
    const finish = async (i: number) => {
      state.runs[i]!.status = 'running';
      writeSweepState(dir, state);
      await runScenario(plan.runs[i]!.scenario, { outDir: join(dir, plan.runs[i]!.dir) });
      state.runs[i]!.status = 'finished';
      writeSweepState(dir, state);
    };
    await finish(0);
    const page = await open('/sweep/runs%2Ftiny-sweep');
    await page.waitForSelector('body[data-finished="1"]');
    expect(await page.$$eval('#runs tbody tr', (rows) => rows.map((r) => (r as HTMLElement).dataset.status))).toEqual(['finished', 'pending']);
    await finish(1);
    await page.waitForSelector('body[data-finished="2"]');
    const frame = page.frames().find((f) => f.url().includes('/compare'))!;
    await frame.waitForURL(/finished=2$/);
    await frame.waitForSelector('body[data-rendered="true"]');
    expect(await frame.textContent('body')).toContain('Groups across seeds');
    await page.screenshot({ path: join(ARTIFACTS, 'serve-sweep.png'), fullPage: true });
    expect(errorsOf(page)).toEqual([]);
  });
});
