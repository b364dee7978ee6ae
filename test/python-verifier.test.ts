// The code domain's verifier pool: sandbox processes fenced below Python (an escape into JavaScript finds no file
// to write, no process to start, no socket to open), verdicts independent of the number of workers and of what
// ran before, a dead process replaced with its job retried once, a hang a fault after the guard with no retry,
// and `populora verify` on the same path.

import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import type { VerifyJob, VerifyOutcome } from '../src/domains/domain.js';
import { ESCAPE_MARKER } from '../src/domains/python/sandbox-protocol.js';
import { fence } from '../src/domains/python/sandbox-processes.js';
import { SEED_TASKS, type CodeTask } from '../src/domains/python/tasks.js';
import { PythonVerifierPool, type PythonPoolOptions } from '../src/domains/python/verifier-pool.js';
import { HEALTH_CHECK, HOSTILE, SENTINEL_DIR, type HostileProgram } from './python-corpus.js';

const fence_ = (tag: string, body: string) => `\`\`\`${tag}\n${body}\n\`\`\``;
const validate = (taskType: 'code_o' | 'code_i' | 'code_f', program: string, ...inputs: string[]): VerifyJob => ({ kind: 'validate', taskType, text: [fence_('python', program), ...inputs.map((i) => fence_('input', i))].join('\n') });
const HEALTHY = validate('code_o', 'def f(x):\n    return x * 2 + 1', '20');
const healthy = (outcome: VerifyOutcome | undefined) => outcome?.kind === 'validate' && outcome.validation.valid && (outcome.validation.task as CodeTask).outputs[0] === '41';
// C code that runs long without spending fuel is the guard's case; the sandbox counts every such call it knows of,
// so the hang below stands in for one it does not: JavaScript that never returns, run by the process for a job.
const HANGING = validate('code_o', `${ESCAPE_MARKER}\ndef f():\n    return 1`, '');
const HANG_PAYLOAD = 'for (;;) {}';
// Slow work no fuel counts (docs/sandbox.md, known residuals): multiples of 2**31 - 1 all hash to 0 on wasm32, so
// 60,000 inserts are ~1.8e9 probes in C, seconds on any machine, far past a 50 ms guard. (Scans of a long string
// served here until the sandbox charged str.count by its items.)
const SLOW = 'def f():\n    m = 2 ** 31 - 1\n    return len({i * m for i in range(60000)})';

async function withPool<T>(workers: number, use: (pool: PythonVerifierPool) => Promise<T>, options: PythonPoolOptions = {}): Promise<T> {
  const pool = new PythonVerifierPool(workers, options);
  try {
    return await use(pool);
  } finally {
    await pool.close();
  }
}

// Runs inside the sandbox process for a job marked with ESCAPE_MARKER, as JavaScript reached by an escape would.
// `text` names what it tries. It rethrows what stopped it, as an attacker's code would fail.
const ESCAPE_PAYLOAD = `
  const { fs, childProcess, net } = modules;
  const target = text.match(/target=(\\S+)/)?.[1];
  if (text.includes('action=write')) fs.writeFileSync(target, 'written by an escaped program');
  if (text.includes('action=spawn')) childProcess.execFileSync('touch', [target]);
  if (text.includes('action=socket')) {
    const [host, port] = target.split(':');
    await new Promise((resolve, reject) => {
      const socket = net.connect(Number(port), host);
      socket.on('connect', () => resolve(socket.end()));
      socket.on('error', reject);
    });
  }
  if (text.includes('action=function')) {
    const reach = [(() => 0).constructor, [].constructor.constructor, (async () => 0).constructor, Object.getPrototypeOf(function* () {}).constructor];
    if (reach.some((f) => f !== undefined)) throw new Error('a code-making constructor is reachable');
    if (typeof globalThis.fetch !== 'undefined') throw new Error('fetch is reachable');
  }
`;

