// The population manager's selection: which members are replaced, by children of which parents, made how.
// Role-aware (teachers breed with teachers, students with students) and optionally sub-population-aware.
// Decisions come from one seeded stream per (seed, step): the same population and seed give the same plan.

import seedrandom from 'seedrandom';

export type Role = 'teacher' | 'student';

export interface Member {
  id: string;
  role: Role;
  subPopulation: string;
  fitness: number; // higher is better
}

export type SelectionPolicy =
  | { kind: 'truncation'; fraction: number } // bottom q replaced by children of the top q
  | { kind: 'tournament'; fraction: number; size: number } // bottom q replaced; parents won by tournaments among survivors
  | { kind: 'pbt'; fraction: number }; // Jaderberg et al.: exploit (copy a top-q member), then explore (perturb it)

export interface SelectionOptions {
  policy: SelectionPolicy;
  crossoverProbability: number; // truncation/tournament: a crossover of two survivors instead of a mutation
  groupBy: 'role' | 'role-and-subpopulation';
  optimizerState: 'reset' | 'inherit'; // a child's optimizer moments: fresh, or the fitter parent's
  seed: number;
  step: number;
}

export interface Replacement {
  replaced: string; // the member whose slot the child takes
  parents: string[]; // one (mutation) or two (crossover), fitter first
  operator: 'mutate' | 'crossover';
  inheritOptimizerFrom: string | null;
}

/** Fitness sources: a moving average of recent rewards, or a conservative rating (TrueSkill-style μ − 3σ). */
export const fitnessFrom = {
  movingAverage(rewards: readonly number[], window: number): number {
    const recent = rewards.slice(-window);
    return recent.length === 0 ? 0 : recent.reduce((a, b) => a + b, 0) / recent.length;
  },
  conservativeRating(mu: number, sigma: number): number {
    return mu - 3 * sigma;
  },
};

function groupsOf(members: readonly Member[], groupBy: SelectionOptions['groupBy']): Member[][] {
  const groups = new Map<string, Member[]>();
  for (const m of members) {
    const key = groupBy === 'role' ? m.role : `${m.role}/${m.subPopulation}`;
    groups.set(key, [...(groups.get(key) ?? []), m]);
  }
  // Fittest first; ties broken by id so the order never depends on input order.
  return [...groups.keys()].sort().map((key) => groups.get(key)!.sort((a, b) => b.fitness - a.fitness || (a.id < b.id ? -1 : 1)));
}

export function planReplacements(members: readonly Member[], o: SelectionOptions): Replacement[] {
  const { policy } = o;
  if (!(policy.fraction > 0 && policy.fraction <= 0.5)) throw new RangeError(`selection fraction must be in (0, 0.5], got ${policy.fraction}`);
  if (policy.kind === 'tournament' && !(Number.isInteger(policy.size) && policy.size >= 1)) throw new RangeError(`tournament size must be a positive integer, got ${policy.size}`);
  const ids = new Set(members.map((m) => m.id));
  if (ids.size !== members.length) throw new RangeError('member ids must be unique');
  const rng = seedrandom.alea(`populora-selection-${o.seed}-${o.step}`);
  const pick = <T>(list: readonly T[]) => list[Math.floor(rng() * list.length)]!;
  const rank = new Map<string, number>();
  const plan: Replacement[] = [];
  for (const group of groupsOf(members, o.groupBy)) {
    group.forEach((m, i) => rank.set(m.id, i));
    const n = Math.floor(policy.fraction * group.length);
    if (n === 0) continue;
    const survivors = group.slice(0, group.length - n);
    const top = group.slice(0, n);
    const tournament = () => {
      let best = pick(survivors);
      for (let i = 1; i < (policy.kind === 'tournament' ? policy.size : 1); i++) {
        const challenger = pick(survivors);
        if (rank.get(challenger.id)! < rank.get(best.id)!) best = challenger;
      }
      return best;
    };
    const choose = policy.kind === 'tournament' ? tournament : () => pick(top);
    for (const loser of group.slice(group.length - n)) {
      const cross = policy.kind !== 'pbt' && survivors.length >= 2 && rng() < o.crossoverProbability;
      let parents = [choose()];
      if (cross) {
        let second = policy.kind === 'tournament' ? tournament() : pick(survivors);
        for (let tries = 0; second.id === parents[0]!.id && tries < 16; tries++) second = pick(survivors);
        if (second.id !== parents[0]!.id) parents = [parents[0]!, second].sort((a, b) => rank.get(a.id)! - rank.get(b.id)!);
      }
      plan.push({
        replaced: loser.id,
        parents: parents.map((p) => p.id),
        operator: parents.length === 2 ? 'crossover' : 'mutate',
        inheritOptimizerFrom: o.optimizerState === 'inherit' ? parents[0]!.id : null,
      });
    }
  }
  return plan;
}

/** What made a child: recorded with every offspring. */
export interface LineageRecord {
  child: string;
  parents: string[];
  operator: 'mutate' | 'crossover';
  parameters: Record<string, unknown>; // sigma, fraction, modules, layers / kind, weights
  seed: number;
  step: number | null; // null when made outside a run (the command line)
}
