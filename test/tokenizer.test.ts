// tokenizer.json through @huggingface/tokenizers: the character-level tokenizer of the arithmetic domain, and a
// small hand-written BPE tokenizer with merges, to show the loader is not character-level only.
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ModelFormatError } from '../src/model/errors.js';
import { ARITH_ALPHABET, CHAR_SPECIALS, charTokenizerJson, loadTokenizer, tokenizerConfigFor } from '../src/model/tokenizer.js';

const dir = mkdtempSync(join(tmpdir(), 'populora-tokenizer-'));

function writeTokenizer(name: string, json: object, config?: object): string {
  const folder = join(dir, name);
  mkdirSync(folder, { recursive: true });
  writeFileSync(join(folder, 'tokenizer.json'), JSON.stringify(json));
  if (config) writeFileSync(join(folder, 'tokenizer_config.json'), JSON.stringify(config));
  return join(folder, 'tokenizer.json');
}

describe('character-level tokenizer', () => {
  const file = writeTokenizer('arith', charTokenizerJson(ARITH_ALPHABET));
  const tokenizer = loadTokenizer(file);
  const idOf = (c: string) => CHAR_SPECIALS.length + ARITH_ALPHABET.indexOf(c);

  it('is a valid HF tokenizer.json: specials as added tokens, one vocabulary entry per character', () => {
    const json = charTokenizerJson(ARITH_ALPHABET) as { added_tokens: Array<{ id: number; content: string; special: boolean }>; model: { type: string; vocab: Record<string, number>; merges: unknown[] } };
    expect(json.added_tokens.map((t) => [t.id, t.content, t.special])).toEqual([[0, '<pad>', true], [1, '<bos>', true], [2, '<eos>', true]]);
    expect(json.model.type).toBe('BPE');
    expect(json.model.merges).toEqual([]);
    expect(Object.keys(json.model.vocab)).toHaveLength(3 + ARITH_ALPHABET.length);
    expect(json.model.vocab['7']).toBe(3 + 7);
    expect(new Set(ARITH_ALPHABET).size).toBe(ARITH_ALPHABET.length); // no repeated characters
    for (const c of '0123456789+-*/%()x= \n') expect(ARITH_ALPHABET).toContain(c);
  });

  it('encodes "12+x" to 4 ids, character by character, and decodes back', () => {
    const ids = tokenizer.encode('12+x');
    expect(ids).toEqual([idOf('1'), idOf('2'), idOf('+'), idOf('x')]);
    expect(tokenizer.decode(ids)).toBe('12+x');
    for (const text of ['(3 * x) // 7 = ?\n', '  x', 'x=5;x*x=', '10 % 3, 2 - 9']) {
      expect(tokenizer.decode(tokenizer.encode(text))).toBe(text);
      expect(tokenizer.encode(text)).toHaveLength(text.length);
    }
    expect(tokenizer.encode('')).toEqual([]);
    expect(tokenizer.decode([])).toBe('');
  });

  it('knows its special tokens and vocabulary size', () => {
    expect([tokenizer.bosTokenId, tokenizer.eosTokenId, tokenizer.vocabSize]).toEqual([1, 2, ARITH_ALPHABET.length + 3]);
    expect(tokenizer.encode('1<eos>2')).toEqual([idOf('1'), 2, idOf('2')]); // a special's text in the input is that special
    expect(tokenizer.decode([1, idOf('4'), 2, 0, 0])).toBe('4'); // specials are skipped when decoding
    expect(tokenizer.decode([idOf('4'), 999])).toBe('4'); // ids past the vocabulary (a padded model vocab) decode to nothing
  });

  it('refuses a character outside its alphabet instead of dropping it', () => {
    expect(() => tokenizer.encode('1+A')).toThrow(ModelFormatError);
    expect(() => tokenizer.encode('1+A')).toThrow(`${file}: no token for the character "A" (U+0041) in "1+A"`);
    const withUnknown = loadTokenizer(writeTokenizer('with-unk', charTokenizerJson('ab', ['<pad>', '<bos>', '<eos>', '<unk>'])));
    expect(withUnknown.encode('aZb')).toEqual([4, 3, 5]); // <unk> = 3 stands in for "Z"
  });

  it('takes specials from tokenizer_config.json when there is one', () => {
    const json = charTokenizerJson('ab', ['<s>', '</s>', '<sep>']);
    const plain = loadTokenizer(writeTokenizer('conventional', json));
    expect([plain.bosTokenId, plain.eosTokenId]).toEqual([0, 1]); // <s> and </s> by their usual spellings
    const configured = loadTokenizer(writeTokenizer('configured', json, { bos_token: { content: '<sep>' }, eos_token: '<s>' }));
    expect([configured.bosTokenId, configured.eosTokenId]).toEqual([2, 0]);
  });

  it('tokenizerConfigFor names the specials for transformers', () => {
    expect(tokenizerConfigFor(charTokenizerJson(ARITH_ALPHABET))).toEqual({ tokenizer_class: 'PreTrainedTokenizerFast', clean_up_tokenization_spaces: false, bos_token: '<bos>', eos_token: '<eos>', pad_token: '<pad>' });
    expect(tokenizerConfigFor({ added_tokens: [] })).toEqual({ tokenizer_class: 'PreTrainedTokenizerFast', clean_up_tokenization_spaces: false });
  });
});

describe('loadTokenizer on other tokenizers', () => {
  it('applies BPE merges', () => {
    const json = {
      version: '1.0',
      added_tokens: [{ id: 0, content: '<|endoftext|>', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }],
      normalizer: null,
      pre_tokenizer: null,
      post_processor: null,
      decoder: { type: 'Fuse' },
      model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, vocab: { '<|endoftext|>': 0, a: 1, b: 2, ab: 3, abab: 4 }, merges: ['a b', 'ab ab'] },
    };
    const tokenizer = loadTokenizer(writeTokenizer('bpe', json, { eos_token: '<|endoftext|>' }));
    expect(tokenizer.encode('ababab')).toEqual([4, 3]);
    expect(tokenizer.decode([4, 3, 1])).toBe('abababa');
    expect([tokenizer.eosTokenId, tokenizer.bosTokenId, tokenizer.vocabSize]).toEqual([0, null, 5]);
  });

  it('names a missing or unreadable file', () => {
    expect(() => loadTokenizer(join(dir, 'none', 'tokenizer.json'))).toThrow(`${join(dir, 'none', 'tokenizer.json')}: no tokenizer.json`);
    const broken = join(dir, 'broken.json');
    writeFileSync(broken, '{"model": ');
    expect(() => loadTokenizer(broken)).toThrow(`${broken}: not readable JSON`);
  });
});
