// What a plug-in module exports by default, one interface per kind, and the define* helpers that type it (they
// return their argument: a plug-in may as well export a plain object). docs/plugins.md walks through each.

import type { Domain } from '../domains/domain.js';
import type { MatchContext, MatchPolicy, MemberView, PopulationShape } from '../matchmaking/policy.js';
import type { LoraAdapter } from '../model/peft.js';
import type { Skill } from '../rating/rating.js';
import type { RewardHook } from '../rewards/rules.js';
import type { RandomStream } from '../runtime/streams.js';
import type { OptionsSchema } from './options.js';

/**
 * A matchmaking policy (`matchmaking: { policy: ./my-policy.js, options: {...} }`): which students answer a
 * teacher's task. `choose` is required; `reach` defaults to every student of the population.
 */
export interface MatchPolicyPlugin<Options = Record<string, never>> extends Omit<MatchPolicy<Options>, 'options' | 'reach'> {
  /** The schema of `matchmaking.options` (e.g. a zod object whose fields have defaults); absent: no options. */
  options?: OptionsSchema<Options>;
  /** How many distinct students one task can go to; absent: every student. */
  reach?(population: PopulationShape): number;
  choose(context: MatchContext<Options>): MemberView[];
}

export const defineMatchPolicy = <Options = Record<string, never>>(policy: MatchPolicyPlugin<Options>): MatchPolicyPlugin<Options> => policy;

/**
 * A domain (`domain: ./domains/sorting/index.js`): its task types, prompts and verifier. Members with a
 * default: `alphabet` (printable ASCII and a newline), `presetContext` (256), `seedReferences` ([]), `prompts`
 * (null: fixed prompts), `tokenBudgetHint` (twice minimumTokens of every type).
 */
export type DomainPlugin = Omit<Domain, 'alphabet' | 'presetContext' | 'seedReferences' | 'prompts' | 'tokenBudgetHint'> & Partial<Pick<Domain, 'alphabet' | 'presetContext' | 'seedReferences' | 'prompts' | 'tokenBudgetHint'>>;

export const defineDomain = (domain: DomainPlugin): DomainPlugin => domain;

/** What an evolution operator is given besides its parents. */
export interface OperatorContext<Options> {
  seed: number; // the child's seed (u32), drawn by the population manager from the run's streams
  random: RandomStream; // a stream seeded by it: the child must be a function of the parents, the options and this
  options: Options; // the scenario's evolution.mutationOptions or crossoverOptions, parsed
}

/**
 * A weight-space evolution operator (`evolution: { mutation: ./op.js }` and/or `{ crossover: ./op.js }`): a child
 * adapter of the parents' rank, modules and shapes. A module may give either or both.
 */
export interface EvolutionOperator<Options = Record<string, never>> {
  options?: OptionsSchema<Options>;
  mutate?(parent: LoraAdapter, context: OperatorContext<Options>): LoraAdapter;
  /** `first` is the fitter parent; the child keeps its scale (alpha / rank). */
  crossover?(first: LoraAdapter, second: LoraAdapter, context: OperatorContext<Options>): LoraAdapter;
}

export const defineEvolutionOperator = <Options = Record<string, never>>(operator: EvolutionOperator<Options>): EvolutionOperator<Options> => operator;

/** The rating system a plug-in creates from its options (the same contract as Elo's and TrueSkill's: src/rating/rating.ts). */
export interface RatingModel {
  initial(): Skill;
  /** The probability that the student solves the teacher's task. */
  winProbability(student: Skill, teacher: Skill): number;
  /** Both skills after one match; `score` is the student's share of right answers, in [0, 1]. */
  update(student: Skill, teacher: Skill, score: number): { student: Skill; teacher: Skill };
  /** What evolution ranks by (higher is fitter). */
  fitness(skill: Skill): number;
}

/** A rating system (`rating: { system: ./glicko.js, options: {...} }`). */
export interface RatingSystemPlugin<Options = Record<string, never>> {
  options?: OptionsSchema<Options>;
  create(options: Options): RatingModel;
}

export const defineRatingSystem = <Options = Record<string, never>>(system: RatingSystemPlugin<Options>): RatingSystemPlugin<Options> => system;

/** A reward-shaping hook (`rewards: { hook: ./my-rewards.js, options: {...} }`): src/rewards/rules.ts. */
export const defineRewardHook = <Options = Record<string, never>>(hook: RewardHook<Options>): RewardHook<Options> => hook;
