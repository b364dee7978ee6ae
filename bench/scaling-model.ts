// The arithmetic behind docs/scaling.md: memory per GPU, bytes moved per step between the coordinator and its
// workers, each phase's time at the device's limits, and how a step's work splits over engine workers, for a
// Llama-family base and a population of LoRA adapters sharded by slot (issue 20's cluster design: each engine
// worker holds the whole base and its shard of the bank). Pure functions of shapes, a workload and a few rates, so
// that every figure of the document can be recomputed; bench/scaling.ts prints the tables.
//
// Dtypes are the repo's: base matrices f16 (a scenario's `model.weights: f16`), norms and biases f32, LoRA
// factors f32 (lora-bank.ts), AdamW moments m and v f32 (adamw.ts), the KV cache f32 (webgpu.ts createKvCache),
// activations f32 (llama-backward.ts's tape).

import { TINY_CONFIGS, type LlamaConfig } from '../src/model/config.js';
import { cross } from '../src/matchmaking/cross.js';
import type { MemberView } from '../src/matchmaking/policy.js';
import { loraModuleShape, type LoraModule } from '../src/model/peft.js';
import { Streams } from '../src/runtime/streams.js';

const F32_BYTES = 4;
const F16_BYTES = 2;
const I32_BYTES = 4;

/** Released models' config.json values (their Hugging Face repositories). */
const shape = (fields: Partial<LlamaConfig>): LlamaConfig => ({ ...TINY_CONFIGS['tiny']!, ...fields });
export const SHAPES: Record<string, LlamaConfig> = {
  'llama-2-7b': shape({ modelType: 'llama', vocabSize: 32000, hiddenSize: 4096, intermediateSize: 11008, numLayers: 32, numHeads: 32, numKvHeads: 32, headDim: 128 }),
  'qwen2.5-7b': shape({ modelType: 'qwen2', vocabSize: 152064, hiddenSize: 3584, intermediateSize: 18944, numLayers: 28, numHeads: 28, numKvHeads: 4, headDim: 128, attentionBias: true }),
  'llama-2-70b': shape({ modelType: 'llama', vocabSize: 32000, hiddenSize: 8192, intermediateSize: 28672, numLayers: 80, numHeads: 64, numKvHeads: 8, headDim: 128 }),
};

/** Elements of one decoder layer's weight matrices (q, k, v, o, gate, up, down). */
function layerMatrixElements(c: LlamaConfig): number {
  const attention = c.numHeads * c.headDim;
  const kv = c.numKvHeads * c.headDim;
  return c.hiddenSize * (attention + 2 * kv) + attention * c.hiddenSize + 3 * c.hiddenSize * c.intermediateSize;
}

/** Bytes of the base on the device: matrices in `matrixBytes` each (f16: 2), norms and biases f32; packing padding left out. */
export function baseWeightBytes(c: LlamaConfig, matrixBytes = F16_BYTES): number {
  const vocabularyMatrices = c.tieWordEmbeddings ? 1 : 2;
  const matrices = c.numLayers * layerMatrixElements(c) + vocabularyMatrices * c.vocabSize * c.hiddenSize;
  const biases = c.attentionBias ? (c.numHeads + 2 * c.numKvHeads) * c.headDim : 0;
  const vectors = c.numLayers * (2 * c.hiddenSize + biases) + c.hiddenSize;
  return matrices * matrixBytes + vectors * F32_BYTES;
}

/** Bytes of weights a decode step reads: every layer matrix and the LM head (the embedding only by rows). */
export function decodeWeightBytes(c: LlamaConfig, matrixBytes = F16_BYTES): number {
  return (c.numLayers * layerMatrixElements(c) + c.vocabSize * c.hiddenSize) * matrixBytes;
}

/** Multiply-adds x 2 of one token's forward pass through the base (attention's score products left out). */
export function forwardFlopsPerToken(c: LlamaConfig): number {
  return 2 * (c.numLayers * layerMatrixElements(c) + c.vocabSize * c.hiddenSize);
}

