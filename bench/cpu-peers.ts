// The CPU backend at 1, 2, ... threads beside llama.cpp's CPU backend and PyTorch at the same thread counts, on the
// same model and adapters, in one run:
//   - prompt and decode tokens/s at batch 1, 8 and 32 on the base model, and at batch 8 across 8 adapters (populora
//     in one batch; llama.cpp, which applies one adapter set per context, one adapter at a time, the times summed),
//     against llama.cpp (node-llama-cpp, the GGUF converted from the same Hugging Face folder);
//   - a LoRA training step (--train-batch sequences of --seq tokens over the adapters: forward, backward, AdamW)
//     against the same step in PyTorch (bench/peers/torch_lora_step.py);
//   - every populora figure at N threads over its own at 1 thread: the threads' scaling.
// Rounds alternate populora and its peer (and which goes first), and the thread counts' order, shape by shape; the
// machine's load average is printed beside the figures (other work slows every side, unevenly). Before timing, each
// peer must compute the same model: llama.cpp's greedy tokens and logits (as bench/peers/llama-cpp.ts checks them),
// PyTorch's logits after a prompt through an adapter within 1e-3 of their spread. Prints tables; writes JSON.
//
//   npm run build && node dist/bench/cpu-peers.js [--preset bench-small] [--threads 1,2] [--batches 1,8,32]
//       [--adapters 8] [--prompt 32] [--decode 16] [--rank 16] [--train-batch 8] [--seq 32] [--train-repeats 2]
//       [--rounds 3] [--peers llama.cpp,torch] [--parts inference,training] [--out bench/results/cpu-peers.json]
//
// llama.cpp needs what bench/peers/llama-cpp.ts needs (python3 with numpy for the GGUF conversion). PyTorch is
// Debian's, installed once as root with: apt-get install -y python3-torch (1.13, CPU; not an npm dependency); the
// bench runs it with /usr/bin/python3 (TORCH_PYTHON overrides). --peers takes either one alone, or none; --parts
// times inference or training alone (a 0.5B model's three sides together hold ~7 GB).

import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { BenchUsageError, benchArgs } from './args.js';
import { CpuBackend } from '../src/backend/cpu.js';
import { loadModel } from '../src/model/checkpoint.js';
import { LlamaModel } from '../src/model/llama.js';
import { LoraBank } from '../src/model/lora-bank.js';
import { LORA_MODULES, loadPeftAdapter } from '../src/model/peft.js';
import { AdamW } from '../src/train/adamw.js';
import { LlamaTrainer } from '../src/train/llama-backward.js';
import { policyGradientStep } from '../src/train/steps.js';
import { checkAgreement, checkPrompt, CHECK_PROMPT_LEN, CHECK_STEPS, convertToGguf, ggufPyDirectory, lastLogits, LlamaCppPeer, LOGIT_TOLERANCE, maxAbsDiff, median, spreadOf, timedShape, timePopulora, writeModelFolders, type Agreement, type PopuloraSide } from './peers/llama-cpp-peer.js';
import type { LlamaCppInfo, PeerReply, TimedShape } from './peers/protocol.js';
import type { JsonLinesProcess } from './peers/json-lines-process.js';
import { startTorch } from './peers/torch-peer.js';
import { presetConfig } from './presets.js';

const args = benchArgs(import.meta.url, {
  options: {
    preset: { type: 'string', default: 'bench-small' },
    threads: { type: 'string', default: '1,2' },
    batches: { type: 'string', default: '1,8,32' },
    adapters: { type: 'string', default: '8' },
    prompt: { type: 'string', default: '32' },
    decode: { type: 'string', default: '16' },
    rank: { type: 'string', default: '16' },
    'train-batch': { type: 'string', default: '8' },
    seq: { type: 'string', default: '32' },
    'train-repeats': { type: 'string', default: '2' },
    rounds: { type: 'string', default: '3' },
    peers: { type: 'string', default: 'llama.cpp,torch' },
    parts: { type: 'string', default: 'inference,training' },
    out: { type: 'string', default: 'bench/results/cpu-peers.json' },
  },
});
const list = (option: string, text: string) =>
  text.split(',').map((part) => {
    const n = Number(part);
    if (!Number.isInteger(n) || n < 1) throw new BenchUsageError(`--${option}: "${part}" is not a whole number >= 1 (give a list such as 1,2,4)`);
    return n;
  });
