// A run: a scenario in, a run folder out.
//
//   RUN/scenario.json     the scenario as resolved (every default filled in, the model's path absolute): what
//                         `replay` re-executes
//   RUN/events.msgpack    every message, checksummed, with the run hash over them (src/runtime/event-log.ts)
//   RUN/metrics.jsonl     one line per step (metrics.ts; with a clock, the step's wall-clock timing too)
//   RUN/checkpoints/step-N/   each member's adapter after N steps (PEFT layout), state.msgpack (everything a resume
//                         needs) and manifest.json (checksums, the log's position, the scenario: checkpoints.ts)
//   RUN/lineage.json      every evolutionary child: parents, operator, parameters, seed, step
//   RUN/summary.json      the run hash, event count and the last step's metrics
//   RUN/run.lock          while a run writes in the folder (src/runtime/run-lock.ts)
//
// One step, each phase ending at a barrier (src/runtime/world.ts): teachers propose → (engine generates, verifier validates,
// valid tasks are offered) | matchmaker assigns → (students answer, verifier checks, outcomes flow) | every
// member hands in its samples → (one batched RL update) | population manager rates → (every K steps, evolution).
// At the end of a step its events and metrics are written whole and the log is synced (src/runtime/durable.ts).
//
// Stopping: once `signal` is aborted the run stops after the step in progress, with a checkpoint of it; once
// `stopNow` is, at once: the engine's pacer (src/engine/pacer.ts) abandons its work at its next pause, the step in
// progress with it, and the run folder resumes from its last checkpoint (a resume drops the log's events after it).