describe('the sandbox processes fence an escape into JavaScript', () => {
  const onLinux = process.platform === 'linux';
  const dir = mkdtempSync(join(tmpdir(), 'populora-escape-'));
  const escapeJob = (action: string, target = '') => validate('code_o', `${ESCAPE_MARKER}: action=${action} target=${target}\ndef f():\n    return 1`, '');
  const refused = (outcome: VerifyOutcome | undefined, code: RegExp) => {
    expect(outcome?.kind).toBe('validate');
    if (outcome?.kind !== 'validate' || outcome.validation.valid) throw new Error(`not refused: ${JSON.stringify(outcome)}`);
    expect(outcome.validation.reason).toMatch(/^host-access: the program reached the host and was stopped/);
    expect(outcome.validation.reason).toMatch(code);
  };

  it.runIf(onLinux)('has no network on Linux (a network namespace), as CI requires', () => {
    if (process.env.CI) expect(fence().network).toBe('none');
    if (fence().network === 'open') console.warn('no network namespace here: the socket test below is skipped');
  });

  it('refuses a write, a spawn and a socket; each job is reported as refused and the next one is healthy', async () => {
    const written = join(dir, 'written.txt');
    const touched = join(dir, 'touched.txt');
    const connections: string[] = [];
    const server = createServer((socket) => void (connections.push('connected'), socket.end()));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    try {
      const jobs = [escapeJob('write', written), HEALTHY, escapeJob('spawn', touched), HEALTHY, ...(fence().network === 'none' ? [escapeJob('socket', `127.0.0.1:${port}`), HEALTHY] : [])];
      const outcomes = await withPool(1, (pool) => pool.verify(jobs), { escapePayloadForTests: ESCAPE_PAYLOAD });
      refused(outcomes[0], /ERR_ACCESS_DENIED/);
      refused(outcomes[2], /ERR_ACCESS_DENIED/);
      if (fence().network === 'none') refused(outcomes[4], /ENETUNREACH|ENETDOWN|ECONNREFUSED/);
      for (let i = 1; i < outcomes.length; i += 2) expect(healthy(outcomes[i]), JSON.stringify(outcomes[i])).toBe(true);
      expect(existsSync(written)).toBe(false);
      expect(existsSync(touched)).toBe(false);
      expect(connections).toEqual([]);
    } finally {
      server.close();
    }
  });

  it('leaves no constructor that makes code from a string, and no fetch, once the interpreter has loaded', async () => {
    const [outcome] = await withPool(1, (pool) => pool.verify([escapeJob('function')]), { escapePayloadForTests: ESCAPE_PAYLOAD });
    expect(outcome).toMatchObject({ kind: 'validate', validation: { valid: true } }); // the payload ran and found nothing
  });
});

