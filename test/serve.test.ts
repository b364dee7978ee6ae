// populora serve and populora samples without a browser: the sample index against the event log read message by
// message (and against what the run itself wrote: lineage.json, metrics.jsonl), logs of every earlier format,
// a log read as it grows; the samples command; and the server's security over plain HTTP: only the named
// folders (no traversal, encoded or through links), loopback with a Host check, a token elsewhere, nothing written.

import { spawn, spawnSync } from 'node:child_process';
import { appendFileSync, cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LogTail } from '../src/serve/log-tail.js';
import { RunFolder } from '../src/serve/run-folder.js';
import { SampleIndex } from '../src/serve/samples.js';
import { startDashboard, type Dashboard } from '../src/serve/server.js';
import type { StepMetrics } from '../src/sim/metrics.js';
import { HOSTILE, hostileRun, logOf, smallRun, snapshot, stepFromLog } from './serve-helpers.js';

const cli = (...args: string[]) => spawnSync(process.execPath, ['dist/src/cli/main.js', ...args], { encoding: 'utf8' });
const metricsOf = (dir: string) => readFileSync(join(dir, 'metrics.jsonl'), 'utf8').trim().split('\n').map((line) => JSON.parse(line) as StepMetrics);
const FORMATS = readdirSync('test/serve-formats').filter((name) => /^[0-9a-f]{7}$/.test(name)).sort();

/** The whole log of a folder through the index, as the dashboard reads it. */
function indexOf(dir: string, answersPerStudent: number | null = 2): SampleIndex {
  const index = new SampleIndex(answersPerStudent);
  const tail = new LogTail(join(dir, 'events.msgpack'));
  for (let read = tail.read(); read.events.length > 0; read = tail.read()) read.events.forEach((e) => index.add(e));
  return index;
}

let root: string;
let run: string;
beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'populora-serve-'));
  run = await smallRun(join(root, 'served', 'small'));
});

describe('the sample index', () => {
  it('holds, step by step, what the log says message by message: proposals and their verdicts, answers and theirs, who got which task', () => {
    const events = logOf(run);
    const index = indexOf(run);
    expect(index.stepNumbers).toEqual([0, 1, 2, 3]);
    let answersSeen = 0;
    for (const step of index.stepNumbers) {
      const expected = stepFromLog(events, step);
      const got = index.step(step)!;
      expect(got.proposals.map((p) => ({ requestId: p.requestId, teacher: p.teacher, text: p.text, valid: p.valid }))).toEqual([...expected.proposals].sort((a, b) => a.requestId - b.requestId));
      expect(got.answers.map((a) => ({ requestId: a.requestId, student: a.student, text: a.text, correct: a.correct }))).toEqual([...expected.answers].sort((a, b) => a.requestId - b.requestId));
      for (const p of got.proposals) expect(p.students.sort(), `proposal ${p.requestId}`).toEqual(expected.assigned.filter((a) => a.taskId === p.requestId).map((a) => a.student).sort());
      // Each answer's teacher and task (matched by the order of assignment): per (teacher, student), the answers
      // and the right ones add up to the outcomes the student sent that teacher.
      for (const o of expected.outcomes) {
        const mine = got.answers.filter((a) => a.taskId === o.taskId && a.student === o.student);
        expect(mine.every((a) => a.teacher === o.teacher)).toBe(true);
        expect([mine.length, mine.filter((a) => a.correct).length]).toEqual([o.total, o.correct]);
      }
      answersSeen += got.answers.length;
      expect(got.answers.some((a) => a.correct) && got.answers.some((a) => a.correct === false), `step ${step} has right and wrong answers`).toBe(true);
    }
    expect(answersSeen).toBe(events.filter((e) => e.type === 'generated' && (e.payload as { to: string }).to.startsWith('student-')).reduce((n, e) => n + ((e.payload as { message: { results: unknown[] } }).message.results.length), 0));
  });

  it("rebuilds the run's lineage.json, and its metrics' solve rates, validity and rewards, from the log alone", () => {
    const index = indexOf(run);
    expect(index.lineage).toEqual(JSON.parse(readFileSync(join(run, 'lineage.json'), 'utf8')));
    expect(index.lineage.length).toBeGreaterThan(0);
    for (const m of metricsOf(run)) agreesWithMetrics(index, m, run);
  });

  it.each(FORMATS)('reads a log written by the code of commit %s (test/serve-formats/README.md)', (commit) => {
    const dir = join('test/serve-formats', commit);
    const index = indexOf(dir);
    expect(index.lineage).toEqual(JSON.parse(readFileSync(join(dir, 'lineage.json'), 'utf8')));
    for (const m of metricsOf(dir)) agreesWithMetrics(index, m, dir);
    const untilRequestIds = ['e9adb63', '31f11d4', 'fe2f28c', 'e541e56'].includes(commit); // training samples named request ids from 7636d0f on
    expect([...index.notes].some((note) => note.startsWith('training samples without request ids'))).toBe(untilRequestIds);
  });

  it('reads a log as it grows, cut anywhere (mid-record too), and starts over when the file is replaced', () => {
    const bytes = readFileSync(join(run, 'events.msgpack'));
    const dir = mkdtempSync(join(tmpdir(), 'populora-growing-'));
    const file = join(dir, 'events.msgpack');
    writeFileSync(file, '');
    const tail = new LogTail(file);
    const index = new SampleIndex(2);
    for (let at = 0; at < bytes.length; at += 997) {
      appendFileSync(file, bytes.subarray(at, Math.min(bytes.length, at + 997)));
      const read = tail.read();
      expect(read.reset).toBe(false);
      read.events.forEach((e) => index.add(e));
    }
    const whole = indexOf(run);
    expect(tail.records).toBe(logOf(run).length);
    for (const step of whole.stepNumbers) expect(index.step(step)).toEqual(whole.step(step));
    expect(index.lineage).toEqual(whole.lineage);

    const other = join(dir, 'other');
    writeFileSync(other, readFileSync(join('test/serve-formats', FORMATS.at(-1)!, 'events.msgpack')));
    renameSync(other, file); // `populora run --overwrite` writes a new log where the old one was
    const read = tail.read();
    expect(read.reset).toBe(true);
    expect(read.events.map((e) => e.index)).toEqual(logOf(join('test/serve-formats', FORMATS.at(-1)!)).map((_, i) => i));
  });
});

