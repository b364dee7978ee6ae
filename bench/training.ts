// Training throughput: LoRA policy-gradient steps (forward + backward + AdamW) at batch 8 and 32 sequences over
// 8 distinct adapters; the ratio of one training step to one forward pass; the device memory the step holds
// (activations kept for the backward, gradients, optimizer moments), counted from the tensors themselves.
// Prints a table; writes JSON.
//
//   node dist/bench/training.js [--preset bench-small] [--backend webgpu|cpu] [--weights f16|f32] [--seq 32]
//                               [--rank 16] [--adapters 8] [--repeats 2] [--out bench/results/training.json] [--profile 8]
//                               [--threads N]   (the CPU backend's; default: one per core)
//
// --profile B (WebGPU with timestamp queries; 0: none): the per-kernel table of one step at batch B (kernel-profile.ts).

import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { benchArgs } from './args.js';
import { numel, type Tensor, type WeightStorage } from '../src/backend/backend.js';
import { openBackend, type BackendChoice } from '../src/backend/select.js';
import { randomModel } from '../src/model/checkpoint.js';
import { LlamaModel } from '../src/model/llama.js';
import { LoraBank } from '../src/model/lora-bank.js';
import { LORA_MODULES, randomAdapter } from '../src/model/peft.js';
import { AdamW } from '../src/train/adamw.js';
import { packSequences, type TrainSequence } from '../src/train/batch.js';
import { LlamaTrainer, tapeTensors } from '../src/train/llama-backward.js';
import { policyGradientStep, readLogProbs } from '../src/train/steps.js';
import { printProfile, profilePhase, type PhaseProfile } from './kernel-profile.js';
import { presetConfig } from './presets.js';

const args = benchArgs(import.meta.url, {
  options: {
    preset: { type: 'string', default: 'bench-small' },
    backend: { type: 'string', default: 'webgpu' },
    weights: { type: 'string', default: 'f16' },
    seq: { type: 'string', default: '32' },
    rank: { type: 'string', default: '16' },
    adapters: { type: 'string', default: '8' },
    repeats: { type: 'string', default: '2' },
    threads: { type: 'string' },
    out: { type: 'string', default: 'bench/results/training.json' },
    profile: { type: 'string', default: '8' },
  },
});

interface Row {
  batch: number;
  tokens: number;
  forwardMs: number;
  stepMs: number;
  trainTokensPerS: number;
  stepToForward: number;
  activationMiB: number;
  gradientMiB: number;
}

const MiB = (tensors: Iterable<Tensor>) => [...tensors].reduce((n, t) => n + numel(t.shape) * 4, 0) / 2 ** 20;

async function timeMs(repeats: number, run: () => Promise<unknown>): Promise<number> {
  await run(); // warm-up: pipelines compile, buffers enter the pool
  const start = performance.now();
  for (let i = 0; i < repeats; i++) await run();
  return (performance.now() - start) / repeats;
}

async function main() {
  const config = presetConfig(args.preset!);
  const [seqLen, rank, adapterCount, repeats] = [Number(args.seq), Number(args.rank), Number(args.adapters), Number(args.repeats)];
  const backend = await openBackend(args.backend as BackendChoice, undefined, args.threads === undefined ? undefined : Number(args.threads));
  try {
    const model = LlamaModel.upload(backend, config, randomModel(config, 1), { storage: args.weights as WeightStorage, maxContext: seqLen });
    const bank = new LoraBank(backend, config, adapterCount, rank, LORA_MODULES);
    for (let slot = 0; slot < adapterCount; slot++) bank.load(slot, randomAdapter(config, { rank, targets: [...LORA_MODULES], seed: slot, init: 'gaussian' }));
    const trainer = new LlamaTrainer(model, bank);
    const optimizer = AdamW.forBank(backend, bank, config.numLayers, { lr: 1e-4, maxGradNorm: 1 });
    const rows: Row[] = [];
    const profiles: PhaseProfile[] = [];
    for (const batch of [8, 32]) {
      const sequences: TrainSequence[] = Array.from({ length: batch }, (_, s) => ({ tokens: Array.from({ length: seqLen }, (_, i) => (s * 131 + i * 17) % config.vocabSize), adapter: s % adapterCount }));
      const samples = sequences.map((s, i) => ({ ...s, promptLength: seqLen / 2, advantage: i % 2 ? 1 : -1 }));
      const packed = packSequences(sequences, config.vocabSize, seqLen);
      const forwardMs = await timeMs(repeats, async () => {
        const tape = trainer.forward(packed);
        await readLogProbs(trainer, tape); // the forward's readback, as a step has it
        trainer.freeTape(tape);
      });
      const stepMs = await timeMs(repeats, () => policyGradientStep(trainer, optimizer, samples, { reduction: 'token' }));
      const tape = trainer.forward(packed);
      const weights = new Float32Array(packed.tokens.length).fill(1 / packed.tokens.length);
      const grads = trainer.backward(tape, weights, new Float32Array(weights.length), 'lora');
      const [activationMiB, gradientMiB] = [MiB(tapeTensors(tape)), MiB(grads.values())];
      trainer.freeTape(tape);
      grads.forEach((g) => backend.free(g));
      const tokens = batch * seqLen;
      rows.push({ batch, tokens, forwardMs, stepMs, trainTokensPerS: tokens / (stepMs / 1000), stepToForward: stepMs / forwardMs, activationMiB, gradientMiB });
      if (batch === Number(args.profile) && backend.timeKernels) {
        const shape = { storage: model.storage, adapters: adapterCount, meanContext: (seqLen + 1) / 2 };
        profiles.push(await profilePhase(backend, `a training step (batch ${batch} × ${seqLen} tokens, ${adapterCount} adapters)`, shape, async () => {
          await policyGradientStep(trainer, optimizer, samples, { reduction: 'token' });
        }));
      }
      console.error(`  measured batch ${batch}`);
    }
    const momentsMiB = 2 * MiB(LORA_MODULES.flatMap((m) => Array.from({ length: config.numLayers }, (_, l) => Object.values(bank.factors(l, m)))).flat());
    console.log(`\nmodel ${args.preset} (${args.weights} weights), ${adapterCount} adapters of rank ${rank} on all 7 projections, sequences of ${seqLen} tokens`);
    console.log(`device: ${backend.deviceDescription}; AdamW moments ${momentsMiB.toFixed(2)} MiB\n`);
    console.log('| batch | tokens | forward ms | train step ms | train tok/s | step / forward | activations MiB | gradients MiB |');
    console.log('|---:|---:|---:|---:|---:|---:|---:|---:|');
    for (const r of rows) {
      console.log(`| ${r.batch} | ${r.tokens} | ${r.forwardMs.toFixed(1)} | ${r.stepMs.toFixed(1)} | ${r.trainTokensPerS.toFixed(1)} | ${r.stepToForward.toFixed(2)}x | ${r.activationMiB.toFixed(2)} | ${r.gradientMiB.toFixed(2)} |`);
    }
    profiles.forEach(printProfile);
    mkdirSync(dirname(args.out!), { recursive: true });
    writeFileSync(args.out!, JSON.stringify({ preset: args.preset, config, storage: args.weights, rank, adapters: adapterCount, seqLen, device: backend.deviceDescription, momentsMiB, rows, profiles }, null, 2));
    console.log(`\nwrote ${args.out}`);
  } finally {
    backend.destroy();
  }
}

await main();
