// The WebGPU backend: each op of backend.ts is one dispatch of a WGSL kernel from kernels/, recorded into one
// command encoder (webgpu-recorder.ts) and submitted when the host reads (the per-token loop: once per step) or
// calls submit() (the device-resident decode loop: each step, with a read every few steps).
//
// Memory: tensors live in pooled buffers (free() returns a buffer to the pool of its size class). Weights are
// [rows, cols] matrices stored as u32 words: f32 bits, or two halves a word (f16), each row padded to an even
// column count so a pair never straddles two rows.

import {
  assert, colsOf, describeShape, MAX_CONTEXT, MAX_SEGMENT_ROWS, numel, rowBytes, rowsOf, single,
  type Backend, type KernelTiming, type KvCache, type LinearOp, type Packed, type RopeKv, type SampleRow, type StepRows, type Tensor, type WeightStorage,
} from './backend.js';
import { f16BitsToF32, f32ToF16Bits } from './half.js';
import { packSampleRows, SAMPLE_ROW_WORDS } from './sampling.js';
import { KernelLibrary, openDevice, releaseInstance } from './webgpu-device.js';
import { BackwardKernels, type GpuTensor } from './webgpu-backward.js';
import { EvolutionKernels } from './webgpu-evolution.js';
import { Recorder, type Binding, type KernelVariant } from './webgpu-recorder.js';
import { isBlocked, RowBlockOps, uploadBlocked } from './webgpu-row-blocks.js';
import { wordOffsets } from './kernel-params.js';
import { MAX_LORA_TM, MAX_SERIAL_TM, rowKernelLayout, SERIAL_THREADS, serialTiling } from './webgpu-serial.js';

const MAX_HEAD_DIM = 256; // attention.wgsl keeps the query in workgroup memory
const MAX_TM = 8; // rows per matmul workgroup when T > 1 (matmul.wgsl's MAX_TM)
const STORAGE = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
const NONE = 0xffffffff;
const [STORE, RESIDUAL, SWIGLU, ROPE_KV] = [0, 1, 2, 3]; // linear.wgsl's epilogues
// linear.wgsl's Params: the block is written in place, word offsets from the WGSL (kernel-params.ts).
const LINEAR_PARAMS = [
  'colEnd', 'wStart', 'biasStart', 'hAt', 'bStart', 'T', 'K', 'N', 'hasBias', 'eps', 'rank', 'slots', 'hCols', 'rowsAt', 'tilesAt',
  'adaptersAt', 'slotsAt', 'positionsAt', 'heads', 'kvHeads', 'headDim', 'tableRows', 'cacheSlots', 'maxLen', 'layerBase',
] as const;

/**
 * The fused kernels' thread layout: 'gpu' (32 K-lanes per output, coalesced loads, a tree) or 'cpu' (a thread
 * per tile of outputs, for software adapters: see kernels/linear.wgsl). The default follows the adapter.
 */
export type ThreadLayout = 'gpu' | 'cpu';

/** A view: rows of another tensor, bound at a byte offset into its buffer. */
interface GpuView extends GpuTensor {
  readonly offset: number;
  readonly size: number;
}
const isView = (t: Tensor): t is GpuView => (t as Partial<GpuView>).offset !== undefined;

/** Pool size classes: powers of two up to 16 MiB (at most 2x waste), then whole MiB. */
function sizeClass(bytes: number): number {
  if (bytes <= 16 << 20) return Math.max(256, 2 ** Math.ceil(Math.log2(bytes)));
  return Math.ceil(bytes / (1 << 20)) * (1 << 20);
}


export interface WebGpuOptions {
  validate?: boolean;
  layout?: ThreadLayout;
  maxBindingBytes?: number; // a binding limit below the device's (tests: row blocks on small weights)
  serialUnits?: number; // the CPU layout's units a thread (1, 2, 4, 8); by default chosen per dispatch (tests fix it)
}

/** Opens the WebGPU device; throws when there is no adapter. POPULORA_WEBGPU_VALIDATE=1 turns on validation. */
export async function createWebGpuBackend(options: WebGpuOptions = {}): Promise<Backend> {
  const validate = options.validate ?? process.env.POPULORA_WEBGPU_VALIDATE === '1';
  const { device, description, software } = await openDevice(validate);
  try {
    return new WebGpuBackend(device, description, software, await KernelLibrary.load(device), validate, options.layout ?? (software ? 'cpu' : 'gpu'), options.maxBindingBytes, options.serialUnits);
  } catch (error) {
    device.destroy();
    releaseInstance();
    throw error;
  }
}

class WebGpuBackend implements Backend {
  readonly name = 'webgpu' as const;
  private readonly recorder: Recorder;
  private readonly pool = new Map<number, GPUBuffer[]>();
  private readonly freed = new WeakSet<Tensor>(); // a second free of the same tensor is ignored
  private readonly dummy: GPUBuffer; // bound where an optional input (bias, mask) is absent
  private readonly dummyOut: [GPUBuffer, GPUBuffer]; // where writable ones are: writable bindings may not alias
  readonly maxBindingBytes: number;
  readonly viewAlignment: number;
  private destroyed = false;
  private readonly LP: Readonly<Record<(typeof LINEAR_PARAMS)[number], number>>; // linear.wgsl's field offsets
  private readonly linearParams: Uint32Array; // written in place by each fused dispatch
  private readonly linearFloats: Float32Array;
  private readonly linearVariants = new Map<number, KernelVariant>(); // by fusedLinear's variant number
  private readonly backward: BackwardKernels; // the training ops, in webgpu-backward.ts
  private readonly evolution: EvolutionKernels; // weight-space evolution, in webgpu-evolution.ts
  private readonly rowBlocks: RowBlockOps; // weights over the binding limit, in webgpu-row-blocks.ts

