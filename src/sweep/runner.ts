// Running a sweep: each run is an ordinary `populora run` in a process of its own, `parallel` at a time, into
// its own run folder; sweep.json follows every start and exit. A stop (SIGINT, SIGTERM) is passed on to the runs,
// which finish their step, checkpoint and exit; a resumed sweep keeps its finished runs, resumes the interrupted
// ones from their checkpoints (`populora run --resume`) and starts the rest. On Linux a run is started under
// `setpriv --pdeathsig TERM`: if the sweep is killed outright, its runs still stop at the end of their step with
// a checkpoint, and a resume waits for any that is still finishing before it continues that run.
//
// This file orchestrates processes and reads the clock for wall times and progress: no run's content depends
// on it (each run is a function of its scenario).

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import { availableParallelism, freemem, hostname } from 'node:os';
import { join } from 'node:path';
import { firstDifference, shown } from '../sim/differences.js';
import { jsonText, nodeDisk, RunFolderError, writeFileDurably } from '../runtime/durable.js';
import { EVENTS_FILE } from '../sim/resume.js';
import { acquireRunLock, LOCK_FILE } from '../runtime/run-lock.js';
import { compiledWorker } from '../runtime/worker-threads.js';
import type { SweepPlan } from './grid.js';
import { initialState, logFileOf, readSweepState, scenarioFileOf, SWEEP_FILE, writeSweepState, type SweepRunState, type SweepState } from './state.js';

/** Memory budgeted per run: a paper-toy run peaks at 0.2-0.3 GiB resident (bench/sweep.ts); larger scenarios take more. */
const RUN_BYTES = 1 << 30;

/** Runs at a time when not told: one per core, as many as the free memory holds (at least one). */
export function defaultParallel(runs: number): number {
  return Math.max(1, Math.min(runs, availableParallelism(), Math.floor((0.8 * freemem()) / RUN_BYTES)));
}

export interface SweepProgress {
  stepsDone: number; // over every run (finished runs count all their steps)
  stepsTotal: number;
  running: string[];
  finished: number;
  failed: number;
  runs: number;
}

export interface SweepOptions {
  out: string;
  parallel: number;
  resume: boolean;
  onProgress?: (progress: SweepProgress) => void;
  onNote?: (line: string) => void;
  /** Aborted once: the runs finish their step and stop; `hardStop` aborted too: they stop at once. */
  signal?: AbortSignal;
  hardStop?: AbortSignal;
  cli?: string; // the populora entry point the runs are started with (default: this build's)
}

export interface SweepResult {
  state: SweepState;
  stopped: boolean;
}

const now = () => performance.now() / 1000; // wall-clock-ok: the sweep's ETA and its runs' wall seconds in sweep.json, never a run's data

/** Starts or resumes a sweep in `options.out` and runs it to the end (or until stopped). */
export async function runSweep(plan: SweepPlan, options: SweepOptions): Promise<SweepResult> {
  mkdirSync(options.out, { recursive: true });
  const lock = acquireRunLock(options.out);
  try {
    const state = options.resume ? resumedState(plan, options.out) : freshState(plan, options.out, options.parallel);
    state.parallel = options.parallel;
    writeSweepState(options.out, state);
    return await schedule(plan, state, options);
  } finally {
    lock.release();
  }
}

function freshState(plan: SweepPlan, out: string, parallel: number): SweepState {
  if (existsSync(join(out, SWEEP_FILE))) throw new RunFolderError(`${out} already holds a sweep: continue it with --resume, or choose another --out`);
  mkdirSync(join(out, 'scenarios'), { recursive: true });
  for (const run of plan.runs) {
    if (existsSync(join(out, run.dir, EVENTS_FILE))) throw new RunFolderError(`${join(out, run.dir)} already holds a run: choose another --out`);
    writeFileDurably(nodeDisk, scenarioFileOf(out, run.dir), jsonText(run.scenario));
  }
  return initialState(plan, parallel);
}

