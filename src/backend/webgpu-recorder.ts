// Records the WebGPU backend's work: every op appends a dispatch to one compute pass of the current command
// encoder, uploads into live buffers become copies in the same encoder, and nothing is submitted until the host
// reads (the one sync point) or flushes. Errors from Dawn are collected and thrown at the next read, by name.

import { layOut, type ParamLayout } from './kernel-params.js';
import type { KernelLibrary } from './webgpu-device.js';
import { DispatchProfiler, type KernelTiming } from './webgpu-profiler.js';

/** A kernel's parameter values by their names in its WGSL `struct Params` (kernel-params.ts lays them out). */
export type Params = Readonly<Record<string, number>>;

/** A kernel and one variant of it (override constants), its pipeline looked up once by the caller. */
export interface KernelVariant {
  readonly name: string;
  readonly constants: Readonly<Record<string, number>>;
  readonly pipeline: GPUComputePipeline;
  readonly params: ParamLayout;
  readonly buffers: number; // storage bindings after the parameter block
}

/** A buffer bound to a kernel: the whole buffer, or `size` bytes from `offset` (one layer of a KV cache). */
export interface Binding {
  buffer: GPUBuffer;
  offset?: number;
  size?: number;
}

const MAX_GROUPS = 65535; // workgroups per dispatch dimension (WebGPU's default limit)
const ARENA_SLOTS = 4096; // parameter blocks per submission; more dispatches than that submit early
const BIND_GROUP_CACHE_LIMIT = 4096;
// Uploads up to this size are staged in one arena per submission (one queue.writeBuffer, no buffer creation per
// upload: creating a buffer costs ~0.1 ms on a real GPU, and a decode step uploads several); larger ones (weights
// at load time) get a staging buffer of their own.
const UPLOAD_ARENA_BYTES = 4 << 20;
const READ_POOL_PER_SIZE = 4; // mappable read-back buffers kept per power-of-two size

const align4 = (bytes: number) => Math.ceil(bytes / 4) * 4;

export class Recorder {
  // Parameter blocks: written on the host into arenaData, one slot per dispatch, uploaded once per submission
  // and bound at a dynamic offset, so a bind group can be reused across dispatches and steps.
  private readonly slotBytes: number;
  private readonly arena: GPUBuffer;
  private readonly arenaData: ArrayBuffer;
  private readonly arenaWords: Uint32Array;
  private readonly dynamicOffset = new Uint32Array(1); // setBindGroup's, reused
  private readonly fieldWords = new Uint32Array(64); // dispatch's parameter block, laid out before it is copied
  private arenaUsed = 0;

  private encoder: GPUCommandEncoder | null = null;
  private pass: GPUComputePassEncoder | null = null;
  private finished: GPUCommandBuffer[] = []; // encoded, awaiting submission
  private uploads: GPUBuffer[] = []; // staging buffers of the unsubmitted large uploads, destroyed after submission
  private readonly uploadArena: GPUBuffer;
  private readonly uploadBytes = new Uint8Array(UPLOAD_ARENA_BYTES);
  private uploadUsed = 0;
  private readonly readPool = new Map<number, GPUBuffer[]>(); // free read-back buffers by size
  private readonly bindGroups = new Map<string, GPUBindGroup>();
  private readonly bufferIds = new WeakMap<GPUBuffer, number>();
  private nextBufferId = 0;

  /** Dispatches recorded so far (a benchmark reads it before and after a step). */
  dispatchCount = 0;

  private profiler: DispatchProfiler | null = null; // while a kernel profile is open (timeKernels)

  private pendingChecks: Array<Promise<string | null>> = []; // error scopes around finish and submit
  private failure: string | null = null; // the first error: the backend is unusable after it
  private readonly lost: Promise<never>;
  private destroyed = false;

