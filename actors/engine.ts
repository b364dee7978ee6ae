// The engine: its handler only queues requests; at the step barrier it hands each kind to its core (the model,
// the adapter bank and the optimizer, in this process or on engine workers: src/engine/core.ts) as one batched
// multi-LoRA call: every queued generation in one `generate` (each under its domain's token mask, where the domain
// has one), every training sample of every member in one policy-gradient update, every evolutionary replacement
// in one pass over the bank. It keeps the step's generated sequences, which its training samples point to.
//
// Advantages are normalised per (role, task type) over the whole population before the update (AZR's
// task-relative REINFORCE++), so the engine is where every sample of a step meets.

import type { ChildSpec, EngineCore } from '../src/engine/core.js';
import type { CrossoverKind } from '../src/evolution/operators.js';
import type { GenerationRequest } from '../src/model/generate.js';
import type { TextTokenizer } from '../src/model/tokenizer.js';
import { groupAdvantages } from '../src/train/advantages.js';
import type { RlSample } from '../src/train/steps.js';
import { delivery, type Address, type Delivery, type Handler, type Service, type World } from '../src/runtime/world.js';
import { ENGINE, groupBy, type GenerateItem, type GenerateRequest, type Generated, type GeneratedItem, type TrainingSample } from './protocol.js';

export type { ChildSpec } from '../src/engine/core.js';

export interface EngineConfig {
  tokenizer: TextTokenizer; // prompts in, texts out
  eos: number; // the stop token
  seed: number; // sampling seed (u32); with the request id and position it keys each token's draw
  temperature: number;
  topP: number;
  maxTokens: number; // a proposal's budget
  answerMaxTokens: number; // an answer's (format answer/…)
  advantageGroups: 'role-and-task' | 'role' | 'none';
}

export type EngineState = null;

export type EngineMessage =
  | GenerateRequest
  | { type: 'train'; samples: TrainingSample[] }
  | { type: 'evolve'; requestId: number; replyTo: Address<EvolvedReply>; children: ChildSpec[]; sigma: number; crossover: CrossoverKind | string };

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

  /** `core` does the work: the model in this process, or engine workers (src/engine/core.ts). */
  constructor(
    readonly core: EngineCore,
    private readonly config: EngineConfig,
  ) {}

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
    const { tokenizer } = this.config;
    const requests: GenerationRequest[] = queued.map((q) => ({
      requestId: q.requestId,
      prompt: tokenizer.encodePrompt(q.prompt),
      adapter: q.slot,
      maxTokens: q.format.startsWith('answer/') ? this.config.answerMaxTokens : this.config.maxTokens,
      seed: this.config.seed,
      temperature: q.greedy ? 0 : this.config.temperature,
      topP: this.config.topP,
      stopTokens: [this.config.eos],
    }));
    const results = await this.core.generate(requests, queued.map((q) => q.format));
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
    const { perSample, gradNorms } = await this.core.train(rlSamples);
    // summed sample by sample in sample order, so that the figures do not depend on how the core batched them
    const trainedTokens = perSample.reduce((n, s) => n + s.tokens, 0);
    const loss = perSample.reduce((sum, s) => sum + s.loss, 0);
    const entropyMean = perSample.reduce((sum, s) => sum + s.entropy, 0) / Math.max(trainedTokens, 1);
    return { loss, entropyMean, trainedTokens, gradNorms: Object.fromEntries(gradNorms) };
  }

  /** Each child is made in its slot from its parents' slots (src/engine/core.ts). */
  private async evolve(request: EvolveRequest): Promise<Delivery> {
    await this.core.evolve({ children: request.children, sigma: request.sigma, crossover: request.crossover });
    const message: EvolvedReply = { type: 'evolved', requestId: request.requestId, slots: request.children.map((c) => c.slot) };
    return delivery(request.requestId, request.replyTo, message);
  }
}