/** The recorded state, after checking that the sweep file still makes the same runs with the same scenarios. */
function resumedState(plan: SweepPlan, out: string): SweepState {
  if (!existsSync(join(out, SWEEP_FILE))) throw new RunFolderError(`${out}: no sweep to resume (no ${SWEEP_FILE}); start it without --resume`);
  const state = readSweepState(out);
  const recorded = state.runs.map((r) => r.dir).join(' ');
  const planned = plan.runs.map((r) => r.dir).join(' ');
  const changed = `${plan.file} no longer makes the sweep recorded in ${join(out, SWEEP_FILE)}`;
  if (recorded !== planned) throw new RunFolderError(`${changed}: its runs were ${shown(state.runs.map((r) => r.dir))}, now ${shown(plan.runs.map((r) => r.dir))}. Put the file back, or start a new sweep with another --out`);
  for (const run of plan.runs) {
    const file = scenarioFileOf(out, run.dir);
    if (!existsSync(file)) throw new RunFolderError(`${file} is missing, so the sweep cannot check that ${plan.file} still makes run ${run.dir}; start a new sweep with another --out (the finished run folders in ${out} stay valid on their own)`);
    const before = JSON.parse(readFileSync(file, 'utf8')) as unknown;
    const difference = firstDifference(before, JSON.parse(JSON.stringify(run.scenario)));
    if (difference) throw new RunFolderError(`${changed}: run ${run.dir}'s field "${difference.field}" was ${shown(difference.recorded)}, now ${shown(difference.other)} (${file}). Put the file back, or start a new sweep with another --out`);
  }
  return state;
}

/** Steps a run has finished: the lines of its metrics.jsonl. */
function stepsDone(out: string, run: SweepRunState): number {
  if (run.status === 'finished') return run.compute.steps;
  const file = join(out, run.dir, 'metrics.jsonl');
  if (!existsSync(file)) return 0;
  const text = readFileSync(file, 'utf8');
  let lines = 0;
  for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) lines++;
  return Math.min(lines, run.compute.steps);
}

async function schedule(plan: SweepPlan, state: SweepState, options: SweepOptions): Promise<SweepResult> {
  const { out } = options;
  const save = () => writeSweepState(out, state);
  const finishedBefore = (r: SweepRunState) => r.status === 'finished' && existsSync(join(out, r.dir, 'summary.json'));
  const queue = state.runs.filter((r) => !finishedBefore(r));
  for (const run of queue) if (run.status !== 'pending') run.status = 'pending'; // interrupted, stopped or failed: again
  const running = new Map<string, ChildProcess>();
  const started = now();
  const report = () =>
    options.onProgress?.({
      stepsDone: state.runs.reduce((n, r) => n + stepsDone(out, r), 0),
      stepsTotal: state.runs.reduce((n, r) => n + r.compute.steps, 0),
      running: [...running.keys()],
      finished: state.runs.filter((r) => r.status === 'finished').length,
      failed: state.runs.filter((r) => r.status === 'failed').length,
      runs: state.runs.length,
    });
  const ticker = setInterval(report, 1000);
  report();
  let stopping = false;
  let next = () => {};
  const stopAll = (signal: NodeJS.Signals) => {
    for (const child of running.values()) child.kill(signal);
  };
  const onStop = () => {
    stopping = true;
    stopAll('SIGTERM'); // each run finishes its step, checkpoints, exits 143
    next();
  };
  const onHardStop = () => stopAll('SIGKILL');
  options.signal?.addEventListener('abort', onStop);
  options.hardStop?.addEventListener('abort', onHardStop);
  if (options.signal?.aborted) stopping = true;
  try {
    await new Promise<void>((resolve) => {
      next = () => {
        if (running.size === 0 && (stopping || queue.length === 0)) return resolve();
        while (!stopping && running.size < options.parallel && queue.length > 0) {
          const run = queue.shift()!;
          void startRun(run).then(next);
        }
      };
      const startRun = async (run: SweepRunState): Promise<void> => {
        running.set(run.dir, spawnPlaceholder);
        await waitForOrphan(join(out, run.dir), options.onNote);
        if (stopping) {
          running.delete(run.dir);
          return;
        }
        const resuming = existsSync(join(out, run.dir, EVENTS_FILE));
        // the cores shared among the runs at a time: each CPU backend's threads (over a scenario's own)
        const threads = ['--threads', String(Math.max(1, Math.floor(availableParallelism() / options.parallel)))];
        const args = resuming ? ['run', '--resume', join(out, run.dir), ...threads] : ['run', scenarioFileOf(out, run.dir), '--out', join(out, run.dir), ...threads];
        const child = spawnRun(options.cli ?? compiledWorker(new URL('../cli/main.js', import.meta.url)), args, logFileOf(out, run.dir));
        running.set(run.dir, child);
        Object.assign(run, { status: 'running', attempts: run.attempts + 1 });
        save();
        const began = now();
        const code = await new Promise<number>((done) => {
          child.on('exit', (c, signal) => done(c ?? (signal === 'SIGKILL' ? 137 : signal === 'SIGTERM' ? 143 : 1)));
          child.on('error', (error) => {
            options.onNote?.(`run ${run.dir}: cannot start its process (${error.message})`);
            done(1);
          });
        });
        running.delete(run.dir);
        run.wallSeconds += now() - began;
        run.exitCode = code;
        run.status = code === 0 ? 'finished' : code === 130 || code === 143 || code === 137 ? 'stopped' : 'failed';
        if (run.status === 'finished') run.hash = readHash(join(out, run.dir));
        if (run.status === 'failed') options.onNote?.(`run ${run.dir} failed (exit code ${code}); its output: ${logFileOf(out, run.dir)}`);
        save();
        report();
      };
      next();
    });
  } finally {
    clearInterval(ticker);
    options.signal?.removeEventListener('abort', onStop);
    options.hardStop?.removeEventListener('abort', onHardStop);
    state.wallSeconds += now() - started;
    save();
    report();
  }
  return { state, stopped: stopping && state.runs.some((r) => r.status !== 'finished') };
}

