// The tables of docs/scaling.md, computed from model shapes (bench/scaling-model.ts) and from figures measured
// earlier and committed in bench/results/ (read here, so a new measurement changes the tables). Computes, times
// nothing. Prints markdown tables; writes JSON.
//
//   node dist/bench/scaling.js [--prompt-tokens 512] [--max-tokens 192] [--steps 400] [--out bench/results/scaling-model.json]
// --steps: simulated steps of matchmaking for the load imbalance.

import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { benchArgs } from './args.js';
import { TINY_CONFIGS } from '../src/model/config.js';
import { LORA_MODULES } from '../src/model/peft.js';
import {
  ONE_CALL_A_PHASE, SHAPES, baseWeightBytes, evenLoad, fitsPerGpu, forwardFlopsPerToken, kvBytesPerToken, loraParameters, memoryPerGpu,
  phaseSeconds, simulateImbalance, stepCounts, tapeBytesPerToken, trafficPerStep, type EnginePlan, type Rates, type Wire, type Workload,
} from './scaling-model.js';

const args = benchArgs(import.meta.url, { options: { 'prompt-tokens': { type: 'string', default: '512' }, 'max-tokens': { type: 'string', default: '192' }, steps: { type: 'string', default: '400' }, out: { type: 'string', default: 'bench/results/scaling-model.json' } } });

// Measured inputs, each from its committed file.
const results = (file: string) => JSON.parse(readFileSync(`bench/results/${file}`, 'utf8'));
const qwenInference = results('h100-inference-qwen.json');
const rowOf = (batch: number, adapters: number) => qwenInference.rows.find((r: { batch: number; adapters: number }) => r.batch === batch && r.adapters === adapters);
const evolution7b = (operator: string) => results('h100-evolution.json').rows.find((r: { shape: string; operator: string; path: string }) => r.shape === '7B-shaped (r 16)' && r.operator === operator && r.path === 'device').msPerChild as number;
const selfplay = results('h100-selfplay.json');
const verifier = results('verifier-cpu.json').rows.find((r: { setting: string }) => r.setting.startsWith('one interpreter'));
const H100_F32_FLOPS = 67e12; // NVIDIA H100 SXM datasheet, FP32 (not measured: the kernels are WGSL, no tensor cores)
const measured = {
  streamingGBPerS: { value: qwenInference.streamingGBPerS as number, file: 'h100-inference-qwen.json' },
  prefillFlopsShare: { value: (rowOf(32, 0).prefillTokensPerS * forwardFlopsPerToken(TINY_CONFIGS['qwen2.5-0.5b-shape']!)) / H100_F32_FLOPS, file: 'h100-inference-qwen.json (prefill, batch 32, base)' },
  decodeBandwidthShare: { value: rowOf(1, 0).decodeGBPerS / qwenInference.streamingGBPerS, file: 'h100-inference-qwen.json (decode, batch 1, base)' },
  evolutionMutateMs: { value: evolution7b('mutate'), file: 'h100-evolution.json (7B-shaped, device)' },
  evolutionSvdMs: { value: evolution7b('crossover svd'), file: 'h100-evolution.json (7B-shaped, device)' },
  verifierJobsPerSPerCore: { value: verifier.jobsPerSPerCore as number, file: 'verifier-cpu.json (one interpreter)' },
  coordinatorMsPerMessage: { value: (selfplay.messagingShare * selfplay.msPerStep) / selfplay.messagesPerStep, file: 'h100-selfplay.json (messaging share x ms/step / messages)' },
  messagesPerMember: { value: selfplay.messagesPerStep / selfplay.members, file: 'h100-selfplay.json (in-process actor messages / members)' },
};

