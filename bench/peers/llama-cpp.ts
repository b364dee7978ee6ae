// populora beside llama.cpp on the same model, device and tokens, in one run: prompt tokens/s and decode tokens/s at
// batch 1, at batch N on the base model, and at batch N across N LoRA adapters (populora in one batch; llama.cpp,
// which applies one adapter set per context, one adapter at a time with the times summed). Pairs: populora's WebGPU
// backend against llama.cpp's Vulkan backend, populora's CPU backend against llama.cpp's CPU backend, both CPU backends
// on --threads threads (default 1; bench/cpu-peers.ts compares thread counts). Rounds alternate the two sides (and
// which goes first) shape by shape.
//
//   npm run build && node dist/bench/peers/llama-cpp.js [--preset bench-small] [--prompt 32] [--decode 16] [--rank 16]
//       [--adapters 32] [--rounds 2] [--pairs webgpu,cpu] [--threads 1] [--out bench/results/peers-<device>.json]
//
// node-llama-cpp is not a dependency of populora: the first run installs it into bench/peers/node_modules (npm ci
// from bench/peers' own lock, about 700 MB; install.ts). Needs python3 with numpy (Debian: apt-get install -y
// python3-numpy python3-yaml) to run gguf-py, taken from the llama.cpp sources node-llama-cpp ships, and git to
// unpack them. The model and adapters are written in Hugging Face / PEFT layout to a temporary folder and
// converted to GGUF f16 by hf_to_gguf.py; populora loads the same folder. Before timing, each pair must agree on a
// short greedy generation (base model and one adapter): the first token equal and every logit within 1% of the
// logits' spread, or the run stops.

import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { BenchUsageError, benchArgs } from '../args.js';
import { openBackend } from '../../src/backend/select.js';
import { loadModel, type ModelWeights } from '../../src/model/checkpoint.js';
import type { LlamaConfig } from '../../src/model/config.js';
import { LlamaModel } from '../../src/model/llama.js';
import { LoraBank } from '../../src/model/lora-bank.js';
import { LORA_MODULES, loadPeftAdapter } from '../../src/model/peft.js';
import { presetConfig } from '../presets.js';
import { checkAgreement, CHECK_PROMPT_LEN, CHECK_STEPS, convertToGguf, ggufPyDirectory, LlamaCppPeer, LOGIT_TOLERANCE, median, timedShape, timePopulora, writeModelFolders, type Agreement, type PopuloraSide } from './llama-cpp-peer.js';
import type { LlamaCppBackend, LlamaCppInfo, PeerReply, TimedShape } from './protocol.js';

const args = benchArgs(import.meta.url, {
  options: {
    preset: { type: 'string', default: 'bench-small' },
    prompt: { type: 'string', default: '32' },
    decode: { type: 'string', default: '16' },
    rank: { type: 'string', default: '16' },
    adapters: { type: 'string', default: '32' },
    rounds: { type: 'string', default: '2' },
    pairs: { type: 'string', default: 'webgpu,cpu' },
    threads: { type: 'string', default: '1' },
    out: { type: 'string' },
  },
});

/** populora's backend -> the llama.cpp backend it is held against. */
const PEER_OF = { webgpu: 'vulkan', cpu: 'cpu' } as const satisfies Record<string, LlamaCppBackend>;
type PopuloraBackend = keyof typeof PEER_OF;

/** A short file name for the device populora's WebGPU backend ran on ("lavapipe" for Mesa's llvmpipe). */
function deviceSlug(description: string): string {
  if (/llvmpipe/i.test(description)) return 'lavapipe';
  const device = description.split(' / ')[2] ?? description; // Dawn: vendor / architecture / device / driver
  return device.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '') || 'webgpu';
}

/** Both sides of one pair: populora's backend with the model and every adapter loaded, and its llama.cpp peer. */
interface Pair {
  name: PopuloraBackend;
  side: PopuloraSide;
  peer: LlamaCppPeer;
  info: LlamaCppInfo;
}

