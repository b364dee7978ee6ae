// `populora run` and `populora replay`: a scenario in, a run folder out (with a progress bar and a summary
// table; a first SIGINT or SIGTERM stops it at the end of a step, a second at once, resumable either way); a run
// folder in, "identical" and its hash out, or every file that differs from the replay (the first differing event
// among them), and exit code 1.

import { existsSync, readFileSync } from 'node:fs';
import { basename, extname, join } from 'node:path';
import type { Command } from 'commander';
import type { BatchTokensSetting } from '../engine/budget.js';
import { RunStopped } from '../engine/pacer.js';
import { loadRun, writeReport } from '../report/report.js';
import { openScenario, readScenario } from '../scenario/scenario.js';
import type { StepMetrics } from '../sim/metrics.js';
import { describeEvent, replayRun } from '../sim/replay.js';
import { checkpointSteps, runScenario } from '../sim/run.js';
import { EXIT_ABANDONED } from '../cluster/errors.js';
import { clusterRunOptions } from './cluster-options.js';
import { UsageError } from './run-command.js';
import { percent, RunProgress } from './run-progress.js';
import { SIGNAL_EXIT_CODES, stopOnSignals } from './stop-signals.js';

export async function runScenarioCommand(scenarioFile: string | undefined, options: { out?: string; resume?: string; overwrite?: boolean; verifierWorkers: number; threads?: number; nats?: string; cluster: string; batchTokens?: BatchTokensSetting }, command?: Command): Promise<void> {
  if (options.resume && scenarioFile) throw new UsageError('give either a scenario or --resume DIR, not both (a resumed run uses the scenario recorded in its folder)');
  if (options.nats && command?.getOptionValueSource('verifierWorkers') === 'cli') {
    throw new UsageError('--verifier-workers has no effect with --nats: over NATS the verifier runs on verifier workers; start them with populora worker SCENARIO --nats URL --verifier --threads N');
  }
  if (!options.resume && !scenarioFile) throw new UsageError('give a scenario file (e.g. scenarios/quickstart.yaml) or --resume DIR');
  const resumeDir = options.resume;
  const file = resumeDir ? join(resumeDir, 'scenario.json') : scenarioFile!;
  if (resumeDir && !existsSync(file)) throw new UsageError(`${resumeDir}: not a run folder (no scenario.json)`);
  const scenario = resumeDir ? await readScenario(readFileSync(file, 'utf8'), file, { relativeTo: resumeDir }) : await openScenario(file);
  const outDir = resumeDir ?? options.out ?? join('runs', basename(file, extname(file)));
  const bar = new RunProgress(scenario.steps);
  console.log(`${resumeDir ? 'resuming' : 'running'} ${scenario.name}: ${scenario.steps} steps → ${outDir}`);
  const history: StepMetrics[] = [];
  const cluster = options.nats ? await clusterRunOptions(scenario, options.nats, options.cluster, { outDir, onEvent: (event) => console.error(`\n${event}`) }) : null;
  if (options.nats) console.log(`over NATS at ${options.nats} (cluster ${options.cluster})`);
  const stop = stopOnSignals({ first: 'finishing the step in progress, then saving a checkpoint and stopping', second: 'stopping now, inside the step; the run resumes from its last checkpoint' });
  cluster?.stopWith(stop.afterStep); // a stop with the server away gives up the step in progress (docs/cluster.md)
  try {
    const result = await runScenario(scenario, {
      ...(cluster ? { transport: cluster.transport, verifierPool: cluster.verifierPool, engineCore: cluster.engineCore } : {}),
      outDir,
      resume: Boolean(resumeDir),
      overwrite: options.overwrite,
      scenarioFile: file,
      verifierWorkers: options.verifierWorkers,
      threads: options.threads,
      ...(options.batchTokens === undefined ? {} : { batchTokens: options.batchTokens }),
      signal: stop.afterStep,
      stopNow: stop.now,
      clock: () => performance.now(), // for metrics.jsonl's timing (the verifier's throughput), never for a decision
      onStart: (step, setup) => {
        if (setup.budget) console.log(`micro-batches: ${setup.budget}`);
        bar.start(step);
      },
      onProgress: (progress) => bar.phase(progress),
      onStep: (m) => {
        history.push(m);
        bar.step(m);
      },
    });
    bar.stop();
    printSummary(history, result.outDir, result.hash, result.events);
    console.log(`report: ${writeReport([loadRun(result.outDir)], join(result.outDir, 'report.html'))}`);
    if (result.stopped) {
      console.log(`stopped on ${result.stopped} after step ${result.step} of ${scenario.steps}, with a checkpoint there; continue the run with: populora run --resume ${outDir}`);
      process.exitCode = SIGNAL_EXIT_CODES[result.stopped] ?? 1;
    }
  } catch (error) {
    bar.stop();
    if (!(error instanceof RunStopped)) throw cluster?.failure() ?? error; // a server given up is the cause, whatever the run failed on
    const last = checkpointSteps(outDir).at(-1);
    console.log(`stopped at once on ${error.reason}, inside a step; continue the run from ${last === undefined ? 'its start' : `its checkpoint at step ${last}`} with: populora run --resume ${outDir}`);
    process.exitCode = EXIT_ABANDONED; // not a clean stop: the step in progress is abandoned
  } finally {
    stop.dispose();
    await cluster?.close();
  }
}

