// The WebGPU backend: each op of backend.ts as a WGSL kernel from kernels/, encoded into one compute pass that
// is submitted only when the host needs data back (a read, a write into a live buffer) — once per step.

import { assert, numel, type Backend, type KvCache, type SampleRow, type Tensor, type WeightStorage } from './backend.js';
import { f32ToF16Bits } from './half.js';
import { openDevice, PipelineCache, releaseInstance } from './webgpu-device.js';

interface GpuTensor extends Tensor {
  buffer: GPUBuffer;
  bytes: number; // meaningful bytes (the pooled buffer may be larger)
  wordsPerRow: number; // for weights: u32 words per row (f16 rows hold two values a word, padded to even)
}

const UNIFORM_SLOT_BYTES = 256; // minUniformBufferOffsetAlignment
const UNIFORM_SLOTS = 2048; // dispatches per submission before the arena wraps
const MAX_GROUPS = 65535;
const USAGE = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;

type Field = ['u32' | 'i32' | 'f32', number];

function sizeClass(bytes: number): number {
  if (bytes <= 16 << 20) return Math.max(256, 2 ** Math.ceil(Math.log2(bytes)));
  return Math.ceil(bytes / (1 << 20)) * (1 << 20);
}

/** Workgroups for n threads in groups of 256, folded into (x, y) past the 65535 limit per dimension. */
function groups1D(n: number): [number, number] {
  const workgroups = Math.max(1, Math.ceil(n / 256));
  const x = Math.min(workgroups, MAX_GROUPS);
  return [x, Math.ceil(workgroups / x)];
}

/** Set POPULORA_WEBGPU_VALIDATE=1 for Dawn's full validation (slower; CI runs with it). */
export async function createWebGpuBackend(options: { validate?: boolean } = {}): Promise<Backend> {
  const validate = options.validate ?? process.env.POPULORA_WEBGPU_VALIDATE === '1';
  const { device, description } = await openDevice(validate);
  return new WebGpuBackend(device, description, validate);
}

class WebGpuBackend implements Backend {
  readonly name = 'webgpu' as const;
  private readonly pipelines: PipelineCache;
  private readonly pool = new Map<number, GPUBuffer[]>();
  private readonly arena: GPUBuffer;
  private readonly arenaData = new ArrayBuffer(UNIFORM_SLOTS * UNIFORM_SLOT_BYTES);
  private readonly dummy: GPUBuffer;
  private arenaUsed = 0;
  private encoder: GPUCommandEncoder | null = null;
  private pass: GPUComputePassEncoder | null = null;
  private failure: string | null = null;

