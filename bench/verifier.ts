// The code domain's verifier: start-up of one sandbox (Pyodide and the sandbox's Python), memory per pool worker, and
// typical AZR-style tasks verified per second, in one interpreter (per core) and through the pool of sandbox
// processes. A proposal's validation runs its program twice (the determinism check); every job first restores the
// interpreter's memory snapshot, whose cost is also timed alone. Prints a table; writes JSON.
//
//   node dist/bench/verifier.js [--jobs 240] [--workers 2] [--out bench/results/verifier.json]

import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { dirname } from 'node:path';
import { benchArgs } from './args.js';
import type { VerifyJob } from '../src/domains/domain.js';
import { DEFAULT_FUEL, PythonExecutor } from '../src/domains/python/executor.js';
import { proposalText } from '../src/domains/python/tasks.js';
import { verifyCode } from '../src/domains/python/verify-jobs.js';
import { PythonVerifierPool } from '../src/domains/python/verifier-pool.js';

const args = benchArgs(import.meta.url, { options: { jobs: { type: 'string', default: '240' }, workers: { type: 'string', default: '2' }, out: { type: 'string', default: 'bench/results/verifier.json' } } });
const jobCount = Number(args.jobs);
const workers = Number(args.workers);

const TYPICAL: Array<{ program: string; inputs: string[] }> = [
  { program: 'def f(xs, k):\n    return sorted(xs, reverse=True)[:k]', inputs: ['[4, 9, 1, 7], 2', '[3], 1', '[5, 5, 2], 3', '[0, -1, 8, 6, 2], 4'] },
  { program: 'def f(s):\n    seen, out = set(), []\n    for ch in s:\n        if ch not in seen:\n            seen.add(ch)\n            out.append(ch)\n    return "".join(out)', inputs: ["'mississippi'", "'abcabc'", "''", "'zzz'"] },
  { program: 'from collections import defaultdict\ndef f(pairs):\n    groups = defaultdict(list)\n    for k, v in pairs:\n        groups[k].append(v)\n    return dict(sorted(groups.items()))', inputs: ["[('a', 1), ('b', 2), ('a', 3)]", '[]', "[('x', 0)]", "[('q', 1), ('q', 1)]"] },
  { program: 'def f(n):\n    primes = []\n    for c in range(2, n):\n        if all(c % p for p in primes if p * p <= c):\n            primes.append(c)\n    return primes[-3:]', inputs: ['30', '10', '100', '50'] },
  { program: 'def f(matrix):\n    return [sum(row) for row in matrix] + [sum(col) for col in zip(*matrix)]', inputs: ['[[1, 2], [3, 4]]', '[[5]]', '[[1, 0, 1], [0, 1, 0]]', '[[2, 2], [2, 2], [2, 2]]'] },
  { program: 'def f(text):\n    words = text.split()\n    return {w: len(w) for w in words if len(w) > 2}', inputs: ["'the cat sat on a mat'", "'hi'", "'python is fun'", "'a bb ccc dddd'"] },
];

function jobsOf(n: number): VerifyJob[] {
  const jobs: VerifyJob[] = [];
  for (let i = 0; jobs.length < n; i++) {
    const { program, inputs } = TYPICAL[i % TYPICAL.length]!;
    const type = (['code_o', 'code_i', 'code_f'] as const)[i % 3]!;
    jobs.push({ kind: 'validate', taskType: type, text: proposalText(program, type === 'code_f' ? inputs : inputs.slice(0, 1)) });
  }
  return jobs;
}

const mb = (bytes: number) => bytes / 2 ** 20;
const rows: Array<Record<string, string | number>> = [];

// Start-up and one interpreter's throughput (one core).
let start = performance.now();
const rssBefore = process.memoryUsage().rss;
const python = await PythonExecutor.load();
const startupMs = performance.now() - start;
const interpreterMb = mb(process.memoryUsage().rss - rssBefore);
const jobs = jobsOf(jobCount);
jobs.slice(0, 12).forEach((job) => verifyCode(python, job, DEFAULT_FUEL)); // warm: imports, caches
start = performance.now();
const verdicts = jobs.map((job) => verifyCode(python, job, DEFAULT_FUEL));
const inlineS = (performance.now() - start) / 1000;
const invalid = verdicts.filter((v) => v.kind === 'validate' && !v.validation.valid);
if (invalid.length > 0) throw new Error(`a typical task was refused: ${JSON.stringify(invalid[0])}`);
rows.push({ setting: 'one interpreter (1 core)', jobs: jobs.length, programRunsPerS: (2 * jobs.length) / inlineS, jobsPerS: jobs.length / inlineS, jobsPerSPerCore: jobs.length / inlineS });
const wasmHeapMb = mb(python.heapBytes);
start = performance.now();
for (let i = 0; i < 50; i++) python.restore();
const restoreMs = (performance.now() - start) / 50;
python.close();

// The pool: start-up of its processes (each loads Pyodide), then steady throughput.
const pool = new PythonVerifierPool(workers);
start = performance.now();
await pool.ready();
const poolStartupMs = performance.now() - start;
await pool.verify(jobsOf(workers * 6)); // warm
start = performance.now();
await pool.verify(jobs);
const poolS = (performance.now() - start) / 1000;
const perWorkerMb = mb(descendantsRssBytes(process.pid)) / workers;
await pool.close();
rows.push({ setting: `pool, ${workers} processes`, jobs: jobs.length, programRunsPerS: (2 * jobs.length) / poolS, jobsPerS: jobs.length / poolS, jobsPerSPerCore: jobs.length / poolS / Math.min(workers, cpus().length) });

/** Resident memory of every process below `pid` (Linux /proc; 0 elsewhere). */
function descendantsRssBytes(pid: number): number {
  try {
    const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
    const rssKb = (child: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${child}/status`, 'utf8'))?.[1] ?? 0);
    return children.reduce((sum, child) => sum + rssKb(child) * 1024 + descendantsRssBytes(child), 0);
  } catch {
    return 0;
  }
}

console.log(`sandbox start-up ${startupMs.toFixed(0)} ms in this thread (RSS +${interpreterMb.toFixed(0)} MiB, WebAssembly heap ${wasmHeapMb.toFixed(0)} MiB, restored in ${restoreMs.toFixed(2)} ms); pool of ${workers} processes ready in ${poolStartupMs.toFixed(0)} ms, ${perWorkerMb.toFixed(0)} MiB RSS per process; ${cpus().length} cores`);
console.log('| setting | validations | validations/s | per core | program runs/s |');
console.log('|---|---:|---:|---:|---:|');
for (const r of rows) console.log(`| ${r.setting} | ${r.jobs} | ${(r.jobsPerS as number).toFixed(0)} | ${(r.jobsPerSPerCore as number).toFixed(0)} | ${(r.programRunsPerS as number).toFixed(0)} |`);
mkdirSync(dirname(args.out!), { recursive: true });
writeFileSync(args.out!, JSON.stringify({ cores: cpus().length, startupMs, interpreterMb, wasmHeapMb, restoreMs, poolStartupMs, perWorkerMb, rows }, null, 2));
