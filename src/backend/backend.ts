// The compute interface the model is written against. Two implementations: `cpu.ts` (plain TypeScript, the
// reference and oracle) and `webgpu.ts` (WGSL kernels from kernels/ on Dawn). Every op is defined by the CPU
// reference; the WebGPU twin must agree within float tolerance and be batch-invariant (DESIGN.md rule 3):
// a row's result never depends on which other rows share the call.
//
// Conventions: matrices are row-major; a linear layer's weight is [out, in] as in Hugging Face, so
// matmul computes y = x · Wᵀ (+ bias). Shapes are given in comments as [rows, cols].

import type { KernelTiming } from './webgpu-profiler.js';

export type { KernelTiming };

export type BackendName = 'cpu' | 'webgpu';

/** How a weight matrix is stored on the device. Compute is always f32; f16 halves the bytes read. */
export type WeightStorage = 'f32' | 'f16';

export interface Tensor {
  readonly shape: readonly number[];
  readonly dtype: 'f32' | 'f16' | 'i32' | 'u32';
}

/** Key-value cache: k and v are [layers, slots, maxLen, kvHeads, headDim]. One slot per live sequence. */
export interface KvCache {
  readonly k: Tensor;
  readonly v: Tensor;
  readonly layers: number;
  readonly slots: number;
  readonly maxLen: number;
  readonly kvHeads: number;
  readonly headDim: number;
}

/** Per-row sampling parameters. temperature <= 0 means greedy (argmax, lowest index wins ties). */
export interface SampleRow {
  temperature: number;
  topP: number;
  seed: number; // u32
  requestId: number; // u32
  position: number; // u32: index of the token being sampled within its sequence
  // A decode loop's token automaton (automaton-mask.ts): read only by sampleStep with tables.
  automaton?: { at: number; state: number; remaining: number }; // table offset in words, state, tokens left at step 0
}

/** Longest context the attention kernel supports (its scores live in workgroup memory). */
export const MAX_CONTEXT = 4096;

/**
 * Several matrices of one width stored as one tensor (Wq|Wk|Wv, a bank's A factors of q, k and v), each part from
 * a row where the backend can bind a view (`viewAlignment`): the fused kernels read `whole`, every other op a part.
 */
export interface Packed {
  readonly whole: Tensor; // [rows, ...] with padding rows between the parts
  readonly parts: readonly Tensor[]; // views of whole: part i is its rows starts[i] ..
  readonly starts: readonly number[];
}

/**
 * A forward call's per-token integers in one i32 upload: the plain ops read the views, the fused kernels the
 * whole tensor (one binding) at `at`. Rows with an adapter are also grouped by adapter for the LoRA shrink
 * (Punica SGMV): `order` lists them adapter by adapter, `tiles` cuts that list into runs of at most
 * MAX_SEGMENT_ROWS rows of one adapter.
 */
export interface StepRows {
  readonly packed: Packed; // sections: tokens, slots, positions, adapters, logitRows, order, tiles
  readonly tokens: Tensor; // [T]
  readonly slots: Tensor; // [T]
  readonly positions: Tensor; // [T]
  readonly adapters: Tensor; // [T], -1 for the base model alone
  readonly logitRows: Tensor; // [M]
  readonly at: { readonly [K in StepSection]: number }; // element where each section starts in packed.whole
  readonly tileCount: number; // tiles: [tileCount, 2] = (first entry of order, rows)
  readonly longestTile: number;
}

export const STEP_SECTIONS = ['tokens', 'slots', 'positions', 'adapters', 'logitRows', 'order', 'tiles'] as const;
export type StepSection = (typeof STEP_SECTIONS)[number];
export const MAX_SEGMENT_ROWS = 8;

/** A linear layer over the parts of a packed weight: out[:, part p's columns] = x̂·W_pᵀ + bias_p (+ LoRA). */
export interface LinearOp {
  x: Tensor; // [T, K]; with `gather`, the rows x[logitRows[m]] are the input (T = M)
  w: Packed; // parts [N_p, K] (f32 or f16 weights); the output's columns are the parts' side by side
  bias?: Packed; // parts [N_p]
  norm?: { weight: Tensor; eps: number }; // x̂ = RMSNorm(x)·weight, row by row; else x̂ = x
  lora?: LinearLora;
  gather?: boolean;
}

