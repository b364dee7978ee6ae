// Ratings of teachers and students: Elo (the default) or TrueSkill (the paper's). One match = one (task, student)
// pair, the student's score the share of its answers that were right; zero-sum between the two.
//
//   Elo:       P(student solves) = 1 / (1 + 10^((R_teacher - R_student) / 400)),  ΔR_student = k·(score - P) = -ΔR_teacher
//   TrueSkill: P(student solves) = Φ((μs - μt) / √(σs² + σt² + 2β²)); the student wins the match if its score
//              beats P, loses if below, draws if equal (within 1e-6; PopuLoRA); the update is ts-trueskill's rate_1vs1 (the
//              factor graph of Herbrich et al. 2007, a port of Python's `trueskill`), σ growing by τ each match.
//              Fitness is the conservative μ - 3σ.
//
// ts-trueskill pulls in mathjs (about 1.5 s to import), so it is loaded only by runs that select it:
// `loadRatingLibrary` before `ratingSystem` (src/sim/run.ts does).

import type { Rating as TrueSkillRating, TrueSkill } from 'ts-trueskill';

/** A member's skill as the roster carries it: Elo's rating, or TrueSkill's μ (as `rating`) and σ. */
export interface Skill {
  rating: number;
  sigma?: number; // TrueSkill only: absent under Elo, so Elo runs' messages and checkpoints stay as they were
}

export type RatingConfig =
  | { system?: 'elo'; k: number; initial: number }
  | { system: 'trueskill'; mu: number; sigma: number; beta: number; tau: number; drawProbability: number };

export interface RatingSystem {
  readonly name: 'elo' | 'trueskill';
  initial(): Skill;
  /** The probability that the student solves the teacher's task. */
  winProbability(student: Skill, teacher: Skill): number;
  /** Both skills after one match; `score` is the student's share of right answers, in [0, 1]. */
  update(student: Skill, teacher: Skill, score: number): { student: Skill; teacher: Skill };
  /** What evolution ranks by: Elo's rating; TrueSkill's μ - 3σ. */
  fitness(skill: Skill): number;
}

/** Elo's expected score of the student (logistic curve, scale 400). */
export function eloWinProbability(student: Skill, teacher: Skill): number {
  return 1 / (1 + 10 ** ((teacher.rating - student.rating) / 400));
}

function checkScore(score: number): void {
  if (!(score >= 0 && score <= 1)) throw new RangeError(`a match score must be in [0, 1], got ${score}`);
}

function elo(config: { k: number; initial: number }): RatingSystem {
  return {
    name: 'elo',
    initial: () => ({ rating: config.initial }),
    winProbability: eloWinProbability,
    update(student, teacher, score) {
      checkScore(score);
      const delta = config.k * (score - eloWinProbability(student, teacher));
      return { student: { rating: student.rating + delta }, teacher: { rating: teacher.rating - delta } };
    },
    fitness: (skill) => skill.rating,
  };
}

/** A score this close to P(solve) is a draw: P comes through an approximated normal CDF (ts-gaussian gives Φ(0) = 0.500000015). */
const DRAW_TOLERANCE = 1e-6;

type TrueSkillLibrary = typeof import('ts-trueskill');
let library: TrueSkillLibrary | null = null;

/** Loads ts-trueskill if the configuration selects TrueSkill (once per process). */
export async function loadRatingLibrary(config: RatingConfig): Promise<void> {
  if (config.system === 'trueskill' && library === null) library = await import('ts-trueskill');
}

function trueSkill(config: Extract<RatingConfig, { system: 'trueskill' }>): RatingSystem {
  if (library === null) throw new Error('TrueSkill ratings: call loadRatingLibrary(scenario.rating) before ratingSystem()');
  const { TrueSkill: Environment, Rating, rate_1vs1 } = library;
  const env: TrueSkill = new Environment(config.mu, config.sigma, config.beta, config.tau, config.drawProbability);
  const toRating = (skill: Skill): TrueSkillRating => new Rating(skill.rating, skill.sigma ?? config.sigma);
  const fromRating = (r: TrueSkillRating): Skill => ({ rating: r.mu, sigma: r.sigma });
  const winProbability = (student: Skill, teacher: Skill) => env.winProbability([toRating(student)], [toRating(teacher)]);
  return {
    name: 'trueskill',
    initial: () => ({ rating: config.mu, sigma: config.sigma }),
    winProbability,
    update(student, teacher, score) {
      checkScore(score);
      const p = winProbability(student, teacher);
      const drawn = Math.abs(score - p) <= DRAW_TOLERANCE;
      if (score < p && !drawn) {
        const [t, s] = rate_1vs1(toRating(teacher), toRating(student), false, undefined, env);
        return { student: fromRating(s), teacher: fromRating(t) };
      }
      const [s, t] = rate_1vs1(toRating(student), toRating(teacher), drawn, undefined, env);
      return { student: fromRating(s), teacher: fromRating(t) };
    },
    fitness: (skill) => skill.rating - 3 * (skill.sigma ?? config.sigma),
  };
}

export function ratingSystem(config: RatingConfig): RatingSystem {
  return config.system === 'trueskill' ? trueSkill(config) : elo(config);
}
