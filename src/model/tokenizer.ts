// Tokenizers: any Hugging Face tokenizer.json through @huggingface/tokenizers, and a character-level one for the
// toy arithmetic domain, itself written as a valid tokenizer.json (a BPE model with no merges, Llama's BOS
// template as its post-processor), so a model folder made here is a complete Hugging Face layout. A prompt's
// special tokens come from the tokenizer's post-processor, as in transformers, never from config.json.

import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { ModelFormatError } from './errors.js';

export interface TextTokenizer {
  /** The text's tokens alone, no special tokens added (a completion, a piece of a sequence). */
  encode(text: string): number[];
  /**
   * The text as a model's input: the tokens with the special tokens the tokenizer's own post-processor adds
   * (Llama 3's `<|begin_of_text|>`, Llama 2's `<s>`, the character tokenizer's `<bos>`; none for Qwen, whatever
   * its config.json's bos_token_id says), as transformers' `tokenizer(text)` gives them.
   */
  encodePrompt(text: string): number[];
  decode(ids: number[]): string;
  readonly vocabSize: number;
  readonly eosTokenId: number | null;
}

/** Digits, the operators of + - * // %, parentheses, the variable, and separators for task formats. */
export const ARITH_ALPHABET = '0123456789+-*/%()x=?:;, \n';
export const CHAR_SPECIALS = ['<pad>', '<bos>', '<eos>'];
const BOS_SPELLING = /^<(bos|s)>$/;

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
  return tokenizerFromJson(json, existsSync(configFile) ? readJson(configFile) : {}, file);
}

/** A tokenizer from the contents of tokenizer.json and tokenizer_config.json; `file` names it in errors. */
export function tokenizerFromJson(json: Record<string, unknown>, config: Record<string, unknown>, file: string): TextTokenizer {
  let tokenizer: Tokenizer;
  try {
    tokenizer = new Tokenizer(json, config);
  } catch (error) {
    throw new ModelFormatError(`${file}: not a tokenizer this library can load (${(error as Error).message})`);
  }
  const model = json.model as { type?: string; vocab?: Record<string, number> | unknown[]; merges?: unknown[]; unk_token?: string | null } | undefined;
  const added = (json.added_tokens ?? []) as Array<{ id: number; content: string }>;
  const vocabEntries = Array.isArray(model?.vocab) ? model.vocab.length : Object.keys(model?.vocab ?? {}).length;
  const vocabSize = Math.max(vocabEntries, ...added.map((t) => t.id + 1));
  const idOf = (content: string | undefined) => (content === undefined ? null : (added.find((t) => t.content === content)?.id ?? null));
  const special = (key: string) => {
    const value = config[key];
    return typeof value === 'string' ? value : (value as { content?: string } | undefined)?.content;
  };
  // A BPE model without merges or an unknown token (the character-level layout below) silently drops characters
  // outside its vocabulary; for arithmetic text that would change the meaning, so encode refuses them instead.
  // (Byte-level tokenizers such as Qwen's and Llama 3's cover every input and are never refused.)
  const characterLevel = model?.type === 'BPE' && (model.merges?.length ?? 0) === 0 && !model.unk_token;
  const encodeWith = (text: string, specialTokens: boolean): number[] => {
    const plain = tokenizer.encode(text, { add_special_tokens: false });
    if (characterLevel && plain.tokens.join('') !== text) {
      const missing = [...text].find((c) => tokenizer.token_to_id(c) === undefined) ?? '';
      const code = missing.codePointAt(0)?.toString(16).toUpperCase().padStart(4, '0');
      throw new ModelFormatError(`${file}: no token for the character ${JSON.stringify(missing)} (U+${code}) in ${JSON.stringify(text.slice(0, 60))}; this character-level tokenizer covers ${JSON.stringify(characterVocabulary(model))}`);
    }
    if (!specialTokens) return plain.ids;
    const ids = tokenizer.encode(text, { add_special_tokens: true }).ids;
    const unknown = ids.findIndex((id: number) => !Number.isInteger(id));
    if (unknown >= 0) throw new ModelFormatError(`${file}: field "post_processor" adds a token that is in neither "added_tokens" nor the vocabulary (position ${unknown} of the prompt); fix the template's special tokens`);
    return ids;
  };
  return {
    encode: (text) => encodeWith(text, false),
    encodePrompt: (text) => encodeWith(text, true),
    // Ids the tokenizer does not know (a model's vocab_size is often padded past the tokenizer's) decode to
    // nothing, as in Hugging Face tokenizers. No clean-up of "spaces before punctuation": in arithmetic text
    // " ?" and " ," are meant.
    decode: (ids) => (ids.length === 0 ? '' : tokenizer.decode(ids, { skip_special_tokens: true, clean_up_tokenization_spaces: false })),
    vocabSize,
    eosTokenId: idOf(special('eos_token') ?? added.find((t) => /^<(eos|\/s)>$/.test(t.content))?.content),
  };
}