const THREADS = list('threads', args.threads!);
const BATCHES = list('batches', args.batches!);
const [adapters, promptLen, decodeSteps, rank, trainBatch, seqLen, trainRepeats, rounds] = [args.adapters, args.prompt, args.decode, args.rank, args['train-batch'], args.seq, args['train-repeats'], args.rounds].map(Number) as number[] as [number, number, number, number, number, number, number, number];
const PEERS = args.peers === 'none' ? [] : args.peers!.split(',');
for (const peer of PEERS) if (peer !== 'llama.cpp' && peer !== 'torch') throw new BenchUsageError(`--peers: unknown "${peer}"; choose llama.cpp, torch, both (llama.cpp,torch) or none`);
const PARTS = args.parts!.split(',');
for (const part of PARTS) if (part !== 'inference' && part !== 'training') throw new BenchUsageError(`--parts: unknown "${part}"; choose inference, training or both (inference,training)`);

// ---- The run ----

interface InferenceRow {
  threads: number;
  batch: number;
  adapters: number; // 0 = base model
  phase: 'prompt' | 'decode';
  populoraTokPerS: number[]; // one per round
  llamaCppTokPerS: number[];
}

interface TrainingRow {
  threads: number;
  populoraStepMs: number[]; // every timed step of every round
  torchStepMs: number[];
}

