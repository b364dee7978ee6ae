// The losses, as per-token weights for LlamaTrainer.backward: the backward takes
//   L = -Σ_t (logpWeight[t] · log p_t + entropyWeight[t] · H_t)
// so a loss only has to say, per token, dL/dlog p_t (negated) and its entropy bonus. That is computed here on
// the host, in f64, from the log-probs of the forward pass: small arrays, plain code, no kernels.
//
// Policy gradient, per generated token t of sequence i with advantage A_i (γ = 1: every token gets it):
//   ratio ρ_t = exp(log p_t - oldLogp_t)                              (1 without PPO clipping)
//   surrogate_t = min(ρ_t·A_i, clip(ρ_t, 1-ε, 1+ε)·A_i)               (ρ_t·A_i without clipping)
//   kl_t = exp(ref_t - log p_t) - (ref_t - log p_t) - 1             (k3 estimator, ref = base model, adapter off)
//   loss_i,t = -surrogate_t + β·kl_t - c_H·H_t
// reduced per adapter, so that no adapter's gradient depends on another's batch share:
//   'token':    Σ over the adapter's generated tokens / their count
//   'sequence': mean over the adapter's sequences of (Σ over the sequence's generated tokens / their count)

import { assert } from '../backend/backend.js';
import type { PackedBatch } from './batch.js';

export interface PolicyGradientOptions {
  reduction: 'token' | 'sequence';
  /** PPO ratio clipping ε; needs oldLogProbs. Off when absent. */
  clip?: number;
  /** KL penalty β towards the base model; needs referenceLogProbs. */
  klCoef?: number;
  entropyCoef?: number;
}

export interface PolicyGradientInputs {
  batch: PackedBatch;
  /** Per sequence: the number of prompt tokens; tokens after them (the completion) are trained. */
  promptLengths: readonly number[];
  /** Per sequence advantage (see advantages.ts). */
  advantages: readonly number[];
  /** [T, 2] from the forward: log p of the next token and the entropy, per token. */
  logProbs: Float32Array;
  /** [T] log-probs under the policy that sampled the batch (PPO). */
  oldLogProbs?: Float32Array;
  /** [T] log-probs under the base model (KL penalty). */
  referenceLogProbs?: Float32Array;
}

export interface LossWeights {
  logpWeight: Float32Array; // [T]
  entropyWeight: Float32Array; // [T]
  /** The loss value, summed over adapters, and diagnostics averaged over trained tokens. */
  loss: number;
  klMean: number;
  entropyMean: number;
  clipFraction: number;
  trainedTokens: number;
  /** Per sequence, its share of `loss`, its summed entropy and its trained tokens (policy gradient only). */
  perSequence?: { loss: Float64Array; entropy: Float64Array; tokens: Int32Array };
}

/** Token t predicts token t+1; it is trained when t+1 is in the completion of its sequence. */
export function trainedTokenMask(batch: PackedBatch, promptLengths: readonly number[]): Uint8Array {
  const mask = new Uint8Array(batch.tokens.length);
  batch.tokens.forEach((_, t) => {
    const s = batch.sequenceOf[t]!;
    const promptLength = promptLengths[s]!;
    assert(promptLength >= 1, `sequence ${s}: a prompt of at least one token is needed`);
    const predicted = batch.positions[t]! + 1;
    mask[t] = predicted >= promptLength && t + 1 < batch.seqEnds[t]! ? 1 : 0;
  });
  return mask;
}

export function policyGradientWeights(inputs: PolicyGradientInputs, options: PolicyGradientOptions): LossWeights {
  const loss = new PolicyGradientLoss(inputs.batch, inputs.promptLengths, inputs.advantages, options);
  loss.weigh(0, inputs.logProbs, inputs.oldLogProbs, inputs.referenceLogProbs);
  return loss.result();
}

/**
 * The policy-gradient loss of a whole batch, weighed in consecutive parts (a training step's micro-batches, in
 * order): which tokens train and what each is averaged over depend on the whole batch and are fixed at the start;
 * a token's weight then needs only its own log-probs. The loss and its diagnostics are summed token by token in
 * token order, whatever the parts, so they are the same bits as in one part.
 */