  constructor(
    private readonly device: GPUDevice,
    readonly deviceDescription: string,
    private readonly validate: boolean,
  ) {
    this.pipelines = new PipelineCache(device);
    this.arena = device.createBuffer({ size: this.arenaData.byteLength, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
    this.dummy = device.createBuffer({ size: 16, usage: USAGE });
    device.addEventListener('uncapturederror', (event) => {
      this.failure ??= `WebGPU error: ${(event as GPUUncapturedErrorEvent).error.message}`;
    });
    void device.lost.then((info) => {
      if (info.reason !== 'destroyed') this.failure ??= `WebGPU device lost (${info.reason}): ${info.message}`;
    });
  }

  // ---- memory ----

  private allocate(bytes: number, shape: readonly number[], dtype: Tensor['dtype'], wordsPerRow = 0): { tensor: GpuTensor; reused: boolean } {
    const limit = this.device.limits.maxStorageBufferBindingSize;
    if (bytes > limit) throw new RangeError(`tensor [${shape.join(', ')}] needs ${bytes} bytes, over this device's storage binding limit of ${limit} bytes`);
    const size = sizeClass(Math.max(bytes, 4));
    const pooled = this.pool.get(size)?.pop();
    const buffer = pooled ?? this.device.createBuffer({ size, usage: USAGE });
    return { tensor: { buffer, bytes: Math.max(bytes, 4), shape: [...shape], dtype, wordsPerRow }, reused: pooled !== undefined };
  }

  /** Fills a new tensor from the host. A reused buffer may still be read by unsubmitted work: submit that first. */
  private fill(data: ArrayBufferView, shape: readonly number[], dtype: Tensor['dtype'], wordsPerRow = 0): GpuTensor {
    const { tensor, reused } = this.allocate(data.byteLength, shape, dtype, wordsPerRow);
    if (reused) this.flush();
    this.device.queue.writeBuffer(tensor.buffer, 0, data.buffer, data.byteOffset, data.byteLength);
    return tensor;
  }

  upload(data: Float32Array, shape: readonly number[]): Tensor {
    assert(data.length === numel(shape), `upload: ${data.length} values for shape [${shape.join(', ')}]`);
    return this.fill(data, shape, 'f32');
  }

  uploadI32(data: Int32Array, shape: readonly number[]): Tensor {
    assert(data.length === numel(shape), `uploadI32: ${data.length} values for shape [${shape.join(', ')}]`);
    return this.fill(data, shape, 'i32');
  }

  uploadWeight(data: Float32Array, shape: readonly [number, number], storage: WeightStorage): Tensor {
    const [rows, cols] = shape;
    assert(data.length === rows * cols, `uploadWeight: ${data.length} values for shape [${rows}, ${cols}]`);
    if (storage === 'f32') return this.fill(data, shape, 'f32', cols);
    const wordsPerRow = Math.ceil(cols / 2);
    const halves = new Uint16Array(rows * wordsPerRow * 2); // the padding half of an odd row stays 0
    for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) halves[r * wordsPerRow * 2 + c] = f32ToF16Bits(data[r * cols + c]!);
    return this.fill(halves, shape, 'f16', wordsPerRow);
  }

  zeros(shape: readonly number[]): Tensor {
    const { tensor } = this.allocate(numel(shape) * 4, shape, 'f32', shape.at(-1) ?? 1);
    this.endPass();
    this.commandEncoder().clearBuffer(tensor.buffer, 0, sizeClass(tensor.bytes));
    return tensor;
  }

  write(t: Tensor, data: Float32Array, offset: number): void {
    assert(t.dtype === 'f32', `write needs an f32 tensor, got ${t.dtype}`);
    assert(offset + data.length <= numel(t.shape), `write of ${data.length} values at ${offset} overruns [${t.shape.join(', ')}]`);
    this.flush(); // unsubmitted work must see the old contents
    this.device.queue.writeBuffer((t as GpuTensor).buffer, offset * 4, data.buffer, data.byteOffset, data.byteLength);
  }

  async readF32(t: Tensor): Promise<Float32Array> {
    return new Float32Array(await this.read(t as GpuTensor));
  }

  async readI32(t: Tensor): Promise<Int32Array> {
    return new Int32Array(await this.read(t as GpuTensor));
  }

  private async read(t: GpuTensor): Promise<ArrayBuffer> {
    const staging = this.device.createBuffer({ size: t.bytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    this.endPass();
    this.commandEncoder().copyBufferToBuffer(t.buffer, 0, staging, 0, t.bytes);
    this.flush();
    try {
      await staging.mapAsync(GPUMapMode.READ);
    } catch (error) {
      throw new Error(this.failure ?? `WebGPU read failed: ${(error as Error).message}`);
    }
    const copy = staging.getMappedRange().slice(0);
    staging.unmap();
    staging.destroy();
    if (this.validate) {
      const error = await this.device.popErrorScope();
      this.device.pushErrorScope('validation');
      if (error) this.failure ??= `WebGPU validation error: ${error.message}`;
    }
    if (this.failure) throw new Error(this.failure);
    return copy;
  }

  free(t: Tensor): void {
    const { buffer } = t as GpuTensor;
    const list = this.pool.get(buffer.size) ?? [];
    list.push(buffer);
    this.pool.set(buffer.size, list);
  }

  destroy(): void {
    this.flush();
    for (const list of this.pool.values()) list.forEach((b) => b.destroy());
    this.pool.clear();
    this.device.destroy();
    releaseInstance();
  }

  // ---- encoding ----

  private commandEncoder(): GPUCommandEncoder {
    this.encoder ??= this.device.createCommandEncoder();
    return this.encoder;
  }

  private endPass(): void {
    this.pass?.end();
    this.pass = null;
  }

  /** Submits everything encoded so far, with the uniform values its dispatches read. */
  private flush(): void {
    if (!this.encoder) return;
    this.endPass();
    if (this.arenaUsed > 0) this.device.queue.writeBuffer(this.arena, 0, this.arenaData, 0, this.arenaUsed * UNIFORM_SLOT_BYTES);
    this.device.queue.submit([this.encoder.finish()]);
    this.encoder = null;
    this.arenaUsed = 0;
  }

  private dispatch(kernel: string, constants: Record<string, number>, fields: Field[], bindings: Array<GpuTensor | null>, groups: [number, number]): void {
    assert(groups[0] <= MAX_GROUPS && groups[1] <= MAX_GROUPS, `${kernel}: dispatch ${groups.join(' x ')} exceeds ${MAX_GROUPS} workgroups per dimension`);
    if (this.arenaUsed === UNIFORM_SLOTS) this.flush();
    const slot = this.arenaUsed++;
    const view = new DataView(this.arenaData, slot * UNIFORM_SLOT_BYTES, UNIFORM_SLOT_BYTES);
    fields.forEach(([type, value], i) => {
      if (type === 'f32') view.setFloat32(i * 4, value, true);
      else if (type === 'i32') view.setInt32(i * 4, value, true);
      else view.setUint32(i * 4, value, true);
    });
    const pipeline = this.pipelines.get(kernel, constants);
    const entries: GPUBindGroupEntry[] = [{ binding: 0, resource: { buffer: this.arena, offset: slot * UNIFORM_SLOT_BYTES, size: UNIFORM_SLOT_BYTES } }];
    bindings.forEach((t, i) => entries.push({ binding: i + 1, resource: { buffer: t ? t.buffer : this.dummy, size: t ? t.bytes : 16 } }));
    const bindGroup = this.device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries });
    this.pass ??= this.commandEncoder().beginComputePass();
    this.pass.setPipeline(pipeline);
    this.pass.setBindGroup(0, bindGroup);
    this.pass.dispatchWorkgroups(groups[0], groups[1]);
  }

  private output(shape: readonly number[], dtype: 'f32' | 'i32' = 'f32'): GpuTensor {
    return this.allocate(numel(shape) * 4, shape, dtype).tensor;
  }

  // ---- ops (shapes and semantics in backend.ts) ----

  createKvCache(dims: Omit<KvCache, 'k' | 'v'>): KvCache {
    const shape = [dims.layers, dims.slots, dims.maxLen, dims.kvHeads, dims.headDim];
    return { ...dims, k: this.zeros(shape), v: this.zeros(shape) };
  }

  embedding(table: Tensor, tokens: Tensor): Tensor {
    const t = table as GpuTensor;
    const [M, D] = [tokens.shape[0]!, t.shape[1]!];
    const out = this.output([M, D]);
    this.dispatch('embedding', { WEIGHT_F16: t.dtype === 'f16' ? 1 : 0 }, [['u32', M], ['u32', D], ['u32', t.wordsPerRow]], [tokens as GpuTensor, t, out], groups1D(M * D));
    return out;
  }

  gatherRows(x: Tensor, rows: Tensor): Tensor {
    const [M, D] = [rows.shape[0]!, numel(x.shape) / x.shape[0]!];
    const out = this.output([M, D]);
    this.dispatch('embedding', { WEIGHT_F16: 0 }, [['u32', M], ['u32', D], ['u32', D]], [rows as GpuTensor, x as GpuTensor, out], groups1D(M * D));
    return out;
  }

  rmsNorm(x: Tensor, weight: Tensor, eps: number): Tensor {
    const [T, D] = [x.shape[0]!, numel(x.shape) / x.shape[0]!];
    const out = this.output([T, D]);
    this.dispatch('rmsnorm', {}, [['u32', D], ['f32', eps]], [x as GpuTensor, weight as GpuTensor, out], [T, 1]);
    return out;
  }

  matmul(x: Tensor, w: Tensor, bias?: Tensor): Tensor {
    const weight = w as GpuTensor;
    const [T, K] = [x.shape[0]!, numel(x.shape) / x.shape[0]!];
    const [N, Kw] = weight.shape as [number, number];
    assert(K === Kw, `matmul: x has ${K} columns but the weight has ${Kw}`);
    const out = this.output([T, N]);
    const fields: Field[] = [['u32', T], ['u32', K], ['u32', N], ['u32', bias ? 1 : 0], ['u32', weight.wordsPerRow]];
    this.dispatch('matmul', { WEIGHT_F16: weight.dtype === 'f16' ? 1 : 0 }, fields, [x as GpuTensor, weight, (bias as GpuTensor) ?? null, out], [Math.ceil(N / 8), Math.ceil(T / 8)]);
    return out;
  }

  addInPlace(acc: Tensor, x: Tensor): void {
    const n = numel(acc.shape);
    assert(n === numel(x.shape), `addInPlace: sizes ${n} and ${numel(x.shape)} differ`);
    this.dispatch('elementwise', {}, [['u32', n], ['u32', 0]], [acc as GpuTensor, x as GpuTensor, null], groups1D(n));
  }

  swiglu(gate: Tensor, up: Tensor): Tensor {
    const n = numel(gate.shape);
    const out = this.output(gate.shape);
    this.dispatch('elementwise', {}, [['u32', n], ['u32', 1]], [gate as GpuTensor, up as GpuTensor, out], groups1D(n));
    return out;
  }

  ropeInPlace(x: Tensor, positions: Tensor, table: Tensor, heads: number, headDim: number): void {
    const T = positions.shape[0]!;
    this.dispatch('rope', {}, [['u32', T], ['u32', heads], ['u32', headDim]], [x as GpuTensor, positions as GpuTensor, table as GpuTensor], groups1D((T * heads * headDim) / 2));
  }

  kvWrite(cache: KvCache, layer: number, k: Tensor, v: Tensor, slots: Tensor, positions: Tensor): void {
    const T = slots.shape[0]!;
    const width = cache.kvHeads * cache.headDim;
    const fields: Field[] = [['u32', T], ['u32', width], ['u32', layer], ['u32', cache.slots], ['u32', cache.maxLen]];
    this.dispatch('kv_write', {}, fields, [k, v, slots, positions, cache.k, cache.v] as GpuTensor[], groups1D(T * width));
  }

  attention(q: Tensor, cache: KvCache, layer: number, slots: Tensor, positions: Tensor, heads: number): Tensor {
    const T = slots.shape[0]!;
    assert(cache.maxLen <= 4096, `attention supports contexts up to 4096, the cache holds ${cache.maxLen}`);
    const out = this.output([T, heads * cache.headDim]);
    const fields: Field[] = [['u32', heads], ['u32', cache.kvHeads], ['u32', cache.headDim], ['u32', layer], ['u32', cache.slots], ['u32', cache.maxLen], ['f32', 1 / Math.sqrt(cache.headDim)]];
    this.dispatch('attention', {}, fields, [q, slots, positions, cache.k, cache.v, out] as GpuTensor[], [heads, T]);
    return out;
  }

  loraShrink(x: Tensor, a: Tensor, adapters: Tensor, rank: number): Tensor {
    assert(a.dtype === 'f32', `loraShrink: the A bank must be f32, got ${a.dtype}`);
    const [T, K] = [x.shape[0]!, numel(x.shape) / x.shape[0]!];
    const out = this.output([T, rank]);
    this.dispatch('lora_shrink', {}, [['u32', K], ['u32', rank]], [x, a, adapters, out] as GpuTensor[], [Math.ceil(rank / 8), T]);
    return out;
  }

  loraExpandInPlace(y: Tensor, h: Tensor, b: Tensor, adapters: Tensor, scales: Tensor): void {
    assert(b.dtype === 'f32', `loraExpand: the B bank must be f32, got ${b.dtype}`);
    const [T, N] = [y.shape[0]!, numel(y.shape) / y.shape[0]!];
    const rank = numel(h.shape) / T;
    this.dispatch('lora_expand', {}, [['u32', T], ['u32', N], ['u32', rank]], [h, b, adapters, scales, y] as GpuTensor[], groups1D(T * N));
  }

  sample(logits: Tensor, rows: readonly SampleRow[], mask?: Tensor): Tensor {
    const [M, V] = [logits.shape[0]!, numel(logits.shape) / logits.shape[0]!];
    assert(rows.length === M, `sample: ${rows.length} parameter rows for ${M} logit rows`);
    const params = new ArrayBuffer(M * 32); // RowParams: 8 words
    const view = new DataView(params);
    rows.forEach((r, m) => {
      view.setFloat32(m * 32, r.temperature, true);
      view.setFloat32(m * 32 + 4, r.topP, true);
      view.setUint32(m * 32 + 8, r.seed >>> 0, true);
      view.setUint32(m * 32 + 12, r.requestId >>> 0, true);
      view.setUint32(m * 32 + 16, r.position >>> 0, true);
    });
    const rowTensor = this.fill(new Uint32Array(params), [M, 8], 'u32');
    const out = this.output([M], 'i32');
    this.dispatch('sample', {}, [['u32', V], ['u32', mask ? 1 : 0]], [logits as GpuTensor, rowTensor, (mask as GpuTensor) ?? null, out], [M, 1]);
    this.free(rowTensor);
    return out;
  }
}
