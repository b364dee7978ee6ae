// The WebGPU backend's evolution ops (backend.ts, "Evolution ops"): one dispatch of a kernels/evolve_*.wgsl each
// (two for the Gram).
// Semantics and addressing are those of cpu-evolution.ts.

import { assert, numel, type SlotMutation, type Tensor } from './backend.js';
import type { GpuContext } from './webgpu-backward.js';
import type { Field } from './webgpu-recorder.js';

/** kernels/evolve_gram.wgsl's TILE: floats of workgroup memory for one chunk of the stacked vectors. */
const GRAM_TILE = 4096;

export class EvolutionKernels {
  constructor(private readonly g: GpuContext) {}

  private checkSlots(x: Tensor, slotSize: number, slots: number[], what: string): void {
    for (const slot of slots) assert(Number.isInteger(slot) && slot >= 0 && (slot + 1) * slotSize <= numel(x.shape), `${what}: slot ${slot} of ${slotSize} is outside a tensor of ${numel(x.shape)}`);
  }

  mutateSlotInto(x: Tensor, slotSize: number, child: number, parent: number, sums: Tensor, o: SlotMutation): void {
    this.checkSlots(x, slotSize, [child, parent], 'mutateSlotInto');
    const fields: Field[] = [['u32', slotSize], ['u32', child], ['u32', parent], ['u32', o.seed >>> 0], ['u32', o.stream >>> 0], ['f32', o.sigma], ['f32', o.fraction]];
    this.g.recorder.dispatch('evolve_mutate', {}, fields, [this.g.f32(x, 'mutateSlotInto: x'), this.g.f32(sums, 'mutateSlotInto: sums')], Math.ceil(slotSize / 2 / 256));
  }

  mixSlotsInPlace(x: Tensor, slotSize: number, outSlot: number, slot1: number, slot2: number, divisor: number, weights: Tensor): void {
    this.checkSlots(x, slotSize, [outSlot, slot1, slot2], 'mixSlotsInPlace');
    assert(outSlot !== slot1 && outSlot !== slot2, 'mixSlotsInPlace: the child slot must differ from its parents');
    const fields: Field[] = [['u32', slotSize], ['u32', outSlot], ['u32', slot1], ['u32', slot2], ['u32', divisor], ['u32', numel(weights.shape) / 2]];
    this.g.recorder.dispatch('evolve_mix', {}, fields, [this.g.f32(x, 'mixSlotsInPlace: x'), this.g.f32(weights, 'mixSlotsInPlace: weights')], Math.ceil(slotSize / 256));
  }

  /** Two passes: partial Grams over chunks of k (each value read once), then the chunks added in order. */
  gramInto(out: Tensor, outOffset: number, x: Tensor, bases: Tensor, first: number, n: number, length: number, stride: number): void {
    assert(outOffset + n * n <= numel(out.shape) && first + n <= numel(bases.shape), `gramInto: ${n}x${n} at ${outOffset} does not fit ${numel(out.shape)}, or fewer than ${n} bases from ${first}`);
    assert(n + 1 <= GRAM_TILE, `gramInto: ${n} vectors do not fit the kernel's tile of ${GRAM_TILE} values per k`);
    const chunk = Math.floor(GRAM_TILE / (n + 1));
    const chunks = Math.ceil(length / chunk);
    const pairs = (n * (n + 1)) / 2;
    const partial = this.g.output([chunks * pairs]);
    const fields: Field[] = [['u32', n], ['u32', length], ['u32', stride], ['u32', first], ['u32', chunk]];
    this.g.recorder.dispatch('evolve_gram', {}, fields, [this.g.f32(x, 'gramInto: x'), this.g.i32(bases, numel(bases.shape), 'gramInto: bases'), partial], chunks);
    this.g.recorder.dispatch('evolve_gram_reduce', {}, [['u32', n], ['u32', chunks], ['u32', outOffset]], [partial, this.g.f32(out, 'gramInto: out')], Math.ceil(pairs / 256));
    this.g.free(partial); // a later use of the pooled buffer is recorded after these dispatches
  }

  combineInPlace(x: Tensor, bases: Tensor, b: number, mix: Tensor, m: number, n: number, keep: number, length: number, stride: number): void {
    assert(m + n * keep <= numel(mix.shape) && b + n + keep <= numel(bases.shape), `combineInPlace: ${n * keep} mix values from ${m} or ${n + keep} bases from ${b} do not fit`);
    const fields: Field[] = [['u32', n], ['u32', keep], ['u32', length], ['u32', stride], ['u32', b], ['u32', m]];
    const bindings = [this.g.f32(x, 'combineInPlace: x'), this.g.i32(bases, numel(bases.shape), 'combineInPlace: bases'), this.g.f32(mix, 'combineInPlace: mix')];
    this.g.recorder.dispatch('evolve_combine', {}, fields, bindings, Math.ceil((keep * length) / 256));
  }
}
