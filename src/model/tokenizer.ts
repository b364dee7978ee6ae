// Tokenizers: any Hugging Face tokenizer.json through @huggingface/tokenizers, and a character-level one for the
// toy arithmetic domain, itself written as a valid tokenizer.json (a BPE model with no merges), so a model
// folder made here is a complete Hugging Face layout.

import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { ModelFormatError } from './errors.js';

export interface TextTokenizer {
  encode(text: string): number[];
  decode(ids: number[]): string;
  readonly vocabSize: number;
  readonly bosTokenId: number | null;
  readonly eosTokenId: number | null;
}

/** Digits, the operators of + - * // %, parentheses, the variable, and separators for task formats. */
export const ARITH_ALPHABET = '0123456789+-*/%()x=?:;, \n';
export const CHAR_SPECIALS = ['<pad>', '<bos>', '<eos>'];

function readJson(file: string): Record<string, unknown> {
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new ModelFormatError(`${file}: not readable JSON (${(error as Error).message})`);
  }
}

export function loadTokenizer(file: string): TextTokenizer {
  if (!existsSync(file)) throw new ModelFormatError(`${file}: no tokenizer.json (a model folder needs one to encode text)`);
  const json = readJson(file);
  const configFile = join(dirname(file), 'tokenizer_config.json');
  const config = existsSync(configFile) ? readJson(configFile) : {};
  let tokenizer: Tokenizer;
  try {
    tokenizer = new Tokenizer(json, config);
  } catch (error) {
    throw new ModelFormatError(`${file}: not a tokenizer this library can load (${(error as Error).message})`);
  }
  const model = json.model as { vocab?: Record<string, number> | unknown[] } | undefined;
  const added = (json.added_tokens ?? []) as Array<{ id: number; content: string }>;
  const vocabEntries = Array.isArray(model?.vocab) ? model.vocab.length : Object.keys(model?.vocab ?? {}).length;
  const vocabSize = Math.max(vocabEntries, ...added.map((t) => t.id + 1));
  const idOf = (content: string | undefined) => (content === undefined ? null : (added.find((t) => t.content === content)?.id ?? null));
  const special = (key: string) => {
    const value = config[key];
    return typeof value === 'string' ? value : (value as { content?: string } | undefined)?.content;
  };
  return {
    encode: (text) => tokenizer.encode(text, { add_special_tokens: false }).ids,
    // No clean-up of "spaces before punctuation": in arithmetic text " ?" and " ," are meant.
    decode: (ids) => tokenizer.decode(ids, { skip_special_tokens: true, clean_up_tokenization_spaces: false }),
    vocabSize,
    bosTokenId: idOf(special('bos_token') ?? added.find((t) => /^<(bos|s)>$/.test(t.content))?.content),
    eosTokenId: idOf(special('eos_token') ?? added.find((t) => /^<(eos|\/s)>$/.test(t.content))?.content),
  };
}

/** A character-level tokenizer.json: specials take ids 0.., then one id per character of `alphabet`. */
export function charTokenizerJson(alphabet: string, specials: string[] = CHAR_SPECIALS): object {
  const characters = [...new Set(alphabet)];
  const vocab: Record<string, number> = {};
  specials.forEach((s, i) => (vocab[s] = i));
  characters.forEach((c, i) => (vocab[c] = specials.length + i));
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: specials.map((content, id) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true })),
    normalizer: null,
    pre_tokenizer: null,
    post_processor: null,
    decoder: { type: 'Fuse' },
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab, merges: [] },
  };
}