/** LoRA on a fused linear: y[t, cols of p] += scale[s]·h_p[t]·B_pᵀ for the parts the bank targets, s = adapters[t]. */
export interface LinearLora {
  h: Tensor; // [T, targeted · R]: loraShrinkSegments of the same input, the targeted parts in order
  b: Packed; // the targeted parts' B factors, [S·N_p, R] each (f32)
  of: readonly number[]; // for each part of the linear: its index among the targeted parts, or -1
  scales: Tensor; // [S]
  rank: number;
}

/** RoPE and the KV-cache write of a fused q|k|v projection. */
export interface RopeKv {
  table: Tensor; // [maxLen, headDim]: cos | sin (ropeInPlace's table)
  heads: number;
  cache: KvCache;
  layer: number;
}

export interface Backend {
  readonly name: BackendName;
  /** One line describing the device, for run headers and benchmark tables. */
  readonly deviceDescription: string;
  /** WebGPU on a software adapter running on the CPU (Mesa lavapipe, SwiftShader). */
  readonly softwareAdapter?: boolean;
  /** The CPU backend's: what its dense products sum in (DenseSums, below). */
  readonly sums?: DenseSums;
  /** A view (rowsView) must start at a byte offset that is a multiple of this. */
  readonly viewAlignment: number;
  /** The most bytes one tensor may hold: a storage binding's limit on WebGPU, unbounded on the CPU. */
  readonly maxBindingBytes: number;
  /**
   * A backend that keeps weights in host memory (the CPU backend): the most bytes one weight matrix may take (one
   * WebAssembly memory's 4 GiB) and all of them together (the machine's memory), checked before a model is loaded.
   */
  readonly hostMemory?: { maxMatrixBytes: number; totalBytes: number };
  /** Kernel dispatches recorded since the backend was opened (0 on the CPU): a benchmark's count per step. */
  dispatches(): number;
  /**
   * WebGPU with timestamp queries: runs `work` with every dispatch timed on the device, each in a pass of its own
   * (a benchmark's per-kernel table; the split passes cost a little, so time the figures apart from it).
   */
  timeKernels?(work: () => Promise<void>): Promise<KernelTiming[]>;

  upload(data: Float32Array, shape: readonly number[]): Tensor;
  uploadI32(data: Int32Array, shape: readonly number[]): Tensor;
  /** A weight matrix [rows, cols]; with 'f16' storage the values are rounded to half precision. */
  uploadWeight(data: Float32Array, shape: readonly [number, number], storage: WeightStorage): Tensor;
  zeros(shape: readonly number[]): Tensor;
  /** Overwrite part of an f32 tensor (or f32-stored weight), starting at element `offset`. */
  write(t: Tensor, data: Float32Array, offset: number): void;
  /** Rows first .. first + rows - 1 of t (a matrix [rows, ...]), sharing its storage; freeing a view does nothing. */
  rowsView(t: Tensor, first: number, rows: number): Tensor;
  readF32(t: Tensor): Promise<Float32Array>;
  readI32(t: Tensor): Promise<Int32Array>;
  free(t: Tensor): void;
  /**
   * Optional: a copy of t that free() gives back at once, to use instead of t (left to the garbage collector), for
   * a tensor that lives long among short-lived ones. The CPU backend's arrays are otherwise freed when collected
   * (CpuBackend.keep); a device buffer is freed at once already.
   */
  keep?(t: Tensor): Tensor;
  /** Release every device resource. The backend is unusable afterwards. */
  destroy(): void;

  createKvCache(dims: Omit<KvCache, 'k' | 'v'>): KvCache;