const GPU_BYTES = 80e9;
const ENGINE_WORKERS = 8;
const VERIFIER_CORES = 16;
const LINK_BYTES_PER_S = { '100 Gb/s': 12.5e9, '25 Gb/s': 3.125e9 };
const workload: Workload = {
  subpopulations: 4, teachers: 8, students: 8, rank: 16, modules: LORA_MODULES,
  taskTypes: 3, perTeacher: 2, studentsPerTask: 2, answersPerStudent: 4,
  promptTokens: Number(args['prompt-tokens']), maxTokens: Number(args['max-tokens']), validShare: 1,
  evolutionEvery: 4, evolutionFraction: 0.25, crossoverProbability: 0.5,
};
const wire: Wire = { textBytesPerToken: 4, tokenIdBytes: 4, itemBytes: 32, maxPayloadBytes: 2 ** 20 };
const rates: Rates = {
  flopsPerS: H100_F32_FLOPS,
  bytesPerS: measured.streamingGBPerS.value * 1e9,
  verifierJobsPerSPerCore: measured.verifierJobsPerSPerCore.value,
  verifierCores: VERIFIER_CORES,
  evolutionMsPerChild: (1 - workload.crossoverProbability) * measured.evolutionMutateMs.value + workload.crossoverProbability * measured.evolutionSvdMs.value,
};
const SEVEN_B = ['llama-2-7b', 'qwen2.5-7b'] as const;
const CHUNKED: EnginePlan = { generateSequences: 64, trainTokens: 4096 }; // what a 7B needs (the memory table)
const PLANS = { 'one call a phase (today)': ONE_CALL_A_PHASE, [`<= ${CHUNKED.generateSequences} sequences a call, ${CHUNKED.trainTokens}-token micro-batches`]: CHUNKED };

const gb = (bytes: number) => (bytes / 1e9).toFixed(bytes < 1e8 ? 3 : 1);
const table = (head: string[], rows: (string | number)[][]) => {
  const numeric = head.map((_, i) => rows.every((row) => row[i] === '' || !Number.isNaN(Number(row[i]))));
  console.log(`\n| ${head.join(' | ')} |\n|${numeric.map((right) => (right ? '---:' : '---')).join('|')}|`);
  for (const row of rows) console.log(`| ${row.join(' | ')} |`);
};

console.log('measured inputs');
table(['input', 'value', 'file'], Object.entries(measured).map(([key, m]) => [key, m.value.toPrecision(4), m.file]));
const n = stepCounts(workload);
console.log(`\nworkload: ${n.members} adapters (${n.teachers} teachers, ${n.students} students), ${n.proposals} proposals and up to ${n.answers} answers a step, ${workload.promptTokens} + ${workload.maxTokens} tokens a sequence`);

console.log('\nshapes (computed)');
table(['shape', 'base GB (f16)', 'LoRA params / adapter (M)', 'adapter MB (f32)', 'KV KB / token (f32)', 'training tape MB / token'], Object.entries(SHAPES).map(([name, c]) => {
  const lora = loraParameters(c, workload.rank, workload.modules);
  return [name, gb(baseWeightBytes(c)), (lora / 1e6).toFixed(2), (lora * 4 / 1e6).toFixed(0), (kvBytesPerToken(c) / 1e3).toFixed(0), (tapeBytesPerToken(c) / 1e6).toFixed(2)];
}));

const memoryCases = SEVEN_B.flatMap((name) => Object.entries(PLANS).map(([plan, p]) => {
  const m = memoryPerGpu(SHAPES[name]!, workload, evenLoad(workload, ENGINE_WORKERS), p);
  return { shape: name, plan, ...m, fits: fitsPerGpu(SHAPES[name]!, workload, m, GPU_BYTES) };
}));
console.log(`\nmemory per GPU, GB: ${ENGINE_WORKERS} engine workers, ${n.members / ENGINE_WORKERS} adapters each, even load (computed)`);
table(['GB per GPU', ...memoryCases.map((m) => `${m.shape}, ${m.plan}`)], [
  ...(['baseBytes', 'bankBytes', 'gradientBytes', 'momentBytes', 'kvBytes', 'activationBytes', 'peakBytes'] as const).map((key) => [key, ...memoryCases.map((m) => gb(m[key]))]),
  ['sequences a generate call can hold in 80 GB', ...memoryCases.map((m) => m.fits.generateSequences)],
  ['tokens a training forward can hold in 80 GB', ...memoryCases.map((m) => m.fits.trainTokens)],
]);

