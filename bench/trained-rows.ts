// What a training step's logits cost at Qwen2.5-0.5B's vocabulary (151,936): one policy-gradient forward and
// backward over one sequence (a 600-token proposal prompt and 24 generated tokens: the first measured
// step), 8 rank-16 adapters on all seven modules, with the logits of every row (the engine before micro-batched
// phases: a prompt token's 151,936 values and their gradient, for a loss weight of zero) and with those of the
// trained rows alone (the engine now). Each way in a child process of its own, for its peak resident memory; the
// two give the same gradients (test/micro-batch.test.ts). Prints a table; writes JSON.
//
//   node dist/bench/trained-rows.js [--tokens 624] [--prompt 600] [--out bench/results/trained-rows.json]
//   node dist/bench/trained-rows.js --child every|trained ...   (one way: what the parent runs; JSON out)

import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BenchUsageError, benchArgs } from './args.js';
import type { Backend } from '../src/backend/backend.js';
import { CpuBackend } from '../src/backend/cpu.js';
import { randomModel } from '../src/model/checkpoint.js';
import { TINY_CONFIGS } from '../src/model/config.js';
import { LlamaModel } from '../src/model/llama.js';
import { LoraBank } from '../src/model/lora-bank.js';
import { LORA_MODULES, randomAdapter } from '../src/model/peft.js';
import { packSequences } from '../src/train/batch.js';
import { LlamaTrainer } from '../src/train/llama-backward.js';
import { PolicyGradientLoss } from '../src/train/objective.js';
import { readLogProbs } from '../src/train/steps.js';

const args = benchArgs(import.meta.url, {
  options: {
    tokens: { type: 'string', default: '624' },
    prompt: { type: 'string', default: '600' },
    out: { type: 'string', default: 'bench/results/trained-rows.json' },
    child: { type: 'string' },
  },
});

const WAYS = ['every', 'trained'] as const;
interface WayResult {
  way: (typeof WAYS)[number];
  logitRows: number;
  cpuS: number;
  wallS: number;
  peakRssGiB: number;
  baseRssGiB: number; // before the step: the model, the bank
}

const [tokens, prompt] = [Number(args.tokens), Number(args.prompt)];
if (!Number.isInteger(tokens) || !Number.isInteger(prompt) || prompt < 1 || prompt >= tokens) throw new BenchUsageError(`--tokens and --prompt: whole numbers with 1 <= prompt < tokens, got ${args.tokens} and ${args.prompt}`);

async function oneWay(way: (typeof WAYS)[number]): Promise<WayResult> {
  const config = { ...TINY_CONFIGS['qwen2.5-0.5b-shape']!, maxPositionEmbeddings: 2048 };
  const b: Backend = new CpuBackend();
  const model = LlamaModel.upload(b, config, randomModel(config, 0, 65_536), { maxContext: 2048 });
  const bank = new LoraBank(b, config, 8, 16, LORA_MODULES);
  for (let slot = 0; slot < 8; slot++) bank.load(slot, randomAdapter(config, { rank: 16, targets: LORA_MODULES, seed: slot, init: 'gaussian' }));
  const trainer = new LlamaTrainer(model, bank);
  const sample = { tokens: Array.from({ length: tokens }, (_, i) => (i * 7919) % 1000), adapter: 0, promptLength: prompt, advantage: 1 };
  const batch = packSequences([sample], config.vocabSize, 2048);
  const loss = new PolicyGradientLoss(batch, [prompt], [1], { reduction: 'token', entropyCoef: 0.001 });
  const rows = Int32Array.from(loss.mask.reduce<number[]>((kept, m, t) => (m ? [...kept, t] : kept), []));
  const base = process.memoryUsage().rss;
  const [wall, cpu] = [performance.now(), process.cpuUsage()];
  const tape = trainer.forward(batch, way === 'trained' ? rows : undefined);
  const weights = loss.weigh(0, await readLogProbs(trainer, tape));
  const grads = trainer.backward(tape, weights.logpWeight, weights.entropyWeight, 'lora');
  trainer.freeTape(tape);
  grads.forEach((g) => b.free(g));
  const used = process.cpuUsage(cpu);
  return { way, logitRows: way === 'trained' ? rows.length : tokens, cpuS: (used.user + used.system) / 1e6, wallS: (performance.now() - wall) / 1000, peakRssGiB: process.resourceUsage().maxRSS / 2 ** 20, baseRssGiB: base / 2 ** 30 };
}

if (args.child !== undefined) {
  const way = WAYS.find((w) => w === args.child);
  if (!way) throw new BenchUsageError(`--child: one of ${WAYS.join(', ')}, got "${args.child}"`);
  console.log(JSON.stringify(await oneWay(way)));
} else {
  const results = WAYS.map((way) => {
    console.error(`${way} row's logits: one step in a child process...`);
    const child = spawnSync(process.execPath, [fileURLToPath(import.meta.url), '--tokens', String(tokens), '--prompt', String(prompt), '--child', way], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
    if (child.status !== 0) throw new Error(`${way}: the child process failed (exit ${child.status ?? child.signal})`);
    return JSON.parse(child.stdout.trim().split('\n').at(-1)!) as WayResult;
  });
  console.log('\nlogits of      rows   CPU s   wall s   peak RSS GiB   over the model and bank GiB');
  for (const r of results) console.log(`${r.way.padEnd(12)} ${String(r.logitRows).padStart(6)} ${r.cpuS.toFixed(1).padStart(7)} ${r.wallS.toFixed(1).padStart(8)} ${r.peakRssGiB.toFixed(2).padStart(14)} ${(r.peakRssGiB - r.baseRssGiB).toFixed(2).padStart(14)}`);
  const [every, trained] = results as [WayResult, WayResult];
  console.log(`\ntrained rows alone: ${(every.cpuS / trained.cpuS).toFixed(2)}x less CPU, ${(every.peakRssGiB - every.baseRssGiB - (trained.peakRssGiB - trained.baseRssGiB)).toFixed(2)} GiB less memory`);
  const out = { what: 'one policy-gradient forward and backward at the 0.5B shape: every row\'s logits against the trained rows\' (bench/trained-rows.ts)', machine: `${cpus().length} cores (${cpus()[0]?.model ?? 'unknown'}), load average ${loadavg().map((l) => l.toFixed(1)).join(' ')} at the end`, command: process.argv.slice(1).join(' '), tokens, prompt, results };
  mkdirSync(dirname(args.out!), { recursive: true });
  writeFileSync(args.out!, `${JSON.stringify(out, null, 2)}\n`);
  console.log(`written: ${args.out}`);
}