/** The step's metrics line, computed by the run's own code, against the samples the index holds for that step. */
function agreesWithMetrics(index: SampleIndex, m: StepMetrics, dir: string): void {
  const step = index.step(m.step)!;
  const judged = step.proposals.filter((p) => p.fault === null);
  const answers = step.answers.filter((a) => a.fault === null);
  expect(judged.filter((p) => p.valid).length / judged.length, `validity at step ${m.step}`).toBeCloseTo(m.validity, 12);
  if (m.solveRate !== null) expect(answers.filter((a) => a.correct).length / answers.length, `solve rate at step ${m.step}`).toBeCloseTo(m.solveRate, 12);
  // Each reward is the one its generation earned (actors/teacher.ts, student.ts: the scenario's rewards), so a reward
  // matched to the wrong proposal or answer shows.
  const { rewards } = JSON.parse(readFileSync(join(dir, 'scenario.json'), 'utf8')) as { rewards: { invalidPenalty: number; zeroAtUnsolved: boolean } };
  for (const p of judged) expect(p.reward, `proposal ${p.requestId}`).toBe(!p.valid ? rewards.invalidPenalty : p.answers === 0 || (p.solveRate === 0 && rewards.zeroAtUnsolved) ? 0 : 1 - p.solveRate!);
  for (const a of answers) expect(a.reward, `answer ${a.requestId}`).toBe(a.correct ? 1 : 0);
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  for (const [id, member] of Object.entries(m.members)) {
    if (member.rewardMean !== undefined) expect(mean(judged.filter((p) => p.teacher === id).map((p) => p.reward!)), `${id}'s reward at step ${m.step}`).toBeCloseTo(member.rewardMean, 12);
    if (member.solveRate !== undefined && member.solveRate !== null) expect(mean(answers.filter((a) => a.student === id).map((a) => a.reward!)), `${id}'s solve rate at step ${m.step}`).toBeCloseTo(member.solveRate, 12);
  }
}

