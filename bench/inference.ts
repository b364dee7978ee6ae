// Inference throughput: prefill and decode tokens/s at batch 1, 8, 32 with 1, 8, 32 distinct LoRA adapters,
// LoRA overhead over base-only, and achieved memory bandwidth in decode; the kernel dispatches of a decode step and
// the host's time to record them (the forward call itself: it only encodes), per dispatch. Then decode through
// generate() with the host loop (a readback per token) and the device loop (a readback per --steps-per-read
// tokens), in alternating rounds. Then, on WebGPU with timestamp queries, the per-kernel table of a prefill and of
// the decode steps of each --profile shape (kernel-profile.ts). Prints tables; writes JSON.
//
//   node dist/bench/inference.js [--preset bench-small|qwen2.5-0.5b-shape] [--backend webgpu|cpu] [--weights f16|f32]
//                                [--prompt 16] [--decode 8] [--rank 16] [--peak-gbs N] [--out bench/results/inference.json]
//                                [--threads N]   (the CPU backend's; default: one per core)
//                                [--shapes 1x1,8x8,...]   (batch x distinct adapters; default: all six)
//                                [--loop-rounds 3] [--loop-decode 32] [--steps-per-read 16]   (0 rounds: no loop table)
//                                [--profile 1x1,32x32]   (batch x distinct adapters, 0 = base only; none: no profile)
//                                [--tile-weights]   (each tensor's random values drawn once a 65,536 and repeated:
//                                                    a 7B shape loads in seconds, not minutes)

import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { BenchUsageError, benchArgs } from './args.js';
import type { Backend, WeightStorage } from '../src/backend/backend.js';
import { openBackend, type BackendChoice } from '../src/backend/select.js';
import { randomModel } from '../src/model/checkpoint.js';
import type { LlamaConfig } from '../src/model/config.js';
import { DEFAULT_STEPS_PER_READ, generate, type DecodeLoop } from '../src/model/generate.js';
import { LlamaModel } from '../src/model/llama.js';
import { LoraBank } from '../src/model/lora-bank.js';
import { LORA_MODULES, loraModuleShape, randomAdapter } from '../src/model/peft.js';
import { printProfile, profilePhase, type PhaseProfile } from './kernel-profile.js';
import { presetConfig } from './presets.js';
import { median } from './stats.js';

const ALL_SHAPES = '1x1,8x1,8x8,32x1,32x8,32x32';

const args = benchArgs(import.meta.url, {
  options: {
    preset: { type: 'string', default: 'bench-small' },
    backend: { type: 'string', default: 'webgpu' },
    weights: { type: 'string', default: 'f16' },
    prompt: { type: 'string', default: '16' },
    decode: { type: 'string', default: '8' },
    rank: { type: 'string', default: '16' },
    'peak-gbs': { type: 'string' },
    threads: { type: 'string' },
    out: { type: 'string', default: 'bench/results/inference.json' },
    shapes: { type: 'string', default: ALL_SHAPES },
    'loop-rounds': { type: 'string', default: '3' },
    'loop-decode': { type: 'string', default: '32' },
    'steps-per-read': { type: 'string', default: String(DEFAULT_STEPS_PER_READ) },
    profile: { type: 'string', default: '1x1,32x32' },
    'tile-weights': { type: 'boolean', default: false },
  },
});
const parseShapes = (option: string, list: string, fewestAdapters: number) =>
  list.split(',').filter((shape) => shape !== '' && shape !== 'none').map((shape) => {
    const [batch, adapters] = shape.split('x').map(Number);
    if (!(batch! >= 1 && adapters! >= fewestAdapters)) throw new BenchUsageError(`--${option}: "${shape}" is not BATCHxADAPTERS with at least ${fewestAdapters} adapters, e.g. 8x8${fewestAdapters > 0 ? ' (each batch gets its base-only row too)' : ''}`);
    return [batch!, adapters!] as const;
  });
const SHAPES = parseShapes('shapes', args.shapes!, 1);
const PROFILE_SHAPES = parseShapes('profile', args.profile!, 0); // 0 adapters: base only
const TILE = 65536; // --tile-weights: values drawn a tensor

interface Row {
  batch: number;
  adapters: number; // 0 = base only
  prefillTokensPerS: number;
  decodeTokensPerS: number;
  decodeMsPerStep: number;
  decodeGBPerS: number;
  dispatchesPerStep: number; // decode (0 on the CPU backend)
  hostUsPerDispatch: number; // decode: the forward call's time (recording, no GPU wait) / its dispatches
}

const seconds = (start: number) => (performance.now() - start) / 1000;

