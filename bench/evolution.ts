// Milliseconds per child for each evolution operator, on the toy model's adapters and on 7B-shaped ones
// (32 layers, d 4096, MLP 11008, rank 16, all seven projections): the host operators (operators.ts, CPU), and
// with --device, the device operators on adapters resident in a LoRA bank (device-operators.ts; timed to the
// completion of the device work), and the device SVD crossover's phases. Prints tables; writes JSON.
//
//   node dist/bench/evolution.js [--repeats 3] [--skip-7b] [--layers 32] [--device webgpu|cpu] [--workers N|auto] [--out bench/results/evolution-cpu.json]
// --workers: threads for the device SVD crossover's small host factorisations (default auto, as a run's
// evolution.threads: one per core less one, at most 8). --layers: fewer layers
// of the 7B shape (the work per child scales with them), for slow devices such as lavapipe.

import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { BenchUsageError, benchArgs } from './args.js';
import { openBackend, type BackendChoice } from '../src/backend/select.js';
import { BankEvolution } from '../src/evolution/device-operators.js';
import { CROSSOVER_KINDS, crossover, mutate } from '../src/evolution/operators.js';
import { TINY_CONFIGS, type LlamaConfig } from '../src/model/config.js';
import { LoraBank } from '../src/model/lora-bank.js';
import { LORA_MODULES, randomAdapter, type LoraAdapter } from '../src/model/peft.js';
import { threadCount } from '../src/runtime/worker-threads.js';

const args = benchArgs(import.meta.url, { options: { repeats: { type: 'string', default: '3' }, 'skip-7b': { type: 'boolean', default: false }, layers: { type: 'string', default: '32' }, device: { type: 'string' }, workers: { type: 'string', default: 'auto' }, out: { type: 'string', default: 'bench/results/evolution-cpu.json' } } });
const repeats = Number(args.repeats);
const layers = Number(args.layers);
const workers = threadCount(args.workers === 'auto' ? 'auto' : Number(args.workers));
if (!(Number.isInteger(workers) && workers >= 1)) throw new BenchUsageError(`--workers takes a whole number of threads or auto, got ${args.workers}`);
if (!(Number.isInteger(layers) && layers >= 1)) throw new BenchUsageError(`--layers takes a whole number of layers (1 to 32), got ${args.layers}`);
const LLAMA_7B: LlamaConfig = { ...TINY_CONFIGS['tiny']!, vocabSize: 32000, hiddenSize: 4096, intermediateSize: 11008, numLayers: layers, numHeads: 32, numKvHeads: 32, headDim: 128 };

const shapes: Array<[string, LlamaConfig, number]> = [['toy (tiny, r 8)', TINY_CONFIGS['tiny']!, 8]];
if (!args['skip-7b']) shapes.push([layers === 32 ? '7B-shaped (r 16)' : `7B-shaped, ${layers} of 32 layers (r 16)`, LLAMA_7B, 16]);
const rows: Array<{ shape: string; operator: string; path: string; msPerChild: number; parameters: number }> = [];
// The device SVD crossover's phases. The host's parts (recording dispatches, the factorisations) show what a
// faster device cannot remove; the device's parts (the work of the recorded dispatches, and the readback) what it can.
const SVD_PHASES = [
  ['gramsRecordMs', 'record Grams (host)', 'host'],
  ['gramsMs', 'Grams (device, read back)', 'device'],
  ['mixesMs', 'factorisations (host)', 'host'],
  ['combineRecordMs', 'record combine (host)', 'host'],
  ['combineMs', 'combine (device)', 'device'],
] as const;
const phases: Array<{ shape: string; ms: number[] }> = [];
const backend = args.device ? await openBackend(args.device as BackendChoice) : null;

async function time(run: () => unknown | Promise<unknown>): Promise<number> {
  await run(); // warm-up
  const start = performance.now();
  for (let i = 0; i < repeats; i++) await run();
  return (performance.now() - start) / repeats;
}

