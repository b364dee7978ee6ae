// The arith grammar compiled to token automata (src/domains/arith/grammar-automaton.ts, src/model/token-automaton.ts)
// against the host mask it replaces (grammar.ts tokenMask, computed from the text):
// - the table's mask equals tokenMask at every state the automaton reaches (by a token path found in the table) and
//   at budgets around each state's completion need, and along random viable prefixes drawn under tokenMask, for
//   every format, over the quick start's character vocabulary, a vocabulary of multi-character tokens and Qwen3's;
// - generate()'s device loop under automata gives exactly the host loop's tokens and finish reasons under
//   tokenMask functions, on the CPU backend and on WebGPU: mixed formats and free rows, EOS and other stops inside
//   runs of device steps, different maxTokens, adapters, greedy and sampled rows;
// - the engine's generations with the arith domain's automata equal those under its function masks.
import seedrandom from 'seedrandom';
import { describe, expect, it } from 'vitest';
import { stateMask } from '../src/backend/automaton-mask.js';
import type { Backend } from '../src/backend/backend.js';
import { CpuBackend } from '../src/backend/cpu.js';
import type { FormatName } from '../src/domains/domain.js';
import { compileFormat, formatAutomaton } from '../src/domains/arith/grammar-automaton.js';
import { charactersToComplete, isComplete, minimumTokens, scan, tokenMask, type Format } from '../src/domains/arith/grammar.js';
import { arith } from '../src/domains/arith/index.js';
import { ARITH_TASK_TYPES, answerFormat, proposalFormat } from '../src/domains/arith/tasks.js';
import { LocalEngineCore } from '../src/engine/core.js';
import { randomModel } from '../src/model/checkpoint.js';
import { TINY_CONFIGS } from '../src/model/config.js';
import { generate, type GenerationRequest, type TokenMaskFn } from '../src/model/generate.js';
import { LlamaModel } from '../src/model/llama.js';
import { LoraBank } from '../src/model/lora-bank.js';
import { LORA_MODULES, randomAdapter } from '../src/model/peft.js';
import { checkAutomatonSize, packAutomaton, stateAfter, type TokenAutomaton } from '../src/model/token-automaton.js';
import { tokenTexts, type TokenTexts } from '../src/model/token-texts.js';
import { loadTokenizer } from '../src/model/tokenizer.js';
import { qwen as qwenTokenizer } from './qwen-tokenizer.js';
import { gpu } from './webgpu.js';

const FORMATS: Array<[FormatName, Format]> = ARITH_TASK_TYPES.flatMap((type): Array<[FormatName, Format]> => [
  [`proposal/${type}`, proposalFormat(type)],
  [`answer/${type}`, answerFormat(type)],
]);

/** The quick start's vocabulary: models/arith-tiny's character tokenizer (64 ids, EOS 2). */
const charVocab = tokenTexts(loadTokenizer('models/arith-tiny/tokenizer.json'), 64);

/** 64 ids of single characters, tokens of several (some across fields, some never viable) and specials. */
const mixedVocab: TokenTexts = (() => {
  const pieces = [...'0123456789x()+-*/%;,', '12', '999', '-7', '))', '((', '+(', '//', 'x*', ');', ';-', ';1', ',-', ',0', '0,', '1;2', '00', '-0', 'x=', '= ', 'ab', '(x', '*(', '5)', '%2', '*-'];
  const texts = Array.from({ length: 64 }, () => '');
  pieces.forEach((piece, i) => (texts[3 + ((i * 5) % 61)] = piece)); // spread over the ids (61 is prime)
  return { texts, eos: 2 };
})();

const allowedIds = (words: Uint32Array) => Array.from({ length: words.length * 32 }, (_, v) => v).filter((v) => (words[v >>> 5]! >>> (v & 31)) & 1);
const textOf = (vocab: TokenTexts, tokens: readonly number[]) => tokens.map((t) => vocab.texts[t]).join('');

/** The automaton's mask at `state` with `remaining` tokens left, as the device computes it. */
function tableMask(a: TokenAutomaton, state: number, remaining: number): Uint32Array {
  const words = new Uint32Array(Math.ceil(a.vocabSize / 32));
  stateMask(packAutomaton(a), 0, state, remaining, words);
  return words;
}

