// `pfsp`: prioritised fictitious self-play (AlphaStar's league). The teacher's task goes to students drawn with
// weight f(x), x the probability that the task beats the student (the teacher "wins"):
//   variance  x(1 - x)       near-balanced match-ups, the most informative for both sides (the default)
//   hard      (1 - x)^power  the students most likely to solve the teacher's tasks (AlphaStar's "squared": power 2)
//   linear    1 - x
// x comes from the rating system (1 - its P(student solves)), or, with `winRate: observed`, from the pair's past
// results with a uniform prior: 1 - (correct + 1) / (answers + 2).
import { z } from 'zod';
import { weightedPick, type MatchContext, type MatchPolicy, type MemberView } from './policy.js';

const options = z.strictObject({
  weighting: z.enum(['variance', 'hard', 'linear'], { error: 'expected variance, hard or linear' }).default('variance'),
  power: z.number({ error: 'expected a number' }).positive({ error: 'expected a positive number' }).default(2),
  winRate: z.enum(['rating', 'observed'], { error: 'expected rating or observed' }).default('rating'),
});
export type PfspOptions = z.infer<typeof options>;

/** P(student solves): from the ratings, or from the pair's record. */
function solveProbability(context: MatchContext<PfspOptions>, student: MemberView): number {
  if (context.options.winRate === 'rating') return context.winProbability(student, context.teacher);
  const { correct, answers } = context.history(context.teacher.id, student.id);
  return (correct + 1) / (answers + 2);
}

/** f(x) written in p = 1 - x, the student's solve probability (so that `variance` is p(1 - p) bit for bit). */
export function pfspWeight(p: number, o: PfspOptions): number {
  if (o.weighting === 'variance') return p * (1 - p);
  return o.weighting === 'hard' ? p ** o.power : p;
}

export const pfsp: MatchPolicy<PfspOptions> = {
  options,
  reach: ({ subpopulations, students }) => subpopulations * students,
  needsHistory: (o) => o.winRate === 'observed',
  choose: (context) => weightedPick(context.students, context.count, context.rng, (s) => pfspWeight(solveProbability(context, s), context.options)),
};
