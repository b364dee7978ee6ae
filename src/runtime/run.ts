// A run: a scenario in, a run folder out.
//
//   RUN/scenario.json     the scenario as resolved (every default filled in): what `replay` re-executes
//   RUN/events.msgpack    every message, checksummed, with the run hash over them (event-log.ts)
//   RUN/metrics.jsonl     one line per step (metrics.ts)
//   RUN/checkpoints/step-N/<member>/   each member's adapter after N steps, PEFT layout
//   RUN/checkpoints/step-N/state.msgpack  everything a resume needs: actor states, bank, optimizer, counters
//   RUN/lineage.json      every evolutionary child: parents, operator, parameters, seed, step
//   RUN/summary.json      the run hash, event count and the last step's metrics
//
// One step, each phase ending at a barrier (world.ts): teachers propose → (engine generates, verifier validates,
// valid tasks are offered) | matchmaker assigns → (students answer, verifier checks, outcomes flow) | every
// member hands in its samples → (one batched RL update) | population manager rates → (every K steps, evolution).

import { appendFileSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Packr } from 'msgpackr';
import { MATCHMAKER, POPULATION_MANAGER, RUNTIME } from '../../actors/protocol.js';
import type { PopulationState } from '../../actors/population-manager.js';
import type { Backend } from '../backend/backend.js';
import { openBackend } from '../backend/select.js';
import { ArithVerifierPool } from '../domains/arith/verifier-pool.js';
import type { VerifierPool } from '../domains/domain.js';
import { PythonVerifierPool } from '../domains/python/verifier-pool.js';
import { writeJsonAtomically } from '../model/checkpoint.js';
import { savePeftAdapter, type LoraAdapter } from '../model/peft.js';
import type { Scenario } from '../scenario/scenario.js';
import type { AdamWState } from '../train/adamw.js';
import { EventLog } from './event-log.js';
import { summarizeStep, type StepMetrics } from './metrics.js';
import { buildModel, buildSimulation, checkTokenBudget, initialAdapters, type Simulation } from './population.js';
import { World, type Service } from './world.js';

export interface RunOptions {
  outDir: string;
  verifierWorkers?: number; // default 1; results do not depend on it
  resume?: boolean; // continue from the folder's last checkpoint
  backend?: Backend; // an open backend to use (kept open); default: open the scenario's
  scenarioFile?: string; // names the scenario in errors
  onStep?: (metrics: StepMetrics) => void;
  /** Wraps each service, e.g. to time it (bench/). */
  wrapService?: (service: Service) => Service;
  /** Stops after this many steps of this invocation (tests simulate a crash with it). */
  stopAfterSteps?: number;
}

export interface RunResult {
  hash: string;
  events: number;
  stepsRun: number;
  last: StepMetrics | null;
  outDir: string;
}

export interface CheckpointState {
  step: number; // steps completed
  requestIdCounter: number;
  actorStates: Array<[string, unknown]>;
  adapters: LoraAdapter[]; // by slot
  optimizer: AdamWState;
  coverage: string[];
}

const packr = new Packr({ useRecords: false, moreTypes: true });
export const EVENTS_FILE = 'events.msgpack';

/** The saved state of a checkpoint folder (checkpoints/step-N). */
export function readCheckpointState(checkpointDir: string): CheckpointState {
  return packr.unpack(readFileSync(join(checkpointDir, 'state.msgpack'))) as CheckpointState;
}

/** The steps of the complete checkpoints of a run, ascending. */
export function checkpointSteps(dir: string): number[] {
  const root = join(dir, 'checkpoints');
  if (!existsSync(root)) return [];
  return readdirSync(root).map((name) => /^step-(\d+)$/.exec(name)).filter((m) => m && existsSync(join(root, m[0], 'state.msgpack'))).map((m) => Number(m![1])).sort((a, b) => a - b);
}

/** The newest checkpoint folder with a complete state, or null. */
export function latestCheckpoint(dir: string): { step: number; dir: string } | null {
  const step = checkpointSteps(dir).at(-1);
  return step === undefined ? null : { step, dir: join(dir, 'checkpoints', `step-${step}`) };
}

