// What a pretraining step costs for candidate shapes of the code domain's base model (how code-small was sized,
// docs/science.md "A stronger embedded code model"): each shape pretrains for a few steps on a small pool of the code
// corpus (its sequences are the real run's: the same example mix and lengths), and the script reports the wall and
// CPU seconds (this process's threads, user + system) of a step, the first two steps left out (warm-up), and of the
// last step, which also scores 10 code_o, 10 code_i tasks and 6 proposals. Multiply by a scenario's steps for its cost;
// a model's self-play run costs about its step's ratio to code-tiny's. Prints a table; writes JSON.
//
//   node dist/bench/pretrain-shapes.js [--shapes code-tiny,code-small,96x4,128x4] [--steps 14] [--batch 8]
//                                      [--threads 2] [--out bench/results/pretrain-shapes.json]
//
// A shape is a preset name (src/model/config.ts) or WIDTHxLAYERS: code-tiny's shape that wide (heads of 16, half as
// many k/v heads, an MLP twice the width) and that deep.

import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { BenchUsageError, benchArgs } from './args.js';
import { openBackend } from '../src/backend/select.js';
import { TINY_CONFIGS, type LlamaConfig } from '../src/model/config.js';
import { parsePretrainScenario, pretrain } from '../src/train/pretrain.js';

const args = benchArgs(import.meta.url, {
  options: {
    shapes: { type: 'string', default: 'code-tiny,code-small,96x4,128x4' },
    steps: { type: 'string', default: '14' },
    batch: { type: 'string', default: '8' },
    threads: { type: 'string', default: '2' },
    out: { type: 'string', default: 'bench/results/pretrain-shapes.json' },
  },
});

const steps = Number(args.steps);
if (!Number.isInteger(steps) || steps < 4) throw new BenchUsageError(`--steps ${args.steps}: give a whole number >= 4 (the first two steps are left out and the last is timed apart)`);

function shapeConfig(shape: string): LlamaConfig {
  if (TINY_CONFIGS[shape]) return TINY_CONFIGS[shape];
  const match = /^(\d+)x(\d+)$/.exec(shape);
  if (!match || Number(match[1]) % 32 !== 0) throw new BenchUsageError(`--shapes: "${shape}" is neither a preset (${Object.keys(TINY_CONFIGS).join(', ')}) nor WIDTHxLAYERS with a width that is a multiple of 32`);
  const [width, layers] = [Number(match[1]), Number(match[2])];
  return { ...TINY_CONFIGS['code-tiny']!, hiddenSize: width, intermediateSize: 2 * width, numLayers: layers, numHeads: width / 16, numKvHeads: width / 32, headDim: 16 };
}

interface Row {
  shape: string;
  hidden: number;
  layers: number;
  stepWallS: number; // a training step
  stepCpuS: number;
  evalStepWallS: number; // the last step: a training step and the 26 scored generations
  evalStepCpuS: number;
}

const backend = await openBackend('cpu', () => {}, Number(args.threads));
const out = mkdtempSync(join(tmpdir(), 'populora-pretrain-shapes-'));
const rows: Row[] = [];
for (const shape of args.shapes!.split(',')) {
  const config = shapeConfig(shape);
  const preset = `bench-${shape}`;
  TINY_CONFIGS[preset] = config; // pretrain reads its shapes from the presets
  const scenario = parsePretrainScenario(
    `name: ${preset}\nseed: 1\ndomain: python\nmodel: { preset: ${preset} }\ncorpus: { programs: 400, heldOut: 20 }\ntrain: { steps: ${steps}, batch: ${args.batch}, lr: 0.003 }\neval: { tasks: 10, proposals: 6, temperature: 0.5 }\nout: ${out}\n`,
    'pretrain-shapes.ts',
  );
  const marks: Array<{ wallMs: number; cpu: NodeJS.CpuUsage }> = [];
  await pretrain(scenario, backend, { onStep: () => marks.push({ wallMs: performance.now(), cpu: process.cpuUsage() }) });
  const cpuS = (from: number, to: number) => (marks[to]!.cpu.user + marks[to]!.cpu.system - marks[from]!.cpu.user - marks[from]!.cpu.system) / 1e6;
  const wallS = (from: number, to: number) => (marks[to]!.wallMs - marks[from]!.wallMs) / 1000;
  const timed = steps - 3; // steps 3 .. steps-1 (marks[i] is taken after step i + 1): after the first two, before the scored last
  rows.push({ shape, hidden: config.hiddenSize, layers: config.numLayers, stepWallS: wallS(1, steps - 2) / timed, stepCpuS: cpuS(1, steps - 2) / timed, evalStepWallS: wallS(steps - 2, steps - 1), evalStepCpuS: cpuS(steps - 2, steps - 1) });
}
backend.destroy();

const base = rows.find((r) => r.shape === 'code-tiny');
console.log(`${steps} steps of ${args.batch} sequences at ${args.threads} threads; ratio: a step's CPU seconds to code-tiny's`);
console.log('| shape | hidden x layers | step wall s | step CPU s | ratio | last step (scores 26 generations) wall s | CPU s |');
console.log('|---|---|---:|---:|---:|---:|---:|');
for (const r of rows) console.log(`| ${r.shape} | ${r.hidden} x ${r.layers} | ${r.stepWallS.toFixed(3)} | ${r.stepCpuS.toFixed(3)} | ${base ? `${(r.stepCpuS / base.stepCpuS).toFixed(2)}x` : '-'} | ${r.evalStepWallS.toFixed(1)} | ${r.evalStepCpuS.toFixed(1)} |`);
mkdirSync(dirname(args.out!), { recursive: true });
writeFileSync(args.out!, `${JSON.stringify({ steps, batch: Number(args.batch), threads: Number(args.threads), rows }, null, 2)}\n`);
