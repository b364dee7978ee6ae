// Replay (DESIGN.md rule 6): re-executes a run from its recorded scenario in a scratch folder (checkpointing where
// the recorded run did) and checks every file of the run folder against what the replay wrote: the event log
// record by record (and byte for byte: bytes after the last record are named too), metrics.jsonl line by line,
// lineage.json and summary.json field by field, each checkpoint's files byte for byte and against its manifest.
// Identical means all of them agree; otherwise each difference is named by its file and where in it. A step's
// wall-clock `timing` (metrics.jsonl, summary.json's last step) is not compared: no two runs take the same time.

import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import type { Backend } from '../backend/backend.js';
import type { BatchTokensSetting } from '../engine/budget.js';
import { readScenario, type Scenario } from '../scenario/scenario.js';
import { checkpointProblems, checkpointSteps, filesUnder, recordedScenario, type CheckpointManifest } from './checkpoints.js';
import { firstDifference, shown } from './differences.js';
import { RunFolderError } from '../runtime/durable.js';
import { readEventLog, type RunEvent } from '../runtime/event-log.js';
import { withoutTiming } from './metrics.js';
import { EVENTS_FILE, METRICS_FILE, runScenario, SCENARIO_FILE } from './run.js';
import { LOCK_FILE } from '../runtime/run-lock.js';

export type ReplayVerdict =
  | { identical: true; hash: string; events: number; differences: []; notes: string[] }
  | {
      identical: false;
      index: number | null; // the first differing event, when the logs differ
      recorded: RunEvent | null;
      replayed: RunEvent | null;
      recordedHash: string;
      replayedHash: string;
      differences: string[]; // one line per difference, naming its file
      notes: string[];
    };

export interface ReplayOptions {
  backend?: Backend;
  verifierWorkers?: number;
  threads?: number; // the CPU backend's, over the scenario's: results do not depend on them
  batchTokens?: BatchTokensSetting; // the engine's micro-batches here (the same replay with any)
}

const SUMMARY_FILE = 'summary.json';

/** Files of a run folder that the replay does not check: the report is rendered from metrics and lineage. */
const NOT_CHECKED = new Set(['report.html', LOCK_FILE]);

