// What bounds a lone token's products on this machine (batch-1 decode on the CPU backend): memory bandwidth or
// arithmetic. In alternating rounds, at 1 and 2 threads (worker threads over one shared WebAssembly memory, each
// owning a contiguous part):
//   read        a WebAssembly read loop (v128 loads, 64 bytes an iteration) over --gib GiB: the bandwidth a kernel can get;
//   blocks      matmulBlocks (kernels/cpu/dense.wat) of one token against w [N, 896] in row blocks, the plain build
//               (dense.wasm) and the fused one (dense_fma.wasm): N = 151,936 (the 0.5B LM head, 544 MB: from memory)
//               and N = 896 (3.2 MB, a q projection: from cache), in GMAC/s and GB/s of weights;
//   rowmajor    matmul, the row-major kernel a weight past the row-block budget takes, on the LM head, both builds;
//   down × 8    the down projection (w [896, 4864], 17 MB) against 8 tokens (8 × 8 decode), row blocks against the
//               row-major kernel (which it takes while 8 tokens' x, 311 KB as f64, is over MAX_BLOCK_X_BYTES), fused.
// Prints a table of medians; writes JSON.
//
//   node dist/bench/cpu-bandwidth.js [--threads 1,2] [--rounds 5] [--gib 1] [--out bench/results/cpu-bandwidth.json]

import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname } from 'node:path';
import { Worker } from 'node:worker_threads';
import { benchArgs, BenchUsageError } from './args.js';
import { cpuKernelBuild, cpuKernelModule } from '../src/backend/kernel-files.js';
import { watModule } from './wat.js';

const args = benchArgs(import.meta.url, {
  options: {
    threads: { type: 'string', default: '1,2' },
    rounds: { type: 'string', default: '5' },
    gib: { type: 'string', default: '1' },
    out: { type: 'string', default: 'bench/results/cpu-bandwidth.json' },
  },
});
const threadCounts = args.threads.split(',').map(Number);
const [rounds, gib] = [Number(args.rounds), Number(args.gib)];
if (!threadCounts.every((n) => Number.isInteger(n) && n >= 1)) throw new BenchUsageError(`--threads: thread counts (1,2), not ${args.threads}`);
if (!(gib > 0 && gib <= 2)) throw new BenchUsageError(`--gib: the bytes the read loop reads, in GiB, 0 to 2 (not ${args.gib})`);
if (cpuKernelBuild('dense') !== 'dense_fma') throw new BenchUsageError('this V8 does not compile relaxed SIMD (or POPULORA_CPU_FMA=0): no fused build to time');

const READ_WAT = `(module (import "env" "memory" (memory 1 65536 shared))
  (func (export "read") (param $at i32) (param $end i32) (result i32) (local $a v128) (local $b v128) (local $c v128) (local $d v128)
    (block $done (loop $more (br_if $done (i32.ge_u (local.get $at) (local.get $end)))
      (local.set $a (i32x4.add (local.get $a) (v128.load offset=0 (local.get $at))))
      (local.set $b (i32x4.add (local.get $b) (v128.load offset=16 (local.get $at))))
      (local.set $c (i32x4.add (local.get $c) (v128.load offset=32 (local.get $at))))
      (local.set $d (i32x4.add (local.get $d) (v128.load offset=48 (local.get $at))))
      (local.set $at (i32.add (local.get $at) (i32.const 64))) (br $more)))
    (i32x4.extract_lane 0 (i32x4.add (i32x4.add (local.get $a) (local.get $b)) (i32x4.add (local.get $c) (local.get $d))))))`;

// A worker: its own instances over the shared memory; each message runs one call `reps` times and answers.
const WORKER = `const { parentPort, workerData } = require('node:worker_threads');
const env = { memory: workerData.memory };
const instances = Object.fromEntries(Object.entries(workerData.modules).map(([name, m]) => [name, new WebAssembly.Instance(m, { env }).exports]));
parentPort.on('message', ({ module, fn, args, reps }) => { for (let i = 0; i < reps; i++) instances[module][fn](...args); parentPort.postMessage(0); });`;

const GIB = 2 ** 30;
const [K, HEAD_ROWS, Q_ROWS, DOWN_K, DOWN_T] = [896, 151936, 896, 4864, 8];
const headBytes = HEAD_ROWS * K * 4;
// memory: [read region | LM head (row blocks, then the same bytes read row-major) | x | bias | out]
const readBytes = Math.floor(gib * GIB);
const [wAt, xAt] = [readBytes, readBytes + headBytes + 64];
const xBytes = DOWN_T * DOWN_K * 8;
const [biasAt, outAt] = [xAt + xBytes + 64, xAt + xBytes + 64 + HEAD_ROWS * 4 + 64];
const totalBytes = outAt + HEAD_ROWS * 4 + 64;
const memory = new WebAssembly.Memory({ initial: Math.ceil(totalBytes / 65536), maximum: 65536, shared: true });
{
  new Uint32Array(memory.buffer, 0, readBytes / 4).fill(0x01020304); // (pages never written read as the zero page: from cache)
  const w = new Float32Array(memory.buffer, wAt, HEAD_ROWS * K);
  for (let i = 0; i < w.length; i++) w[i] = Math.fround(Math.sin(i) / 16);
  new Float64Array(memory.buffer, xAt, DOWN_T * DOWN_K).set(Float32Array.from({ length: DOWN_T * DOWN_K }, (_, k) => Math.cos(k)));
}

