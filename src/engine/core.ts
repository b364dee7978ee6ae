// What the engine computes, behind one interface: generation, the RL update and evolution over a bank of LoRA
// slots. The engine actor (actors/engine.ts) queues the requests and calls a core at the barrier. The core is the
// model in this process (LocalEngineCore, below), or engine workers over NATS, each holding a shard of the slots
// (src/cluster/remote-engine.ts). Both give the same bits:
//   - the kernels are batch-invariant and a token's draw is keyed by (seed, request id, position), so a request
//     yields the same tokens in any batch;
//   - gradients, their clipping and the optimizer state are per slot (objective.ts reduces per adapter);
//   - the training report is summed per sample, in sample order, by the actor (not inside one batch's loop);
//   - generation and training run in micro-batches under the core's memory budget (budget.ts), which changes no bit.
//
// Slots are numbered across the whole population ("global" slots). A local core holds some of them in its bank,
// in order, plus `scratch` slots for parents that live on another worker (evolution across shards).

import { assert } from '../backend/backend.js';
import type { Domain, FormatName } from '../domains/domain.js';
import { BankEvolution } from '../evolution/device-operators.js';
import type { CrossoverKind } from '../evolution/operators.js';
import type { ChildMaker } from '../evolution/registry.js';
import { generate, type GenerationRequest, type GenerationResult } from '../model/generate.js';
import type { LlamaModel } from '../model/llama.js';
import { LoraBank } from '../model/lora-bank.js';
import type { LoraAdapter, LoraModule } from '../model/peft.js';
import type { TokenTexts } from '../model/token-texts.js';
import { AdamW, joinSlotStates, slotStateOf, type AdamWSlotState, type AdamWState } from '../train/adamw.js';
import { LlamaTrainer } from '../train/llama-backward.js';
import type { PolicyGradientOptions } from '../train/objective.js';
import { policyGradientStep, type RlSample } from '../train/steps.js';
import { resolveBudget, type BatchTokensSetting, type MicroBatchBudget } from './budget.js';
import type { Pacer } from './pacer.js';

export interface ChildSpec {
  slot: number;
  parentSlots: number[]; // one (mutation) or two (crossover), fitter first
  operator: 'mutate' | 'crossover';
  seed: number;
  inheritOptimizerFrom: number | null; // a parent's slot, or null for fresh moments
}

export interface EvolveSpec {
  children: ChildSpec[];
  sigma: number;
  crossover: CrossoverKind | string; // a plug-in's name: the core runs its settings' operator (CoreSettings.operators)
}

/** One training sample's share of the step's report. */
export interface SampleLoss {
  loss: number;
  entropy: number; // summed over its trained tokens
  tokens: number;
}

export interface TrainResult {
  perSample: SampleLoss[]; // in the samples' order
  gradNorms: Array<[slot: number, norm: number]>; // ascending slots
}

/** A slot's whole state: what moves when a slot changes worker. */
export interface SlotState {
  adapter: LoraAdapter;
  optimizer: AdamWSlotState;
}

export interface EngineCore {
  /** Tokens for each request (under its format's token mask, where the domain has one), in request order. */
  generate(requests: readonly GenerationRequest[], formats: ReadonlyArray<FormatName | null>): Promise<GenerationResult[]>;
  /** One policy-gradient update of every adapter the samples name. */
  train(samples: readonly RlSample[]): Promise<TrainResult>;
  /** Each child made in its slot from its parents' (a parent is never a slot being replaced). */
  evolve(spec: EvolveSpec): Promise<void>;
  /** Every slot's adapter (by global slot) and, on a resume, the optimizer state. */
  load(adapters: readonly LoraAdapter[], optimizer: AdamWState | null): Promise<void>;
  /** Every slot's adapter and the optimizer state, exactly (a checkpoint). */
  state(): Promise<{ adapters: LoraAdapter[]; optimizer: AdamWState }>;
  close(): Promise<void>;
}

export interface CoreSettings {
  domain: Domain; // its token masks constrain the generations
  vocab: TokenTexts;
  rl: PolicyGradientOptions;
  optimizer: { lr: number; maxGradNorm: number };
  lora: { rank: number; modules: readonly LoraModule[] };
  evolutionThreads: number; // > 1: the SVD crossover's factorisations on a worker pool (the same children)
  operators?: { mutate: ChildMaker | null; crossover: ChildMaker | null }; // plug-in operators (src/evolution/registry.ts), run on the host
  batchTokens?: BatchTokensSetting; // the micro-batches' budget on this machine (default auto; the same bits with any)
}

