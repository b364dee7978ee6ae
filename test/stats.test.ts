// Statistics across seeds: exact permutation p-values counted by hand, effect sizes by hand, the bootstrap
// interval's coverage of a known mean, the tests' size under the null (p <= 0.05 about 5% of the time), and the
// grouping of runs that differ only in seed.
import { describe, expect, it } from 'vitest';
import { groupBySeed, groupCurves, HEADLINES, summarizeGroups, testGroups, trailingMean, type SeededRun } from '../src/report/across-seeds.js';
import { binomial, bootstrapMean, pairedPermutationTest, permutationTest, quantile } from '../src/report/stats.js';
import type { StepMetrics } from '../src/sim/metrics.js';
import { Streams } from '../src/runtime/streams.js';

const streams = new Streams(11);
/** Standard normal draws (Box–Muller) from a seeded stream. */
function normals(n: number, key: string, shift = 0): number[] {
  const rng = streams.stream('normals', key);
  return Array.from({ length: n }, () => shift + Math.sqrt(-2 * Math.log(1 - rng.next())) * Math.cos(2 * Math.PI * rng.next()));
}

describe('permutation tests', () => {
  it('are exact on small groups: [1,2,3] vs [4,5,6] is one of the 2 most extreme of C(6,3) = 20 splits', () => {
    const result = permutationTest([1, 2, 3], [4, 5, 6], streams.stream('t'));
    expect(result).toMatchObject({ kind: 'two-sample', difference: -3, exact: true });
    expect(result.p).toBeCloseTo(2 / 20, 15);
    expect(result.effectSize).toBeCloseTo(-3, 12); // both SDs 1: d = (2 - 5) / 1
    // [1,2,4] vs [3,5,6]: |difference| 7/3; as extreme or more: {1,2,3}, {1,2,4} and their mirrors → 4/20
    expect(permutationTest([1, 2, 4], [3, 5, 6], streams.stream('t')).p).toBeCloseTo(4 / 20, 15);
  });

  it('paired: sign flips of [1, 2, 3] reach |mean| >= 2 in 2 of 8 patterns; d_z = mean / sd', () => {
    const result = pairedPermutationTest([2, 4, 6], [1, 2, 3], streams.stream('p'));
    expect(result).toMatchObject({ kind: 'paired', difference: 2, exact: true });
    expect(result.p).toBeCloseTo(2 / 8, 15);
    expect(result.effectSize).toBeCloseTo(2 / 1, 12);
    // [1, -1, 3]: observed sum 3; the 8 sign patterns of ±1 ±1 ±3 sum to 5, 1, 3, 3, 3, 3, 1, 5 (in absolute
    // value): 6 of 8 reach 3
    expect(pairedPermutationTest([1, -1, 3], [0, 0, 0], streams.stream('p')).p).toBeCloseTo(6 / 8, 15);
  });

  it('draw arrangements when there are too many, and then never give p = 0', () => {
    const a = normals(30, 'big-a', 5);
    const b = normals(30, 'big-b');
    expect(binomial(60, 30)).toBeGreaterThan(1e15);
    const result = permutationTest(a, b, streams.stream('big'), 2000);
    expect(result.exact).toBe(false);
    expect(result.p).toBeCloseTo(1 / 2001, 12); // every draw less extreme than a 5-SD shift
    expect(permutationTest(a, b, new Streams(1).stream('x'), 2000)).toEqual(permutationTest(a, b, new Streams(1).stream('x'), 2000)); // seeded
  });

  it('reject a true null about 5% of the time at p <= 0.05 (two-sample and paired)', () => {
    let twoSample = 0;
    let paired = 0;
    const trials = 400;
    for (let i = 0; i < trials; i++) {
      const [a, b] = [normals(7, `null-a-${i}`), normals(7, `null-b-${i}`)];
      if (permutationTest(a, b, streams.stream('null', i), 2000).p <= 0.05) twoSample++;
      if (pairedPermutationTest(a, b, streams.stream('null-paired', i)).p <= 0.05) paired++;
    }
    // binomial(400, 0.05): mean 20, sd 4.4
    expect(twoSample / trials).toBeGreaterThan(0.02);
    expect(twoSample / trials).toBeLessThan(0.085);
    expect(paired / trials).toBeGreaterThan(0.02);
    expect(paired / trials).toBeLessThan(0.085);
  });
});