describe('the Python verifier pool', () => {
  it('gives the same verdicts in job order with 1 or 2 workers', async () => {
    const jobs: VerifyJob[] = [
      validate('code_o', 'def f(words):\n    return sorted(set(words))', "['b', 'a', 'b', 'c']"),
      validate('code_o', 'def f(n):\n    return {str(i) for i in range(n)}', '12'), // set order: str hashes, seeded alike in every worker
      validate('code_f', 'def f(n):\n    return n % 7', '1', '8', '20', '35'),
      validate('code_i', 'import os\ndef f():\n    return 1', ''),
      validate('code_o', 'def f():\n    while True: pass', ''),
      ...SEED_TASKS.map((task) => ({ kind: 'check', task, answer: task.type === 'code_f' ? fence_('python', task.program) : task.type === 'code_o' ? task.outputs[0]! : task.inputs[0]! }) as VerifyJob),
      { kind: 'check', task: SEED_TASKS[0]!, answer: '[1]' },
    ];
    const one = await withPool(1, (pool) => pool.verify(jobs));
    const two = await withPool(2, (pool) => pool.verify(jobs));
    expect(two).toEqual(one);
    expect(one.map((r) => (r.kind === 'validate' ? r.validation.valid : r.kind === 'check' ? r.check.correct : r.kind))).toEqual([true, true, true, false, false, true, true, true, false]);
  });

  it('runs every job from the same state: what one job changes, the next does not see', async () => {
    const poison = validate('code_o', 'import collections\ndef f():\n    collections.Counter.most_common = lambda self, n=None: "patched"\n    return collections.Counter("aab").most_common()', '');
    const probe = validate('code_o', 'import collections\ndef f():\n    return collections.Counter("aab").most_common()', '');
    const [alone] = await withPool(1, (pool) => pool.verify([probe]));
    const [, after] = await withPool(1, (pool) => pool.verify([poison, probe]));
    expect(after).toEqual(alone);
    expect(alone).toMatchObject({ validation: { task: { outputs: ["[('a', 2), ('b', 1)]"] } } });
  });

  it('replaces a process that died, retries the job once, then gives it up as a fault; the rest is not lost', async () => {
    const payload = 'modules.process.exit(70);'; // as if the interpreter had died in the middle of the job
    const dying = validate('code_o', `${ESCAPE_MARKER}\ndef f():\n    return 1`, '');
    await withPool(
      1,
      async (pool) => {
        const results = await pool.verify([validate('code_o', 'def f(x):\n    return x + 1', '1'), dying, HEALTHY]);
        expect(results[0]).toMatchObject({ kind: 'validate', validation: { valid: true, task: { outputs: ['2'] } } });
        expect(results[1]).toMatchObject({ kind: 'fault', detail: expect.stringMatching(/^infrastructure fault on this validate job: the worker failed twice \(the Python interpreter died \(exit 70\).*; the Python interpreter died/) });
        expect(healthy(results[2])).toBe(true);
        expect(pool.faults).toBe(1);
      },
      { escapePayloadForTests: payload },
    );
  });

  it.runIf(process.platform === 'linux')('takes its sandbox processes down with it when it is killed, even one stuck in a job', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'populora-orphan-'));
    const script = join(dir, 'parent.mjs');
    const pool = new URL('../dist/src/domains/python/verifier-pool.js', import.meta.url).href;
    const stuckJob = JSON.stringify(HANGING);
    writeFileSync(script, `import { PythonVerifierPool } from ${JSON.stringify(pool)};
const pool = new PythonVerifierPool(1, { escapePayloadForTests: ${JSON.stringify(HANG_PAYLOAD)}, wallClockGuardMs: 600000 });
await pool.ready();
void pool.verify([${stuckJob}]);
console.log('stuck');
setInterval(() => {}, 1000);`);
    const parent = spawn(process.execPath, [script], { stdio: ['ignore', 'pipe', 'ignore'] });
    await new Promise<void>((resolve) => parent.stdout!.on('data', () => resolve()));
    const childrenOf = (pid: number) => readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
    const launched = childrenOf(parent.pid!); // unshare (or the worker itself where there are no namespaces)
    const sandboxProcesses = [...launched, ...launched.flatMap(childrenOf)];
    expect(sandboxProcesses.length).toBeGreaterThan(0);
    const alive = (pid: number) => existsSync(`/proc/${pid}`) && !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
    parent.kill('SIGKILL');
    for (let i = 0; i < 50 && sandboxProcesses.some(alive); i++) await sleep(100);
    expect(sandboxProcesses.filter(alive)).toEqual([]);
  });

  it('ends a job that outlives the wall-clock guard as a fault at once (no retry), and goes on', async () => {
    const guardMs = 1_500;
    await withPool(
      1,
      async (pool) => {
        await pool.ready(); // the guard counts from the hand-over, not the start-up
        // Counted, not timed (a loaded machine takes seconds to load a fresh interpreter): a hang ends its process and
        // the slot gets one fresh one; a retry would start a second.
        const starts = vi.spyOn(pool as unknown as { start(): unknown }, 'start');
        const [hung] = await pool.verify([HANGING]);
        expect(hung).toMatchObject({ kind: 'fault', detail: expect.stringContaining(`no answer within the ${guardMs} ms wall-clock guard`) });
        expect(starts).toHaveBeenCalledTimes(1);
        starts.mockRestore();
        const [next] = await pool.verify([HEALTHY]);
        expect(healthy(next)).toBe(true);
      },
      { wallClockGuardMs: guardMs, escapePayloadForTests: HANG_PAYLOAD },
    );
  });
});

