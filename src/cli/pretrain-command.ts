// `populora pretrain SCENARIO`: trains a domain's base model from scratch (src/train/pretrain.ts) with a progress
// bar, then writes it in Hugging Face layout with its loss curve (loss.html), its log, its held-out set (where the
// domain records one: held_out.json) and the domain's model card.

import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import cliProgress from 'cli-progress';
import { openBackend } from '../backend/select.js';
import { writeLossCurve } from '../report/report.js';
import { domainSettings, parsePretrainScenario, pretrain, pretrainingOf, type PretrainResult, type PretrainScenario, type Scores } from '../train/pretrain.js';
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
  try {
    const result = await pretrain({ ...scenario, out }, backend, (p) => {
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
    });
    bar.stop();
    const minutes = (performance.now() - started) / 60_000;
    const cpu = process.cpuUsage(cpuStarted);
    const cpuMinutes = (cpu.user + cpu.system) / 60e6;
    const final = result.evaluations.at(-1)!;
    writeFileSync(join(out, 'pretrain_log.json'), `${JSON.stringify({ scenario, device: backend.deviceDescription, minutes, cpuMinutes, losses: result.losses, evaluations: result.evaluations }, null, 1)}\n`);
    if (result.heldOut !== null) writeFileSync(join(out, 'held_out.json'), `${JSON.stringify(result.heldOut, null, 1)}\n`);
    writeLossCurve(join(out, 'loss.html'), `pretraining ${scenario.name}`, result.losses, result.evaluations);
    writeFileSync(join(out, 'README.md'), modelCard(file, scenario, result, backend.deviceDescription, minutes, cpuMinutes));
    console.log(`held-out ${showScores(final.scores)}; final loss ${result.losses.at(-1)!.toFixed(3)}; ${minutes.toFixed(1)} min (${cpuMinutes.toFixed(1)} CPU min)`);
    console.log(`model: ${out} (Hugging Face layout); loss curve: ${join(out, 'loss.html')}`);
  } finally {
    bar.stop();
    backend.destroy();
  }
}

function modelCard(file: string, scenario: PretrainScenario, result: PretrainResult, device: string, minutes: number, cpuMinutes: number): string {
  const { config } = result;
  const { hiddenSize, numLayers, vocabSize, intermediateSize, numHeads, numKvHeads, headDim } = config;
  const attention = 2 * hiddenSize * (numHeads + numKvHeads) * headDim; // q and o, k and v (grouped-query)
  const parametersMillions = (hiddenSize * vocabSize * 2 + numLayers * (attention + 3 * hiddenSize * intermediateSize)) / 1e6;
  const reproduce = `Reproduce it (bit for bit on the same backend) with:

    npx populora pretrain ${file}

(seed ${scenario.seed}; ${device}; ${minutes.toFixed(1)} minutes wall, ${cpuMinutes.toFixed(1)} CPU minutes of the training process: user + system, its threads together).`;
  return pretrainingOf(scenario).modelCard({ name: scenario.name, settings: domainSettings(scenario), config, parametersMillions, scores: result.evaluations.at(-1)!.scores, reproduce });
}
