// `within`: students of the teacher's own sub-population, drawn uniformly.
import { NO_OPTIONS, uniformPick, type MatchPolicy } from './policy.js';

export const within: MatchPolicy = {
  options: NO_OPTIONS,
  reach: ({ students }) => students,
  choose: ({ teacher, students, count, rng }) => uniformPick(students.filter((s) => s.subpopulation === teacher.subpopulation), count, rng),
};
