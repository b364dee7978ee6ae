// populora builds side by side on the CPU backend, beside llama.cpp's CPU backend and PyTorch, in one run: this
// build and others checked out and built in worktrees of their own (--builds old=/work/wt-old,main=/work/wt-main),
// each timed by the same code (bench/peers/populora-build.ts imports its model and trainer), on the same model and
// 8 adapters (rank 16 on all seven projections), at the same thread counts:
//   - prompt (a prefill) and decode tokens/s at batch 1 on the base model, and at batch 8 across the 8 adapters
//     (llama.cpp: one adapter set a context, one sequence at a time, the times summed);
//   - a LoRA training step (--train-batch sequences of --seq tokens over the adapters: forward, backward, AdamW),
//     beside PyTorch's same step (bench/peers/torch_lora_step.py).
// One side at a time holds the model (a 0.5B model's five sides at once would need ~12 GB): each round starts
// every side in turn, times all it runs at every thread count, and ends it; rounds alternate the sides' order. A
// build without threads runs 1 thread only. Before timing, every build must give the same next-token logits, bit
// for bit, as this one (the f16 values and the sums' order are the same in every build). llama.cpp and PyTorch are
// checked against populora by bench/cpu-peers.js on the same folders; here only timed. Prints a table; writes JSON.
// --sums f64,f32 times this build a second time with its dense products summed in f32 (the scenario's
// `backend: {name: cpu, sums: f32}`), a side of its own ("this f32") with logits of its own.
//
//   npm run build && node dist/bench/cpu-builds.js --builds old=/work/wt-old,main=/work/wt-main
//       [--preset qwen2.5-0.5b-shape] [--threads 1,2] [--prompt 16] [--decode 8] [--train-batch 8] [--seq 32]
//       [--train-repeats 1] [--rounds 2] [--peers llama.cpp,torch] [--parts inference,training] [--sums f64]
//       [--out bench/results/cpu-builds.json]     (--parts: inference or training alone)
//
// Each build folder must hold dist/ (npm run build there; a node_modules symlinked from this one will do).

import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BenchUsageError, benchArgs } from './args.js';
import { JsonLinesProcess } from './peers/json-lines-process.js';
import { checkPrompt, convertToGguf, ggufPyDirectory, LlamaCppPeer, median, timedShape, writeModelFolders } from './peers/llama-cpp-peer.js';
import type { PeerReply, TimedShape } from './peers/protocol.js';
import { startTorch } from './peers/torch-peer.js';
import { presetConfig } from './presets.js';

const args = benchArgs(import.meta.url, {
  options: {
    builds: { type: 'string', default: '' },
    preset: { type: 'string', default: 'qwen2.5-0.5b-shape' },
    threads: { type: 'string', default: '1,2' },
    prompt: { type: 'string', default: '16' },
    decode: { type: 'string', default: '8' },
    'train-batch': { type: 'string', default: '8' },
    seq: { type: 'string', default: '32' },
    'train-repeats': { type: 'string', default: '1' },
    rounds: { type: 'string', default: '2' },
    peers: { type: 'string', default: 'llama.cpp,torch' },
    parts: { type: 'string', default: 'inference,training' },
    sums: { type: 'string', default: 'f64' },
    out: { type: 'string', default: 'bench/results/cpu-builds.json' },
  },
});
const here = dirname(fileURLToPath(import.meta.url));
const whole = (option: string, text: string) => {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1) throw new BenchUsageError(`--${option}: "${text}" is not a whole number >= 1`);
  return n;
};
const THREADS = args.threads!.split(',').map((t) => whole('threads', t));
const [promptLen, decodeSteps, trainBatch, seqLen, trainRepeats, rounds] = (['prompt', 'decode', 'train-batch', 'seq', 'train-repeats', 'rounds'] as const).map((o) => whole(o, args[o]!)) as [number, number, number, number, number, number];
const ADAPTERS = 8;
const BUILDS = [
  ['this', resolve(here, '..', '..')],
  ...args.builds!.split(',').filter(Boolean).map((pair) => {
    const [name, folder] = pair.split('=');
    if (!name || !folder) throw new BenchUsageError(`--builds: "${pair}" is not name=folder (such as old=/work/wt-old)`);
    if (!existsSync(join(folder, 'dist', 'src', 'backend', 'cpu.js'))) throw new BenchUsageError(`--builds: ${folder} has no dist/src/backend/cpu.js: run npm run build there`);
    return [name, resolve(folder)];
  }),
] as [string, string][];
const SUMS = args.sums!.split(',');
for (const sums of SUMS) if (sums !== 'f64' && sums !== 'f32') throw new BenchUsageError(`--sums: unknown "${sums}"; choose f64, f32 or both (f64,f32)`);
/** Each populora side: a build and what its dense products sum in (builds other than this one: f64, all they have). */
const BUILD_SIDES = BUILDS.flatMap(([name, folder]) => SUMS.filter((sums) => sums === 'f64' || name === 'this').map((sums) => ({ name: sums === 'f64' ? name : `${name} ${sums}`, folder, sums })));
const PEERS = args.peers === 'none' ? [] : args.peers!.split(',');
for (const peer of PEERS) if (peer !== 'llama.cpp' && peer !== 'torch') throw new BenchUsageError(`--peers: unknown "${peer}"; choose llama.cpp, torch, both (llama.cpp,torch) or none`);
const PARTS = args.parts!.split(',');
for (const part of PARTS) if (part !== 'inference' && part !== 'training') throw new BenchUsageError(`--parts: unknown "${part}"; choose inference, training or both (inference,training)`);

