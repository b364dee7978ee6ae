// Batched generation with a KV cache, in micro-batches: the requests are taken in runs of consecutive requests
// whose KV cache holds at most `batchTokens` positions (src/engine/budget.ts; default: every request at once), each
// run with a cache of its own. In a micro-batch, the prompts' tokens but the last go through the model in prefill
// chunks of at most PREFILL_CHUNK_TOKENS (whatever request they belong to), then one decode call per step runs every
// sequence still running, from its prompt's last token on. Two loops produce the same tokens:
// - the device loop (default): a sampled token stays on the device and is the next step's input (Backend.sampleStep
//   writes it into the step rows the next forward reads); the host reads the tokens back every `stepsPerRead`
//   steps (where a request may stop early, runs start at one step, double while none stops and halve when one
//   does). A request that ends inside such a run (a stop token, onToken) keeps running to the run's end and its
//   extra tokens are dropped; a run never goes past any request's maxTokens, so every KV write stays within the
//   writer's own positions of its own slot, where no other row reads.
//   Masks that carry token automata (AutomatonMasks: a grammar compiled to the token level) take this loop too:
//   the tables are uploaded once, and each step's masks are computed on the device from the rows' automaton
//   states, which the sampled tokens advance (Backend.sampleStep with tables).
// - the host loop (the reference, and the loop of function masks: a TokenMaskFn is computed on the host from the
//   tokens so far): the tokens of every step are read back before the next step is uploaded.
// Between two prefill chunks and two decode steps the options' pacer (src/engine/pacer.ts) lets the event loop run.
//
// Replay: a token's draw depends only on (seed, requestId, position) and on its own logits, which the kernels
// compute independently of the rest of the batch (and of how a prompt was cut into chunks: each position's keys
// and values are the same bits whichever forward wrote them), so a request yields the same tokens alone, in any
// batch and in any micro-batch, and the device loop (whose batches keep ended requests for up to a run) the same
// as the host loop.

import type { KvCache, SampleRow, Tensor } from '../backend/backend.js';
import { microBatches } from '../engine/budget.js';
import type { Pacer } from '../engine/pacer.js';
import type { LoraBank } from './lora-bank.js';
import type { ForwardBatch, LlamaModel } from './llama.js';
import { automatonMaskFn, packAutomata, stateAfter, type TokenAutomaton } from './token-automaton.js';

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
 * Masks the device computes: request i is decoded under automata[i] from its start state (null: free text), by
 * the rule of src/model/token-automaton.ts. Every automaton must cover the model's vocabulary.
 */
export interface AutomatonMasks {
  automata: ReadonlyArray<TokenAutomaton | null>; // [requests]
}

/**
 * Sees each request's tokens as they are sampled (in request order within a step); returning true ends that
 * request there, finish reason 'stop' (a stop string in its text, say).
 */
export type TokenCallback = (request: GenerationRequest, token: number) => boolean | void;

export type DecodeLoop = 'device' | 'host';
export const DEFAULT_DECODE_LOOP: DecodeLoop = 'device';
export const DEFAULT_STEPS_PER_READ = 16;
/**
 * Prompt tokens one prefill forward takes at most: what bounds the prefill's activations, and how long the engine
 * computes between two pauses (at 0.5B on two cores, a chunk is seconds of work).
 */
export const PREFILL_CHUNK_TOKENS = 256;

export interface GenerateOptions {
  bank?: LoraBank;
  mask?: TokenMaskFn | AutomatonMasks; // a function takes the host loop; automata either loop
  onToken?: TokenCallback; // called in the same order by both loops (the device loop after each readback)
  loop?: DecodeLoop;
  stepsPerRead?: number; // the device loop's decode steps between two readbacks
  batchTokens?: number; // KV-cache positions a micro-batch holds (requests × their longest prompt + maxTokens); default: no limit
  prefillChunkTokens?: number; // default PREFILL_CHUNK_TOKENS
  pacer?: Pacer; // paused between prefill chunks and decode steps; told how many tokens went through the model
}

/** Where a micro-batch's generation stands: each request's tokens so far and, once it has ended, why. */
interface Progress {
  readonly requests: readonly GenerationRequest[];
  readonly generated: number[][];
  readonly finish: (GenerationResult['finishReason'] | null)[];
  readonly work: Work;
}

