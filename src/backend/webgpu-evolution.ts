// The WebGPU backend's evolution ops (backend.ts, "Evolution ops"): one dispatch of a kernels/evolve_*.wgsl each
// (for the Grams: one per Gram, then one for many).
// Semantics and addressing are those of cpu-evolution.ts.

import { assert, numel, type GramOfVectors, type SlotMutation, type Tensor } from './backend.js';
import type { GpuContext } from './webgpu-backward.js';

/** kernels/evolve_gram.wgsl's TILE: floats of workgroup memory for one chunk of the stacked vectors. */
const GRAM_TILE = 4096;
/** Floats of partial Gram sums per reduce pass (64 MiB): a rank-16 7B-shaped adapter's 448 Grams need 10.7 M. */
const PARTIAL_BUDGET = 1 << 24;

export class EvolutionKernels {
  constructor(private readonly g: GpuContext) {}

  private checkSlots(x: Tensor, slotSize: number, slots: number[], what: string): void {
    for (const slot of slots) assert(Number.isInteger(slot) && slot >= 0 && (slot + 1) * slotSize <= numel(x.shape), `${what}: slot ${slot} of ${slotSize} is outside a tensor of ${numel(x.shape)}`);
  }

  mutateSlotInto(x: Tensor, slotSize: number, child: number, parent: number, sums: Tensor, o: SlotMutation): void {
    this.checkSlots(x, slotSize, [child, parent], 'mutateSlotInto');
    const fields = { slotSize, child, parent, seed: o.seed >>> 0, stream: o.stream >>> 0, sigma: o.sigma, fraction: o.fraction };
    this.g.recorder.dispatch('evolve_mutate', {}, fields, [this.g.f32(x, 'mutateSlotInto: x'), this.g.f32(sums, 'mutateSlotInto: sums')], Math.ceil(slotSize / 2 / 256));
  }

  mixSlotsInPlace(x: Tensor, slotSize: number, outSlot: number, slot1: number, slot2: number, divisor: number, weights: Tensor, w: number, R: number): void {
    this.checkSlots(x, slotSize, [outSlot, slot1, slot2], 'mixSlotsInPlace');
    assert(outSlot !== slot1 && outSlot !== slot2, 'mixSlotsInPlace: the child slot must differ from its parents');
    assert(w + 2 * R <= numel(weights.shape), `mixSlotsInPlace: 2 · ${R} weights from ${w} do not fit ${numel(weights.shape)}`);
    const fields = { S: slotSize, outSlot, slot1, slot2, divisor, R, w };
    this.g.recorder.dispatch('evolve_mix', {}, fields, [this.g.f32(x, 'mixSlotsInPlace: x'), this.g.f32(weights, 'mixSlotsInPlace: weights')], Math.ceil(slotSize / 256));
  }

  /**
   * Two passes: partial Grams over chunks of k (each value read once), one dispatch per Gram; then one dispatch
   * adds every Gram's chunks, in order, for as many Grams as fit PARTIAL_BUDGET floats of partial sums.
   */
  gramsInto(out: Tensor, bases: Tensor, grams: readonly GramOfVectors[]): void {
    const plans = grams.map((g) => {
      assert(g.outOffset + g.n * g.n <= numel(out.shape) && g.first + g.n <= numel(bases.shape), `gramsInto: ${g.n}x${g.n} at ${g.outOffset} does not fit ${numel(out.shape)}, or fewer than ${g.n} bases from ${g.first}`);
      assert(g.n + 1 <= GRAM_TILE, `gramsInto: ${g.n} vectors do not fit the kernel's tile of ${GRAM_TILE} values per k`);
      const chunk = Math.floor(GRAM_TILE / (g.n + 1));
      return { ...g, chunk, chunks: Math.ceil(g.length / chunk), pairs: (g.n * (g.n + 1)) / 2 };
    });
    let group: typeof plans = [];
    let floats = 0;
    for (const plan of plans) {
      if (group.length > 0 && floats + plan.chunks * plan.pairs > PARTIAL_BUDGET) {
        this.gramGroup(out, bases, group);
        [group, floats] = [[], 0];
      }
      group.push(plan);
      floats += plan.chunks * plan.pairs;
    }
    if (group.length > 0) this.gramGroup(out, bases, group);
  }

  private gramGroup(out: Tensor, bases: Tensor, group: Array<GramOfVectors & { chunk: number; chunks: number; pairs: number }>): void {
    assert(group.length <= 65535, `gramsInto: ${group.length} Grams in one pass, over 65535`);
    const partial = this.g.output([group.reduce((sum, p) => sum + p.chunks * p.pairs, 0)]);
    const table = new Int32Array(group.length * 4); // per Gram: partial offset, chunks, n, out offset
    let offset = 0;
    group.forEach((p, i) => {
      const fields = { n: p.n, length: p.length, stride: p.stride, first: p.first, chunk: p.chunk, partialOffset: offset };
      this.g.recorder.dispatch('evolve_gram', {}, fields, [this.g.f32(p.x, 'gramsInto: x'), this.g.i32(bases, numel(bases.shape), 'gramsInto: bases'), partial], p.chunks);
      table.set([offset, p.chunks, p.n, p.outOffset], i * 4);
      offset += p.chunks * p.pairs;
    });
    const tableTensor = this.g.uploadI32(table, [table.length]);
    const maxPairs = Math.max(...group.map((p) => p.pairs));
    const bindings = [this.g.i32(tableTensor, table.length, 'gramsInto: table'), partial, this.g.f32(out, 'gramsInto: out')];
    this.g.recorder.dispatch('evolve_gram_reduce', {}, { grams: group.length }, bindings, [Math.ceil(maxPairs / 256), group.length]);
    this.g.free(tableTensor); // later uses of these pooled buffers are recorded after these dispatches
    this.g.free(partial);
  }

  combineInPlace(x: Tensor, bases: Tensor, b: number, mix: Tensor, m: number, n: number, keep: number, length: number, stride: number): void {
    assert(m + n * keep <= numel(mix.shape) && b + n + keep <= numel(bases.shape), `combineInPlace: ${n * keep} mix values from ${m} or ${n + keep} bases from ${b} do not fit`);
    const fields = { n, keep, length, stride, b, m };
    const bindings = [this.g.f32(x, 'combineInPlace: x'), this.g.i32(bases, numel(bases.shape), 'combineInPlace: bases'), this.g.f32(mix, 'combineInPlace: mix')];
    this.g.recorder.dispatch('evolve_combine', {}, fields, bindings, Math.ceil((keep * length) / 256));
  }
}
