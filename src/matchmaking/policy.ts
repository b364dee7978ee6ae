// Matchmaking: which students answer a teacher's task. A policy is one small function in its own file; this file
// holds what they share and the registry. Policies are pure: the same members and stream give the same match.

import type { RandomStream } from '../runtime/streams.js';

export interface MemberView {
  id: string;
  role: 'teacher' | 'student';
  subpopulation: number;
  adapterSlot: number;
  rating: number;
}

export interface MatchRequest {
  teacher: MemberView;
  students: readonly MemberView[]; // every student, in id order
  count: number; // students wanted per task
  rng: RandomStream;
}

/** Returns the chosen students (at most `count`, no repeats), in the order they were chosen. */
export type MatchPolicy = (request: MatchRequest) => MemberView[];

/** Expected solve probability of a student against a teacher's task (Elo's logistic curve, scale 400). */
export function expectedSolveRate(student: MemberView, teacher: MemberView): number {
  return 1 / (1 + 10 ** ((teacher.rating - student.rating) / 400));
}

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