  constructor(
    private readonly device: GPUDevice,
    readonly deviceDescription: string,
    readonly softwareAdapter: boolean,
    kernels: KernelLibrary,
    validate: boolean,
    private readonly layout: ThreadLayout,
    bindingLimitBytes = Infinity,
    private readonly serialUnits?: number,
  ) {
    assert(serialUnits === undefined || [1, 2, 4, 8].includes(serialUnits), `serialUnits ${serialUnits} is not 1, 2, 4 or 8`);
    this.recorder = new Recorder(device, kernels, validate);
    const linear = kernels.signature('linear').params;
    this.LP = wordOffsets(linear, LINEAR_PARAMS);
    this.linearParams = new Uint32Array(linear.words);
    this.linearFloats = new Float32Array(this.linearParams.buffer);
    this.maxBindingBytes = Math.min(device.limits.maxStorageBufferBindingSize, bindingLimitBytes);
    this.viewAlignment = device.limits.minStorageBufferOffsetAlignment;
    this.dummy = device.createBuffer({ label: 'absent input', size: 16, usage: STORAGE });
    this.dummyOut = [0, 1].map(() => device.createBuffer({ label: 'absent output', size: 16, usage: STORAGE })) as [GPUBuffer, GPUBuffer];
    const context = {
      recorder: this.recorder,
      dummy: this.dummy,
      output: (shape: readonly number[], dtype?: 'f32' | 'i32') => this.output(shape, dtype),
      uploadI32: (data: Int32Array, shape: readonly number[]) => this.uploadI32(data, shape),
      free: (t: Tensor) => this.free(t),
      f32: (t: Tensor, what: string) => this.f32(t, what),
      i32: (t: Tensor, count: number, what: string) => this.i32(t, count, what),
      weight: (t: Tensor, what: string) => this.weight(t, what),
      layout,
      serialUnits,
    };
    this.backward = new BackwardKernels(context);
    this.evolution = new EvolutionKernels(context);
    this.rowBlocks = new RowBlockOps(context);
  }

  // ---- memory ----

  /** A buffer of at least `bytes` from the pool, or a new one; `reused` buffers hold stale data. */
  private buffer(bytes: number, limit: number): { buffer: GPUBuffer; reused: boolean } {
    this.recorder.checkUsable();
    let size = sizeClass(Math.max(bytes, 4));
    if (size > limit) size = Math.ceil(bytes / 4) * 4; // never round a buffer past what the device can bind
    const pooled = this.pool.get(size)?.pop();
    if (pooled) return { buffer: pooled, reused: true };
    return { buffer: this.device.createBuffer({ size, usage: STORAGE }), reused: false };
  }

  private checkBindable(bytes: number, what: string): void {
    if (bytes > this.maxBindingBytes) {
      throw new Error(`populora: ${what} needs ${bytes} bytes, over this device's maxStorageBufferBindingSize of ${this.maxBindingBytes} bytes`);
    }
  }

  private allocate(shape: readonly number[], dtype: Tensor['dtype'], bytes = numel(shape) * 4): { tensor: GpuTensor; reused: boolean } {
    this.checkBindable(bytes, `a tensor ${describeShape(shape)}`);
    const { buffer, reused } = this.buffer(bytes, this.maxBindingBytes);
    return { tensor: { shape: [...shape], dtype, buffer, bytes }, reused };
  }

  /** A new tensor holding `data`. A pooled buffer may still be read by recorded work, so it is filled in order. */
  private fill(data: ArrayBufferView, shape: readonly number[], dtype: Tensor['dtype']): GpuTensor {
    const { tensor, reused } = this.allocate(shape, dtype, data.byteLength);
    if (reused) this.recorder.upload(tensor.buffer, 0, data);
    else this.device.queue.writeBuffer(tensor.buffer, 0, data.buffer, data.byteOffset, data.byteLength);
    return tensor;
  }

  private output(shape: readonly number[], dtype: 'f32' | 'i32' = 'f32'): GpuTensor {
    return this.allocate(shape, dtype).tensor;
  }

  upload(data: Float32Array, shape: readonly number[]): Tensor {
    assert(data.length === numel(shape), `upload: ${data.length} values for shape ${describeShape(shape)}`);
    return this.fill(data, shape, 'f32');
  }

  uploadI32(data: Int32Array, shape: readonly number[]): Tensor {
    assert(data.length === numel(shape), `uploadI32: ${data.length} values for shape ${describeShape(shape)}`);
    return this.fill(data, shape, 'i32');
  }

  uploadWeight(data: Float32Array, shape: readonly [number, number], storage: WeightStorage): Tensor {
    const [rows, cols] = shape;
    const wordsPerRow = storage === 'f16' ? Math.ceil(cols / 2) : cols;
    this.checkBindable(wordsPerRow * 4, `a row of the ${storage} weight ${describeShape(shape)}`); // a larger matrix is stored in row blocks
    assert(data.length === rows * cols, `uploadWeight: ${data.length} values for shape ${describeShape(shape)}`);
    if (rows * wordsPerRow * 4 > this.maxBindingBytes) return uploadBlocked(data, shape, storage, this.maxBindingBytes, (d, s) => this.uploadWeight(d, s, storage) as GpuTensor);
    if (storage === 'f32') return this.fill(data, shape, 'f32');
    const words = new Uint32Array(rows * wordsPerRow); // an odd row's pad half stays 0
    for (let r = 0; r < rows; r++) {
      for (let c = 0; c < cols; c++) words[r * wordsPerRow + (c >> 1)]! |= f32ToF16Bits(data[r * cols + c]!) << (16 * (c & 1));
    }
    return this.fill(words, shape, 'f16');
  }

