// The population manager: the registry of members (role, sub-population, adapter slot, rating, recent rewards,
// lineage). Each step it sends the matchmaker the roster (with the pairs' past results when the policy reads
// them); it takes every outcome to update the ratings (Elo or TrueSkill: src/rating/rating.ts; a student wins a
// task it solves; zero-sum with the teacher) in task order; at evaluation steps it has the evaluator score every
// member on the held-out tasks; and every `every` steps it ranks each role by fitness and replaces the weakest
// with offspring made in LoRA weight space by the engine, keeping the sub-population sizes (a child takes its
// replaced member's place, with a fresh rating) and recording the lineage.

import { planReplacements, type LineageRecord, type SelectionPolicy } from '../src/evolution/selection.js';
import type { CrossoverKind } from '../src/evolution/operators.js';
import type { MemberView, PairHistory } from '../src/matchmaking/index.js';
import type { RatingSystem, Skill } from '../src/rating/rating.js';
import type { Address, Handler, World } from '../src/runtime/world.js';
import { ENGINE, EVALUATOR, MATCHMAKER, mean, type Outcome, type Outcomes, type Role } from './protocol.js';
import type { ChildSpec, EvolvedReply } from './engine.js';
import type { EvaluateRequest, Evaluated } from './evaluator.js';
import { pairKey, type RosterMessage } from './matchmaker.js';

export interface EvolutionConfig {
  every: number; // 0: never
  policy: SelectionPolicy;
  crossoverProbability: number;
  crossover: CrossoverKind | string; // a built-in, or a plug-in's name (file@sha256)
  mutation: string | null; // null: the built-in Gaussian noise of `sigma`; else a plug-in's name
  sigma: number;
  optimizerState: 'reset' | 'inherit';
  fitness: 'rating' | 'reward';
  fitnessWindow: number; // steps of rewards averaged
}

export interface PopulationConfig {
  ratings: RatingSystem;
  evolution: EvolutionConfig;
  keepHistory: boolean; // the matchmaking policy reads the pairs' past results
  evaluation: { every: number; steps: number } | null; // held-out evaluation: every `every` steps and at the last
}

export interface MemberRecord {
  id: string;
  role: Role;
  subpopulation: number;
  slot: number;
  adapter: string; // name of the adapter now in the slot: `${id}.g${generation}`
  generation: number;
  rating: number; // TrueSkill: μ
  sigma?: number; // TrueSkill only
  rewards: number[]; // mean reward per step, most recent last (at most fitnessWindow)
}

export interface PopulationState {
  members: MemberRecord[]; // in id order
  outcomes: Outcome[]; // this step's
  lineage: LineageRecord[];
  history?: Record<string, PairHistory>; // "teacher student" → their record (when the policy reads it)
}

export type PopulationMessage =
  | { type: 'start-step' }
  | Outcomes
  | { type: 'reward'; member: string; rewardMean: number }
  | { type: 'rate' }
  | Evaluated
  | EvolvedReply;

export const adapterName = (id: string, generation: number) => `${id}.g${generation}`;

function memberOf(state: PopulationState, id: string): MemberRecord {
  const found = state.members.find((m) => m.id === id);
  if (!found) throw new Error(`no member ${id}`);
  return found;
}

const skill = (m: MemberRecord): Skill => (m.sigma === undefined ? { rating: m.rating } : { rating: m.rating, sigma: m.sigma });
// Elo's view has no `sigma` key at all: the roster message, and so the run hash, is what it was before TrueSkill.
const view = (m: MemberRecord): MemberView => ({ id: m.id, role: m.role, subpopulation: m.subpopulation, adapterSlot: m.slot, ...skill(m) });