function characterVocabulary(model: { vocab?: Record<string, number> | unknown[] }): string {
  const tokens = Array.isArray(model.vocab) ? [] : Object.keys(model.vocab ?? {});
  return tokens.filter((t) => [...t].length === 1).join('');
}

/** A character-level tokenizer of the alphabet, and its tokenizer.json (to save beside a model); `name` names it in errors. */
export function characterTokenizer(alphabet: string, name: string): { json: Record<string, unknown>; tokenizer: TextTokenizer } {
  const json = charTokenizerJson(alphabet) as Record<string, unknown>;
  return { json, tokenizer: tokenizerFromJson(json, tokenizerConfigFor(json), name) };
}

/** A vocabulary size that covers the tokenizer's ids, rounded up to a multiple of 32 as model vocabularies are. */
export const vocabularyCovering = (vocabSize: number, tokenizer: TextTokenizer) => Math.max(vocabSize, Math.ceil(tokenizer.vocabSize / 32) * 32);

/**
 * A character-level tokenizer.json: specials take ids 0.., then one id per distinct character of `alphabet`.
 * A BPE model with single characters as its vocabulary and no merges encodes text character by character in
 * every Hugging Face tokenizers implementation. A special named `<unk>` becomes the unknown token (then
 * characters outside the alphabet encode to it instead of being refused by `loadTokenizer`). A special named
 * `<bos>` (or `<s>`) is what the post-processor puts before a prompt, as Llama's tokenizers do.
 */
export function charTokenizerJson(alphabet: string, specials: string[] = CHAR_SPECIALS): object {
  const characters = [...new Set(alphabet)].filter((c) => !specials.includes(c));
  const vocab: Record<string, number> = {};
  specials.forEach((s, i) => (vocab[s] = i));
  characters.forEach((c, i) => (vocab[c] = specials.length + i));
  const bos = specials.find((s) => BOS_SPELLING.test(s));
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: specials.map((content, id) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true })),
    normalizer: null,
    pre_tokenizer: null,
    post_processor: bos === undefined ? null : bosTemplate(bos, specials.indexOf(bos)),
    decoder: { type: 'Fuse' },
    model: { type: 'BPE', dropout: null, unk_token: specials.includes('<unk>') ? '<unk>' : null, continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab, merges: [] },
  };
}

/**
 * Llama's post-processor, as the Rust tokenizers crate writes it: `bos $A` for one sequence, `bos $A bos $B` for
 * a pair (the second with type id 1). transformers and @huggingface/tokenizers add the BOS from it.
 */
function bosTemplate(bos: string, id: number): object {
  const special = (typeId: number) => ({ SpecialToken: { id: bos, type_id: typeId } });
  const sequence = (name: 'A' | 'B', typeId: number) => ({ Sequence: { id: name, type_id: typeId } });
  return {
    type: 'TemplateProcessing',
    single: [special(0), sequence('A', 0)],
    pair: [special(0), sequence('A', 0), special(1), sequence('B', 1)],
    special_tokens: { [bos]: { id: bos, ids: [id], tokens: [bos] } },
  };
}

/**
 * The tokenizer_config.json transformers' AutoTokenizer needs beside a tokenizer.json that has no Python class of
 * its own: PreTrainedTokenizerFast, with the special tokens named after their usual spellings.
 */
export function tokenizerConfigFor(tokenizerJson: object): Record<string, unknown> {
  const added = ((tokenizerJson as { added_tokens?: unknown }).added_tokens ?? []) as Array<{ content?: unknown }>;
  const find = (pattern: RegExp) => added.map((t) => t.content).find((c): c is string => typeof c === 'string' && pattern.test(c));
  const roles = { bos_token: find(BOS_SPELLING), eos_token: find(/^<(eos|\/s)>$/), pad_token: find(/^<pad>$/), unk_token: find(/^<unk>$/) };
  return {
    tokenizer_class: 'PreTrainedTokenizerFast',
    clean_up_tokenization_spaces: false,
    ...Object.fromEntries(Object.entries(roles).filter(([, v]) => v !== undefined)),
  };
}
