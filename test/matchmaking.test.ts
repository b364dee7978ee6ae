// Matchmaking policies: who may be chosen, how many, how often, the same match from the same stream; PFSP's
// weightings against AlphaStar's definitions; options and history reaching a policy through its context; the
// scenario schema's list of policies and their options coming from the registry.
import { describe, expect, it } from 'vitest';
import { MATCH_POLICIES, MATCH_POLICY_NAMES, matchPolicy, NO_HISTORY, type MatchContext, type MemberView, type PairHistory } from '../src/matchmaking/index.js';
import { eloWinProbability } from '../src/rating/rating.js';
import { Streams } from '../src/runtime/streams.js';
import { parseScenario } from '../src/scenario/scenario.js';

const student = (i: number, subpopulation: number, rating: number): MemberView => ({ id: `student-${i}`, role: 'student', subpopulation, adapterSlot: 10 + i, rating });
const students = [student(0, 0, 1000), student(1, 0, 1200), student(2, 1, 900), student(3, 1, 1010), student(4, 2, 1500), student(5, 2, 700)];
const teacher: MemberView = { id: 'teacher-0', role: 'teacher', subpopulation: 1, adapterSlot: 12, rating: 1000 };
const streams = new Streams(3);

/** A context as the matchmaker builds it: Elo's win probability, no history unless given. */
function context(name: keyof typeof MATCH_POLICIES, count: number, rng = streams.stream('x'), options: Record<string, unknown> = {}, history: Record<string, PairHistory> = {}): MatchContext<Record<string, unknown>> {
  return { teacher, students, count, rng, options: matchPolicy(name).options.parse(options), winProbability: eloWinProbability, history: (t, s) => history[`${t} ${s}`] ?? NO_HISTORY };
}
const choose = (name: keyof typeof MATCH_POLICIES, ctx: MatchContext<Record<string, unknown>>) => matchPolicy(name).choose(ctx);