describe('a run folder as the dashboard sees it', () => {
  const copy = (name: string) => {
    const dir = join(mkdtempSync(join(tmpdir(), 'populora-status-')), name);
    cpSync(run, dir, { recursive: true });
    return dir;
  };
  const folder = (dir: string) => {
    const f = new RunFolder('x', dir, dir, dir, () => 0);
    f.refresh();
    return f;
  };

  it('tells finished, running, stopped and failed runs apart from their files, and estimates what is left', () => {
    const dir = copy('status');
    expect(folder(dir).status()).toBe('finished');
    rmSync(join(dir, 'summary.json'));
    expect(folder(dir).status()).toBe('stopped'); // no lock, and the last step done has its checkpoint (step 4)
    rmSync(join(dir, 'checkpoints', 'step-4'), { recursive: true });
    expect(folder(dir).status()).toBe('failed'); // steps 3 and 4 done after the last checkpoint: a crash
    writeFileSync(join(dir, 'run.lock'), JSON.stringify({ pid: process.pid, host: hostname(), command: 'test' }));
    const running = folder(dir);
    expect(running.status()).toBe('running');
    // Two steps left at the mean of the last steps' recorded wall time (1 s and 3 s): 4 s.
    const lines = metricsOf(dir).slice(0, 2).map((m, i) => ({ ...m, timing: { stepMs: [1000, 3000][i] } }));
    writeFileSync(join(dir, 'metrics.jsonl'), lines.map((l) => `${JSON.stringify(l)}\n`).join(''));
    expect(folder(dir).summary()).toMatchObject({ status: 'running', step: 2, steps: 4, etaSeconds: 4 });
    writeFileSync(join(dir, 'run.lock'), JSON.stringify({ pid: 2 ** 22 + 1, host: hostname(), command: 'gone' })); // no such process
    expect(folder(dir).status()).not.toBe('running');
  });

  it('reads metrics.jsonl by whole lines as they are appended, and starts over when the folder holds a new run', () => {
    const dir = copy('growing');
    const lines = readFileSync(join(dir, 'metrics.jsonl'), 'utf8').split('\n').filter(Boolean);
    writeFileSync(join(dir, 'metrics.jsonl'), `${lines[0]}\n${lines[1]!.slice(0, 40)}`);
    const f = folder(dir);
    expect(f.metrics.map((m) => m.step)).toEqual([0]); // the half-written second line waits
    appendFileSync(join(dir, 'metrics.jsonl'), `${lines[1]!.slice(40)}\n${lines[2]}\n`);
    expect(f.refresh()).toBe(true);
    expect(f.metrics.map((m) => m.step)).toEqual([0, 1, 2]);
    const generation = f.generation;
    rmSync(join(dir, 'metrics.jsonl'));
    writeFileSync(join(dir, 'metrics.jsonl'), `${lines[0]}\n`);
    f.refresh();
    expect(f.metrics.map((m) => m.step)).toEqual([0]);
    expect(f.generation).toBe(generation + 1);
  });
});

describe('populora samples', () => {
  it('prints a step and member as JSON lines: the proposals it was given and its answers, as the log has them', () => {
    const out = cli('samples', run, '--step', '1', '--member', 'student-0-0', '--json');
    expect(out.status, out.stderr).toBe(0);
    const lines = out.stdout.trim().split('\n').map((line) => JSON.parse(line) as Record<string, any>);
    const expected = stepFromLog(logOf(run), 1);
    const given = expected.assigned.filter((a) => a.student === 'student-0-0').map((a) => a.taskId);
    expect(lines.filter((l) => l.kind === 'proposal').map((l) => l.requestId).sort()).toEqual(given.sort());
    expect(lines.filter((l) => l.kind === 'answer').map((l) => [l.requestId, l.text, l.correct])).toEqual(expected.answers.filter((a) => a.student === 'student-0-0').map((a) => [a.requestId, a.text, a.correct]));
    expect(lines.every((l) => l.step === 1)).toBe(true);
  });

  it('prints a table with every control character escaped (a model\'s text cannot drive the terminal), and names what it cannot show', () => {
    const dir = hostileRun(join(mkdtempSync(join(tmpdir(), 'populora-hostile-')), 'run'));
    const table = cli('samples', dir);
    expect(table.status, table.stderr).toBe(0);
    expect(table.stdout).not.toContain('\u001b');
    expect(table.stdout).toContain('\\u001b[2J');
    expect(table.stdout).toContain(HOSTILE.replace('\u001b', '\\u001b'));
    const badStep = cli('samples', run, '--step', '9');
    expect([badStep.status, badStep.stderr.trim()]).toEqual([1, `populora: --step 9: the log of ${run} holds steps 0 to 3`]);
    const badMember = cli('samples', run, '--member', 'nobody');
    expect(badMember.stderr).toContain('--member nobody: no such member');
    expect(badMember.stderr).toContain('student-0-0, student-0-1');
    expect(cli('samples', root).stderr).toContain('not a run folder');
  });
});