async function startPair(name: PopuloraBackend, config: LlamaConfig, weights: ModelWeights, files: { ggufDir: string; adapterDirs: string[] }, rank: number, contextSize: number, threads: number): Promise<Pair> {
  const backend = await openBackend(name, undefined, threads).catch((error: Error) => {
    throw new Error(`populora's ${name} backend: ${error.message}${name === 'webgpu' ? ' (run with --pairs cpu to compare the CPU backends only)' : ''}`);
  });
  const model = LlamaModel.upload(backend, config, weights, { storage: 'f16', maxContext: contextSize });
  const bank = new LoraBank(backend, config, files.adapterDirs.length, rank, LORA_MODULES);
  files.adapterDirs.forEach((dir, slot) => bank.load(slot, loadPeftAdapter(dir, config)));
  const { peer, info } = await LlamaCppPeer.start({
    backend: PEER_OF[name],
    modelPath: join(files.ggufDir, 'model.gguf'),
    adapterPaths: files.adapterDirs.map((dir) => join(files.ggufDir, `${basename(dir)}.gguf`)),
    batch: files.adapterDirs.length,
    contextSize,
    threads: [threads],
  }).catch((error: unknown) => {
    backend.destroy();
    throw error;
  });
  console.error(`llama.cpp ${info.backend} (${info.llamaCppRelease}): ${info.device}, ${info.gpuLayers}/${info.totalLayers} layers offloaded, ${info.threads} thread(s), flash attention ${info.flashAttention}`);
  if (info.backend === 'vulkan' && info.gpuLayers < info.totalLayers) console.error(`  warning: llama.cpp's Vulkan backend offloaded only ${info.gpuLayers} of ${info.totalLayers} layers; the rest runs on the CPU`);
  return { name, side: { backend, model, bank }, peer, info };
}

/** A peer running a different model would make the comparison worthless: base model and adapter 0, each pair. */
async function checkPairs(pairs: Pair[]): Promise<Agreement[]> {
  const agreements: Agreement[] = [];
  for (const { name, side, peer } of pairs) for (const adapter of [-1, 0]) agreements.push(await checkAgreement(side, name, peer, adapter));
  for (const a of agreements) {
    const adapterNote = a.adapter < 0 ? '' : `, the adapter moves them by up to ${a.adapterEffect.toFixed(2)}`;
    console.error(`check ${a.populora} vs llama.cpp ${a.llamaCpp}, ${a.adapter < 0 ? 'base model' : `adapter ${a.adapter}`}: ${a.matchingTokens}/${CHECK_STEPS} greedy tokens equal, max |Δlogit| ${a.maxAbsLogitDiff.toExponential(2)} (logits span ${a.logitSpread.toFixed(2)}${adapterNote})`);
  }
  const failed = agreements.filter((a) => !(a.maxAbsLogitDiff <= LOGIT_TOLERANCE * a.logitSpread) || a.matchingTokens === 0);
  if (failed.length > 0) throw new Error(`llama.cpp does not compute the same model as populora (${failed.length} check(s) failed above): the timings would compare different work`);
  return agreements;
}

type Throughput = { prefillTokPerS: number; decodeTokPerS: number };
interface Measured {
  pair: Pair;
  shape: TimedShape;
  populora: Throughput[]; // one per round
  llamaCpp: Throughput[];
}

/** Every shape on every pair, round after round; within a pair the side that goes first alternates by round. */
async function runRounds(pairs: Pair[], shapes: TimedShape[], rounds: number): Promise<Measured[]> {
  const measured = shapes.flatMap((shape) => pairs.map((pair): Measured => ({ pair, shape, populora: [], llamaCpp: [] })));
  for (let round = 0; round < rounds; round++) {
    for (const m of measured) {
      const ours = async () => void m.populora.push(await timePopulora(m.pair.side, m.shape));
      const theirs = async () => void m.llamaCpp.push((await m.pair.peer.request({ type: 'time', shape: m.shape })) as Extract<PeerReply, { type: 'time' }>);
      for (const side of round % 2 === 0 ? [ours, theirs] : [theirs, ours]) await side();
      console.error(`  round ${round + 1}: ${m.pair.name}, batch ${m.shape.batch}, ${m.shape.adapters || 'no'} adapters`);
    }
  }
  return measured;
}

interface Row {
  populora: PopuloraBackend;
  populoraDevice: string;
  llamaCpp: LlamaCppBackend;
  llamaCppDevice: string;
  gpuLayers: number;
  totalLayers: number;
  batch: number;
  adapters: number; // 0 = base model
  phase: 'prompt' | 'decode';
  populoraTokPerS: number[]; // one per round
  llamaCppTokPerS: number[];
  ratio: number; // median populora / median llama.cpp
}

function tableRows(pairs: Pair[], measured: Measured[]): Row[] {
  const byPair = pairs.flatMap((pair) => measured.filter((m) => m.pair === pair));
  return byPair.flatMap(({ pair, shape, populora, llamaCpp }) =>
    (['prompt', 'decode'] as const).map((phase): Row => {
      const pick = (t: Throughput) => (phase === 'prompt' ? t.prefillTokPerS : t.decodeTokPerS);
      const [ours, theirs] = [populora.map(pick), llamaCpp.map(pick)];
      const { info } = pair;
      return { populora: pair.name, populoraDevice: pair.side.backend.deviceDescription, llamaCpp: info.backend, llamaCppDevice: info.device, gpuLayers: info.gpuLayers, totalLayers: info.totalLayers, batch: shape.batch, adapters: shape.adapters, phase, populoraTokPerS: ours, llamaCppTokPerS: theirs, ratio: median(ours) / median(theirs) };
    }),
  );
}

