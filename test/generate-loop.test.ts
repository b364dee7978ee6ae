// The device-resident decode loop (src/model/generate.ts) against the host loop, its reference: the same tokens and
// finish reasons for batches with stop tokens landing inside a run of device steps, different maxTokens, adapters
// and base rows, greedy and sampled rows, on the CPU backend and on WebGPU; onToken sees the same calls; the loop
// reads back once per run of steps, and runs adapt where a request may stop early. And Backend.sampleStep against
// sample(), the op it extends.
import seedrandom from 'seedrandom';
import { describe, expect, it } from 'vitest';
import { uploadStepRows, type Backend, type SampleRow } from '../src/backend/backend.js';
import { CpuBackend } from '../src/backend/cpu.js';
import { randomModel } from '../src/model/checkpoint.js';
import { TINY_CONFIGS } from '../src/model/config.js';
import { generate, type GenerateOptions, type GenerationRequest } from '../src/model/generate.js';
import { LlamaModel } from '../src/model/llama.js';
import { LoraBank } from '../src/model/lora-bank.js';
import { LORA_MODULES, randomAdapter } from '../src/model/peft.js';
import { gpu } from './webgpu.js';

const qwen = TINY_CONFIGS['qwen2-tiny']!; // q/k/v biases, tied embeddings
const weights = randomModel(qwen, 21);

function setUp(backend: Backend) {
  const model = LlamaModel.upload(backend, qwen, weights, { storage: 'f16', maxContext: 64 });
  const bank = new LoraBank(backend, qwen, 3, 4, LORA_MODULES);
  bank.load(0, randomAdapter(qwen, { rank: 4, alpha: 8, targets: [...LORA_MODULES], seed: 31, init: 'gaussian' }));
  bank.load(1, randomAdapter(qwen, { rank: 2, alpha: 3, targets: ['q_proj', 'v_proj', 'down_proj'], seed: 32, init: 'gaussian' }));
  bank.load(2, randomAdapter(qwen, { rank: 4, alpha: 4, targets: ['k_proj', 'o_proj', 'gate_proj', 'up_proj'], seed: 33, init: 'gaussian' }));
  return { model, bank };
}

/** A batch of `n` requests of mixed prompts, adapters, maxTokens and sampling settings, from a seed. */
function requestsOf(seed: string, n: number): GenerationRequest[] {
  const rng = seedrandom(seed);
  const pick = <T>(options: readonly T[]) => options[Math.floor(rng() * options.length)]!;
  return Array.from({ length: n }, (_, i) => ({
    requestId: 100 + i,
    prompt: Array.from({ length: 1 + Math.floor(rng() * 9) }, () => Math.floor(rng() * qwen.vocabSize)),
    adapter: pick([-1, 0, 1, 2]),
    maxTokens: pick([0, 1, 5, 9, 16, 23]),
    seed: 7,
    temperature: pick([0, 0.7, 1.3]),
    topP: pick([1, 0.9]),
  }));
}

/**
 * Stop tokens that end some requests early: from a free run (no stop tokens) of the host loop, the token each
 * third request emits at step 2..6 (so, with 4 steps a read, stops land inside and at the edge of runs).
 */
async function withStops(model: LlamaModel, bank: LoraBank, requests: GenerationRequest[]): Promise<GenerationRequest[]> {
  const free = await generate(model, requests, { bank, loop: 'host' });
  return requests.map((r, i) => {
    const at = 2 + (i % 5);
    return i % 3 === 0 && free[i]!.tokens.length > at ? { ...r, stopTokens: [free[i]!.tokens[at]!, qwen.vocabSize - 1] } : r;
  });
}

function loopTests(name: string, backend: () => Backend) {
  describe(`the device decode loop on ${name}`, () => {
    it('gives the host loop exact tokens and finish reasons: stops, maxTokens, adapters, greedy and sampled rows', async () => {
      const { model, bank } = setUp(backend());
      for (const [seed, n] of [['batch a', 6], ['batch b', 9], ['batch c', 1]] as const) {
        const requests = await withStops(model, bank, requestsOf(seed, n));
        const reference = await generate(model, requests, { bank, loop: 'host' });
        for (const stepsPerRead of [1, 4, 16]) {
          expect(await generate(model, requests, { bank, loop: 'device', stepsPerRead })).toEqual(reference);
        }
        if (n > 1) {
          // The batch exercises what it is meant to: early stops, runs to maxTokens, a request with nothing to do.
          expect(reference.some((r, i) => r.finishReason === 'stop' && r.tokens.length < requests[i]!.maxTokens)).toBe(true);
          expect(reference.some((r) => r.finishReason === 'length' && r.tokens.length > 4)).toBe(true);
        }
      }
    });

    it('calls onToken in the same order with the same tokens, and ends a request where it says', async () => {
      const { model, bank } = setUp(backend());
      const requests = requestsOf('callbacks', 5).map((r) => ({ ...r, maxTokens: 12 }));
      const run = async (options: GenerateOptions) => {
        const calls: string[] = [];
        const onToken = (r: GenerationRequest, token: number) => {
          calls.push(`${r.requestId}:${token}`);
          return r.requestId === 101 && calls.length > 6; // ends request 101 at its first token after the 6th call
        };
        return { results: await generate(model, requests, { ...options, bank, onToken }), calls };
      };
      const host = await run({ loop: 'host' });
      const device = await run({ loop: 'device', stepsPerRead: 5 });
      expect(device).toEqual(host);
      expect(host.results[1]!.finishReason).toBe('stop');
    });
  });
}

