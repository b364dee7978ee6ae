// One populora build's CPU backend as a peer of bench/cpu-builds.ts, driven by JSON lines: this script (from the
// build that runs the benchmark) imports the model, the LoRA bank and the trainer from another build's dist/ (an
// older commit's, checked out and built in a worktree of its own), so that builds are timed by the same code in
// the same run. The builds' APIs used here (LlamaModel.upload, forward, LoraBank, LlamaTrainer, AdamW.forBank,
// policyGradientStep) have not changed since the one-thread CPU backend; a build without threads runs 1 only, a
// build older than the CPU backend's `sums` runs f64 sums only.
//
//   node dist/bench/peers/populora-build.js <build folder> <f64|f32> <model folder> <adapter folder>...
// Requests: {type: 'check', tokens, adapter} -> {sha256, threads} (the next-token logits' bytes);
// {type: 'time', threads, shape} -> {prefillTokPerS, decodeTokPerS}; {type: 'train', threads, batch, seq, repeats}
// -> {stepMs}. A thread count the build cannot run is an error.

import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { timePopulora, type PopuloraSide } from './llama-cpp-peer.js';
import type { TimedShape } from './protocol.js';

const [root, sums, modelDir, ...adapterDirs] = process.argv.slice(2);
if (!root || !sums || !modelDir) throw new Error('usage: populora-build.js <build folder> <f64|f32> <model folder> <adapter folder>...');
const load = async (module: string) => import(pathToFileURL(join(root, 'dist', 'src', module)).href);
const [{ CpuBackend }, { loadModel }, { LlamaModel }, { LoraBank }, { loadPeftAdapter, LORA_MODULES }, { AdamW }, { LlamaTrainer }, { policyGradientStep }] = await Promise.all(
  ['backend/cpu.js', 'model/checkpoint.js', 'model/llama.js', 'model/lora-bank.js', 'model/peft.js', 'train/adamw.js', 'train/llama-backward.js', 'train/steps.js'].map(load),
);

const backend = new CpuBackend({ threads: 1, sums });
if (sums !== 'f64' && backend.sums !== sums) throw new Error(`this build (${root}) has no ${sums} sums: it runs f64 only`);
const { config, weights } = loadModel(modelDir);
const model = LlamaModel.upload(backend, config, weights, { storage: 'f16', maxContext: 64 });
const bank = new LoraBank(backend, config, adapterDirs.length, 16, LORA_MODULES);
adapterDirs.forEach((d, slot) => bank.load(slot, loadPeftAdapter(d, config)));
const side: PopuloraSide = { backend, model, bank };
const trainer = new LlamaTrainer(model, bank);
const optimizer = AdamW.forBank(backend, bank, config.numLayers, { lr: 1e-4, maxGradNorm: 1 });

function useThreads(threads: number): void {
  if (threads === 1 && !backend.setThreads) return;
  if (!backend.setThreads) throw new Error(`this build (${root}) has no threads: it runs 1 only`);
  backend.setThreads(threads);
}

async function answer(request: { type: string; threads: number; tokens?: number[]; adapter?: number; shape?: TimedShape; batch?: number; seq?: number; repeats?: number }): Promise<object> {
  useThreads(request.threads ?? 1);
  if (request.type === 'check') {
    const logits: Float32Array = await model.logits(request.tokens, request.adapter, bank);
    const last = logits.subarray((request.tokens!.length - 1) * config.vocabSize);
    return { sha256: createHash('sha256').update(new Uint8Array(last.buffer, last.byteOffset, last.byteLength)).digest('hex') };
  }
  if (request.type === 'time') return timePopulora(side, request.shape!);
  if (request.type === 'train') {
    const [batch, seq] = [request.batch!, request.seq!];
    const samples = Array.from({ length: batch }, (_, s) => ({ tokens: Array.from({ length: seq }, (_, i) => (s * 131 + i * 17) % config.vocabSize), adapter: s % adapterDirs.length, promptLength: seq / 2, advantage: s % 2 ? 1 : -1 }));
    const step = async () => {
      const start = performance.now();
      await policyGradientStep(trainer, optimizer, samples, { reduction: 'token' });
      return performance.now() - start;
    };
    await step(); // warm-up at this thread count
    const stepMs: number[] = [];
    for (let i = 0; i < request.repeats!; i++) stepMs.push(await step());
    return { stepMs };
  }
  throw new Error(`unknown request ${request.type}`);
}

for await (const line of createInterface({ input: process.stdin })) {
  const reply = await answer(JSON.parse(line)).catch((error: unknown) => ({ error: error instanceof Error ? error.message : String(error) }));
  process.stdout.write(`${JSON.stringify(reply)}\n`);
}
backend.destroy?.();