describe('bootstrap intervals', () => {
  it('cover a known mean about 95% of the time (normal samples of 20)', () => {
    let covered = 0;
    const trials = 300;
    for (let i = 0; i < trials; i++) {
      const interval = bootstrapMean(normals(20, `boot-${i}`, 3), streams.stream('boot', i), { resamples: 1000 })!;
      if (interval.low <= 3 && 3 <= interval.high) covered++;
    }
    // the percentile bootstrap undercovers a little at n = 20 (about 93%)
    expect(covered / trials).toBeGreaterThan(0.88);
    expect(covered / trials).toBeLessThan(0.985);
  });

  it('are degenerate where they must be, and the same from the same stream', () => {
    expect(bootstrapMean([], streams.stream('e'))).toBeNull();
    expect(bootstrapMean([0.4], streams.stream('e'))).toEqual({ mean: 0.4, low: 0.4, high: 0.4 });
    expect(bootstrapMean([2, 2, 2], streams.stream('e'))).toEqual({ mean: 2, low: 2, high: 2 });
    const values = normals(10, 'same');
    expect(bootstrapMean(values, new Streams(4).stream('b'))).toEqual(bootstrapMean(values, new Streams(4).stream('b')));
  });

  it('take quantiles by linear interpolation (type 7)', () => {
    expect(quantile([1, 2, 3, 4], 0.5)).toBe(2.5);
    expect(quantile([10, 20], 0.25)).toBe(12.5);
    expect(quantile([5], 0.9)).toBe(5);
  });
});

describe('groups across seeds', () => {
  const steps = (solve: number[]): StepMetrics[] => solve.map((s, step) => ({ step, solveRate: s, teacherReward: 0, validity: 1, coverage: step } as unknown as StepMetrics));
  const run = (name: string, policy: string, seed: number, solve: number[]): SeededRun => ({ name, steps: steps(solve), scenario: { name, seed, steps: solve.length, matchmaking: { policy, studentsPerTask: 2 }, rl: { lr: 0.01 } } });
  const runs = [run('a1', 'cross', 1, [0.5, 0.7]), run('b1', 'self', 1, [0.2, 0.2]), run('a2', 'cross', 2, [0.6, 0.8]), run('b2', 'self', 2, [0.1, 0.3]), run('a3', 'cross', 3, [0.4, 0.6]), run('b3', 'self', 3, [0.3, 0.1])];

  it('group runs that differ only in seed (and name), labelled by the fields that differ', () => {
    const groups = groupBySeed(runs);
    expect(groups.map((g) => [g.label, g.runs.map((r) => r.name)])).toEqual([
      ['matchmaking.policy=cross', ['a1', 'a2', 'a3']],
      ['matchmaking.policy=self', ['b1', 'b2', 'b3']],
    ]);
    // a sweep's label where every run of the group has it; else the fields
    const labelled = (r: SeededRun): SeededRun => ({ ...r, group: `sweep ${r.scenario.matchmaking && (r.scenario.matchmaking as { policy: string }).policy}` });
    expect(groupBySeed(runs.map(labelled)).map((g) => g.label)).toEqual(['sweep cross', 'sweep self']);
    expect(groupBySeed([...runs, { ...run('c4', 'cross', 4, [0.5, 0.6]), group: 'from a sweep' }]).map((g) => g.label)).toEqual(['matchmaking.policy=cross', 'matchmaking.policy=self']);
    // another number of steps is another experiment
    expect(groupBySeed([...runs, run('d1', 'cross', 1, [0.5, 0.6, 0.7])]).map((g) => g.label)).toEqual(['matchmaking.policy=cross, steps=2', 'matchmaking.policy=self, steps=2', 'matchmaking.policy=cross, steps=3']);
  });

  it('summarise each group by the mean of per-run values and test them paired by seed', () => {
    const groups = groupBySeed(runs);
    const solve = HEADLINES.find((h) => h.key === 'solveRate')!;
    const [cross, self] = summarizeGroups(groups, [solve]);
    expect(cross!.values.solveRate!.mean).toBeCloseTo((0.6 + 0.7 + 0.5) / 3, 12); // per-run means over steps
    expect(self!.values.solveRate!.mean).toBeCloseTo((0.2 + 0.2 + 0.2) / 3, 12);
    const [test] = testGroups(groups, [solve]);
    expect(test!.result.kind).toBe('paired');
    expect(test!.result.difference).toBeCloseTo(0.2 - 0.6, 12);
    expect(test!.result.p).toBeCloseTo(2 / 8, 12); // every seed's difference negative: 2 of 2^3 sign patterns as extreme
  });

  it('draw mean curves over the seeds, smoothed run by run', () => {
    expect(trailingMean([1, null, 3, 5], 2)).toEqual([1, 1, 3, 4]);
    const [cross] = groupCurves(groupBySeed(runs), [HEADLINES.find((h) => h.key === 'solveRate')!], [0, 1], 1);
    expect(cross!.solveRate!.mean[0]).toBeCloseTo(0.5, 12);
    expect(cross!.solveRate!.mean[1]).toBeCloseTo(0.7, 12);
    expect(cross!.solveRate!.low[1]!).toBeLessThanOrEqual(0.7);
    expect(cross!.solveRate!.high[1]!).toBeGreaterThanOrEqual(0.7);
  });
});
