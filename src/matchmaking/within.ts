// `within`: students of the teacher's own sub-population, drawn uniformly.
import { uniformPick, type MatchPolicy } from './policy.js';

export const within: MatchPolicy = ({ teacher, students, count, rng }) => uniformPick(students.filter((s) => s.subpopulation === teacher.subpopulation), count, rng);