describe('populora verify', () => {
  const dir = mkdtempSync(join(tmpdir(), 'populora-verify-'));
  const program = join(dir, 'program.py');
  writeFileSync(program, 'def f(xs, k):\n    return sorted(xs)[-k:]\n');
  const verify = (...args: string[]) => {
    const run = spawnSync(process.execPath, ['dist/src/cli/main.js', 'verify', '--program', program, ...args], { encoding: 'utf8' });
    return { status: run.status, stderr: run.stderr, verdict: run.status === 0 || run.status === 3 ? JSON.parse(run.stdout) : null };
  };

  it('prints the verdict as JSON and exits 0, right answer or wrong', () => {
    expect(verify('--type', 'code_o', '--input', '[3, 1, 2], 2', '--answer', '[2,3]')).toMatchObject({ status: 0, verdict: { valid: true, correct: true, reason: 'correct', fuel: expect.any(Number) } });
    expect(verify('--type', 'code_o', '--input', '[3, 1, 2], 2', '--answer', '[3]')).toMatchObject({ status: 0, verdict: { valid: true, correct: false } });
    expect(verify('--type', 'code_i', '--output', '[9]', '--answer', '[9, 1], 1')).toMatchObject({ status: 0, verdict: { valid: null, correct: true } });
    expect(verify('--type', 'code_f', '--input', '[1], 1', '--input', '[2, 1], 1', '--input', '[5, 6, 7], 2', '--input', '[4, 4], 2', '--answer', 'def f(xs, k):\n    return sorted(xs)[len(xs) - k:]')).toMatchObject({ status: 0, verdict: { valid: true, correct: true } });
  });

  it('reports an invalid task with its reason, a job past the guard as a fault with exit 3, and bad usage in one line', () => {
    writeFileSync(join(dir, 'bad.py'), 'import os\ndef f():\n    return os.getcwd()\n');
    const bad = spawnSync(process.execPath, ['dist/src/cli/main.js', 'verify', '--type', 'code_o', '--program', join(dir, 'bad.py'), '--input', ''], { encoding: 'utf8' });
    expect(bad.status).toBe(0);
    expect(JSON.parse(bad.stdout)).toMatchObject({ valid: false, reason: expect.stringMatching(/^forbidden-import: os/) });
    writeFileSync(join(dir, 'slow.py'), SLOW);
    const hang = spawnSync(process.execPath, ['dist/src/cli/main.js', 'verify', '--type', 'code_o', '--program', join(dir, 'slow.py'), '--input', '', '--guard-ms', '50'], { encoding: 'utf8' });
    expect(hang.status).toBe(3);
    expect(JSON.parse(hang.stdout)).toMatchObject({ valid: null, fault: true, reason: expect.stringContaining('wall-clock guard') });
    const missing = verify('--type', 'code_o');
    expect(missing.status).toBe(1);
    expect(missing.stderr.trim()).toBe('populora: code_o needs --input');
  });
});