export async function generate(model: LlamaModel, requests: readonly GenerationRequest[], options: GenerateOptions = {}): Promise<GenerationResult[]> {
  if (requests.length === 0) return [];
  requests.forEach((r) => checkRequest(model, r));
  const stepsPerRead = options.stepsPerRead ?? DEFAULT_STEPS_PER_READ;
  if (!Number.isInteger(stepsPerRead) || stepsPerRead < 1) throw new RangeError(`generate: stepsPerRead must be a positive integer, got ${stepsPerRead}`);
  const chunkTokens = options.prefillChunkTokens ?? PREFILL_CHUNK_TOKENS;
  if (!Number.isInteger(chunkTokens) || chunkTokens < 1) throw new RangeError(`generate: prefillChunkTokens must be a positive integer, got ${chunkTokens}`);
  const automata = typeof options.mask === 'object' ? checkAutomata(model, requests, options.mask) : null;
  const work = new Work(requests.reduce((n, r) => n + (r.maxTokens === 0 ? 0 : r.prompt.length - 1 + r.maxTokens), 0), options.pacer);
  const results: GenerationResult[] = [];
  for (const [first, end] of microBatches(requests.map((r) => r.prompt.length + r.maxTokens), options.batchTokens ?? Infinity, true)) {
    const batch = requests.slice(first, end);
    results.push(...(await generateMicroBatch(model, batch, options, { stepsPerRead, chunkTokens, automata: automata?.slice(first, end) ?? null, work })));
  }
  return results;
}

/** One micro-batch: its own KV cache, its prompts prefilled, then decoded by the host or the device loop. */
async function generateMicroBatch(model: LlamaModel, requests: readonly GenerationRequest[], options: GenerateOptions, run: { stepsPerRead: number; chunkTokens: number; automata: ReadonlyArray<TokenAutomaton | null> | null; work: Work }): Promise<GenerationResult[]> {
  const { automata, work } = run;
  const maxLen = Math.max(...requests.map((r) => r.prompt.length + r.maxTokens));
  const cache = model.createKvCache(requests.length, maxLen);
  const progress: Progress = { requests, generated: requests.map(() => []), finish: requests.map((r) => (r.maxTokens === 0 ? 'length' : null)), work };
  try {
    await prefill(model, cache, progress, options, run.chunkTokens);
    if (typeof options.mask === 'function' || (options.loop ?? DEFAULT_DECODE_LOOP) === 'host') {
      const maskFn = typeof options.mask === 'function' ? options.mask : automata ? automatonMaskFn(requests, automata) : undefined;
      await hostLoop(model, cache, progress, options, maskFn);
    } else {
      await deviceLoop(model, cache, progress, options, run.stepsPerRead, automata);
    }
  } finally {
    model.freeKvCache(cache);
  }
  return requests.map((r, i) => ({ requestId: r.requestId, tokens: progress.generated[i]!, finishReason: progress.finish[i]! }));
}

/** Tokens through the model of the most generation can take (every prompt, every request to its maxTokens): the pacer's report. */
class Work {
  private done = 0;
  constructor(
    private readonly total: number,
    private readonly pacer?: Pacer,
  ) {}

  add(tokens: number): void {
    this.done += tokens;
    this.pacer?.report({ phase: 'generate', done: this.done, total: this.total });
  }

  /** A pause between two pieces of work (a prefill chunk, a decode step). */
  pause = async (): Promise<void> => this.pacer?.pause();
}

/**
 * Writes the keys and values of every prompt token but each prompt's last into the cache, in forwards of at most
 * `chunkTokens` tokens; the first decode step then runs the last tokens and samples from their logits. Requests that
 * prefill the same tokens with the same adapter (a student's answers to one task) share one prefill: the first
 * computes it, the others get a copy of its keys and values, the same bits (a position's keys and values depend
 * only on the tokens up to it and the adapter).
 */
async function prefill(model: LlamaModel, cache: KvCache, s: Progress, options: GenerateOptions, chunkTokens: number): Promise<void> {
  const tokens: number[] = [];
  const slots: number[] = [];
  const positions: number[] = [];
  const firstWith = new Map<string, number>(); // adapter and prefilled tokens → the first request that has them
  const copies: Array<{ from: number; to: number; length: number }> = [];
  s.requests.forEach((r, i) => {
    if (s.finish[i] !== null || r.prompt.length < 2) return;
    const key = `${r.adapter}:${r.prompt.slice(0, -1).join(',')}`;
    const from = firstWith.get(key);
    if (from !== undefined) return void copies.push({ from, to: i, length: r.prompt.length - 1 });
    firstWith.set(key, i);
    for (let p = 0; p < r.prompt.length - 1; p++) [tokens.push(r.prompt[p]!), slots.push(i), positions.push(p)];
  });
  for (let first = 0; first < tokens.length; first += chunkTokens) {
    const end = Math.min(first + chunkTokens, tokens.length);
    // A forward returns some logits: its last row's, which nothing reads.
    model.backend.free(model.forward(batchOf(s, tokens.slice(first, end), slots.slice(first, end), positions.slice(first, end), [end - first - 1]), cache, options.bank));
    model.backend.submit();
    s.work.add(end - first);
    await s.work.pause();
  }
  if (copies.length > 0) await copyPrefixes(model, cache, copies);
  s.work.add(copies.reduce((n, c) => n + c.length, 0));
}

