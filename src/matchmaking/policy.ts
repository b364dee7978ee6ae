// Matchmaking: which students answer a teacher's task. A policy is one small file; this file holds what they
// share: the context a policy sees (the teacher, every student with its rating and uncertainty, the rating
// system's win probability, the pairs' past results, the scenario's options for it, a seeded stream) and what
// a policy declares about itself (its options, how many students a task can meet, what the population needs).
// Policies are pure: the same context gives the same match.

import { z } from 'zod';
import type { RandomStream } from '../runtime/streams.js';
import type { Skill } from '../rating/rating.js';

export interface MemberView extends Skill {
  id: string;
  role: 'teacher' | 'student';
  subpopulation: number;
  adapterSlot: number;
}

/** What a teacher's tasks went through with one student so far (matches since either was last replaced). */
export interface PairHistory {
  tasks: number;
  correct: number; // answers right, of `answers`
  answers: number;
}

export const NO_HISTORY: PairHistory = { tasks: 0, correct: 0, answers: 0 };

/** Everything a policy may look at to choose a task's students. */
export interface MatchContext<Options = Record<string, never>> {
  teacher: MemberView;
  students: readonly MemberView[]; // every student, in id order
  count: number; // students wanted per task
  rng: RandomStream;
  options: Options; // the scenario's matchmaking.options, defaults filled in
  winProbability(student: MemberView, teacher: MemberView): number; // the rating system's P(student solves)
  history(teacher: string, student: string): PairHistory;
}

/** The counts a policy's requirements are about. */
export interface PopulationShape {
  subpopulations: number;
  teachers: number; // per sub-population
  students: number; // per sub-population
}

export interface MatchPolicy<Options = Record<string, never>> {
  /** The schema of its `matchmaking.options` (a strict object whose fields all have defaults). */
  options: z.ZodType<Options>;
  /** How many distinct students one task can go to. */
  reach(population: PopulationShape): number;
  /** What the population must be for the policy to make sense: null, or the field and what is wrong. */
  requirement?(population: PopulationShape): { field: string; message: string } | null;
  /** Each student shares its teacher twin's adapter (the single-agent baseline). */
  studentsAreTeacherTwins?: boolean;
  /** Whether it reads `history` (the population manager then keeps it and sends it with the roster). */
  needsHistory?(options: Options): boolean;
  /** The chosen students: at most `count`, no repeats, in the order chosen. */
  choose(context: MatchContext<Options>): MemberView[];
}

/** The options schema of a policy that takes none. */
export const NO_OPTIONS = z.strictObject({}) as unknown as z.ZodType<Record<string, never>>;

/** Up to `count` distinct candidates drawn uniformly. */
export function uniformPick(candidates: readonly MemberView[], count: number, rng: RandomStream): MemberView[] {
  return rng.sample(candidates.length, Math.min(count, candidates.length)).map((i) => candidates[i]!);
}

/** Up to `count` distinct candidates drawn in turn with probability proportional to `weight` (uniform if all 0). */
export function weightedPick(candidates: readonly MemberView[], count: number, rng: RandomStream, weight: (m: MemberView) => number): MemberView[] {
  const pool = [...candidates];
  const chosen: MemberView[] = [];
  while (chosen.length < count && pool.length > 0) {
    const weights = pool.map(weight);
    const total = weights.reduce((a, b) => a + b, 0);
    let index = pool.length - 1;
    if (total > 0) {
      let u = rng.next() * total;
      index = weights.findIndex((w) => (u -= w) < 0);
      if (index < 0) index = pool.length - 1;
    } else {
      index = rng.int(pool.length);
    }
    chosen.push(pool.splice(index, 1)[0]!);
  }
  return chosen;
}
