// The code domain's verifier: start-up of one sandbox (Pyodide and the sandbox's Python), memory per pool worker, and
// typical AZR-style tasks verified per second, in one interpreter (per core) and through the pool of sandbox
// processes. A proposal's validation runs its program twice (the determinism check), each run from the memory
// image, as is each comparison; the restore's cost is also timed alone. Then each job's pool time (the wall-clock
// time it held a worker, restarts included): for the typical jobs (median, p99, max) and for hostile ones that do
// much work per step of fuel, each with its verdict: they must end by counting, long before the guard. Prints
// tables; writes JSON.
//
//   node dist/bench/verifier.js [--jobs 240] [--workers 2] [--out bench/results/verifier.json]

import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
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
const typicalPoolMs = summary(pool.jobTimes);
const perWorkerMb = mb(descendantsRssBytes(process.pid)) / workers;
await pool.close();
rows.push({ setting: `pool, ${workers} processes`, jobs: jobs.length, programRunsPerS: (2 * jobs.length) / poolS, jobsPerS: jobs.length / poolS, jobsPerSPerCore: jobs.length / poolS / Math.min(workers, cpus().length) });

// Hostile jobs, each doing much work per step of fuel (library arithmetic and iteration, comparisons of long lists,
// amplifiers), one worker: their verdicts and pool times. The last one is the known residual: integers sharing one
// hash inserted one by one, quadratic in C, which no count sees; the guard ends it, as a fault.
const HOSTILE: Array<[string, string]> = [
  ['Fraction divisions growing', 'from fractions import Fraction\ndef f():\n    x, y = Fraction(3, 7), Fraction(11, 13)\n    for _ in range(3000):\n        x = x / y + 1\n    return x > 0'],
  ['Counter.elements in C', 'import collections\ndef f():\n    collections.deque(collections.Counter({"a": 10 ** 9}).elements(), maxlen=0)\n    return 1'],
  ['statistics, again and again', 'import statistics\ndef f():\n    xs = list(range(20000))\n    return sum(statistics.mean(xs) for _ in range(2000))'],
  ['big-integer divisions', 'def f():\n    a, b, t = 7 ** 30000, 3 ** 15000, 0\n    for _ in range(3000):\n        t += a // b % 7\n    return t'],
  ['in over a long list', 'def f():\n    xs = list(range(200000))\n    return sum(-1 in xs for _ in range(20000))'],
  ['== of long lists', 'def f():\n    xs, ys = list(range(200000)), list(range(200000))\n    return sum(xs == ys for _ in range(20000))'],
  ['a string doubled again and again', "def f():\n    s = 'x'\n    for _ in range(40):\n        s = s + s\n    return len(s)"],
  ['list.count tuned to the guard', 'def f():\n    lst = [0] * 1000000\n    t = 0\n    for _ in range(70):\n        t += lst.count(1)\n    return t'],
  ['slices of a long list', 'def f():\n    s = list(range(1000000))\n    return sum(len(s[1:]) for _ in range(100000))'],
  ['deepcopy, again and again', 'import copy\ndef f():\n    xs = [[i] for i in range(5000)]\n    return sum(len(copy.deepcopy(xs)) for _ in range(500))'],
  ['colliding hashes one by one (residual)', 'def f():\n    m = 2 ** 31 - 1\n    return len({i * m for i in range(60000)})'],
];
const hostilePool = new PythonVerifierPool(1);
await hostilePool.ready();
const hostileOutcomes = await hostilePool.verify(HOSTILE.map(([, program]) => ({ kind: 'validate', taskType: 'code_o', text: proposalText(program, ['']) }) as VerifyJob));
const hostile = HOSTILE.map(([what], i) => {
  const outcome = hostileOutcomes[i]!;
  const verdict = outcome.kind === 'fault' ? 'fault (guard)' : outcome.kind === 'validate' && !outcome.validation.valid ? outcome.validation.reason.split(':')[0]! : 'valid';
  return { what, verdict, poolMs: hostilePool.jobTimes[i]! };
});
const guardMs = hostilePool.guardMs;
await hostilePool.close();

/** Median, 99th percentile and maximum of a list of times. */
function summary(times: number[]): { medianMs: number; p99Ms: number; maxMs: number } {
  const sorted = [...times].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  return { medianMs: at(0.5), p99Ms: at(0.99), maxMs: sorted[sorted.length - 1]! };
}

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
console.log(`\npool time per typical job: median ${typicalPoolMs.medianMs.toFixed(1)} ms, p99 ${typicalPoolMs.p99Ms.toFixed(1)} ms, max ${typicalPoolMs.maxMs.toFixed(1)} ms`);
console.log(`\n| hostile job (one worker, guard ${guardMs} ms) | verdict | pool ms |`);
console.log('|---|---|---:|');
for (const h of hostile) console.log(`| ${h.what} | ${h.verdict} | ${h.poolMs.toFixed(0)} |`);
mkdirSync(dirname(args.out!), { recursive: true });
writeFileSync(args.out!, JSON.stringify({ cores: cpus().length, loadAverage: loadavg(), startupMs, interpreterMb, wasmHeapMb, restoreMs, poolStartupMs, perWorkerMb, rows, typicalPoolMs, guardMs, hostile }, null, 2));
