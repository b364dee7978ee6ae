// The code domain's base model at step 0 (before any self-play), as scenarios/code.yaml runs it: the share of a
// fresh teacher's sampled proposals that the verifier validates (prompts with the scenario's reference count of seed
// tasks, its temperature and token budget), and the share of held-out code_o and code_i tasks (the model folder's
// held_out.json, never trained on) solved greedily and at the scenario's temperature. Two sampling seeds. Prints a
// table; writes JSON.
//
//   node dist/bench/code-step0.js [--model models/python-tiny] [--scenario scenarios/code.yaml] [--seeds 1,2]
//                                 [--proposals 90] [--out bench/results/code-step0.json]

import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { benchArgs } from './args.js';
import { CpuBackend } from '../src/backend/cpu.js';
import { PythonVerifierPool } from '../src/domains/python/verifier-pool.js';
import { loadModel } from '../src/model/checkpoint.js';
import { LlamaModel } from '../src/model/llama.js';
import { loadTokenizer } from '../src/model/tokenizer.js';
import { Streams } from '../src/runtime/streams.js';
import { loadScenario } from '../src/scenario/scenario.js';
import { proposalValidity, solveRate, type HeldOutTasks } from '../src/domains/python/pretraining.js';

const args = benchArgs(import.meta.url, {
  options: {
    model: { type: 'string', default: 'models/python-tiny' },
    scenario: { type: 'string', default: 'scenarios/code.yaml' },
    seeds: { type: 'string', default: '1,2' },
    proposals: { type: 'string', default: '90' },
    out: { type: 'string', default: 'bench/results/code-step0.json' },
  },
});

interface Row {
  seed: number;
  proposalsValid: number;
  codeOGreedy: number;
  codeIGreedy: number;
  codeOSampled: number;
  codeISampled: number;
  seconds: number;
  refusals: Record<string, number>; // invalid proposals by the verifier's reason (its first words)
}

const scenario = loadScenario(args.scenario!);
const { temperature, maxTokens } = scenario.sampling;
const references = scenario.tasks.references;
const { config, weights, tokenizerFile } = loadModel(args.model!);
const tokenizer = loadTokenizer(tokenizerFile!);
const tasks = JSON.parse(readFileSync(join(args.model!, 'held_out.json'), 'utf8')) as HeldOutTasks;
const model = LlamaModel.upload(new CpuBackend(), config, weights);
const verifier = new PythonVerifierPool(2);
const modelMb = statSync(join(args.model!, 'model.safetensors')).size / 2 ** 20;

/** Reasons counted by their head (up to the first colon: "format", "runtime error", …). */
function countReasons(refusals: ReadonlyArray<string | null>): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const head of refusals.flatMap((reason) => (reason === null ? [] : [reason.split(':')[0]!]))) counts[head] = (counts[head] ?? 0) + 1;
  return counts;
}

const rows: Row[] = [];
const greedy = { codeO: await solveRate(model, tokenizer, verifier, tasks.code_o, { maxTokens }), codeI: await solveRate(model, tokenizer, verifier, tasks.code_i, { maxTokens }) };
for (const seed of args.seeds!.split(',').map(Number)) {
  const started = performance.now();
  const rng = new Streams(seed).stream('code-step0');
  const proposals = await proposalValidity(model, tokenizer, verifier, rng, { count: Number(args.proposals), references, temperature, maxTokens });
  const sampled = { maxTokens, temperature, seed };
  rows.push({
    seed,
    proposalsValid: proposals.valid,
    refusals: countReasons(proposals.refusals),
    codeOGreedy: greedy.codeO,
    codeIGreedy: greedy.codeI,
    codeOSampled: await solveRate(model, tokenizer, verifier, tasks.code_o, sampled),
    codeISampled: await solveRate(model, tokenizer, verifier, tasks.code_i, sampled),
    seconds: (performance.now() - started) / 1000,
  });
}
await verifier.close();

const pct = (share: number) => `${(100 * share).toFixed(1)}%`;
console.log(`${args.model}: ${modelMb.toFixed(2)} MiB of weights; ${tasks.code_o.length} held-out code_o and ${tasks.code_i.length} code_i tasks; ${args.proposals} proposals per seed (${references} seed-task reference(s), temperature ${temperature}, ${maxTokens} tokens, as ${args.scenario})`);
console.log('| seed | proposals valid | code_o greedy | code_i greedy | code_o at T | code_i at T |');
console.log('|---:|---:|---:|---:|---:|---:|');
for (const r of rows) console.log(`| ${r.seed} | ${pct(r.proposalsValid)} | ${pct(r.codeOGreedy)} | ${pct(r.codeIGreedy)} | ${pct(r.codeOSampled)} | ${pct(r.codeISampled)} |`);
for (const r of rows) console.log(`seed ${r.seed}, invalid proposals by reason: ${JSON.stringify(r.refusals)}`);
mkdirSync(dirname(args.out!), { recursive: true });
writeFileSync(args.out!, `${JSON.stringify({ model: args.model, scenario: args.scenario, modelMb, temperature, maxTokens, references, proposals: Number(args.proposals), heldOutTasks: tasks.code_o.length, rows }, null, 2)}\n`);