async function main() {
  const config = presetConfig(args.preset!);
  const dir = join(tmpdir(), 'populora-peers', `${args.preset}-cpu`);
  rmSync(dir, { recursive: true, force: true });
  console.error(`writing the model and ${adapters} adapters to ${dir}`);
  const { modelDir, adapterDirs } = writeModelFolders(dir, config, adapters, rank);
  const ggufDir = join(dir, 'gguf');
  if (PEERS.includes('llama.cpp')) convertToGguf(modelDir, adapterDirs, ggufDir, ggufPyDirectory(join(tmpdir(), 'populora-peers')));
  const contextSize = Math.max(promptLen + decodeSteps, CHECK_PROMPT_LEN + CHECK_STEPS, seqLen);

  const backend = new CpuBackend({ threads: THREADS[0] });
  // the very numbers the GGUF and PyTorch read (the host copy is dropped once uploaded)
  const model = LlamaModel.upload(backend, config, loadModel(modelDir).weights, { storage: 'f16', maxContext: contextSize });
  const bank = new LoraBank(backend, config, adapters, rank, LORA_MODULES);
  adapterDirs.forEach((d, slot) => bank.load(slot, loadPeftAdapter(d, config)));
  const side: PopuloraSide = { backend, model, bank };
  let llamaCpp: { peer: LlamaCppPeer; info: LlamaCppInfo } | undefined;
  let torch: JsonLinesProcess | undefined;
  try {
    const agreements: Agreement[] = [];
    if (PEERS.includes('llama.cpp')) {
      llamaCpp = await LlamaCppPeer.start({ backend: 'cpu', modelPath: join(ggufDir, 'model.gguf'), adapterPaths: adapterDirs.map((d) => join(ggufDir, `${basename(d)}.gguf`)), batch: Math.max(...BATCHES, adapters), contextSize, threads: THREADS });
      for (const adapter of [-1, 0]) agreements.push(await checkAgreement(side, 'cpu', llamaCpp.peer, adapter));
      for (const a of agreements) console.error(`check llama.cpp, ${a.adapter < 0 ? 'base model' : `adapter ${a.adapter}`}: ${a.matchingTokens}/${CHECK_STEPS} greedy tokens equal, max |Δlogit| ${a.maxAbsLogitDiff.toExponential(2)} (logits span ${a.logitSpread.toFixed(2)})`);
      if (agreements.some((a) => !(a.maxAbsLogitDiff <= LOGIT_TOLERANCE * a.logitSpread) || a.matchingTokens === 0)) throw new Error('llama.cpp does not compute the same model as populora: the timings would compare different work');
    }
    let torchAgreement: { maxAbsLogitDiff: number; logitSpread: number } | undefined;
    if (PEERS.includes('torch')) {
      torch = startTorch(modelDir, adapterDirs);
      const prompt = checkPrompt(config.vocabSize);
      const ours = await lastLogits(side, prompt, 0);
      const { logits } = await torch.request<{ logits: number[] }>({ type: 'check', tokens: prompt, adapter: 0 });
      torchAgreement = { maxAbsLogitDiff: maxAbsDiff(ours, logits), logitSpread: spreadOf(ours) };
      console.error(`check PyTorch, adapter 0: max |Δlogit| ${torchAgreement.maxAbsLogitDiff.toExponential(2)} (logits span ${torchAgreement.logitSpread.toFixed(2)})`);
      if (!(torchAgreement.maxAbsLogitDiff <= 1e-3 * torchAgreement.logitSpread)) throw new Error('PyTorch does not compute the same model as populora: the timings would compare different work');
    }

    const trainer = new LlamaTrainer(model, bank);
    const optimizer = AdamW.forBank(backend, bank, config.numLayers, { lr: 1e-4, maxGradNorm: 1 });
    const samples = Array.from({ length: trainBatch }, (_, s) => ({ tokens: Array.from({ length: seqLen }, (_, i) => (s * 131 + i * 17) % config.vocabSize), adapter: s % adapters, promptLength: seqLen / 2, advantage: s % 2 ? 1 : -1 }));
    const populoraStep = async () => {
      const start = performance.now();
      await policyGradientStep(trainer, optimizer, samples, { reduction: 'token' });
      return performance.now() - start;
    };
    const shapes: TimedShape[] = [...BATCHES.map((b) => timedShape(b, 0, promptLen, decodeSteps, config.vocabSize)), timedShape(adapters, adapters, promptLen, decodeSteps, config.vocabSize)];
    const inference: InferenceRow[] = THREADS.flatMap((threads) => shapes.flatMap((s) => (['prompt', 'decode'] as const).map((phase) => ({ threads, batch: s.batch, adapters: s.adapters, phase, populoraTokPerS: [], llamaCppTokPerS: [] }))));
    const training: TrainingRow[] = THREADS.map((threads) => ({ threads, populoraStepMs: [], torchStepMs: [] }));
    const loadBefore = loadavg()[0]!;
    const loads: number[] = [];
    for (let round = 0; round < rounds; round++) {
      for (const threads of round % 2 ? [...THREADS].reverse() : THREADS) {
        backend.setThreads(threads);
        for (const shape of PARTS.includes('inference') ? shapes : []) {
          const ours = async () => {
            const t = await timePopulora(side, shape);
            rowsOf(threads, shape).forEach((r) => r.populoraTokPerS.push(r.phase === 'prompt' ? t.prefillTokPerS : t.decodeTokPerS));
          };
          const theirs = async () => {
            if (!llamaCpp) return;
            const t = (await llamaCpp.peer.request({ type: 'time', shape, threads })) as Extract<PeerReply, { type: 'time' }>;
            rowsOf(threads, shape).forEach((r) => r.llamaCppTokPerS.push(r.phase === 'prompt' ? t.prefillTokPerS : t.decodeTokPerS));
          };
          for (const side of round % 2 ? [theirs, ours] : [ours, theirs]) await side();
        }
        const row = training.find((r) => r.threads === threads)!;
        const ourSteps = async () => {
          await populoraStep(); // warm-up at this thread count
          for (let i = 0; i < trainRepeats; i++) row.populoraStepMs.push(await populoraStep());
        };
        const torchSteps = async () => {
          if (torch) row.torchStepMs.push(...(await torch.request<{ stepMs: number[] }>({ type: 'time', threads, batch: trainBatch, seq: seqLen, repeats: trainRepeats, promptLength: seqLen / 2 })).stepMs);
        };
        if (PARTS.includes('training')) for (const side of round % 2 ? [torchSteps, ourSteps] : [ourSteps, torchSteps]) await side();
        loads.push(loadavg()[0]!);
        console.error(`  round ${round + 1} of ${rounds}: ${threads} thread(s), load average ${loads.at(-1)!.toFixed(1)}`);
      }
    }
    function rowsOf(threads: number, shape: TimedShape) {
      return inference.filter((r) => r.threads === threads && r.batch === shape.batch && r.adapters === shape.adapters);
    }
    report({ loadBefore, loads, inference, training, agreements, torchAgreement, llamaCppInfo: llamaCpp?.info });
  } finally {
    llamaCpp?.peer.close();
    void torch?.close();
    backend.destroy();
  }
}