  // out: [T, D] = table[tokens[t]]         table: [V, D] weight, tokens: i32 [T]
  embedding(table: Tensor, tokens: Tensor): Tensor;
  // out: [T, D] = x / rms(x) * weight       x: [T, D], weight: [D]
  rmsNorm(x: Tensor, weight: Tensor, eps: number): Tensor;
  // out: [T, N] = x · wᵀ + bias             x: [T, K], w: [N, K] weight, bias: [N]
  matmul(x: Tensor, w: Tensor, bias?: Tensor): Tensor;
  // acc += x                                 acc, x: same shape
  addInPlace(acc: Tensor, x: Tensor): void;
  // x: [T, heads * headDim] rotated in place (rotate-half convention of HF Llama).
  // table: [maxLen, headDim] with cos in columns [0, headDim/2) and sin in [headDim/2, headDim).
  ropeInPlace(x: Tensor, positions: Tensor, table: Tensor, heads: number, headDim: number): void;
  // cache.k/v[layer, slots[t], positions[t]] = k/v[t]      k, v: [T, kvHeads * headDim]
  kvWrite(cache: KvCache, layer: number, k: Tensor, v: Tensor, slots: Tensor, positions: Tensor): void;
  // Causal attention of each token over its own slot's positions 0..positions[t].
  // q: [T, heads * headDim] -> out: [T, heads * headDim]; GQA: head h reads kv head h / (heads / kvHeads).
  attention(q: Tensor, cache: KvCache, layer: number, slots: Tensor, positions: Tensor, heads: number): Tensor;
  // out: [T, F] = silu(gate) * up
  swiglu(gate: Tensor, up: Tensor): Tensor;
  // out: [M, D] = x[rows[m]]                 x: [T, D], rows: i32 [M]
  gatherRows(x: Tensor, rows: Tensor): Tensor;
  // LoRA shrink: out[t, j] = sum_k x[t, k] · a[adapters[t] * rank + j, k]; 0 where adapters[t] < 0.
  // x: [T, K], a: [slots * rank, K] weight, adapters: i32 [T] -> out: [T, rank]
  loraShrink(x: Tensor, a: Tensor, adapters: Tensor, rank: number): Tensor;
  // LoRA expand: y[t, n] += scales[s] · sum_j h[t, j] · b[s * N + n, j] with s = adapters[t] >= 0.
  // y: [T, N], h: [T, rank], b: [slots * N, rank] weight, scales: [slots]
  loraExpandInPlace(y: Tensor, h: Tensor, b: Tensor, adapters: Tensor, scales: Tensor): void;
  // One token per row from logits [M, V], drawn with a counter-based hash of (seed, requestId, position).
  // mask (optional): u32 [M, ceil(V / 32)], bit v of row m set = token v allowed.
  sample(logits: Tensor, rows: readonly SampleRow[], mask?: Tensor): Tensor;

  // ---- A device-resident decode loop (src/model/generate.ts): tokens stay on the device between readbacks. ----

  // The rows' sampling parameters as a tensor [M, 8] u32 (sampling.ts packSampleRows), uploaded once for many steps.
  uploadSampleRows(rows: readonly SampleRow[]): Tensor;
  // sample() of one decode step with nothing read back: row m's token is drawn at position params[m].position + step
  // and written to history[step, m] (history: i32 [steps, M]) and into the next forward's rows:
  // next.tokens[m] = token, next.positions[m] += 1 (next has M tokens, row m's logits are logits[m]).
  // With `tables` (i32, packed token automata: automaton-mask.ts), each row with an automaton is masked by it: at
  // step > 0 its state (in params) first advances by next.tokens[m], the token of the step before; its mask is that
  // state's with automaton.remaining - step tokens left. A row its automaton allows nothing in draws -1 (into the
  // history; the next rows get token 0).
  sampleStep(logits: Tensor, params: Tensor, step: number, history: Tensor, next: StepRows, tables?: Tensor): void;
  // Starts the work recorded so far without waiting for it (WebGPU: one queue submission), so the device runs a
  // step while the host records the next; nothing on the CPU, whose ops run as they are called.
  submit(): void;

  // ---- Fused ops of a decoder layer: one dispatch each on WebGPU, the ops above composed on the CPU. ----
  // Each computes r = x̂·Wᵀ + bias (+ LoRA) over the parts of op.w (LinearOp), then:

  // out: [T, N] = r
  linear(op: LinearOp, rows: StepRows): Tensor;
  // y: [T, N] += r   (the residual stream)
  linearResidual(op: LinearOp, rows: StepRows, y: Tensor): void;
  // parts [gate, up] of F columns each -> out: [T, F] = silu(r_gate) · r_up
  linearSwiglu(op: LinearOp, rows: StepRows): Tensor;
  // parts [q, k, v] -> rope(q), rope(k) at rows.positions; cache.k/v[layer, slot, position] = k, v; returns q [T, H·hd]
  linearRopeKv(op: LinearOp, rows: StepRows, rope: RopeKv): Tensor;
  // The LoRA shrink of the parts of `a` (each [S·R, K], the bank's A factors of modules sharing one input):
  // h[t, p·R + j] = Σ_k x̂[t, k] · A_p[s·R + j, k], s = adapters[t]; rows without an adapter are not written.
  // x̂ = RMSNorm(x)·norm.weight when norm is given. Rows run segment by segment (rows.tiles).
  loraShrinkSegments(x: Tensor, a: Packed, rows: StepRows, rank: number, norm?: { weight: Tensor; eps: number }): Tensor;

  // ---- Backward ops (training; src/train/). Every reduction runs in a fixed order: no atomics. ----

  // out: [T, 2] = (log softmax(logits[t])[targets[t]], entropy of softmax(logits[t]))   logits: [T, V]
  logProbs(logits: Tensor, targets: Tensor): Tensor;
  // dL/dlogits [T, V] for L = -Σ_t (logpWeight[t] · log p_t[targets[t]] + entropyWeight[t] · H(p_t)):
  //   = -logpWeight[t] · (onehot - p) + entropyWeight[t] · p · (log p + H)
  logitsBackward(logits: Tensor, targets: Tensor, logpWeight: Tensor, entropyWeight: Tensor): Tensor;
  // dx: [T, K] = dy · w                      dy: [T, N], w: [N, K] weight (the input gradient of matmul)
  matmulBackward(dy: Tensor, w: Tensor): Tensor;
  // Segmented sum of outer products, the weight gradient of a linear layer per segment:
  //   out[s·I + i, j] = scales[s] · Σ_{p in offsets[s] .. offsets[s+1]} u[order[p], i] · v[order[p], j]
  // u: [T, I], v: [T, J], order: i32 [P] (row indices), offsets: i32 [S + 1], scales: [S] (1 when absent).
  // Sums run in `order`: a segment's result does not depend on the other segments.
  outerProductSum(u: Tensor, v: Tensor, order: Tensor, offsets: Tensor, scales?: Tensor): Tensor;
  // dx: [T, D] of out = x / rms(x) * weight, given dy: [T, D]
  rmsNormBackward(dy: Tensor, x: Tensor, weight: Tensor, eps: number): Tensor;
  // dweight: [D] = Σ_t dy[t] * x[t] / rms(x[t])   (in token order)
  rmsNormWeightGrad(dy: Tensor, x: Tensor, eps: number): Tensor;
  // [dgate, dup]: [T, F] each, of out = silu(gate) * up
  swigluBackward(dy: Tensor, gate: Tensor, up: Tensor): [Tensor, Tensor];
  // Causal attention over packed sequences in token layout, and its backward. Token t belongs to the sequence
  // of tokens t - positions[t] .. seqEnds[t] - 1 (positions count from 0 within each sequence).
  // q: [T, heads·hd], k, v: [T, kvHeads·hd] -> out: [T, heads·hd]   (same maths as `attention`)
  attentionPacked(q: Tensor, k: Tensor, v: Tensor, positions: Tensor, heads: number, kvHeads: number): Tensor;
  // [dq, dk, dv] of attentionPacked given dOut and its output `out`.
  attentionBackward(dOut: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, positions: Tensor, seqEnds: Tensor, heads: number, kvHeads: number): [Tensor, Tensor, Tensor];
  // LoRA expand backward: dh[t, j] = scales[s] · Σ_n dy[t, n] · b[s·N + n, j], s = adapters[t]; 0 where s < 0.
  // dy: [T, N], b: [slots·N, rank] -> dh: [T, rank]
  loraExpandBackward(dy: Tensor, b: Tensor, adapters: Tensor, scales: Tensor, rank: number): Tensor;
  // LoRA shrink backward: dx[t, k] += Σ_j dh[t, j] · a[s·rank + j, k], s = adapters[t] >= 0.
  // dx: [T, K], dh: [T, rank], a: [slots·rank, K]
  loraShrinkBackwardInPlace(dx: Tensor, dh: Tensor, a: Tensor, adapters: Tensor): void;
  // out: [count] = Σ of x² over each run of `slotSize` elements of x (flat), for the slots first .. first + count - 1
  // (default: every slot).
  sumSquaresBySlot(x: Tensor, slotSize: number, first?: number, count?: number): Tensor;
  // AdamW on param, in place, with moments m and v (all f32, same size). Element i belongs to slot
  // s = floor(i / slotSize); slotParams: [S, 4] = (lr, gradScale, 1 / (1 - beta1^step), 1 / (1 - beta2^step)).
  //   g = grad · gradScale;  m = b1·m + (1-b1)·g;  v = b2·v + (1-b2)·g²
  //   param -= lr · (m·c1 / (sqrt(v·c2) + eps) + weightDecay · param)
  // A slot with lr = 0 is left untouched (its moments too).
  adamwInPlace(param: Tensor, grad: Tensor, m: Tensor, v: Tensor, slotSize: number, slotParams: Tensor, hyper: AdamWHyper): void;

