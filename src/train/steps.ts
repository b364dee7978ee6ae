// Whole training steps on top of the trainer, the objectives and AdamW: each is forward, one readback of the
// per-token log-probs, the loss weights on the host, backward, and the optimizer update.

import type { AdamW } from './adamw.js';
import { packSequences, type PackedBatch, type TrainSequence } from './batch.js';
import type { Gradients, LlamaTrainer, Tape, TrainMode } from './llama-backward.js';
import { crossEntropyWeights, policyGradientWeights, type LossWeights, type PolicyGradientOptions } from './objective.js';

export interface RlSample extends TrainSequence {
  promptLength: number;
  advantage: number;
  /** Log-probs of the tokens as sampled ([tokens.length - 1], token i+1 given its prefix), for PPO clipping. */
  oldLogProbs?: readonly number[];
}

export interface StepReport extends LossWeights {
  gradNorms: Map<number, number>;
}

/** Per-token (log p of the next token, entropy) [T, 2] of a tape's logits. */
export async function readLogProbs(trainer: LlamaTrainer, tape: Tape): Promise<Float32Array> {
  const b = trainer.model.backend;
  const logProbs = b.logProbs(tape.logits, tape.inputs.targets);
  const values = await b.readF32(logProbs);
  b.free(logProbs);
  return values;
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

/** Log-probs [T] of the batch's next tokens with every adapter switched off (the KL reference). */
async function baseLogProbs(trainer: LlamaTrainer, batch: PackedBatch): Promise<Float32Array> {
  const tape = trainer.forward({ ...batch, adapters: new Int32Array(batch.tokens.length).fill(-1) });
  try {
    const values = await readLogProbs(trainer, tape);
    return Float32Array.from({ length: batch.tokens.length }, (_, t) => values[t * 2]!);
  } finally {
    trainer.freeTape(tape);
  }
}

/** One policy-gradient update of every adapter in the batch (LoRA mode). */
export async function policyGradientStep(trainer: LlamaTrainer, optimizer: AdamW, samples: readonly RlSample[], options: PolicyGradientOptions): Promise<StepReport> {
  const { config, maxContext } = trainer.model;
  const batch = packSequences(samples, config.vocabSize, maxContext);
  const referenceLogProbs = options.klCoef ? await baseLogProbs(trainer, batch) : undefined;
  const oldLogProbs = options.clip === undefined ? undefined : packOldLogProbs(samples, batch);
  const promptLengths = samples.map((s) => s.promptLength);
  const advantages = samples.map((s) => s.advantage);
  const { weights, grads } = await gradientsOf(trainer, batch, 'lora', (logProbs) => policyGradientWeights({ batch, promptLengths, advantages, logProbs, oldLogProbs, referenceLogProbs }, options));
  return applyGradients(trainer, optimizer, grads, [...new Set(samples.map((s) => s.adapter).filter((a) => a >= 0))], weights);
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