/** Bytes one decode step must read: every matrix once, each distinct adapter's factors, the KV cache so far. */
function decodeBytes(c: LlamaConfig, storage: WeightStorage, adapters: number, rank: number, batch: number, context: number): number {
  const elementBytes = storage === 'f16' ? 2 : 4;
  const { hiddenSize: D, intermediateSize: F, numHeads: H, numKvHeads: Hkv, headDim: hd, numLayers: L, vocabSize: V } = c;
  const perLayer = D * H * hd * 2 + D * Hkv * hd * 2 + 3 * D * F;
  const lora = LORA_MODULES.reduce((n, m) => {
    const { inFeatures, outFeatures } = loraModuleShape(c, m);
    return n + rank * (inFeatures + outFeatures);
  }, 0);
  const kv = 2 * L * batch * context * Hkv * hd * 4;
  return (L * perLayer + V * D) * elementBytes + adapters * L * lora * 4 + kv;
}

/** A batch's prefill and decode steps through model.forward, each read back once as generation does. */
function forwardSteps(model: LlamaModel, bank: LoraBank | undefined, batch: number, adapters: number, promptLen: number, steps: number) {
  const b = model.backend;
  const V = model.config.vocabSize;
  const cache = model.createKvCache(batch, promptLen + 1 + steps);
  const adapterOf = (s: number) => (adapters === 0 ? -1 : s % adapters);
  const host = { ms: 0 }; // in forward calls
  const run = async (tokens: number[], slots: number[], positions: number[], logitRows: number[]) => {
    const batch = { tokens: Int32Array.from(tokens), slots: Int32Array.from(slots), positions: Int32Array.from(positions), adapters: Int32Array.from(slots, adapterOf), logitRows: Int32Array.from(logitRows) };
    const start = performance.now();
    const logits = model.forward(batch, cache, bank);
    host.ms += performance.now() - start;
    await b.readF32(logits);
    b.free(logits);
  };
  const slots = Array.from({ length: batch * promptLen }, (_, i) => Math.floor(i / promptLen));
  const rows = Array.from({ length: batch }, (_, s) => s);
  return {
    host,
    prefill: () => run(slots.map((s, i) => (s * 31 + i) % V), slots, slots.map((_, i) => i % promptLen), Array.from({ length: batch }, (_, s) => s * promptLen + promptLen - 1)),
    decode: (step: number) => run(rows.map((s) => (s + step) % V), rows, rows.map(() => promptLen + step), rows),
    free: () => model.freeKvCache(cache),
  };
}

async function measure(model: LlamaModel, bank: LoraBank | undefined, batch: number, adapters: number, promptLen: number, steps: number): Promise<Omit<Row, 'decodeGBPerS'>> {
  const b = model.backend;
  const run = forwardSteps(model, bank, batch, adapters, promptLen, steps);
  await run.prefill(); // warm-up: pipelines compile, buffers enter the pool
  let start = performance.now();
  await run.prefill();
  const prefillSeconds = seconds(start);
  await run.decode(0); // warm-up: the decode variants' pipelines compile (on lavapipe, in seconds)
  const dispatches = b.dispatches();
  run.host.ms = 0;
  start = performance.now();
  for (let step = 1; step <= steps; step++) await run.decode(step);
  const decodeSeconds = seconds(start);
  const dispatchesPerStep = (b.dispatches() - dispatches) / steps;
  run.free();
  return {
    batch, adapters, prefillTokensPerS: (batch * promptLen) / prefillSeconds, decodeTokensPerS: (batch * steps) / decodeSeconds, decodeMsPerStep: (decodeSeconds * 1000) / steps,
    dispatchesPerStep, hostUsPerDispatch: dispatchesPerStep === 0 ? 0 : (run.host.ms * 1000) / steps / dispatchesPerStep,
  };
}

/** The per-kernel tables of one shape's prefill and decode steps (after a warm-up of each), apart from the timed runs. */
async function profileShape(model: LlamaModel, bank: LoraBank | undefined, batch: number, adapters: number, promptLen: number, steps: number): Promise<PhaseProfile[]> {
  const run = forwardSteps(model, bank, batch, adapters, promptLen, steps);
  const shape = { storage: model.storage, adapters };
  const what = `batch ${batch}, ${adapters === 0 ? 'base only' : `${adapters} adapters`}`;
  await run.prefill();
  await run.decode(0);
  const prefill = await profilePhase(model.backend, `prefill (${what}, ${promptLen} tokens a sequence)`, { ...shape, meanContext: (promptLen + 1) / 2 }, run.prefill);
  const decode = await profilePhase(model.backend, `decode (${what}, ${steps} steps)`, { ...shape, meanContext: promptLen + 1 + steps / 2 }, async () => {
    for (let step = 1; step <= steps; step++) await run.decode(step);
  });
  run.free();
  return [prefill, decode];
}

interface LoopRow {
  batch: number;
  adapters: number;
  decodeTokensPerS: Record<DecodeLoop, number[]>; // one per round
  dispatchesPerToken: Record<DecodeLoop, number>;
}