/** Parameters of one adapter of rank `rank` on `modules` of every layer: r·(in + out) a module. */
export function loraParameters(c: LlamaConfig, rank: number, modules: readonly LoraModule[]): number {
  const perLayer = modules.reduce((n, m) => {
    const { inFeatures, outFeatures } = loraModuleShape(c, m);
    return n + rank * (inFeatures + outFeatures);
  }, 0);
  return c.numLayers * perLayer;
}

/** KV-cache bytes of one token: K and V of every layer, f32 as the backends store them. */
export function kvBytesPerToken(c: LlamaConfig, elementBytes = F32_BYTES): number {
  return c.numLayers * 2 * c.numKvHeads * c.headDim * elementBytes;
}

/**
 * Bytes a training forward keeps per token for the backward (llama-backward.ts's tape, f32): per layer xIn, h1,
 * xMid, h2 [D], q and attended [H·hd], k and v [Hkv·hd], gate, up, activated [F]; then xFinal, normed [D], the
 * logits [V]; and the i32 inputs (tokens, positions, sequence ends, targets, adapter slots).
 */
export function tapeBytesPerToken(c: LlamaConfig): number {
  const attention = c.numHeads * c.headDim;
  const kv = c.numKvHeads * c.headDim;
  const perLayer = 4 * c.hiddenSize + 2 * attention + 2 * kv + 3 * c.intermediateSize;
  return (c.numLayers * perLayer + 2 * c.hiddenSize + c.vocabSize) * F32_BYTES + 5 * I32_BYTES;
}

/** One step's work: a scenario's population, tasks, matchmaking and sampling, and the lengths assumed. */
export interface Workload {
  subpopulations: number;
  teachers: number; // per sub-population
  students: number; // per sub-population
  rank: number;
  modules: readonly LoraModule[];
  taskTypes: number; // the code domain's code_o, code_i, code_f
  perTeacher: number; // proposals per teacher per task type per step
  studentsPerTask: number;
  answersPerStudent: number;
  promptTokens: number; // a prompt's tokens, teachers' and students' alike (an assumption)
  maxTokens: number; // generated tokens; every sequence is taken to reach it (the upper bound)
  validShare: number; // proposals that validate and are offered to students
  evolutionEvery: number; // steps between evolutions
  evolutionFraction: number; // of each role replaced by children
  crossoverProbability: number; // a child has two parents, else one (mutation)
}

export function stepCounts(w: Workload) {
  const teachers = w.subpopulations * w.teachers;
  const students = w.subpopulations * w.students;
  const proposals = teachers * w.perTeacher * w.taskTypes;
  const answers = proposals * w.validShare * w.studentsPerTask * w.answersPerStudent;
  const children = Math.floor(w.evolutionFraction * teachers) + Math.floor(w.evolutionFraction * students);
  return { teachers, students, members: teachers + students, proposals, answers, samples: proposals + answers, contextTokens: w.promptTokens + w.maxTokens, children };
}

/** What one engine worker holds and runs in a step. */
export interface ShardLoad {
  adapters: number;
  teachers: number;
  students: number;
  proposals: number; // phase 1 generations
  answers: number; // phase 2 generations
  samples: number; // phase 3: its proposals and answers, trained on
}

/** Every shard alike: the step's work divided evenly over `workers` (the round-robin rule's expectation). */
export function evenLoad(w: Workload, workers: number): ShardLoad {
  const n = stepCounts(w);
  return { adapters: Math.ceil(n.members / workers), teachers: n.teachers / workers, students: n.students / workers, proposals: n.proposals / workers, answers: n.answers / workers, samples: n.samples / workers };
}

/**
 * How an engine worker cuts a phase's work: sequences per generate call, tokens per training forward (gradients
 * summed over the micro-batches before one AdamW step). Today's engine makes one call of each per step.
 */
export interface EnginePlan {
  generateSequences: number;
  trainTokens: number;
}
export const ONE_CALL_A_PHASE: EnginePlan = { generateSequences: Infinity, trainTokens: Infinity };

export interface ShardMemory {
  baseBytes: number;
  bankBytes: number;
  gradientBytes: number;
  momentBytes: number;
  kvBytes: number; // one generate call's cache: every sequence of the call at full length, as generate.ts allocates it
  activationBytes: number; // one training forward's tape
  peakBytes: number; // base + bank + moments + the larger of (KV cache) and (activations + gradients)
}