  zeros(shape: readonly number[]): Tensor {
    const { tensor, reused } = this.allocate(shape, 'f32');
    if (reused) this.recorder.clear(tensor.buffer, tensor.bytes); // new buffers start zeroed
    return tensor;
  }

  write(t: Tensor, data: Float32Array, offset: number): void {
    assert(t.dtype === 'f32', `write needs an f32 tensor, got ${t.dtype}`);
    assert(offset >= 0 && offset + data.length <= numel(t.shape), `write of ${data.length} values at ${offset} overruns ${describeShape(t.shape)}`);
    this.recorder.upload((t as GpuTensor).buffer, (isView(t) ? t.offset : 0) + offset * 4, data);
  }

  rowsView(t: Tensor, first: number, rows: number): Tensor {
    if (isBlocked(t)) assert(false, `rowsView: the weight ${describeShape(t.shape)} is stored in row blocks`);
    const tensor = t as GpuTensor;
    const rest = t.shape.slice(1);
    const bytesPerRow = rowBytes(numel(rest), t.dtype);
    const offset = (isView(t) ? t.offset : 0) + first * bytesPerRow;
    assert(first >= 0 && first + rows <= rowsOf(t), `rowsView: rows ${first}..${first + rows} outside ${describeShape(t.shape)}`);
    assert(offset % this.viewAlignment === 0, `rowsView: a view at byte ${offset} is not aligned to ${this.viewAlignment} bytes`);
    const bytes = rows * bytesPerRow;
    const view: GpuView = { shape: [rows, ...rest], dtype: t.dtype, buffer: tensor.buffer, bytes, offset, size: Math.max(bytes, 4) };
    return view;
  }

  dispatches(): number {
    return this.recorder.dispatchCount;
  }

  async timeKernels(work: () => Promise<void>): Promise<KernelTiming[]> {
    this.recorder.startProfile();
    try {
      await work();
    } catch (error) {
      await this.recorder.takeProfile().catch(() => []); // profiling stops; the work's error is the one to report
      throw error;
    }
    return this.recorder.takeProfile();
  }

  async readF32(t: Tensor): Promise<Float32Array> {
    if (isBlocked(t)) {
      const out = new Float32Array(numel(t.shape));
      for (const [i, block] of t.blocks.entries()) out.set(await this.readF32(block), t.firsts[i]! * colsOf(t));
      return out;
    }
    const tensor = t as GpuTensor;
    assert(t.dtype === 'f32' || t.dtype === 'f16', `readF32 needs a float tensor, got ${t.dtype}`);
    const bytes = await this.recorder.read(tensor.buffer, tensor.bytes, isView(t) ? t.offset : 0);
    if (t.dtype === 'f32') return new Float32Array(bytes);
    const [rows, cols] = [rowsOf(t), colsOf(t)]; // f16 weight: unpack the half pairs, dropping row padding
    const halves = new Uint16Array(bytes);
    const rowHalves = 2 * Math.ceil(cols / 2);
    const out = new Float32Array(rows * cols);
    for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[r * cols + c] = f16BitsToF32(halves[r * rowHalves + c]!);
    return out;
  }

  async readI32(t: Tensor): Promise<Int32Array> {
    assert(t.dtype === 'i32' || t.dtype === 'u32', `readI32 needs an integer tensor, got ${t.dtype}`);
    const tensor = t as GpuTensor;
    return new Int32Array(await this.recorder.read(tensor.buffer, tensor.bytes, isView(t) ? t.offset : 0));
  }

