// The compute interface the model is written against. Two implementations: `cpu.ts` (plain TypeScript, the
// reference and oracle) and `webgpu.ts` (WGSL kernels from kernels/ on Dawn). Every op is defined by the CPU
// reference; the WebGPU twin must agree within float tolerance and be batch-invariant (DESIGN.md rule 3):
// a row's result never depends on which other rows share the call.
//
// Conventions: matrices are row-major; a linear layer's weight is [out, in] as in Hugging Face, so
// matmul computes y = x · Wᵀ (+ bias). Shapes are given in comments as [rows, cols].

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
}

/** Longest context the attention kernel supports (its scores live in workgroup memory). */
export const MAX_CONTEXT = 4096;

export interface Backend {
  readonly name: BackendName;
  /** One line describing the device, for run headers and benchmark tables. */
  readonly deviceDescription: string;

  upload(data: Float32Array, shape: readonly number[]): Tensor;
  uploadI32(data: Int32Array, shape: readonly number[]): Tensor;
  /** A weight matrix [rows, cols]; with 'f16' storage the values are rounded to half precision. */
  uploadWeight(data: Float32Array, shape: readonly [number, number], storage: WeightStorage): Tensor;
  zeros(shape: readonly number[]): Tensor;
  /** Overwrite part of an f32 tensor (or f32-stored weight), starting at element `offset`. */
  write(t: Tensor, data: Float32Array, offset: number): void;
  readF32(t: Tensor): Promise<Float32Array>;
  readI32(t: Tensor): Promise<Int32Array>;
  free(t: Tensor): void;
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
}

export function numel(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

export function assert(condition: unknown, message: string): asserts condition {
  if (!condition) throw new Error(`populora: invariant violated: ${message}`);
}
