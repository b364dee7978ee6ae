// The fast-engine issue's GPU goals in one command, for a session lent a GPU for a short while: each goal's
// benchmark runs as a child process under its own time limit, then one table gives each goal, its target, what was
// measured and whether it is met; JSON beside it. A part that fails or runs out of time is reported as such and
// the others still run.
//
//   node dist/bench/gpu-goals.js [--parts decode,lora-small,training,forward-7b,svd-7b] [--limit-s 420]
//                                [--quick] [--out bench/results/goals-<device>.json]
//   node dist/bench/gpu-goals.js --merge a.json,b.json [--out ...]   (no runs: the parts of earlier runs in one
//                                table, a later file's part over an earlier one's)
//
// --quick: bench-small in place of the 0.5B shape, and no 7B parts (a dry run, minutes on lavapipe). On a machine
// lent for 10 minutes a call, run a few parts a call and --merge their JSON (docs/testing.md).

import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BenchUsageError, benchArgs } from './args.js';

export const PARTS = ['decode', 'lora-small', 'training', 'forward-7b', 'svd-7b'] as const;
export type Part = (typeof PARTS)[number];

interface InferenceRow {
  batch: number;
  adapters: number;
  decodeTokensPerS: number;
  decodeGBPerS: number;
}
interface InferenceResult {
  preset: string;
  device: string;
  streamingGBPerS: number;
  peakGBPerS: number;
  rows: InferenceRow[];
  loops: { rows: Array<{ batch: number; adapters: number; decodeTokensPerS: { host: number[]; device: number[] } }> };
}
interface TrainingResult {
  preset: string;
  rows: Array<{ batch: number; stepToForward: number }>;
}
interface EvolutionResult {
  rows: Array<{ shape: string; operator: string; path: string; msPerChild: number }>;
}

/** What each part left: its benchmark's JSON, or why there is none. */
export type PartOutcome<T> = { result: T } | { failure: string };
export interface Outcomes {
  decode?: PartOutcome<InferenceResult>;
  'lora-small'?: PartOutcome<InferenceResult>;
  training?: PartOutcome<TrainingResult>;
  'forward-7b'?: PartOutcome<InferenceResult>;
  'svd-7b'?: PartOutcome<EvolutionResult>;
}

export interface GoalRow {
  goal: string;
  target: string;
  measured: string; // or why nothing was
  met: boolean | null; // null: nothing to judge (not run, failed, or a goal without a target)
}

const percent = (x: number) => `${(x * 100).toFixed(1)}%`;
const rowOf = (r: InferenceResult, batch: number, adapters: number) => r.rows.find((row) => row.batch === batch && row.adapters === adapters);

/** Decode GB/s at batch 1 on the base model: forward() steps, and the device loop where it ran (scaled by its tok/s). */
function bandwidthAtBatch1(r: InferenceResult): { share: number; how: string } | undefined {
  const base = rowOf(r, 1, 0);
  if (!base) return undefined;
  const loop = r.loops.rows.find((row) => row.batch === 1 && row.adapters === 0);
  const loopTokensPerS = loop && loop.decodeTokensPerS.device.length > 0 ? Math.max(...loop.decodeTokensPerS.device) : 0;
  const [stepShare, loopShare] = [base.decodeGBPerS / r.peakGBPerS, (base.decodeGBPerS * loopTokensPerS) / base.decodeTokensPerS / r.peakGBPerS];
  const how = `${base.decodeTokensPerS.toFixed(0)} tok/s a forward step (${percent(stepShare)})${loopTokensPerS > 0 ? `, ${loopTokensPerS.toFixed(0)} tok/s in the device loop (${percent(loopShare)})` : ''} of ${r.peakGBPerS.toFixed(0)} GB/s`;
  return { share: Math.max(stepShare, loopShare), how };
}

/** Decode time with `adapters` distinct adapters over the base model's, at `batch`, less 1 (0.1: 10% slower). */
function loraOverhead(r: InferenceResult, batch: number, adapters: number): number | undefined {
  const [base, lora] = [rowOf(r, batch, 0), rowOf(r, batch, adapters)];
  return base && lora ? base.decodeTokensPerS / lora.decodeTokensPerS - 1 : undefined;
}

