// populora beside llama.cpp on the same model, device and tokens, in one run: prompt tokens/s and decode tokens/s at
// batch 1, at batch N on the base model, and at batch N across N LoRA adapters (populora in one batch; llama.cpp,
// which applies one adapter set per context, one adapter at a time with the times summed). Pairs: populora's WebGPU
// backend against llama.cpp's Vulkan backend, populora's CPU backend against llama.cpp's CPU backend, one thread
// where a thread count applies. Rounds alternate the two sides (and which goes first) shape by shape.
//
//   npm run build && node dist/bench/peers/llama-cpp.js [--preset bench-small] [--prompt 32] [--decode 16] [--rank 16]
//       [--adapters 32] [--rounds 2] [--pairs webgpu,cpu] [--out bench/results/peers-<device>.json]
//
// node-llama-cpp is not a dependency of populora: the first run installs it into bench/peers/node_modules (npm ci
// from bench/peers' own lock, about 700 MB; install.ts). Needs python3 with numpy (Debian: apt-get install -y
// python3-numpy python3-yaml) to run gguf-py, taken from the llama.cpp sources node-llama-cpp ships, and git to
// unpack them. The model and adapters are written in Hugging Face / PEFT layout to a temporary folder and
// converted to GGUF f16 by hf_to_gguf.py; populora loads the same folder. Before timing, each pair must agree on a
// short greedy generation (base model and one adapter): the first token equal and every logit within 1% of the
// logits' spread, or the run stops.

import { execFileSync, fork, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BenchUsageError, benchArgs } from '../args.js';
import type { Backend } from '../../src/backend/backend.js';
import { openBackend } from '../../src/backend/select.js';
import { loadModel, randomModel, saveModel, type ModelWeights } from '../../src/model/checkpoint.js';
import type { LlamaConfig } from '../../src/model/config.js';
import { generate } from '../../src/model/generate.js';
import { LlamaModel } from '../../src/model/llama.js';
import { LoraBank } from '../../src/model/lora-bank.js';
import { LORA_MODULES, loadPeftAdapter, randomAdapter, savePeftAdapter } from '../../src/model/peft.js';
import { presetConfig } from '../presets.js';
import { ensureNodeLlamaCpp } from './install.js';
import type { LlamaCppBackend, LlamaCppInfo, PeerReply, PeerRequest, PeerSetup, TimedShape } from './protocol.js';

const args = benchArgs(import.meta.url, {
  options: {
    preset: { type: 'string', default: 'bench-small' },
    prompt: { type: 'string', default: '32' },
    decode: { type: 'string', default: '16' },
    rank: { type: 'string', default: '16' },
    adapters: { type: 'string', default: '32' },
    rounds: { type: 'string', default: '2' },
    pairs: { type: 'string', default: 'webgpu,cpu' },
    out: { type: 'string' },
  },
});

/** populora's backend -> the llama.cpp backend it is held against. */
const PEER_OF = { webgpu: 'vulkan', cpu: 'cpu' } as const satisfies Record<string, LlamaCppBackend>;
type PopuloraBackend = keyof typeof PEER_OF;

/** The greedy check: a short prompt, this many generated tokens, logits compared at the first of them. */
const CHECK_PROMPT_LEN = 8;
const checkPrompt = (vocabSize: number) => Array.from({ length: CHECK_PROMPT_LEN }, (_, i) => (3 + 997 * i) % vocabSize);
const CHECK_STEPS = 16;
/** Largest |Δlogit| accepted, as a fraction of the logits' spread: f16 weights, f16 or f32 activations, fp32 sums. */
const LOGIT_TOLERANCE = 0.01;

