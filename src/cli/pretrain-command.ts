// `populora pretrain SCENARIO`: trains a domain's base model from scratch (src/train/pretrain.ts) with a progress
// bar, and writes it in Hugging Face layout with its loss curve (loss.html), its log, its held-out set (where the
// domain records one: held_out.json) and the domain's model card: at every evaluation, so a run that ends early
// leaves a folder that says which step it holds. The first Ctrl-C (or SIGTERM) finishes the step, scores and saves
// the model and stops; the second stops at once, the folder keeping the last evaluation's model.

import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import cliProgress from 'cli-progress';
import { openBackend } from '../backend/select.js';
import { writeLossCurve } from '../report/report.js';
import { domainSettings, parsePretrainScenario, pretrain, pretrainingOf, type PretrainResult, type PretrainScenario, type Scores } from '../train/pretrain.js';
import { EXIT_ABANDONED } from '../cluster/errors.js';
import { SIGNAL_EXIT_CODES, stopOnSignals } from './stop-signals.js';
import { UsageError } from './run-command.js';

const LOG_LINE_MS = 30_000; // a progress line this often when the output is not a terminal
const percent = (share: number) => `${(100 * share).toFixed(1)}%`;
const showScores = (scores: Scores) => Object.entries(scores).map(([name, share]) => `${name} ${percent(share)}`).join(', ');

export async function pretrainCommand(file: string, options: { out?: string }): Promise<void> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    throw new UsageError(`${file}: cannot read the pretraining scenario`);
  }
  const scenario = parsePretrainScenario(text, file);
  const out = options.out ?? scenario.out;
  const backend = await openBackend(scenario.backend);
  const bar = new cliProgress.SingleBar({ format: 'step {value}/{total} |{bar}| loss {loss} | held-out {scores} | {eta_formatted} left', hideCursor: true, etaBuffer: 20, noTTYOutput: true, notTTYSchedule: LOG_LINE_MS }, cliProgress.Presets.shades_classic);
  console.log(`pretraining ${scenario.name} (${scenario.domain}) on ${backend.deviceDescription}: ${scenario.train.steps} steps of ${scenario.train.batch} sequences → ${out}`);
  const preparing = pretrainingOf(scenario).preparing(domainSettings(scenario));
  if (preparing !== null) console.log(preparing);
  const started = performance.now();
  const cpuStarted = process.cpuUsage(); // this process's threads: wall time alone says little on a shared machine
  let barStarted = false;
  let lastScores = '  -  ';
  let lastLine = started;
  let savedStep = 0;
  const spent = () => {
    const cpu = process.cpuUsage(cpuStarted);
    return { minutes: (performance.now() - started) / 60_000, cpuMinutes: (cpu.user + cpu.system) / 60e6 };
  };
  // The folder is written whole at every evaluation, beside the model saved there: a run killed later leaves a model
  // whose log, loss curve and card describe it.
  const writeFolder = (saved: PretrainResult) => {
    const { minutes, cpuMinutes } = spent();
    savedStep = saved.losses.length;
    writeFileSync(join(out, 'pretrain_log.json'), `${JSON.stringify({ scenario, device: backend.deviceDescription, steps: savedStep, stopped: saved.stopped, minutes, cpuMinutes, losses: saved.losses, evaluations: saved.evaluations }, null, 1)}\n`);
    if (saved.heldOut !== null) writeFileSync(join(out, 'held_out.json'), `${JSON.stringify(saved.heldOut, null, 1)}\n`);
    writeLossCurve(join(out, 'loss.html'), `pretraining ${scenario.name}`, saved.losses, saved.evaluations);
    writeFileSync(join(out, 'README.md'), modelCard(file, scenario, saved, backend.deviceDescription, minutes, cpuMinutes));
  };
  const stop = stopOnSignals({
    first: 'finishing the step in progress, then scoring and saving the model and stopping',
    second: 'stopping now; the model folder keeps the model of the last evaluation',
  });
  stop.now.addEventListener('abort', () => {
    bar.stop();
    console.log(`stopped at once; ${savedStep > 0 ? `${out} holds the model saved at step ${savedStep}, with its log and card` : 'no model was saved yet'}`);
    process.exit(EXIT_ABANDONED); // the folder is written in one synchronous piece: exiting here never leaves half of it
  });
  try {
    const result = await pretrain({ ...scenario, out }, backend, {
      stop: stop.afterStep,
      onSaved: writeFolder,
      onStep: (p) => {
        if (!barStarted) bar.start(scenario.train.steps, 0, { loss: '  -  ', scores: lastScores });
        barStarted = true;
        if (p.scores !== null) lastScores = showScores(p.scores);
        bar.update(p.step, { loss: p.loss.toFixed(3), scores: lastScores });
        // Training keeps the event loop busy, so the bar's own timer seldom fires: without a terminal, print a line
        // every 30 s from here.
        if (!process.stdout.isTTY && performance.now() - lastLine >= LOG_LINE_MS) {
          bar.render();
          lastLine = performance.now();
        }
      },
    });
    bar.stop();
    const { minutes, cpuMinutes } = spent();
    const final = result.evaluations.at(-1)!;
    console.log(`held-out ${showScores(final.scores)}; final loss ${result.losses.at(-1)!.toFixed(3)}; ${minutes.toFixed(1)} min (${cpuMinutes.toFixed(1)} CPU min)`);
    console.log(`model: ${out} (Hugging Face layout); loss curve: ${join(out, 'loss.html')}`);
    if (result.stopped) {
      const signal = String(stop.afterStep.reason);
      console.log(`stopped on ${signal} after step ${result.losses.length} of ${scenario.train.steps}: the model there is saved and scored (its card says so)`);
      process.exitCode = SIGNAL_EXIT_CODES[signal] ?? 1;
    }
  } finally {
    bar.stop();
    stop.dispose();
    backend.destroy();
  }
}