export function memoryPerGpu(c: LlamaConfig, w: Workload, load: ShardLoad, plan: EnginePlan = ONE_CALL_A_PHASE): ShardMemory {
  const context = w.promptTokens + w.maxTokens;
  const baseBytes = baseWeightBytes(c);
  const bankBytes = load.adapters * loraParameters(c, w.rank, w.modules) * F32_BYTES;
  const gradientBytes = bankBytes;
  const momentBytes = 2 * bankBytes;
  const kvBytes = Math.min(Math.max(load.proposals, load.answers), plan.generateSequences) * context * kvBytesPerToken(c);
  const activationBytes = Math.min(load.samples * context, plan.trainTokens) * tapeBytesPerToken(c);
  const peakBytes = baseBytes + bankBytes + momentBytes + Math.max(kvBytes, activationBytes + gradientBytes);
  return { baseBytes, bankBytes, gradientBytes, momentBytes, kvBytes, activationBytes, peakBytes };
}

/** What fits beside the resident state: sequences in one generate call, tokens in one training micro-batch. */
export function fitsPerGpu(c: LlamaConfig, w: Workload, m: ShardMemory, gpuBytes: number) {
  const resident = m.baseBytes + m.bankBytes + m.momentBytes;
  return {
    generateSequences: Math.floor((gpuBytes - resident) / ((w.promptTokens + w.maxTokens) * kvBytesPerToken(c))),
    trainTokens: Math.floor((gpuBytes - resident - m.gradientBytes) / tapeBytesPerToken(c)),
  };
}

/** How messages are encoded: bytes per prompt token as text, per token id, and each item's fixed fields. */
export interface Wire {
  textBytesPerToken: number;
  tokenIdBytes: number;
  itemBytes: number; // request id, slot, format, reward...
  maxPayloadBytes: number; // NATS max_payload: larger payloads go in chunks
}

export interface Traffic {
  what: string;
  messages: number;
  bytes: number;
}

/**
 * Bytes between the coordinator and its workers in one step (amortised over the evolution period where it only
 * happens then). Engine requests are one message a shard and phase; verifier jobs one message each way a job
 * (a queue group balances jobs, not batches); snapshots go in max_payload chunks.
 */
export function trafficPerStep(c: LlamaConfig, w: Workload, workers: number, wire: Wire): Traffic[] {
  const n = stepCounts(w);
  const adapterBytes = loraParameters(c, w.rank, w.modules) * F32_BYTES;
  const prompt = w.promptTokens * wire.textBytesPerToken + wire.itemBytes;
  const result = w.maxTokens * wire.tokenIdBytes + wire.itemBytes;
  const job = w.maxTokens * wire.textBytesPerToken + wire.itemBytes; // a proposal or an answer, as text
  const chunks = (bytes: number) => workers * Math.ceil(bytes / workers / wire.maxPayloadBytes);
  const snapshot = n.members * 3 * adapterBytes; // factors, m and v of every adapter: training changes them all
  // Truncation selection: a child takes a bottom member's slot and its parents are top members of the same role.
  // Round-robin puts R / workers of a role's R members on each worker: a parent is elsewhere with these odds.
  const elsewhere = (R: number) => (R > 1 ? 1 - Math.max(0, R / workers - 1) / (R - 1) : 0);
  const childrenElsewhere = [n.teachers, n.students].reduce((sum, R) => sum + Math.floor(w.evolutionFraction * R) * elsewhere(R), 0);
  const parentMoves = (childrenElsewhere * (1 + w.crossoverProbability)) / w.evolutionEvery;
  const childSnapshots = (n.children * adapterBytes) / w.evolutionEvery; // fresh moments: zeros, sent as a flag
  return [
    { what: 'generate requests, phase 1 (prompts as text)', messages: workers, bytes: n.proposals * prompt },
    { what: 'generate results, phase 1 (token ids)', messages: workers, bytes: n.proposals * result },
    { what: 'verifier jobs and verdicts, validations', messages: 2 * n.proposals, bytes: n.proposals * (job + wire.itemBytes) },
    { what: 'generate requests, phase 2 (prompts as text)', messages: workers, bytes: n.answers * prompt },
    { what: 'generate results, phase 2 (token ids)', messages: workers, bytes: n.answers * result },
    { what: 'verifier jobs and verdicts, answer checks', messages: 2 * n.answers, bytes: n.answers * (job + wire.itemBytes) },
    { what: 'training requests, phase 3 (token ids)', messages: workers, bytes: n.samples * ((w.promptTokens + w.maxTokens) * wire.tokenIdBytes + wire.itemBytes) },
    { what: 'training replies (losses, gradient norms)', messages: workers, bytes: n.members * wire.itemBytes },
    { what: 'snapshot after training (factors + m + v, every adapter)', messages: chunks(snapshot), bytes: snapshot },
    { what: `evolution: parents' factors to the child's shard (every ${w.evolutionEvery} steps, per step)`, messages: chunks(parentMoves * adapterBytes), bytes: parentMoves * adapterBytes },
    { what: `snapshot after evolution (children's factors, per step)`, messages: chunks(childSnapshots), bytes: childSnapshots },
  ];
}

