// Opening a run folder to write in: a fresh start (or, with --overwrite, a start over an earlier run), or a resume
// from the newest checkpoint. A resume trusts nothing it did not verify: the checkpoint against its manifest, the
// scenario against the one the run was started with, the event log against the position the checkpoint recorded,
// and metrics.jsonl against the steps before the checkpoint. Whatever does not hold is named, with what to do.

import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { ScenarioError, type Scenario } from '../scenario/scenario.js';
import { checkpointSteps, openCheckpoint, recordedScenario, restartAdvice, withoutCheckpoint, type CheckpointState, type RecordedScenario } from './checkpoints.js';
import { firstDifference, shown } from './differences.js';
import { AppendOnlyFile, jsonText, RunFolderError, writeFileDurably, type Disk } from '../runtime/durable.js';
import { EventLog } from '../runtime/event-log.js';
import type { StepMetrics } from './metrics.js';
import { LOCK_FILE } from '../runtime/run-lock.js';

export const SCENARIO_FILE = 'scenario.json';
export const EVENTS_FILE = 'events.msgpack';
export const METRICS_FILE = 'metrics.jsonl';

/** A run folder open for writing: where its log and metrics go on, and the state to go on from. */
export interface OpenedRun {
  saved: CheckpointState | null;
  log: EventLog;
  metrics: AppendOnlyFile;
  lastMetrics: StepMetrics | null; // the last step's, when a resume runs no step (a finished run's summary)
}

/** A fresh run: refuses a folder that holds one, unless `overwrite`, which clears it (the caller holds its lock). */
export function startRun(scenario: Scenario, dir: string, overwrite: boolean, disk: Disk): OpenedRun {
  if (existsSync(join(dir, EVENTS_FILE))) {
    if (!overwrite) throw new RunFolderError(`${dir} already holds a run: choose another --out, or continue it with --resume`);
    if (!existsSync(join(dir, SCENARIO_FILE))) throw new RunFolderError(`${dir} does not look like a run folder (no ${SCENARIO_FILE}): not overwriting it`);
    for (const entry of readdirSync(dir)) if (entry !== LOCK_FILE) rmSync(join(dir, entry), { recursive: true, force: true });
  }
  writeFileDurably(disk, join(dir, SCENARIO_FILE), jsonText(scenario));
  return { saved: null, log: new EventLog(join(dir, EVENTS_FILE), disk), metrics: new AppendOnlyFile(join(dir, METRICS_FILE), disk, 'create'), lastMetrics: null };
}

/** Continues a run from its newest checkpoint (from the start if it has none), after verifying what it rests on. */
export function resumeRun(scenario: Scenario, dir: string, file: string, disk: Disk): OpenedRun {
  if (!existsSync(join(dir, EVENTS_FILE))) throw new RunFolderError(`${dir}: no run to resume (no ${EVENTS_FILE})`);
  removeCutOffWrites(dir);
  const step = checkpointSteps(dir).at(-1);
  if (step === undefined) return { saved: null, log: new EventLog(join(dir, EVENTS_FILE), disk), metrics: new AppendOnlyFile(join(dir, METRICS_FILE), disk, 'create'), lastMetrics: null };
  const { manifest, state } = openCheckpoint(dir, step, withoutCheckpoint(dir, step));
  checkSameScenario(manifest.scenario, scenario, step, file);
  const log = EventLog.continueFrom(join(dir, EVENTS_FILE), manifest.events, { disk, checkpoint: `checkpoint step-${step}`, whatToDo: withoutCheckpoint(dir, step) });
  try {
    const kept = keepMetricsBefore(join(dir, METRICS_FILE), step, disk);
    return { saved: state, log, metrics: new AppendOnlyFile(join(dir, METRICS_FILE), disk, 'append'), lastMetrics: kept.at(-1) ?? null };
  } catch (error) {
    log.close();
    throw error;
  }
}

/** Removes what a crash left half-written: a checkpoint's staging folder, a file's temporary twin, a log being rewritten. */
function removeCutOffWrites(dir: string): void {
  const leftovers = (folder: string) => (existsSync(folder) ? readdirSync(folder).filter((name) => /\.(partial|resume)$/.test(name)).map((name) => join(folder, name)) : []);
  for (const path of [...leftovers(dir), ...leftovers(join(dir, 'checkpoints'))]) rmSync(path, { recursive: true, force: true });
}

/** Refuses a resume whose scenario differs from the one the run started with, except in `steps` (which extends it). */
function checkSameScenario(recorded: RecordedScenario, scenario: Scenario, step: number, file: string): void {
  if (scenario.steps < step) throw new ScenarioError(`${file}: field "steps": ${scenario.steps}, but the run has a checkpoint at step ${step} already; give at least ${step}`);
  const difference = firstDifference(recorded, recordedScenario(scenario));
  if (difference) {
    throw new ScenarioError(`${file}: field "${difference.field}" is ${shown(difference.other)}, but the run was started with ${shown(difference.recorded)} (checkpoint step-${step}): a resume continues the same run, and only "steps" may change (to extend it). Put the field back, or start a new run with --out elsewhere`);
  }
}

/**
 * Keeps metrics.jsonl's lines of the steps before `step` (a resume re-runs the rest), which must be steps 0 to
 * step - 1, each whole. A last line without its newline is a write cut off by the crash: dropped.
 */
function keepMetricsBefore(file: string, step: number, disk: Disk): StepMetrics[] {
  const text = existsSync(file) ? readFileSync(file, 'utf8') : '';
  const lines = text.split('\n').slice(0, -1); // what follows the last newline was torn, or is empty
  const kept: StepMetrics[] = [];
  const keptLines: string[] = [];
  for (const [i, line] of lines.entries()) {
    let metrics: StepMetrics;
    try {
      metrics = JSON.parse(line) as StepMetrics;
    } catch {
      throw new RunFolderError(`${file}: line ${i + 1} is not JSON (the file is damaged), so the metrics of the steps before the checkpoint cannot be kept. To go on, ${restartAdvice(dirname(file))}`);
    }
    if (metrics.step >= step) continue;
    kept.push(metrics);
    keptLines.push(`${line}\n`);
  }
  const missing = kept.findIndex((m, i) => m.step !== i);
  if (missing >= 0 || kept.length < step) {
    const first = missing >= 0 ? missing : kept.length;
    throw new RunFolderError(`${file}: the metrics of step ${first} are missing (the checkpoint to resume from is at step ${step}, so steps 0 to ${step - 1} must be there). To go on, ${restartAdvice(dirname(file))}`);
  }
  writeFileDurably(disk, file, keptLines.join(''));
  return kept;
}
