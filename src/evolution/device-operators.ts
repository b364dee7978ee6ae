// The evolution operators on the device, on adapters resident in a LoRA bank: a child is written into its slot
// from its parents' slots without leaving the device (the engine's path; the host operators in operators.ts are
// the reference twins). Same rules, same seeds, same streams:
//   mutate       per factor: the parent slot's sum of squares (the RMS), then parent + hashed noise into the child
//   module/rank/interpolate   one blend per factor with weights per rank component (kernels/evolve_mix.wgsl)
//   svd          Gram matrices of the stacked factors on the device (all modules, one readback), the small
//                factorisations on the host (svdMixes; on a worker pool with `workers` > 1: they are independent
//                per module), the child's factors combined on the device
// Bank layout (lora-bank.ts): a [S·R, in] (slot s: rows s·R..), b [S·out, R] (slot s: rows s·out..).

import { Piscina } from 'piscina';
import { assert, type Backend, type Tensor } from '../backend/backend.js';
import { uniform } from '../backend/noise.js';
import mixesChunk, { type MixesJob } from './mixes-worker.js';
import { compiledWorker, contiguousChunks } from '../runtime/worker-threads.js';
import type { LlamaConfig } from '../model/config.js';
import type { LoraBank } from '../model/lora-bank.js';
import { loraModuleShape, loraScale, LORA_MODULES, type LoraModule } from '../model/peft.js';
import { noiseStream, type CrossoverOptions, type MutationOptions } from './operators.js';

interface FactorView {
  layer: number;
  module: LoraModule;
  factor: 0 | 1; // 0: A [R, in] per slot, 1: B [out, R] per slot
  tensor: Tensor;
  slotSize: number;
  divisor: number; // elements per rank component step: A rows of `in`, B columns (1)
}

/** The arrays end to end, as one typed array of the given kind. */
function concatenate<T extends Int32Array | Float32Array>(kind: { new (length: number): T }, arrays: ArrayLike<number>[]): T {
  const out = new kind(arrays.reduce((n, a) => n + a.length, 0));
  let at = 0;
  for (const a of arrays) {
    out.set(a, at);
    at += a.length;
  }
  return out;
}

/** The SVD crossover's phases, as they end: the Grams' work recorded, read back, the host's factorisations done. */
export type SvdPhase = 'gramsRecorded' | 'grams' | 'mixes';

export class BankEvolution {
  private readonly backend: Backend;
  private pool: Piscina | null = null; // started by the first SVD crossover that uses it

  /**
   * `workers` > 1 runs the SVD crossover's small factorisations on that many threads (same results).
   * `phaseEnded` hears of each SVD phase's end (bench/evolution.ts times them; nothing decides on it).
   */
  constructor(
    private readonly bank: LoraBank,
    private readonly config: LlamaConfig,
    readonly workers = 1,
    private readonly phaseEnded: (phase: SvdPhase) => void = () => {},
  ) {
    this.backend = bank.backend;
  }

  async close(): Promise<void> {
    await this.pool?.destroy();
    this.pool = null;
  }

  /** svdMixes for every module: inline, or in one contiguous chunk per worker, concatenated in order. */
  private async mixes(jobs: MixesJob[]): Promise<ReturnType<typeof mixesChunk>> {
    if (this.workers <= 1) return mixesChunk(jobs);
    const pool = (this.pool ??= new Piscina({ filename: compiledWorker(new URL('./mixes-worker.js', import.meta.url)), minThreads: this.workers, maxThreads: this.workers, idleTimeout: Infinity }));
    return (await Promise.all(contiguousChunks(jobs, this.workers).map((chunk) => pool.run(chunk) as Promise<ReturnType<typeof mixesChunk>>))).flat();
  }

