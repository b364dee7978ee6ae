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
import type { z } from 'zod';
import type { RatingSystemPlugin } from '../plugins/define.js';
import { guarded } from '../plugins/guard.js';
import { PluginRegistry } from '../plugins/registry.js';

/** A member's skill as the roster carries it: Elo's rating, or TrueSkill's μ (as `rating`) and σ. */
export interface Skill {
  rating: number;
  sigma?: number; // TrueSkill only: absent under Elo, so Elo runs' messages and checkpoints stay as they were
}

export type RatingConfig =
  | { system?: 'elo'; k: number; initial: number }
  | { system: 'trueskill'; mu: number; sigma: number; beta: number; tau: number; drawProbability: number };

/** A scenario's `rating`: a built-in's settings, or a plug-in (its module's absolute path: src/plugins/) and its options. */
export type RatingSettings = RatingConfig | { system: string; options?: unknown };

export interface RatingSystem {
  readonly name: string; // elo, trueskill, or a plug-in's path
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
export async function loadRatingLibrary(config: Pick<RatingSettings, 'system'>): Promise<void> {
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

const plugins = new PluginRegistry<RatingSystemPlugin<unknown>>();

/** Adds a plug-in rating system under its key, its module's absolute path (src/plugins/ does). */
export const registerRatingSystem = (key: string, plugin: RatingSystemPlugin<unknown>, options: z.ZodType<unknown>) => plugins.register(key, plugin, options);

/** The options schema of the rating system registered under `key`; undefined when there is none. */
export const ratingSystemOptions = (key: string) => plugins.options(key);

/** A plug-in's rating system, each call kept to the replay rules and each answer checked. */
function pluginRating(key: string, options: unknown): RatingSystem {
  const registered = plugins.get(key);
  if (!registered) throw new RangeError(`the rating system ${key} is not loaded (a scenario's plug-ins are loaded by loadScenario)`);
  const who = (member: string) => `the rating system ${key}, ${member}`;
  const model = guarded(who('create()'), registered.plugin.create.bind(registered.plugin))(registered.options.parse(options ?? {}));
  const skill = (value: Skill, member: string): Skill => {
    const ok = typeof value === 'object' && value !== null && Number.isFinite(value.rating) && (value.sigma === undefined || Number.isFinite(value.sigma));
    if (!ok) throw new RangeError(`${who(member)} returned ${JSON.stringify(value)}: a skill is { rating, sigma? } of finite numbers`);
    return value.sigma === undefined ? { rating: value.rating } : { rating: value.rating, sigma: value.sigma };
  };
  const [initial, winProbability, update, fitness] = [guarded(who('initial()'), model.initial.bind(model)), guarded(who('winProbability()'), model.winProbability.bind(model)), guarded(who('update()'), model.update.bind(model)), guarded(who('fitness()'), model.fitness.bind(model))];
  return {
    name: key,
    initial: () => skill(initial(), 'initial()'),
    winProbability(student, teacher) {
      const p = winProbability(student, teacher);
      if (!(p >= 0 && p <= 1)) throw new RangeError(`${who('winProbability()')} returned ${p}: a probability is in [0, 1]`);
      return p;
    },
    update(student, teacher, score) {
      checkScore(score);
      const next = update(student, teacher, score);
      return { student: skill(next?.student, 'update()'), teacher: skill(next?.teacher, 'update()') };
    },
    fitness(value) {
      const f = fitness(value);
      if (!Number.isFinite(f)) throw new RangeError(`${who('fitness()')} returned ${f}: fitness is a finite number`);
      return f;
    },
  };
}

export function ratingSystem(config: RatingSettings): RatingSystem {
  if (config.system === 'trueskill') return trueSkill(config as Extract<RatingConfig, { system: 'trueskill' }>);
  if (config.system === undefined || config.system === 'elo') return elo(config as { k: number; initial: number });
  return pluginRating(config.system, (config as { options?: unknown }).options);
}