const modules = { read: await watModule('read.wat', READ_WAT), plain: cpuKernelModule('dense'), fused: cpuKernelModule('dense_fma') };
const workers = new Map<number, Worker[]>();
const workersFor = (n: number) => {
  if (!workers.has(n)) workers.set(n, Array.from({ length: n }, () => new Worker(WORKER, { eval: true, workerData: { memory, modules } })));
  return workers.get(n)!;
};

/** Wall ms for `reps` calls of each part (one a thread, run at once). */
async function timed(parts: Array<{ module: string; fn: string; args: number[] }>, reps: number): Promise<number> {
  const pool = workersFor(parts.length);
  const start = performance.now();
  await Promise.all(parts.map((part, i) => new Promise((done) => (pool[i]!.once('message', done), pool[i]!.postMessage({ ...part, reps })))));
  return performance.now() - start;
}

/** [first, end) of rows 0..N cut into n parts, in multiples of 16. */
const cut = (N: number, n: number) => Array.from({ length: n }, (_, i) => [Math.floor((N / 16) * i / n) * 16, i === n - 1 ? N : Math.floor((N / 16) * (i + 1) / n) * 16] as const);

/** A timed case: the bytes and multiply-adds of one call, and its wall ms at n threads. */
interface Case { name: string; bytes: number; macs: number; ms: (threads: number) => Promise<number> }
const blocks = (build: 'plain' | 'fused', N: number, reps: number): Case => ({
  name: `blocks ${build}, N ${N}`,
  bytes: N * K * 4,
  macs: N * K,
  ms: async (n) => (await timed(cut(N, n).map(([first, end]) => ({ module: build, fn: 'matmulBlocks', args: [xAt, 1, K, wAt, N, biasAt, outAt, 0, 1, first, end] })), reps)) / reps,
});
const CASES: Case[] = [
  { name: 'read', bytes: readBytes, macs: 0, ms: (n) => timed(cut(readBytes / 64, n).map(([first, end]) => ({ module: 'read', fn: 'read', args: [first * 64, end * 64] })), 1) },
  blocks('plain', HEAD_ROWS, 1),
  blocks('fused', HEAD_ROWS, 1),
  blocks('plain', Q_ROWS, 200),
  blocks('fused', Q_ROWS, 200),
  ...(['plain', 'fused'] as const).map((build): Case => ({
    name: `rowmajor ${build}, N ${HEAD_ROWS}`,
    bytes: headBytes,
    macs: HEAD_ROWS * K,
    ms: (n) => timed(cut(HEAD_ROWS, n).map(([first, end]) => ({ module: build, fn: 'matmul', args: [xAt, 1, K, wAt, HEAD_ROWS, biasAt, outAt, 0, 1, first, end] })), 1),
  })),
  ...(['matmulBlocks', 'matmul'] as const).map((fn): Case => ({
    name: `down × 8 ${fn === 'matmul' ? 'rowmajor' : 'blocks'} fused`,
    bytes: K * DOWN_K * 4,
    macs: DOWN_T * K * DOWN_K,
    ms: async (n) => (await timed(cut(K, n).map(([first, end]) => ({ module: 'fused', fn, args: [xAt, DOWN_T, DOWN_K, wAt, K, biasAt, outAt, 0, 1, first, end] })), 20)) / 20,
  })),
];

const samples = new Map<string, number[]>();
const loads: number[] = [];
for (let round = 0; round < rounds; round++) {
  loads.push(loadavg()[0]!);
  const order = round % 2 ? [...CASES].reverse() : CASES;
  for (const c of order)
    for (const n of round % 2 ? [...threadCounts].reverse() : threadCounts) {
      const ms = await c.ms(n);
      const key = `${c.name}|${n}`;
      samples.set(key, [...(samples.get(key) ?? []), ms]);
    }
}
loads.push(loadavg()[0]!);

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
const rows = [];
console.log(`load average ${Math.min(...loads).toFixed(1)}-${Math.max(...loads).toFixed(1)}, ${rounds} rounds, medians`);
console.log('case                          threads      ms    GB/s   GMAC/s');
for (const c of CASES)
  for (const n of threadCounts) {
    const { bytes, macs } = c;
    const ms = median(samples.get(`${c.name}|${n}`)!);
    const row = { case: c.name, threads: n, ms, gbPerS: bytes / ms / 1e6, gmacPerS: macs / ms / 1e6, samplesMs: samples.get(`${c.name}|${n}`) };
    rows.push(row);
    console.log(`${c.name.padEnd(30)}${String(n).padStart(7)}${ms.toFixed(2).padStart(8)}${row.gbPerS.toFixed(1).padStart(8)}${(macs ? row.gmacPerS.toFixed(2) : '-').padStart(9)}`);
  }
mkdirSync(dirname(args.out), { recursive: true });
writeFileSync(args.out, JSON.stringify({ loadAverage: [Math.min(...loads), Math.max(...loads)], rounds, gib, rows }, null, 2) + '\n');
console.log(`wrote ${args.out}`);
for (const pool of workers.values()) for (const w of pool) await w.terminate();
