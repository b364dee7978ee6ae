// Whole training steps on top of the trainer, the objectives and AdamW: each is forward, one readback of the
// per-token log-probs, the loss weights on the host, backward, and the optimizer update.
//
// A policy-gradient step takes its samples in micro-batches of whole samples, in sample order, each within
// `batchTokens` tokens (src/engine/budget.ts): forward, log-probs, weights, backward, then the next, the gradients
// adding up across micro-batches; one optimizer update at the end. What a token's weight is averaged over is fixed
// for the whole step first (objective.ts PolicyGradientLoss), and the trainer adds per-sample gradients in sample
// order, so every budget gives the bits of the whole batch at once (budget: unbounded, the reference).

import { microBatches } from '../engine/budget.js';
import type { Pacer } from '../engine/pacer.js';
import type { AdamW } from './adamw.js';
import { MAX_TRAIN_TOKENS, packSequences, type PackedBatch, type TrainSequence } from './batch.js';
import type { Gradients, LlamaTrainer, Tape, TrainMode } from './llama-backward.js';
import { crossEntropyWeights, PolicyGradientLoss, type LossWeights, type PolicyGradientOptions } from './objective.js';

export interface RlSample extends TrainSequence {
  promptLength: number;
  advantage: number;
  /** Log-probs of the tokens as sampled ([tokens.length - 1], token i+1 given its prefix), for PPO clipping. */
  oldLogProbs?: readonly number[];
}

export interface StepReport extends LossWeights {
  gradNorms: Map<number, number>;
}

/** Per-token (log p of the next token, entropy) [T, 2] of a tape's logits (0, 0 for a row without logits). */
export async function readLogProbs(trainer: LlamaTrainer, tape: Tape): Promise<Float32Array> {
  const b = trainer.model.backend;
  const logProbs = b.logProbs(tape.logits, tape.inputs.targets);
  const values = await b.readF32(logProbs);
  b.free(logProbs);
  if (!tape.selection) return values;
  const all = new Float32Array(tape.batch.tokens.length * 2);
  tape.selection.rows.forEach((row, m) => all.set(values.subarray(m * 2, m * 2 + 2), row * 2));
  return all;
}

/**
 * Forward, one readback of the log-probs, the loss weights `weigh` makes of them, and backward; the tape is freed
 * whatever happens. The caller owns the gradients.
 */
export async function gradientsOf(trainer: LlamaTrainer, batch: PackedBatch, mode: TrainMode, weigh: (logProbs: Float32Array) => LossWeights): Promise<{ weights: LossWeights; grads: Gradients }> {
  const tape = trainer.forward(batch);
  try {
    const weights = weigh(await readLogProbs(trainer, tape));
    return { weights, grads: trainer.backward(tape, weights.logpWeight, weights.entropyWeight, mode) };
  } finally {
    trainer.freeTape(tape);
  }
}

/** Log-probs [T] of the batch's next tokens at `rows` (0 elsewhere) with every adapter switched off (the KL reference). */
async function baseLogProbs(trainer: LlamaTrainer, batch: PackedBatch, rows: Int32Array, pause: () => Promise<void>): Promise<Float32Array> {
  const tape = await trainer.forwardPaced({ ...batch, adapters: new Int32Array(batch.tokens.length).fill(-1) }, rows, pause);
  try {
    const values = await readLogProbs(trainer, tape);
    return Float32Array.from({ length: batch.tokens.length }, (_, t) => values[t * 2]!);
  } finally {
    trainer.freeTape(tape);
  }
}

/** How a step runs on this machine (none of it changes a bit of the result). */
export interface StepRun {
  batchTokens?: number; // tokens a micro-batch holds; default: the whole batch in one
  pacer?: Pacer; // paused between layers; told how many tokens went through forward and backward
}

