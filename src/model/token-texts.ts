// Every token id's text, as generation sees the vocabulary: what a domain's token mask tests each candidate token
// against, and how the engine turns generated ids back into text.

import type { TextTokenizer } from './tokenizer.js';

/** The text of every token id ('' for specials and ids past the tokenizer: never allowed) and end-of-sequence. */
export interface TokenTexts {
  texts: readonly string[]; // [vocabSize]
  eos: number;
}

/** The token texts of a model whose vocabulary (`vocabSize`, often padded) covers the tokenizer's. */
export function tokenTexts(tokenizer: TextTokenizer, vocabSize: number): TokenTexts {
  if (tokenizer.eosTokenId === null) throw new RangeError("the model's tokenizer has no end-of-sequence token: generation under a grammar needs one");
  return { texts: Array.from({ length: vocabSize }, (_, id) => (id < tokenizer.vocabSize ? tokenizer.decode([id]) : '')), eos: tokenizer.eosTokenId };
}
