// `populora sweep SWEEP.yaml [--out DIR] [--parallel N] [--resume]`: every run of a sweep's grid as an ordinary
// run folder, N processes at a time, with one progress bar over the whole grid and its ETA. The grid is
// validated (and its compute compared) before anything runs. SIGINT or SIGTERM stops the runs at the end of
// their step, with a checkpoint, and prints the --resume command; a second signal stops them at once.

import { join } from 'node:path';
import cliProgress from 'cli-progress';
import { openSweep } from '../sweep/grid.js';
import { defaultParallel, runSweep, type SweepProgress } from '../sweep/runner.js';
import type { SweepState } from '../sweep/state.js';
import { sweepPlugins } from '../sweep/sweep.js';
import { UsageError } from './run-command.js';

const SIGNAL_EXIT_CODES: Record<string, number> = { SIGINT: 130, SIGTERM: 143 };

const duration = (seconds: number) => {
  if (!Number.isFinite(seconds)) return '-';
  const s = Math.round(seconds);
  return s >= 3600 ? `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m` : s >= 60 ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s` : `${s}s`;
};

export async function sweepCommand(file: string, options: { out?: string; parallel?: number; resume?: boolean }): Promise<void> {
  const plan = await openSweep(file);
  const out = options.out ?? join('runs', plan.name);
  if (options.parallel !== undefined && options.parallel < 1) throw new UsageError(`--parallel must be at least 1, got ${options.parallel}`);
  const parallel = options.parallel ?? defaultParallel(plan.runs.length);
  const groups = new Set(plan.runs.map((r) => r.group)).size;
  console.log(`${options.resume ? 'resuming' : 'running'} sweep ${plan.name}: ${plan.runs.length} runs in ${groups} group(s) → ${out}, ${parallel} at a time`);
  const computes = [...new Set(plan.runs.map((r) => `${r.compute.proposalsPerStep} proposals and ${r.compute.answersPerStep} answers per step`))];
  console.log(computes.length === 1 ? `equal compute: ${computes[0]} in every run` : `compute differs between runs (equalCompute: false): ${computes.join('; ')}`);
  for (const { field, plugin, runs } of sweepPlugins(plan)) console.log(`plug-in ${field}: ${plugin} (${runs.length === plan.runs.length ? 'every run' : runs.join(', ')})`);

  const bar = new cliProgress.SingleBar(
    { format: 'sweep |{bar}| {value}/{total} steps | runs: {finished}/{runs} done, {running} running{failed} | {left} left', hideCursor: true, noTTYOutput: true, notTTYSchedule: 60_000 },
    cliProgress.Presets.shades_classic,
  );
  const started = performance.now() / 1000;
  let firstDone: number | null = null;
  let barStarted = false;
  const onProgress = (p: SweepProgress) => {
    firstDone ??= p.stepsDone; // this invocation's rate: a resume starts part-way
    const elapsed = performance.now() / 1000 - started;
    const rate = (p.stepsDone - firstDone) / elapsed;
    const payload = { finished: p.finished, runs: p.runs, running: p.running.length, failed: p.failed > 0 ? `, ${p.failed} failed` : '', left: rate > 0 ? duration((p.stepsTotal - p.stepsDone) / rate) : '-' };
    if (!barStarted) bar.start(p.stepsTotal, p.stepsDone, payload);
    else bar.update(p.stepsDone, payload);
    barStarted = true;
  };
  const notes: string[] = [];
  const stop = new AbortController();
  const hardStop = new AbortController();
  const onSignal = (name: NodeJS.Signals) => {
    if (stop.signal.aborted) {
      console.error(`\n${name} again: stopping the runs now, without finishing their step (each resumes from its last checkpoint)`);
      hardStop.abort(name);
      return;
    }
    console.error(`\n${name}: the runs finish their step, save a checkpoint and stop (${name} again stops them at once)`);
    stop.abort(name);
  };
  for (const name of ['SIGINT', 'SIGTERM'] as const) process.on(name, onSignal);
  try {
    const result = await runSweep(plan, { out, parallel, resume: options.resume ?? false, onProgress, onNote: (line) => notes.push(line), signal: stop.signal, hardStop: hardStop.signal });
    bar.stop();
    for (const note of notes) console.log(`note: ${note}`);
    printRuns(result.state, out);
    if (result.stopped) {
      console.log(`stopped; continue the sweep with: populora sweep ${file} --out ${out} --resume`);
      process.exitCode = SIGNAL_EXIT_CODES[String(stop.signal.reason)] ?? 1;
    } else if (result.state.runs.some((r) => r.status === 'failed')) {
      console.log(`some runs failed (their output is in ${join(out, 'logs')}); after fixing the cause, run them again with: populora sweep ${file} --out ${out} --resume`);
      process.exitCode = 1;
    } else {
      console.log(`compare the groups with: populora compare ${out} --out ${join(out, 'compare.html')}`);
    }
  } catch (error) {
    bar.stop();
    throw error;
  } finally {
    for (const name of ['SIGINT', 'SIGTERM'] as const) process.off(name, onSignal);
  }
}

function printRuns(state: SweepState, out: string): void {
  console.log(`\nrun${' '.repeat(29)}status     wall    run hash`);
  for (const r of state.runs) console.log(`${r.dir.padEnd(32)}${r.status.padEnd(11)}${duration(r.wallSeconds).padStart(6)}  ${r.hash ? `${r.hash.slice(0, 16)}…` : ''}`);
  const finished = state.runs.filter((r) => r.status === 'finished').length;
  const runSeconds = state.runs.reduce((s, r) => s + r.wallSeconds, 0);
  console.log(`\n${finished} of ${state.runs.length} runs finished; the sweep's wall time ${duration(state.wallSeconds)} (its runs' own: ${duration(runSeconds)})${state.wallSeconds > 0 ? `, ${((3600 * finished) / state.wallSeconds).toFixed(1)} runs per hour` : ''}; ${join(out, 'sweep.json')}`);
}