/** One policy-gradient update of every adapter in the batch (LoRA mode), micro-batch by micro-batch. */
export async function policyGradientStep(trainer: LlamaTrainer, optimizer: AdamW, samples: readonly RlSample[], options: PolicyGradientOptions, run: StepRun = {}): Promise<StepReport> {
  const { config, maxContext } = trainer.model;
  const whole = packSequences(samples, config.vocabSize, maxContext, Infinity); // host arrays only: what each token is averaged over
  const loss = new PolicyGradientLoss(whole, samples.map((s) => s.promptLength), samples.map((s) => s.advantage), options);
  const oldLogProbs = options.clip === undefined ? undefined : packOldLogProbs(samples, whole);
  const progress = { done: 0, total: 2 * whole.tokens.length }; // each token once forward, once backward
  const grads: Gradients = new Map();
  try {
    for (const [first, end] of microBatches(samples.map((s) => s.tokens.length), Math.min(run.batchTokens ?? Infinity, MAX_TRAIN_TOKENS))) {
      const batch = packSequences(samples.slice(first, end), config.vocabSize, maxContext);
      const [offset, T] = [whole.starts[first]!, batch.tokens.length];
      const rows = trainedRows(loss.mask.subarray(offset, offset + T));
      const pause = () => {
        // after each layer of the forward or the backward: its share of the micro-batch's tokens is done
        progress.done += T / config.numLayers;
        run.pacer?.report({ phase: 'train', done: Math.round(progress.done), total: progress.total });
        return run.pacer?.pause() ?? Promise.resolve();
      };
      const referenceLogProbs = options.klCoef ? await baseLogProbs(trainer, batch, rows, async () => run.pacer?.pause()) : undefined;
      const tape = await trainer.forwardPaced(batch, rows, pause);
      try {
        const logProbs = await readLogProbs(trainer, tape);
        const weights = loss.weigh(offset, logProbs, oldLogProbs?.subarray(offset, offset + T), referenceLogProbs);
        await trainer.backwardPaced(tape, weights.logpWeight, weights.entropyWeight, 'lora', grads, pause);
      } finally {
        trainer.freeTape(tape);
      }
    }
  } catch (error) {
    grads.forEach((g) => trainer.model.backend.free(g));
    throw error;
  }
  return applyGradients(trainer, optimizer, grads, [...new Set(samples.map((s) => s.adapter).filter((a) => a >= 0))], loss.result());
}

/** The rows a mask keeps, ascending. */
function trainedRows(mask: Uint8Array): Int32Array {
  const rows: number[] = [];
  mask.forEach((m, t) => m && rows.push(t));
  return Int32Array.from(rows);
}

/** One next-token cross-entropy update; 'full' trains every base weight, 'lora' the sequences' adapters. `lr`: this step's (a schedule's), else the optimizer's. */
export async function crossEntropyStep(trainer: LlamaTrainer, optimizer: AdamW, sequences: readonly TrainSequence[], mode: TrainMode, lr?: number): Promise<StepReport> {
  const { config, maxContext } = trainer.model;
  const batch = packSequences(sequences, config.vocabSize, maxContext);
  const { weights, grads } = await gradientsOf(trainer, batch, mode, (logProbs) => crossEntropyWeights(batch, logProbs));
  const active = mode === 'full' ? [0] : [...new Set(sequences.map((s) => s.adapter).filter((a) => a >= 0))];
  return applyGradients(trainer, optimizer, grads, active, weights, lr);
}

async function applyGradients(trainer: LlamaTrainer, optimizer: AdamW, grads: Gradients, active: number[], weights: LossWeights, lr?: number): Promise<StepReport> {
  try {
    const { gradNorms } = await optimizer.step(grads, active, lr);
    return { ...weights, gradNorms };
  } finally {
    grads.forEach((g) => trainer.model.backend.free(g));
  }
}

function packOldLogProbs(samples: readonly RlSample[], batch: PackedBatch): Float32Array {
  const out = new Float32Array(batch.tokens.length);
  samples.forEach((sample, s) => {
    const old = sample.oldLogProbs;
    if (!old) throw new RangeError(`sample ${s}: PPO clipping needs oldLogProbs`);
    if (old.length !== sample.tokens.length - 1) throw new RangeError(`sample ${s}: ${old.length} old log-probs for ${sample.tokens.length - 1} predicted tokens`);
    out.set(old, batch.starts[s]!);
  });
  return out;
}