const here = dirname(fileURLToPath(import.meta.url));
const seconds = (start: number) => (performance.now() - start) / 1000;
const median = (xs: number[]) => {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

// ---- The model, the adapters and their GGUF conversion ----

/** Writes the bench model (f16, as timed) and `adapters` PEFT adapters in Hugging Face layout. */
function writeModelFolders(dir: string, config: LlamaConfig, adapters: number, rank: number): { modelDir: string; adapterDirs: string[] } {
  const modelDir = join(dir, 'model');
  saveModel(modelDir, config, randomModel(config, 1), { dtype: 'F16' });
  const adapterDirs = Array.from({ length: adapters }, (_, slot) => {
    const adapterDir = join(dir, `adapter-${String(slot).padStart(2, '0')}`);
    savePeftAdapter(adapterDir, randomAdapter(config, { rank, targets: [...LORA_MODULES], seed: slot, init: 'gaussian' }));
    return adapterDir;
  });
  return { modelDir, adapterDirs };
}

/** gguf-py from the llama.cpp release node-llama-cpp ships: its unpacked sources, or else its git bundle, unpacked once. */
function ggufPyDirectory(cacheDir: string): string {
  const packageDir = ensureNodeLlamaCpp();
  const unpacked = join(packageDir, 'llama', 'llama.cpp', 'gguf-py'); // after `npx node-llama-cpp source download`
  if (existsSync(unpacked)) return unpacked;
  const bundle = join(packageDir, 'llama', 'gitRelease.bundle');
  if (!existsSync(bundle)) throw new Error(`node-llama-cpp ships no llama.cpp sources (neither ${unpacked} nor ${bundle}); run npx node-llama-cpp source download`);
  const { tag } = JSON.parse(readFileSync(join(packageDir, 'llama', 'llama.cpp.info.json'), 'utf8')) as { tag: string };
  const target = join(cacheDir, `llama.cpp-${tag}`);
  if (!existsSync(join(target, 'gguf-py', 'gguf', '__init__.py'))) {
    const gitDir = join(cacheDir, 'llama.cpp.git');
    rmSync(gitDir, { recursive: true, force: true });
    mkdirSync(target, { recursive: true });
    try {
      execFileSync('git', ['init', '--quiet', '--bare', gitDir]);
      execFileSync('git', ['--git-dir', gitDir, 'fetch', '--quiet', bundle, 'HEAD']);
      const tar = execFileSync('git', ['--git-dir', gitDir, 'archive', 'FETCH_HEAD', 'gguf-py'], { maxBuffer: 1 << 28 });
      execFileSync('tar', ['-x', '-C', target], { input: tar });
    } catch (error) {
      throw new Error(`cannot unpack gguf-py from ${bundle} (needs git and tar): ${(error as Error).message}`);
    } finally {
      rmSync(gitDir, { recursive: true, force: true });
    }
  }
  return join(target, 'gguf-py');
}

/** model.gguf and one <adapter folder>.gguf per adapter, in ggufDir. */
function convertToGguf(modelDir: string, adapterDirs: string[], ggufDir: string, ggufPy: string): void {
  const python = process.env['PYTHON'] ?? 'python3';
  const converter = join(here.replace(/\/dist\/bench\//, '/bench/'), 'hf_to_gguf.py'); // beside this file's source
  const result = spawnSync(python, [converter, modelDir, ggufDir, ...adapterDirs], { env: { ...process.env, PYTHONPATH: ggufPy }, encoding: 'utf8' });
  if (result.error) throw new Error(`cannot run ${python} (${result.error.message}); install Python 3 with numpy (Debian: apt-get install -y python3 python3-numpy python3-yaml) or set PYTHON`);
  if (result.status !== 0) throw new Error(`GGUF conversion failed: ${result.stderr.trim() || `exit status ${result.status}`}`);
}

// ---- llama.cpp, one worker process per backend ----

class LlamaCppPeer {
  private pending: { resolve: (reply: PeerReply) => void; reject: (error: Error) => void } | undefined;

  private constructor(private readonly child: ChildProcess, readonly backend: LlamaCppBackend) {
    child.on('message', (reply: PeerReply) => {
      const pending = this.pending;
      this.pending = undefined;
      if (reply.type === 'error') pending?.reject(new Error(`llama.cpp (${backend}): ${reply.message}`));
      else pending?.resolve(reply);
    });
    child.on('exit', (code, signal) => this.pending?.reject(new Error(`the llama.cpp ${backend} worker exited (${signal ?? `status ${code}`})`)));
  }

  static async start(setup: PeerSetup): Promise<{ peer: LlamaCppPeer; info: LlamaCppInfo }> {
    const worker = join(here, 'llama-cpp-worker.js');
    if (!existsSync(worker)) throw new Error(`${worker} is missing: run npm run build first`);
    // ggml's Vulkan backend skips CPU-type devices (lavapipe) unless GGML_VK_VISIBLE_DEVICES names one.
    const env = setup.backend === 'vulkan' ? { ...process.env, GGML_VK_VISIBLE_DEVICES: process.env['GGML_VK_VISIBLE_DEVICES'] ?? '0' } : process.env;
    const peer = new LlamaCppPeer(fork(worker, [], { env, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }), setup.backend);
    try {
      const reply = await peer.request({ type: 'start', setup });
      return { peer, info: (reply as Extract<PeerReply, { type: 'started' }>).info };
    } catch (error) {
      peer.close();
      throw error;
    }
  }

  request(request: PeerRequest): Promise<PeerReply> {
    return new Promise((resolve, reject) => {
      if (!this.child.connected) return reject(new Error(`the llama.cpp ${this.backend} worker is gone`));
      this.pending = { resolve, reject };
      this.child.send(request);
    });
  }

  close(): void {
    if (this.child.connected) this.child.disconnect();
  }
}

// ---- populora ----

interface PopuloraSide {
  backend: Backend;
  model: LlamaModel;
  bank: LoraBank;
}

/** bench/inference.ts's measurement on the given tokens: warm-up prefill, timed prefill, timed decode steps. */
async function timePopulora({ model, bank }: PopuloraSide, shape: TimedShape): Promise<{ prefillTokPerS: number; decodeTokPerS: number }> {
  const { batch, adapters, promptLen, decodeSteps } = shape;
  const b = model.backend;
  const cache = model.createKvCache(batch, promptLen + decodeSteps);
  const run = async (tokens: number[], slots: number[], positions: number[], logitRows: number[]) => {
    const adapterOf = (slot: number) => (adapters === 0 ? -1 : slot % adapters);
    const logits = model.forward({ tokens: Int32Array.from(tokens), slots: Int32Array.from(slots), positions: Int32Array.from(positions), adapters: Int32Array.from(slots, adapterOf), logitRows: Int32Array.from(logitRows) }, cache, adapters === 0 ? undefined : bank);
    await b.readF32(logits); // the step's one readback, as generation does
    b.free(logits);
  };
  const promptSlots = Array.from({ length: batch * promptLen }, (_, i) => Math.floor(i / promptLen));
  const prefill = () => run(shape.promptTokens.flat(), promptSlots, promptSlots.map((_, i) => i % promptLen), Array.from({ length: batch }, (_, s) => s * promptLen + promptLen - 1));
  await prefill(); // warm-up: pipelines compile, buffers enter the pool
  let start = performance.now();
  await prefill();
  const prefillS = seconds(start);
  const slots = Array.from({ length: batch }, (_, s) => s);
  start = performance.now();
  for (let step = 0; step < decodeSteps; step++) await run(slots.map((s) => shape.decodeTokens[s]![step]!), slots, slots.map(() => promptLen + step), slots);
  const decodeS = seconds(start);
  model.freeKvCache(cache);
  return { prefillTokPerS: (batch * promptLen) / prefillS, decodeTokPerS: (batch * decodeSteps) / decodeS };
}

/** Next-token logits [V] after `prompt`. */
async function lastLogits({ model, bank }: PopuloraSide, prompt: number[], adapter: number): Promise<Float32Array> {
  return (await model.logits(prompt, adapter, bank)).slice((prompt.length - 1) * model.config.vocabSize);
}

const maxAbsDiff = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  let max = 0;
  for (let i = 0; i < a.length; i++) max = Math.max(max, Math.abs(a[i]! - b[i]!)); // a NaN (a missing logit) stays NaN
  return max;
};

// ---- The run ----

interface Agreement {
  populora: PopuloraBackend;
  llamaCpp: LlamaCppBackend;
  adapter: number; // -1 = base model
  populoraTokens: number[];
  llamaCppTokens: number[];
  matchingTokens: number; // length of the common prefix
  maxAbsLogitDiff: number; // populora against llama.cpp, at the first generated token
  logitSpread: number; // max - min of populora's logits there
  adapterEffect: number; // max |Δlogit| the adapter makes in populora: the check sees adapters only above the diff
}

async function checkAgreement(side: PopuloraSide, name: PopuloraBackend, peer: LlamaCppPeer, adapter: number): Promise<Agreement> {
  const vocabSize = side.model.config.vocabSize;
  const prompt = checkPrompt(vocabSize);
  const [ours] = await generate(side.model, [{ requestId: 0, prompt, adapter, maxTokens: CHECK_STEPS, seed: 0, temperature: 0 }], { bank: side.bank });
  const ourLogits = await lastLogits(side, prompt, adapter);
  const theirs = (await peer.request({ type: 'greedy', prompt, steps: CHECK_STEPS, adapter, vocabSize })) as Extract<PeerReply, { type: 'greedy' }>;
  const matching = ours!.tokens.findIndex((t, i) => t !== theirs.tokens[i]);
  return {
    populora: name,
    llamaCpp: peer.backend,
    adapter,
    populoraTokens: ours!.tokens,
    llamaCppTokens: theirs.tokens,
    matchingTokens: matching < 0 ? CHECK_STEPS : matching,
    maxAbsLogitDiff: maxAbsDiff(ourLogits, theirs.firstLogits),
    logitSpread: Math.max(...ourLogits) - Math.min(...ourLogits),
    adapterEffect: adapter < 0 ? 0 : maxAbsDiff(ourLogits, await lastLogits(side, prompt, -1)),
  };
}

function timedShape(batch: number, adapters: number, promptLen: number, decodeSteps: number, vocabSize: number): TimedShape {
  return {
    batch,
    adapters,
    promptLen,
    decodeSteps,
    promptTokens: Array.from({ length: batch }, (_, s) => Array.from({ length: promptLen }, (_, i) => (s * 31 + s * promptLen + i) % vocabSize)),
    decodeTokens: Array.from({ length: batch }, (_, s) => Array.from({ length: decodeSteps }, (_, step) => (s + step) % vocabSize)),
  };
}

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

async function startPair(name: PopuloraBackend, config: LlamaConfig, weights: ModelWeights, files: { ggufDir: string; adapterDirs: string[] }, rank: number, contextSize: number): Promise<Pair> {
  const backend = await openBackend(name).catch((error: Error) => {
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
    for (const name of names) pairs.push(await startPair(name, config, weights, { ggufDir, adapterDirs }, rank, contextSize));
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