/** One row per goal, from whatever each part left (a goal whose part did not run or failed says so). */
export function goalRows(outcomes: Outcomes): GoalRow[] {
  const judged = <T>(outcome: PartOutcome<T> | undefined, judge: (result: T) => { measured: string; met: boolean | null } | undefined) => {
    if (!outcome) return { measured: 'not run', met: null };
    if ('failure' in outcome) return { measured: `failed: ${outcome.failure}`, met: null };
    return judge(outcome.result) ?? { measured: 'its benchmark has no row for it', met: null };
  };
  return [
    {
      goal: 'decode at batch 1, f16, base model: share of the streaming bandwidth',
      target: '>= 60%',
      ...judged(outcomes.decode, (r) => {
        const b = bandwidthAtBatch1(r);
        return b && { measured: `${r.preset}: ${b.how}`, met: b.share >= 0.6 };
      }),
    },
    {
      goal: 'batch 32 over 32 distinct rank-16 adapters against the base model',
      target: '<= 10% slower',
      ...judged(outcomes.decode, (r) => {
        const o = loraOverhead(r, 32, 32);
        return o === undefined ? undefined : { measured: `${r.preset}: ${percent(o)} slower`, met: o <= 0.1 };
      }),
    },
    {
      goal: 'bench-small LoRA overhead, 32 x 32 adapters',
      target: '<= 15%',
      ...judged(outcomes['lora-small'], (r) => {
        const o = loraOverhead(r, 32, 32);
        return o === undefined ? undefined : { measured: percent(o), met: o <= 0.15 };
      }),
    },
    {
      goal: 'a LoRA training step against a forward pass',
      target: '<= 3x',
      ...judged(outcomes.training, (r) => {
        if (r.rows.length === 0) return undefined;
        const worst = Math.max(...r.rows.map((row) => row.stepToForward));
        return { measured: `${r.preset}: ${r.rows.map((row) => `batch ${row.batch} ${row.stepToForward.toFixed(2)}x`).join(', ')}`, met: worst <= 3 };
      }),
    },
    {
      goal: 'a 7B-shaped forward at batch 1 (measured and reported)',
      target: '—',
      ...judged(outcomes['forward-7b'], (r) => {
        const base = rowOf(r, 1, 0);
        return base && { measured: `${base.decodeTokensPerS.toFixed(1)} tok/s decode, ${base.decodeGBPerS.toFixed(0)} GB/s (${percent(base.decodeGBPerS / r.peakGBPerS)})`, met: null };
      }),
    },
    {
      goal: 'SVD crossover of two 7B-shaped rank-16 adapters on the device',
      target: '< 100 ms',
      ...judged(outcomes['svd-7b'], (r) => {
        const row = r.rows.find((x) => x.shape.startsWith('7B-shaped') && x.operator === 'crossover svd' && x.path === 'device');
        return row && { measured: `${row.msPerChild.toFixed(1)} ms a child`, met: row.msPerChild < 100 };
      }),
    },
  ];
}

/** The benchmark and arguments of each part (`out`: where it writes its JSON). */
function partCommand(part: Part, quick: boolean, out: string): [script: string, args: string[]] {
  const shape = quick ? 'bench-small' : 'qwen2.5-0.5b-shape';
  const quiet = ['--profile', 'none', '--out', out];
  switch (part) {
    case 'decode':
      return ['inference.js', ['--preset', shape, '--shapes', '1x1,32x32', '--decode', '32', '--loop-rounds', '1', ...quiet]];
    case 'lora-small':
      return ['inference.js', ['--preset', 'bench-small', '--shapes', '32x32', '--decode', '32', '--loop-rounds', '0', ...quiet]];
    case 'training':
      return ['training.js', ['--preset', shape, '--repeats', '2', '--profile', '0', '--out', out]];
    case 'forward-7b':
      return ['inference.js', ['--preset', 'llama-2-7b-shape', '--tile-weights', '--shapes', '1x1', '--decode', '8', '--loop-rounds', '0', ...quiet]];
    case 'svd-7b':
      return ['evolution.js', ['--device', 'webgpu', '--repeats', '3', '--out', out]];
  }
}

