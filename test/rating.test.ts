// Ratings: Elo by hand; TrueSkill (ts-trueskill) against the values Python's `trueskill` documents and against
// the closed-form two-player update of Herbrich et al. (2007), written here from the paper with its own normal
// distribution functions; the match outcome rule (the student wins if its score beats P(solve)); the scenario's
// defaults (the paper's parameters).
import { beforeAll, describe, expect, it } from 'vitest';
import { eloWinProbability, loadRatingLibrary, ratingSystem, type RatingConfig, type Skill } from '../src/rating/rating.js';
import { parseScenario } from '../src/scenario/scenario.js';

const PAPER: RatingConfig = { system: 'trueskill', mu: 25, sigma: 25 / 3, beta: 25 / 6, tau: 25 / 300, drawProbability: 0.1 };

// The normal distribution, independently of ts-gaussian: Numerical Recipes' erfcc (relative error < 1.2e-7).
function erfc(x: number): number {
  const z = Math.abs(x);
  const t = 1 / (1 + z / 2);
  const r = t * Math.exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
  return x >= 0 ? r : 2 - r;
}
const cdf = (x: number) => 0.5 * erfc(-x / Math.SQRT2);
const pdf = (x: number) => Math.exp(-x * x / 2) / Math.sqrt(2 * Math.PI);
function ppf(p: number): number {
  let [lo, hi] = [-10, 10];
  for (let i = 0; i < 200; i++) {
    const mid = (lo + hi) / 2;
    if (cdf(mid) < p) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}

/** Herbrich et al.'s two-player update, winner first (or a draw), with dynamics τ added to both σ first. */
function closedForm(winner: Skill & { sigma: number }, loser: Skill & { sigma: number }, drawn: boolean, c: typeof PAPER & { system: 'trueskill' }) {
  const [s1, s2] = [Math.hypot(winner.sigma, c.tau), Math.hypot(loser.sigma, c.tau)];
  const cc = Math.sqrt(2 * c.beta ** 2 + s1 ** 2 + s2 ** 2);
  const epsilon = ppf((c.drawProbability + 1) / 2) * Math.SQRT2 * c.beta;
  const t = (winner.rating - loser.rating) / cc;
  const e = epsilon / cc;
  let v: number;
  let w: number;
  if (!drawn) {
    v = pdf(t - e) / cdf(t - e);
    w = v * (v + t - e);
  } else {
    const [a, b] = [e - t, -e - t];
    v = (pdf(b) - pdf(a)) / (cdf(a) - cdf(b));
    w = v * v + (a * pdf(a) - b * pdf(b)) / (cdf(a) - cdf(b));
  }
  const update = (mu: number, s: number, sign: number) => ({ rating: mu + sign * (s * s / cc) * v, sigma: s * Math.sqrt(1 - (s * s / (cc * cc)) * w) });
  return [update(winner.rating, s1, 1), update(loser.rating, s2, -1)];
}

beforeAll(async () => {
  await loadRatingLibrary(PAPER);
});

describe('Elo', () => {
  it('moves k·(score - P) from the teacher to the student', () => {
    const elo = ratingSystem({ k: 16, initial: 1000 });
    expect(elo.initial()).toEqual({ rating: 1000 });
    expect(elo.update({ rating: 1000 }, { rating: 1000 }, 1)).toEqual({ student: { rating: 1008 }, teacher: { rating: 992 } });
    // teacher 400 points above: P = 1/11; a student that solves half gains 16·(0.5 - 1/11)
    const change = elo.update({ rating: 1000 }, { rating: 1400 }, 0.5);
    expect(change.student.rating).toBeCloseTo(1000 + 16 * (0.5 - 1 / 11), 12);
    expect(change.teacher.rating).toBeCloseTo(1400 - 16 * (0.5 - 1 / 11), 12);
    expect(eloWinProbability({ rating: 1000 }, { rating: 1400 })).toBeCloseTo(1 / 11, 15);
    expect(elo.fitness({ rating: 1234 })).toBe(1234);
    expect(() => elo.update({ rating: 1 }, { rating: 1 }, 1.5)).toThrow('a match score must be in [0, 1], got 1.5');
  });
});

describe('TrueSkill (ts-trueskill)', () => {
  const ts = () => ratingSystem(PAPER);
  const fresh = { rating: 25, sigma: 25 / 3 };

  it('gives the values Python trueskill documents for two new players (a win; a draw)', () => {
    const win = ts().update(fresh, fresh, 1); // the student's score 1 beats P = 0.5: the student wins
    expect(win.student.rating).toBeCloseTo(29.396, 3);
    expect(win.student.sigma).toBeCloseTo(7.171, 3);
    expect(win.teacher.rating).toBeCloseTo(20.604, 3);
    expect(win.teacher.sigma).toBeCloseTo(7.171, 3);
    const draw = ts().update(fresh, fresh, 0.5); // equal to P: a draw
    expect(draw.student.rating).toBeCloseTo(25, 10);
    expect(draw.student.sigma).toBeCloseTo(6.458, 3);
  });

  it('agrees with the closed-form two-player update, for wins, losses and draws at unequal ratings', () => {
    const student = { rating: 31.2, sigma: 4.1 };
    const teacher = { rating: 22.5, sigma: 6.3 };
    const p = ts().winProbability(student, teacher);
    const [sw, tl] = closedForm(student, teacher, false, PAPER as typeof PAPER & { system: 'trueskill' });
    const won = ts().update(student, teacher, Math.min(1, p + 0.1));
    expect(won.student.rating).toBeCloseTo(sw!.rating, 5);
    expect(won.student.sigma).toBeCloseTo(sw!.sigma, 5);
    expect(won.teacher.rating).toBeCloseTo(tl!.rating, 5);
    expect(won.teacher.sigma).toBeCloseTo(tl!.sigma, 5);
    const [tw, sl] = closedForm(teacher, student, false, PAPER as typeof PAPER & { system: 'trueskill' });
    const lost = ts().update(student, teacher, p - 0.1);
    expect(lost.teacher.rating).toBeCloseTo(tw!.rating, 5);
    expect(lost.student.rating).toBeCloseTo(sl!.rating, 5);
    expect(lost.student.sigma).toBeCloseTo(sl!.sigma, 5);
    const a = { rating: 27, sigma: 5 };
    const b = { rating: 27, sigma: 3 };
    const [da, db] = closedForm(a, b, true, PAPER as typeof PAPER & { system: 'trueskill' });
    const drawn = ts().update(a, b, 0.5); // equal means: P = 0.5 exactly
    expect(drawn.student.sigma).toBeCloseTo(da!.sigma, 5);
    expect(drawn.teacher.sigma).toBeCloseTo(db!.sigma, 5);
    expect(drawn.student.rating).toBeCloseTo(27, 10);
  });

  it('predicts P(solve) = Φ((μs - μt) / √(σs² + σt² + 2β²)), and ranks by μ - 3σ', () => {
    const student = { rating: 30, sigma: 2 };
    const teacher = { rating: 26, sigma: 5 };
    expect(ts().winProbability(student, teacher)).toBeCloseTo(cdf(4 / Math.sqrt(4 + 25 + 2 * (25 / 6) ** 2)), 6);
    expect(ts().fitness(student)).toBe(30 - 6);
    expect(ts().initial()).toEqual({ rating: 25, sigma: 25 / 3 });
  });

  it('is deterministic: the same match gives the same bits', () => {
    const once = () => ts().update({ rating: 24.1, sigma: 7.7 }, { rating: 26.3, sigma: 5.2 }, 0.25);
    expect(once()).toEqual(once());
  });
});

describe('the scenario\'s rating section', () => {
  const minimal = (rating: string) => `name: t\nseed: 1\nsteps: 1\nmodel: { preset: tiny }\npopulation: { subpopulations: 2 }\nrating: ${rating}\n`;
  it('defaults to Elo as before, and gives TrueSkill the paper\'s parameters', () => {
    expect(parseScenario(minimal('{}'), 'r.yaml').rating).toEqual({ k: 16, initial: 1000 });
    expect(parseScenario(minimal('{ system: trueskill }'), 'r.yaml').rating).toEqual(PAPER);
  });
  it('names a field that belongs to the other system, or an unknown system', () => {
    expect(() => parseScenario(minimal('{ system: trueskill, k: 16 }'), 'r.yaml')).toThrow('r.yaml: field "rating": unknown field(s) "k"');
    expect(() => parseScenario(minimal('{ system: glicko }'), 'r.yaml')).toThrow('r.yaml: field "rating.system": expected system: elo or trueskill');
  });
});
