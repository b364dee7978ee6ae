// The engine: owns the model, the adapter bank and the optimizer. Its handler only queues requests; at the step
// barrier it runs each kind as one batched multi-LoRA call: every queued generation in one `generate` (each
// under its domain's token mask, where the domain has one), every training sample of every member in one
// policy-gradient update, every evolutionary replacement in one pass over the bank.
//
// Advantages are normalised per (role, task type) over the whole population before the update (AZR's
// task-relative REINFORCE++), so the engine is where every sample of a step meets.

import type { Domain } from '../src/domains/domain.js';
import { BankEvolution } from '../src/evolution/device-operators.js';
import type { CrossoverKind } from '../src/evolution/operators.js';
import { generate, type GenerationRequest } from '../src/model/generate.js';
import type { LlamaModel } from '../src/model/llama.js';
import type { LoraBank } from '../src/model/lora-bank.js';
import { tokenTexts, type TokenTexts } from '../src/model/token-texts.js';
import type { TextTokenizer } from '../src/model/tokenizer.js';
import type { AdamW } from '../src/train/adamw.js';
import { groupAdvantages } from '../src/train/advantages.js';
import type { LlamaTrainer } from '../src/train/llama-backward.js';
import { policyGradientStep, type RlSample } from '../src/train/steps.js';
import { delivery, type Address, type Delivery, type Handler, type Service, type World } from '../src/runtime/world.js';
import { ENGINE, groupBy, type GenerateItem, type GenerateRequest, type Generated, type GeneratedItem, type TrainingSample } from './protocol.js';

export interface EngineConfig {
  domain: Domain; // its token masks constrain the generations (free text where it has none)
  seed: number; // sampling seed (u32); with the request id and position it keys each token's draw
  temperature: number;
  topP: number;
  maxTokens: number;
  advantageGroups: 'role-and-task' | 'role' | 'none';
  rl: { reduction: 'token' | 'sequence'; klCoef: number; entropyCoef: number };
  evolutionThreads: number; // > 1: the SVD crossover's factorisations on a worker pool (the same children)
}

export interface EngineParts {
  model: LlamaModel;
  bank: LoraBank;
  trainer: LlamaTrainer;
  optimizer: AdamW;
  tokenizer: TextTokenizer;
}

export interface ChildSpec {
  slot: number;
  parentSlots: number[]; // one (mutation) or two (crossover), fitter first
  operator: 'mutate' | 'crossover';
  seed: number;
  inheritOptimizerFrom: number | null; // a parent's slot, or null for fresh moments
}

export type EngineState = null;

export type EngineMessage =
  | GenerateRequest
  | { type: 'train'; samples: TrainingSample[] }
  | { type: 'evolve'; requestId: number; replyTo: Address<EvolvedReply>; children: ChildSpec[]; sigma: number; crossover: CrossoverKind };

type EvolveRequest = Extract<EngineMessage, { type: 'evolve' }>;
export interface EvolvedReply {
  type: 'evolved';
  requestId: number;
  slots: number[];
}

export class EngineService implements Service {
  readonly name = ENGINE;
  private readonly generations: Array<GenerateItem & { replyTo: Address<Generated> }> = [];
  private readonly samples: TrainingSample[] = [];
  private readonly evolutions: EvolveRequest[] = [];
  private readonly sequences = new Map<number, { tokens: number[]; promptLength: number; slot: number }>(); // this step's generations, by request id
  private readonly vocab: TokenTexts;
  private readonly evolution: BankEvolution;

  constructor(
    private readonly parts: EngineParts,
    private readonly config: EngineConfig,
  ) {
    const { tokenizer, model } = parts;
    this.vocab = tokenTexts(tokenizer, model.config.vocabSize);
    this.evolution = new BankEvolution(parts.bank, model.config, config.evolutionThreads);
  }

  /** Stops the evolution's worker pool, if it has one. */
  close(): Promise<void> {
    return this.evolution.close();
  }

  readonly handler: Handler<EngineState, EngineMessage> = (state, message) => {
    if (message.type === 'generate') this.generations.push(...message.requests.map((r) => ({ ...r, replyTo: message.replyTo })));
    else if (message.type === 'train') this.samples.push(...message.samples);
    else this.evolutions.push(message);
    return state;
  };

  hasPending(): boolean {
    return this.generations.length + this.samples.length + this.evolutions.length > 0;
  }

