// A run's checkpoints: `checkpoints/step-N/` holds each member's adapter (PEFT layout), `state.msgpack` (everything
// a resume needs) and `manifest.json`, written last: the size and SHA-256 of every other file, the event log's
// position (record count and run hash) after step N, and the scenario the run was started with. A checkpoint is
// written in `step-N.partial/`, synced, and renamed into place, so it exists whole or not at all; resume, export
// and report verify it against its manifest, so one flipped byte is named instead of resumed from. The state is
// written and hashed piece by piece (state-file.ts): at real size it is 0.84 GB, and a buffer of it was a step's peak.

import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Packr } from 'msgpackr';
import { savePeftAdapter, type LoraAdapter } from '../model/peft.js';
import { withoutMachineSettings, type Scenario } from '../scenario/scenario.js';
import type { AdamWState } from '../train/adamw.js';
import { asDiskFull, jsonText, resumeAdvice, RunFolderError, syncPath, writeNewFile, type Disk } from '../runtime/durable.js';
import { canonical, type LogPosition } from '../runtime/event-log.js';
import { fileDigest, writePackedFile } from './state-file.js';

export interface CheckpointState {
  step: number; // steps completed
  requestIdCounter: number;
  actorStates: Array<[string, unknown]>;
  adapters: LoraAdapter[]; // by slot
  optimizer: AdamWState;
  coverage: string[];
}

/**
 * The scenario as a checkpoint records it: `steps` left out, since a resume may extend a run, and the machine
 * settings (`batchTokens`, the CPU backend's threads), which a resume may change.
 */
export type RecordedScenario = Omit<Scenario, 'steps' | 'batchTokens'>;

/** A scenario as a checkpoint records it, as plain JSON (what a manifest holds, and what it is compared with). */
export function recordedScenario(scenario: Scenario): RecordedScenario {
  const { steps: _, ...recorded } = withoutMachineSettings(scenario);
  return JSON.parse(JSON.stringify(recorded)) as RecordedScenario;
}

export interface CheckpointManifest {
  format: typeof MANIFEST_FORMAT;
  step: number;
  events: LogPosition; // the event log after `step` steps
  scenario: RecordedScenario;
  files: Record<string, { bytes: number; sha256: string }>; // by path inside the checkpoint folder
}

export interface CheckpointContents {
  step: number;
  events: LogPosition;
  scenario: Scenario;
  members: Array<{ id: string; adapter: LoraAdapter }>;
  state: CheckpointState;
}

const MANIFEST_FORMAT = 'populora-checkpoint-1';
export const MANIFEST_FILE = 'manifest.json';
export const STATE_FILE = 'state.msgpack';
const packr = new Packr({ useRecords: false, moreTypes: true });

export const checkpointDir = (runDir: string, step: number) => join(runDir, 'checkpoints', `step-${step}`);

/** The steps of a run's checkpoint folders (whatever their state), ascending. */
export function checkpointSteps(runDir: string): number[] {
  const root = join(runDir, 'checkpoints');
  if (!existsSync(root)) return [];
  return readdirSync(root)
    .map((name) => /^step-(\d+)$/.exec(name))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => Number(m[1]))
    .sort((a, b) => a - b);
}

/** Every file under `dir`, as paths relative to it with "/" between folders, sorted. */
export function filesUnder(dir: string, prefix = ''): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((entry) => (entry.isDirectory() ? filesUnder(join(dir, entry.name), `${prefix}${entry.name}/`) : [`${prefix}${entry.name}`]))
    .sort();
}

/**
 * Writes checkpoint `contents.step`: every file, then the manifest, each synced with its folder, then (after
 * `beforeRename`, which syncs what the checkpoint must not be ahead of) the rename that makes it the run's newest
 * checkpoint, and a sync of the folder that holds it.
 */