  // ---- Evolution ops (src/evolution/device-operators.ts): on a bank tensor of slots of `slotSize` elements. ----

  // x[child·S + i] = x[parent·S + i] + sigma · sqrt(sums[0] / S) · z_i, z the hashed Gaussian of
  // src/evolution/operators.ts, sums[0] the parent's sum of squares; child may be parent (in place).
  mutateSlotInto(x: Tensor, slotSize: number, child: number, parent: number, sums: Tensor, o: SlotMutation): void;
  // x[outSlot·S + i] = weights[w + k]·x[slot1·S + i] + weights[w + R + k]·x[slot2·S + i], k = floor(i / divisor) % R.
  // weights: f32, 2R values from w (c1 then c2). The child's region must differ from the parents'.
  mixSlotsInPlace(x: Tensor, slotSize: number, outSlot: number, slot1: number, slot2: number, divisor: number, weights: Tensor, w: number, R: number): void;
  // For each Gram g: out[g.outOffset + i·n + j] = Σ_k v_i[k]·v_j[k], v_i[k] = g.x[bases[g.first + i] + k·g.stride],
  // k < g.length. bases: i32. One call for many Grams lets the device add up all their partial sums at once.
  gramsInto(out: Tensor, bases: Tensor, grams: readonly GramOfVectors[]): void;
  // x[bases[b + n + j] + k·stride] = Σ_i mix[m + i·keep + j] · x[bases[b + i] + k·stride] for j < keep, k < length.
  // bases: i32, mix: f32 (n·keep values from m); an output may interleave with the inputs but not share an element.
  combineInPlace(x: Tensor, bases: Tensor, b: number, mix: Tensor, m: number, n: number, keep: number, length: number, stride: number): void;
}

export interface GramOfVectors {
  x: Tensor; // f32, holding the vectors
  first: number; // the vectors' bases are bases[first .. first + n - 1]
  n: number;
  length: number;
  stride: number;
  outOffset: number; // where its [n, n] goes in out
}

export interface SlotMutation {
  seed: number; // u32
  stream: number; // u32: which factor of which module (operators.ts noiseStream)
  sigma: number;
  fraction: number; // share of entries moved; 1 = all
}

export interface AdamWHyper {
  beta1: number;
  beta2: number;
  eps: number;
  weightDecay: number;
}

export function numel(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

/** A tensor seen as a matrix: its first dimension, and everything else flattened. */
export const rowsOf = (t: Tensor) => t.shape[0] ?? 1;
export const colsOf = (t: Tensor) => numel(t.shape) / Math.max(rowsOf(t), 1);
export const describeShape = (shape: readonly number[]) => `[${shape.join(', ')}]`;

/** Bytes of one row of a tensor [rows, cols] of this dtype as stored (f16: two halves a word, rows padded to a word). */
export function rowBytes(cols: number, dtype: Tensor['dtype']): number {
  return dtype === 'f16' ? 4 * Math.ceil(cols / 2) : 4 * cols;
}

/** First row of each part when parts of `counts` rows follow one another, each starting at an aligned byte. */
export function alignedStarts(counts: readonly number[], bytesPerRow: number, alignment: number): { starts: number[]; rows: number } {
  const step = alignment / gcd(alignment, bytesPerRow); // rows per aligned stride
  const starts: number[] = [];
  let rows = 0;
  for (const count of counts) {
    starts.push(rows);
    rows = Math.ceil((rows + count) / step) * step;
  }
  return { starts, rows: Math.max(rows, 1) };
}

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));

