// `populora export`: a run's population at one checkpoint, ready for PEFT or vLLM: every member's adapter in PEFT
// layout (copied from the checkpoint) and a population.json with each member's role, sub-population, rating,
// generation and lineage (every evolutionary record among its adapter's ancestors).

import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmdirSync, rmSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import type { PopulationState } from '../../actors/population-manager.js';
import { POPULATION_MANAGER } from '../../actors/protocol.js';
import type { LineageRecord } from '../evolution/selection.js';
import { checkpointDir, checkpointSteps, filesUnder, openCheckpoint } from './checkpoints.js';
import { asDiskFull, jsonText, nodeDisk, readJsonFile, syncPath, writeFileDurably, type Disk } from '../runtime/durable.js';

export interface ExportedMember {
  id: string;
  role: string;
  subpopulation: number;
  adapter: string; // the adapter's name in the run: `${id}.g${generation}`
  generation: number;
  rating: number; // TrueSkill: μ
  sigma?: number; // TrueSkill only
  rewardMean: number | null; // over the fitness window
  lineage: LineageRecord[]; // the records that made its adapter and its ancestors, oldest first
}

export class ExportError extends Error {}

/**
 * Writes `outDir/<member>/` (PEFT) and `outDir/population.json`; the step defaults to the last checkpoint. The
 * checkpoint is verified against its manifest first, and everything is written into a temporary folder beside
 * `outDir` that is renamed to it at the end: a failed export leaves nothing behind.
 */
export function exportPopulation(runDir: string, step: number | undefined, outDir: string, disk: Disk = nodeDisk): { step: number; members: ExportedMember[] } {
  const scenarioFile = join(runDir, 'scenario.json');
  if (!existsSync(scenarioFile)) throw new ExportError(`${runDir}: not a run folder (no scenario.json)`);
  const scenario = readJsonFile<{ name: string; model: unknown; domain?: string }>(scenarioFile, 'each checkpoint\'s manifest.json records the scenario the run was started with (its "scenario" field)');
  const steps = checkpointSteps(runDir);
  if (steps.length === 0) throw new ExportError(`${runDir}: the run has no checkpoint yet (set checkpointEvery, or let it finish)`);
  const chosen = step ?? steps.at(-1)!;
  if (!steps.includes(chosen)) throw new ExportError(`${runDir}: no checkpoint at step ${chosen}; the run has ${steps.map((s) => `step ${s}`).join(', ')}`);
  if (existsSync(outDir) && !statSync(outDir).isDirectory()) throw new ExportError(`${outDir} is a file: give --out a new or empty folder`);
  if (existsSync(outDir) && readdirSync(outDir).length > 0) throw new ExportError(`${outDir} is not empty: choose another --out`);

  const others = steps.filter((s) => s !== chosen);
  const { state } = openCheckpoint(runDir, chosen, others.length > 0 ? `Export another checkpoint with --step (the run also has ${others.map((s) => `step ${s}`).join(', ')})` : 'The run has no other checkpoint to export');
  const population = new Map(state.actorStates).get(POPULATION_MANAGER) as PopulationState;
  const members = population.members.map((m): ExportedMember => ({
    id: m.id,
    role: m.role,
    subpopulation: m.subpopulation,
    adapter: m.adapter,
    generation: m.generation,
    rating: m.rating,
    ...(m.sigma === undefined ? {} : { sigma: m.sigma }),
    rewardMean: m.rewards.length === 0 ? null : m.rewards.reduce((a, b) => a + b, 0) / m.rewards.length,
    lineage: ancestry(m.adapter, population.lineage),
  }));
  const parent = dirname(resolve(outDir));
  mkdirSync(parent, { recursive: true });
  const staging = mkdtempSync(join(parent, `.${basename(outDir)}.partial-`));
  try {
    for (const m of members) cpSync(join(checkpointDir(runDir, chosen), m.id), join(staging, m.id), { recursive: true });
    const populationJson = { run: scenario.name, step: chosen, baseModel: scenario.model, domain: scenario.domain, members };
    writeFileDurably(disk, join(staging, 'population.json'), jsonText(populationJson), 'free some space and export again');
    for (const file of filesUnder(staging)) syncPath(disk, join(staging, file));
    if (existsSync(outDir)) rmdirSync(outDir); // empty: checked above
    renameSync(staging, outDir);
    syncPath(disk, parent);
  } catch (error) {
    rmSync(staging, { recursive: true, force: true });
    throw asDiskFull(error, outDir, 'free some space and export again');
  }
  return { step: chosen, members };
}

/** The lineage records behind an adapter: the one that made it, then those that made its parents, … */
function ancestry(adapter: string, lineage: readonly LineageRecord[]): LineageRecord[] {
  const wanted = new Set([adapter]);
  const found: LineageRecord[] = [];
  for (const record of [...lineage].reverse()) {
    if (!wanted.has(record.child)) continue;
    found.push(record);
    record.parents.forEach((p) => wanted.add(p));
  }
  return found.reverse();
}
