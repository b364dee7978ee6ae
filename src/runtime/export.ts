// `populora export`: a run's population at one checkpoint, ready for PEFT or vLLM: every member's adapter in PEFT
// layout (copied from the checkpoint) and a population.json with each member's role, sub-population, rating,
// generation and lineage (every evolutionary record among its adapter's ancestors).

import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { PopulationState } from '../../actors/population-manager.js';
import { POPULATION_MANAGER } from '../../actors/protocol.js';
import type { LineageRecord } from '../evolution/selection.js';
import { checkpointSteps, readCheckpointState } from './run.js';

export interface ExportedMember {
  id: string;
  role: string;
  subpopulation: number;
  adapter: string; // the adapter's name in the run: `${id}.g${generation}`
  generation: number;
  rating: number;
  rewardMean: number | null; // over the fitness window
  lineage: LineageRecord[]; // the records that made its adapter and its ancestors, oldest first
}

export class ExportError extends Error {}

/** Writes `outDir/<member>/` (PEFT) and `outDir/population.json`; the step defaults to the last checkpoint. */
export function exportPopulation(runDir: string, step: number | undefined, outDir: string): { step: number; members: ExportedMember[] } {
  if (!existsSync(join(runDir, 'scenario.json'))) throw new ExportError(`${runDir}: not a run folder (no scenario.json)`);
  const steps = checkpointSteps(runDir);
  if (steps.length === 0) throw new ExportError(`${runDir}: the run has no checkpoint yet (set checkpointEvery, or let it finish)`);
  const chosen = step ?? steps.at(-1)!;
  if (!steps.includes(chosen)) throw new ExportError(`${runDir}: no checkpoint at step ${chosen}; the run has ${steps.map((s) => `step ${s}`).join(', ')}`);
  if (existsSync(outDir) && readdirSync(outDir).length > 0) throw new ExportError(`${outDir} is not empty: choose another --out`);

  const checkpoint = join(runDir, 'checkpoints', `step-${chosen}`);
  const state = readCheckpointState(checkpoint);
  const population = new Map(state.actorStates).get(POPULATION_MANAGER) as PopulationState;
  const members = population.members.map((m): ExportedMember => ({
    id: m.id,
    role: m.role,
    subpopulation: m.subpopulation,
    adapter: m.adapter,
    generation: m.generation,
    rating: m.rating,
    rewardMean: m.rewards.length === 0 ? null : m.rewards.reduce((a, b) => a + b, 0) / m.rewards.length,
    lineage: ancestry(m.adapter, population.lineage),
  }));
  mkdirSync(outDir, { recursive: true });
  for (const m of members) cpSync(join(checkpoint, m.id), join(outDir, m.id), { recursive: true });
  const scenario = JSON.parse(readFileSync(join(runDir, 'scenario.json'), 'utf8')) as { name: string; model: unknown; domain?: string };
  writeFileSync(join(outDir, 'population.json'), `${JSON.stringify({ run: scenario.name, step: chosen, baseModel: scenario.model, domain: scenario.domain ?? 'arith', members }, null, 2)}\n`);
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