export class LocalEngineCore implements EngineCore {
  readonly bank: LoraBank;
  readonly optimizer: AdamW;
  readonly trainer: LlamaTrainer;
  readonly budget: MicroBatchBudget;
  private readonly evolution: BankEvolution;
  private readonly local = new Map<number, number>(); // global slot → bank slot

  /**
   * Holds the global slots `held` (ascending) and `scratch` more for parents held elsewhere. The pacer, where
   * given, is paused between pieces of the work (and told where it stands).
   */
  constructor(
    readonly model: LlamaModel,
    private readonly settings: CoreSettings,
    readonly held: readonly number[],
    private readonly scratch = 0,
    private readonly pacer?: Pacer,
  ) {
    held.forEach((slot, i) => {
      assert(i === 0 || slot > held[i - 1]!, 'an engine core holds its slots in ascending order');
      this.local.set(slot, i);
    });
    const { config, backend } = model;
    this.bank = new LoraBank(backend, config, held.length + scratch, settings.lora.rank, settings.lora.modules);
    this.optimizer = AdamW.forBank(backend, this.bank, config.numLayers, settings.optimizer);
    this.trainer = new LlamaTrainer(model, this.bank);
    this.evolution = new BankEvolution(this.bank, config, settings.evolutionThreads);
    this.budget = resolveBudget(settings.batchTokens ?? 'auto', config, backend); // once the model and the bank hold their memory
  }

  /** The bank slot of a global slot this core holds (-1, the base model alone, stays -1). */
  private slotOf(global: number): number {
    if (global === -1) return -1;
    const slot = this.local.get(global);
    if (slot === undefined) throw new Error(`engine: slot ${global} is not held here (held: ${this.held.join(', ')})`);
    return slot;
  }

  async generate(requests: readonly GenerationRequest[], formats: ReadonlyArray<FormatName | null>): Promise<GenerationResult[]> {
    const { domain, vocab } = this.settings;
    const local = requests.map((r) => ({ ...r, adapter: this.slotOf(r.adapter) }));
    const run = { bank: this.bank, batchTokens: this.budget.generationTokens, pacer: this.pacer };
    if (domain.tokenAutomaton) {
      // The grammar compiled to the token level: masks computed on the device, tokens kept there between readbacks.
      const automata = formats.map((format) => (format ? domain.tokenAutomaton!(format, vocab) : null));
      return generate(this.model, local, { ...run, ...(automata.some((a) => a !== null) ? { mask: { automata } } : {}) });
    }
    const masks = new Map(requests.map((r, i) => [r.requestId, formats[i] ? (domain.tokenMask?.(formats[i]!, vocab) ?? null) : null]));
    const textOf = (tokens: readonly number[]) => tokens.map((t) => vocab.texts[t]).join('');
    const mask = (r: GenerationRequest, generated: readonly number[]) => {
      const allowed = masks.get(r.requestId)!;
      return allowed === null ? null : allowed(textOf(generated), r.maxTokens - generated.length);
    };
    const masked = [...masks.values()].some((m) => m !== null); // without a mask the tokens stay on the device between readbacks
    return generate(this.model, local, { ...run, ...(masked ? { mask } : {}) });
  }

  async train(samples: readonly RlSample[]): Promise<TrainResult> {
    const local = samples.map((s) => ({ ...s, adapter: this.slotOf(s.adapter) }));
    const report = await policyGradientStep(this.trainer, this.optimizer, local, this.settings.rl, { batchTokens: this.budget.trainingTokens, pacer: this.pacer });
    const { loss, entropy, tokens } = report.perSequence!;
    return {
      perSample: samples.map((_, i) => ({ loss: loss[i]!, entropy: entropy[i]!, tokens: tokens[i]! })),
      gradNorms: [...report.gradNorms].map(([slot, norm]): [number, number] => [this.held[slot]!, norm]).sort((a, b) => a[0] - b[0]),
    };
  }

  evolve(spec: EvolveSpec): Promise<void> {
    return this.evolveWith(spec, new Map());
  }

