// The code domain's verifier pool: verdicts independent of the number of workers, a crashed or hung worker
// replaced with its job retried once and then given up as a fault (never a verdict), and `populora verify`.

import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { VerifyJob } from '../src/domains/domain.js';
import { PythonVerifierPool, type PythonPoolOptions } from '../src/domains/python/verifier-pool.js';
import { SEED_TASKS } from '../src/domains/python/tasks.js';

const fence = (tag: string, body: string) => `\`\`\`${tag}\n${body}\n\`\`\``;
const validate = (taskType: 'code_o' | 'code_i' | 'code_f', program: string, ...inputs: string[]): VerifyJob => ({ kind: 'validate', taskType, text: [fence('python', program), ...inputs.map((i) => fence('input', i))].join('\n') });

// Nested a million deep, repr overflows the thread's stack (16 MB) and the interpreter dies. It needs ~3M steps:
// the default fuel stops it long before, which is why the pool that runs it here has more.
const CRASHER = 'def f():\n    x = []\n    for i in range(1000000):\n        x = [x]\n    return repr(x)';
const HANGER = 'import itertools\ndef f():\n    return sum(itertools.count())'; // one C call that never returns: no fuel is spent

async function withPool<T>(workers: number, use: (pool: PythonVerifierPool) => Promise<T>, options: PythonPoolOptions = {}): Promise<T> {
  const pool = new PythonVerifierPool(workers, options);
  try {
    return await use(pool);
  } finally {
    await pool.close();
  }
}

describe('the Python verifier pool', () => {
  it('gives the same verdicts in job order with 1 or 2 workers', async () => {
    const jobs: VerifyJob[] = [
      validate('code_o', 'def f(words):\n    return sorted(set(words))', "['b', 'a', 'b', 'c']"),
      validate('code_o', 'def f(n):\n    return {str(i) for i in range(n)}', '12'), // set order: str hashes, seeded alike in every worker
      validate('code_f', 'def f(n):\n    return n % 7', '1', '8', '20', '35'),
      validate('code_i', 'import os\ndef f():\n    return 1', ''),
      validate('code_o', 'def f():\n    while True: pass', ''),
      ...SEED_TASKS.map((task) => ({ kind: 'check', task, answer: task.type === 'code_f' ? fence('python', task.program) : task.type === 'code_o' ? task.outputs[0]! : task.inputs[0]! }) as VerifyJob),
      { kind: 'check', task: SEED_TASKS[0]!, answer: '[1]' },
    ];
    const one = await withPool(1, (pool) => pool.verify(jobs));
    const two = await withPool(2, (pool) => pool.verify(jobs));
    expect(two).toEqual(one);
    expect(one.map((r) => (r.kind === 'validate' ? r.validation.valid : r.kind === 'check' ? r.check.correct : r.kind))).toEqual([true, true, true, false, false, true, true, true, false]);
  });

  it('replaces a worker whose interpreter died, retries the job once, then gives it up as a fault; the rest is not lost', async () => {
    await withPool(1, async (pool) => {
      const results = await pool.verify([validate('code_o', 'def f(x):\n    return x + 1', '1'), validate('code_o', CRASHER, ''), validate('code_o', 'def f(x):\n    return x * 2', '4')]);
      expect(results[0]).toMatchObject({ kind: 'validate', validation: { valid: true, task: { outputs: ['2'] } } });
      expect(results[1]).toMatchObject({ kind: 'fault', detail: expect.stringMatching(/^infrastructure fault: the worker failed twice on this validate job \(worker exited with code: 70; worker exited with code: 70\)/) });
      expect(results[2]).toMatchObject({ kind: 'validate', validation: { valid: true, task: { outputs: ['8'] } } });
      expect(pool.faults).toBe(1);
    }, { fuel: 10_000_000 });
  });

  it('ends a job that outlives the wall-clock guard as an infrastructure fault, and goes on', async () => {
    await withPool(
      1,
      async (pool) => {
        const [hung] = await pool.verify([validate('code_o', HANGER, '')]);
        expect(hung).toMatchObject({ kind: 'fault', detail: expect.stringContaining('wall-clock guard') });
        const [next] = await pool.verify([validate('code_o', 'def f():\n    return 3', '')]);
        expect(next).toMatchObject({ kind: 'validate', validation: { valid: true } });
      },
      { wallClockGuardMs: 10_000 }, // above a worker's start-up (Pyodide loads in ~3 s), far above any fuel-limited program
    );
  });
});

describe('populora verify', () => {
  const dir = mkdtempSync(join(tmpdir(), 'populora-verify-'));
  const program = join(dir, 'program.py');
  writeFileSync(program, 'def f(xs, k):\n    return sorted(xs)[-k:]\n');
  const verify = (...args: string[]) => {
    const run = spawnSync(process.execPath, ['dist/src/cli/main.js', 'verify', '--program', program, ...args], { encoding: 'utf8' });
    return { status: run.status, stderr: run.stderr, verdict: run.status === 0 ? JSON.parse(run.stdout) : null };
  };

  it('prints the verdict as JSON and exits 0, right answer or wrong', () => {
    expect(verify('--type', 'code_o', '--input', '[3, 1, 2], 2', '--answer', '[2,3]')).toMatchObject({ status: 0, verdict: { valid: true, correct: true, reason: 'correct', fuel: expect.any(Number) } });
    expect(verify('--type', 'code_o', '--input', '[3, 1, 2], 2', '--answer', '[3]')).toMatchObject({ status: 0, verdict: { valid: true, correct: false } });
    expect(verify('--type', 'code_i', '--output', '[9]', '--answer', '[9, 1], 1')).toMatchObject({ status: 0, verdict: { correct: true } });
    expect(verify('--type', 'code_f', '--input', '[1], 1', '--input', '[2, 1], 1', '--input', '[5, 6, 7], 2', '--input', '[4, 4], 2', '--answer', 'def f(xs, k):\n    return sorted(xs)[len(xs) - k:]')).toMatchObject({ status: 0, verdict: { valid: true, correct: true } });
  });

  it('reports an invalid task with its reason, and bad usage in one line', () => {
    writeFileSync(join(dir, 'bad.py'), 'import os\ndef f():\n    return os.getcwd()\n');
    const bad = spawnSync(process.execPath, ['dist/src/cli/main.js', 'verify', '--type', 'code_o', '--program', join(dir, 'bad.py'), '--input', ''], { encoding: 'utf8' });
    expect(bad.status).toBe(0);
    expect(JSON.parse(bad.stdout)).toMatchObject({ valid: false, reason: expect.stringMatching(/^forbidden-import: os/) });
    const missing = verify('--type', 'code_o');
    expect(missing.status).toBe(1);
    expect(missing.stderr.trim()).toBe('populora: code_o needs --input');
  });
});