/** A GET with any path and headers, as a browser or an attacker might send it (fetch would normalise the path). */
function get(port: number, path: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (chunk) => (body += chunk)).on('end', () => resolve({ status: res.statusCode!, body, headers: res.headers }));
    });
    req.on('error', reject).end();
  });
}

describe('populora serve over HTTP', () => {
  let dashboard: Dashboard;
  let served: string;
  let outside: string;
  beforeAll(async () => {
    served = join(root, 'served');
    outside = hostileRun(join(root, 'outside', 'secret-run'));
    symlinkSync(outside, join(served, 'link-out')); // a run folder that is a link out of the served folder
    mkdirSync(join(served, 'linked-files'));
    cpSync(join(run, 'scenario.json'), join(served, 'linked-files', 'scenario.json'));
    symlinkSync(join(outside, 'events.msgpack'), join(served, 'linked-files', 'events.msgpack')); // files that are links out
    symlinkSync('/etc/passwd', join(served, 'linked-files', 'metrics.jsonl'));
    // A sweep whose finished run has a metrics file that is a link out: its comparison must not read it.
    mkdirSync(join(served, 'linked-sweep'));
    cpSync(run, join(served, 'linked-sweep', 'a'), { recursive: true });
    rmSync(join(served, 'linked-sweep', 'a', 'metrics.jsonl'));
    symlinkSync(join(outside, 'metrics.jsonl'), join(served, 'linked-sweep', 'a', 'metrics.jsonl'));
    writeFileSync(join(served, 'linked-sweep', 'sweep.json'), JSON.stringify({ format: 1, name: 'linked-sweep', runs: [{ dir: 'a', group: 'g', status: 'finished' }] }));
    dashboard = await startDashboard({ dirs: [served], port: 0, host: '127.0.0.1', pollMs: 50 });
  });
  afterAll(() => dashboard?.close());

  it('lists the runs of the named folder, and none reached through a link out of it', async () => {
    const list = JSON.parse((await get(dashboard.port, '/api/list')).body).list as Array<{ id: string; status: string; step: number }>;
    expect(list.map((r) => r.id)).toEqual(['served/linked-sweep', 'served/linked-files', 'served/small']);
    expect(list.find((r) => r.id === 'served/small')).toMatchObject({ status: 'finished', step: 4 });
  });

  it('serves nothing outside the named folders: no path, encoded or not, and no link out of them reaches a file', async () => {
    const attempts = [
      '/assets/../package.json', '/assets/..%2Fpackage.json', '/assets/%2e%2e%2fpackage.json', '/assets/%252e%252e%252fpackage.json', '/../../etc/passwd', '//etc/passwd',
      '/run/..%2F..%2Foutside%2Fsecret-run', '/run/served%2F..%2Foutside%2Fsecret-run', '/api/run/served%2F..%2Foutside%2Fsecret-run', '/api/run/%2e%2e/step/0',
      '/api/run/served%2Flink-out', '/api/run/served%2Flink-out/step/0', '/api/run/served%2Flink-out/event/1', '/run/served%2Flink-out', '/api/run/served%2Fsmall%2F..%2F..%2Foutside%2Fsecret-run',
      '/api/run/served%2Fsmall/event/..%2F..%2F1', '/api/run/served%2Fsmall/step/-1', '/api/run/served%2Fsmall/step/1e3', '/sweep/..%2Foutside', '/api/sweep/served%2Fsmall',
    ];
    for (const path of attempts) {
      const response = await get(dashboard.port, path);
      expect([400, 404], path).toContain(response.status);
      expect(response.body, path).not.toContain('__pwned'); // the outside run's content
      expect(response.body, path).not.toContain('root:x:0');
    }
    expect((await get(dashboard.port, '/run/%ZZ')).status).toBe(400);
    // The folder whose files are links out is listed by its own scenario.json, and shows neither file.
    const linked = JSON.parse((await get(dashboard.port, '/api/run/served%2Flinked-files')).body);
    expect([linked.metrics, linked.events]).toEqual([[], 0]);
    expect((await get(dashboard.port, '/api/run/served%2Flinked-files/step/0')).body).not.toContain('__pwned');
    // A sweep's comparison (the report's loader reads the run folder by its own paths) refuses a run with a link out.
    const comparison = await get(dashboard.port, '/sweep/served%2Flinked-sweep/compare');
    expect(comparison.body).toContain(`linked-sweep/a/metrics.jsonl is a link out of the served folders`);
    expect(comparison.body).not.toContain('__pwned');
    expect(JSON.parse((await get(dashboard.port, '/api/run/served%2Flinked-sweep%2Fa')).body).metrics).toEqual([]);
  });

  it('answers only to a loopback Host (no DNS rebinding), sends no inline script policy, and refuses writes', async () => {
    expect((await get(dashboard.port, '/api/list', { Host: `evil.example:${dashboard.port}` })).status).toBe(421);
    expect((await get(dashboard.port, '/api/list', { Host: `localhost:${dashboard.port}` })).status).toBe(200);
    const page = await get(dashboard.port, '/run/served%2Fsmall');
    expect(page.status).toBe(200);
    expect(page.headers['content-security-policy']).toContain("script-src 'self'");
    expect(page.body).not.toMatch(/<script>/); // every script is a file of its own
    const post = await new Promise<number>((resolve) => request({ host: '127.0.0.1', port: dashboard.port, path: '/api/list', method: 'POST' }, (res) => resolve(res.statusCode!)).end());
    expect(post).toBe(405);
  });

  it('escapes `<` in every JSON answer, so no text of a run can close a script element or an HTML context', async () => {
    const dir = join(root, 'served', 'hostile');
    hostileRun(dir);
    await sleep(300); // a few polls: the new folder is found
    const step = await get(dashboard.port, '/api/run/served%2Fhostile/step/0');
    expect(step.status).toBe(200);
    expect(step.body).not.toContain('<');
    expect(JSON.parse(step.body).samples.proposals[0].text).toBe(HOSTILE);
  });

  it('writes nothing in the folders it serves, whatever is asked of it', async () => {
    const before = snapshot(served);
    const list = JSON.parse((await get(dashboard.port, '/api/list')).body).list as Array<{ id: string; kind: string }>;
    for (const { id } of list.filter((item) => item.kind === 'sweep')) for (const path of ['/sweep/', '/api/sweep/']) await get(dashboard.port, `${path}${encodeURIComponent(id)}`);
    await get(dashboard.port, '/sweep/served%2Flinked-sweep/compare');
    for (const { id } of list.filter((item) => item.kind === 'run')) {
      const at = `/api/run/${encodeURIComponent(id)}`;
      for (const path of [`/run/${encodeURIComponent(id)}`, at, `${at}?from=2`, ...[0, 1, 2, 3].map((s) => `${at}/step/${s}`), ...[0, 5, 50].map((e) => `${at}/event/${e}`), `/run/${encodeURIComponent(id)}/event/3`]) await get(dashboard.port, path);
    }
    await sleep(300);
    expect(snapshot(served)).toEqual(before);
  });

  it('bound to another address, refuses every request without its token, takes it once in the URL, then from a cookie', async () => {
    const open = await startDashboard({ dirs: [served], port: 0, host: '0.0.0.0', pollMs: 1000 });
    try {
      expect(open.token).toMatch(/^[A-Za-z0-9_-]{20,}$/);
      expect(open.url).toContain(`?token=${open.token}`);
      expect((await get(open.port, '/api/list')).status).toBe(401);
      expect((await get(open.port, '/api/list?token=wrong')).status).toBe(401);
      const first = await get(open.port, `/?token=${open.token}`);
      expect(first.status).toBe(200);
      const cookie = String(first.headers['set-cookie']).split(';')[0]!;
      expect(cookie).toBe(`populora_token=${open.token}`);
      expect((await get(open.port, '/api/list', { Cookie: cookie })).status).toBe(200);
      expect((await get(open.port, '/api/list', { Authorization: `Bearer ${open.token}` })).status).toBe(200);
    } finally {
      await open.close();
    }
  });

  it('says so in one line when bound beyond loopback, prints its URL on one line, and stops on SIGTERM', async () => {
    const child = spawn(process.execPath, ['dist/src/cli/main.js', 'serve', served, '--host', '0.0.0.0', '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (chunk) => {
        out += chunk;
        if (/http:\/\/\S+/.test(out)) resolve();
      });
      child.on('exit', (code) => reject(new Error(`serve exited ${code}: ${out}`)));
    });
    child.kill('SIGTERM');
    const code = await new Promise((resolve) => child.on('exit', resolve));
    const lines = out.trim().split('\n');
    expect(lines[0]).toMatch(/^populora serve: listening on 0\.0\.0\.0, not on loopback: anyone who reaches this machine/);
    expect(lines[1]).toMatch(/^populora serve: http:\/\/0\.0\.0\.0:\d+\/\?token=[A-Za-z0-9_-]+ \(/);
    expect(code).toBe(0);
  });
});