const traffic = Object.fromEntries(SEVEN_B.map((name) => [name, trafficPerStep(SHAPES[name]!, workload, ENGINE_WORKERS, wire)]));
console.log(`\nbytes per step between the coordinator and its workers (computed; NATS max_payload ${wire.maxPayloadBytes} bytes)`);
const rowsOf = (name: string) => traffic[name]!;
table(['what', 'messages', ...SEVEN_B.map((s) => `${s} MB`)], [
  ...rowsOf('llama-2-7b').map((t, i) => [t.what, Math.round(t.messages), ...SEVEN_B.map((s) => (rowsOf(s)[i]!.bytes / 1e6).toFixed(1))]),
  ['total', Math.round(rowsOf('llama-2-7b').reduce((a, t) => a + t.messages, 0)), ...SEVEN_B.map((s) => (rowsOf(s).reduce((a, t) => a + t.bytes, 0) / 1e6).toFixed(0))],
]);

const imbalanceCases = [
  { label: `${ENGINE_WORKERS} workers, ${n.members} adapters, round-robin`, w: workload, workers: ENGINE_WORKERS, rule: 'round-robin' as const },
  { label: `${ENGINE_WORKERS} workers, ${n.members} adapters, round-robin, 82% valid`, w: { ...workload, validShare: 0.82 }, workers: ENGINE_WORKERS, rule: 'round-robin' as const },
  { label: `${ENGINE_WORKERS} workers, ${n.members} adapters, blocks`, w: workload, workers: ENGINE_WORKERS, rule: 'blocks' as const },
  { label: `64 workers, ${n.members} adapters, round-robin`, w: workload, workers: 64, rule: 'round-robin' as const },
  { label: '64 workers, 512 adapters, round-robin', w: { ...workload, teachers: 64, students: 64 }, workers: 64, rule: 'round-robin' as const },
];
const imbalance = imbalanceCases.map((k) => ({ label: k.label, ...simulateImbalance(k.w, k.workers, k.rule, Number(args.steps), 1) }));
console.log(`\nbusiest shard / mean shard, per phase (simulated: the cross policy, ${args.steps} steps)`);
table(['sharding', 'phase 1 proposals', 'phase 2 answers', 'phase 3 samples'], imbalance.map((i) => [i.label, i.proposalsMaxOverMean.toFixed(2), i.answersMaxOverMean.toFixed(2), i.samplesMaxOverMean.toFixed(2)]));

const phases = Object.fromEntries(SEVEN_B.map((name) => [name, phaseSeconds(SHAPES[name]!, workload, imbalance[0]!.slowest, CHUNKED, rates)]));
const evenPhases = Object.fromEntries(SEVEN_B.map((name) => [name, phaseSeconds(SHAPES[name]!, workload, evenLoad(workload, ENGINE_WORKERS), CHUNKED, rates)]));
const engineS = (p: { engineS: number }[]) => p.reduce((a, phase) => a + phase.engineS, 0);
const snapshotBytes = (name: string) => rowsOf(name).filter((t) => t.what.startsWith('snapshot')).reduce((a, t) => a + t.bytes, 0);
console.log(`\nseconds per phase at the device's limits (computed lower bounds; the busiest shard, round-robin, <= ${CHUNKED.generateSequences} sequences a generate call; verifier pool of ${VERIFIER_CORES} cores)`);
table(['phase', ...SEVEN_B.flatMap((s) => [`${s} engine s`, `${s} verifier s`])], [
  ...phases['llama-2-7b']!.map((p, i) => [p.phase, ...SEVEN_B.flatMap((s) => [phases[s]![i]!.engineS.toFixed(1), phases[s]![i]!.verifierS.toFixed(1)])]),
  ['step, phases 1-4', ...SEVEN_B.flatMap((s) => [engineS(phases[s]!).toFixed(1), phases[s]!.reduce((a, p) => a + p.verifierS, 0).toFixed(1)])],
  ['step, phases 1-4, a shard of mean load', ...SEVEN_B.flatMap((s) => [engineS(evenPhases[s]!).toFixed(1), ''])],
  ...Object.entries(LINK_BYTES_PER_S).map(([link, rate]) => [`snapshots into the coordinator at ${link}`, ...SEVEN_B.flatMap((s) => [(snapshotBytes(s) / rate).toFixed(1), ''])]),
]);