export class PolicyGradientLoss {
  readonly mask: Uint8Array; // [T] trained tokens
  private readonly denominator: Float64Array; // [T]
  private readonly out: LossWeights & { perSequence: NonNullable<LossWeights['perSequence']> };
  private next = 0; // the first token not weighed yet

  constructor(
    readonly batch: PackedBatch,
    private readonly promptLengths: readonly number[],
    private readonly advantages: readonly number[],
    private readonly options: PolicyGradientOptions,
  ) {
    const [T, sequences] = [batch.tokens.length, batch.starts.length];
    assert(promptLengths.length === sequences && advantages.length === sequences, 'one prompt length and one advantage per sequence');
    this.mask = trainedTokenMask(batch, promptLengths);
    this.denominator = reductionDenominators(batch, this.mask, options.reduction);
    const perSequence = { loss: new Float64Array(sequences), entropy: new Float64Array(sequences), tokens: new Int32Array(sequences) };
    this.out = { logpWeight: new Float32Array(T), entropyWeight: new Float32Array(T), loss: 0, klMean: 0, entropyMean: 0, clipFraction: 0, trainedTokens: 0, perSequence };
  }

  /**
   * The weights of the tokens from `first` on, one a row of `logProbs` ([n, 2]: log p of the next token, entropy;
   * `oldLogProbs`, `referenceLogProbs`: [n]). Parts come in token order. Returns views of the n tokens' weights.
   */
  weigh(first: number, logProbs: Float32Array, oldLogProbs?: Float32Array, referenceLogProbs?: Float32Array): { logpWeight: Float32Array; entropyWeight: Float32Array } {
    const { batch, mask, denominator, options, out } = this;
    const n = logProbs.length / 2;
    assert(first === this.next && first + n <= batch.tokens.length, `policy-gradient loss: tokens ${first}..${first + n} weighed after ${this.next}`);
    if (options.clip !== undefined && !oldLogProbs) throw new RangeError('PPO clipping needs the old log-probs of the sampled tokens');
    if (options.klCoef && !referenceLogProbs) throw new RangeError('a KL penalty needs the base model\'s log-probs');
    const [beta, entropyCoef] = [options.klCoef ?? 0, options.entropyCoef ?? 0];
    for (let i = 0; i < n; i++) {
      const t = first + i;
      if (!mask[t]) continue;
      const advantage = this.advantages[batch.sequenceOf[t]!]!;
      const [logp, entropy] = [logProbs[i * 2]!, logProbs[i * 2 + 1]!];
      const ratio = oldLogProbs ? Math.exp(logp - oldLogProbs[i]!) : 1;
      // The clipped branch of min(·) is the active one (its gradient is zero) when the ratio has moved past the
      // clip range in the advantage's direction.
      const clipped = options.clip !== undefined && ((advantage > 0 && ratio > 1 + options.clip) || (advantage < 0 && ratio < 1 - options.clip));
      const surrogate = (clipped ? Math.max(1 - options.clip!, Math.min(1 + options.clip!, ratio)) : ratio) * advantage;
      const logRatioToRef = referenceLogProbs ? referenceLogProbs[i]! - logp : 0;
      const kl = Math.exp(logRatioToRef) - logRatioToRef - 1;
      const d = denominator[t]!;
      // -dL/dlog p = dsurrogate/dlog p - β·dkl/dlog p,  dsurrogate = ρ·A (0 when clipped),  dkl = 1 - exp(ref - log p)
      out.logpWeight[t] = ((clipped ? 0 : ratio * advantage) - beta * (1 - Math.exp(logRatioToRef))) / d;
      out.entropyWeight[t] = entropyCoef / d;
      const term = (-surrogate + beta * kl - entropyCoef * entropy) / d;
      const s = batch.sequenceOf[t]!;
      out.loss += term;
      out.perSequence.loss[s] = out.perSequence.loss[s]! + term;
      out.perSequence.entropy[s] = out.perSequence.entropy[s]! + entropy;
      out.perSequence.tokens[s] = out.perSequence.tokens[s]! + 1;
      out.klMean += kl;
      out.entropyMean += entropy;
      out.clipFraction += clipped ? 1 : 0;
      out.trainedTokens++;
    }
    this.next = first + n;
    return { logpWeight: out.logpWeight.subarray(first, first + n), entropyWeight: out.entropyWeight.subarray(first, first + n) };
  }