export function writeCheckpoint(runDir: string, contents: CheckpointContents, disk: Disk, beforeRename: () => void): void {
  const target = checkpointDir(runDir, contents.step);
  const staging = `${target}.partial`;
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(staging, { recursive: true });
  try {
    const baseModel = 'path' in contents.scenario.model ? contents.scenario.model.path : null;
    for (const { id, adapter } of contents.members) savePeftAdapter(join(staging, id), { ...adapter, baseModel });
    writePackedFile(disk, join(staging, STATE_FILE), contents.state, packr, resumeAdvice(runDir)); // piece by piece: the state is 0.84 GB at real size
    const files: CheckpointManifest['files'] = {};
    for (const file of filesUnder(staging)) files[file] = fileDigest(join(staging, file)); // what reached the file, not what was meant to
    const manifest: CheckpointManifest = { format: MANIFEST_FORMAT, step: contents.step, events: contents.events, scenario: recordedScenario(contents.scenario), files };
    writeNewFile(disk, join(staging, MANIFEST_FILE), jsonText(canonical(manifest)), resumeAdvice(runDir)); // keys sorted: the bytes do not depend on how the scenario was built
    for (const file of filesUnder(staging)) syncPath(disk, join(staging, file));
    for (const { id } of contents.members) syncPath(disk, join(staging, id));
    syncPath(disk, staging);
    beforeRename();
    rmSync(target, { recursive: true, force: true });
    renameSync(staging, target);
    syncPath(disk, join(runDir, 'checkpoints'));
  } catch (error) {
    rmSync(staging, { recursive: true, force: true });
    throw asDiskFull(error, staging, resumeAdvice(runDir));
  }
}

/** What is wrong with checkpoint `step` against its manifest (nothing: an empty list), and the manifest if readable. */
export function checkpointProblems(runDir: string, step: number): { manifest: CheckpointManifest | null; problems: string[] } {
  const dir = checkpointDir(runDir, step);
  const manifestFile = join(dir, MANIFEST_FILE);
  if (!existsSync(manifestFile)) return { manifest: null, problems: [`${manifestFile} is missing: the checkpoint cannot be verified (it was damaged, or written by a populora older than checksummed checkpoints)`] };
  let manifest: CheckpointManifest;
  try {
    manifest = JSON.parse(readFileSync(manifestFile, 'utf8')) as CheckpointManifest;
  } catch (error) {
    return { manifest: null, problems: [`${manifestFile}: not valid JSON (${(error as Error).message}): the manifest is damaged`] };
  }
  if (manifest?.format !== MANIFEST_FORMAT || manifest.step !== step || typeof manifest.files !== 'object' || typeof manifest.events?.hash !== 'string') {
    return { manifest: null, problems: [`${manifestFile}: not the manifest of a step-${step} checkpoint (format ${MANIFEST_FORMAT}): the manifest is damaged`] };
  }
  const problems: string[] = [];
  for (const [file, expected] of Object.entries(manifest.files)) {
    const path = join(dir, file);
    if (!existsSync(path)) problems.push(`${path} is missing (${MANIFEST_FILE} lists it)`);
    else if (statSync(path).size !== expected.bytes || fileDigest(path).sha256 !== expected.sha256) problems.push(`${path} does not match its checksum in ${MANIFEST_FILE}: the file is damaged`);
  }
  for (const file of filesUnder(dir)) if (file !== MANIFEST_FILE && !(file in manifest.files)) problems.push(`${join(dir, file)} is not in ${MANIFEST_FILE}: the run did not write it`);
  return { manifest, problems };
}

/** Checkpoint `step`, verified against its manifest; a problem is a RunFolderError ending with `whatToDo`. */
export function openCheckpoint(runDir: string, step: number, whatToDo: string): { manifest: CheckpointManifest; state: CheckpointState } {
  const { manifest, problems } = checkpointProblems(runDir, step);
  if (problems.length > 0) throw new RunFolderError(`${problems[0]}${problems.length > 1 ? ` (and ${problems.length - 1} more problem(s) in this checkpoint)` : ''}. ${whatToDo}`);
  return { manifest: manifest!, state: readCheckpointState(checkpointDir(runDir, step)) };
}

/** The saved state of a checkpoint folder, unverified (see openCheckpoint); an unreadable one is named. */
export function readCheckpointState(dir: string): CheckpointState {
  const file = join(dir, STATE_FILE);
  try {
    return packr.unpack(readFileSync(file)) as CheckpointState;
  } catch (error) {
    throw new RunFolderError(`${file}: not a readable checkpoint state (${(error as Error).message}): the file is damaged`);
  }
}

/** How to go on when a run folder cannot be continued: a run is deterministic, so starting again gives the same run. */
export function restartAdvice(runDir: string): string {
  return `start the run again (the same scenario gives the same run) with: populora run ${join(runDir, 'scenario.json')} --out ${runDir} --overwrite`;
}

/** What to do when checkpoint `step` of a run is unusable: fall back to the one before it, or start again. */
export function withoutCheckpoint(runDir: string, step: number): string {
  const earlier = checkpointSteps(runDir).filter((s) => s < step).at(-1);
  return earlier === undefined ? `To go on, ${restartAdvice(runDir)}` : `To go on from the checkpoint before it (step ${earlier}), delete ${checkpointDir(runDir, step)}; or ${restartAdvice(runDir)}`;
}