  /** Evolution whose parents may live elsewhere: `remote` holds the state of each parent slot not held here. */
  async evolveWith(spec: EvolveSpec, remote: ReadonlyMap<number, SlotState>): Promise<void> {
    const childSlots = new Set(spec.children.map((c) => c.slot));
    for (const child of spec.children) {
      if (child.parentSlots.some((slot) => childSlots.has(slot))) throw new Error(`evolution: slot ${child.slot}'s parents ${child.parentSlots.join(', ')} include a slot being replaced`);
      const parents = child.parentSlots.map((global, k) => this.parentSlot(global, k, remote));
      const [p1, p2] = parents;
      const slot = this.slotOf(child.slot);
      const plugin = this.settings.operators?.[child.operator === 'mutate' ? 'mutate' : 'crossover'];
      if (plugin) this.bank.load(slot, plugin(await Promise.all(parents.map((p) => this.bank.read(p))), child.seed));
      else if (child.operator === 'mutate') this.evolution.mutate(slot, p1!, { sigma: spec.sigma, seed: child.seed });
      else await this.evolution.crossover(slot, p1!, p2!, { kind: spec.crossover as CrossoverKind, seed: child.seed });
      const from = child.inheritOptimizerFrom;
      if (from === null) this.optimizer.resetSlot(slot);
      else await this.optimizer.copySlot(parents[child.parentSlots.indexOf(from)] ?? this.slotOf(from), slot);
    }
  }

  /** A parent's bank slot: its own when held here, else scratch slot k with the parent's state loaded into it. */
  private parentSlot(global: number, k: number, remote: ReadonlyMap<number, SlotState>): number {
    if (this.local.has(global)) return this.local.get(global)!;
    const state = remote.get(global);
    if (!state) throw new Error(`evolution: parent slot ${global} is neither held here nor sent along`);
    assert(k < this.scratch, `evolution: parent slot ${global} needs scratch slot ${k}, and this core has ${this.scratch}`);
    const slot = this.held.length + k;
    this.bank.load(slot, state.adapter);
    this.optimizer.importSlot(slot, state.optimizer);
    return slot;
  }

  async load(adapters: readonly LoraAdapter[], optimizer: AdamWState | null): Promise<void> {
    this.importSlots(this.held.map((global) => [global, { adapter: adapters[global]!, optimizer: optimizer ? slotStateOf(optimizer, global) : null }]));
  }

  /** Loads held slots' adapters and, where given, their optimizer state. */
  importSlots(states: ReadonlyArray<[number, { adapter: LoraAdapter; optimizer: AdamWSlotState | null }]>): void {
    for (const [global, { adapter, optimizer }] of states) {
      const slot = this.slotOf(global);
      assert(adapter !== undefined, `engine: no adapter for slot ${global}`);
      this.bank.load(slot, adapter);
      if (optimizer) this.optimizer.importSlot(slot, optimizer);
    }
  }

  /** Held slots' states (by global slot; default: every held slot), with their global slots, in held order. */
  async exportSlots(globals: Iterable<number> = this.held): Promise<Array<[number, SlotState]>> {
    const wanted = new Set(globals);
    const slots = this.held.filter((global) => wanted.has(global));
    const optimizer = await this.optimizer.exportSlots(slots.map((global) => this.slotOf(global)));
    const adapters = await this.bank.readSlots(slots.map((global) => this.slotOf(global)));
    return slots.map((global, i): [number, SlotState] => [global, { adapter: adapters[i]!, optimizer: optimizer[i]! }]);
  }

  async state(): Promise<{ adapters: LoraAdapter[]; optimizer: AdamWState }> {
    if (this.scratch === 0 && this.held.every((global, i) => global === i)) {
      // every slot of the bank, in order: each tensor read once (a checkpoint of 8 real-size adapters and their
      // moments is 0.8 GB; slot by slot it read the bank once a slot and copied the moments twice)
      return { adapters: await this.bank.readSlots(this.held), optimizer: await this.optimizer.exportState() };
    }
    const slots = (await this.exportSlots()).map(([, state]) => state);
    return { adapters: slots.map((s) => s.adapter), optimizer: joinSlotStates(slots.map((s) => s.optimizer)) };
  }

  async close(): Promise<void> {
    this.trainer.destroy();
    this.optimizer.destroy();
    this.bank.destroy();
    await this.evolution.close();
  }
}