describe('the hostile corpus through the fenced processes', () => {
  mkdirSync(SENTINEL_DIR, { recursive: true });
  writeFileSync(join(SENTINEL_DIR, 'secret.txt'), 'untouched');
  afterAll(() => rmSync(SENTINEL_DIR, { recursive: true, force: true }));
  const cases = HOSTILE.map((entry) => ({ entry, job: validate('code_o', entry.program, ...entry.inputs) }));
  const health = validate('code_o', HEALTH_CHECK.program, ...HEALTH_CHECK.inputs);
  const healthOutput = (() => {
    const script = `import ast, json, sys\ng = {}\nexec(sys.argv[1], g)\nprint(repr(g['f'](*ast.literal_eval('(' + sys.argv[2] + ',)'))))`;
    const run = spawnSync('python3', ['-c', script, HEALTH_CHECK.program, HEALTH_CHECK.inputs[0]!], { encoding: 'utf8', env: { ...process.env, PYTHONHASHSEED: '0' } });
    expect(run.status, `python3 is the reference: ${run.stderr}`).toBe(0);
    return run.stdout.trim();
  })();

  /** What a validation of the entry must give: its outputs where harmless, else its reason (and detail). */
  const expectVerdict = (entry: HostileProgram, outcome: VerifyOutcome | undefined) => {
    const label = `${entry.what}: ${JSON.stringify(outcome)}`;
    expect(outcome?.kind, label).toBe('validate');
    if (outcome?.kind !== 'validate') return;
    if (entry.reason === 'ok') {
      expect(outcome.validation.valid, label).toBe(true);
      if (outcome.validation.valid) expect((outcome.validation.task as CodeTask).outputs, label).toEqual(entry.outputs);
      return;
    }
    expect(outcome.validation.valid, label).toBe(false);
    if (outcome.validation.valid) return;
    // A validation parses the model's text first: without a `def f(` there is no program to run at all.
    const reason = /\bdef f\s*\(/.test(entry.program) ? entry.reason : 'format';
    expect(outcome.validation.reason.split(':')[0], label).toBe(reason);
    if (reason !== entry.reason) return;
    if (entry.detail) expect(outcome.validation.reason.slice(entry.reason.length + 2), label).toMatch(entry.detail);
  };

  it('judges every hostile program, then a healthy one in the same worker, the same with 1 and 2 workers', async () => {
    const jobs = cases.flatMap(({ job }) => [job, health]);
    // Verdicts, not the guard, are compared here: on a loaded machine a memory-heavy job can outlast a few seconds.
    const patient = { wallClockGuardMs: 120_000 };
    const one = await withPool(1, (pool) => pool.verify(jobs), patient);
    cases.forEach(({ entry }, i) => expectVerdict(entry, one[2 * i]));
    one.filter((_, i) => i % 2 === 1).forEach((outcome, i) => {
      expect(outcome, `health check after "${cases[i]!.entry.what}"`).toMatchObject({ kind: 'validate', validation: { valid: true, task: { outputs: [healthOutput] } } });
    });
    const two = await withPool(2, (pool) => pool.verify(jobs), patient);
    expect(two).toEqual(one);
    expect(readFileSync(join(SENTINEL_DIR, 'secret.txt'), 'utf8')).toBe('untouched');
    expect(readdirSync(SENTINEL_DIR)).toEqual(['secret.txt']);
  }, 600_000);

  it('gives populora verify the pool\'s verdict where it once depended on the path (deep nesting)', async () => {
    const nesting = cases.filter(({ entry }) => entry.stack === 'production' || /30,000-deep/.test(entry.what)).slice(0, 4);
    expect(nesting.length).toBeGreaterThan(2);
    const pooled = await withPool(1, (pool) => pool.verify(nesting.map(({ job }) => job)));
    const dir = mkdtempSync(join(tmpdir(), 'populora-verify-deep-'));
    nesting.forEach(({ entry }, i) => {
      const file = join(dir, `program-${i}.py`);
      writeFileSync(file, entry.program);
      const cli = spawnSync(process.execPath, ['dist/src/cli/main.js', 'verify', '--type', 'code_o', '--program', file, ...entry.inputs.flatMap((input) => ['--input', input])], { encoding: 'utf8' });
      expect(cli.status, `${entry.what}: ${cli.stderr}`).toBe(0);
      const verdict = JSON.parse(cli.stdout) as { valid: boolean; reason: string; task?: { outputs: string[] } };
      const pool = pooled[i]!;
      if (pool.kind !== 'validate') throw new Error(`${entry.what}: ${JSON.stringify(pool)}`);
      expect(verdict.valid, entry.what).toBe(pool.validation.valid);
      if (pool.validation.valid) expect(verdict.task?.outputs).toEqual((pool.validation.task as CodeTask).outputs);
      else expect(verdict.reason).toBe(pool.validation.reason);
    });
  }, 300_000);
});
