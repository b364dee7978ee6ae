// The CPU backend's thread scaling counted in CPU time, which a loaded machine does not distort the way it distorts
// wall time: for decode at batch 1, decode of 8 sequences across 8 adapters, a prefill and a LoRA training step, at
// each --threads count (alternating rounds), the wall time, the CPU time of every thread of the process together
// (equal to one thread's if threading adds no work) and the CPU time of the calling thread alone (Linux
// /proc/self/task/<pid>/stat, in ticks of 10 ms: it runs its share and everything the threads do not, so on free
// cores the wall time cannot be less: its CPU time at 1 thread over its CPU time at N is the speed-up the threads
// allow). Prints a table; writes JSON.
//
//   node dist/bench/cpu-scaling.js [--preset bench-small] [--threads 1,2] [--rounds 4] [--repeats 3] [--skip training]
//                                  [--out bench/results/cpu-scaling.json]   (--skip: works left out, by their first word)

import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname } from 'node:path';
import { BenchUsageError, benchArgs } from './args.js';
import { CpuBackend } from '../src/backend/cpu.js';
import { randomModel } from '../src/model/checkpoint.js';
import { LlamaModel } from '../src/model/llama.js';
import { LoraBank } from '../src/model/lora-bank.js';
import { LORA_MODULES, randomAdapter } from '../src/model/peft.js';
import { AdamW } from '../src/train/adamw.js';
import { LlamaTrainer } from '../src/train/llama-backward.js';
import { policyGradientStep } from '../src/train/steps.js';
import { median } from './peers/llama-cpp-peer.js';
import { presetConfig } from './presets.js';

const args = benchArgs(import.meta.url, {
  options: {
    preset: { type: 'string', default: 'bench-small' },
    threads: { type: 'string', default: '1,2' },
    rounds: { type: 'string', default: '4' },
    repeats: { type: 'string', default: '3' },
    skip: { type: 'string', default: '' },
    out: { type: 'string', default: 'bench/results/cpu-scaling.json' },
  },
});
const THREADS = args.threads!.split(',').map(Number);
if (THREADS.some((t) => !Number.isInteger(t) || t < 1)) throw new BenchUsageError(`--threads: "${args.threads}" is not a list of whole numbers >= 1, such as 1,2`);
const [rounds, repeats] = [Number(args.rounds), Number(args.repeats)];

/** CPU milliseconds of the calling thread (Linux: its task's utime + stime, in clock ticks of 10 ms). */
function mainThreadCpuMs(): number {
  const fields = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10; // utime, stime (fields 14 and 15 of stat)
}

interface Sample {
  wallMs: number;
  processCpuMs: number;
  mainCpuMs: number;
}

async function measure(run: () => Promise<void>): Promise<Sample> {
  await run(); // warm-up at this thread count
  const [wall, cpu, main] = [performance.now(), process.cpuUsage(), mainThreadCpuMs()];
  for (let i = 0; i < repeats; i++) await run();
  const used = process.cpuUsage(cpu);
  return { wallMs: (performance.now() - wall) / repeats, processCpuMs: (used.user + used.system) / 1000 / repeats, mainCpuMs: (mainThreadCpuMs() - main) / repeats };
}

