// What a sweep costs over its runs: the same grid run one by one (`populora run` after `populora run`), then as
// `populora sweep --parallel 1` and `--parallel 2`, in rounds of alternating order. Runs per hour for each, the
// sweep's overhead over one by one (and, load-free, its own time at --parallel 1: its wall time less its runs'),
// each run's wall time and peak memory (through /usr/bin/time), and that every way gives the same run hashes.
// Prints a table; writes JSON.
//
//   node dist/bench/sweep.js [--sweep scenarios/sweeps/paper-toy-short.yaml] [--parallel 1,2] [--rounds 2] [--dir DIR] [--out bench/results/sweep-cpu.json]

import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { benchArgs } from './args.js';
import { jsonText } from '../src/runtime/durable.js';
import { planSweep } from '../src/sweep/grid.js';
import type { SweepState } from '../src/sweep/state.js';

const args = benchArgs(import.meta.url, { options: { sweep: { type: 'string', default: 'scenarios/sweeps/paper-toy-short.yaml' }, parallel: { type: 'string', default: '1,2' }, rounds: { type: 'string', default: '2' }, dir: { type: 'string', default: tmpdir() }, out: { type: 'string', default: 'bench/results/sweep-cpu.json' } } });
const cli = join(dirname(new URL(import.meta.url).pathname), '..', 'src', 'cli', 'main.js');
const plan = planSweep(args.sweep);
const root = mkdtempSync(join(args.dir, 'populora-bench-sweep-'));
const seconds = () => performance.now() / 1000;
const hashOf = (dir: string) => (JSON.parse(readFileSync(join(dir, 'summary.json'), 'utf8')) as { hash: string }).hash;

interface OneByOne {
  way: 'one by one';
  wallSeconds: number;
  runs: Array<{ run: string; wallSeconds: number; maxRssMiB: number | null; hash: string }>;
}
interface Swept {
  way: 'sweep';
  parallel: number;
  wallSeconds: number;
  runSeconds: number[]; // each run's process, as sweep.json records it
  overheadSeconds: number | null; // --parallel 1: the sweep's wall time less its runs' (starting processes, sweep.json, polling)
  hashes: Array<string | null>;
}

/** Every run with `populora run`, one after the other: each run's wall time and peak resident memory. */
function oneByOne(round: number): OneByOne {
  mkdirSync(join(root, 'scenarios'), { recursive: true });
  const begin = seconds();
  const runs = plan.runs.map((run) => {
    const file = join(root, 'scenarios', `${run.dir}.json`);
    writeFileSync(file, jsonText(run.scenario));
    const out = join(root, `one-by-one-${round}`, run.dir);
    const line = [...(existsSync('/usr/bin/time') ? ['/usr/bin/time', '-f', 'maxrss-kib %M'] : []), process.execPath, cli, 'run', file, '--out', out];
    const start = seconds();
    const result = spawnSync(line[0]!, line.slice(1), { encoding: 'utf8' });
    if (result.status !== 0) throw new Error(`${run.dir}: populora run failed: ${result.stderr}`);
    const rss = /maxrss-kib (\d+)/.exec(result.stderr)?.[1];
    return { run: run.dir, wallSeconds: seconds() - start, maxRssMiB: rss ? Number(rss) / 1024 : null, hash: hashOf(out) };
  });
  const wallSeconds = seconds() - begin;
  console.log(`round ${round}: one by one ${wallSeconds.toFixed(1)} s`);
  return { way: 'one by one', wallSeconds, runs };
}

function sweep(parallel: number, round: number): Swept {
  const out = join(root, `sweep-${round}-parallel-${parallel}`);
  const begin = seconds();
  const result = spawnSync(process.execPath, [cli, 'sweep', args.sweep, '--out', out, '--parallel', String(parallel)], { encoding: 'utf8' });
  const wallSeconds = seconds() - begin;
  if (result.status !== 0) throw new Error(`populora sweep --parallel ${parallel} failed: ${result.stderr}${result.stdout}`);
  const state = JSON.parse(readFileSync(join(out, 'sweep.json'), 'utf8')) as SweepState;
  const runSeconds = state.runs.map((r) => r.wallSeconds);
  console.log(`round ${round}: sweep --parallel ${parallel} ${wallSeconds.toFixed(1)} s`);
  return { way: 'sweep', parallel, wallSeconds, runSeconds, overheadSeconds: parallel === 1 ? wallSeconds - runSeconds.reduce((a, b) => a + b, 0) : null, hashes: state.runs.map((r) => r.hash) };
}

// Rounds alternate the order (the machine's load drifts): one by one, then the sweeps; then the other way round.
const parallels = args.parallel.split(',').map(Number);
const rounds: Array<Array<OneByOne | Swept>> = [];
for (let round = 0; round < Number(args.rounds); round++) {
  const ways: Array<() => OneByOne | Swept> = [() => oneByOne(round), ...parallels.map((p) => () => sweep(p, round))];
  const measured = (round % 2 === 0 ? ways : [...ways].reverse()).map((way) => way());
  rounds.push(round % 2 === 0 ? measured : measured.reverse());
}

const hashes = (rounds[0]![0] as OneByOne).runs.map((r) => r.hash);
const sameHashes = rounds.flat().every((w) => (w.way === 'one by one' ? w.runs.map((r) => r.hash) : w.hashes).every((h, i) => h === hashes[i]));
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor((values.length - 1) / 2)]!;
const wall = (i: number) => rounds.map((r) => r[i]!.wallSeconds);
const baseline = median(wall(0));
const rows = ['one by one (populora run each)', ...parallels.map((p) => `populora sweep --parallel ${p}`)].map((way, i) => ({
  way,
  'wall s, each round': wall(i).map((w) => w.toFixed(1)).join(', '),
  'runs/hour (median)': ((3600 * plan.runs.length) / median(wall(i))).toFixed(1),
  'vs one by one (median)': i === 0 ? '-' : `${(100 * (median(wall(i)) / baseline - 1)).toFixed(1)}%`,
}));
console.table(rows);
const overheads = rounds.flatMap((r) => r.filter((w): w is Swept => w.way === 'sweep' && w.overheadSeconds !== null).map((w) => w.overheadSeconds!));
console.log(`the sweep's own time at --parallel 1 (its wall time less its runs'): ${overheads.map((o) => `${o.toFixed(2)} s`).join(', ')} for ${plan.runs.length} runs`);
console.table((rounds[0]![0] as OneByOne).runs.map((r) => ({ run: r.run, 'wall s': r.wallSeconds.toFixed(1), 'max RSS MiB': r.maxRssMiB?.toFixed(0) ?? '-' })));
console.log(`the same run hashes every way: ${sameHashes}`);
const result = {
  sweep: args.sweep,
  runs: plan.runs.length,
  steps: plan.runs.map((r) => r.compute.steps),
  machine: { cpus: cpus().length, model: cpus()[0]?.model, memoryGiB: totalmem() / 2 ** 30, node: process.version, loadAverageAtEnd: loadavg() },
  rounds,
  summary: rows,
  sweepOverheadSeconds: overheads,
  sameHashes,
};
mkdirSync(dirname(args.out), { recursive: true });
writeFileSync(args.out, jsonText(result));
console.log(`wrote ${args.out}`);
rmSync(root, { recursive: true, force: true });
