// Per-dispatch GPU times from timestamp queries, for benchmarks (bench/kernel-profile.ts): while a profile is open
// the recorder gives every dispatch a compute pass of its own whose beginning and end write a timestamp, and each
// submission resolves its timestamps into a buffer read back once the GPU is done. Splitting the passes costs a
// little, so a profile is taken apart from the timed runs. Needs the adapter's 'timestamp-query' feature (lavapipe
// and NVIDIA's Vulkan driver have it).

import type { ParamLayout } from './kernel-params.js';

/** One dispatch as the device ran it. */
export interface KernelTiming {
  kernel: string; // kernels/<kernel>.wgsl
  constants: Readonly<Record<string, number>>; // its variant's override constants
  params: Readonly<Record<string, number | readonly number[]>>; // its parameter block, by field name
  groups: readonly [number, number];
  gpuNs: number; // end of its pass minus beginning
}

type Pending = Omit<KernelTiming, 'gpuNs'>;

/** WebGPU's limit on one query set; two timestamps a dispatch. */
const QUERY_SET_SIZE = 4096;

/** The values of a parameter block by field name (vector fields as arrays). */
function decodeParams(layout: ParamLayout, words: Uint32Array): Record<string, number | number[]> {
  const view = new DataView(words.buffer, words.byteOffset, words.byteLength);
  const read = (word: number, type: string) => (type === 'f32' ? view.getFloat32(4 * word, true) : type === 'i32' ? view.getInt32(4 * word, true) : view.getUint32(4 * word, true));
  const values: Record<string, number | number[]> = {};
  for (const f of layout.fields) {
    const components = Array.from({ length: f.components }, (_, i) => read(f.word + i, f.type));
    values[f.name] = f.components === 1 ? components[0]! : components;
  }
  return values;
}

export class DispatchProfiler {
  private readonly querySet: GPUQuerySet;
  private readonly resolved: GPUBuffer;
  private inFlight: Pending[] = []; // dispatches whose timestamps are in the query set, not yet resolved
  private readbacks: Array<Promise<KernelTiming[]>> = [];
  private readonly writes: GPUComputePassTimestampWrites;

  constructor(private readonly device: GPUDevice) {
    this.querySet = device.createQuerySet({ label: 'kernel profile', type: 'timestamp', count: QUERY_SET_SIZE });
    this.resolved = device.createBuffer({ label: 'kernel profile', size: QUERY_SET_SIZE * 8, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC });
    this.writes = { querySet: this.querySet, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 };
  }

  /** Dispatches are timed that this submission has not resolved yet. */
  get pending(): boolean {
    return this.inFlight.length > 0;
  }

  /** The query set holds no room for another dispatch: the recorder submits first. */
  get full(): boolean {
    return 2 * (this.inFlight.length + 1) > QUERY_SET_SIZE;
  }

  /** The timestamp writes of the pass that will hold this dispatch. */
  timestampWrites(kernel: string, constants: Readonly<Record<string, number>>, layout: ParamLayout, params: Uint32Array, groups: readonly [number, number]): GPUComputePassTimestampWrites {
    const index = 2 * this.inFlight.length;
    this.inFlight.push({ kernel, constants, params: decodeParams(layout, params), groups });
    this.writes.beginningOfPassWriteIndex = index;
    this.writes.endOfPassWriteIndex = index + 1;
    return this.writes;
  }

  /** Records the resolve of this submission's timestamps at the end of `encoder` (before it is finished). */
  resolveInto(encoder: GPUCommandEncoder): GPUBuffer {
    const count = 2 * this.inFlight.length;
    const staging = this.device.createBuffer({ label: 'kernel profile read', size: count * 8, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    encoder.resolveQuerySet(this.querySet, 0, count, this.resolved, 0);
    encoder.copyBufferToBuffer(this.resolved, 0, staging, 0, count * 8);
    return staging;
  }

  /** After the submission holding `staging`'s copy: reads its timestamps when the GPU is done. */
  submitted(staging: GPUBuffer): void {
    const dispatches = this.inFlight;
    this.inFlight = [];
    this.readbacks.push(
      staging.mapAsync(GPUMapMode.READ).then(() => {
        const stamps = new BigUint64Array(staging.getMappedRange().slice(0));
        staging.destroy();
        return dispatches.map((d, i) => ({ ...d, gpuNs: Number(stamps[2 * i + 1]! - stamps[2 * i]!) }));
      }),
    );
  }

  /** Every dispatch submitted so far, in recording order (the caller has flushed). */
  async take(): Promise<KernelTiming[]> {
    const readbacks = this.readbacks;
    this.readbacks = [];
    return (await Promise.all(readbacks)).flat();
  }

  destroy(): void {
    this.querySet.destroy();
    this.resolved.destroy();
  }
}
