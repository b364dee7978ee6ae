// Statistics across seeds (`populora compare`): a percentile-bootstrap confidence interval of a mean, and
// permutation tests of a difference between two groups of runs, with an effect size. Every random draw comes
// from a named seeded stream, so a report is the same every time it is made from the same runs. Where the
// arrangements are few enough the tests enumerate all of them (an exact p-value); otherwise they draw `resamples`
// of them and count the observed one too ((hits + 1) / (draws + 1), never 0).

import type { RandomStream } from '../runtime/streams.js';

export interface Interval {
  mean: number;
  low: number;
  high: number;
}

export const mean = (values: readonly number[]) => values.reduce((a, b) => a + b, 0) / values.length;

/** Sample variance (n - 1 in the denominator); 0 for fewer than two values. */
export function variance(values: readonly number[]): number {
  if (values.length < 2) return 0;
  const m = mean(values);
  return values.reduce((s, v) => s + (v - m) ** 2, 0) / (values.length - 1);
}

/** The q-quantile of sorted values, interpolating linearly between order statistics (R's type 7). */
export function quantile(sorted: readonly number[], q: number): number {
  const position = (sorted.length - 1) * q;
  const below = Math.floor(position);
  const above = Math.min(below + 1, sorted.length - 1);
  return sorted[below]! + (position - below) * (sorted[above]! - sorted[below]!);
}

/** The mean and its percentile-bootstrap interval at `level` (resampling the values with replacement). */
export function bootstrapMean(values: readonly number[], rng: RandomStream, options: { resamples?: number; level?: number } = {}): Interval | null {
  if (values.length === 0) return null;
  const { resamples = 2000, level = 0.95 } = options;
  const n = values.length;
  const means = new Float64Array(resamples);
  for (let r = 0; r < resamples; r++) {
    let sum = 0;
    for (let i = 0; i < n; i++) sum += values[rng.int(n)]!;
    means[r] = sum / n;
  }
  const sorted = [...means].sort((a, b) => a - b);
  return { mean: mean(values), low: quantile(sorted, (1 - level) / 2), high: quantile(sorted, 1 - (1 - level) / 2) };
}

export interface TestResult {
  kind: 'paired' | 'two-sample';
  difference: number; // mean of a - mean of b (paired: the mean difference)
  p: number; // two-sided
  exact: boolean; // every arrangement enumerated
  effectSize: number | null; // Cohen's d (paired: d_z, the mean difference over its standard deviation); null when the spread is 0
}

// Two statistics are "as extreme" within rounding: sums in another order differ in the last bits.
const atLeast = (value: number, observed: number) => value >= observed - 1e-12 * Math.max(1, Math.abs(observed));

/** Two-sided permutation test of mean(a) - mean(b), the groups' labels shuffled; Cohen's d with the pooled SD. */
export function permutationTest(a: readonly number[], b: readonly number[], rng: RandomStream, resamples = 20_000): TestResult {
  if (a.length === 0 || b.length === 0) throw new RangeError('a permutation test needs values in both groups');
  const all = [...a, ...b];
  const total = all.reduce((s, v) => s + v, 0);
  const [na, nb] = [a.length, b.length];
  const statistic = (sumA: number) => Math.abs(sumA / na - (total - sumA) / nb);
  const observed = statistic(a.reduce((s, v) => s + v, 0));
  let hits = 0;
  let draws = 0;
  const exact = binomial(all.length, na) <= resamples;
  if (exact) {
    forEachSubsetSum(all, na, (sumA) => {
      draws++;
      if (atLeast(statistic(sumA), observed)) hits++;
    });
  } else {
    for (draws = 0; draws < resamples; draws++) {
      const chosen = rng.sample(all.length, na);
      if (atLeast(statistic(chosen.reduce((s, i) => s + all[i]!, 0)), observed)) hits++;
    }
  }
  const pooled = Math.sqrt(((na - 1) * variance(a) + (nb - 1) * variance(b)) / Math.max(1, na + nb - 2));
  const difference = mean(a) - mean(b);
  return { kind: 'two-sample', difference, p: exact ? hits / draws : (hits + 1) / (draws + 1), exact, effectSize: pooled > 0 ? difference / pooled : null };
}

/** Two-sided sign-flip test of the mean of paired differences a[i] - b[i]; effect size d_z. */
export function pairedPermutationTest(a: readonly number[], b: readonly number[], rng: RandomStream, resamples = 20_000): TestResult {
  if (a.length !== b.length || a.length === 0) throw new RangeError('a paired test needs two equally long, non-empty lists');
  const differences = a.map((v, i) => v - b[i]!);
  const n = differences.length;
  const observed = Math.abs(mean(differences));
  let hits = 0;
  let draws = 0;
  const exact = 2 ** n <= resamples;
  if (exact) {
    for (let signs = 0; signs < 2 ** n; signs++, draws++) {
      const sum = differences.reduce((s, d, i) => s + ((signs >> i) & 1 ? -d : d), 0);
      if (atLeast(Math.abs(sum / n), observed)) hits++;
    }
  } else {
    for (draws = 0; draws < resamples; draws++) {
      const sum = differences.reduce((s, d) => s + (rng.next() < 0.5 ? -d : d), 0);
      if (atLeast(Math.abs(sum / n), observed)) hits++;
    }
  }
  const sd = Math.sqrt(variance(differences));
  const difference = mean(differences);
  return { kind: 'paired', difference, p: exact ? hits / draws : (hits + 1) / (draws + 1), exact, effectSize: sd > 0 ? difference / sd : null };
}

/** n choose k, as a float (large values only need to compare with a budget). */
export function binomial(n: number, k: number): number {
  let result = 1;
  for (let i = 1; i <= k; i++) result = (result * (n - k + i)) / i;
  return Math.round(result);
}

/** Calls `visit` with the sum of every k-element subset of values (each subset once). */
function forEachSubsetSum(values: readonly number[], k: number, visit: (sum: number) => void): void {
  const walk = (start: number, left: number, sum: number) => {
    if (left === 0) return visit(sum);
    for (let i = start; i <= values.length - left; i++) walk(i + 1, left - 1, sum + values[i]!);
  };
  walk(0, k, 0);
}