/** Rates a phase's time is computed from. */
export interface Rates {
  flopsPerS: number; // the device's arithmetic (f32: WGSL has no tensor cores)
  bytesPerS: number; // the device's streaming bandwidth
  verifierJobsPerSPerCore: number;
  verifierCores: number;
  evolutionMsPerChild: number; // on the device, the operators' mix
}

/**
 * Seconds of one shard's generations at the device's limits, in calls of at most `perCall` sequences: prefill's
 * arithmetic, then each decode step the larger of its arithmetic and its reads (base, the active adapters'
 * factors, every sequence's KV cache so far).
 */
export function generateSeconds(c: LlamaConfig, w: Workload, sequences: number, activeAdapters: number, perCall: number, r: Rates): number {
  const flops = forwardFlopsPerToken(c);
  const adapterBytes = activeAdapters * loraParameters(c, w.rank, w.modules) * F32_BYTES;
  let seconds = (sequences * w.promptTokens * flops) / r.flopsPerS;
  for (let done = 0; done < sequences; done += perCall) {
    const batch = Math.min(perCall, sequences - done);
    for (let t = 0; t < w.maxTokens; t++) {
      const bytes = decodeWeightBytes(c) + adapterBytes + batch * (w.promptTokens + t) * kvBytesPerToken(c);
      seconds += Math.max((batch * flops) / r.flopsPerS, bytes / r.bytesPerS);
    }
  }
  return seconds;
}

/** A LoRA training step: the forward and the backward through the base to the inputs, 2 forwards of arithmetic. */
export function trainSeconds(c: LlamaConfig, tokens: number, r: Rates): number {
  return (2 * tokens * forwardFlopsPerToken(c)) / r.flopsPerS;
}

export interface PhaseSeconds {
  phase: string;
  engineS: number; // the slowest shard's
  verifierS: number; // after the engine's results arrive (the barrier round delivers them together)
}

/** The four phases of a step (src/sim/run.ts runStep) for the slowest shard's load. */
export function phaseSeconds(c: LlamaConfig, w: Workload, slowest: ShardLoad, plan: EnginePlan, r: Rates): PhaseSeconds[] {
  const n = stepCounts(w);
  const context = w.promptTokens + w.maxTokens;
  const childrenPerShard = Math.ceil((n.children * slowest.adapters) / n.members);
  return [
    { phase: '1 propose (generate, validate)', engineS: generateSeconds(c, w, slowest.proposals, slowest.teachers, plan.generateSequences, r), verifierS: n.proposals / (r.verifierJobsPerSPerCore * r.verifierCores) },
    { phase: '2 answer (generate, check)', engineS: generateSeconds(c, w, slowest.answers, slowest.students, plan.generateSequences, r), verifierS: n.answers / (r.verifierJobsPerSPerCore * r.verifierCores) },
    { phase: '3 learn (one RL update)', engineS: trainSeconds(c, slowest.samples * context, r), verifierS: 0 },
    { phase: `4 rate, evolve (every ${w.evolutionEvery} steps, per step)`, engineS: (childrenPerShard * r.evolutionMsPerChild) / 1000 / w.evolutionEvery, verifierS: 0 },
  ];
}