/** Copies the keys and values of positions [0, length) from one slot of the cache to another, in every layer. */
async function copyPrefixes(model: LlamaModel, cache: KvCache, copies: ReadonlyArray<{ from: number; to: number; length: number }>): Promise<void> {
  const b = model.backend;
  const position = cache.kvHeads * cache.headDim; // values a position holds in one layer
  const at = (layer: number, slot: number) => (layer * cache.slots + slot) * cache.maxLen * position; // cache: [layers, slots, maxLen, kvHeads, headDim]
  for (const tensor of [cache.k, cache.v]) {
    const values = await b.readF32(tensor);
    for (const { from, to, length } of copies) {
      for (let layer = 0; layer < cache.layers; layer++) b.write(tensor, values.subarray(at(layer, from), at(layer, from) + length * position), at(layer, to));
    }
  }
}

/** One readback per step: sample, read, decide on the host which requests go on, upload the next step. */
async function hostLoop(model: LlamaModel, cache: KvCache, s: Progress, options: GenerateOptions, maskFn?: TokenMaskFn): Promise<void> {
  const b = model.backend;
  let running = runningOf(s);
  while (running.length > 0) {
    const logits = model.forward(decodeBatch(s, running), cache, options.bank);
    const mask = maskFn ? buildMask(model.config.vocabSize, running.map((i) => s.requests[i]!), running.map((i) => s.generated[i]!), maskFn) : undefined;
    const maskTensor = mask ? b.uploadI32(mask, [running.length, mask.length / running.length]) : undefined;
    const sampled = b.sample(logits, sampleRows(s, running), maskTensor);
    const next = await b.readI32(sampled);
    [logits, sampled, ...(maskTensor ? [maskTensor] : [])].forEach((t) => b.free(t));
    running.forEach((i, m) => accept(s, i, next[m]!, options.onToken));
    s.work.add(running.length + leftOver(s, running));
    running = runningOf(s);
    await s.work.pause();
  }
}

/** The tokens requests that ended early no longer take: what their maxTokens would have had left. */
const leftOver = (s: Progress, rows: readonly number[]) => rows.reduce((n, i) => n + (s.finish[i] === null ? 0 : s.requests[i]!.maxTokens - s.generated[i]!.length), 0);

/**
 * Runs of up to `stepsPerRead` steps with the tokens on the device: each step's sampling writes its tokens into the
 * step rows the next step's forward reads, and into a history [steps, M] read back at the run's end. Under automata,
 * their tables are uploaded once and each run starts every row from the state its tokens so far reach (the device
 * advances it within the run).
 */
async function deviceLoop(model: LlamaModel, cache: KvCache, s: Progress, options: GenerateOptions, stepsPerRead: number, automata: ReadonlyArray<TokenAutomaton | null> | null): Promise<void> {
  const b = model.backend;
  const { tables, automatonOf } = uploadAutomata(model, s, automata);
  try {
    let running = runningOf(s);
    // Rows that may stop early (a stop token, onToken) keep computing until their run ends: runs then start at one
    // step, double up to stepsPerRead while no request stops and halve after a run in which one did, so short
    // outputs (the arith domain's answers: 1-3 tokens) and the last rows' tails waste few steps.
    const mayStop = options.onToken !== undefined || s.requests.some((r) => (r.stopTokens?.length ?? 0) > 0);
    let runSteps = mayStop ? 1 : stepsPerRead;
    while (running.length > 0) {
      const M = running.length;
      const steps = Math.min(runSteps, ...running.map((i) => s.requests[i]!.maxTokens - s.generated[i]!.length));
      const { rows, lora } = model.uploadRows(decodeBatch(s, running), cache, options.bank);
      const params = b.uploadSampleRows(sampleRows(s, running).map((row, m) => ({ ...row, automaton: automatonOf(running[m]!) })));
      const history = b.uploadI32(new Int32Array(steps * M), [steps, M]);
      let tokens: Int32Array;
      try {
        for (let step = 0; step < steps; step++) {
          const logits = model.forwardRows(rows, cache, lora);
          b.sampleStep(logits, params, step, history, rows, tables);
          b.free(logits);
          b.submit(); // the device runs this step while the host records the next
          s.work.add(M);
          await s.work.pause();
        }
        tokens = await b.readI32(history);
      } finally {
        [rows.packed.whole, params, history].forEach((t) => b.free(t));
      }
      for (let step = 0; step < steps; step++) {
        running.forEach((i, m) => s.finish[i] === null && accept(s, i, checkDrawn(s, i, tokens[step * M + m]!), options.onToken));
      }
      s.work.add(leftOver(s, running)); // (a row that ended inside the run was counted for its whole run: display only)
      const stopped = running.some((i) => s.finish[i] === 'stop');
      if (mayStop) runSteps = stopped ? Math.max(1, runSteps >> 1) : Math.min(2 * runSteps, stepsPerRead);
      running = runningOf(s);
    }
  } finally {
    if (tables) b.free(tables);
  }
}

