// Replay (DESIGN.md rule 6): re-executes a run from its recorded scenario in a scratch folder and compares the
// two event logs record by record. Identical logs mean an identical run hash; otherwise the first event that
// differs is named by its step, actor and message.

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import type { Backend } from '../backend/backend.js';
import { parseScenario } from '../scenario/scenario.js';
import { readEventLog, type RunEvent } from './event-log.js';
import { EVENTS_FILE, runScenario } from './run.js';

export type ReplayVerdict =
  | { identical: true; hash: string; events: number }
  | { identical: false; index: number; recorded: RunEvent | null; replayed: RunEvent | null; recordedHash: string; replayedHash: string };

export interface ReplayOptions {
  backend?: Backend;
  verifierWorkers?: number;
}

export async function replayRun(dir: string, options: ReplayOptions = {}): Promise<ReplayVerdict> {
  const scenarioFile = join(dir, 'scenario.json');
  const scenario = parseScenario(readFileSync(scenarioFile, 'utf8'), scenarioFile);
  const recorded = readEventLog(join(dir, EVENTS_FILE));
  const scratch = mkdtempSync(join(tmpdir(), 'populora-replay-'));
  try {
    await runScenario(scenario, { outDir: scratch, scenarioFile, backend: options.backend, verifierWorkers: options.verifierWorkers });
    const replayed = readEventLog(join(scratch, EVENTS_FILE));
    return compareLogs(recorded.events, replayed.events, recorded.hash, replayed.hash);
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

export function compareLogs(recorded: readonly RunEvent[], replayed: readonly RunEvent[], recordedHash: string, replayedHash: string): ReplayVerdict {
  const n = Math.max(recorded.length, replayed.length);
  for (let i = 0; i < n; i++) {
    if (!isDeepStrictEqual(recorded[i], replayed[i])) return { identical: false, index: i, recorded: recorded[i] ?? null, replayed: replayed[i] ?? null, recordedHash, replayedHash };
  }
  if (recordedHash !== replayedHash) throw new Error('the logs hold equal events but their hashes differ: the log encoding is not canonical');
  return { identical: true, hash: recordedHash, events: recorded.length };
}

/** One line naming an event: step, sender, message type and recipient. */
export function describeEvent(event: RunEvent | null): string {
  if (!event) return '(no event: the log ends here)';
  const { to } = event.payload as { to?: string };
  return `step ${event.step}, ${event.actor} → ${to ?? '?'}: "${event.type}" ${JSON.stringify((event.payload as { message?: unknown }).message).slice(0, 300)}`;
}