loopTests('the cpu backend', () => new CpuBackend());
describe.skipIf(!gpu)('webgpu', () => loopTests('webgpu', () => gpu!));

describe('the device decode loop', () => {
  /** The model on a CPU backend that counts its token readbacks (readI32). */
  const countingReads = () => {
    const counter = { reads: 0 };
    const counting = new Proxy(new CpuBackend(), {
      get(target, key) {
        if (key === 'readI32') return (t: Parameters<Backend['readI32']>[0]) => (counter.reads++, target.readI32(t));
        const value = Reflect.get(target, key) as unknown;
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    return { model: LlamaModel.upload(counting, qwen, weights, { maxContext: 64 }), counter };
  };
  const request: GenerationRequest = { requestId: 1, prompt: [5, 6, 7], adapter: -1, maxTokens: 10, seed: 3 };

  it('reads the tokens back once per run of stepsPerRead steps (and the host loop once per step)', async () => {
    const { model, counter } = countingReads();
    for (const [options, expected] of [[{ loop: 'host' }, 10], [{ loop: 'device', stepsPerRead: 4 }, 3], [{ loop: 'device', stepsPerRead: 16 }, 1]] as const) {
      counter.reads = 0;
      await generate(model, [request], options);
      expect(counter.reads).toBe(expected);
    }
    await expect(generate(model, [request], { stepsPerRead: 0 })).rejects.toThrow(/stepsPerRead must be a positive integer, got 0/);
  });

  it('where a request may stop early, starts runs at one step, doubles them while none stops and halves them when one does', async () => {
    const { model, counter } = countingReads();
    // A stop token that never comes: runs of 1, 2, 4, then the 3 tokens left.
    counter.reads = 0;
    const free = await generate(model, [{ ...request, stopTokens: [-1] }], { stepsPerRead: 4 });
    expect([counter.reads, free[0]!.finishReason]).toEqual([4, 'length']);
    // Request 2 stops at its 2nd token (in the second run): then runs of 1 (token 4), 2 (5-6), 4 (7-10).
    counter.reads = 0;
    let seen = 0;
    const stopped = await generate(model, [request, { ...request, requestId: 2 }], { stepsPerRead: 16, onToken: (r) => r.requestId === 2 && ++seen === 2 });
    expect(counter.reads).toBe(5);
    expect(stopped.map((r) => [r.tokens.length, r.finishReason])).toEqual([[10, 'length'], [2, 'stop']]);
  });
});

/** sampleStep over three steps against sample() at each step's position; the next step's rows advanced. */
async function sampleStepMatchesSample(b: Backend) {
  const [M, V, steps] = [5, 300, 3];
  const rng = seedrandom('sample step');
  const rows: SampleRow[] = Array.from({ length: M }, (_, m) => ({ temperature: [0, 0.8, 1.5][m % 3]!, topP: [1, 0.7][m % 2]!, seed: 99, requestId: 10 + m, position: 4 + m }));
  const ints = (values: number[]) => Int32Array.from(values);
  const next = uploadStepRows(b, { tokens: ints([1, 2, 3, 4, 5]), slots: ints([0, 1, 2, 3, 4]), positions: ints([3, 4, 5, 6, 7]), adapters: ints([-1, -1, -1, -1, -1]), logitRows: ints([0, 1, 2, 3, 4]) });
  const params = b.uploadSampleRows(rows);
  const history = b.uploadI32(new Int32Array(steps * M), [steps, M]);
  const expected: number[] = [];
  for (let step = 0; step < steps; step++) {
    const logits = Float32Array.from({ length: M * V }, () => 6 * rng() - 3);
    const atStep = rows.map((r) => ({ ...r, position: r.position + step }));
    expected.push(...(await b.readI32(b.sample(b.upload(logits, [M, V]), atStep))));
    b.sampleStep(b.upload(logits, [M, V]), params, step, history, next);
  }
  expect(Array.from(await b.readI32(history))).toEqual(expected);
  expect(Array.from(await b.readI32(next.tokens))).toEqual(expected.slice(-M));
  expect(Array.from(await b.readI32(next.positions))).toEqual([6, 7, 8, 9, 10]);
  expect(Array.from(await b.readI32(next.slots))).toEqual([0, 1, 2, 3, 4]); // the other sections untouched
  expect(new Set(expected).size).toBeGreaterThan(M); // the rows really drew different tokens at each step
}

describe('Backend.sampleStep', () => {
  it('on the cpu backend draws what sample() draws at position + step and advances the next rows', () => sampleStepMatchesSample(new CpuBackend()));
  it.skipIf(!gpu)('on webgpu likewise', () => sampleStepMatchesSample(gpu!));
});
