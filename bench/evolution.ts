// Milliseconds per child for each evolution operator, on the toy model's adapters and on 7B-shaped ones
// (32 layers, d 4096, MLP 11008, rank 16, all seven projections). Prints a table; writes JSON.
//
//   node dist/bench/evolution.js [--repeats 3] [--skip-7b] [--out bench/results/evolution-cpu.json]

import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { parseArgs } from 'node:util';
import { CROSSOVER_KINDS, crossover, mutate } from '../src/evolution/operators.js';
import { TINY_CONFIGS, type LlamaConfig } from '../src/model/config.js';
import { LORA_MODULES, randomAdapter } from '../src/model/peft.js';

const LLAMA_7B: LlamaConfig = { ...TINY_CONFIGS['tiny']!, vocabSize: 32000, hiddenSize: 4096, intermediateSize: 11008, numLayers: 32, numHeads: 32, numKvHeads: 32, headDim: 128 };
const { values: args } = parseArgs({ options: { repeats: { type: 'string', default: '3' }, 'skip-7b': { type: 'boolean', default: false }, out: { type: 'string', default: 'bench/results/evolution-cpu.json' } } });

const shapes: Array<[string, LlamaConfig, number]> = [['toy (tiny, r 8)', TINY_CONFIGS['tiny']!, 8]];
if (!args['skip-7b']) shapes.push(['7B-shaped (r 16)', LLAMA_7B, 16]);
const rows: Array<{ shape: string; operator: string; msPerChild: number; parameters: number }> = [];

for (const [name, config, rank] of shapes) {
  const [p1, p2] = [1, 2].map((seed) => randomAdapter(config, { rank, targets: [...LORA_MODULES], seed, init: 'gaussian' }));
  const parameters = p1!.layers.reduce((n, layer) => n + Object.values(layer).reduce((m, f) => m + f.a.length + f.b.length, 0), 0);
  const operators: Array<[string, () => unknown]> = [
    ['mutate', () => mutate(p1!, { sigma: 0.01, seed: 7 })],
    ...CROSSOVER_KINDS.map((kind): [string, () => unknown] => [`crossover ${kind}`, () => crossover(p1!, p2!, { kind, seed: 7 })]),
  ];
  for (const [operator, run] of operators) {
    run(); // warm-up
    const start = performance.now();
    for (let i = 0; i < Number(args.repeats); i++) run();
    rows.push({ shape: name, operator, msPerChild: (performance.now() - start) / Number(args.repeats), parameters });
    console.error(`  ${name}: ${operator}`);
  }
}

console.log(`\nevolution operators on the CPU (float64 maths, float32 factors), mean of ${args.repeats}\n`);
console.log('| adapters | parameters | operator | ms per child |');
console.log('|---|---:|---|---:|');
for (const r of rows) console.log(`| ${r.shape} | ${(r.parameters / 1e6).toFixed(2)} M | ${r.operator} | ${r.msPerChild.toFixed(1)} |`);
mkdirSync(dirname(args.out!), { recursive: true });
writeFileSync(args.out!, JSON.stringify({ backend: 'cpu', rows }, null, 2));
console.log(`\nwrote ${args.out}`);
