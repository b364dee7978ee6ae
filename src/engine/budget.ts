// How much of a step the engine holds in memory at once. Generation and training take their sequences in
// micro-batches: consecutive runs of whole sequences, in request (or sample) order, each within a budget of tokens.
//   generation: a micro-batch's KV cache holds `generationTokens` positions at most (sequences × the longest
//               prompt + maxTokens among them: the cache is rectangular); its prefill runs in chunks.
//   training:   a micro-batch's forward keeps the activations of `trainingTokens` tokens at most for its backward.
// A sequence longer than the budget makes a micro-batch of its own: a budget of 1 means one sequence at a time.
// A number N is the memory of N training tokens: training's micro-batches hold N tokens, generation's a KV cache
// of as many positions as fit that memory (a position costs ~130x less than a training token at 0.5B: a budget
// of N KV positions would decode 1024-token budgets one sequence at a time).
//
// The budget is a machine setting, not part of the experiment: the kernels are batch-invariant, a token's draw is
// keyed by (seed, request id, position), and training sums each sample's gradient on its own and adds them up in
// sample order (src/train/llama-backward.ts), so every budget gives the same bits, and the run hash does not record it.
//
// `auto` sizes it from the memory there is: half of what the machine has available once the model is loaded (a
// software WebGPU adapter such as lavapipe computes in that memory too), within the device's largest binding.
// What a token costs is counted from the model's shape below (docs/scale.md walks through the figures).

import { freemem } from 'node:os';
import type { Backend } from '../backend/backend.js';
import type { LlamaConfig } from '../model/config.js';

/** A scenario's `batchTokens` (or `populora run --batch-tokens`): tokens a micro-batch holds, sized from memory, or no limit. */
export type BatchTokensSetting = number | 'auto' | 'unbounded';

export interface MicroBatchBudget {
  generationTokens: number; // KV-cache positions of one generation micro-batch
  trainingTokens: number; // tokens of one training micro-batch
  described: string; // how it was sized, for the run's first lines
}

/** The share of the available memory `auto` gives the micro-batches (the rest: the JavaScript heap, garbage not yet collected, the OS). */
const AUTO_MEMORY_SHARE = 0.5;

const F32 = 4;

/** Bytes of KV cache per position: keys and values of every layer (f32). */
export function kvBytesPerToken(c: LlamaConfig): number {
  return 2 * c.numLayers * c.numKvHeads * c.headDim * F32;
}

/**
 * Bytes a training token holds until its micro-batch's backward: what each layer keeps for the backward (the
 * trainer's LayerTape: 4 rows of D, q and attended of H·hd, k and v of Hkv·hd, gate, up and activated of F), and,
 * counting every token as trained, its logits and their gradient (V each).
 */
export function trainingBytesPerToken(c: LlamaConfig): number {
  const { hiddenSize: D, intermediateSize: F, numHeads: H, numKvHeads: Hkv, headDim: hd } = c;
  const perLayer = 4 * D + 2 * H * hd + 2 * Hkv * hd + 3 * F;
  return (c.numLayers * perLayer + 2 * c.vocabSize + D) * F32;
}

/**
 * The largest row a micro-batch's tensors put in one binding, as f32 values: a decode step's logits (V), a
 * training token's gate (F) or the KV cache's positions of one layer... The WebGPU backend binds a tensor whole.
 */
const widestRow = (c: LlamaConfig) => Math.max(c.vocabSize, c.intermediateSize, c.numHeads * c.headDim);

/** The budget a setting gives on this backend and model; `available` is the machine's free memory in bytes. */
export function resolveBudget(setting: BatchTokensSetting, config: LlamaConfig, backend: Pick<Backend, 'maxBindingBytes'>, available = freemem()): MicroBatchBudget {
  if (setting === 'unbounded') return { generationTokens: Infinity, trainingTokens: Infinity, described: 'unbounded (each phase in one batch)' };
  const kvPerBinding = Math.floor(backend.maxBindingBytes / (kvBytesPerToken(config) / 2)); // the keys (or values) of every layer are one tensor
  if (typeof setting === 'number') {
    if (!Number.isInteger(setting) || setting < 1) throw new RangeError(`batchTokens must be a whole number >= 1, auto or unbounded (got ${setting})`);
    const bytes = setting * trainingBytesPerToken(config);
    const generationTokens = Math.max(setting, Math.min(Math.floor(bytes / kvBytesPerToken(config)), kvPerBinding));
    const gib = bytes / 2 ** 30;
    return { generationTokens, trainingTokens: setting, described: `${setting} tokens a training micro-batch (up to ${gib.toFixed(gib < 10 ? 2 : 0)} GiB of activations), ${generationTokens} KV positions a generation one` };
  }
  const bytes = AUTO_MEMORY_SHARE * available;
  const rowsPerBinding = Math.floor(backend.maxBindingBytes / (widestRow(config) * F32));
  const generationTokens = Math.max(1, Math.min(Math.floor(bytes / kvBytesPerToken(config)), kvPerBinding));
  const trainingTokens = Math.max(1, Math.min(Math.floor(bytes / trainingBytesPerToken(config)), rowsPerBinding));
  const gib = (n: number) => `${(n / 2 ** 30).toFixed(1)} GiB`;
  return { generationTokens, trainingTokens, described: `auto: ${gib(bytes)} (half of the ${gib(available)} available) → ${generationTokens} KV positions a generation micro-batch, ${trainingTokens} tokens a training one` };
}

/**
 * Consecutive ranges [first, end) of sequences of these lengths, each within `limit` tokens (at least one sequence a
 * range). A range costs the sum of its lengths, or with `rectangular` its count times its longest (a KV cache).
 */
export function microBatches(lengths: readonly number[], limit: number, rectangular = false): Array<[number, number]> {
  const ranges: Array<[number, number]> = [];
  for (let first = 0; first < lengths.length; ) {
    let [end, sum, longest] = [first + 1, lengths[first]!, lengths[first]!];
    for (; end < lengths.length; end++) {
      const [nextSum, nextLongest] = [sum + lengths[end]!, Math.max(longest, lengths[end]!)];
      if ((rectangular ? (end + 1 - first) * nextLongest : nextSum) > limit) break;
      [sum, longest] = [nextSum, nextLongest];
    }
    ranges.push([first, end]);
    first = end;
  }
  return ranges;
}
