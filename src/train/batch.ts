// A training batch: whole sequences packed end to end, each with its own adapter, teacher-forced.
//
//   token t of sequence s:  tokens[t], positions[t] (0.. within s), seqEnds[t] (end of s, exclusive),
//                           adapters[t] (bank slot, -1 = base only), targets[t] = the next token of s
//   The last token of a sequence predicts nothing: its target is 0 and its loss weight must be 0.

import { assert } from '../backend/backend.js';

export interface TrainSequence {
  tokens: readonly number[]; // the whole sequence: prompt, then completion
  adapter: number; // LoRA bank slot, -1 for the base model alone
}

export interface PackedBatch {
  tokens: Int32Array; // [T]
  positions: Int32Array; // [T]
  seqEnds: Int32Array; // [T]
  adapters: Int32Array; // [T]
  targets: Int32Array; // [T]
  sequenceOf: Int32Array; // [T] index of the token's sequence
  starts: number[]; // [sequences] index of each sequence's first token
}

/** Longest packed batch one training call takes (activations grow linearly with it). */
export const MAX_TRAIN_TOKENS = 65536;

/** `limit`: the most tokens the batch may hold (Infinity: a whole step's, packed on the host only, never uploaded). */
export function packSequences(sequences: readonly TrainSequence[], vocabSize: number, maxContext: number, limit = MAX_TRAIN_TOKENS): PackedBatch {
  const T = sequences.reduce((n, s) => n + s.tokens.length, 0);
  if (sequences.length === 0 || T === 0) throw new RangeError('a training batch needs at least one non-empty sequence');
  if (T > limit) throw new RangeError(`a training batch of ${T} tokens exceeds ${limit}: split it into several calls`);
  const batch: PackedBatch = {
    tokens: new Int32Array(T),
    positions: new Int32Array(T),
    seqEnds: new Int32Array(T),
    adapters: new Int32Array(T),
    targets: new Int32Array(T),
    sequenceOf: new Int32Array(T),
    starts: [],
  };
  let t = 0;
  sequences.forEach((sequence, s) => {
    const L = sequence.tokens.length;
    if (L < 2) throw new RangeError(`training sequence ${s} has ${L} token(s): at least 2 are needed (a context and a token to predict)`);
    if (L > maxContext) throw new RangeError(`training sequence ${s} has ${L} tokens, more than the model's context of ${maxContext}`);
    batch.starts.push(t);
    sequence.tokens.forEach((token, i) => {
      if (!Number.isInteger(token) || token < 0 || token >= vocabSize) {
        throw new RangeError(`training sequence ${s}: token ${token} at position ${i} is outside the vocabulary [0, ${vocabSize})`);
      }
      batch.tokens[t] = token;
      batch.positions[t] = i;
      batch.seqEnds[t] = batch.starts[s]! + L;
      batch.adapters[t] = sequence.adapter;
      batch.targets[t] = sequence.tokens[i + 1] ?? 0;
      batch.sequenceOf[t] = s;
      t++;
    });
  });
  assert(t === T, 'packSequences: every token placed');
  return batch;
}

/**
 * The tokens grouped by a key in token order, as outerProductSum's segments: segment k holds
 * order[offsets[k] .. offsets[k+1]], the tokens whose key is k (keys outside [0, segments) are left out).
 */
export function segmentsBy(keys: Int32Array, segments: number): { order: Int32Array; offsets: Int32Array } {
  const counts = new Int32Array(segments + 1);
  keys.forEach((k) => {
    if (k >= 0 && k < segments) counts[k + 1] = counts[k + 1]! + 1;
  });
  for (let k = 0; k < segments; k++) counts[k + 1] = counts[k + 1]! + counts[k]!;
  const offsets = counts.slice();
  const next = counts.slice(0, segments);
  const order = new Int32Array(offsets[segments]!);
  keys.forEach((k, t) => {
    if (k < 0 || k >= segments) return;
    order[next[k]!] = t;
    next[k] = next[k]! + 1;
  });
  return { order, offsets };
}

/**
 * The LoRA gradient's rounds: round r has one segment a slot (outerProductSum's order and offsets, `slots`
 * segments), the tokens of the slot's r-th sequence in the batch, in token order (empty where the slot has fewer).
 * Adding the rounds' sums up in round order adds each slot's per-sample gradients in sample order.
 */
export function sampleRounds(batch: PackedBatch, slots: number): Array<{ order: Int32Array; offsets: Int32Array }> {
  const sequencesOf: number[][] = Array.from({ length: slots }, () => []);
  batch.starts.forEach((start, s) => {
    const slot = batch.adapters[start]!;
    if (slot >= 0 && slot < slots) sequencesOf[slot]!.push(s);
  });
  const rounds = Math.max(0, ...sequencesOf.map((list) => list.length));
  return Array.from({ length: rounds }, (_, r) => {
    const order: number[] = [];
    const offsets = new Int32Array(slots + 1);
    sequencesOf.forEach((list, slot) => {
      const s = list[r];
      if (s !== undefined) for (let t = batch.starts[s]!; t < batch.seqEnds[batch.starts[s]!]!; t++) order.push(t);
      offsets[slot + 1] = order.length;
    });
    return { order: Int32Array.from(order), offsets };
  });
}