  free(t: Tensor): void {
    if (this.destroyed || this.freed.has(t) || isView(t)) return; // a view's buffer is its whole tensor's
    this.freed.add(t);
    if (isBlocked(t)) return t.blocks.forEach((block) => this.free(block));
    const { buffer } = t as GpuTensor;
    const list = this.pool.get(buffer.size) ?? [];
    list.push(buffer); // reusing it in a later dispatch of the same encoder is safe: passes run in order
    this.pool.set(buffer.size, list);
  }

  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.recorder.destroy();
    this.pool.clear();
    this.device.destroy(); // frees every buffer; pending reads reject
    releaseInstance();
  }

  // ---- checks ----

  // (The messages are built only on failure: these run for every binding of every dispatch.)
  private f32(t: Tensor, what: string): GpuTensor {
    if (t.dtype !== 'f32') assert(false, `${what} must be an f32 tensor, got ${t.dtype}`);
    return t as GpuTensor;
  }

  private i32(t: Tensor, count: number, what: string): GpuTensor {
    if (t.dtype !== 'i32' && t.dtype !== 'u32') assert(false, `${what} must be an i32 tensor, got ${t.dtype}`);
    if (numel(t.shape) !== count) assert(false, `${what} has ${numel(t.shape)} entries, expected ${count}`);
    return t as GpuTensor;
  }

  /** A weight [rows, cols] stored as f32 or f16 words, and the kernels' variant constant for it. */
  private weight(t: Tensor, what: string): { tensor: GpuTensor; WEIGHT_F16: number } {
    if (t.dtype !== 'f32' && t.dtype !== 'f16') assert(false, `${what} must be an f32 or f16 weight, got ${t.dtype}`);
    if (isBlocked(t)) {
      throw new RangeError(`${what}: the weight ${describeShape(t.shape)} needs ${t.bytes} bytes, over this device's storage binding limit of ${this.maxBindingBytes} bytes; only a vocabulary matrix (the embedding, the LM head) may be that large here. Use --weights f16 if it then fits, a device with a larger limit, or the CPU backend`);
    }
    return { tensor: t as GpuTensor, WEIGHT_F16: t.dtype === 'f16' ? 1 : 0 };
  }

  // ---- ops (shapes and semantics in backend.ts) ----

  createKvCache(dims: Omit<KvCache, 'k' | 'v'>): KvCache {
    const shape = [dims.layers, dims.slots, dims.maxLen, dims.kvHeads, dims.headDim];
    const layerBytes = dims.slots * dims.maxLen * dims.kvHeads * dims.headDim * 4;
    const bytes = layerBytes * dims.layers;
    // Kernels bind one layer at a time when the layer's offset is aligned, so the cache may exceed the
    // binding limit; otherwise the whole cache is bound.
    const perLayer = layerBytes % this.device.limits.minStorageBufferOffsetAlignment === 0;
    this.checkBindable(perLayer ? layerBytes : bytes, `the KV cache ${describeShape(shape)}${perLayer ? ' (one layer)' : ''}`);
    const maxBuffer = this.device.limits.maxBufferSize;
    if (bytes > maxBuffer) throw new Error(`populora: the KV cache ${describeShape(shape)} needs ${bytes} bytes, over this device's maxBufferSize of ${maxBuffer} bytes`);
    const tensor = (): GpuTensor => {
      const { buffer, reused } = this.buffer(bytes, perLayer ? maxBuffer : this.maxBindingBytes);
      if (reused) this.recorder.clear(buffer, bytes);
      return { shape, dtype: 'f32', buffer, bytes };
    };
    return { ...dims, k: tensor(), v: tensor() };
  }

  /** One layer of a KV cache tensor: its binding and the element where the layer starts within it. */
  private cacheLayer(cache: KvCache, t: Tensor, layer: number): { binding: Binding; layerBase: number } {
    assert(Number.isInteger(layer) && layer >= 0 && layer < cache.layers, `layer ${layer} outside the KV cache's ${cache.layers} layers`);
    const layerValues = cache.slots * cache.maxLen * cache.kvHeads * cache.headDim;
    const { buffer } = t as GpuTensor;
    if ((layerValues * 4) % this.device.limits.minStorageBufferOffsetAlignment === 0) {
      return { binding: { buffer, offset: layer * layerValues * 4, size: layerValues * 4 }, layerBase: 0 };
    }
    return { binding: { buffer }, layerBase: layer * layerValues };
  }

  embedding(table: Tensor, tokens: Tensor): Tensor {
    const [total, D] = table.shape as [number, number];
    const M = numel(tokens.shape);
    const ids = this.i32(tokens, M, 'embedding: tokens');
    const out = this.output([M, D]);
    const blocks = isBlocked(table) ? table.blocks.map((block, i) => ({ block, first: table.firsts[i]! })) : [{ block: table, first: 0 }];
    for (const { block, first } of blocks) {
      const { tensor: w, WEIGHT_F16 } = this.weight(block, 'embedding: the table');
      const fields = { M, D, V: rowsOf(w), first, total };
      this.recorder.dispatch('embedding', { WEIGHT_F16 }, fields, [ids, w, out], Math.ceil((M * D) / 256));
    }
    return out;
  }

  gatherRows(x: Tensor, rows: Tensor): Tensor {
    const [T, D, M] = [rowsOf(x), colsOf(x), numel(rows.shape)];
    const out = this.output([M, D]);
    const fields = { M, D, T };
    this.recorder.dispatch('gather_rows', {}, fields, [this.f32(x, 'gatherRows: x'), this.i32(rows, M, 'gatherRows: rows'), out], Math.ceil((M * D) / 256));
    return out;
  }

  rmsNorm(x: Tensor, weight: Tensor, eps: number): Tensor {
    const [T, D] = [rowsOf(x), colsOf(x)];
    assert(numel(weight.shape) === D, `rmsNorm: the weight has ${numel(weight.shape)} values for rows of ${D}`);
    const out = this.output([T, D]);
    const fields = { T, D, eps };
    const { constants, groups } = rowKernelLayout(this.layout === 'cpu', T);
    this.recorder.dispatch('rmsnorm', constants, fields, [this.f32(x, 'rmsNorm: x'), this.f32(weight, 'rmsNorm: weight'), out], groups);
    return out;
  }

  matmul(x: Tensor, w: Tensor, bias?: Tensor): Tensor {
    if (isBlocked(w) && !bias) return this.rowBlocks.byBlock(w, rowsOf(x), (block) => this.matmul(x, block) as GpuTensor);
    const { tensor: weight, WEIGHT_F16 } = this.weight(w, 'matmul: w');
    const [T, K] = [rowsOf(x), colsOf(x)];
    const [N, Kw] = weight.shape as [number, number];
    assert(K === Kw, `matmul: x has ${K} columns but the weight has ${Kw}`);
    if (bias) assert(numel(bias.shape) === N, `matmul: the bias has ${numel(bias.shape)} values for ${N} outputs`);
    if (this.layout === 'cpu') { // the fused linear's CPU layout: the sums the inference forward makes
      const out = this.output([T, N]);
      this.fusedLinear({ x, w: single(w), bias: bias && single(bias) }, undefined, STORE, out, T);
      return out;
    }
    const TM = T === 1 ? 1 : MAX_TM; // decode gets a one-row variant; the per-element order is the same
    const out = this.output([T, N]);
    const fields = { T, K, N, hasBias: bias ? 1 : 0 };
    const bindings = [this.f32(x, 'matmul: x'), weight, bias ? this.f32(bias, 'matmul: bias') : { buffer: this.dummy }, out];
    this.recorder.dispatch('matmul', { WEIGHT_F16, TM }, fields, bindings, [Math.ceil(N / 8), Math.ceil(T / TM)]);
    return out;
  }

  addInPlace(acc: Tensor, x: Tensor): void {
    const n = numel(acc.shape);
    assert(n === numel(x.shape), `addInPlace: sizes ${n} and ${numel(x.shape)} differ`);
    this.recorder.dispatch('add', {}, { n }, [this.f32(acc, 'addInPlace: acc'), this.f32(x, 'addInPlace: x')], Math.ceil(n / 256));
  }

  swiglu(gate: Tensor, up: Tensor): Tensor {
    const n = numel(gate.shape);
    assert(n === numel(up.shape), `swiglu: sizes ${n} and ${numel(up.shape)} differ`);
    const out = this.output(gate.shape);
    this.recorder.dispatch('swiglu', {}, { n }, [this.f32(gate, 'swiglu: gate'), this.f32(up, 'swiglu: up'), out], Math.ceil(n / 256));
    return out;
  }

  ropeInPlace(x: Tensor, positions: Tensor, table: Tensor, heads: number, headDim: number): void {
    const T = numel(positions.shape);
    assert(numel(x.shape) === T * heads * headDim, `rope: x ${describeShape(x.shape)} is not [${T}, ${heads} * ${headDim}]`);
    assert(colsOf(table) === headDim && headDim % 2 === 0, `rope: the table ${describeShape(table.shape)} does not match headDim ${headDim}`);
    const fields = { T, heads, headDim, maxLen: rowsOf(table) };
    const bindings = [this.f32(x, 'rope: x'), this.i32(positions, T, 'rope: positions'), this.f32(table, 'rope: table')];
    this.recorder.dispatch('rope', {}, fields, bindings, Math.ceil((T * heads * headDim) / 2 / 256));
  }

  kvWrite(cache: KvCache, layer: number, k: Tensor, v: Tensor, slots: Tensor, positions: Tensor): void {
    const T = numel(slots.shape);
    const width = cache.kvHeads * cache.headDim;
    assert(numel(k.shape) === T * width && numel(v.shape) === T * width, `kvWrite: k and v must be [${T}, ${width}]`);
    const kLayer = this.cacheLayer(cache, cache.k, layer);
    const vLayer = this.cacheLayer(cache, cache.v, layer);
    const fields = { T, width, slots: cache.slots, maxLen: cache.maxLen, layerBase: kLayer.layerBase };
    const ids = [this.i32(slots, T, 'kvWrite: slots'), this.i32(positions, T, 'kvWrite: positions')];
    this.recorder.dispatch('kv_write', {}, fields, [this.f32(k, 'kvWrite: k'), this.f32(v, 'kvWrite: v'), ...ids, kLayer.binding, vLayer.binding], Math.ceil((T * width) / 256));
  }

  attention(q: Tensor, cache: KvCache, layer: number, slots: Tensor, positions: Tensor, heads: number): Tensor {
    const { headDim, kvHeads, maxLen } = cache;
    const T = numel(slots.shape);
    assert(maxLen <= MAX_CONTEXT, `attention supports contexts up to ${MAX_CONTEXT}, the cache holds ${maxLen}`);
    assert(headDim <= MAX_HEAD_DIM, `attention supports head sizes up to ${MAX_HEAD_DIM}, got ${headDim}`);
    assert(heads % kvHeads === 0, `attention: ${heads} heads do not split into ${kvHeads} kv heads`);
    assert(numel(q.shape) === T * heads * headDim, `attention: q ${describeShape(q.shape)} is not [${T}, ${heads} * ${headDim}]`);
    const kLayer = this.cacheLayer(cache, cache.k, layer);
    const vLayer = this.cacheLayer(cache, cache.v, layer);
    const out = this.output([T, heads * headDim]);
    const fields = { T, heads, kvHeads, headDim, slots: cache.slots, maxLen, layerBase: kLayer.layerBase, scale: 1 / Math.sqrt(headDim) };
    const ids = [this.i32(slots, T, 'attention: slots'), this.i32(positions, T, 'attention: positions')];
    const bindings = [this.f32(q, 'attention: q'), ...ids, kLayer.binding, vLayer.binding, out];
    const { constants, groups } = rowKernelLayout(this.layout === 'cpu', T * heads); // a (token, head) a row
    this.recorder.dispatch('attention', constants, fields, bindings, groups);
    return out;
  }

  loraShrink(x: Tensor, a: Tensor, adapters: Tensor, rank: number): Tensor {
    const { tensor: bank, WEIGHT_F16 } = this.weight(a, 'loraShrink: the A bank');
    const [T, K] = [rowsOf(x), colsOf(x)];
    assert(colsOf(bank) === K && rowsOf(bank) % rank === 0, `loraShrink: the A bank ${describeShape(bank.shape)} is not [slots * ${rank}, ${K}]`);
    const out = this.output([T, rank]);
    const fields = { T, K, rank, slots: rowsOf(bank) / rank };
    const bindings = [this.f32(x, 'loraShrink: x'), bank, this.i32(adapters, T, 'loraShrink: adapters'), out];
    if (this.layout === 'gpu') {
      this.recorder.dispatch('lora_shrink', { WEIGHT_F16 }, fields, bindings, T);
      return out;
    }
    // The CPU layout: a thread a rank column, over tiles of up to 8 rows that share each load of A.
    const TM = Math.min(MAX_LORA_TM, 2 ** Math.ceil(Math.log2(Math.max(T, 1))));
    const threads = Math.min(SERIAL_THREADS, 8 * Math.ceil(rank / 8));
    this.recorder.dispatch('lora_shrink', { WEIGHT_F16, SERIAL: 1, TM, SERIAL_THREADS: threads }, fields, bindings, [Math.ceil(rank / threads), Math.ceil(T / TM)]);
    return out;
  }

  loraExpandInPlace(y: Tensor, h: Tensor, b: Tensor, adapters: Tensor, scales: Tensor): void {
    const { tensor: bank, WEIGHT_F16 } = this.weight(b, 'loraExpand: the B bank');
    const [T, N] = [rowsOf(y), colsOf(y)];
    const rank = numel(h.shape) / T;
    assert(Number.isInteger(rank) && colsOf(bank) === rank && rowsOf(bank) % N === 0, `loraExpand: the B bank ${describeShape(bank.shape)} is not [slots * ${N}, ${rank}]`);
    const fields = { T, N, rank, slots: Math.min(rowsOf(bank) / N, numel(scales.shape)) };
    const bindings = [this.f32(h, 'loraExpand: h'), bank, this.i32(adapters, T, 'loraExpand: adapters'), this.f32(scales, 'loraExpand: scales'), this.f32(y, 'loraExpand: y')];
    if (this.layout === 'gpu') {
      this.recorder.dispatch('lora_expand', { WEIGHT_F16 }, fields, bindings, Math.ceil((T * N) / 256));
      return;
    }
    // The CPU layout: a register tile of columns × rows, the rows of one adapter sharing each load of B.
    const TM = T > 4 ? MAX_LORA_TM : 4;
    const tiling = serialTiling(N, false, Math.ceil(T / TM), this.serialUnits);
    this.recorder.dispatch('lora_expand', { WEIGHT_F16, SERIAL: 1, TM, ...tiling }, fields, bindings, [Math.ceil(N / (tiling.SERIAL_THREADS * tiling.UNITS)), Math.ceil(T / TM)]);
  }

  sample(logits: Tensor, rows: readonly SampleRow[], mask?: Tensor): Tensor {
    const M = rowsOf(logits);
    assert(rows.length === M, `sample: ${rows.length} parameter rows for ${M} logit rows`);
    const params = this.uploadSampleRows(rows);
    const out = this.output([M], 'i32');
    this.dispatchSample(logits, params, mask, out, 0, 0);
    this.free(params); // safe: a later reuse is ordered after this dispatch
    return out;
  }

  uploadSampleRows(rows: readonly SampleRow[]): Tensor {
    return this.fill(packSampleRows(rows), [rows.length, SAMPLE_ROW_WORDS], 'u32');
  }

  sampleStep(logits: Tensor, params: Tensor, step: number, history: Tensor, next: StepRows, tables?: Tensor): void {
    const [M, V] = [rowsOf(logits), colsOf(logits)];
    if (numel(next.tokens.shape) !== M || (step + 1) * M > numel(history.shape)) {
      assert(false, `sampleStep: step ${step} of ${M} rows overruns the history ${describeShape(history.shape)} or the next step's ${numel(next.tokens.shape)} tokens`);
    }
    const mask = tables ? this.automatonMask(tables, params, step, next, M, V) : undefined;
    this.dispatchSample(logits, params, mask, this.i32(history, numel(history.shape), 'sampleStep: history'), step * M, step, next);
    if (mask) this.free(mask); // safe: a later reuse is ordered after this dispatch
  }

  /** One dispatch of kernels/token_mask.wgsl: the rows' masks [M, ceil(V / 32)] from their automata, states advanced. */
  private automatonMask(tables: Tensor, params: Tensor, step: number, next: StepRows, M: number, V: number): GpuTensor {
    const words = Math.ceil(V / 32);
    const mask = this.output([M, words], 'i32');
    const bindings = [
      this.i32(tables, numel(tables.shape), 'sampleStep: automaton tables'),
      this.i32(params, M * SAMPLE_ROW_WORDS, 'sampleStep: row parameters'),
      this.i32(next.packed.whole, numel(next.packed.whole.shape), 'sampleStep: next step rows'),
      mask,
    ];
    this.recorder.dispatch('token_mask', {}, { M, V, words, step, tokensAt: next.at.tokens }, bindings, M);
    return mask;
  }

  submit(): void {
    this.recorder.flush();
  }

  /** One dispatch of kernels/sample.wgsl: tokens to out[outAt + m]; with `next`, into a decode loop's next step. */
  private dispatchSample(logits: Tensor, params: Tensor, mask: Tensor | undefined, out: GpuTensor, outAt: number, step: number, next?: StepRows): void {
    const [M, V] = [rowsOf(logits), colsOf(logits)];
    const rowParams = this.i32(params, M * SAMPLE_ROW_WORDS, 'sample: row parameters');
    const maskBinding = mask ? this.i32(mask, M * Math.ceil(V / 32), 'sample: mask') : { buffer: this.dummy };
    const nextBinding = next ? this.i32(next.packed.whole, numel(next.packed.whole.shape), 'sampleStep: next step rows') : { buffer: this.dummyOut[0] };
    const fields = { M, V, hasMask: mask ? 1 : 0, step, outAt, advance: next ? 1 : 0, tokensAt: next?.at.tokens ?? 0, positionsAt: next?.at.positions ?? 0 };
    this.recorder.dispatch('sample', {}, fields, [this.f32(logits, 'sample: logits'), rowParams, maskBinding, out, nextBinding], M);
  }

  // ---- fused ops (kernels/linear.wgsl) ----

  linear(op: LinearOp, rows: StepRows): Tensor {
    const T = op.gather ? numel(rows.logitRows.shape) : rowsOf(op.x);
    const w = op.w.whole;
    if (isBlocked(w) && op.w.parts.length === 1 && !op.bias && !op.lora) return this.rowBlocks.byBlock(w, T, (block) => this.linear({ ...op, w: single(block) }, rows) as GpuTensor);
    const out = this.output([T, this.width(op.w)]);
    this.fusedLinear(op, rows, STORE, out, T);
    return out;
  }

  linearResidual(op: LinearOp, rows: StepRows, y: Tensor): void {
    const [T, N] = [rowsOf(op.x), this.width(op.w)];
    if (rowsOf(y) !== T || colsOf(y) !== N) assert(false, `linearResidual: y ${describeShape(y.shape)} is not [${T}, ${N}]`);
    this.fusedLinear(op, rows, RESIDUAL, this.f32(y, 'linearResidual: y'), T);
  }

  linearSwiglu(op: LinearOp, rows: StepRows): Tensor {
    const [gate, up] = op.w.parts;
    assert(op.w.parts.length === 2 && rowsOf(gate!) === rowsOf(up!), 'linearSwiglu takes two parts of one width: gate and up');
    const out = this.output([rowsOf(op.x), rowsOf(gate!)]);
    this.fusedLinear(op, rows, SWIGLU, out, rowsOf(op.x));
    return out;
  }

  linearRopeKv(op: LinearOp, rows: StepRows, rope: RopeKv): Tensor {
    const { cache, heads, table } = rope;
    const [q, k, v] = op.w.parts;
    const kvWidth = cache.kvHeads * cache.headDim;
    if (op.w.parts.length !== 3 || rowsOf(q!) !== heads * cache.headDim || rowsOf(k!) !== kvWidth || rowsOf(v!) !== kvWidth) {
      assert(false, `linearRopeKv: parts of ${op.w.parts.map(rowsOf).join(', ')} columns are not q, k, v of ${heads} and ${cache.kvHeads} heads of ${cache.headDim}`);
    }
    if (colsOf(table) !== cache.headDim || cache.headDim % 2 !== 0) assert(false, `linearRopeKv: the table ${describeShape(table.shape)} does not match headDim ${cache.headDim}`);
    const out = this.output([rowsOf(op.x), rowsOf(q!)]);
    this.fusedLinear(op, rows, ROPE_KV, out, rowsOf(op.x), rope);
    return out;
  }

  loraShrinkSegments(x: Tensor, a: Packed, rows: StepRows, rank: number, norm?: { weight: Tensor; eps: number }): Tensor {
    const T = rowsOf(x);
    const h = this.output([T, a.parts.length * rank]);
    this.fusedLinear({ x, w: a, norm }, rows, STORE, h, T, undefined, rank);
    return h;
  }

  /** Output columns of a packed weight: its parts' rows. */
  private width(w: Packed): number {
    let N = 0;
    for (const part of w.parts) N += rowsOf(part);
    return N;
  }

  /**
   * One dispatch of kernels/linear.wgsl. `segmentRank`: the LoRA shrink (SEGMENTS), whose parts are the bank's
   * A factors [S·R, K] and whose output columns are R per part. The parameter block is written in place and the
   * pipeline found by a number: a decode step records a few dozen of these, and the host's time per dispatch counts.
   */
  private fusedLinear(op: LinearOp, rows: StepRows | undefined, epilogue: number, out: GpuTensor, T: number, rope?: RopeKv, segmentRank?: number): void {
    const { tensor: w, WEIGHT_F16 } = this.weight(op.w.whole, 'linear: w');
    const K = colsOf(op.x);
    const parts = op.w.parts;
    const segments = segmentRank !== undefined;
    const lora = op.lora;
    const capacity = lora ? numel(lora.scales.shape) : 0;
    const [p, LP] = [this.linearParams, this.LP];
    assert(parts.length >= 1 && parts.length <= 3, 'linear: a packed weight of 1 to 3 parts');
    let N = 0;
    for (let i = 0; i < 4; i++) {
      const part = parts[i];
      if (part) {
        const width = segments ? segmentRank : rowsOf(part);
        if (colsOf(part) !== K) assert(false, `linear: x has ${K} columns but a part of the weight ${describeShape(part.shape)}`);
        if (op.bias && numel(op.bias.parts[i]!.shape) !== width) assert(false, `linear: bias ${i} has ${numel(op.bias.parts[i]!.shape)} values for ${width} outputs`);
        const index = lora?.of[i] ?? -1;
        if (index >= 0) {
          const b = lora!.b.parts[index]!;
          if (b.dtype !== 'f32' || rowsOf(b) !== capacity * width || colsOf(b) !== lora!.rank) assert(false, `linear: LoRA B ${describeShape(b.shape)} is not [${capacity} * ${width}, ${lora!.rank}] f32`);
        }
        N += width;
        p[LP.wStart + i] = op.w.starts[i]!;
        p[LP.biasStart + i] = op.bias?.starts[i] ?? 0;
        p[LP.hAt + i] = index >= 0 ? index * lora!.rank : NONE;
        p[LP.bStart + i] = index >= 0 ? lora!.b.starts[index]! : 0;
      }
      p[LP.colEnd + i] = N;
    }
    if (op.norm && numel(op.norm.weight.shape) !== K) assert(false, `linear: the norm weight has ${numel(op.norm.weight.shape)} values for rows of ${K}`);
    if (lora && (rowsOf(lora.h) !== T || colsOf(lora.h) !== lora.rank * lora.b.parts.length)) assert(false, `linear: h ${describeShape(lora.h.shape)} is not [${T}, ${lora.rank} * ${lora.b.parts.length}]`);
    const cache = rope?.cache;
    const kLayer = cache && this.cacheLayer(cache, cache.k, rope.layer);
    const vLayer = cache && this.cacheLayer(cache, cache.v, rope.layer);
    p[LP.T] = T;
    p[LP.K] = K;
    p[LP.N] = N;
    p[LP.hasBias] = op.bias ? 1 : 0;
    this.linearFloats[LP.eps] = op.norm?.eps ?? 0;
    p[LP.rank] = lora?.rank ?? 0;
    p[LP.slots] = capacity;
    p[LP.hCols] = lora ? colsOf(lora.h) : 0;
    const at = rows?.at ?? { order: 0, logitRows: 0, tiles: 0, adapters: 0, slots: 0, positions: 0 }; // no rows: a plain matmul
    p[LP.rowsAt] = segments ? at.order : at.logitRows;
    p[LP.tilesAt] = at.tiles;
    p[LP.adaptersAt] = at.adapters;
    p[LP.slotsAt] = at.slots;
    p[LP.positionsAt] = at.positions;
    p[LP.heads] = rope?.heads ?? 0;
    p[LP.kvHeads] = cache?.kvHeads ?? 0;
    p[LP.headDim] = cache?.headDim ?? 0;
    p[LP.tableRows] = rope ? rowsOf(rope.table) : 0;
    p[LP.cacheSlots] = cache?.slots ?? 0;
    p[LP.maxLen] = cache?.maxLen ?? 0;
    p[LP.layerBase] = kLayer?.layerBase ?? 0;

    const read = (t: Tensor | undefined, what: string): Binding => (t ? this.f32(t, what) : { buffer: this.dummy });
    const bindings: Binding[] = [
      this.f32(op.x, 'linear: x'), read(op.norm?.weight, 'linear: norm weight'), w, read(op.bias?.whole, 'linear: bias'),
      read(lora?.h, 'linear: h'), read(lora?.b.whole, 'linear: B'), rows ? this.i32(rows.packed.whole, numel(rows.packed.whole.shape), 'linear: step rows') : { buffer: this.dummy },
      read(lora?.scales, 'linear: scales'), read(rope?.table, 'linear: rope table'), out,
      kLayer?.binding ?? { buffer: this.dummyOut[0] }, vLayer?.binding ?? { buffer: this.dummyOut[1] },
    ];
    const serial = this.layout === 'cpu';
    const TM = segments ? (rows!.longestTile > 1 ? MAX_SEGMENT_ROWS : 1) : T === 1 ? 1 : serial && T > MAX_TM ? MAX_SERIAL_TM : MAX_TM;
    const paired = epilogue === SWIGLU || epilogue === ROPE_KV;
    const units = paired ? N / 2 : N;
    const tiles = segments ? rows!.tileCount : Math.ceil(T / TM);
    const tiling = serial ? serialTiling(units, paired, tiles, this.serialUnits) : { UNITS: 0, SERIAL_THREADS: 0 };
    const variant = [WEIGHT_F16, serial, op.norm, lora, op.gather, segments].reduce((key: number, flag, i) => key | (flag ? 1 << i : 0), (epilogue << 8) | (TM << 12) | (tiling.UNITS << 20) | (tiling.SERIAL_THREADS << 24));
    let kernel = this.linearVariants.get(variant);
    if (!kernel) {
      const flag = (on: unknown) => (on ? 1 : 0);
      kernel = this.recorder.variant('linear', { WEIGHT_F16, SERIAL: flag(serial), TM, ...(serial ? tiling : {}), NORM: flag(op.norm), LORA: flag(lora), EPILOGUE: epilogue, GATHER: flag(op.gather), SEGMENTS: flag(segments) });
      this.linearVariants.set(variant, kernel);
    }
    const perGroup = serial ? tiling.SERIAL_THREADS * tiling.UNITS : paired ? 4 : 8;
    this.recorder.dispatchVariant(kernel, p, bindings, [Math.ceil(units / perGroup), tiles]);
  }

  // ---- backward ops (webgpu-backward.ts) ----

  logProbs: Backend['logProbs'] = (...args) => this.backward.logProbs(...args);
  logitsBackward: Backend['logitsBackward'] = (...args) => this.backward.logitsBackward(...args);
  matmulBackward: Backend['matmulBackward'] = (dy, w) => (isBlocked(w) ? this.rowBlocks.matmulBackward(dy, w, (slice, block) => this.backward.matmulBackward(slice, block) as GpuTensor) : this.backward.matmulBackward(dy, w));
  outerProductSum: Backend['outerProductSum'] = (...args) => this.backward.outerProductSum(...args);
  rmsNormBackward: Backend['rmsNormBackward'] = (...args) => this.backward.rmsNormBackward(...args);
  rmsNormWeightGrad: Backend['rmsNormWeightGrad'] = (...args) => this.backward.rmsNormWeightGrad(...args);
  swigluBackward: Backend['swigluBackward'] = (...args) => this.backward.swigluBackward(...args);
  attentionPacked: Backend['attentionPacked'] = (...args) => this.backward.attentionPacked(...args);
  attentionBackward: Backend['attentionBackward'] = (...args) => this.backward.attentionBackward(...args);
  loraExpandBackward: Backend['loraExpandBackward'] = (...args) => this.backward.loraExpandBackward(...args);
  loraShrinkBackwardInPlace: Backend['loraShrinkBackwardInPlace'] = (...args) => this.backward.loraShrinkBackwardInPlace(...args);
  sumSquaresBySlot: Backend['sumSquaresBySlot'] = (...args) => this.backward.sumSquaresBySlot(...args);
  adamwInPlace: Backend['adamwInPlace'] = (...args) => this.backward.adamwInPlace(...args);
  mutateSlotInto: Backend['mutateSlotInto'] = (...args) => this.evolution.mutateSlotInto(...args);
  mixSlotsInPlace: Backend['mixSlotsInPlace'] = (...args) => this.evolution.mixSlotsInPlace(...args);
  gramsInto: Backend['gramsInto'] = (...args) => this.evolution.gramsInto(...args);
  combineInPlace: Backend['combineInPlace'] = (...args) => this.evolution.combineInPlace(...args);
}