export async function runScenario(scenario: Scenario, options: RunOptions): Promise<RunResult> {
  const dir = options.outDir;
  const file = options.scenarioFile ?? join(dir, 'scenario.json');
  checkTokenBudget(scenario, file);
  const resumeFrom = options.resume ? latestCheckpoint(dir) : null;
  if (options.resume && !existsSync(join(dir, EVENTS_FILE))) throw new RangeError(`${dir}: no run to resume (no ${EVENTS_FILE})`);
  if (!options.resume && existsSync(join(dir, EVENTS_FILE))) throw new RangeError(`${dir} already holds a run: choose another --out, or continue it with --resume`);
  mkdirSync(dir, { recursive: true });
  if (!options.resume) writeJsonAtomically(join(dir, 'scenario.json'), scenario);

  const saved = resumeFrom ? readCheckpointState(resumeFrom.dir) : null;
  const startStep = saved?.step ?? 0;
  const log = options.resume ? EventLog.continueFrom(join(dir, EVENTS_FILE), startStep) : new EventLog(join(dir, EVENTS_FILE));
  truncateMetrics(join(dir, 'metrics.jsonl'), startStep);
  const backend = options.backend ?? (await openBackend(scenario.backend));
  const workers = options.verifierWorkers ?? 1;
  const pool: VerifierPool = scenario.domain === 'python' ? new PythonVerifierPool(workers, { fuel: scenario.tasks.fuel, wallClockGuardMs: scenario.tasks.guardMs }) : new ArithVerifierPool(workers);
  const world = new World(scenario.seed, log);
  let sim: Simulation | null = null;
  try {
    const parts = buildModel(scenario, backend, file);
    sim = buildSimulation(scenario, parts, world, pool, saved ? new Map(saved.actorStates) : null, options.wrapService);
    const coverage = new Set(saved?.coverage ?? []);
    if (saved) {
      saved.adapters.forEach((adapter, slot) => sim!.bank.load(slot, adapter));
      sim.optimizer.importState(saved.optimizer);
      world.requestIdCounter = saved.requestIdCounter;
    } else {
      initialAdapters(scenario, parts.config, sim.bank.capacity, world).forEach((adapter, slot) => sim!.bank.load(slot, adapter));
    }
    let last: StepMetrics | null = null;
    let stepsRun = 0;
    for (let step = startStep; step < scenario.steps; step++) {
      if (options.stopAfterSteps !== undefined && stepsRun >= options.stopAfterSteps) break;
      world.step = step;
      await runStep(world, sim);
      last = summarizeStep(step, world.takeReports(), coverage);
      appendFileSync(join(dir, 'metrics.jsonl'), `${JSON.stringify(last)}\n`);
      world.endStep();
      stepsRun++;
      const done = step + 1;
      if (done === scenario.steps || (scenario.checkpointEvery > 0 && done % scenario.checkpointEvery === 0)) await saveCheckpoint(dir, done, world, sim, coverage, 'path' in scenario.model ? scenario.model.path : null);
      options.onStep?.(last);
    }
    log.flush();
    const population = world.actorStates().get(POPULATION_MANAGER) as PopulationState;
    writeJsonAtomically(join(dir, 'lineage.json'), population.lineage);
    const result = { hash: log.hash, events: log.count, stepsRun, last, outDir: dir };
    if (world.step === scenario.steps) writeJsonAtomically(join(dir, 'summary.json'), { scenario: scenario.name, hash: result.hash, events: result.events, steps: scenario.steps, last });
    return result;
  } finally {
    world.shutdown(); // flushes and closes the log: a failed run keeps every event up to the failure
    sim?.trainer.destroy();
    sim?.optimizer.destroy();
    sim?.bank.destroy();
    await sim?.engine.close();
    await pool.close();
    if (!options.backend) backend.destroy();
  }
}

/** The four phases of one step. */
async function runStep(world: World, sim: Simulation): Promise<void> {
  const teachers = sim.members.filter((m) => m.role === 'teacher');
  world.send(RUNTIME, POPULATION_MANAGER, { type: 'start-step' });
  for (const t of teachers) world.send(RUNTIME, t.id, { type: 'propose' });
  await world.barrier();
  world.send(RUNTIME, MATCHMAKER, { type: 'match' });
  await world.barrier();
  for (const m of sim.members) world.send(RUNTIME, m.id, { type: 'learn' });
  await world.barrier();
  world.send(RUNTIME, POPULATION_MANAGER, { type: 'rate' });
  await world.barrier();
}

/** `baseModel`: the model folder the adapters were trained on, as the scenario names it (PEFT's base_model_name_or_path). */
async function saveCheckpoint(dir: string, step: number, world: World, sim: Simulation, coverage: Set<string>, baseModel: string | null): Promise<void> {
  const target = join(dir, 'checkpoints', `step-${step}`);
  const staging = `${target}.partial`;
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(staging, { recursive: true });
  const adapters = await Promise.all(Array.from({ length: sim.bank.capacity }, (_, slot) => sim.bank.read(slot)));
  for (const m of sim.members) savePeftAdapter(join(staging, m.id), { ...adapters[m.slot]!, baseModel });
  const state: CheckpointState = { step, requestIdCounter: world.requestIdCounter, actorStates: [...world.actorStates()], adapters, optimizer: await sim.optimizer.exportState(), coverage: [...coverage].sort() };
  writeFileSync(join(staging, 'state.msgpack'), packr.pack(state));
  rmSync(target, { recursive: true, force: true });
  renameSync(staging, target);
}

/** Keeps the metrics of steps before `step` (a resume re-runs the rest). */
function truncateMetrics(file: string, step: number): void {
  if (!existsSync(file)) return;
  const kept = readFileSync(file, 'utf8').split('\n').filter((line) => line.trim() !== '' && (JSON.parse(line) as StepMetrics).step < step);
  writeFileSync(file, kept.map((line) => `${line}\n`).join(''));
}