  /** Every factor of every targeted module, in (layer, module, A then B) order. */
  private factors(): FactorView[] {
    const R = this.bank.rank;
    const views: FactorView[] = [];
    for (let layer = 0; layer < this.config.numLayers; layer++) {
      for (const module of LORA_MODULES.filter((m) => this.bank.targets(m))) {
        const { inFeatures, outFeatures } = loraModuleShape(this.config, module);
        const { a, b } = this.bank.factors(layer, module);
        views.push({ layer, module, factor: 0, tensor: a, slotSize: R * inFeatures, divisor: inFeatures });
        views.push({ layer, module, factor: 1, tensor: b, slotSize: outFeatures * R, divisor: 1 });
      }
    }
    return views;
  }

  private checkSlots(child: number, parents: number[]): void {
    for (const slot of parents) {
      const info = this.bank.info(slot);
      if (!info) throw new RangeError(`adapter bank slot ${slot} is empty`);
      assert(info.rank === this.bank.rank, `device evolution needs adapters at the bank's rank ${this.bank.rank} (slot ${slot} has rank ${info.rank})`);
    }
    assert(!parents.includes(child) || parents.length === 1, `the child's slot ${child} must differ from its parents'`);
  }

  /** Blends two slots into `child` per factor: weights(view) gives [c1 per component, c2 per component]. */
  private blend(child: number, slot1: number, slot2: number, weights: (view: FactorView) => number[], views = this.factors()): void {
    if (views.length === 0) return;
    const R = this.bank.rank;
    const all = this.backend.upload(Float32Array.from(views.flatMap(weights)), [views.length * 2 * R]); // one upload for every factor
    views.forEach((view, v) => this.backend.mixSlotsInPlace(view.tensor, view.slotSize, child, slot1, slot2, view.divisor, all, v * 2 * R, R));
    this.backend.free(all);
  }

  /** child ← parent + noise scaled to each factor's RMS (the parent's slot is left as it is when they differ). */
  mutate(child: number, parent: number, o: MutationOptions): void {
    this.checkSlots(child, [parent]);
    const R = this.bank.rank;
    const mutated = (view: FactorView) => (!o.modules || o.modules.includes(view.module)) && (!o.layers || o.layers.includes(view.layer));
    const views = this.factors();
    const [moved, kept] = [views.filter(mutated), views.filter((view) => !mutated(view))];
    if (child !== parent) this.blend(child, parent, parent, () => [...new Array<number>(R).fill(1), ...new Array<number>(R).fill(0)], kept);
    for (const view of moved) {
      const sums = this.backend.sumSquaresBySlot(view.tensor, view.slotSize, parent, 1);
      this.backend.mutateSlotInto(view.tensor, view.slotSize, child, parent, sums, { seed: o.seed, stream: noiseStream(view.layer, view.module, view.factor), sigma: o.sigma, fraction: o.fraction ?? 1 });
      this.backend.free(sums);
    }
    if (child !== parent) this.bank.copySettings(parent, child);
  }

  /** child ← a crossover of the adapters in slot1 and slot2 (the child keeps slot1's scale). */
  async crossover(child: number, slot1: number, slot2: number, o: CrossoverOptions): Promise<void> {
    this.checkSlots(child, [slot1, slot2]);
    const [w1, w2] = o.weights ?? [0.5, 0.5];
    if (!Number.isFinite(w1) || !Number.isFinite(w2)) throw new RangeError(`crossover weights must be finite numbers, got ${w1}, ${w2}`);
    const R = this.bank.rank;
    const scale = (slot: number) => loraScale({ ...this.bank.info(slot)!, layers: [] });
    const ratio = scale(slot2) / scale(slot1);
    const second = (view: FactorView) => (view.factor === 1 ? ratio : 1); // parent 2's B carries the scale ratio
    const components = (take1: (j: number) => boolean, view: FactorView) => {
      const first = Array.from({ length: R }, (_, j) => (take1(j) ? 1 : 0));
      return [...first, ...first.map((c) => (1 - c) * second(view))];
    };
    if (o.kind === 'module') this.blend(child, slot1, slot2, (view) => components(() => uniform(o.seed, noiseStream(view.layer, view.module, 0), 0) <= w1, view));
    else if (o.kind === 'rank') this.blend(child, slot1, slot2, (view) => components((j) => uniform(o.seed, noiseStream(view.layer, view.module, 0), j) <= w1, view));
    else if (o.kind === 'interpolate') this.blend(child, slot1, slot2, (view) => [...new Array<number>(R).fill(w1), ...new Array<number>(R).fill(w2 * second(view))]);
    else await this.svdCrossover(child, slot1, slot2, w1, w2 * ratio);
    this.bank.copySettings(slot1, child);
  }