export type ShardingRule = 'round-robin' | 'blocks';

/** The engine worker of an adapter slot: slot mod workers, or contiguous blocks of slots. */
export function shardOf(slot: number, slots: number, workers: number, rule: ShardingRule): number {
  return rule === 'round-robin' ? slot % workers : Math.floor(slot / Math.ceil(slots / workers));
}

export interface Imbalance {
  proposalsMaxOverMean: number; // phase 1
  answersMaxOverMean: number; // phase 2, the mean over simulated steps of (busiest shard / mean shard)
  samplesMaxOverMean: number; // phase 3
  slowest: ShardLoad; // each phase's busiest shard (generations, samples: averaged over steps)
}

/**
 * Each shard's share of a step's generations, simulated with the repo's `cross` matchmaking policy: slots laid out
 * as planMembers lays them (teachers sub-population by sub-population, then students), each proposal valid with
 * probability validShare, each valid task sent to studentsPerTask students of other sub-populations.
 */
export function simulateImbalance(w: Workload, workers: number, rule: ShardingRule, steps: number, seed: number): Imbalance {
  const n = stepCounts(w);
  const view = (role: 'teacher' | 'student', subpopulation: number, slot: number): MemberView => ({ id: `${role}-${subpopulation}-${slot}`, role, subpopulation, adapterSlot: slot, rating: 1000 });
  const teachers: MemberView[] = [];
  const students: MemberView[] = [];
  for (let s = 0; s < w.subpopulations; s++) for (let t = 0; t < w.teachers; t++) teachers.push(view('teacher', s, teachers.length));
  for (let s = 0; s < w.subpopulations; s++) for (let i = 0; i < w.students; i++) students.push(view('student', s, n.teachers + students.length));
  const shard = (m: MemberView) => shardOf(m.adapterSlot, n.members, workers, rule);
  const count = (members: MemberView[]) => Array.from({ length: workers }, (_, k) => members.filter((m) => shard(m) === k).length);
  const [teachersOn, studentsOn] = [count(teachers), count(students)];
  const proposalsOn = teachersOn.map((t) => t * w.perTeacher * w.taskTypes);
  const ratio = (loads: number[]) => Math.max(...loads) / (loads.reduce((a, b) => a + b, 0) / loads.length);
  const streams = new Streams(seed);
  let [answersRatio, samplesRatio, answersMax, samplesMax] = [0, 0, 0, 0];
  for (let step = 0; step < steps; step++) {
    const rng = streams.stream('scaling-model', step);
    const answersOn = new Array<number>(workers).fill(0);
    for (const teacher of teachers) {
      for (let p = 0; p < w.perTeacher * w.taskTypes; p++) {
        if (rng.next() >= w.validShare) continue;
        const chosen = cross.choose({ teacher, students, count: w.studentsPerTask, rng, options: {}, winProbability: () => 0.5, history: () => ({ tasks: 0, correct: 0, answers: 0 }) });
        for (const student of chosen) answersOn[shard(student)]! += w.answersPerStudent;
      }
    }
    const samplesOn = answersOn.map((a, k) => a + proposalsOn[k]!);
    answersRatio += ratio(answersOn);
    samplesRatio += ratio(samplesOn);
    answersMax += Math.max(...answersOn);
    samplesMax += Math.max(...samplesOn);
  }
  const busiest = (loads: number[]) => loads.indexOf(Math.max(...loads));
  const slowest: ShardLoad = {
    adapters: Math.max(...teachersOn.map((t, k) => t + studentsOn[k]!)),
    teachers: teachersOn[busiest(proposalsOn)]!,
    students: Math.max(...studentsOn),
    proposals: Math.max(...proposalsOn),
    answers: answersMax / steps,
    samples: samplesMax / steps,
  };
  return { proposalsMaxOverMean: ratio(proposalsOn), answersMaxOverMean: answersRatio / steps, samplesMaxOverMean: samplesRatio / steps, slowest };
}
