// docs/scaling.md's arithmetic (bench/scaling-model.ts) against a shape small enough to count by hand, against
// what other code counted from real tensors (bench/results/), and the sharding simulation against cases whose
// loads follow from the slot layout alone.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { BENCH_SMALL } from '../bench/presets.js';
import { SHAPES, baseWeightBytes, evenLoad, kvBytesPerToken, loraParameters, memoryPerGpu, simulateImbalance, tapeBytesPerToken, trafficPerStep, type Workload } from '../bench/scaling-model.js';
import { TINY_CONFIGS } from '../src/model/config.js';
import { LORA_MODULES } from '../src/model/peft.js';

// D 8, F 12, 2 layers, 2 heads and 1 KV head of 4, vocabulary 16, untied, no biases.
const SMALL = { ...TINY_CONFIGS['tiny']!, vocabSize: 16, hiddenSize: 8, intermediateSize: 12, numLayers: 2, numHeads: 2, numKvHeads: 1, headDim: 4, tieWordEmbeddings: false, attentionBias: false };
const WORKLOAD: Workload = {
  subpopulations: 2, teachers: 1, students: 1, rank: 2, modules: LORA_MODULES,
  taskTypes: 1, perTeacher: 1, studentsPerTask: 1, answersPerStudent: 2,
  promptTokens: 3, maxTokens: 5, validShare: 1, evolutionEvery: 1, evolutionFraction: 0.5, crossoverProbability: 0,
};
const results = (file: string) => JSON.parse(readFileSync(`bench/results/${file}`, 'utf8'));

describe('memory per GPU, by hand', () => {
  it('counts the base, an adapter, a KV token and a tape token', () => {
    // matrices per layer: qkv 8·(8+4+4) = 128, o 8·8 = 64, gate/up/down 3·8·12 = 288 → 480; 2 layers and
    // embedding + head 2·16·8 = 256 → 1216 f16; norms 2·(8+8) + 8 = 40 f32.
    expect(baseWeightBytes(SMALL)).toBe(1216 * 2 + 40 * 4);
    // r·(in+out): q 2·16, k 2·12, v 2·12, o 2·16, gate, up, down 2·20 each → 232 a layer.
    expect(loraParameters(SMALL, 2, LORA_MODULES)).toBe(2 * 232);
    expect(kvBytesPerToken(SMALL)).toBe(2 * 2 * 1 * 4 * 4); // layers · (K, V) · kv heads · head dim · f32
    // per layer 4·8 + 2·8 + 2·4 + 3·12 = 92 floats; + xFinal, normed (8 each), logits (16); + 5 i32 inputs
    expect(tapeBytesPerToken(SMALL)).toBe((2 * 92 + 16 + 16) * 4 + 5 * 4);
  });

  it('adds a shard up: 4 members on 2 workers, 2 adapters each', () => {
    // 2 proposals, 4 answers, 6 samples of 3 + 5 tokens; a shard: 1 proposal, 2 answers, 3 samples
    const load = evenLoad(WORKLOAD, 2);
    expect(load).toEqual({ adapters: 2, teachers: 1, students: 1, proposals: 1, answers: 2, samples: 3 });
    const bank = 2 * 464 * 4;
    const resident = 2592 + bank + 2 * bank; // base, bank, AdamW m and v
    const oneCall = memoryPerGpu(SMALL, WORKLOAD, load);
    expect(oneCall).toEqual({ baseBytes: 2592, bankBytes: bank, gradientBytes: bank, momentBytes: 2 * bank, kvBytes: 2 * 8 * 64, activationBytes: 3 * 8 * 884, peakBytes: resident + 3 * 8 * 884 + bank });
    const chunked = memoryPerGpu(SMALL, WORKLOAD, load, { generateSequences: 1, trainTokens: 10 });
    expect(chunked.kvBytes).toBe(1 * 8 * 64);
    expect(chunked.activationBytes).toBe(10 * 884);
    expect(chunked.peakBytes).toBe(resident + 10 * 884 + bank);
  });

  it('snapshots every adapter with its two moments after training', () => {
    const wire = { textBytesPerToken: 4, tokenIdBytes: 4, itemBytes: 32, maxPayloadBytes: 1000 };
    const snapshot = trafficPerStep(SMALL, WORKLOAD, 2, wire).find((t) => t.what.startsWith('snapshot after training'))!;
    expect(snapshot.bytes).toBe(4 * 3 * 464 * 4);
    expect(snapshot.messages).toBe(2 * Math.ceil((4 * 3 * 464 * 4) / 2 / 1000));
  });
});

describe('against what other code counted from real tensors', () => {
  it('the training tape and the AdamW moments of bench/training.ts (bench-small, 8 adapters of rank 16)', () => {
    const training = results('training.json');
    const batch32 = training.rows.find((r: { batch: number }) => r.batch === 32);
    expect((batch32.tokens * tapeBytesPerToken(BENCH_SMALL)) / 2 ** 20).toBe(batch32.activationMiB);
    expect((2 * 8 * loraParameters(BENCH_SMALL, 16, LORA_MODULES) * 4) / 2 ** 20).toBe(training.momentsMiB);
  });

  it('the 7B-shaped adapter of bench/evolution.ts', () => {
    const row = results('h100-evolution.json').rows.find((r: { shape: string }) => r.shape === '7B-shaped (r 16)');
    expect(loraParameters(SHAPES['llama-2-7b']!, 16, LORA_MODULES)).toBe(row.parameters);
  });
});

describe('load per shard', () => {
  // 2 sub-populations of 2 teachers and 2 students: teachers in slots 0-3, students 4-7. Each task goes to both
  // students of the other sub-population, so every student gets the same number of answers.
  const everyone: Workload = { ...WORKLOAD, teachers: 2, students: 2, studentsPerTask: 2 };
  it('round-robin gives each of 2 workers 2 teachers and 2 students: even phases', () => {
    const i = simulateImbalance(everyone, 2, 'round-robin', 20, 1);
    expect([i.proposalsMaxOverMean, i.answersMaxOverMean, i.samplesMaxOverMean]).toEqual([1, 1, 1]);
  });
  it('blocks put the teachers on one worker and the students on the other: each phase on one of two', () => {
    const i = simulateImbalance(everyone, 2, 'blocks', 20, 1);
    expect([i.proposalsMaxOverMean, i.answersMaxOverMean]).toEqual([2, 2]);
  });
});