  async flush(world: World): Promise<Delivery[]> {
    const deliveries: Delivery[] = [];
    for (const request of this.evolutions.splice(0)) deliveries.push(await this.evolve(request));
    const samples = this.samples.splice(0);
    if (samples.length > 0) world.report('train', await this.train(samples));
    const generations = this.generations.splice(0);
    if (generations.length > 0) deliveries.push(...(await this.generate(generations)));
    return deliveries;
  }

  /** One `generate` call for every queued request; one reply per requesting actor, its results in request order. */
  private async generate(queued: Array<GenerateItem & { replyTo: Address<Generated> }>): Promise<Delivery[]> {
    const { tokenizer, model, bank } = this.parts;
    const requests: GenerationRequest[] = queued.map((q) => ({
      requestId: q.requestId,
      prompt: tokenizer.encodePrompt(q.prompt),
      adapter: q.slot,
      maxTokens: this.config.maxTokens,
      seed: this.config.seed,
      temperature: q.greedy ? 0 : this.config.temperature,
      topP: this.config.topP,
      stopTokens: [this.vocab.eos],
    }));
    const masks = new Map(queued.map((q) => [q.requestId, this.config.domain.tokenMask?.(q.format, this.vocab) ?? null]));
    const textOf = (tokens: readonly number[]) => tokens.map((t) => this.vocab.texts[t]).join('');
    const mask = (r: GenerationRequest, generated: readonly number[]) => {
      const allowed = masks.get(r.requestId)!;
      return allowed === null ? null : allowed(textOf(generated), r.maxTokens - generated.length);
    };
    const results = await generate(model, requests, { bank, mask });
    results.forEach((result, i) => {
      if (!queued[i]!.greedy) this.sequences.set(result.requestId, { tokens: [...requests[i]!.prompt, ...result.tokens], promptLength: requests[i]!.prompt.length, slot: requests[i]!.adapter }); // evaluations are never trained on
    });
    const items = results.map((result, i): GeneratedItem & { replyTo: Address<Generated> } => ({ replyTo: queued[i]!.replyTo, requestId: result.requestId, text: tokenizer.decode(result.tokens) })); // whole: byte-level tokens may split a character
    return [...groupBy(items, (item) => item.replyTo)].map(([to, group]) => {
      const message: Generated = { type: 'generated', results: group.map(({ replyTo: _, ...item }) => item) };
      return delivery(group[0]!.requestId, to, message);
    });
  }

  private async train(samples: TrainingSample[]) {
    const groupOf = (s: TrainingSample) => (this.config.advantageGroups === 'none' ? 'all' : this.config.advantageGroups === 'role' ? s.role : `${s.role}/${s.taskType}`);
    const advantages = groupAdvantages(samples.map((s) => s.reward), samples.map(groupOf));
    const rlSamples: RlSample[] = samples.map((s, i) => {
      const sequence = this.sequences.get(s.requestId);
      if (!sequence) throw new Error(`a training sample for request ${s.requestId}, which this step did not generate`);
      return { tokens: sequence.tokens, adapter: sequence.slot, promptLength: sequence.promptLength, advantage: advantages[i]! };
    });
    this.sequences.clear(); // a step's generations are trained on once, in its learn phase
    const report = await policyGradientStep(this.parts.trainer, this.parts.optimizer, rlSamples, this.config.rl);
    return { loss: report.loss, entropyMean: report.entropyMean, trainedTokens: report.trainedTokens, gradNorms: Object.fromEntries(report.gradNorms) };
  }

  /** Each child is made in its slot on the device from its parents' slots (src/evolution/device-operators.ts). */
  private async evolve(request: EvolveRequest): Promise<Delivery> {
    const { optimizer } = this.parts;
    const childSlots = new Set(request.children.map((c) => c.slot));
    for (const child of request.children) {
      if (child.parentSlots.some((slot) => childSlots.has(slot))) throw new Error(`evolution: slot ${child.slot}'s parents ${child.parentSlots.join(', ')} include a slot being replaced`);
      const [p1, p2] = child.parentSlots;
      if (child.operator === 'mutate') this.evolution.mutate(child.slot, p1!, { sigma: request.sigma, seed: child.seed });
      else await this.evolution.crossover(child.slot, p1!, p2!, { kind: request.crossover, seed: child.seed });
      if (child.inheritOptimizerFrom === null) optimizer.resetSlot(child.slot);
      else await optimizer.copySlot(child.inheritOptimizerFrom, child.slot);
    }
    const message: EvolvedReply = { type: 'evolved', requestId: request.requestId, slots: request.children.map((c) => c.slot) };
    return delivery(request.requestId, request.replyTo, message);
  }
}