/** A shortest token path from the start to every state, breadth first over the table. */
function pathsToStates(a: TokenAutomaton): number[][] {
  const paths: number[][] = [[]];
  const byColumn = new Map(Array.from(a.columns.entries()).filter(([, c]) => c >= 0).map(([token, c]) => [c, token]));
  for (let queue = [0]; queue.length > 0; ) {
    const s = queue.shift()!;
    for (let c = 0; c < a.width; c++) {
      const n = a.next[s * a.width + c]!;
      if (n >= 0 && paths[n] === undefined) (paths[n] = [...paths[s]!, byColumn.get(c)!], queue.push(n));
    }
  }
  return paths;
}

describe('arith token automata against grammar.ts tokenMask', () => {
  for (const [vocabName, vocab] of [['the quick start vocabulary', charVocab], ['multi-character tokens', mixedVocab]] as const) {
    for (const [name, format] of FORMATS) {
      it(`${name} over ${vocabName}: every state's mask, at budgets around its completion`, () => {
        const a = compileFormat(name, format, vocab);
        const paths = pathsToStates(a);
        expect(paths.filter(Boolean).length).toBe(a.states); // every state is reached by tokens
        paths.forEach((path, s) => {
          const text = textOf(vocab, path);
          const need = charactersToComplete(format, scan(format, text)!);
          for (const remaining of [1, need, need + 1, need + 2, need + 3, 64]) {
            expect(allowedIds(tableMask(a, s, remaining)), `${JSON.stringify(text)} with ${remaining} left`).toEqual(allowedIds(tokenMask(format, vocab, text, remaining)));
          }
        });
      });

      it(`${name} over ${vocabName}: random viable prefixes drawn under tokenMask`, () => {
        const a = compileFormat(name, format, vocab);
        const packed = packAutomaton(a);
        const rng = seedrandom(`${name} ${vocabName}`);
        for (let walk = 0; walk < 40; walk++) {
          const budget = minimumTokens(format) + Math.floor(rng() * 40);
          const tokens: number[] = [];
          while (tokens.length < budget) {
            const left = budget - tokens.length;
            const expected = allowedIds(tokenMask(format, vocab, textOf(vocab, tokens), left));
            expect(allowedIds(tableMask(a, stateAfter(packed, tokens), left))).toEqual(expected);
            // (tokenMask can reach a dead end: charactersToComplete ignores the expression length limit.)
            const token = expected[Math.floor(rng() * expected.length)];
            if (token === undefined || token === vocab.eos) break;
            tokens.push(token);
          }
        }
      });
    }
  }

  it("Qwen3's vocabulary (151,936 ids): the masks of random viable prefixes, and a table of a few hundred kB", () => {
    const vocab = tokenTexts(qwenTokenizer, 151936);
    const [name, format] = FORMATS.find(([n]) => n === 'proposal/induce')!;
    const a = compileFormat(name, format, vocab);
    expect(a.width).toBeLessThan(100); // Qwen splits digits: few tokens are made of grammar characters only
    const packed = packAutomaton(a);
    const rng = seedrandom('qwen');
    const tokens: number[] = [];
    for (let i = 0; i < 12; i++) {
      const left = 60 - tokens.length;
      const expected = allowedIds(tokenMask(format, vocab, textOf(vocab, tokens), left));
      expect(allowedIds(tableMask(a, stateAfter(packed, tokens), left))).toEqual(expected);
      tokens.push(expected.filter((t) => t !== vocab.eos)[Math.floor(rng() * (expected.length - 1))]!);
    }
    expect(textOf(vocab, tokens).length).toBeGreaterThan(12); // it took multi-character tokens
  });

  it('is compiled once per (format, vocabulary), and a table past the limit is refused by name', () => {
    expect(arith.tokenAutomaton!('proposal/deduce', charVocab)).toBe(arith.tokenAutomaton!('proposal/deduce', charVocab));
    expect(arith.tokenAutomaton!('proposal/deduce', mixedVocab)).not.toBe(arith.tokenAutomaton!('proposal/deduce', charVocab));
    expect(formatAutomaton('answer/abduce', answerFormat('abduce'), charVocab).states).toBe(arith.tokenAutomaton!('answer/abduce', charVocab)!.states);
    expect(() => checkAutomatonSize('grammar proposal/deduce', 200_000, 100, 64)).toThrow(/^grammar proposal\/deduce: its token automaton has 200000 states x 100 token columns/);
  });
});

