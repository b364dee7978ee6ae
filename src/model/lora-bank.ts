// The adapter bank: up to `capacity` LoRA adapters resident on the device at once, so that one forward call
// serves a batch whose sequences each use a different adapter (Punica/vLLM multi-LoRA).
//
// Per (layer, targeted module), with R the bank's rank and S its capacity:
//   a: [S·R, in]   rows s·R .. s·R+R-1 hold adapter s's A  (PEFT lora_A: [r, in])
//   b: [S·out, R]  rows s·out .. hold adapter s's B          (PEFT lora_B: [out, r])
//   scales: [S]    alpha / r (or alpha / √r with rsLoRA)
// An adapter of rank r < R is zero-padded, which leaves its delta B·A unchanged; a module the adapter does
// not target is all zeros.
//   y += scale[s] · (x · Aₛᵀ) · Bₛᵀ     as two kernels: shrink h = x·Aᵀ [T, R], expand y += scale·h·Bᵀ [T, out]
//
// The modules of one fused linear (LINEAR_GROUPS: q|k|v, gate|up share their input) keep their factors packed:
// one tensor holds the group's A factors (one shrink for the group), one its B factors (read by the linear's
// epilogue); `factors` gives each module's views of them.

import { assert, uploadPacked, type Backend, type Packed, type Tensor } from '../backend/backend.js';
import type { LlamaConfig } from './config.js';
import { loraModuleShape, loraScale, type LoraAdapter, type LoraModule } from './peft.js';

export interface ModuleBank {
  a: Tensor;
  b: Tensor;
}

/** The modules each fused linear of a decoder layer computes (llama.ts), in the order of its parts. */
export const LINEAR_GROUPS = {
  qkv: ['q_proj', 'k_proj', 'v_proj'],
  o: ['o_proj'],
  gateUp: ['gate_proj', 'up_proj'],
  down: ['down_proj'],
} as const satisfies Record<string, readonly LoraModule[]>;
export type LinearGroup = keyof typeof LINEAR_GROUPS;

/** A group's factors: the targeted modules' A [S·R, in] and B [S·out, R], packed in the group's order. */
export interface GroupBank {
  a: Packed;
  b: Packed;
  /** For each module of the group: its part in a and b, or -1 where the bank does not target it. */
  of: number[];
}

type SlotInfo = Omit<LoraAdapter, 'layers'>;

export class LoraBank {
  private readonly groups = new Map<string, GroupBank>(); // key: `${layer}.${first module of the group}`
  private readonly banks = new Map<string, ModuleBank>(); // key: `${layer}.${module}`: views of the groups
  private readonly scales: Tensor;
  private readonly slotInfo: (SlotInfo | null)[];

  constructor(
    readonly backend: Backend,
    private readonly config: LlamaConfig,
    readonly capacity: number,
    readonly rank: number,
    readonly modules: readonly LoraModule[],
  ) {
    assert(capacity > 0 && rank > 0, `a LoRA bank needs capacity and rank > 0 (got ${capacity}, ${rank})`);
    for (let layer = 0; layer < config.numLayers; layer++) {
      for (const group of Object.values(LINEAR_GROUPS) as (readonly LoraModule[])[]) {
        const targeted = group.filter((m) => modules.includes(m));
        if (targeted.length === 0) continue;
        const shapes = targeted.map((m) => loraModuleShape(config, m));
        const a = uploadPacked(backend, shapes.map(() => ({ rows: capacity * rank })), [shapes[0]!.inFeatures], 'f32');
        const b = uploadPacked(backend, shapes.map((shape) => ({ rows: capacity * shape.outFeatures })), [rank], 'f32');
        this.groups.set(`${layer}.${group[0]}`, { a, b, of: group.map((m) => targeted.indexOf(m)) });
      }
      for (const module of modules) { // in the bank's module order, as adapters are read back
        const group: readonly LoraModule[] = Object.values(LINEAR_GROUPS).find((g: readonly LoraModule[]) => g.includes(module))!;
        const { a, b, of } = this.groups.get(`${layer}.${group[0]}`)!;
        const part = of[group.indexOf(module)]!;
        this.banks.set(`${layer}.${module}`, { a: a.parts[part]!, b: b.parts[part]! });
      }
    }
    this.scales = backend.zeros([capacity]);
    this.slotInfo = new Array<SlotInfo | null>(capacity).fill(null);
  }

  targets(module: LoraModule): boolean {
    return this.modules.includes(module);
  }

  /** Copies an adapter into a slot, replacing what was there. */
  load(slot: number, adapter: LoraAdapter): void {
    this.checkSlot(slot);
    if (adapter.rank > this.rank) {
      throw new RangeError(`adapter rank ${adapter.rank} exceeds the bank's rank ${this.rank}: create the bank with rank >= ${adapter.rank}`);
    }
    const untargeted = adapter.targetModules.filter((m) => !this.targets(m));
    if (untargeted.length > 0) {
      throw new RangeError(`adapter targets ${untargeted.join(', ')}, which the bank does not hold (bank modules: ${this.modules.join(', ')})`);
    }
    assert(adapter.layers.length === this.config.numLayers, `adapter has ${adapter.layers.length} layers, the model ${this.config.numLayers}`);
    const r = adapter.rank;
    const R = this.rank;
    for (const [key, bank] of this.banks) {
      const [layerText, module] = key.split('.') as [string, LoraModule];
      const { inFeatures, outFeatures } = loraModuleShape(this.config, module);
      const factors = adapter.layers[Number(layerText)]![module];
      const a = new Float32Array(R * inFeatures); // rows r..R stay zero
      const b = new Float32Array(outFeatures * R); // columns r..R stay zero
      if (factors) {
        a.set(factors.a);
        for (let n = 0; n < outFeatures; n++) b.set(factors.b.subarray(n * r, (n + 1) * r), n * R);
      }
      this.backend.write(bank.a, a, slot * R * inFeatures);
      this.backend.write(bank.b, b, slot * outFeatures * R);
    }
    this.backend.write(this.scales, new Float32Array([loraScale(adapter)]), slot);
    const { layers: _, ...info } = adapter;
    this.slotInfo[slot] = { ...info, targetModules: [...info.targetModules] };
  }