  constructor(
    private readonly device: GPUDevice,
    private readonly kernels: KernelLibrary,
    private readonly validate: boolean,
  ) {
    this.slotBytes = Math.max(256, device.limits.minUniformBufferOffsetAlignment);
    this.arenaData = new ArrayBuffer(ARENA_SLOTS * this.slotBytes);
    this.arenaWords = new Uint32Array(this.arenaData);
    this.arena = device.createBuffer({ label: 'parameter arena', size: this.arenaData.byteLength, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
    this.uploadArena = device.createBuffer({ label: 'upload arena', size: UPLOAD_ARENA_BYTES, usage: GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
    device.onuncapturederror = (event) => {
      this.failure ??= `WebGPU error: ${event.error.message}`;
    };
    this.lost = device.lost.then((info) => {
      const message = info.reason === 'destroyed' ? 'WebGPU device destroyed: the backend was destroyed' : `WebGPU device lost (${info.reason}): ${info.message}`;
      this.failure ??= message;
      throw new Error(message);
    });
    this.lost.catch(() => {}); // observed by reads; not an unhandled rejection when no read is pending
  }

  /** Throws the recorded failure (device lost, destroyed, an earlier error) before more work is queued. */
  checkUsable(): void {
    if (this.destroyed) throw new Error('populora: the WebGPU backend was destroyed');
    if (this.failure) throw new Error(this.failure);
  }

  // ---- encoding ----

  private commandEncoder(label = 'populora step'): GPUCommandEncoder {
    this.encoder ??= this.device.createCommandEncoder({ label });
    return this.encoder;
  }

  /** Resolves a popped error scope to a message naming `what` was being done, or null. */
  private watch(scope: Promise<GPUError | null>, what: string): void {
    this.pendingChecks.push(
      scope.then(
        (error) => (error ? `WebGPU validation error: ${what}: ${error.message}` : null),
        (error: unknown) => `WebGPU error: ${what}: ${(error as Error).message}`,
      ),
    );
  }

  /** Closes the current encoder into a command buffer; its validation errors are named by its label. */
  private finishEncoder(): void {
    if (!this.encoder) return;
    this.endPass();
    const what = this.validate ? this.encoder.label : `${this.encoder.label} (with validation on, errors name their kernel)`;
    this.device.pushErrorScope('validation');
    this.finished.push(this.encoder.finish());
    this.watch(this.device.popErrorScope(), what);
    this.encoder = null;
  }

  private endPass(): void {
    this.pass?.end();
    this.pass = null;
  }

  private bufferId(buffer: GPUBuffer): number {
    let id = this.bufferIds.get(buffer);
    if (id === undefined) this.bufferIds.set(buffer, (id = this.nextBufferId++));
    return id;
  }

  /** Bind groups are cached per kernel and buffers: a decode step reuses the same pooled buffers every step. */
  private bindGroup(kernel: string, bindings: readonly Binding[]): GPUBindGroup {
    let key = kernel;
    for (const b of bindings) key += `|${this.bufferId(b.buffer)}@${b.offset ?? 0}+${b.size ?? ''}`;
    let group = this.bindGroups.get(key);
    if (!group) {
      if (this.bindGroups.size >= BIND_GROUP_CACHE_LIMIT) this.bindGroups.clear();
      const entries: GPUBindGroupEntry[] = [{ binding: 0, resource: { buffer: this.arena, offset: 0, size: this.slotBytes } }];
      bindings.forEach((b, i) => entries.push({ binding: i + 1, resource: { buffer: b.buffer, offset: b.offset ?? 0, size: b.size } }));
      group = this.device.createBindGroup({ label: `kernels/${kernel}.wgsl`, layout: this.kernels.bindGroupLayout(kernel), entries });
      this.bindGroups.set(key, group);
    }
    return group;
  }

  /** The pipeline of a kernel's variant, for dispatchVariant (a hot caller keeps it, keyed as it likes). */
  variant(kernel: string, constants: Record<string, number>): KernelVariant {
    return { name: kernel, constants, pipeline: this.kernels.pipeline(kernel, constants), ...this.kernels.signature(kernel) };
  }

  /**
   * Appends one dispatch of kernels/<kernel>.wgsl. `groups` is a workgroup count, folded into (x, y) past 65535
   * (the kernel rebuilds the linear index from num_workgroups), or an explicit (x, y) grid.
   */
  dispatch(kernel: string, constants: Record<string, number>, params: Params, bindings: readonly Binding[], groups: number | readonly [number, number]): void {
    const variant = this.variant(kernel, constants);
    const words = layOut(variant.params, params, this.fieldWords);
    this.dispatchVariant(variant, this.fieldWords.subarray(0, words), bindings, groups);
  }

  /** dispatch, with the pipeline already looked up and the parameter block already laid out (little-endian words). */
  dispatchVariant(kernel: KernelVariant, params: Uint32Array, bindings: readonly Binding[], groups: number | readonly [number, number]): void {
    this.checkUsable();
    if (params.length !== kernel.params.words) throw new Error(`populora: kernels/${kernel.name}.wgsl: a parameter block of ${params.length} words for its struct Params of ${kernel.params.words}`);
    if (bindings.length !== kernel.buffers) throw new Error(`populora: kernels/${kernel.name}.wgsl: ${bindings.length} buffers bound, it declares ${kernel.buffers}`);
    const [x, y] = typeof groups === 'number' ? [Math.min(groups, MAX_GROUPS), Math.ceil(groups / MAX_GROUPS)] : groups;
    if (x > MAX_GROUPS || y > MAX_GROUPS) throw new Error(`populora: ${kernel.name}: a grid of ${x} x ${y} workgroups exceeds ${MAX_GROUPS} per dimension`);
    if (x === 0 || y === 0) return; // nothing to compute (an empty batch)
    if (params.length * 4 > this.slotBytes) throw new Error(`populora: ${kernel.name}: a parameter block of ${params.length * 4} bytes exceeds a slot of ${this.slotBytes}`);
    this.dispatchCount++;
    if (this.arenaUsed === ARENA_SLOTS) this.flush();
    const offset = this.arenaUsed++ * this.slotBytes;
    this.arenaWords.set(params, offset / 4);
    const bindGroup = this.bindGroup(kernel.name, bindings);
    // With validation on, each dispatch is a command buffer of its own, labelled by its kernel, so an error
    // names the kernel at fault (otherwise one encoder holds the whole step).
    if (this.validate) this.finishEncoder();
    if (this.profiler) this.beginTimedPass(kernel, params, [x, y]);
    this.pass ??= this.commandEncoder(this.validate ? `kernels/${kernel.name}.wgsl` : undefined).beginComputePass({ label: 'populora step' });
    this.pass.setPipeline(kernel.pipeline);
    this.dynamicOffset[0] = offset;
    this.pass.setBindGroup(0, bindGroup, this.dynamicOffset, 0, 1);
    this.pass.dispatchWorkgroups(x, y);
    if (this.validate) this.finishEncoder();
    if (this.profiler) this.endPass();
  }

  /** A profiled dispatch gets a pass of its own, timestamped at its beginning and end. */
  private beginTimedPass(kernel: KernelVariant, params: Uint32Array, groups: readonly [number, number]): void {
    this.endPass();
    if (this.profiler!.full) this.flush();
    const timestampWrites = this.profiler!.timestampWrites(kernel.name, kernel.constants, kernel.params, params, groups);
    this.pass = this.commandEncoder(this.validate ? `kernels/${kernel.name}.wgsl` : undefined).beginComputePass({ label: `kernels/${kernel.name}.wgsl`, timestampWrites });
  }

  /** Times every dispatch from now on, until takeProfile (needs the device's 'timestamp-query' feature). */
  startProfile(): void {
    this.checkUsable();
    if (!this.device.features.has('timestamp-query')) throw new Error('populora: this WebGPU adapter has no timestamp queries, which a kernel profile needs');
    this.flush(); // work recorded before is not profiled
    this.profiler ??= new DispatchProfiler(this.device);
  }

  /** Submits what is recorded and returns every dispatch's GPU time since startProfile; profiling stops. */
  async takeProfile(): Promise<KernelTiming[]> {
    const profiler = this.profiler;
    if (!profiler) return [];
    this.flush();
    this.profiler = null;
    try {
      const timings = await profiler.take();
      await this.throwRecordedError();
      return timings;
    } finally {
      profiler.destroy();
    }
  }

  /**
   * Copies host data into `target` at `offset` bytes, in order with the work already recorded: the bytes go to a
   * region of the upload arena that no other upload of this submission uses, the arena is written once at submit
   * (before the submission's commands run), and the copy out of it is recorded here, between the dispatches.
   */
  upload(target: GPUBuffer, offset: number, data: ArrayBufferView): void {
    this.checkUsable();
    const size = align4(data.byteLength);
    if (size === 0) return;
    const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    this.endPass();
    if (size > UPLOAD_ARENA_BYTES) {
      const staging = this.device.createBuffer({ label: 'upload', size, usage: GPUBufferUsage.MAP_WRITE | GPUBufferUsage.COPY_SRC, mappedAtCreation: true });
      new Uint8Array(staging.getMappedRange()).set(bytes);
      staging.unmap();
      this.commandEncoder().copyBufferToBuffer(staging, 0, target, offset, size);
      this.uploads.push(staging);
      return;
    }
    if (this.uploadUsed + size > UPLOAD_ARENA_BYTES) this.flush();
    this.uploadBytes.set(bytes, this.uploadUsed);
    this.uploadBytes.fill(0, this.uploadUsed + bytes.length, this.uploadUsed + size); // padding copies zeros
    this.commandEncoder().copyBufferToBuffer(this.uploadArena, this.uploadUsed, target, offset, size);
    this.uploadUsed += size;
  }

  /** Zeroes `size` bytes of `buffer`, in order with the work already recorded. */
  clear(buffer: GPUBuffer, size: number): void {
    this.checkUsable();
    this.endPass();
    this.commandEncoder().clearBuffer(buffer, 0, align4(size));
  }

  /** Submits everything recorded so far, with the parameter blocks its dispatches read. */
  flush(): void {
    if (this.destroyed) return;
    this.endPass();
    const timestamps = this.profiler?.pending ? this.profiler.resolveInto(this.commandEncoder()) : null;
    this.finishEncoder();
    if (this.finished.length === 0) return;
    if (this.arenaUsed > 0) this.device.queue.writeBuffer(this.arena, 0, this.arenaData, 0, this.arenaUsed * this.slotBytes);
    if (this.uploadUsed > 0) this.device.queue.writeBuffer(this.uploadArena, 0, this.uploadBytes, 0, this.uploadUsed);
    this.device.pushErrorScope('validation');
    this.device.queue.submit(this.finished);
    this.watch(this.device.popErrorScope(), 'submit');
    if (timestamps) this.profiler!.submitted(timestamps);
    this.uploads.forEach((b) => b.destroy()); // Dawn frees them once the submitted copies are done
    this.uploads = [];
    this.finished = [];
    this.arenaUsed = 0;
    this.uploadUsed = 0;
  }

  // ---- reading ----

  /** Submits the pending work and returns a copy of `bytes` bytes of `buffer` from byte `offset`. */
  async read(buffer: GPUBuffer, bytes: number, offset = 0): Promise<ArrayBuffer> {
    this.checkUsable();
    const size = 2 ** Math.ceil(Math.log2(Math.max(bytes, 256))); // pooled by power-of-two size
    const staging = this.readPool.get(size)?.pop() ?? this.device.createBuffer({ label: 'read', size, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    this.endPass();
    this.commandEncoder().copyBufferToBuffer(buffer, offset, staging, 0, align4(Math.max(bytes, 4)));
    this.flush();
    try {
      await Promise.race([staging.mapAsync(GPUMapMode.READ), this.lost]);
    } catch (error) {
      staging.destroy();
      if (this.destroyed) throw new Error('populora: the WebGPU backend was destroyed before a read completed');
      await this.throwRecordedError();
      throw new Error(`WebGPU read failed: ${(error as Error).message}`);
    }
    const copy = staging.getMappedRange(0, size).slice(0, bytes);
    staging.unmap();
    const free = this.readPool.get(size) ?? [];
    if (free.length < READ_POOL_PER_SIZE && !this.destroyed) this.readPool.set(size, [...free, staging]);
    else staging.destroy();
    await this.throwRecordedError();
    return copy;
  }

  /** Waits for the error scopes of past submissions and pipeline creations; throws the first error found. */
  private async throwRecordedError(): Promise<void> {
    const checks = this.pendingChecks;
    this.pendingChecks = [];
    const messages = [await this.kernels.takeError(), ...(await Promise.all(checks))];
    const error = messages.find((m) => m !== null);
    if (error) this.failure ??= error.startsWith('WebGPU') ? error : `WebGPU error: ${error}`;
    if (this.failure) throw new Error(this.failure);
  }

  destroy(): void {
    this.destroyed = true;
    this.profiler?.destroy();
    this.profiler = null;
    this.pass = null;
    this.encoder = null;
    this.finished = [];
    this.uploads = [];
    this.bindGroups.clear();
    this.readPool.forEach((buffers) => buffers.forEach((b) => b.destroy()));
    this.readPool.clear();
  }
}