const qwen = TINY_CONFIGS['qwen2-tiny']!; // vocabulary 64, like arith-tiny's
const weights = randomModel(qwen, 23);

function setUp(backend: Backend) {
  const model = LlamaModel.upload(backend, qwen, weights, { storage: 'f16', maxContext: 96 });
  const bank = new LoraBank(backend, qwen, 2, 4, LORA_MODULES);
  bank.load(0, randomAdapter(qwen, { rank: 4, alpha: 8, targets: [...LORA_MODULES], seed: 41, init: 'gaussian' }));
  bank.load(1, randomAdapter(qwen, { rank: 2, alpha: 3, targets: ['q_proj', 'v_proj', 'down_proj'], seed: 42, init: 'gaussian' }));
  return { model, bank };
}

/** Requests of mixed formats (null: free text), budgets, adapters and sampling; EOS ends most of them. */
function requestsOf(seed: string, vocab: TokenTexts, n: number): { requests: GenerationRequest[]; formats: Array<[FormatName, Format] | null> } {
  const rng = seedrandom(seed);
  const pick = <T>(options: readonly T[]) => options[Math.floor(rng() * options.length)]!;
  const formats = Array.from({ length: n }, (_, i) => (i % 5 === 4 ? null : pick(FORMATS)));
  const requests = formats.map((f, i) => ({
    requestId: 200 + i,
    prompt: Array.from({ length: 1 + Math.floor(rng() * 6) }, () => Math.floor(rng() * qwen.vocabSize)),
    adapter: pick([-1, 0, 1]),
    maxTokens: (f ? minimumTokens(f[1]) : 0) + pick([0, 3, 9, 20]),
    seed: 11,
    temperature: pick([0, 0.8, 1.4]),
    topP: pick([1, 0.9]),
    ...(i % 4 === 3 ? {} : { stopTokens: [vocab.eos] }), // without: EOS keeps its state and generation goes on
  }));
  return { requests, formats };
}

/** The reference: grammar.ts tokenMask from each request's text so far. */
const hostMask = (vocab: TokenTexts, requests: readonly GenerationRequest[], formats: ReadonlyArray<[FormatName, Format] | null>): TokenMaskFn => {
  const formatOf = new Map(requests.map((r, i) => [r.requestId, formats[i]]));
  return (r, generated) => {
    const f = formatOf.get(r.requestId);
    return f ? tokenMask(f[1], vocab, textOf(vocab, generated), r.maxTokens - generated.length) : null;
  };
};

function loopTests(name: string, backend: () => Backend) {
  describe(`generate() under token automata on ${name}`, () => {
    it('gives the host loop under tokenMask exact tokens and finish reasons: formats, stops, budgets, adapters, sampling', async () => {
      const { model, bank } = setUp(backend());
      for (const [vocabName, vocab] of [['chars', charVocab], ['mixed', mixedVocab]] as const) {
        const { requests: plain, formats } = requestsOf(`automata ${vocabName}`, vocab, 10);
        // Stops inside runs: each third request also stops at the token a free run drew at its step 2..6.
        const free = await generate(model, plain, { bank, loop: 'host', mask: hostMask(vocab, plain, formats) });
        const requests = plain.map((r, i) => (i % 3 === 1 && free[i]!.tokens.length > 2 + (i % 5) ? { ...r, stopTokens: [...(r.stopTokens ?? []), free[i]!.tokens[2 + (i % 5)]!] } : r));
        const reference = await generate(model, requests, { bank, loop: 'host', mask: hostMask(vocab, requests, formats) });
        const automata = formats.map((f) => (f ? formatAutomaton(f[0], f[1], vocab) : null));
        for (const stepsPerRead of [1, 4, 16]) {
          expect(await generate(model, requests, { bank, mask: { automata }, stepsPerRead }), `${vocabName}, ${stepsPerRead} steps a read`).toEqual(reference);
        }
        expect(await generate(model, requests, { bank, mask: { automata }, loop: 'host' })).toEqual(reference);
        // The batch exercises what it is meant to: stops before maxTokens, runs to it, the grammar held.
        expect(reference.some((r, i) => r.finishReason === 'stop' && r.tokens.length < requests[i]!.maxTokens - 4)).toBe(true);
        expect(reference.some((r, i) => r.finishReason === 'length' && formats[i] !== null)).toBe(true);
        reference.forEach((r, i) => {
          const f = formats[i];
          if (f && r.tokens.at(-1) === vocab.eos) expect(isComplete(f[1], scan(f[1], textOf(vocab, r.tokens))!)).toBe(true);
        });
      }
    });
  });
}

