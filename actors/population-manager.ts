// The population manager: the registry of members (role, sub-population, adapter slot, rating, recent rewards,
// lineage). Each step it sends the matchmaker the roster; it takes every outcome to update Elo-style ratings (a
// student wins a task it solves; zero-sum with the teacher) in task order; and every `every` steps it ranks each
// role by fitness and replaces the weakest with offspring made in LoRA weight space by the engine, keeping the
// sub-population sizes (a child takes its replaced member's place) and recording the lineage.

import { planReplacements, type LineageRecord, type SelectionPolicy } from '../src/evolution/selection.js';
import type { CrossoverKind } from '../src/evolution/operators.js';
import type { MemberView } from '../src/matchmaking/index.js';
import { eloUpdate } from '../src/runtime/rating.js';
import type { Handler, World } from '../src/runtime/world.js';
import { ENGINE, MATCHMAKER, mean, type Outcome, type Outcomes, type Role } from './protocol.js';
import type { ChildSpec, EvolvedReply } from './engine.js';

export interface EvolutionConfig {
  every: number; // 0: never
  policy: SelectionPolicy;
  crossoverProbability: number;
  crossover: CrossoverKind;
  sigma: number;
  optimizerState: 'reset' | 'inherit';
  fitness: 'rating' | 'reward';
  fitnessWindow: number; // steps of rewards averaged
}

export interface PopulationConfig {
  ratingK: number;
  initialRating: number;
  evolution: EvolutionConfig;
}

export interface MemberRecord {
  id: string;
  role: Role;
  subpopulation: number;
  slot: number;
  adapter: string; // name of the adapter now in the slot: `${id}.g${generation}`
  generation: number;
  rating: number;
  rewards: number[]; // mean reward per step, most recent last (at most fitnessWindow)
}

export interface PopulationState {
  members: MemberRecord[]; // in id order
  outcomes: Outcome[]; // this step's
  lineage: LineageRecord[];
}

export type PopulationMessage =
  | { type: 'start-step' }
  | Outcomes
  | { type: 'reward'; member: string; rewardMean: number }
  | { type: 'rate' }
  | EvolvedReply;

export const adapterName = (id: string, generation: number) => `${id}.g${generation}`;

function memberOf(state: PopulationState, id: string): MemberRecord {
  const found = state.members.find((m) => m.id === id);
  if (!found) throw new Error(`no member ${id}`);
  return found;
}

const view = (m: MemberRecord): MemberView => ({ id: m.id, role: m.role, subpopulation: m.subpopulation, adapterSlot: m.slot, rating: m.rating });

export const populationManagerHandler =
  (config: PopulationConfig): Handler<PopulationState, PopulationMessage> =>
  (state, message, world, self) => {
    const member = (id: string) => memberOf(state, id);
    switch (message.type) {
      case 'start-step':
        world.send(self, MATCHMAKER, { type: 'roster', members: state.members.map(view) });
        return state;
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
          const change = eloUpdate(view(student), view(teacher), o.correct / o.total, config.ratingK);
          student.rating = change.student;
          teacher.rating = change.teacher;
        }
        world.report('ratings', Object.fromEntries(state.members.map((m) => [m.id, m.rating])));
        const { every } = config.evolution;
        if (every > 0 && (world.step + 1) % every === 0) requestEvolution(state, config, world, self);
        return { ...state, outcomes: [] };
      }
      case 'evolved':
        return state; // the bank holds the children now; the records were updated when they were planned
    }
  };

/** Plans the replacements, updates the records (fresh rating, new adapter name, lineage) and asks the engine. */
function requestEvolution(state: PopulationState, { evolution: config, initialRating }: PopulationConfig, world: World, self: string): void {
  // Members that share a slot (a teacher and its student twin under `self`) evolve as one: the teacher decides.
  const candidates = state.members.filter((m) => m.role === 'teacher' || !state.members.some((t) => t.role === 'teacher' && t.slot === m.slot));
  const fitness = (m: MemberRecord) => (config.fitness === 'rating' ? m.rating : mean(m.rewards));
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
    const parameters = replacement.operator === 'mutate' ? { sigma: config.sigma } : { kind: config.crossover };
    for (const m of state.members.filter((x) => x.slot === replaced.slot)) {
      const child = adapterName(m.id, m.generation + 1);
      state.lineage.push({ child, parents: parents.map((p) => p.adapter), operator: replacement.operator, parameters, seed, step: world.step });
      Object.assign(m, { generation: m.generation + 1, adapter: child, rating: initialRating, rewards: [] });
    }
  }
  world.report('evolution', children.map((c) => ({ slot: c.slot, operator: c.operator })));
  world.send(self, ENGINE, { type: 'evolve', requestId: world.requestId(), replyTo: self, children, sigma: config.sigma, crossover: config.crossover });
}
