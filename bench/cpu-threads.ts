// What the CPU backend's threads cost (src/backend/cpu-threads.ts), in alternating rounds:
//   1. a job's round trip: waking the workers and waiting for them, each share an empty kernel call, with the
//      backend's Atomics pool (call lists in the arena, Atomics.notify / Atomics.wait) against piscina (a message
//      per share, awaited: the way the issue suggested), at 2..N threads;
//   2. the threshold: a matmul of one token (decode) and of 32 tokens against w [N, K] for growing N, at 1 and at
//      N threads, every split forced (a share may hold one multiply-add): the work from which N threads win is
//      what MIN_WORK_PER_SHARE should be.
// Prints tables; writes JSON.
//
//   node dist/bench/cpu-threads.js [--threads 2] [--rounds 5] [--jobs 2000] [--out bench/results/cpu-threads.json]

import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname } from 'node:path';
import { Piscina } from 'piscina';
import { benchArgs, BenchUsageError } from './args.js';
import { cpuArena } from '../src/backend/cpu-arena.js';
import * as dense from '../src/backend/cpu-dense.js';
import { CpuThreads, kernelModules, MIN_WORK_PER_SHARE, type KernelCall } from '../src/backend/cpu-threads.js';
import { CpuBackend } from '../src/backend/cpu.js';
import { compiledWorker } from '../src/runtime/worker-threads.js';

const args = benchArgs(import.meta.url, {
  options: {
    threads: { type: 'string', default: '2' },
    rounds: { type: 'string', default: '5' },
    jobs: { type: 'string', default: '2000' },
    out: { type: 'string', default: 'bench/results/cpu-threads.json' },
  },
});
const [threads, rounds, jobs] = [Number(args.threads), Number(args.rounds), Number(args.jobs)];
if (!(threads >= 2)) throw new BenchUsageError('--threads: at least 2 (one thread has no workers to wake)');

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
/** A matmul call with no tokens: the kernel returns at once, so a job costs only its dispatch. */
const EMPTY: KernelCall = { fn: 'matmul', memory: 0, args: [0, 0, 8, 0, 8, 0, 0, 0, 1, 0, 8] };

/**
 * piscina's way: a task (a message) a worker's share, awaited: a synchronous op cannot block on piscina (its results
 * and its workers' readiness arrive as messages on the event loop), so this is also the cost of making every op async.
 */
function piscinaJob(pool: Piscina, workers: number): () => Promise<void> {
  return async () => {
    await Promise.all(Array.from({ length: workers }, () => pool.run([EMPTY])));
  };
}

async function usPerJobAsync(job: () => Promise<void>): Promise<number> {
  const start = performance.now();
  for (let i = 0; i < jobs; i++) await job();
  return ((performance.now() - start) * 1000) / jobs;
}

async function roundTrips() {
  const rows: Array<{ threads: number; atomicsUs: number[]; piscinaUs: number[] }> = [];
  for (let n = 2; n <= threads; n++) {
    const pool = CpuThreads.open(n, 1);
    const piscina = new Piscina({ filename: compiledWorker(new URL('./cpu-threads-piscina-worker.js', import.meta.url)), minThreads: n - 1, maxThreads: n - 1, idleTimeout: Infinity, workerData: { memory: cpuArena().memory(0), modules: kernelModules() } });
    const row = { threads: n, atomicsUs: [] as number[], piscinaUs: [] as number[] };
    const atomics = async () => pool.run(Array.from({ length: n }, () => [EMPTY]));
    const viaPiscina = piscinaJob(piscina, n - 1);
    for (let i = 0; i < 200; i++) await Promise.all([atomics(), viaPiscina()]); // warm-up: workers started, code optimised
    for (let round = 0; round < rounds; round++) {
      for (const name of round % 2 ? ['piscina', 'atomics'] : ['atomics', 'piscina']) {
        if (name === 'atomics') row.atomicsUs.push(await usPerJobAsync(atomics));
        else row.piscinaUs.push(await usPerJobAsync(viaPiscina));
      }
    }
    rows.push(row);
    pool.close();
    await piscina.destroy();
  }
  return rows;
}

function thresholds() {
  const one = new CpuBackend({ threads: 1 });
  const many = CpuThreads.open(threads, 1);
  const rows: Array<{ tokens: number; K: number; N: number; work: number; oneUs: number[]; manyUs: number[]; ratio: number }> = [];
  for (const [T, K] of [[1, 256], [1, 896], [32, 256]] as const) {
    for (const N of [8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4864]) {
      const w = one.uploadWeight(Float32Array.from({ length: N * K }, (_, i) => Math.sin(i)), [N, K], 'f32');
      const x = one.upload(Float32Array.from({ length: T * K }, (_, i) => Math.cos(i)), [T, K]);
      const reps = Math.max(20, Math.min(5000, Math.floor(2e8 / (T * N * K))));
      const time = (t: CpuThreads) => {
        const start = performance.now();
        for (let i = 0; i < reps; i++) dense.matmul(x, w, undefined, t);
        return ((performance.now() - start) * 1000) / reps;
      };
      const row = { tokens: T, K, N, work: T * N * K, oneUs: [] as number[], manyUs: [] as number[], ratio: 0 };
      const single = CpuThreads.open(1);
      time(single), time(many); // warm-up
      for (let round = 0; round < rounds; round++) {
        for (const t of round % 2 ? [many, single] : [single, many]) (t === single ? row.oneUs : row.manyUs).push(time(t));
      }
      row.ratio = median(row.oneUs) / median(row.manyUs);
      rows.push(row);
    }
  }
  many.close();
  return rows;
}

const loadBefore = loadavg()[0]!;
const trips = await roundTrips();
const products = thresholds();
const loadAfter = loadavg()[0]!;
console.log(`\nload average (1 min) ${loadBefore.toFixed(1)} before, ${loadAfter.toFixed(1)} after; medians of ${rounds} alternating rounds\n`);
console.log('| threads | job round trip, Atomics pool (µs) | piscina, a message a share (µs) | piscina / Atomics |');
console.log('|---:|---:|---:|---:|');
for (const r of trips) console.log(`| ${r.threads} | ${median(r.atomicsUs).toFixed(1)} | ${median(r.piscinaUs).toFixed(1)} | ${(median(r.piscinaUs) / median(r.atomicsUs)).toFixed(2)}x |`);
console.log(`\nmatmul at 1 and ${threads} threads, every split forced (MIN_WORK_PER_SHARE now ${MIN_WORK_PER_SHARE} multiply-adds)\n`);
console.log(`| tokens × K × N | multiply-adds | 1 thread µs | ${threads} threads µs | speed-up |`);
console.log('|---|---:|---:|---:|---:|');
for (const r of products) console.log(`| ${r.tokens} × ${r.K} × ${r.N} | ${r.work} | ${median(r.oneUs).toFixed(1)} | ${median(r.manyUs).toFixed(1)} | ${r.ratio.toFixed(2)}x |`);
mkdirSync(dirname(args.out!), { recursive: true });
writeFileSync(args.out!, JSON.stringify({ threads, rounds, jobs, loadBefore, loadAfter, minWorkPerShare: MIN_WORK_PER_SHARE, roundTrips: trips, matmul: products }, null, 2));
console.log(`\nwrote ${args.out}`);