/** Runs one part's benchmark as a child process (its tables go to this process's output) and reads its JSON. */
function runPart(part: Part, quick: boolean, limitS: number): PartOutcome<never> {
  const out = join(tmpdir(), `populora-goal-${process.pid}-${part}.json`);
  const [script, args] = partCommand(part, quick, out);
  console.log(`\n== ${part}: node dist/bench/${script} ${args.filter((a) => a !== out).join(' ')}`);
  const child = spawnSync(process.execPath, [join(dirname(fileURLToPath(import.meta.url)), script), ...args], { stdio: ['ignore', 'inherit', 'inherit'], timeout: limitS * 1000 });
  try {
    if (child.error && (child.error as NodeJS.ErrnoException).code === 'ETIMEDOUT') return { failure: `over the ${limitS} s limit (--limit-s)` };
    if (child.error) return { failure: child.error.message };
    if (child.status !== 0) return { failure: `exit code ${child.status ?? child.signal}` };
    return { result: JSON.parse(readFileSync(out, 'utf8')) as never };
  } finally {
    rmSync(out, { force: true });
  }
}

/** The outcomes of earlier runs' JSON files, a later file's part over an earlier one's. */
export function mergedOutcomes(files: string[]): Outcomes {
  const outcomes: Outcomes = {};
  for (const file of files) {
    let written: { outcomes?: Outcomes };
    try {
      written = JSON.parse(readFileSync(file, 'utf8')) as { outcomes?: Outcomes };
    } catch (error) {
      throw new BenchUsageError(`--merge: ${file}: ${(error as Error).message}`);
    }
    if (typeof written.outcomes !== 'object' || written.outcomes === null) throw new BenchUsageError(`--merge: ${file} is not a gpu-goals.js result (no "outcomes")`);
    Object.assign(outcomes, written.outcomes);
  }
  return outcomes;
}

function main(): void {
  const args = benchArgs(import.meta.url, { options: { parts: { type: 'string', default: PARTS.join(',') }, 'limit-s': { type: 'string', default: '420' }, quick: { type: 'boolean', default: false }, merge: { type: 'string' }, out: { type: 'string' } } });
  const parts = args.parts!.split(',').map((p) => p.trim());
  const unknown = parts.filter((p) => !PARTS.includes(p as Part));
  if (unknown.length > 0) throw new BenchUsageError(`--parts: unknown ${unknown.join(', ')}; choose from ${PARTS.join(', ')}`);
  const limitS = Number(args['limit-s']);
  if (!(limitS > 0)) throw new BenchUsageError(`--limit-s: ${args['limit-s']} is not a positive number of seconds`);
  const skipped = args.quick ? ['forward-7b', 'svd-7b'] : [];
  const outcomes: Outcomes = args.merge ? mergedOutcomes(args.merge.split(',')) : {};
  if (!args.merge) for (const part of PARTS) if (parts.includes(part) && !skipped.includes(part)) (outcomes as Record<Part, PartOutcome<never>>)[part] = runPart(part, args.quick!, limitS);
  const rows = goalRows(outcomes);
  const device = Object.values(outcomes).flatMap((o) => (o && 'result' in o ? [(o.result as { device?: string }).device ?? ''] : [])).find((d) => d !== '') ?? 'unknown';
  console.log(`\nthe fast-engine issue's GPU goals${args.quick ? ' (--quick: bench-small, no 7B parts)' : ''}; device: ${device}\n`);
  console.log('| goal | target | measured | met |');
  console.log('|---|---|---|---|');
  for (const r of rows) console.log(`| ${r.goal} | ${r.target} | ${r.measured} | ${r.met === null ? '—' : r.met ? 'yes' : 'no'} |`);
  const out = args.out ?? `bench/results/goals-${device.split(' / ')[0]!.replace(/[^\w.-]+/g, '-')}.json`;
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, JSON.stringify({ device, quick: args.quick, limitS, rows, outcomes }, null, 2));
  console.log(`\nwrote ${out}`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) main();
