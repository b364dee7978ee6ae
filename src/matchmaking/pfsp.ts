// `pfsp`: prioritised fictitious self-play. Students are drawn with weight p·(1 - p), p the expected solve rate of
// the student on this teacher's tasks: near-balanced match-ups are the most informative for both sides.
import { expectedSolveRate, weightedPick, type MatchPolicy } from './policy.js';

export const pfsp: MatchPolicy = ({ teacher, students, count, rng }) =>
  weightedPick(students, count, rng, (s) => {
    const p = expectedSolveRate(s, teacher);
    return p * (1 - p);
  });
