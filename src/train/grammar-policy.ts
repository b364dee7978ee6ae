// Training the policy that was sampled. A domain with a grammar (arith) samples each generated token from the
// model's distribution renormalised over the tokens the grammar allows next:
//   π(a | s) = p(a | s) / Σ_{b allowed at s} p(b | s)
// The policy gradient of that policy is ∇log π(a) = ∇log p(a) - ∇log Σ_allowed p. Differentiating log p alone
// (the unmasked softmax over the whole vocabulary) trains another policy: every update that lowers a sampled
// token's probability raises every other token's, the forbidden ones too, and nothing ever lowers those again,
// because they are never sampled. Over a run the probability leaks into tokens the grammar never allows (the
// padded ids of a character vocabulary, an end of sequence before the first digit): docs/science.md measures it.
//
// The masked objective: at each trained position the batch's logits get FORBIDDEN_LOGIT on every token the grammar
// did not allow (PackedBatch.logitBias, added in LlamaTrainer.forward), so log p, the entropy and their gradients
// are those of π: a forbidden token has probability 0 and a zero gradient. FORBIDDEN_LOGIT is finite so that
// p·log p stays 0 (not 0·∞) in every kernel.

import type { TokenMask } from '../domains/domain.js';
import type { TokenTexts } from '../model/token-texts.js';

/** The logit a forbidden token gets: exp of it is 0 in f32, and it stays finite. */
export const FORBIDDEN_LOGIT = -1e30;

/** The tokens a grammar allowed at positions start, start + 1, ... of a sequence (bit v of word v >> 5: token v). */
export interface AllowedTokens {
  start: number;
  masks: readonly Uint32Array[];
}

/**
 * The masks a completion was sampled under: for its k-th token, the mask after the text of the tokens before it
 * with `maxTokens - k` tokens left (as generate() asks the domain's tokenMask).
 */
export function completionMasks(mask: TokenMask, vocab: TokenTexts, completion: readonly number[], maxTokens: number): Uint32Array[] {
  let text = '';
  return completion.map((token, k) => {
    const allowed = mask(text, maxTokens - k);
    text += vocab.texts[token] ?? '';
    return allowed;
  });
}

export const isAllowed = (mask: Uint32Array, token: number) => ((mask[token >>> 5]! >>> (token & 31)) & 1) === 1;

/**
 * Writes FORBIDDEN_LOGIT into `bias` ([T, V], row r: the logits that predict token r + 1) for every token a
 * sequence's grammar forbade, at the rows that predict its masked tokens. `first`: the sequence's first row.
 */
export function writeForbidden(bias: Float32Array, vocabSize: number, first: number, allowed: AllowedTokens, tokens: readonly number[]): void {
  allowed.masks.forEach((mask, k) => {
    const position = allowed.start + k; // the masked token's position; row position - 1 predicts it
    if (position < 1 || position >= tokens.length) throw new RangeError(`allowed tokens at position ${position} of a ${tokens.length}-token sequence (positions 1 to ${tokens.length - 1} are predicted)`);
    if (!isAllowed(mask, tokens[position]!)) throw new RangeError(`token ${tokens[position]} at position ${position} is outside the grammar's mask there: the sequence was not sampled under this grammar`);
    const row = (first + position - 1) * vocabSize;
    for (let v = 0; v < vocabSize; v++) if (!isAllowed(mask, v)) bias[row + v] = FORBIDDEN_LOGIT;
  });
}
