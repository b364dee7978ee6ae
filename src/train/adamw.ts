// AdamW on the device, one optimizer over many parameter tensors that each hold S "slots" (the LoRA bank: a
// slot per adapter, laid out contiguously; full-parameter training: one slot per tensor). Per slot: its own step
// count, learning rate, and gradient clipping by the slot's global norm over all tensors (Loshchilov & Hutter's
// decoupled weight decay; PyTorch's AdamW update). Deterministic: norms are summed in key order on the host.

import { assert, numel, type AdamWHyper, type Backend, type Tensor } from '../backend/backend.js';
import { LORA_MODULES } from '../model/peft.js';
import type { LoraBank } from '../model/lora-bank.js';
import { loraGradKey, type Gradients } from './llama-backward.js';

export interface AdamWOptions extends Partial<AdamWHyper> {
  lr: number;
  /** Clip each slot's gradient to this global L2 norm (DESIGN.md default 1.0); none when absent. */
  maxGradNorm?: number;
}

export interface Parameter {
  tensor: Tensor;
  slotSize: number; // elements per slot; numel(tensor) = slots · slotSize
}

interface State extends Parameter {
  m: Tensor;
  v: Tensor;
}

export interface AdamWState {
  moments: Record<string, { m: Float32Array; v: Float32Array }>;
  steps: number[];
}

/** One slot's part of an AdamWState: its slice of each moment, and its step count. */
export interface AdamWSlotState {
  moments: Record<string, { m: Float32Array; v: Float32Array }>;
  steps: number;
}

/** The whole state from every slot's part, in slot order (what `exportState` gives for the same slots). */
export function joinSlotStates(slots: readonly AdamWSlotState[]): AdamWState {
  const keys = Object.keys(slots[0]?.moments ?? {});
  const moments: AdamWState['moments'] = {};
  for (const key of keys) {
    const size = slots[0]!.moments[key]!.m.length;
    const [m, v] = [new Float32Array(slots.length * size), new Float32Array(slots.length * size)];
    slots.forEach((slot, i) => {
      m.set(slot.moments[key]!.m, i * size);
      v.set(slot.moments[key]!.v, i * size);
    });
    moments[key] = { m, v };
  }
  return { moments, steps: slots.map((s) => s.steps) };
}

/** Slot `slot`'s part of a whole state. */
export function slotStateOf(state: AdamWState, slot: number): AdamWSlotState {
  const moments: AdamWSlotState['moments'] = {};
  for (const [key, { m, v }] of Object.entries(state.moments)) {
    const size = m.length / state.steps.length;
    moments[key] = { m: m.slice(slot * size, (slot + 1) * size), v: v.slice(slot * size, (slot + 1) * size) };
  }
  return { moments, steps: state.steps[slot]! };
}

export interface AdamWStepReport {
  /** Per active slot, the gradient's global L2 norm before clipping. */
  gradNorms: Map<number, number>;
}

export class AdamW {
  private readonly states = new Map<string, State>();
  private readonly steps: number[];
  readonly hyper: AdamWHyper;

  constructor(
    private readonly backend: Backend,
    parameters: Map<string, Parameter>,
    readonly slots: number,
    readonly options: AdamWOptions,
  ) {
    assert(options.lr >= 0 && Number.isFinite(options.lr), `AdamW: lr must be a finite number >= 0 (got ${options.lr})`);
    this.hyper = { beta1: options.beta1 ?? 0.9, beta2: options.beta2 ?? 0.999, eps: options.eps ?? 1e-8, weightDecay: options.weightDecay ?? 0 };
    for (const [key, p] of [...parameters].sort(([a], [b]) => (a < b ? -1 : 1))) {
      assert(numel(p.tensor.shape) === slots * p.slotSize, `AdamW: ${key} has ${numel(p.tensor.shape)} elements, not ${slots} slots of ${p.slotSize}`);
      this.states.set(key, { ...p, m: backend.zeros(p.tensor.shape), v: backend.zeros(p.tensor.shape) });
    }
    this.steps = new Array<number>(slots).fill(0);
  }

  /** Every LoRA factor of the bank, one slot per adapter. */
  static forBank(backend: Backend, bank: LoraBank, numLayers: number, options: AdamWOptions): AdamW {
    const parameters = new Map<string, Parameter>();
    for (let layer = 0; layer < numLayers; layer++) {
      for (const module of LORA_MODULES.filter((m) => bank.targets(m))) {
        const { a, b } = bank.factors(layer, module);
        parameters.set(loraGradKey(layer, module, 'a'), { tensor: a, slotSize: numel(a.shape) / bank.capacity });
        parameters.set(loraGradKey(layer, module, 'b'), { tensor: b, slotSize: numel(b.shape) / bank.capacity });
      }
    }
    return new AdamW(backend, parameters, bank.capacity, options);
  }

  /** Whole tensors, one slot each (full-parameter training). */
  static forTensors(backend: Backend, tensors: Map<string, Tensor>, options: AdamWOptions): AdamW {
    return new AdamW(backend, new Map([...tensors].map(([key, t]) => [key, { tensor: t, slotSize: numel(t.shape) }])), 1, options);
  }

  stepCount(slot: number): number {
    return this.steps[slot]!;
  }