/** Stands for a run while it waits to start (so the parallel count holds it). */
const spawnPlaceholder = { kill: () => true } as unknown as ChildProcess;

const setprivAvailable = process.platform === 'linux' && spawnSync('setpriv', ['--version'], { stdio: 'ignore' }).status === 0;

/** A `populora run` process, its output appended to `logFile`, in a process group of its own (Ctrl-C reaches the sweep alone, which passes one stop on). */
function spawnRun(cli: string, args: string[], logFile: string): ChildProcess {
  mkdirSync(join(logFile, '..'), { recursive: true });
  const log = openSync(logFile, 'a');
  try {
    const node = [process.execPath, cli, ...args];
    const line = setprivAvailable ? ['setpriv', '--pdeathsig', 'TERM', '--', ...node] : node;
    return spawn(line[0]!, line.slice(1), { stdio: ['ignore', log, log], detached: true });
  } finally {
    closeSync(log);
  }
}

function readHash(runDir: string): string | null {
  try {
    return (JSON.parse(readFileSync(join(runDir, 'summary.json'), 'utf8')) as { hash?: string }).hash ?? null;
  } catch {
    return null;
  }
}

/** Waits while a process of a killed sweep still holds the run's lock (finishing its step before it stops). */
async function waitForOrphan(runDir: string, onNote?: (line: string) => void): Promise<void> {
  const lockFile = join(runDir, LOCK_FILE);
  for (let noted = false; existsSync(lockFile); noted = true) {
    let holder: { pid?: number; host?: string };
    try {
      holder = JSON.parse(readFileSync(lockFile, 'utf8')) as { pid?: number; host?: string };
    } catch {
      return; // being written or removed: the run's own lock handling decides
    }
    if (holder.host !== hostname() || typeof holder.pid !== 'number' || !alive(holder.pid)) return;
    if (!noted) onNote?.(`run ${runDir} is still held by pid ${holder.pid} (a run of the stopped sweep finishing its step): waiting for it`);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
