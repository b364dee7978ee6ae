// A sweep's folder: its state file `sweep.json` (every run with its overrides, compute, status, exit code, run
// hash and wall time; rewritten whole through a synced temporary file at every change, so a kill at any moment
// leaves the old state or the new), `scenarios/RUN.json` (each run's resolved scenario, what its process runs),
// `logs/RUN.log` (each process's output) and one ordinary run folder per run.
//
//   SWEEP/sweep.json   SWEEP/scenarios/RUN.json   SWEEP/logs/RUN.log   SWEEP/RUN/ (scenario.json, events.msgpack, ...)

import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { jsonText, nodeDisk, readJsonFile, RunFolderError, writeFileDurably } from '../runtime/durable.js';
import type { Compute, SweepPlan } from './grid.js';

export const SWEEP_FILE = 'sweep.json';
export const SWEEP_FORMAT = 1;

export type RunStatus = 'pending' | 'running' | 'finished' | 'stopped' | 'failed';

export interface SweepRunState {
  dir: string;
  group: string;
  variant: string | null;
  overrides: Record<string, unknown>;
  compute: Compute;
  status: RunStatus;
  exitCode: number | null; // of its last process
  attempts: number; // processes started for it (a resume is one more)
  wallSeconds: number; // summed over its processes
  hash: string | null; // the run hash, once finished
}

export interface SweepState {
  format: number;
  name: string;
  sweepFile: string;
  base: string | null;
  equalCompute: boolean;
  compute: { equal: boolean; proposalsPerStep: number[]; answersPerStep: number[] }; // the distinct values over the runs
  parallel: number; // of the last invocation
  wallSeconds: number; // summed over invocations
  runs: SweepRunState[];
}

export const scenarioFileOf = (sweepDir: string, run: string) => join(sweepDir, 'scenarios', `${run}.json`);
export const logFileOf = (sweepDir: string, run: string) => join(sweepDir, 'logs', `${run}.log`);

/** A fresh state for a plan: every run pending. */
export function initialState(plan: SweepPlan, parallel: number): SweepState {
  const distinct = (values: number[]) => [...new Set(values)].sort((a, b) => a - b);
  const proposals = distinct(plan.runs.map((r) => r.compute.proposalsPerStep));
  const answers = distinct(plan.runs.map((r) => r.compute.answersPerStep));
  return {
    format: SWEEP_FORMAT,
    name: plan.name,
    sweepFile: plan.file,
    base: plan.base,
    equalCompute: plan.equalCompute,
    compute: { equal: proposals.length === 1 && answers.length === 1, proposalsPerStep: proposals, answersPerStep: answers },
    parallel,
    wallSeconds: 0,
    runs: plan.runs.map((r) => ({ dir: r.dir, group: r.group, variant: r.variant, overrides: r.overrides, compute: r.compute, status: 'pending', exitCode: null, attempts: 0, wallSeconds: 0, hash: null })),
  };
}

export function writeSweepState(sweepDir: string, state: SweepState): void {
  mkdirSync(sweepDir, { recursive: true });
  writeFileDurably(nodeDisk, join(sweepDir, SWEEP_FILE), jsonText(state), `free some space, then continue the sweep with: populora sweep ${state.sweepFile} --out ${sweepDir} --resume`);
}

export function readSweepState(sweepDir: string): SweepState {
  const state = readJsonFile<SweepState>(join(sweepDir, SWEEP_FILE), `start the sweep again in another folder (the finished run folders in ${sweepDir} stay valid on their own)`);
  if (state.format !== SWEEP_FORMAT || !Array.isArray(state.runs)) throw new RunFolderError(`${join(sweepDir, SWEEP_FILE)}: not a sweep state of format ${SWEEP_FORMAT}`);
  return state;
}

/** The run folders of a sweep that have finished (what `populora compare SWEEP_DIR` compares). */
export function sweepRunFolders(sweepDir: string): string[] {
  return readSweepState(sweepDir).runs.filter((r) => r.status === 'finished' && existsSync(join(sweepDir, r.dir, 'summary.json'))).map((r) => join(sweepDir, r.dir));
}
