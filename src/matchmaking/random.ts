// `random`: any students, drawn uniformly.
import { NO_OPTIONS, uniformPick, type MatchPolicy } from './policy.js';

export const random: MatchPolicy = {
  options: NO_OPTIONS,
  reach: ({ subpopulations, students }) => subpopulations * students,
  choose: ({ students, count, rng }) => uniformPick(students, count, rng),
};