function printSummary(history: StepMetrics[], outDir: string, hash: string, events: number): void {
  const last = history.at(-1);
  if (!last) return;
  const trueSkill = Object.values(last.members).some((m) => m.sigma !== undefined);
  console.log(`\nmember          ${trueSkill ? '  μ ± σ     ' : 'rating'}   last-step metric`);
  for (const [id, m] of Object.entries(last.members)) {
    const metric = m.solveRate !== undefined ? `solve rate ${percent(m.solveRate ?? null)}` : `reward ${m.rewardMean?.toFixed(2)}, valid ${percent(m.validity ?? 0)}`;
    const rating = m.sigma === undefined ? m.rating.toFixed(0).padStart(6) : `${m.rating.toFixed(1).padStart(5)} ± ${m.sigma.toFixed(1).padEnd(4)}`;
    console.log(`${id.padEnd(15)} ${rating}   ${metric}`);
  }
  const heldOut = history.filter((m) => m.heldOut).at(-1)?.heldOut;
  if (heldOut) console.log(`\nheld-out tasks (${heldOut.tasks}, greedy): students ${percent(heldOut.solveRate)}, best student ${percent(heldOut.best)}${heldOut.excluded > 0 ? `; ${heldOut.excluded} proposed during the run, not counted` : ''}`);
  const meanOf = (f: (m: StepMetrics) => number | null) => {
    const values = history.map(f).filter((v): v is number => v !== null);
    return values.length === 0 ? null : values.reduce((a, b) => a + b, 0) / values.length;
  };
  console.log(`\nover the ${history.length} steps of this invocation: solve rate ${percent(meanOf((m) => m.solveRate))}, teacher reward ${meanOf((m) => m.teacherReward)?.toFixed(2)}, validity ${percent(meanOf((m) => m.validity))}, task size ${meanOf((m) => m.taskSize)?.toFixed(1) ?? '-'}, coverage ${last.coverage} bins${last.distinctPrograms === null ? '' : `, ${last.distinctPrograms} distinct programs`}`);
  console.log(verifierLine(history));
  const faults = history.reduce((n, m) => n + m.verifierFaults, 0);
  if (faults > 0) console.log(`verifier: ${faults} proposals or answers dropped as infrastructure faults (a worker crashed or hung twice); see metrics.jsonl`);
  console.log(`run folder: ${outDir}  (${events} events, run hash ${hash.slice(0, 16)}…)`);
}

/** The verifier's throughput over the steps (metrics.jsonl's timing): jobs per second of its time, its share of the steps'. */
function verifierLine(history: StepMetrics[]): string {
  const timed = history.flatMap((m) => (m.timing ? [m.timing] : []));
  const sum = (f: (t: NonNullable<StepMetrics['timing']>) => number) => timed.reduce((n, t) => n + f(t), 0);
  const [stepMs, verifierMs, validations, checks] = [sum((t) => t.stepMs), sum((t) => t.verifierMs), sum((t) => t.validations), sum((t) => t.checks)];
  const rate = (jobs: number, seconds: number) => (seconds > 0 ? `${(jobs / seconds).toFixed(0)}/s` : '-');
  const validationSeconds = sum((t) => (t.validationsPerSecond ? t.validations / t.validationsPerSecond : 0));
  const checkSeconds = sum((t) => (t.checksPerSecond ? t.checks / t.checksPerSecond : 0));
  return `verifier: ${validations} validations (${rate(validations, validationSeconds)}), ${checks} checks (${rate(checks, checkSeconds)}), ${stepMs > 0 ? `${((100 * verifierMs) / stepMs).toFixed(1)}%` : '-'} of the steps' time`;
}

export async function replayCommand(dir: string, options: { verifierWorkers: number; threads?: number; batchTokens?: BatchTokensSetting }): Promise<void> {
  const verdict = await replayRun(dir, { verifierWorkers: options.verifierWorkers, threads: options.threads, ...(options.batchTokens === undefined ? {} : { batchTokens: options.batchTokens }) });
  for (const note of verdict.notes) console.log(`note: ${note}`);
  if (verdict.identical) {
    console.log(`identical: ${verdict.events} events, run hash ${verdict.hash}; every file of the run folder agrees with the replay`);
    return;
  }
  if (verdict.index !== null) {
    console.log(`differs at event ${verdict.index}:`);
    console.log(`  recorded: ${describeEvent(verdict.recorded)}`);
    console.log(`  replayed: ${describeEvent(verdict.replayed)}`);
  }
  console.log(`differs from the replay in ${verdict.differences.length} place(s):`);
  for (const difference of verdict.differences) console.log(`  ${difference}`);
  console.log(`run hash recorded ${verdict.recordedHash}, replayed ${verdict.replayedHash}`);
  process.exitCode = 1;
}
