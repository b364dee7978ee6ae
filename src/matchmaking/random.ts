// `random`: any students, drawn uniformly.
import { uniformPick, type MatchPolicy } from './policy.js';

export const random: MatchPolicy = ({ students, count, rng }) => uniformPick(students, count, rng);