function report(r: { loadBefore: number; loads: number[]; inference: InferenceRow[]; training: TrainingRow[]; agreements: Agreement[]; torchAgreement?: { maxAbsLogitDiff: number; logitSpread: number }; llamaCppInfo?: LlamaCppInfo }) {
  const config = presetConfig(args.preset!);
  const shown = (xs: number[]) => (xs.length === 0 ? '—' : xs.length > 1 ? `${median(xs).toFixed(1)} (${Math.min(...xs).toFixed(1)}–${Math.max(...xs).toFixed(1)})` : xs[0]!.toFixed(1));
  const ratio = (a: number[], b: number[]) => (a.length && b.length ? `${(median(a) / median(b)).toFixed(2)}x` : '—');
  const oneThread = (row: InferenceRow) => r.inference.find((o) => o.threads === THREADS[0] && o.batch === row.batch && o.adapters === row.adapters && o.phase === row.phase)!;
  console.log(`\nmodel ${args.preset} (${config.numLayers} layers, hidden ${config.hiddenSize}, vocabulary ${config.vocabSize}; f16 weights), LoRA rank ${rank} on all 7 projections, ${adapters} adapters; prompt ${promptLen}, ${decodeSteps} decode steps; medians (range) of ${rounds} alternating rounds`);
  console.log(`populora: cpu backend (WebAssembly SIMD kernels); llama.cpp: ${r.llamaCppInfo ? `${r.llamaCppInfo.llamaCppRelease}, ${r.llamaCppInfo.device}, flash attention ${r.llamaCppInfo.flashAttention}` : 'not run'}; PyTorch: ${r.torchAgreement ? 'Debian python3-torch' : 'not run'}`);
  console.log(`load average (1 min) ${r.loadBefore.toFixed(1)} before, ${r.loads.map((l) => l.toFixed(1)).join(', ')} after each round's thread count, on ${cpus().length} cores\n`);
  if (PARTS.includes('inference')) console.log(`| threads | batch × adapters | phase | populora tok/s | llama.cpp tok/s | populora / llama.cpp | populora / its ${THREADS[0]} thread${THREADS[0] === 1 ? '' : 's'} |\n|---:|---|---|---:|---:|---:|---:|`);
  for (const row of PARTS.includes('inference') ? r.inference : []) console.log(`| ${row.threads} | ${row.batch} × ${row.adapters || 'base'} | ${row.phase} | ${shown(row.populoraTokPerS)} | ${shown(row.llamaCppTokPerS)} | ${ratio(row.populoraTokPerS, row.llamaCppTokPerS)} | ${ratio(row.populoraTokPerS, oneThread(row).populoraTokPerS)} |`);
  if (PARTS.includes('training')) console.log(`\nLoRA training step: ${trainBatch} sequences of ${seqLen} tokens over ${adapters} adapters (forward, backward, AdamW)\n\n| threads | populora step ms | PyTorch step ms | populora speed / PyTorch | populora / its ${THREADS[0]} thread${THREADS[0] === 1 ? '' : 's'} |\n|---:|---:|---:|---:|---:|`);
  const first = r.training[0]!;
  for (const row of PARTS.includes('training') ? r.training : []) console.log(`| ${row.threads} | ${shown(row.populoraStepMs)} | ${shown(row.torchStepMs)} | ${ratio(row.torchStepMs, row.populoraStepMs)} | ${ratio(first.populoraStepMs, row.populoraStepMs)} |`);
  mkdirSync(dirname(args.out!), { recursive: true });
  writeFileSync(args.out!, JSON.stringify({ preset: args.preset, config, storage: 'f16', threads: THREADS, batches: BATCHES, adapters, rank, promptLen, decodeSteps, trainBatch, seqLen, rounds, cores: cpus().length, ...r }, null, 2));
  console.log(`\nwrote ${args.out}`);
}

await main().catch((error: unknown) => {
  console.error(`bench/cpu-peers: ${error instanceof Error ? error.message : String(error)}`);
  process.exitCode = 1;
});