import { existsSync, mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { MATCHMAKER, POPULATION_MANAGER, RUNTIME, studentAt, teacherAt, type Learn } from '../../actors/protocol.js';
import type { PopulationState } from '../../actors/population-manager.js';
import type { Backend } from '../backend/backend.js';
import { openBackend, settingSums } from '../backend/select.js';
import { domainNamed } from '../domains/index.js';
import { checkScenarioLimits, type Scenario } from '../scenario/scenario.js';
import { writeCheckpoint } from './checkpoints.js';
import { asDiskFull, jsonText, nodeDisk, resumeAdvice, RunFolderError, writeFileDurably, type Disk } from '../runtime/durable.js';
import { summarizeStep, type StepMetrics } from './metrics.js';
import { buildModel, buildSimulation, initialAdapters, localCore, modelInfo, type ModelInfo, type Simulation } from './population.js';
import type { EngineCore } from '../engine/core.js';
import type { BatchTokensSetting } from '../engine/budget.js';
import { Pacer, RunStopped, type PhaseProgress } from '../engine/pacer.js';
import { loadRatingLibrary } from '../rating/rating.js';
import { resumeRun, SCENARIO_FILE, startRun, type OpenedRun } from './resume.js';
import { acquireRunLock } from '../runtime/run-lock.js';
import { StepTimer } from './step-timing.js';
import type { Transport } from '../runtime/transport.js';
import { World, type Address, type Service } from '../runtime/world.js';
import type { VerifierPool } from '../domains/domain.js';

export { checkpointSteps, readCheckpointState, type CheckpointState } from './checkpoints.js';
export { EVENTS_FILE, METRICS_FILE, SCENARIO_FILE } from './resume.js';

export interface RunOptions {
  outDir: string;
  verifierWorkers?: number; // default 1; results do not depend on it
  threads?: number; // the CPU backend's threads, over the scenario's; results do not depend on them
  resume?: boolean; // continue from the folder's last checkpoint
  overwrite?: boolean; // replace an earlier run in the folder (cleared under the folder's lock)
  backend?: Backend; // an open backend to use (kept open); default: open the scenario's
  transport?: Transport; // what carries actors' messages (closed with the run); default: nact, in this process
  verifierPool?: VerifierPool; // the verifier's pool (kept open), e.g. workers over NATS; default: the domain's, in this process
  engineCore?: (model: ModelInfo) => Promise<EngineCore>; // the engine's core (closed with the run), e.g. workers over NATS; default: this process's model and bank
  scenarioFile?: string; // names the scenario in errors
  /**
   * Called once the run is set up, before its first step: with the step it starts from (0, or a resume's), and how
   * the engine sizes its micro-batches here (null when the engine runs on workers).
   */
  onStart?: (step: number, setup: { budget: string | null }) => void;
  onStep?: (metrics: StepMetrics) => void;
  /** Wraps each service, e.g. to time it (bench/). */
  wrapService?: (service: Service) => Service;
  /** Stops after this many steps of this invocation, without a checkpoint (tests simulate a crash with it). */
  stopAfterSteps?: number;
  /** Once aborted (SIGINT, SIGTERM), the run stops after the step in progress, with a checkpoint of it. */
  signal?: AbortSignal;
  /** Once aborted (a second signal), the run stops at once, inside its step: runScenario throws RunStopped. */
  stopNow?: AbortSignal;
  /** Where the step in progress stands (the engine's phases; display only, never decided on). */
  onProgress?: (progress: PhaseProgress) => void;
  /** The engine's micro-batch budget on this machine, over the scenario's `batchTokens` (the same run with any). */
  batchTokens?: BatchTokensSetting;
  /** Steps to checkpoint at besides the scenario's (a replay checkpoints where the recorded run did). */
  checkpointAt?: readonly number[];
  /** What writes and syncs go through (tests inject short writes and a full disk; bench/ times the syncs). */
  disk?: Disk;
  /**
   * A wall clock in ms (`populora run` passes performance.now): with it each step's metrics get `timing` (the
   * verifier's throughput and share of the step). Only measured, never decided on: no actor sees it.
   */
  clock?: () => number;
}

export interface RunResult {
  hash: string;
  events: number;
  stepsRun: number;
  step: number; // steps completed
  last: StepMetrics | null;
  outDir: string;
  stopped: string | null; // the abort signal's reason, when it stopped the run
}

export async function runScenario(scenario: Scenario, options: RunOptions): Promise<RunResult> {
  const dir = options.outDir;
  const file = options.scenarioFile ?? join(dir, SCENARIO_FILE);
  checkScenarioLimits(scenario, file);
  const sums = settingSums(scenario.backend);
  if (options.backend?.name === 'cpu' && (options.backend.sums ?? 'f64') !== sums) {
    throw new Error(`populora: the scenario's backend sums its dense products in ${sums}, the backend given to runScenario in ${options.backend.sums ?? 'f64'}: open it with new CpuBackend({ sums: '${sums}' }) (a replay would not give this run's bits)`);
  }
  if (existsSync(dir) && !statSync(dir).isDirectory()) throw new RunFolderError(`${dir} is a file, not a folder: give --out a folder (a new one, or a run's to --resume)`);
  mkdirSync(dir, { recursive: true });
  const lock = acquireRunLock(dir);
  try {
    const disk = options.disk ?? nodeDisk;
    const opened = options.resume ? resumeRun(scenario, dir, file, disk) : startRun(scenario, dir, options.overwrite ?? false, disk);
    return await runSteps(scenario, opened, { ...options, disk, scenarioFile: file });
  } catch (error) {
    throw asDiskFull(error, (error as NodeJS.ErrnoException)?.path ?? dir, resumeAdvice(dir));
  } finally {
    lock.release();
  }
}

async function runSteps(scenario: Scenario, opened: OpenedRun, options: RunOptions & { disk: Disk; scenarioFile: string }): Promise<RunResult> {
  const { outDir: dir, disk } = options;
  const { saved, log, metrics } = opened;
  const pool = options.verifierPool ?? domainNamed(scenario.domain).verifierPool(options.verifierWorkers ?? 1, { fuel: scenario.tasks.fuel, guardMs: scenario.tasks.guardMs });
  const timer = options.clock ? new StepTimer(options.clock) : null;
  const wrap = (service: Service) => {
    const wrapped = options.wrapService?.(service) ?? service;
    return timer ? timer.wrap(wrapped) : wrapped;
  };
  const world = new World(scenario.seed, log, options.transport);
  let backend: Backend | null = options.backend ?? null;
  let sim: Simulation | null = null;
  let core: EngineCore | null = null;
  try {
    await loadRatingLibrary(scenario.rating); // TrueSkill's library, only for runs that select it
    let parts: ModelInfo;
    let budget: string | null = null;
    if (options.engineCore) {
      parts = modelInfo(scenario, options.scenarioFile); // the weights are the workers' to load
      core = await options.engineCore(parts);
    } else {
      backend ??= await openBackend(scenario.backend, undefined, options.threads);
      const model = buildModel(scenario, backend, options.scenarioFile);
      const pacer = new Pacer({ stopNow: options.stopNow, onProgress: options.onProgress });
      const local = localCore({ ...scenario, batchTokens: options.batchTokens ?? scenario.batchTokens }, model, pacer);
      [parts, core, budget] = [model, local, local.budget.described];
    }
    await pool.ready?.(); // the verifier's start (a sandbox loading its interpreter) is not a step's time
    sim = buildSimulation(scenario, parts, timer ? timer.wrapCore(core) : core, world, pool, saved ? new Map(saved.actorStates) : null, wrap);
    const coverage = new Set(saved?.coverage ?? []);
    if (saved) {
      await core.load(saved.adapters, saved.optimizer);
      world.requestIdCounter = saved.requestIdCounter;
    } else {
      await core.load(initialAdapters(scenario, parts.config, sim.slots, world), null);
    }
    const checkpoint = async (step: number) => {
      const { adapters, optimizer } = await core!.state();
      const state = { step, requestIdCounter: world.requestIdCounter, actorStates: [...world.actorStates()], adapters, optimizer, coverage: [...coverage].sort() };
      const members = sim!.members.map((m) => ({ id: m.id, adapter: adapters[m.slot]! }));
      writeCheckpoint(dir, { step, events: log.position, scenario, members, state }, disk, () => metrics.sync()); // metrics reach the disk before the checkpoint that counts them
    };
    const extraCheckpoints = new Set(options.checkpointAt ?? []);
    let last = opened.lastMetrics;
    let stepsRun = 0;
    let stopped: string | null = null;
    let checkpointed = saved?.step ?? 0;
    world.step = checkpointed;
    options.onStart?.(world.step, { budget });
    for (let step = world.step; step < scenario.steps; step++) {
      if (options.signal?.aborted) {
        if (checkpointed !== step) await checkpoint(step); // a stop keeps the step it finished
        stopped = String(options.signal.reason);
        break;
      }
      if (options.stopAfterSteps !== undefined && stepsRun >= options.stopAfterSteps) break;
      world.step = step;
      timer?.startStep();
      await unlessStopped(runStep(world, sim), options.stopNow);
      last = summarizeStep(step, world.takeReports(), coverage);
      if (timer) last.timing = timer.endStep();
      metrics.append(Buffer.from(`${JSON.stringify(last)}\n`));
      world.endStep();
      stepsRun++;
      const done = step + 1;
      const due = done === scenario.steps || (scenario.checkpointEvery > 0 && done % scenario.checkpointEvery === 0) || extraCheckpoints.has(done);
      if (due) {
        await checkpoint(done);
        checkpointed = done;
      }
      options.onStep?.(last);
    }
    log.flush();
    const population = world.actorStates().get(POPULATION_MANAGER) as PopulationState;
    writeFileDurably(disk, join(dir, 'lineage.json'), jsonText(population.lineage));
    const result: RunResult = { hash: log.hash, events: log.count, stepsRun, step: world.step, last, outDir: dir, stopped };
    if (world.step === scenario.steps) writeFileDurably(disk, join(dir, 'summary.json'), jsonText({ scenario: scenario.name, hash: result.hash, events: result.events, steps: scenario.steps, last }));
    return result;
  } finally {
    world.shutdown(); // flushes and closes the log: a failed run keeps every event up to the failure
    metrics.close();
    await core?.close();
    if (!options.verifierPool) await pool.close();
    if (!options.backend) backend?.destroy();
  }
}

/**
 * The work's result, or RunStopped as soon as `stopNow` is aborted. The work is abandoned, not awaited: the engine
 * stops at its pacer's next pause, the verifier's jobs end with its pool, which the run closes.
 */
function unlessStopped<T>(work: Promise<T>, stopNow?: AbortSignal): Promise<T> {
  if (!stopNow) return work;
  return new Promise<T>((resolve, reject) => {
    const stop = () => reject(new RunStopped(String(stopNow.reason)));
    if (stopNow.aborted) return stop();
    stopNow.addEventListener('abort', stop, { once: true });
    work.then(resolve, reject).finally(() => stopNow.removeEventListener('abort', stop));
  });
}

/** The four phases of one step. */
async function runStep(world: World, sim: Simulation): Promise<void> {
  const teachers = sim.members.filter((m) => m.role === 'teacher');
  world.send(RUNTIME, POPULATION_MANAGER, { type: 'start-step' });
  for (const t of teachers) world.send(RUNTIME, teacherAt(t.id), { type: 'propose' });
  await world.barrier();
  world.send(RUNTIME, MATCHMAKER, { type: 'match' });
  await world.barrier();
  for (const m of sim.members) {
    const member: Address<Learn> = m.role === 'teacher' ? teacherAt(m.id) : studentAt(m.id);
    world.send(RUNTIME, member, { type: 'learn' });
  }
  await world.barrier();
  world.send(RUNTIME, POPULATION_MANAGER, { type: 'rate' });
  await world.barrier();
}