// 64 GPUs: the population grows with them (8 adapters a GPU, as above), and a 70B base.
const big: Workload = { ...workload, teachers: 64, students: 64 };
const bigTraffic = trafficPerStep(SHAPES['llama-2-7b']!, big, 64, wire);
const bigCounts = stepCounts(big);
const at64 = {
  adapters: bigCounts.members,
  memory: memoryPerGpu(SHAPES['llama-2-7b']!, big, evenLoad(big, 64), CHUNKED),
  snapshotBytes: bigTraffic.filter((t) => t.what.startsWith('snapshot')).reduce((a, t) => a + t.bytes, 0),
  otherBytes: bigTraffic.filter((t) => !t.what.startsWith('snapshot')).reduce((a, t) => a + t.bytes, 0),
  natsMessages: bigTraffic.reduce((a, t) => a + t.messages, 0),
  coordinatorActorMessages: measured.messagesPerMember.value * bigCounts.members,
  verifierJobs: bigCounts.samples,
  verifierCoreS: bigCounts.samples / measured.verifierJobsPerSPerCore.value,
  coordinatorS: (measured.messagesPerMember.value * bigCounts.members * measured.coordinatorMsPerMessage.value) / 1000,
  base70bGBPerGpu: [1, 2, 4, 8].map((gpus) => ({ gpus, baseGB: baseWeightBytes(SHAPES['llama-2-70b']!) / gpus / 1e9 })),
};
console.log('\n64 GPUs, llama-2-7b, 512 adapters (computed)');
table(['figure', 'value'], [
  [`peak GB per GPU (<= ${CHUNKED.generateSequences} sequences a call, ${CHUNKED.trainTokens}-token micro-batches)`, gb(at64.memory.peakBytes)],
  ['snapshot GB per step into the coordinator', gb(at64.snapshotBytes)],
  ['everything else, GB per step', gb(at64.otherBytes)],
  ['NATS messages per step (snapshots in 1 MiB chunks)', Math.round(at64.natsMessages)],
  ['in-process actor messages per step at the measured rate per member', Math.round(at64.coordinatorActorMessages)],
  ['coordinator s per step for them at the measured cost per message', at64.coordinatorS.toFixed(2)],
  ['verifier jobs per step', at64.verifierJobs],
  ['verifier core-seconds per step at the measured rate', at64.verifierCoreS.toFixed(0)],
  ...at64.base70bGBPerGpu.map((b) => [`llama-2-70b base GB per GPU, split over ${b.gpus}`, b.baseGB.toFixed(1)]),
]);

mkdirSync(dirname(args.out!), { recursive: true });
writeFileSync(args.out!, JSON.stringify({ workload, engineWorkers: ENGINE_WORKERS, gpuBytes: GPU_BYTES, plans: PLANS, wire, rates, measured, shapes: SHAPES, counts: n, memory: memoryCases, traffic, imbalance, phases, evenPhases, at64 }, null, 2));
console.log(`\nwrote ${args.out}`);