export async function replayRun(dir: string, options: ReplayOptions = {}): Promise<ReplayVerdict> {
  const scenarioFile = join(dir, SCENARIO_FILE);
  if (!existsSync(scenarioFile)) throw new RunFolderError(`${dir}: not a run folder (no ${SCENARIO_FILE})`);
  const scenario = await readScenario(readFileSync(scenarioFile, 'utf8'), scenarioFile, { relativeTo: dir });
  const eventsFile = join(dir, EVENTS_FILE);
  if (!existsSync(eventsFile)) throw new RunFolderError(`${eventsFile} is missing: there is no recorded run to replay (a run writes its log from its first step; was it started?)`);
  const recorded = readEventLog(eventsFile);
  const scratch = mkdtempSync(join(tmpdir(), 'populora-replay-'));
  try {
    await runScenario(scenario, { outDir: scratch, scenarioFile, backend: options.backend, verifierWorkers: options.verifierWorkers, threads: options.threads, batchTokens: options.batchTokens, checkpointAt: checkpointSteps(dir) });
    const replayed = readEventLog(join(scratch, EVENTS_FILE));
    const log = compareLogs(recorded.events, replayed.events, recorded.hash, replayed.hash);
    const checkpoints = checkpointSteps(dir).map((step) => ({ step, ...checkpointProblems(dir, step) }));
    const differences = [
      ...(log.identical ? [] : [`${eventsFile}: differs at event ${log.index}`]),
      ...(recorded.tornTailBytes > 0 ? [`${eventsFile}: ${recorded.tornTailBytes} bytes after the last whole record, which the run did not write`] : []),
      ...scenarioDifferences(dir, scenario, checkpoints),
      ...folderDifferences(dir, scratch),
      ...checkpoints.flatMap((checkpoint) => checkpoint.problems),
    ];
    const notes = readdirSync(dir).filter((name) => !NOT_CHECKED.has(name) && !existsSync(join(scratch, name)) && name !== 'checkpoints').map((name) => `${join(dir, name)}: not written by a run, not checked`);
    if (differences.length === 0) return { identical: true, hash: recorded.hash, events: recorded.events.length, differences: [], notes };
    return { identical: false, index: log.identical ? null : log.index, recorded: log.identical ? null : log.recorded, replayed: log.identical ? null : log.replayed, recordedHash: recorded.hash, replayedHash: replayed.hash, differences, notes };
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

type LogComparison = { identical: true } | { identical: false; index: number; recorded: RunEvent | null; replayed: RunEvent | null };

export function compareLogs(recorded: readonly RunEvent[], replayed: readonly RunEvent[], recordedHash: string, replayedHash: string): LogComparison {
  const n = Math.max(recorded.length, replayed.length);
  for (let i = 0; i < n; i++) {
    if (!isDeepStrictEqual(recorded[i], replayed[i])) return { identical: false, index: i, recorded: recorded[i] ?? null, replayed: replayed[i] ?? null };
  }
  if (recordedHash !== replayedHash) throw new Error('the logs hold equal events but their hashes differ: the log encoding is not canonical');
  return { identical: true };
}

/** scenario.json against the scenario each checkpoint recorded (an edit after the run started). */
function scenarioDifferences(dir: string, scenario: Scenario, checkpoints: Array<{ step: number; manifest: CheckpointManifest | null }>): string[] {
  return checkpoints.flatMap(({ step, manifest }) => {
    const difference = manifest && firstDifference(manifest.scenario, recordedScenario(scenario));
    return difference ? [`${join(dir, SCENARIO_FILE)}: field "${difference.field}" is ${shown(difference.other)}, but checkpoint step-${step} recorded ${shown(difference.recorded)}`] : [];
  });
}

/** Every file the replay wrote (but its input and log) against the recorded one, and every recorded checkpoint file the replay did not write. */
function folderDifferences(dir: string, scratch: string): string[] {
  const differences: string[] = [];
  for (const file of filesUnder(scratch)) {
    if (file === SCENARIO_FILE || file === EVENTS_FILE || NOT_CHECKED.has(file)) continue;
    const path = join(dir, file);
    if (!existsSync(path)) differences.push(`${path} is missing (the replay wrote it)`);
    else differences.push(...fileDifference(path, join(scratch, file), file));
  }
  const recordedCheckpoints = existsSync(join(dir, 'checkpoints')) ? filesUnder(join(dir, 'checkpoints')).map((file) => `checkpoints/${file}`) : [];
  for (const file of recordedCheckpoints) if (!existsSync(join(scratch, file))) differences.push(`${join(dir, file)}: the replay did not write it`);
  return differences;
}

function fileDifference(path: string, replayedPath: string, file: string): string[] {
  const [recorded, replayed] = [readFileSync(path), readFileSync(replayedPath)];
  if (recorded.equals(replayed)) return [];
  if (file === METRICS_FILE) return metricsDifference(path, recorded.toString('utf8'), replayed.toString('utf8'));
  if (file.endsWith('.json')) {
    let value: unknown;
    try {
      value = JSON.parse(recorded.toString('utf8'));
    } catch {
      return [`${path}: not valid JSON (the replay's is)`];
    }
    const replayedValue: unknown = JSON.parse(replayed.toString('utf8'));
    const difference = file === SUMMARY_FILE ? firstDifference(withoutTiming(value), withoutTiming(replayedValue)) : firstDifference(value, replayedValue);
    if (difference) return [`${path}: field "${difference.field}" is ${shown(difference.recorded)}, the replay has ${shown(difference.other)}`];
    if (file === SUMMARY_FILE) return [];
  }
  let at = 0;
  while (at < recorded.length && recorded[at] === replayed[at]) at++;
  return [`${path}: differs from the replay's from byte ${at} (${recorded.length} bytes, the replay's ${replayed.length})`];
}

/** A metrics.jsonl line as replay compares it: without its wall-clock timing (a line that is not JSON as it is). */
function comparable(line: string): string {
  try {
    return JSON.stringify(withoutTiming(JSON.parse(line)));
  } catch {
    return line;
  }
}

/** The first line of metrics.jsonl that differs from the replay's (timing aside), and its first differing field. */
function metricsDifference(path: string, recorded: string, replayed: string): string[] {
  const [a, b] = [recorded.split('\n').map(comparable), replayed.split('\n').map(comparable)];
  if (a.length === b.length && a.every((text, i) => text === b[i])) return [];
  const line = a.findIndex((text, i) => text !== b[i]);
  const at = line < 0 ? b.length - 1 : line;
  const [mine, theirs] = [a[at], b[at]];
  const parse = (text: string | undefined) => {
    try {
      return text ? (JSON.parse(text) as { step?: number }) : undefined;
    } catch {
      return undefined;
    }
  };
  const [m, t] = [parse(mine), parse(theirs)];
  if (mine === undefined || mine === '') return [`${path}: line ${at + 1} is missing (the replay has step ${t?.step})`];
  if (!m) return [`${path}: line ${at + 1} is not JSON`];
  if (!t) return [`${path}: line ${at + 1} (step ${m.step}) is not in the replay's`];
  const difference = firstDifference(m, t)!;
  return [`${path}: line ${at + 1} (step ${t.step}), field "${difference.field}" is ${shown(difference.recorded)}, the replay has ${shown(difference.other)}`];
}

/** One line naming an event: step, sender, message type and recipient. */
export function describeEvent(event: RunEvent | null): string {
  if (!event) return '(no event: the log ends here)';
  const { to } = event.payload as { to?: string };
  return `step ${event.step}, ${event.actor} → ${to ?? '?'}: "${event.type}" ${JSON.stringify((event.payload as { message?: unknown }).message).slice(0, 300)}`;
}