  /** The whole batch's weights and report, once every token is weighed. */
  result(): LossWeights {
    assert(this.next === this.batch.tokens.length, `policy-gradient loss: ${this.next} of ${this.batch.tokens.length} tokens weighed`);
    const { out } = this;
    const n = Math.max(out.trainedTokens, 1);
    return { ...out, klMean: out.klMean / n, entropyMean: out.entropyMean / n, clipFraction: out.clipFraction / n };
  }
}

/** Cross-entropy (next-token prediction) over the trained tokens, mean per token over the whole batch. */
export function crossEntropyWeights(batch: PackedBatch, logProbs: Float32Array, promptLengths?: readonly number[]): LossWeights {
  const mask = trainedTokenMask(batch, promptLengths ?? batch.starts.map(() => 1));
  const count = mask.reduce((n, m) => n + m, 0);
  assert(count > 0, 'cross-entropy: no token to predict');
  const out: LossWeights = { logpWeight: new Float32Array(mask.length), entropyWeight: new Float32Array(mask.length), loss: 0, klMean: 0, entropyMean: 0, clipFraction: 0, trainedTokens: count };
  mask.forEach((m, t) => {
    if (!m) return;
    out.logpWeight[t] = 1 / count;
    out.loss -= logProbs[t * 2]! / count;
    out.entropyMean += logProbs[t * 2 + 1]! / count;
  });
  return out;
}

/**
 * The summed log-likelihood of every predicted token as the "loss", so that backward returns its gradient (the
 * ascent direction): weight -1 on each token that predicts a token of its sequence.
 */
export function logLikelihoodWeights(batch: PackedBatch, logProbs: Float32Array): LossWeights {
  const mask = trainedTokenMask(batch, batch.starts.map(() => 1));
  const out: LossWeights = { logpWeight: new Float32Array(mask.length), entropyWeight: new Float32Array(mask.length), loss: 0, klMean: 0, entropyMean: 0, clipFraction: 0, trainedTokens: 0 };
  mask.forEach((m, t) => {
    if (!m) return;
    out.logpWeight[t] = -1;
    out.loss += logProbs[t * 2]!;
    out.trainedTokens++;
  });
  return out;
}

/** Per token, the count it is averaged over: its adapter's trained tokens, or its sequence's times the adapter's sequences. */
function reductionDenominators(batch: PackedBatch, mask: Uint8Array, reduction: 'token' | 'sequence'): Float64Array {
  const tokensPerAdapter = new Map<number, number>();
  const tokensPerSequence = new Float64Array(batch.starts.length);
  const sequencesPerAdapter = new Map<number, Set<number>>();
  mask.forEach((m, t) => {
    if (!m) return;
    const [adapter, s] = [batch.adapters[t]!, batch.sequenceOf[t]!];
    tokensPerAdapter.set(adapter, (tokensPerAdapter.get(adapter) ?? 0) + 1);
    tokensPerSequence[s] = tokensPerSequence[s]! + 1;
    sequencesPerAdapter.set(adapter, (sequencesPerAdapter.get(adapter) ?? new Set()).add(s));
  });
  return Float64Array.from(mask, (_, t) => {
    const adapter = batch.adapters[t]!;
    if (reduction === 'token') return tokensPerAdapter.get(adapter) ?? 1;
    return (tokensPerSequence[batch.sequenceOf[t]!] || 1) * (sequencesPerAdapter.get(adapter)?.size ?? 1);
  });
}
