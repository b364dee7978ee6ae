// The WebGPU backend: each op of backend.ts is one dispatch of a WGSL kernel from kernels/, recorded into one
// command encoder (webgpu-recorder.ts) and submitted only when the host reads: once per step.
//
// Memory: tensors live in pooled buffers (free() returns a buffer to the pool of its size class). Weights are
// [rows, cols] matrices stored as u32 words: f32 bits, or two halves a word (f16), each row padded to an even
// column count so a pair never straddles two rows.

import { assert, colsOf, describeShape, MAX_CONTEXT, numel, rowsOf, type Backend, type KvCache, type SampleRow, type Tensor, type WeightStorage } from './backend.js';
import { f16BitsToF32, f32ToF16Bits } from './half.js';
import { KernelLibrary, openDevice, releaseInstance } from './webgpu-device.js';
import { BackwardKernels, type GpuTensor } from './webgpu-backward.js';
import { EvolutionKernels } from './webgpu-evolution.js';
import { Recorder, type Binding, type Field } from './webgpu-recorder.js';

const MAX_HEAD_DIM = 256; // attention.wgsl keeps the query in workgroup memory
const MAX_TM = 8; // rows per matmul workgroup when T > 1 (matmul.wgsl's MAX_TM)
const STORAGE = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;

/** Pool size classes: powers of two up to 16 MiB (at most 2x waste), then whole MiB. */
function sizeClass(bytes: number): number {
  if (bytes <= 16 << 20) return Math.max(256, 2 ** Math.ceil(Math.log2(bytes)));
  return Math.ceil(bytes / (1 << 20)) * (1 << 20);
}