/**
 * Uploads matrices [rows_i, ...rest] (or zeros where data is absent) as one Packed tensor: f32 or f16 weights
 * (rest = [cols]), f32 vectors (rest = []), or i32 sections (rest = []).
 */
export function uploadPacked(b: Backend, parts: readonly { rows: number; data?: Float32Array | Int32Array }[], rest: readonly number[], kind: WeightStorage | 'i32'): Packed {
  const cols = numel(rest);
  const { starts, rows } = alignedStarts(parts.map((p) => p.rows), rowBytes(cols, kind === 'f16' ? 'f16' : 'f32'), b.viewAlignment);
  const data = kind === 'i32' ? new Int32Array(rows * cols) : new Float32Array(rows * cols);
  parts.forEach((p, i) => p.data && data.set(p.data, starts[i]! * cols));
  const shape = [rows, ...rest];
  const whole = data instanceof Int32Array ? b.uploadI32(data, shape) : rest.length === 1 ? b.uploadWeight(data, [rows, cols], kind as WeightStorage) : b.upload(data, shape);
  return { whole, starts, parts: parts.map((p, i) => b.rowsView(whole, starts[i]!, p.rows)) };
}

/** One tensor as a Packed of one part (starts at row 0: no copy). */
export const single = (t: Tensor): Packed => ({ whole: t, parts: [t], starts: [0] });

/** Uploads a forward call's integers (StepRows) in one piece, grouping the rows with an adapter into segments. */
export function uploadStepRows(b: Backend, step: { tokens: Int32Array; slots: Int32Array; positions: Int32Array; adapters: Int32Array; logitRows: Int32Array }): StepRows {
  const T = step.tokens.length;
  const order = Int32Array.from({ length: T }, (_, t) => t)
    .filter((t) => step.adapters[t]! >= 0)
    .sort((i, j) => step.adapters[i]! - step.adapters[j]! || i - j);
  const tiles: number[] = [];
  for (let first = 0; first < order.length; ) {
    let end = first + 1;
    while (end < order.length && end - first < MAX_SEGMENT_ROWS && step.adapters[order[end]!] === step.adapters[order[first]!]) end++;
    tiles.push(first, end - first);
    first = end;
  }
  const sections = [step.tokens, step.slots, step.positions, step.adapters, step.logitRows, order, Int32Array.from(tiles)];
  const packed = uploadPacked(b, sections.map((data) => ({ rows: data.length, data })), [], 'i32');
  const at = Object.fromEntries(STEP_SECTIONS.map((name, i) => [name, packed.starts[i]!])) as StepRows['at'];
  const [tokens, slots, positions, adapters, logitRows] = packed.parts as [Tensor, Tensor, Tensor, Tensor, Tensor];
  let longestTile = 0;
  for (let i = 1; i < tiles.length; i += 2) longestTile = Math.max(longestTile, tiles[i]!);
  return { packed, tokens, slots, positions, adapters, logitRows, at, tileCount: tiles.length / 2, longestTile };
}

export function assert(condition: unknown, message: string): asserts condition {
  if (!condition) throw new Error(`populora: invariant violated: ${message}`);
}

/**
 * What the base model's dense products (the CPU backend's matmul, and matmulBackward: the input gradients of the
 * base weights and the LM head in training) sum in: f64 (exact for a product of two f32 values; the default, and the
 * bits of every run made before the choice existed), or f32 as llama.cpp does (each product and partial sum rounded
 * to f32, in the reference's order: 4 sums a SIMD vector where f64 fits 2; other bits). LoRA products, attention and
 * the outer products of weight gradients sum in f64 either way. Either is deterministic and the same at any thread
 * count and batch; the choice is part of a run's identity.
 */
export const DENSE_SUMS = ['f64', 'f32'] as const;
export type DenseSums = (typeof DENSE_SUMS)[number];
