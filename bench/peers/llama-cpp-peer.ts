// The pieces of a run beside llama.cpp that more than one bench uses (bench/peers/llama-cpp.ts, bench/cpu-peers.ts):
// the model and adapters written in Hugging Face / PEFT layout and converted to GGUF, a llama.cpp backend in a worker
// process, populora's timing of the same shapes, and the check that both compute the same model.

import { execFileSync, fork, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Backend } from '../../src/backend/backend.js';
import { randomModel, saveModel } from '../../src/model/checkpoint.js';
import type { LlamaConfig } from '../../src/model/config.js';
import { generate } from '../../src/model/generate.js';
import type { LlamaModel } from '../../src/model/llama.js';
import type { LoraBank } from '../../src/model/lora-bank.js';
import { LORA_MODULES, randomAdapter, savePeftAdapter } from '../../src/model/peft.js';
import { ensureNodeLlamaCpp } from './install.js';
import type { LlamaCppBackend, LlamaCppInfo, PeerReply, PeerRequest, PeerSetup, TimedShape } from './protocol.js';

/** The greedy check: a short prompt, this many generated tokens, logits compared at the first of them. */
export const CHECK_PROMPT_LEN = 8;
export const checkPrompt = (vocabSize: number) => Array.from({ length: CHECK_PROMPT_LEN }, (_, i) => (3 + 997 * i) % vocabSize);
export const CHECK_STEPS = 16;
/** Largest |Δlogit| accepted, as a fraction of the logits' spread: f16 weights, f16 or f32 activations, fp32 sums. */
export const LOGIT_TOLERANCE = 0.01;

const here = dirname(fileURLToPath(import.meta.url));
export const seconds = (start: number) => (performance.now() - start) / 1000;
export { median } from '../stats.js'; // (cpu-builds, cpu-peers, cpu-scaling and llama-cpp import it from here)

// ---- The model, the adapters and their GGUF conversion ----

/** Writes the bench model (f16, as timed) and `adapters` PEFT adapters in Hugging Face layout. */
export function writeModelFolders(dir: string, config: LlamaConfig, adapters: number, rank: number): { modelDir: string; adapterDirs: string[] } {
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
export function ggufPyDirectory(cacheDir: string): string {
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
export function convertToGguf(modelDir: string, adapterDirs: string[], ggufDir: string, ggufPy: string): void {
  const python = process.env['PYTHON'] ?? 'python3';
  const converter = join(here.replace(/\/dist\/bench\//, '/bench/'), 'hf_to_gguf.py'); // beside this file's source
  const result = spawnSync(python, [converter, modelDir, ggufDir, ...adapterDirs], { env: { ...process.env, PYTHONPATH: ggufPy }, encoding: 'utf8' });
  if (result.error) throw new Error(`cannot run ${python} (${result.error.message}); install Python 3 with numpy (Debian: apt-get install -y python3 python3-numpy python3-yaml) or set PYTHON`);
  if (result.status !== 0) throw new Error(`GGUF conversion failed: ${result.stderr.trim() || `exit status ${result.status}`}`);
}

// ---- llama.cpp, one worker process per backend ----

export class LlamaCppPeer {
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

export interface PopuloraSide {
  backend: Backend;
  model: LlamaModel;
  bank: LoraBank;
}

/** bench/inference.ts's measurement on the given tokens: warm-up prefill, timed prefill, timed decode steps. */
export async function timePopulora({ model, bank }: PopuloraSide, shape: TimedShape): Promise<{ prefillTokPerS: number; decodeTokPerS: number }> {
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
export async function lastLogits({ model, bank }: PopuloraSide, prompt: number[], adapter: number): Promise<Float32Array> {
  return (await model.logits(prompt, adapter, bank)).slice((prompt.length - 1) * model.config.vocabSize);
}

/** max − min of the values (a loop: a vocabulary of 151,936 spread into Math.max overflows the stack). */
export function spreadOf(values: ArrayLike<number>): number {
  let [min, max] = [Infinity, -Infinity];
  for (let i = 0; i < values.length; i++) [min, max] = [Math.min(min, values[i]!), Math.max(max, values[i]!)];
  return max - min;
}

export const maxAbsDiff = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  let max = 0;
  for (let i = 0; i < a.length; i++) max = Math.max(max, Math.abs(a[i]! - b[i]!)); // a NaN (a missing logit) stays NaN
  return max;
};

export interface Agreement {
  populora: string; // which backend of populora
  llamaCpp: LlamaCppBackend;
  adapter: number; // -1 = base model
  populoraTokens: number[];
  llamaCppTokens: number[];
  matchingTokens: number; // length of the common prefix
  maxAbsLogitDiff: number; // populora against llama.cpp, at the first generated token
  logitSpread: number; // max - min of populora's logits there
  adapterEffect: number; // max |Δlogit| the adapter makes in populora: the check sees adapters only above the diff
}

export async function checkAgreement(side: PopuloraSide, name: string, peer: LlamaCppPeer, adapter: number): Promise<Agreement> {
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
    logitSpread: spreadOf(ourLogits),
    adapterEffect: adapter < 0 ? 0 : maxAbsDiff(ourLogits, await lastLogits(side, prompt, -1)),
  };
}

export function timedShape(batch: number, adapters: number, promptLen: number, decodeSteps: number, vocabSize: number): TimedShape {
  return {
    batch,
    adapters,
    promptLen,
    decodeSteps,
    promptTokens: Array.from({ length: batch }, (_, s) => Array.from({ length: promptLen }, (_, i) => (s * 31 + s * promptLen + i) % vocabSize)),
    decodeTokens: Array.from({ length: batch }, (_, s) => Array.from({ length: decodeSteps }, (_, step) => (s + step) % vocabSize)),
  };
}