/** Two states: token 5 leads from the start to a state that nothing follows (though it claims 0 tokens complete it). */
const deadEnd: TokenAutomaton = (() => {
  const columns = new Int32Array(qwen.vocabSize).fill(-1);
  columns[5] = 0;
  return { name: 'dead end', vocabSize: qwen.vocabSize, eos: 2, states: 2, columns, width: 1, next: Int32Array.from([1, -1]), complete: Uint8Array.from([0, 0]), toComplete: Int32Array.from([1, 0]) };
})();

function deadEndTests(name: string, backend: () => Backend) {
  it(`on ${name}: a running request at a state that allows nothing is an error naming it; a request that ended there is not`, async () => {
    const { model } = setUp(backend());
    const request: GenerationRequest = { requestId: 7, prompt: [1, 4], adapter: -1, maxTokens: 6, seed: 3, temperature: 1 };
    const free: GenerationRequest = { ...request, requestId: 8 };
    await expect(generate(model, [request, free], { mask: { automata: [deadEnd, null] }, stepsPerRead: 4 })).rejects.toThrow(/generation request 7: its token automaton allows no token after 1 tokens/);
    await expect(generate(model, [request], { mask: { automata: [deadEnd] }, loop: 'host' })).rejects.toThrow(/token mask for request 7 allows no token/);
    const stopped = [{ ...request, stopTokens: [5] }, free];
    const host = await generate(model, stopped, { mask: { automata: [deadEnd, null] }, loop: 'host' });
    expect(host[0]).toEqual({ requestId: 7, tokens: [5], finishReason: 'stop' });
    expect(await generate(model, stopped, { mask: { automata: [deadEnd, null] }, stepsPerRead: 4 })).toEqual(host);
  });
}

loopTests('the cpu backend', () => new CpuBackend());
describe('generate() under a token automaton with a dead end', () => deadEndTests('the cpu backend', () => new CpuBackend()));
describe.skipIf(!gpu)('webgpu, a dead end', () => deadEndTests('webgpu', () => gpu!));
describe.skipIf(!gpu)('webgpu', () => loopTests('webgpu', () => gpu!));

describe('the engine with the arith domain', () => {
  it('generates under its token automata what it generates under its function masks', async () => {
    const backend = new CpuBackend();
    const model = LlamaModel.upload(backend, qwen, weights, { maxContext: 96 });
    const settings = { vocab: charVocab, rl: { reduction: 'token' as const }, optimizer: { lr: 0.01, maxGradNorm: 1 }, lora: { rank: 4, modules: LORA_MODULES }, evolutionThreads: 1 };
    const adapters = [0, 1].map((seed) => randomAdapter(qwen, { rank: 4, alpha: 8, targets: [...LORA_MODULES], seed, init: 'gaussian' }));
    const { requests, formats } = requestsOf('engine', charVocab, 8);
    const names = formats.map((f) => (f ? f[0] : null));
    const run = async (domain: typeof arith) => {
      const core = new LocalEngineCore(model, { ...settings, domain }, [0, 1]);
      await core.load(adapters, null);
      try {
        return await core.generate(requests.map((r) => ({ ...r, stopTokens: [charVocab.eos] })), names);
      } finally {
        await core.close();
      }
    };
    const withAutomata = await run(arith);
    expect(withAutomata).toEqual(await run({ ...arith, tokenAutomaton: undefined }));
    expect(withAutomata.filter((r) => r.tokens.at(-1) === charVocab.eos).length).toBeGreaterThan(2);
  });
});