  /** The parents' vectors of one factor, stacked ([A1; A2] rows or [B1 B2] columns), then the child's. */
  private bases(view: FactorView, slots: number[]): { bases: Int32Array; length: number; stride: number } {
    const R = this.bank.rank;
    const { inFeatures, outFeatures } = loraModuleShape(this.config, view.module);
    const bases = new Int32Array(slots.length * R);
    slots.forEach((slot, s) => {
      for (let j = 0; j < R; j++) bases[s * R + j] = view.factor === 0 ? (slot * R + j) * inFeatures : slot * outFeatures * R + j;
    });
    return { bases, length: view.factor === 0 ? inFeatures : outFeatures, stride: view.factor === 0 ? 1 : R };
  }

  private async svdCrossover(child: number, slot1: number, slot2: number, w1: number, w2: number): Promise<void> {
    const b = this.backend;
    const R = this.bank.rank;
    const n = 2 * R;
    const views = this.factors();
    // Every factor's Gram matrix in one tensor, read back once; every factor's bases in one upload.
    const gramBases = views.map((view) => this.bases(view, [slot1, slot2]));
    const allGramBases = b.uploadI32(concatenate(Int32Array, gramBases.map((g) => g.bases)), [views.length * n]);
    const grams = b.zeros([views.length, n, n]);
    b.gramsInto(grams, allGramBases, gramBases.map(({ length, stride }, v) => ({ x: views[v]!.tensor, first: v * n, n, length, stride, outOffset: v * n * n })));
    b.free(allGramBases);
    this.phaseEnded('gramsRecorded');
    const values = await b.readF32(grams);
    b.free(grams);
    this.phaseEnded('grams');
    const gramOf = (v: number) => Float64Array.from(values.subarray(v * n * n, (v + 1) * n * n));
    const jobs: MixesJob[] = [];
    for (let v = 0; v < views.length; v += 2) jobs.push({ gramB: gramOf(v + 1), gramA: gramOf(v), r: R, w1, w2 });
    const mixes = await this.mixes(jobs);
    this.phaseEnded('mixes');
    // When a blend has rank below R, the child's region is cleared first: its columns (B) and rows (A) past that
    // rank stay zero. (At full rank the combine writes every one of them.)
    if (mixes.some(({ mixB, mixA }) => mixB.cols < R || mixA.cols < R)) this.blend(child, slot1, slot2, () => new Array<number>(2 * R).fill(0));
    // views[v] is a module's A, views[v + 1] its B: their mixes, and the parents' then the child's vectors.
    const parts = views.map((view, v) => {
      const mix = v % 2 === 0 ? mixes[v / 2]!.mixA : mixes[(v - 1) / 2]!.mixB;
      const { bases, length, stride } = this.bases(view, [slot1, slot2, child]);
      return { view, mix, bases: bases.subarray(0, n + mix.cols), length, stride };
    });
    let [basesAt, mixAt] = [0, 0];
    const offsets = parts.map((p) => {
      const at = { bases: basesAt, mix: mixAt };
      [basesAt, mixAt] = [basesAt + p.bases.length, mixAt + p.mix.data.length];
      return at;
    });
    const allBases = b.uploadI32(concatenate(Int32Array, parts.map((p) => p.bases)), [basesAt]);
    const allMixes = b.upload(concatenate(Float32Array, parts.map((p) => p.mix.data)), [mixAt]);
    parts.forEach((p, i) => b.combineInPlace(p.view.tensor, allBases, offsets[i]!.bases, allMixes, offsets[i]!.mix, n, p.mix.cols, p.length, p.stride));
    b.free(allBases);
    b.free(allMixes);
  }
}