/**
 * Decode through generate(): a call with 1 + steps new tokens less one with 1 (the prefill and the first token),
 * per token generated, and the dispatches between the two.
 */
async function generateDecode(model: LlamaModel, bank: LoraBank | undefined, batch: number, adapters: number, promptLen: number, steps: number, loop: DecodeLoop, stepsPerRead: number) {
  const V = model.config.vocabSize;
  const requests = (maxTokens: number) =>
    Array.from({ length: batch }, (_, s) => ({ requestId: s, prompt: Array.from({ length: promptLen }, (_, i) => (s * 31 + i) % V), adapter: adapters === 0 ? -1 : s % adapters, maxTokens, seed: 5, temperature: 0.8 }));
  const timed = async (maxTokens: number) => {
    const [start, dispatches] = [performance.now(), model.backend.dispatches()];
    await generate(model, requests(maxTokens), { bank, loop, stepsPerRead });
    return { ms: performance.now() - start, dispatches: model.backend.dispatches() - dispatches };
  };
  const [first, all] = [await timed(1), await timed(1 + steps)];
  return { tokensPerS: (batch * steps) / ((all.ms - first.ms) / 1000), dispatchesPerToken: (all.dispatches - first.dispatches) / steps };
}

/** Each shape's generate() decode with both loops, `rounds` times, the loops' order alternating round by round. */
async function compareLoops(model: LlamaModel, bank: LoraBank, promptLen: number, steps: number, rounds: number, stepsPerRead: number): Promise<LoopRow[]> {
  const shapes = SHAPES.flatMap(([batch, adapters], i) => (SHAPES.findIndex(([b]) => b === batch) === i ? [[batch, 0], [batch, adapters]] : [[batch, adapters]]));
  const rows = shapes.map(([batch, adapters]): LoopRow => ({ batch: batch!, adapters: adapters!, decodeTokensPerS: { host: [], device: [] }, dispatchesPerToken: { host: 0, device: 0 } }));
  for (const row of rows) for (const loop of ['host', 'device'] as const) await generateDecode(model, bank, row.batch, row.adapters, promptLen, 1, loop, stepsPerRead); // warm-up
  for (let round = 0; round < rounds; round++) {
    for (const row of rows) {
      for (const loop of round % 2 === 0 ? (['host', 'device'] as const) : (['device', 'host'] as const)) {
        const r = await generateDecode(model, bank, row.batch, row.adapters, promptLen, steps, loop, stepsPerRead);
        row.decodeTokensPerS[loop].push(r.tokensPerS);
        row.dispatchesPerToken[loop] = r.dispatchesPerToken;
      }
    }
    console.error(`  loop round ${round + 1} of ${rounds}`);
  }
  return rows;
}

function printLoops(rows: LoopRow[], steps: number, stepsPerRead: number): void {
  console.log(`\ngenerate() decode, ${steps} tokens a request after the first (temperature 0.8): the host loop reads each token back, the device loop every ${stepsPerRead}; tok/s: median (each round)`);
  console.log('| batch | adapters | host loop tok/s | device loop tok/s | device / host (medians) | device / host (median of the rounds\' ratios) | dispatches/token, host / device |');
  console.log('|---:|---:|---|---|---:|---:|---:|');
  for (const r of rows) {
    const [host, device] = [r.decodeTokensPerS.host, r.decodeTokensPerS.device];
    const shown = (values: number[]) => `${median(values).toFixed(1)} (${values.map((v) => v.toFixed(1)).join(', ')})`;
    console.log(`| ${r.batch} | ${r.adapters || 'base'} | ${shown(host)} | ${shown(device)} | ${(median(device) / median(host)).toFixed(2)}x | ${median(device.map((d, i) => d / host[i]!)).toFixed(2)}x | ${r.dispatchesPerToken.host.toFixed(1)} / ${r.dispatchesPerToken.device.toFixed(1)} |`);
  }
}

/** Streaming bandwidth of the device: acc += x over 2 × 32 MiB (reads 8 bytes, writes 4 per element). */
async function streamingGBPerS(b: Backend): Promise<number> {
  const n = 8 * 1024 * 1024;
  const [acc, x] = [b.zeros([n]), b.zeros([n])];
  const [probe, one] = [b.zeros([1]), b.zeros([1])];
  b.addInPlace(acc, x);
  await b.readF32(probe); // warm-up
  const repeats = 10;
  const start = performance.now();
  for (let i = 0; i < repeats; i++) b.addInPlace(acc, x);
  b.addInPlace(probe, one); // a tiny read after the streaming work waits for it to finish
  await b.readF32(probe);
  const gbs = (repeats * n * 12) / seconds(start) / 1e9;
  [acc, x, probe, one].forEach((t) => b.free(t));
  return gbs;
}