/** One figure of one side: its samples, one a round. */
interface Row {
  side: string;
  threads: number;
  work: string;
  unit: 'tok/s' | 'ms';
  samples: number[];
}

async function main() {
  const config = presetConfig(args.preset!);
  const dir = join(tmpdir(), 'populora-peers', `${args.preset}-builds`);
  rmSync(dir, { recursive: true, force: true });
  console.error(`writing the model and ${ADAPTERS} adapters to ${dir}`);
  const { modelDir, adapterDirs } = writeModelFolders(dir, config, ADAPTERS, 16);
  const ggufDir = join(dir, 'gguf');
  if (PEERS.includes('llama.cpp')) convertToGguf(modelDir, adapterDirs, ggufDir, ggufPyDirectory(join(tmpdir(), 'populora-peers')));
  const shapes: [string, TimedShape][] = [
    ['1 × base', timedShape(1, 0, promptLen, decodeSteps, config.vocabSize)],
    [`${ADAPTERS} × ${ADAPTERS} adapters`, timedShape(ADAPTERS, ADAPTERS, promptLen, decodeSteps, config.vocabSize)],
  ];
  const rows: Row[] = [];
  const record = (side: string, threads: number, work: string, unit: Row['unit'], value: number) => {
    const row = rows.find((r) => r.side === side && r.threads === threads && r.work === work);
    if (row) row.samples.push(value);
    else rows.push({ side, threads, work, unit, samples: [value] });
  };
  const checks: Record<string, string> = {};
  const loads: number[] = [loadavg()[0]!];

  /** A populora build: started, checked, timed at every thread count it has, ended. */
  const buildSide = (name: string, folder: string, sums: string) => async () => {
    const side = JsonLinesProcess.start(name, process.execPath, [join(here, 'peers', 'populora-build.js'), folder, sums, modelDir, ...adapterDirs]);
    try {
      const { sha256 } = await side.request<{ sha256: string }>({ type: 'check', threads: 1, tokens: checkPrompt(config.vocabSize), adapter: 0 });
      checks[name] ??= sha256;
      const reference = sums === 'f64' ? 'this' : `this ${sums}`;
      if (sha256 !== checks[reference]) throw new Error(`build ${name} (${folder}) gives other logits than ${reference}: the timings would compare different work`);
      for (const threads of THREADS) {
        const timed = await side.request<{ prefillTokPerS: number }>({ type: 'time', threads, shape: shapes[0]![1] }).catch((error: Error) => (/has no threads/.test(error.message) ? undefined : Promise.reject(error)));
        if (!timed) continue; // a build without threads: 1 only
        for (const [shapeName, shape] of PARTS.includes('inference') ? shapes : []) {
          const t = await side.request<{ prefillTokPerS: number; decodeTokPerS: number }>({ type: 'time', threads, shape });
          record(name, threads, `${shapeName}, prompt`, 'tok/s', t.prefillTokPerS);
          record(name, threads, `${shapeName}, decode`, 'tok/s', t.decodeTokPerS);
        }
        if (!PARTS.includes('training')) continue;
        const { stepMs } = await side.request<{ stepMs: number[] }>({ type: 'train', threads, batch: trainBatch, seq: seqLen, repeats: trainRepeats });
        record(name, threads, 'LoRA training step', 'ms', median(stepMs));
      }
    } finally {
      await side.close();
    }
  };
  const llamaCppSide = async () => {
    const { peer } = await LlamaCppPeer.start({ backend: 'cpu', modelPath: join(ggufDir, 'model.gguf'), adapterPaths: adapterDirs.map((d) => join(ggufDir, `${basename(d)}.gguf`)), batch: ADAPTERS, contextSize: Math.max(promptLen + decodeSteps, 32), threads: THREADS });
    try {
      for (const threads of THREADS) {
        for (const [shapeName, shape] of shapes) {
          const t = (await peer.request({ type: 'time', shape, threads })) as Extract<PeerReply, { type: 'time' }>;
          record('llama.cpp', threads, `${shapeName}, prompt`, 'tok/s', t.prefillTokPerS);
          record('llama.cpp', threads, `${shapeName}, decode`, 'tok/s', t.decodeTokPerS);
        }
      }
    } finally {
      peer.close();
    }
  };
  const torchSide = async () => {
    const torch = startTorch(modelDir, adapterDirs);
    try {
      for (const threads of THREADS) {
        const { stepMs } = await torch.request<{ stepMs: number[] }>({ type: 'time', threads, batch: trainBatch, seq: seqLen, repeats: trainRepeats, promptLength: seqLen / 2 });
        record('PyTorch', threads, 'LoRA training step', 'ms', median(stepMs));
      }
    } finally {
      await torch.close();
    }
  };
  const sides: [string, () => Promise<void>][] = [...BUILD_SIDES.map(({ name, folder, sums }): [string, () => Promise<void>] => [name, buildSide(name, folder, sums)]), ...(PEERS.includes('llama.cpp') && PARTS.includes('inference') ? [['llama.cpp', llamaCppSide] as [string, () => Promise<void>]] : []), ...(PEERS.includes('torch') && PARTS.includes('training') ? [['PyTorch', torchSide] as [string, () => Promise<void>]] : [])];
  for (let round = 0; round < rounds; round++) {
    for (const [name, run] of round % 2 ? [...sides].reverse() : sides) {
      const start = performance.now();
      await run();
      loads.push(loadavg()[0]!);
      console.error(`  round ${round + 1} of ${rounds}: ${name} done in ${((performance.now() - start) / 1000).toFixed(0)} s, load average ${loads.at(-1)!.toFixed(1)}`);
    }
  }
  report(rows, loads, checks);
}

