// Batched generation with a KV cache: one prefill call over every prompt, then one decode call per step for
// all sequences still running. Tokens are sampled on the device and read back once per step.
//
// Replay: a token's draw depends only on (seed, requestId, position) and on its own logits, which the kernels
// compute independently of the rest of the batch, so a request yields the same tokens alone or in any batch.

import type { SampleRow } from '../backend/backend.js';
import type { LoraBank } from './lora-bank.js';
import type { ForwardBatch, LlamaModel } from './llama.js';

export interface GenerationRequest {
  requestId: number; // u32; with seed and position, keys the sampling hash
  prompt: readonly number[]; // token ids, at least one
  adapter: number; // bank slot, or -1 for the base model
  maxTokens: number; // most tokens to generate
  seed: number; // u32
  temperature?: number; // default 1; <= 0 means greedy
  topP?: number; // default 1
  stopTokens?: readonly number[]; // generation ends after emitting one of these (it is kept in `tokens`)
}

export interface GenerationResult {
  requestId: number;
  tokens: number[]; // generated tokens only
  finishReason: 'stop' | 'length';
}

/**
 * Restricts the next token of a request: return a bitmask of ceil(vocab / 32) words (bit v set = token v
 * allowed), or null to allow every token. Called once per request per step, in request order.
 */
export type TokenMaskFn = (request: GenerationRequest, generated: readonly number[]) => Uint32Array | null;

/**
 * Sees each request's tokens as they are sampled (in request order within a step); returning true ends that
 * request there, finish reason 'stop' (a stop string in its text, say).
 */
export type TokenCallback = (request: GenerationRequest, token: number) => boolean | void;

export interface GenerateOptions {
  bank?: LoraBank;
  mask?: TokenMaskFn;
  onToken?: TokenCallback;
}

export async function generate(model: LlamaModel, requests: readonly GenerationRequest[], options: GenerateOptions = {}): Promise<GenerationResult[]> {
  if (requests.length === 0) return [];
  requests.forEach((r) => checkRequest(model, r));
  const maxLen = Math.max(...requests.map((r) => r.prompt.length + r.maxTokens));
  const cache = model.createKvCache(requests.length, maxLen);
  const generated = requests.map(() => [] as number[]);
  const finish: (GenerationResult['finishReason'] | null)[] = requests.map((r) => (r.maxTokens === 0 ? 'length' : null));
  try {
    // Prefill: every prompt token of every request; the next-token logits of each prompt's last token.
    let active = requests.map((_, i) => i).filter((i) => finish[i] === null);
    const tokens: number[] = [];
    const slots: number[] = [];
    const positions: number[] = [];
    const logitRows: number[] = [];
    for (const i of active) {
      const prompt = requests[i]!.prompt;
      prompt.forEach((token, p) => {
        tokens.push(token);
        slots.push(i);
        positions.push(p);
      });
      logitRows.push(tokens.length - 1);
    }
    while (active.length > 0) {
      const adapters = slots.map((slot) => requests[slot]!.adapter);
      const batch = {
        tokens: Int32Array.from(tokens),
        slots: Int32Array.from(slots),
        positions: Int32Array.from(positions),
        adapters: Int32Array.from(adapters),
        logitRows: Int32Array.from(logitRows),
      };
      const next = await sampleNext(batch, active.map((i) => requests[i]!), active.map((i) => generated[i]!));
      active.forEach((i, m) => {
        const token = next[m]!;
        const request = requests[i]!;
        generated[i]!.push(token);
        const stopped = options.onToken?.(request, token) === true;
        if (stopped || request.stopTokens?.includes(token)) finish[i] = 'stop';
        else if (generated[i]!.length >= request.maxTokens) finish[i] = 'length';
      });
      // Decode: each running request feeds its newest token at the next position.
      active = active.filter((i) => finish[i] === null);
      tokens.length = slots.length = positions.length = logitRows.length = 0;
      active.forEach((i, m) => {
        tokens.push(generated[i]!.at(-1)!);
        slots.push(i);
        positions.push(requests[i]!.prompt.length + generated[i]!.length - 1);
        logitRows.push(m);
      });
    }
  } finally {
    model.freeKvCache(cache);
  }
  return requests.map((r, i) => ({ requestId: r.requestId, tokens: generated[i]!, finishReason: finish[i]! }));

  async function sampleNext(batch: ForwardBatch, running: GenerationRequest[], soFar: number[][]): Promise<Int32Array> {
    const b = model.backend;
    const logits = model.forward(batch, cache, options.bank);
    const rows: SampleRow[] = running.map((r, m) => ({
      temperature: r.temperature ?? 1,
      topP: r.topP ?? 1,
      seed: r.seed >>> 0,
      requestId: r.requestId >>> 0,
      position: (r.prompt.length + soFar[m]!.length) >>> 0,
    }));
    const mask = options.mask ? buildMask(model.config.vocabSize, running, soFar, options.mask) : undefined;
    const maskTensor = mask ? b.uploadI32(mask, [running.length, mask.length / running.length]) : undefined;
    const sampled = b.sample(logits, rows, maskTensor);
    const next = await b.readI32(sampled);
    [logits, sampled, ...(maskTensor ? [maskTensor] : [])].forEach((t) => b.free(t));
    return next;
  }
}

function buildMask(vocabSize: number, running: GenerationRequest[], soFar: number[][], maskFn: TokenMaskFn): Int32Array | undefined {
  const words = Math.ceil(vocabSize / 32);
  const masks = running.map((r, m) => maskFn(r, soFar[m]!));
  if (masks.every((m) => m === null)) return undefined;
  const out = new Int32Array(running.length * words).fill(-1); // all bits set: every token allowed
  masks.forEach((m, row) => {
    if (m === null) return;
    if (m.length !== words) throw new RangeError(`token mask for request ${running[row]!.requestId} has ${m.length} words, expected ${words}`);
    if (m.every((w) => w === 0)) throw new RangeError(`token mask for request ${running[row]!.requestId} allows no token`);
    out.set(new Int32Array(m.buffer, m.byteOffset, words), row * words);
  });
  return out;
}

function checkRequest(model: LlamaModel, r: GenerationRequest): void {
  const where = `generation request ${r.requestId}`;
  if (r.prompt.length === 0) throw new RangeError(`${where}: the prompt is empty (give at least one token, e.g. BOS)`);
  if (!Number.isInteger(r.maxTokens) || r.maxTokens < 0) throw new RangeError(`${where}: maxTokens must be a non-negative integer`);
  if (r.prompt.length + r.maxTokens > model.maxContext) {
    throw new RangeError(`${where}: prompt (${r.prompt.length}) + maxTokens (${r.maxTokens}) exceeds the context length ${model.maxContext}`);
  }
  const bad = r.prompt.find((t) => !Number.isInteger(t) || t < 0 || t >= model.config.vocabSize);
  if (bad !== undefined) throw new RangeError(`${where}: token id ${bad} is outside the vocabulary [0, ${model.config.vocabSize})`);
  if (r.topP !== undefined && !(r.topP > 0 && r.topP <= 1)) throw new RangeError(`${where}: topP must be in (0, 1], got ${r.topP}`);
}