/** Opens the WebGPU device; throws when there is no adapter. POPULORA_WEBGPU_VALIDATE=1 turns on validation. */
export async function createWebGpuBackend(options: { validate?: boolean } = {}): Promise<Backend> {
  const validate = options.validate ?? process.env.POPULORA_WEBGPU_VALIDATE === '1';
  const { device, description } = await openDevice(validate);
  try {
    return new WebGpuBackend(device, description, await KernelLibrary.load(device), validate);
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
  private readonly bindingLimit: number;
  private destroyed = false;
  private readonly backward: BackwardKernels; // the training ops, in webgpu-backward.ts
  private readonly evolution: EvolutionKernels; // weight-space evolution, in webgpu-evolution.ts

  constructor(
    private readonly device: GPUDevice,
    readonly deviceDescription: string,
    kernels: KernelLibrary,
    validate: boolean,
  ) {
    this.recorder = new Recorder(device, kernels, validate);
    this.bindingLimit = device.limits.maxStorageBufferBindingSize;
    this.dummy = device.createBuffer({ label: 'absent input', size: 16, usage: STORAGE });
    const context = {
      recorder: this.recorder,
      dummy: this.dummy,
      output: (shape: readonly number[], dtype?: 'f32' | 'i32') => this.output(shape, dtype),
      uploadI32: (data: Int32Array, shape: readonly number[]) => this.uploadI32(data, shape),
      free: (t: Tensor) => this.free(t),
      f32: (t: Tensor, what: string) => this.f32(t, what),
      i32: (t: Tensor, count: number, what: string) => this.i32(t, count, what),
      weight: (t: Tensor, what: string) => this.weight(t, what),
    };
    this.backward = new BackwardKernels(context);
    this.evolution = new EvolutionKernels(context);
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
    if (bytes > this.bindingLimit) {
      throw new Error(`populora: ${what} needs ${bytes} bytes, over this device's maxStorageBufferBindingSize of ${this.bindingLimit} bytes`);
    }
  }

  private allocate(shape: readonly number[], dtype: Tensor['dtype'], bytes = numel(shape) * 4): { tensor: GpuTensor; reused: boolean } {
    this.checkBindable(bytes, `a tensor ${describeShape(shape)}`);
    const { buffer, reused } = this.buffer(bytes, this.bindingLimit);
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
    this.checkBindable(rows * wordsPerRow * 4, `the ${storage} weight ${describeShape(shape)}`);
    assert(data.length === rows * cols, `uploadWeight: ${data.length} values for shape ${describeShape(shape)}`);
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
    this.recorder.upload((t as GpuTensor).buffer, offset * 4, data);
  }

  async readF32(t: Tensor): Promise<Float32Array> {
    const tensor = t as GpuTensor;
    assert(t.dtype === 'f32' || t.dtype === 'f16', `readF32 needs a float tensor, got ${t.dtype}`);
    const bytes = await this.recorder.read(tensor.buffer, tensor.bytes);
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
    return new Int32Array(await this.recorder.read(tensor.buffer, tensor.bytes));
  }

  free(t: Tensor): void {
    if (this.destroyed || this.freed.has(t)) return;
    this.freed.add(t);
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

  private f32(t: Tensor, what: string): GpuTensor {
    assert(t.dtype === 'f32', `${what} must be an f32 tensor, got ${t.dtype}`);
    return t as GpuTensor;
  }

  private i32(t: Tensor, count: number, what: string): GpuTensor {
    assert(t.dtype === 'i32' || t.dtype === 'u32', `${what} must be an i32 tensor, got ${t.dtype}`);
    assert(numel(t.shape) === count, `${what} has ${numel(t.shape)} entries, expected ${count}`);
    return t as GpuTensor;
  }

  /** A weight [rows, cols] stored as f32 or f16 words, and the kernels' variant constant for it. */
  private weight(t: Tensor, what: string): { tensor: GpuTensor; WEIGHT_F16: number } {
    assert(t.dtype === 'f32' || t.dtype === 'f16', `${what} must be an f32 or f16 weight, got ${t.dtype}`);
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
      const { buffer, reused } = this.buffer(bytes, perLayer ? maxBuffer : this.bindingLimit);
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
    const { tensor: w, WEIGHT_F16 } = this.weight(table, 'embedding: the table');
    const [V, D] = w.shape as [number, number];
    const M = numel(tokens.shape);
    const ids = this.i32(tokens, M, 'embedding: tokens');
    const out = this.output([M, D]);
    this.recorder.dispatch('embedding', { WEIGHT_F16 }, [['u32', M], ['u32', D], ['u32', V]], [ids, w, out], Math.ceil((M * D) / 256));
    return out;
  }

  gatherRows(x: Tensor, rows: Tensor): Tensor {
    const [T, D, M] = [rowsOf(x), colsOf(x), numel(rows.shape)];
    const out = this.output([M, D]);
    const fields: Field[] = [['u32', M], ['u32', D], ['u32', T]];
    this.recorder.dispatch('gather_rows', {}, fields, [this.f32(x, 'gatherRows: x'), this.i32(rows, M, 'gatherRows: rows'), out], Math.ceil((M * D) / 256));
    return out;
  }

  rmsNorm(x: Tensor, weight: Tensor, eps: number): Tensor {
    const [T, D] = [rowsOf(x), colsOf(x)];
    assert(numel(weight.shape) === D, `rmsNorm: the weight has ${numel(weight.shape)} values for rows of ${D}`);
    const out = this.output([T, D]);
    const fields: Field[] = [['u32', T], ['u32', D], ['f32', eps]];
    this.recorder.dispatch('rmsnorm', {}, fields, [this.f32(x, 'rmsNorm: x'), this.f32(weight, 'rmsNorm: weight'), out], T);
    return out;
  }

  matmul(x: Tensor, w: Tensor, bias?: Tensor): Tensor {
    const { tensor: weight, WEIGHT_F16 } = this.weight(w, 'matmul: w');
    const [T, K] = [rowsOf(x), colsOf(x)];
    const [N, Kw] = weight.shape as [number, number];
    assert(K === Kw, `matmul: x has ${K} columns but the weight has ${Kw}`);
    if (bias) assert(numel(bias.shape) === N, `matmul: the bias has ${numel(bias.shape)} values for ${N} outputs`);
    const TM = T === 1 ? 1 : MAX_TM; // decode gets a one-row variant; the per-element order is the same
    const out = this.output([T, N]);
    const fields: Field[] = [['u32', T], ['u32', K], ['u32', N], ['u32', bias ? 1 : 0]];
    const bindings = [this.f32(x, 'matmul: x'), weight, bias ? this.f32(bias, 'matmul: bias') : { buffer: this.dummy }, out];
    this.recorder.dispatch('matmul', { WEIGHT_F16, TM }, fields, bindings, [Math.ceil(N / 8), Math.ceil(T / TM)]);
    return out;
  }

  addInPlace(acc: Tensor, x: Tensor): void {
    const n = numel(acc.shape);
    assert(n === numel(x.shape), `addInPlace: sizes ${n} and ${numel(x.shape)} differ`);
    this.recorder.dispatch('add', {}, [['u32', n]], [this.f32(acc, 'addInPlace: acc'), this.f32(x, 'addInPlace: x')], Math.ceil(n / 256));
  }

  swiglu(gate: Tensor, up: Tensor): Tensor {
    const n = numel(gate.shape);
    assert(n === numel(up.shape), `swiglu: sizes ${n} and ${numel(up.shape)} differ`);
    const out = this.output(gate.shape);
    this.recorder.dispatch('swiglu', {}, [['u32', n]], [this.f32(gate, 'swiglu: gate'), this.f32(up, 'swiglu: up'), out], Math.ceil(n / 256));
    return out;
  }

  ropeInPlace(x: Tensor, positions: Tensor, table: Tensor, heads: number, headDim: number): void {
    const T = numel(positions.shape);
    assert(numel(x.shape) === T * heads * headDim, `rope: x ${describeShape(x.shape)} is not [${T}, ${heads} * ${headDim}]`);
    assert(colsOf(table) === headDim && headDim % 2 === 0, `rope: the table ${describeShape(table.shape)} does not match headDim ${headDim}`);
    const fields: Field[] = [['u32', T], ['u32', heads], ['u32', headDim], ['u32', rowsOf(table)]];
    const bindings = [this.f32(x, 'rope: x'), this.i32(positions, T, 'rope: positions'), this.f32(table, 'rope: table')];
    this.recorder.dispatch('rope', {}, fields, bindings, Math.ceil((T * heads * headDim) / 2 / 256));
  }

  kvWrite(cache: KvCache, layer: number, k: Tensor, v: Tensor, slots: Tensor, positions: Tensor): void {
    const T = numel(slots.shape);
    const width = cache.kvHeads * cache.headDim;
    assert(numel(k.shape) === T * width && numel(v.shape) === T * width, `kvWrite: k and v must be [${T}, ${width}]`);
    const kLayer = this.cacheLayer(cache, cache.k, layer);
    const vLayer = this.cacheLayer(cache, cache.v, layer);
    const fields: Field[] = [['u32', T], ['u32', width], ['u32', cache.slots], ['u32', cache.maxLen], ['u32', kLayer.layerBase]];
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
    const fields: Field[] = [
      ['u32', T], ['u32', heads], ['u32', kvHeads], ['u32', headDim], ['u32', cache.slots], ['u32', maxLen],
      ['u32', kLayer.layerBase], ['f32', 1 / Math.sqrt(headDim)],
    ];
    const ids = [this.i32(slots, T, 'attention: slots'), this.i32(positions, T, 'attention: positions')];
    this.recorder.dispatch('attention', {}, fields, [this.f32(q, 'attention: q'), ...ids, kLayer.binding, vLayer.binding, out], T * heads);
    return out;
  }

  loraShrink(x: Tensor, a: Tensor, adapters: Tensor, rank: number): Tensor {
    const { tensor: bank, WEIGHT_F16 } = this.weight(a, 'loraShrink: the A bank');
    const [T, K] = [rowsOf(x), colsOf(x)];
    assert(colsOf(bank) === K && rowsOf(bank) % rank === 0, `loraShrink: the A bank ${describeShape(bank.shape)} is not [slots * ${rank}, ${K}]`);
    const out = this.output([T, rank]);
    const fields: Field[] = [['u32', T], ['u32', K], ['u32', rank], ['u32', rowsOf(bank) / rank]];
    this.recorder.dispatch('lora_shrink', { WEIGHT_F16 }, fields, [this.f32(x, 'loraShrink: x'), bank, this.i32(adapters, T, 'loraShrink: adapters'), out], T);
    return out;
  }

  loraExpandInPlace(y: Tensor, h: Tensor, b: Tensor, adapters: Tensor, scales: Tensor): void {
    const { tensor: bank, WEIGHT_F16 } = this.weight(b, 'loraExpand: the B bank');
    const [T, N] = [rowsOf(y), colsOf(y)];
    const rank = numel(h.shape) / T;
    assert(Number.isInteger(rank) && colsOf(bank) === rank && rowsOf(bank) % N === 0, `loraExpand: the B bank ${describeShape(bank.shape)} is not [slots * ${N}, ${rank}]`);
    const fields: Field[] = [['u32', T], ['u32', N], ['u32', rank], ['u32', Math.min(rowsOf(bank) / N, numel(scales.shape))]];
    const bindings = [this.f32(h, 'loraExpand: h'), bank, this.i32(adapters, T, 'loraExpand: adapters'), this.f32(scales, 'loraExpand: scales'), this.f32(y, 'loraExpand: y')];
    this.recorder.dispatch('lora_expand', { WEIGHT_F16 }, fields, bindings, Math.ceil((T * N) / 256));
  }

  sample(logits: Tensor, rows: readonly SampleRow[], mask?: Tensor): Tensor {
    const [M, V] = [rowsOf(logits), colsOf(logits)];
    assert(rows.length === M, `sample: ${rows.length} parameter rows for ${M} logit rows`);
    const params = new ArrayBuffer(M * 32); // RowParams of sample.wgsl: 8 words a row
    const view = new DataView(params);
    rows.forEach((r, m) => {
      view.setFloat32(m * 32, r.temperature, true);
      view.setFloat32(m * 32 + 4, r.topP, true);
      view.setUint32(m * 32 + 8, r.seed >>> 0, true);
      view.setUint32(m * 32 + 12, r.requestId >>> 0, true);
      view.setUint32(m * 32 + 16, r.position >>> 0, true);
    });
    const rowParams = this.fill(new Uint32Array(params), [M, 8], 'u32');
    const maskBinding = mask ? this.i32(mask, M * Math.ceil(V / 32), 'sample: mask') : { buffer: this.dummy };
    const out = this.output([M], 'i32');
    const fields: Field[] = [['u32', M], ['u32', V], ['u32', mask ? 1 : 0]];
    this.recorder.dispatch('sample', {}, fields, [this.f32(logits, 'sample: logits'), rowParams, maskBinding, out], M);
    this.free(rowParams); // safe: a later reuse is ordered after this dispatch
    return out;
  }

  // ---- backward ops (webgpu-backward.ts) ----

  logProbs: Backend['logProbs'] = (...args) => this.backward.logProbs(...args);
  logitsBackward: Backend['logitsBackward'] = (...args) => this.backward.logitsBackward(...args);
  matmulBackward: Backend['matmulBackward'] = (...args) => this.backward.matmulBackward(...args);
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