function report(rows: Row[], loads: number[], checks: Record<string, string>) {
  const names = [...BUILD_SIDES.map(({ name }) => name), ...(PEERS.includes('llama.cpp') ? ['llama.cpp'] : []), ...(PEERS.includes('torch') ? ['PyTorch'] : [])];
  const works = [...new Set(rows.map((r) => r.work))];
  const value = (side: string, threads: number, work: string) => {
    const row = rows.find((r) => r.side === side && r.threads === threads && r.work === work);
    return row ? median(row.samples) : undefined;
  };
  const shown = (v: number | undefined) => (v === undefined ? '—' : v.toFixed(v < 100 ? 1 : 0));
  const peerOf = (work: string) => (work.includes('training') ? 'PyTorch' : 'llama.cpp');
  console.log(`\nmodel ${args.preset}, f16 weights; LoRA rank 16 on all 7 projections, ${ADAPTERS} adapters; prompt ${promptLen}, ${decodeSteps} decode steps; training ${trainBatch} × ${seqLen} tokens; medians of ${rounds} rounds (sides alternating); load average ${loads.map((l) => l.toFixed(1)).join(', ')} on ${cpus().length} cores`);
  const f32Check = checks['this f32'] ? `; with f32 sums, sha256 ${checks['this f32'].slice(0, 12)}` : '';
  console.log(`builds: ${BUILDS.map(([n, f]) => `${n} = ${f}`).join('; ')}; next-token logits equal bit for bit in every build (sha256 ${checks['this']?.slice(0, 12)}${f32Check})\n`);
  console.log(`| threads | work | unit | ${names.join(' | ')} | ${BUILD_SIDES.map(({ name }) => `${name} / peer`).join(' | ')} |`);
  console.log(`|---:|---|---|${names.map(() => '---:').join('|')}|${BUILD_SIDES.map(() => '---:').join('|')}|`);
  for (const threads of THREADS) {
    for (const work of works) {
      const unit = rows.find((r) => r.work === work)!.unit;
      const peer = value(peerOf(work), threads, work);
      const ratio = (v: number | undefined) => (v === undefined || peer === undefined ? '—' : `${(unit === 'ms' ? peer / v : v / peer).toFixed(2)}x`);
      console.log(`| ${threads} | ${work} | ${unit} | ${names.map((n) => shown(value(n, threads, work))).join(' | ')} | ${BUILD_SIDES.map(({ name }) => ratio(value(name, threads, work))).join(' | ')} |`);
    }
  }
  mkdirSync(dirname(args.out!), { recursive: true });
  writeFileSync(args.out!, JSON.stringify({ preset: args.preset, builds: Object.fromEntries(BUILDS), sums: SUMS, threads: THREADS, promptLen, decodeSteps, trainBatch, seqLen, trainRepeats, rounds, cores: cpus().length, loads, checks, rows }, null, 2));
  console.log(`\nwrote ${args.out}`);
}

await main().catch((error: unknown) => {
  console.error(`bench/cpu-builds: ${error instanceof Error ? error.message : String(error)}`);
  process.exitCode = 1;
});