export const populationManagerHandler =
  (config: PopulationConfig): Handler<PopulationState, PopulationMessage> =>
  (state, message, world, self) => {
    const member = (id: string) => memberOf(state, id);
    const evolutionDue = () => config.evolution.every > 0 && (world.step + 1) % config.evolution.every === 0;
    switch (message.type) {
      case 'start-step': {
        const roster: RosterMessage = { type: 'roster', members: state.members.map(view) };
        if (state.history) roster.history = state.history;
        world.send(self, MATCHMAKER, roster);
        return state;
      }
      case 'outcomes':
        return { ...state, outcomes: [...state.outcomes, ...message.outcomes] };
      case 'reward': {
        const m = member(message.member);
        m.rewards = [...m.rewards, message.rewardMean].slice(-config.evolution.fitnessWindow);
        return state;
      }
      case 'rate': {
        const outcomes = [...state.outcomes].sort((a, b) => a.taskId - b.taskId || (a.student < b.student ? -1 : 1));
        for (const o of outcomes) {
          const [student, teacher] = [member(o.student), member(o.teacher)];
          if (student.slot === teacher.slot) continue; // a twin solving its own task is no match
          const change = config.ratings.update(skill(student), skill(teacher), o.correct / o.total);
          Object.assign(student, change.student);
          Object.assign(teacher, change.teacher);
        }
        if (config.keepHistory) state.history = recordHistory(state.history ?? {}, outcomes);
        world.report('ratings', Object.fromEntries(state.members.map((m) => [m.id, m.rating])));
        if (state.members.some((m) => m.sigma !== undefined)) world.report('rating-sigmas', Object.fromEntries(state.members.map((m) => [m.id, m.sigma])));
        const { evaluation } = config;
        const evaluationDue = evaluation !== null && (world.step + 1 === evaluation.steps || (evaluation.every > 0 && (world.step + 1) % evaluation.every === 0));
        if (evaluationDue) {
          // Evolution waits for the evaluation: the members scored are the ones that played this step.
          const request: EvaluateRequest = { type: 'evaluate', replyTo: self, members: state.members.map((m) => ({ id: m.id, role: m.role, slot: m.slot })) };
          world.send(self, EVALUATOR, request);
        } else if (evolutionDue()) requestEvolution(state, config, world, self);
        return { ...state, outcomes: [] };
      }
      case 'evaluated':
        if (evolutionDue()) requestEvolution(state, config, world, self);
        return state;
      case 'evolved':
        return state; // the bank holds the children now; the records were updated when they were planned
    }
  };

/** The pairs' records with this step's outcomes added. */
function recordHistory(history: Record<string, PairHistory>, outcomes: readonly Outcome[]): Record<string, PairHistory> {
  const next = { ...history };
  for (const o of outcomes) {
    const key = pairKey(o.teacher, o.student);
    const before = next[key] ?? { tasks: 0, correct: 0, answers: 0 };
    next[key] = { tasks: before.tasks + 1, correct: before.correct + o.correct, answers: before.answers + o.total };
  }
  return next;
}

/** Plans the replacements, updates the records (fresh rating, new adapter name, lineage) and asks the engine. */
function requestEvolution(state: PopulationState, { evolution: config, ratings }: PopulationConfig, world: World, self: Address<PopulationMessage>): void {
  // Members that share a slot (a teacher and its student twin under `self`) evolve as one: the teacher decides.
  const candidates = state.members.filter((m) => m.role === 'teacher' || !state.members.some((t) => t.role === 'teacher' && t.slot === m.slot));
  const fitness = (m: MemberRecord) => (config.fitness === 'rating' ? ratings.fitness(skill(m)) : mean(m.rewards));
  const plan = planReplacements(
    candidates.map((m) => ({ id: m.id, role: m.role, subPopulation: String(m.subpopulation), fitness: fitness(m) })),
    { policy: config.policy, crossoverProbability: config.crossoverProbability, groupBy: 'role', optimizerState: config.optimizerState, seed: world.streams.stream(self, 'evolve', world.step).u32(), step: world.step },
  );
  if (plan.length === 0) return;
  const rng = world.streams.stream(self, 'operators', world.step);
  const children: ChildSpec[] = [];
  for (const replacement of plan) {
    const replaced = memberOf(state, replacement.replaced);
    const parents = replacement.parents.map((id) => memberOf(state, id));
    const seed = rng.u32();
    children.push({ slot: replaced.slot, parentSlots: parents.map((p) => p.slot), operator: replacement.operator, seed, inheritOptimizerFrom: replacement.inheritOptimizerFrom === null ? null : parents[0]!.slot });
    const parameters = replacement.operator === 'mutate' ? (config.mutation === null ? { sigma: config.sigma } : { operator: config.mutation }) : { kind: config.crossover };
    for (const m of state.members.filter((x) => x.slot === replaced.slot)) {
      const child = adapterName(m.id, m.generation + 1);
      state.lineage.push({ child, parents: parents.map((p) => p.adapter), operator: replacement.operator, parameters, seed, step: world.step });
      Object.assign(m, { generation: m.generation + 1, adapter: child, ...ratings.initial(), rewards: [] });
    }
  }
  if (state.history) {
    // A child has no past: its predecessor's records go.
    const replaced = new Set(plan.flatMap((r) => state.members.filter((m) => m.slot === memberOf(state, r.replaced).slot).map((m) => m.id)));
    state.history = Object.fromEntries(Object.entries(state.history).filter(([key]) => !key.split(' ').some((id) => replaced.has(id))));
  }
  world.report('evolution', children.map((c) => ({ slot: c.slot, operator: c.operator })));
  world.send(self, ENGINE, { type: 'evolve', requestId: world.requestId(), replyTo: self, children, sigma: config.sigma, crossover: config.crossover });
}