async function main() {
  const config = presetConfig(args.preset!);
  const backend = new CpuBackend({ threads: THREADS[0] });
  const model = LlamaModel.upload(backend, config, randomModel(config, 1, 65536), { storage: 'f16', maxContext: 64 });
  const bank = new LoraBank(backend, config, 8, 16, LORA_MODULES);
  for (let slot = 0; slot < 8; slot++) bank.load(slot, randomAdapter(config, { rank: 16, targets: [...LORA_MODULES], seed: slot, init: 'gaussian' }));
  const trainer = new LlamaTrainer(model, bank);
  const optimizer = AdamW.forBank(backend, bank, config.numLayers, { lr: 1e-4, maxGradNorm: 1 });
  const samples = Array.from({ length: 8 }, (_, s) => ({ tokens: Array.from({ length: 32 }, (_, i) => (s * 131 + i * 17) % config.vocabSize), adapter: s, promptLength: 16, advantage: s % 2 ? 1 : -1 }));
  /** 32 decode steps or one prefill of `batch` sequences (one token each, or a prompt of 16), slot s through adapter s - 1 (0: base). */
  const forwards = (batch: number, adapters: boolean, tokens: number) => async () => {
    const cache = model.createKvCache(batch, 64);
    const rows = Array.from({ length: batch * tokens }, (_, i) => Math.floor(i / tokens));
    for (let step = 0; step < (tokens === 1 ? 32 : 1); step++) {
      const batchRows = { tokens: Int32Array.from(rows, (s, i) => (s * 7 + i + step) % config.vocabSize), slots: Int32Array.from(rows), positions: Int32Array.from(rows, (_, i) => (i % tokens) + step), adapters: Int32Array.from(rows, (s) => (adapters ? s % 8 : -1)), logitRows: Int32Array.from({ length: batch }, (_, s) => s * tokens + tokens - 1) };
      await backend.readF32(model.forward(batchRows, cache, adapters ? bank : undefined));
    }
    model.freeKvCache(cache);
  };
  const work: Record<string, () => Promise<void>> = {
    'decode, batch 1 (32 steps)': forwards(1, false, 1),
    'decode, 8 × 8 adapters (32 steps)': forwards(8, true, 1),
    'prefill, 8 × 16 tokens': forwards(8, false, 16),
    'LoRA training step, 8 × 32 tokens': async () => void (await policyGradientStep(trainer, optimizer, samples, { reduction: 'token' })),
  };
  for (const name of Object.keys(work)) if (args.skip!.split(',').some((skip) => skip !== '' && name.toLowerCase().includes(skip))) delete work[name];
  const samplesOf = new Map<string, Sample[]>();
  const loads: number[] = [];
  for (let round = 0; round < rounds; round++) {
    for (const threads of round % 2 ? [...THREADS].reverse() : THREADS) {
      backend.setThreads(threads);
      for (const [name, run] of Object.entries(work)) {
        const key = `${name}|${threads}`;
        samplesOf.set(key, [...(samplesOf.get(key) ?? []), await measure(run)]);
      }
      loads.push(loadavg()[0]!);
      console.error(`  round ${round + 1} of ${rounds}: ${threads} thread(s), load average ${loads.at(-1)!.toFixed(1)}`);
    }
  }
  backend.destroy();
  const rows = Object.keys(work).flatMap((name) =>
    THREADS.map((threads) => {
      const s = samplesOf.get(`${name}|${threads}`)!;
      const m = (f: (x: Sample) => number) => median(s.map(f));
      return { work: name, threads, wallMs: m((x) => x.wallMs), processCpuMs: m((x) => x.processCpuMs), mainCpuMs: m((x) => x.mainCpuMs), samples: s };
    }),
  );
  console.log(`\nmodel ${args.preset} (f16 weights), LoRA rank 16 on all 7 projections; medians of ${rounds} alternating rounds of ${repeats}; load average ${loads.map((l) => l.toFixed(1)).join(', ')} on ${cpus().length} cores\n`);
  console.log(`| work | threads | wall ms | CPU ms, all threads | CPU ms, calling thread | all threads' CPU / 1 thread's | speed-up the threads allow (calling thread's CPU at 1 thread / at N) | wall speed-up |`);
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|');
  for (const r of rows) {
    const one = rows.find((o) => o.work === r.work && o.threads === THREADS[0])!;
    console.log(`| ${r.work} | ${r.threads} | ${r.wallMs.toFixed(1)} | ${r.processCpuMs.toFixed(1)} | ${r.mainCpuMs.toFixed(0)} | ${(r.processCpuMs / one.processCpuMs).toFixed(2)}x | ${(one.mainCpuMs / r.mainCpuMs).toFixed(2)}x | ${(one.wallMs / r.wallMs).toFixed(2)}x |`);
  }
  mkdirSync(dirname(args.out!), { recursive: true });
  writeFileSync(args.out!, JSON.stringify({ preset: args.preset, threads: THREADS, rounds, repeats, cores: cpus().length, loads, rows }, null, 2));
  console.log(`\nwrote ${args.out}`);
}

await main();
