// `populora pretrain SCENARIO`: trains the toy domain's base model from scratch (src/train/pretrain.ts) with a
// progress bar, then writes it in Hugging Face layout with its loss curve (loss.html), its log and a model card.

import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import cliProgress from 'cli-progress';
import { openBackend } from '../backend/select.js';
import { writeLossCurve } from '../report/report.js';
import { parsePretrainScenario, pretrain } from '../train/pretrain.js';
import { UsageError } from './run-command.js';

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
  const bar = new cliProgress.SingleBar({ format: 'step {value}/{total} |{bar}| loss {loss} | held-out deduce {solve} | {eta_formatted} left', hideCursor: true, etaBuffer: 20, noTTYOutput: true, notTTYSchedule: 30_000 }, cliProgress.Presets.shades_classic);
  console.log(`pretraining ${scenario.name} on ${backend.deviceDescription}: ${scenario.train.steps} steps of ${scenario.train.batch} sequences → ${out}`);
  bar.start(scenario.train.steps, 0, { loss: '  -  ', solve: '  -  ' });
  const started = performance.now();
  let lastSolve = '  -  ';
  try {
    const result = await pretrain({ ...scenario, out }, backend, (p) => {
      if (p.heldOutSolveRate !== null) lastSolve = `${(100 * p.heldOutSolveRate).toFixed(1)}%`;
      bar.update(p.step, { loss: p.loss.toFixed(3), solve: lastSolve });
    });
    bar.stop();
    const minutes = (performance.now() - started) / 60_000;
    const final = result.evaluations.at(-1)!;
    writeFileSync(join(out, 'pretrain_log.json'), `${JSON.stringify({ scenario, losses: result.losses, evaluations: result.evaluations }, null, 1)}\n`);
    writeLossCurve(join(out, 'loss.html'), `pretraining ${scenario.name}`, result.losses, result.evaluations);
    writeFileSync(join(out, 'README.md'), modelCard(file, scenario.name, scenario.seed, result.config.hiddenSize, result.config.numLayers, final.heldOutSolveRate, scenario.eval.tasks, backend.deviceDescription, minutes));
    console.log(`held-out deduce solve rate ${(100 * final.heldOutSolveRate).toFixed(1)}% of ${scenario.eval.tasks}; final loss ${result.losses.at(-1)!.toFixed(3)}; ${minutes.toFixed(1)} min`);
    console.log(`model: ${out} (Hugging Face layout); loss curve: ${join(out, 'loss.html')}`);
  } finally {
    bar.stop();
    backend.destroy();
  }
}

function modelCard(file: string, name: string, seed: number, hidden: number, layers: number, solveRate: number, tasks: number, device: string, minutes: number): string {
  return `# ${name}

A tiny Llama-family base model (hidden size ${hidden}, ${layers} layers, character tokenizer) pretrained from scratch
on text of populora's toy arithmetic domain: solved deduce, abduce and induce tasks and teachers' proposals, in the
formats the actors use. It is the default base model of \`scenarios/quickstart.yaml\`.

Reproduce it (bit for bit on the same backend) with:

    npx populora pretrain ${file}

(seed ${seed}; ${device}; ${minutes.toFixed(1)} minutes).

Greedy solve rate on ${tasks} held-out deduce tasks (never in the training text): **${(100 * solveRate).toFixed(1)}%**.
\`loss.html\` plots the training loss and the held-out solve rate; \`pretrain_log.json\` holds both.
`;
}