/** Draws one student `n` times; the share each was chosen. */
function shares(name: keyof typeof MATCH_POLICIES, n: number, options: Record<string, unknown> = {}, history: Record<string, PairHistory> = {}): number[] {
  const counts = new Map<string, number>();
  for (let i = 0; i < n; i++) {
    const [chosen] = choose(name, context(name, 1, streams.stream(name, JSON.stringify(options).replace(/\//g, ''), i), options, history));
    counts.set(chosen!.id, (counts.get(chosen!.id) ?? 0) + 1);
  }
  return students.map((s) => (counts.get(s.id) ?? 0) / n);
}
const normalised = (weights: number[]) => weights.map((w) => w / weights.reduce((a, b) => a + b, 0));
/** P(student solves) by Elo, computed here from the formula. */
const p = (s: MemberView) => 1 / (1 + 10 ** ((teacher.rating - s.rating) / 400));

describe('matchmaking policies', () => {
  it('choose distinct students from the allowed sub-populations, at most `count`', () => {
    for (let draw = 0; draw < 50; draw++) {
      const ctx = (name: keyof typeof MATCH_POLICIES, count: number) => context(name, count, streams.stream('match', draw));
      const crossed = choose('cross', ctx('cross', 3));
      expect(crossed).toHaveLength(3);
      expect(crossed.every((s) => s.subpopulation !== 1)).toBe(true);
      expect(new Set(crossed.map((s) => s.id)).size).toBe(3);
      expect(choose('within', ctx('within', 5)).map((s) => s.id).sort()).toEqual(['student-2', 'student-3']);
      expect(new Set(choose('random', ctx('random', 6)).map((s) => s.id)).size).toBe(6);
      expect(new Set(choose('pfsp', ctx('pfsp', 4)).map((s) => s.id)).size).toBe(4);
    }
  });

  it('self gives the teacher its twin, rating the closest ratings', () => {
    expect(choose('self', context('self', 3)).map((s) => s.id)).toEqual(['student-2']);
    expect(choose('rating', context('rating', 3)).map((s) => s.id)).toEqual(['student-0', 'student-3', 'student-2']);
  });

  it('pfsp draws a single student with probability proportional to its weighting of x = P(the task beats the student)', () => {
    // AlphaStar's league (pfsp in its pseudocode): variance x(1 - x), "squared"/hard (1 - x)^2, linear 1 - x.
    const x = students.map((s) => 1 - p(s));
    const expected: Record<string, number[]> = {
      variance: normalised(x.map((v) => v * (1 - v))),
      hard: normalised(x.map((v) => (1 - v) ** 2)),
      linear: normalised(x.map((v) => 1 - v)),
    };
    for (const [weighting, want] of Object.entries(expected)) {
      const got = shares('pfsp', 6000, { weighting });
      got.forEach((share, i) => expect(Math.abs(share - want[i]!), `${weighting} ${students[i]!.id}`).toBeLessThan(0.02));
    }
    // hard favours the students most likely to solve; variance the balanced ones
    const hard = shares('pfsp', 3000, { weighting: 'hard', power: 3 });
    expect(hard[4]).toBeGreaterThan(0.5); // student-4, rated 1500, solves with p ≈ 0.95
  });

  it('pfsp with winRate: observed reads the pairs\' past results from its context', () => {
    // teacher-0 beat student-0 in 1 of 10 answers and student-5 in 9 of 10; the others never met it (prior 1/2).
    const history = { 'teacher-0 student-0': { tasks: 5, correct: 9, answers: 10 }, 'teacher-0 student-5': { tasks: 5, correct: 1, answers: 10 } };
    const solve = students.map((s) => (s.id === 'student-0' ? 10 / 12 : s.id === 'student-5' ? 2 / 12 : 0.5));
    const got = shares('pfsp', 6000, { weighting: 'linear', winRate: 'observed' }, history);
    normalised(solve).forEach((want, i) => expect(Math.abs(got[i]! - want)).toBeLessThan(0.02));
    expect(matchPolicy('pfsp').needsHistory?.(matchPolicy('pfsp').options.parse({ winRate: 'observed' }))).toBe(true);
    expect(matchPolicy('pfsp').needsHistory?.(matchPolicy('pfsp').options.parse({}))).toBe(false);
  });

  it('give the same match from the same stream', () => {
    for (const name of MATCH_POLICY_NAMES) {
      const run = () => choose(name, context(name, 2, new Streams(9).stream('same'))).map((s) => s.id);
      expect(run()).toEqual(run());
    }
  });
});

describe('the scenario schema and the policies', () => {
  const minimal = (matchmaking: string) => `name: t\nseed: 1\nsteps: 1\nmodel: { preset: tiny }\npopulation: { subpopulations: 2 }\nmatchmaking: ${matchmaking}\n`;

  it('takes the policy names and each policy\'s options from the registry, defaults filled in', () => {
    expect(MATCH_POLICY_NAMES).toEqual(Object.keys(MATCH_POLICIES));
    const s = parseScenario(minimal('{ policy: pfsp, options: { weighting: hard } }'), 'm.yaml');
    expect(s.matchmaking).toEqual({ policy: 'pfsp', studentsPerTask: 2, options: { weighting: 'hard', power: 2, winRate: 'rating' } });
    expect(parseScenario(minimal('{ policy: pfsp }'), 'm.yaml').matchmaking).toEqual({ policy: 'pfsp', studentsPerTask: 2 }); // as before policies took options
  });

  it('refuses options a policy does not take, or bad values, naming the field', () => {
    expect(() => parseScenario(minimal('{ policy: cross, options: { weighting: hard } }'), 'm.yaml')).toThrow('m.yaml: field "matchmaking.options": unknown field(s) "weighting"');
    expect(() => parseScenario(minimal('{ policy: pfsp, options: { weighting: easy } }'), 'm.yaml')).toThrow('m.yaml: field "matchmaking.options.weighting": expected variance, hard or linear');
    expect(() => parseScenario(minimal('{ policy: pfsp, options: { power: -1 } }'), 'm.yaml')).toThrow('m.yaml: field "matchmaking.options.power": expected a positive number');
  });
});