for (const [name, config, rank] of shapes) {
  const [p1, p2] = [1, 2].map((seed) => randomAdapter(config, { rank, targets: [...LORA_MODULES], seed, init: 'gaussian' })) as [LoraAdapter, LoraAdapter];
  const parameters = p1.layers.reduce((n, layer) => n + Object.values(layer).reduce((m, f) => m + f.a.length + f.b.length, 0), 0);
  const operators = ['mutate', ...CROSSOVER_KINDS.map((kind) => `crossover ${kind}`)];
  for (const operator of operators) {
    const kind = operator.split(' ')[1] as (typeof CROSSOVER_KINDS)[number];
    const msPerChild = await time(() => (operator === 'mutate' ? mutate(p1, { sigma: 0.01, seed: 7 }) : crossover(p1, p2, { kind, seed: 7 })));
    rows.push({ shape: name, operator, path: 'host (cpu)', msPerChild, parameters });
    console.error(`  ${name}: ${operator} on the host`);
  }
  if (!backend) continue;
  const bank = new LoraBank(backend, config, 3, rank, [...LORA_MODULES]);
  bank.load(0, p1);
  bank.load(1, p2);
  const marks: number[] = []; // start, the SVD phases' ends, the crossover's return (combine recorded), end
  const evolution = new BankEvolution(bank, config, workers, () => marks.push(performance.now()));
  const settle = () => backend.readF32(bank.scaleTensor); // a read waits for every submitted dispatch
  for (const operator of operators) {
    const kind = operator.split(' ')[1] as (typeof CROSSOVER_KINDS)[number];
    const splits: number[][] = [];
    const msPerChild = await time(async () => {
      marks.splice(0, marks.length, performance.now());
      if (operator === 'mutate') evolution.mutate(2, 0, { sigma: 0.01, seed: 7 });
      else await evolution.crossover(2, 0, 1, { kind, seed: 7 });
      marks.push(performance.now());
      await settle();
      marks.push(performance.now());
      if (kind === 'svd') splits.push(marks.slice(1).map((t, i) => t - marks[i]!));
    });
    if (kind === 'svd') phases.push({ shape: name, ms: SVD_PHASES.map((_, p) => splits.slice(1).reduce((sum, s) => sum + s[p]!, 0) / repeats) });
    rows.push({ shape: name, operator, path: 'device', msPerChild, parameters });
    console.error(`  ${name}: ${operator} on the device`);
  }
  await evolution.close();
  bank.destroy();
}
const device = backend?.deviceDescription ?? null;
backend?.destroy();

console.log(`\nevolution operators, ms per child, mean of ${repeats} (host: float64 maths on float32 factors)`);
if (backend) console.log(`device: ${backend.deviceDescription}; SVD factorisations on ${workers} thread(s)`);
console.log('');
console.log('| adapters | parameters | operator | path | ms per child |');
console.log('|---|---:|---|---|---:|');
for (const r of rows) console.log(`| ${r.shape} | ${(r.parameters / 1e6).toFixed(2)} M | ${r.operator} | ${r.path} | ${r.msPerChild.toFixed(1)} |`);
if (phases.length > 0) {
  console.log('\nthe device SVD crossover by phase, ms per child');
  if (args.device === 'cpu') console.log('(the CPU backend works as it records: its "record" columns hold its Grams and its combine)');
  console.log('');
  console.log(`| adapters | ${SVD_PHASES.map(([, title]) => title).join(' | ')} | host in all |`);
  console.log(`|---|${SVD_PHASES.map(() => '---:|').join('')}---:|`);
  const hostMs = (ms: number[]) => SVD_PHASES.reduce((sum, [, , where], i) => (where === 'host' ? sum + ms[i]! : sum), 0);
  for (const p of phases) console.log(`| ${p.shape} | ${[...p.ms, hostMs(p.ms)].map((ms) => ms.toFixed(1)).join(' | ')} |`);
}
mkdirSync(dirname(args.out!), { recursive: true });
writeFileSync(args.out!, JSON.stringify({ device, svdWorkers: workers, rows, svdPhases: phases.map((p) => ({ shape: p.shape, ...Object.fromEntries(SVD_PHASES.map(([key], i) => [key, p.ms[i]])) })) }, null, 2));
console.log(`\nwrote ${args.out}`);