async function main() {
  const config = presetConfig(args.preset!);
  const [promptLen, steps, rank] = [Number(args.prompt), Number(args.decode), Number(args.rank)];
  const storage = args.weights as WeightStorage;
  const backend = await openBackend(args.backend as BackendChoice, undefined, args.threads === undefined ? undefined : Number(args.threads));
  try {
    const [loopRounds, loopSteps, stepsPerRead] = [Number(args['loop-rounds']), Number(args['loop-decode']), Number(args['steps-per-read'])];
    const model = LlamaModel.upload(backend, config, randomModel(config, 1, args['tile-weights'] ? TILE : Infinity), { storage, maxContext: promptLen + 1 + Math.max(steps, loopRounds > 0 ? loopSteps : 0) });
    const maxAdapters = Math.max(...[...SHAPES, ...PROFILE_SHAPES].map(([, a]) => a));
    const bank = new LoraBank(backend, config, maxAdapters, rank, LORA_MODULES);
    for (let slot = 0; slot < maxAdapters; slot++) bank.load(slot, randomAdapter(config, { rank, targets: [...LORA_MODULES], seed: slot, init: 'gaussian' }));
    const rows: Row[] = [];
    const withBase = new Set<number>(); // batches whose base-only row is measured (each LoRA row is compared with it)
    for (const [batch, adapters] of SHAPES) {
      for (const n of withBase.has(batch) ? [adapters] : [0, adapters]) {
        withBase.add(batch);
        const r = await measure(model, n === 0 ? undefined : bank, batch, n, promptLen, steps);
        const gbs = decodeBytes(config, storage, n, rank, batch, promptLen + 1 + steps / 2) / (r.decodeMsPerStep / 1000) / 1e9;
        rows.push({ ...r, decodeGBPerS: gbs });
        console.error(`  measured batch ${batch}, adapters ${n}`);
      }
    }
    const loops = loopRounds > 0 ? await compareLoops(model, bank, promptLen, loopSteps, loopRounds, stepsPerRead) : [];
    const profiles: PhaseProfile[] = [];
    if (backend.timeKernels) {
      for (const [batch, adapters] of PROFILE_SHAPES) profiles.push(...(await profileShape(model, adapters === 0 ? undefined : bank, batch, adapters, promptLen, steps)));
    } else if (PROFILE_SHAPES.length > 0) console.error(`  no kernel profile: ${backend.deviceDescription} has no timestamp queries`);
    const streaming = await streamingGBPerS(backend);
    const peak = args['peak-gbs'] ? Number(args['peak-gbs']) : streaming;
    const baseOf = (batch: number) => rows.find((r) => r.batch === batch && r.adapters === 0)!;
    console.log(`\nmodel ${args.preset} (${storage} weights, ${config.numLayers} layers), LoRA rank ${rank} on all 7 projections, prompt ${promptLen}, ${steps} decode steps`);
    console.log(`device: ${backend.deviceDescription}; streaming bandwidth ${streaming.toFixed(1)} GB/s${args['peak-gbs'] ? `; peak given ${peak} GB/s` : ''}`);
    console.log('dispatches/step: a decode forward (sampling adds one); host µs/dispatch: the forward call (it records, the GPU runs later) per dispatch\n');
    console.log('| batch | adapters | prefill tok/s | decode tok/s | decode ms/step | LoRA overhead (decode) | decode GB/s | % of bandwidth | dispatches/step | host µs/dispatch |');
    console.log('|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
    for (const r of rows) {
      const overhead = r.adapters === 0 ? '—' : `${((r.decodeMsPerStep / baseOf(r.batch).decodeMsPerStep - 1) * 100).toFixed(1)}%`;
      console.log(`| ${r.batch} | ${r.adapters || 'base'} | ${r.prefillTokensPerS.toFixed(1)} | ${r.decodeTokensPerS.toFixed(1)} | ${r.decodeMsPerStep.toFixed(2)} | ${overhead} | ${r.decodeGBPerS.toFixed(2)} | ${((r.decodeGBPerS / peak) * 100).toFixed(1)}% | ${r.dispatchesPerStep} | ${r.hostUsPerDispatch.toFixed(1)} |`);
    }
    if (loops.length > 0) printLoops(loops, loopSteps, stepsPerRead);
    profiles.forEach(printProfile);
    mkdirSync(dirname(args.out!), { recursive: true });
    const loopFigures = { steps: loopSteps, stepsPerRead, rounds: loopRounds, rows: loops };
    writeFileSync(args.out!, JSON.stringify({ preset: args.preset, config, storage, rank, promptLen, steps, device: backend.deviceDescription, streamingGBPerS: streaming, peakGBPerS: peak, rows, loops: loopFigures, profiles }, null, 2));
    console.log(`\nwrote ${args.out}`);
  } finally {
    backend.destroy();
  }
}

await main();
