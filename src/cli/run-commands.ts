// `populora run` and `populora replay`: a scenario in, a run folder out (with a progress bar and a summary
// table); a run folder in, "identical" and its hash out (or the first differing event, and exit code 1).

import { existsSync, readFileSync, rmSync } from 'node:fs';
import { basename, extname, join } from 'node:path';
import cliProgress from 'cli-progress';
import { loadRun, writeReport } from '../report/report.js';
import { loadScenario, parseScenario } from '../scenario/scenario.js';
import type { StepMetrics } from '../runtime/metrics.js';
import { describeEvent, replayRun } from '../runtime/replay.js';
import { runScenario } from '../runtime/run.js';
import { UsageError } from './run-command.js';

const percent = (x: number | null) => (x === null ? '  -  ' : `${(100 * x).toFixed(0).padStart(3)}%`);

export async function runScenarioCommand(scenarioFile: string | undefined, options: { out?: string; resume?: string; overwrite?: boolean; verifierWorkers: number }): Promise<void> {
  if (options.resume && scenarioFile) throw new UsageError('give either a scenario or --resume DIR, not both (a resumed run uses the scenario recorded in its folder)');
  if (!options.resume && !scenarioFile) throw new UsageError('give a scenario file (e.g. scenarios/quickstart.yaml) or --resume DIR');
  const resumeDir = options.resume;
  const file = resumeDir ? join(resumeDir, 'scenario.json') : scenarioFile!;
  if (resumeDir && !existsSync(file)) throw new UsageError(`${resumeDir}: not a run folder (no scenario.json)`);
  const scenario = resumeDir ? parseScenario(readFileSync(file, 'utf8'), file) : loadScenario(file);
  const outDir = resumeDir ?? options.out ?? join('runs', basename(file, extname(file)));
  if (options.overwrite && !resumeDir && existsSync(join(outDir, 'events.msgpack'))) {
    if (!existsSync(join(outDir, 'scenario.json'))) throw new UsageError(`${outDir} does not look like a run folder (no scenario.json): not overwriting it`);
    rmSync(outDir, { recursive: true });
  }
  const bar = new cliProgress.SingleBar(
    { format: 'step {value}/{total} |{bar}| solve {solve} | teacher reward {reward} | valid {valid} | coverage {coverage} | {eta_formatted} left', hideCursor: true, etaBuffer: 4, noTTYOutput: true, notTTYSchedule: 30_000 },
    cliProgress.Presets.shades_classic,
  );
  console.log(`${resumeDir ? 'resuming' : 'running'} ${scenario.name}: ${scenario.steps} steps → ${outDir}`);
  bar.start(scenario.steps, 0, { solve: '  -  ', reward: '  -  ', valid: '  -  ', coverage: 0 });
  const history: StepMetrics[] = [];
  try {
    const result = await runScenario(scenario, {
      outDir,
      resume: Boolean(resumeDir),
      scenarioFile: file,
      verifierWorkers: options.verifierWorkers,
      onStep: (m) => {
        history.push(m);
        bar.update(m.step + 1, { solve: percent(m.solveRate), reward: m.teacherReward.toFixed(2), valid: percent(m.validity), coverage: m.coverage });
      },
    });
    bar.stop();
    printSummary(history, result.outDir, result.hash, result.events);
    console.log(`report: ${writeReport([loadRun(result.outDir)], join(result.outDir, 'report.html'))}`);
  } catch (error) {
    bar.stop();
    throw error;
  }
}

function printSummary(history: StepMetrics[], outDir: string, hash: string, events: number): void {
  const last = history.at(-1);
  if (!last) return;
  console.log(`\nmember          rating   last-step metric`);
  for (const [id, m] of Object.entries(last.members)) {
    const metric = m.solveRate !== undefined ? `solve rate ${percent(m.solveRate ?? null)}` : `reward ${m.rewardMean?.toFixed(2)}, valid ${percent(m.validity ?? 0)}`;
    console.log(`${id.padEnd(15)} ${m.rating.toFixed(0).padStart(6)}   ${metric}`);
  }
  const meanOf = (f: (m: StepMetrics) => number | null) => {
    const values = history.map(f).filter((v): v is number => v !== null);
    return values.length === 0 ? null : values.reduce((a, b) => a + b, 0) / values.length;
  };
  console.log(`\nover the ${history.length} steps of this invocation: solve rate ${percent(meanOf((m) => m.solveRate))}, teacher reward ${meanOf((m) => m.teacherReward)?.toFixed(2)}, validity ${percent(meanOf((m) => m.validity))}, task size ${meanOf((m) => m.taskSize)?.toFixed(1) ?? '-'}, coverage ${last.coverage} bins${last.distinctPrograms === null ? '' : `, ${last.distinctPrograms} distinct programs`}`);
  const faults = history.reduce((n, m) => n + m.verifierFaults, 0);
  if (faults > 0) console.log(`verifier: ${faults} proposals or answers dropped as infrastructure faults (a worker crashed or hung twice); see metrics.jsonl`);
  console.log(`run folder: ${outDir}  (${events} events, run hash ${hash.slice(0, 16)}…)`);
}

export async function replayCommand(dir: string, options: { verifierWorkers: number }): Promise<void> {
  if (!existsSync(join(dir, 'scenario.json'))) throw new UsageError(`${dir}: not a run folder (no scenario.json)`);
  const verdict = await replayRun(dir, { verifierWorkers: options.verifierWorkers });
  if (verdict.identical) {
    console.log(`identical: ${verdict.events} events, run hash ${verdict.hash}`);
    return;
  }
  console.log(`differs at event ${verdict.index}:`);
  console.log(`  recorded: ${describeEvent(verdict.recorded)}`);
  console.log(`  replayed: ${describeEvent(verdict.replayed)}`);
  console.log(`run hash recorded ${verdict.recordedHash}, replayed ${verdict.replayedHash}`);
  process.exitCode = 1;
}