function modelCard(file: string, scenario: PretrainScenario, result: PretrainResult, device: string, minutes: number, cpuMinutes: number): string {
  const { config } = result;
  const [done, steps] = [result.losses.length, scenario.train.steps];
  const { hiddenSize, numLayers, vocabSize, intermediateSize, numHeads, numKvHeads, headDim } = config;
  const attention = 2 * hiddenSize * (numHeads + numKvHeads) * headDim; // q and o, k and v (grouped-query)
  const parametersMillions = (hiddenSize * vocabSize * 2 + numLayers * (attention + 3 * hiddenSize * intermediateSize)) / 1e6;
  const spentText = `(seed ${scenario.seed}; ${device}; ${minutes.toFixed(1)} minutes wall, ${cpuMinutes.toFixed(1)} CPU minutes of the training process up to this save: user + system, its threads together).`;
  const reproduce =
    done === steps
      ? `Reproduce it (bit for bit on the same backend) with:

    npx populora pretrain ${file}

${spentText}`
      : `**Step ${done} of ${steps}.** ${result.stopped ? `Its pretraining was stopped there (a signal), after scoring and saving this model` : `This is the model its pretraining scored and saved at step ${done}; the run was still going when this card was written (a run writes its folder at every evaluation), so if it went no further, it ended before its next evaluation`}. The learning rate follows the schedule of all ${steps} steps, so this is not the model of a ${done}-step scenario. Reproduce it (bit for bit on the same backend) by running

    npx populora pretrain ${file}

up to step ${done}: its folder then holds these weights${result.stopped ? ' (stop it with one Ctrl-C during that step)' : ''}; letting it run to step ${steps} gives the model the scenario was sized for.
${spentText}`;
  return pretrainingOf(scenario).modelCard({ name: scenario.name, settings: domainSettings(scenario), config, parametersMillions, scores: result.evaluations.at(-1)!.scores, reproduce });
}