  /** A slot's adapter settings (rank, alpha, modules), or null when empty. */
  info(slot: number): Omit<LoraAdapter, 'layers'> | null {
    this.checkSlot(slot);
    return this.slotInfo[slot] ?? null;
  }

  /** Gives slot `to` the settings and scale of slot `from` (a child made on the device keeps its parent's). */
  copySettings(from: number, to: number): void {
    const info = this.info(from);
    if (!info) throw new RangeError(`adapter bank slot ${from} is empty`);
    this.checkSlot(to);
    this.backend.write(this.scales, new Float32Array([loraScale({ ...info, layers: [] })]), to);
    this.slotInfo[to] = { ...info, targetModules: [...info.targetModules] };
  }

  /** Reads a slot's adapter back from the device (at its own rank, as loaded). */
  async read(slot: number): Promise<LoraAdapter> {
    return (await this.readSlots([slot]))[0]!;
  }

  /** Reads slots' adapters back, each of the bank's tensors once for all of them (a checkpoint of a real-size bank). */
  readSlots(slots: readonly number[]): Promise<LoraAdapter[]> {
    return this.readSlotsOf(slots, (layer, module) => this.factors(layer, module));
  }

  /**
   * Reads one slot out of tensors laid out like the bank's factors (such as their gradients), as an adapter of
   * the slot's own rank and modules.
   */
  async readSlotOf(slot: number, source: (layer: number, module: LoraModule) => ModuleBank): Promise<LoraAdapter> {
    return (await this.readSlotsOf([slot], source))[0]!;
  }

  private async readSlotsOf(slots: readonly number[], source: (layer: number, module: LoraModule) => ModuleBank): Promise<LoraAdapter[]> {
    const infos = slots.map((slot) => {
      this.checkSlot(slot);
      const info = this.slotInfo[slot];
      if (!info) throw new RangeError(`adapter bank slot ${slot} is empty`);
      return info;
    });
    const R = this.rank;
    const layersOf = slots.map((): LoraAdapter['layers'] => Array.from({ length: this.config.numLayers }, () => ({})));
    for (const key of this.banks.keys()) {
      const [layerText, module] = key.split('.') as [string, LoraModule];
      if (!infos.some((info) => info.targetModules.includes(module))) continue;
      const { inFeatures, outFeatures } = loraModuleShape(this.config, module);
      const bank = source(Number(layerText), module);
      const aAll = await this.backend.readF32(bank.a);
      const bAll = await this.backend.readF32(bank.b);
      slots.forEach((slot, i) => {
        const r = infos[i]!.rank;
        if (!infos[i]!.targetModules.includes(module)) return;
        const a = aAll.slice(slot * R * inFeatures, (slot * R + r) * inFeatures);
        const b = new Float32Array(outFeatures * r);
        for (let n = 0; n < outFeatures; n++) {
          const row = (slot * outFeatures + n) * R;
          b.set(bAll.subarray(row, row + r), n * r);
        }
        layersOf[i]![Number(layerText)]![module] = { a, b };
      });
    }
    return infos.map((info, i) => ({ ...info, targetModules: [...info.targetModules], layers: layersOf[i]! }));
  }

  /** The factors of every slot for one (layer, module): a [S·R, in], b [S·out, R] (the trainer updates them). */
  factors(layer: number, module: LoraModule): ModuleBank {
    const bank = this.banks.get(`${layer}.${module}`);
    assert(bank, `the LoRA bank holds no ${module} at layer ${layer}`);
    return bank;
  }

  /** The packed factors of a fused linear's modules, or undefined when the bank targets none of them. */
  group(layer: number, group: LinearGroup): GroupBank | undefined {
    return this.groups.get(`${layer}.${LINEAR_GROUPS[group][0]}`);
  }

  /** Per-slot LoRA scales [S] (alpha / r). */
  get scaleTensor(): Tensor {
    return this.scales;
  }

  /** The slots that hold an adapter. */
  occupiedSlots(): number[] {
    return this.slotInfo.flatMap((info, slot) => (info ? [slot] : []));
  }

  /** y += scale · (x·Aᵀ)·Bᵀ for every row whose adapter slot is >= 0.   x: [T, in], y: [T, out] */
  apply(y: Tensor, x: Tensor, layer: number, module: LoraModule, adapters: Tensor): void {
    const bank = this.factors(layer, module);
    const h = this.backend.loraShrink(x, bank.a, adapters, this.rank); // h: [T, R]
    this.backend.loraExpandInPlace(y, h, bank.b, adapters, this.scales);
    this.backend.free(h);
  }

  destroy(): void {
    for (const group of this.groups.values()) {
      this.backend.free(group.a.whole);
      this.backend.free(group.b.whole);
    }
    this.backend.free(this.scales);
  }

  private checkSlot(slot: number): void {
    if (!Number.isInteger(slot) || slot < 0 || slot >= this.capacity) {
      throw new RangeError(`adapter bank slot ${slot} outside [0, ${this.capacity})`);
    }
  }
}