/**
 * The automata's tables in one tensor (none without automata), and request i's automaton as its sample row carries
 * it at a run's start: its table, the state its tokens so far reach, its tokens left.
 */
function uploadAutomata(model: LlamaModel, s: Progress, automata: ReadonlyArray<TokenAutomaton | null> | null) {
  const used = automata ? [...new Set(automata.filter((a): a is TokenAutomaton => a !== null))] : [];
  const { words, offsets } = packAutomata(used);
  const tables: Tensor | undefined = used.length > 0 ? model.backend.uploadI32(words, [words.length]) : undefined;
  const automatonOf = (i: number): SampleRow['automaton'] => {
    const a = automata?.[i] ?? null;
    if (a === null) return undefined;
    const at = offsets.get(a)!;
    return { at, state: stateAfter(words, s.generated[i]!, at), remaining: s.requests[i]!.maxTokens - s.generated[i]!.length };
  };
  return { tables, automatonOf };
}

/** A token of a running request: -1 is the device's word for a row its automaton allowed nothing in. */
function checkDrawn(s: Progress, i: number, token: number): number {
  if (token < 0) throw new Error(`generation request ${s.requests[i]!.requestId}: its token automaton allows no token after ${s.generated[i]!.length} tokens (a grammar that cannot complete within maxTokens?)`);
  return token;
}

const runningOf = (s: Progress) => s.requests.map((_, i) => i).filter((i) => s.finish[i] === null);

/** Appends request i's new token and ends the request at a stop token, at onToken's word, or at maxTokens. */
function accept(s: Progress, i: number, token: number, onToken?: TokenCallback): void {
  const request = s.requests[i]!;
  s.generated[i]!.push(token);
  const stopped = onToken?.(request, token) === true;
  if (stopped || request.stopTokens?.includes(token)) s.finish[i] = 'stop';
  else if (s.generated[i]!.length >= request.maxTokens) s.finish[i] = 'length';
}

/** A decode step: each running request feeds its newest token (its prompt's last before any) at its position. */
function decodeBatch(s: Progress, running: readonly number[]): ForwardBatch {
  const tokens = running.map((i) => s.generated[i]!.at(-1) ?? s.requests[i]!.prompt.at(-1)!);
  const positions = running.map((i) => s.requests[i]!.prompt.length + s.generated[i]!.length - 1);
  return batchOf(s, tokens, running, positions, running.map((_, m) => m));
}

function batchOf(s: Progress, tokens: number[], slots: readonly number[], positions: number[], logitRows: number[]): ForwardBatch {
  const adapters = slots.map((slot) => s.requests[slot]!.adapter);
  return { tokens: Int32Array.from(tokens), slots: Int32Array.from(slots), positions: Int32Array.from(positions), adapters: Int32Array.from(adapters), logitRows: Int32Array.from(logitRows) };
}

/** The sampling parameters of each running request's next token. */
function sampleRows(s: Progress, running: readonly number[]): SampleRow[] {
  return running.map((i) => {
    const r = s.requests[i]!;
    return { temperature: r.temperature ?? 1, topP: r.topP ?? 1, seed: r.seed >>> 0, requestId: r.requestId >>> 0, position: (r.prompt.length + s.generated[i]!.length) >>> 0 };
  });
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

function checkAutomata(model: LlamaModel, requests: readonly GenerationRequest[], mask: AutomatonMasks): ReadonlyArray<TokenAutomaton | null> {
  const { automata } = mask;
  if (automata.length !== requests.length) throw new RangeError(`generate: mask.automata has ${automata.length} entries for ${requests.length} requests (one a request, null for free text)`);
  const wrong = automata.find((a) => a !== null && a.vocabSize !== model.config.vocabSize);
  if (wrong) throw new RangeError(`generate: the token automaton ${wrong.name} covers ${wrong.vocabSize} tokens, the model's vocabulary ${model.config.vocabSize}`);
  return automata;
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