  /** One update of the `active` slots from `grads` (keys as the parameters'); other slots are untouched. */
  async step(grads: Gradients, active: readonly number[], lr = this.options.lr): Promise<AdamWStepReport> {
    for (const key of grads.keys()) assert(this.states.has(key), `AdamW: a gradient for ${key}, which is not a parameter`);
    const keys = [...this.states.keys()].filter((k) => grads.has(k));
    const squares = await Promise.all(keys.map(async (key) => {
      const sums = this.backend.sumSquaresBySlot(grads.get(key)!, this.states.get(key)!.slotSize);
      const values = await this.backend.readF32(sums);
      this.backend.free(sums);
      return values;
    }));
    const slotParams = new Float32Array(this.slots * 4);
    const gradNorms = new Map<number, number>();
    for (const slot of [...new Set(active)].sort((a, b) => a - b)) {
      assert(slot >= 0 && slot < this.slots, `AdamW: slot ${slot} outside [0, ${this.slots})`);
      const norm = Math.sqrt(squares.reduce((sum, values) => sum + values[slot]!, 0));
      if (!Number.isFinite(norm)) throw new RangeError(`AdamW: the gradient of slot ${slot} is not finite (norm ${norm}); the step was not applied`);
      gradNorms.set(slot, norm);
      const step = ++this.steps[slot]!;
      const clip = this.options.maxGradNorm !== undefined && norm > this.options.maxGradNorm ? this.options.maxGradNorm / (norm + 1e-6) : 1;
      slotParams.set([lr, clip, 1 / (1 - this.hyper.beta1 ** step), 1 / (1 - this.hyper.beta2 ** step)], slot * 4);
    }
    const slotTensor = this.backend.upload(slotParams, [this.slots, 4]);
    for (const key of keys) {
      const s = this.states.get(key)!;
      this.backend.adamwInPlace(s.tensor, grads.get(key)!, s.m, s.v, s.slotSize, slotTensor, this.hyper);
    }
    this.backend.free(slotTensor);
    return { gradNorms };
  }

  /** Zeroes a slot's moments and step count (a new adapter in the slot starts fresh). */
  resetSlot(slot: number): void {
    for (const s of this.states.values()) {
      const zeros = new Float32Array(s.slotSize);
      this.backend.write(s.m, zeros, slot * s.slotSize);
      this.backend.write(s.v, zeros, slot * s.slotSize);
    }
    this.steps[slot] = 0;
  }

  /** Copies a slot's moments and step count into another (a child inheriting its parent's optimizer state). */
  async copySlot(from: number, to: number): Promise<void> {
    for (const s of this.states.values()) {
      for (const moment of [s.m, s.v]) {
        const values = await this.backend.readF32(moment);
        this.backend.write(moment, values.slice(from * s.slotSize, (from + 1) * s.slotSize), to * s.slotSize);
      }
    }
    this.steps[to] = this.steps[from]!;
  }

  /** Some slots' moments and step counts, exactly (a checkpoint, or a slot moved to another engine worker). */
  async exportSlots(slots: readonly number[]): Promise<AdamWSlotState[]> {
    const states: AdamWSlotState[] = slots.map((slot) => ({ moments: {}, steps: this.steps[slot]! }));
    for (const [key, s] of this.states) {
      const [m, v] = [await this.backend.readF32(s.m), await this.backend.readF32(s.v)];
      slots.forEach((slot, i) => {
        states[i]!.moments[key] = { m: m.slice(slot * s.slotSize, (slot + 1) * s.slotSize), v: v.slice(slot * s.slotSize, (slot + 1) * s.slotSize) };
      });
    }
    return states;
  }

  importSlot(slot: number, state: AdamWSlotState): void {
    for (const [key, s] of this.states) {
      const saved = state.moments[key];
      assert(saved !== undefined && saved.m.length === s.slotSize && saved.v.length === s.slotSize, `AdamW: the slot state has no ${key} of ${s.slotSize} elements`);
      this.backend.write(s.m, saved.m, slot * s.slotSize);
      this.backend.write(s.v, saved.v, slot * s.slotSize);
    }
    this.steps[slot] = state.steps;
  }

  /** Moments and step counts, exactly (a run's checkpoint). */
  async exportState(): Promise<AdamWState> {
    const moments: AdamWState['moments'] = {};
    for (const [key, s] of this.states) moments[key] = { m: await this.backend.readF32(s.m), v: await this.backend.readF32(s.v) };
    return { moments, steps: [...this.steps] };
  }

  importState(state: AdamWState): void {
    for (const [key, s] of this.states) {
      const saved = state.moments[key];
      assert(saved !== undefined && saved.m.length === numel(s.m.shape) && saved.v.length === numel(s.v.shape), `AdamW: the saved state has no ${key} of ${numel(s.m.shape)} elements`);
      this.backend.write(s.m, saved.m, 0);
      this.backend.write(s.v, saved.v, 0);
    }
    assert(state.steps.length === this.slots, `AdamW: the saved state has ${state.steps.length} slots, not ${this.slots}`);
    this.steps.splice(0, this.slots, ...state.steps);
  }

  destroy(): void {
    for (const s of this.states.values()) [s.m, s.v].forEach((t) => this.backend.free(t));
  }
}