function printTable(rows: Row[]): void {
  const spread = (xs: number[]) => (xs.length > 1 ? `${median(xs).toFixed(1)} (${Math.min(...xs).toFixed(1)}–${Math.max(...xs).toFixed(1)})` : xs[0]!.toFixed(1));
  console.log('\n| populora | llama.cpp (device, layers offloaded) | batch × adapters | phase | populora tok/s | llama.cpp tok/s | populora / llama.cpp |');
  console.log('|---|---|---|---|---:|---:|---:|');
  for (const r of rows) {
    const shape = `${r.batch} × ${r.adapters === 0 ? 'base' : r.adapters}`;
    console.log(`| ${r.populora} | ${r.llamaCpp}: ${r.llamaCppDevice}, ${r.gpuLayers}/${r.totalLayers} | ${shape} | ${r.phase} | ${spread(r.populoraTokPerS)} | ${spread(r.llamaCppTokPerS)} | ${r.ratio.toFixed(2)}x |`);
  }
}

async function main() {
  const config = presetConfig(args.preset!);
  const [promptLen, decodeSteps, rank, adapters, rounds] = [args.prompt, args.decode, args.rank, args.adapters, args.rounds].map(Number) as [number, number, number, number, number];
  const names = args.pairs!.split(',').map((p) => {
    if (!(p in PEER_OF)) throw new BenchUsageError(`--pairs: unknown "${p}"; choose from ${Object.keys(PEER_OF).join(', ')}`);
    return p as PopuloraBackend;
  });

  const cacheDir = join(tmpdir(), 'populora-peers');
  const workDir = join(cacheDir, args.preset!);
  rmSync(workDir, { recursive: true, force: true });
  console.error(`writing the model and ${adapters} adapters to ${workDir}, converting to GGUF`);
  const { modelDir, adapterDirs } = writeModelFolders(workDir, config, adapters, rank);
  const ggufDir = join(workDir, 'gguf');
  convertToGguf(modelDir, adapterDirs, ggufDir, ggufPyDirectory(cacheDir));
  const { weights } = loadModel(modelDir); // the very numbers the GGUF holds
  const contextSize = Math.max(promptLen + decodeSteps, CHECK_PROMPT_LEN + CHECK_STEPS);

  const pairs: Pair[] = [];
  try {
    for (const name of names) pairs.push(await startPair(name, config, weights, { ggufDir, adapterDirs }, rank, contextSize, Number(args.threads)));
    const agreements = await checkPairs(pairs);
    if (names.includes('webgpu')) console.error("(llama.cpp's Vulkan backend compiles its shaders at the first use of each shape: minutes on lavapipe the first time, then Mesa's shader cache has them)");
    const shapes = [timedShape(1, 0, promptLen, decodeSteps, config.vocabSize), timedShape(adapters, 0, promptLen, decodeSteps, config.vocabSize), timedShape(adapters, adapters, promptLen, decodeSteps, config.vocabSize)];
    // Other work on the machine slows both sides, unevenly: the load average says how much there was.
    const loadAverageBefore = loadavg()[0]!;
    const rows = tableRows(pairs, await runRounds(pairs, shapes, rounds));
    const loadAverageAfter = loadavg()[0]!;

    console.log(`\nmodel ${args.preset} (f16 matrices), prompt ${promptLen} tokens, ${decodeSteps} decode steps, LoRA rank ${rank} on all 7 projections; tok/s as median (range) of ${rounds} alternating rounds`);
    for (const { name, side } of pairs) console.log(`populora ${name}: ${side.backend.deviceDescription}`);
    console.log(`load average (1 min) ${loadAverageBefore.toFixed(1)} before, ${loadAverageAfter.toFixed(1)} after, on ${cpus().length} cores`);
    printTable(rows);
    const webgpu = pairs.find((p) => p.name === 'webgpu');
    const out = args.out ?? `bench/results/peers-${webgpu ? deviceSlug(webgpu.side.backend.deviceDescription) : 'cpu'}.json`;
    mkdirSync(dirname(out), { recursive: true });
    const llamaCpp = pairs.map((p) => p.info);
    writeFileSync(out, JSON.stringify({ preset: args.preset, config, storage: 'f16', promptLen, decodeSteps, rank, adapters, rounds, cores: cpus().length, loadAverageBefore, loadAverageAfter, llamaCpp, agreements, rows }, null, 2));
    console.log(`\nwrote ${out}`);
  } finally {
    for (const { peer, side } of pairs) {
      peer.close();
      side.backend.destroy();
    }
  }
}

await main().catch((error: unknown) => {
  console.error(`bench/peers/llama-cpp: ${error instanceof Error ? error.message : String(error)}`);
  process.exitCode = 1;
});
