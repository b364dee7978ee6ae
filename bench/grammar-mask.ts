// The quick start's generation under its grammar masks, through the engine (LocalEngineCore.generate): the device
// decode loop with the arith domain's token automata (masks computed on the device, tokens read back every
// `stepsPerRead` steps) against the host loop with its function masks (grammar.ts tokenMask on the host at every
// step: the path masked generation took before). One quick-start step's generations: 8 proposals (2 per teacher,
// the task types in turn) and 64 answers (8 tasks x 2 students x 4), maxTokens 24, temperature 1, EOS a stop
// token, on models/arith-tiny with 8 rank-8 adapters; and the 8 proposals without a stop token, decoded to 24
// tokens each (both loops then run the same steps: what the device masks cost and the readbacks saved). Rounds
// alternate which path runs first; both paths must give the same tokens (checked). --repeats: the generations per
// timing. Prints a table; writes JSON.
//
//   node dist/bench/grammar-mask.js [--device webgpu|cpu] [--rounds 3] [--repeats 3] [--out bench/results/lavapipe-automaton-mask.json]

import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { BenchUsageError, benchArgs } from './args.js';
import { openBackend, type BackendChoice } from '../src/backend/select.js';
import type { FormatName } from '../src/domains/domain.js';
import { randomTask } from '../src/domains/arith/corpus.js';
import { arith } from '../src/domains/arith/index.js';
import { ARITH_TASK_TYPES } from '../src/domains/arith/tasks.js';
import { LocalEngineCore } from '../src/engine/core.js';
import { loadModel } from '../src/model/checkpoint.js';
import type { GenerationRequest, GenerationResult } from '../src/model/generate.js';
import { LlamaModel } from '../src/model/llama.js';
import { randomAdapter } from '../src/model/peft.js';
import { tokenTexts } from '../src/model/token-texts.js';
import { loadTokenizer } from '../src/model/tokenizer.js';
import { Streams } from '../src/runtime/streams.js';

const args = benchArgs(import.meta.url, { options: { device: { type: 'string', default: 'webgpu' }, rounds: { type: 'string', default: '3' }, repeats: { type: 'string', default: '3' }, out: { type: 'string', default: 'bench/results/lavapipe-automaton-mask.json' } } });
const [rounds, repeats] = [Number(args.rounds), Number(args.repeats)];
if (!(Number.isInteger(rounds) && rounds >= 1)) throw new BenchUsageError(`--rounds takes a whole number, got ${args.rounds}`);
if (!(Number.isInteger(repeats) && repeats >= 1)) throw new BenchUsageError(`--repeats takes a whole number, got ${args.repeats}`);

const FOLDER = 'models/arith-tiny';
const backend = await openBackend(args.device as BackendChoice);
const { config, weights } = loadModel(FOLDER);
const tokenizer = loadTokenizer(join(FOLDER, 'tokenizer.json'));
const model = LlamaModel.upload(backend, config, weights);
const vocab = tokenTexts(tokenizer, config.vocabSize);
const settings = { vocab, rl: { reduction: 'token' as const }, optimizer: { lr: 0.003, maxGradNorm: 1 }, lora: { rank: 8, modules: ['q_proj', 'v_proj', 'up_proj', 'down_proj'] as const }, evolutionThreads: 1 };
const adapters = Array.from({ length: 8 }, (_, seed) => randomAdapter(config, { rank: 8, alpha: 16, targets: [...settings.lora.modules], seed, init: 'gaussian' }));

// One step's generations: slots 0-3 teachers, 4-7 students.
const stream = new Streams(7).stream('bench');
const request = (requestId: number, text: string, adapter: number): GenerationRequest => ({ requestId, prompt: tokenizer.encodePrompt(text), adapter, maxTokens: 24, seed: 7, temperature: 1, stopTokens: [vocab.eos] });
const proposalTypes = Array.from({ length: 8 }, (_, i) => ARITH_TASK_TYPES[i % 3]!);
const proposals = proposalTypes.map((type, i) => request(i, arith.proposalPrompt(type, [], null).prompt, i % 4));
const proposalFormats = proposalTypes.map((type): FormatName => `proposal/${type}`);
const tasks = proposalTypes.map((type) => randomTask(stream, type, { maxDepth: 2, inputAbs: 9 }));
const answerOf = tasks.flatMap((task) => [4, 5].flatMap((student) => [0, 1, 2, 3].map(() => ({ task, student }))));
const answers = answerOf.map(({ task, student }, i) => request(100 + i, arith.solvePrompt(task, null), student));
const answerFormats = answerOf.map(({ task }): FormatName => `answer/${task.type}`);
// And the proposals without a stop token: every row decodes 24 tokens, so both loops run the same steps.
const fullLength = proposals.map(({ stopTokens: _, ...r }) => r);

type Path = 'device loop, automata' | 'host loop, function masks';
const cores: Record<Path, LocalEngineCore> = {
  'device loop, automata': new LocalEngineCore(model, { ...settings, domain: arith }, Array.from({ length: 8 }, (_, i) => i)),
  'host loop, function masks': new LocalEngineCore(model, { ...settings, domain: { ...arith, tokenAutomaton: undefined } }, Array.from({ length: 8 }, (_, i) => i)),
};
for (const core of Object.values(cores)) await core.load(adapters, null);

interface Timing {
  ms: number; // a step's generations: proposals and answers
  proposalsMs: number;
  answersMs: number;
  fullLengthMs: number; // the 8 proposals decoded to 24 tokens
  tokens: number;
}

/** `repeats` times the step's generations; ms per step. */
async function step(path: Path): Promise<Timing & { results: GenerationResult[] }> {
  const ms = { proposals: 0, answers: 0, fullLength: 0 };
  let results: GenerationResult[] = [];
  for (let i = 0; i < repeats; i++) {
    const times = [performance.now()];
    const proposed = await cores[path].generate(proposals, proposalFormats);
    times.push(performance.now());
    results = [...proposed, ...(await cores[path].generate(answers, answerFormats))];
    times.push(performance.now());
    results.push(...(await cores[path].generate(fullLength, proposalFormats)));
    times.push(performance.now());
    ms.proposals += times[1]! - times[0]!;
    ms.answers += times[2]! - times[1]!;
    ms.fullLength += times[3]! - times[2]!;
  }
  const [proposalsMs, answersMs, fullLengthMs] = [ms.proposals / repeats, ms.answers / repeats, ms.fullLength / repeats];
  return { ms: proposalsMs + answersMs, proposalsMs, answersMs, fullLengthMs, tokens: results.slice(0, -fullLength.length).reduce((n, r) => n + r.tokens.length, 0), results };
}

const paths = Object.keys(cores) as Path[];
const loadBefore = loadavg()[0]!;
await Promise.all(paths.map(step)); // warm-up: compiles the automata, the pipelines
const measured: Array<Record<Path, Timing>> = [];
for (let round = 0; round < rounds; round++) {
  const order = round % 2 === 0 ? paths : [...paths].reverse();
  const row = {} as Record<Path, Timing & { results: GenerationResult[] }>;
  for (const path of order) row[path] = await step(path);
  if (JSON.stringify(row[paths[0]!].results) !== JSON.stringify(row[paths[1]!].results)) throw new Error('the two paths generated different tokens');
  measured.push(Object.fromEntries(paths.map((p) => [p, { ms: row[p].ms, proposalsMs: row[p].proposalsMs, answersMs: row[p].answersMs, fullLengthMs: row[p].fullLengthMs, tokens: row[p].tokens }])) as Record<Path, Timing>);
  const describe = (t: Timing) => `${t.ms.toFixed(0)} ms (proposals ${t.proposalsMs.toFixed(0)}, answers ${t.answersMs.toFixed(0)}; full-length ${t.fullLengthMs.toFixed(0)})`;
  console.log(`round ${round + 1}: ${paths.map((p) => `${p} ${describe(row[p])}`).join(', ')}; ${row[paths[0]!].tokens} tokens`);
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const KEYS = ['proposalsMs', 'answersMs', 'ms', 'fullLengthMs'] as const;
const ratios = Object.fromEntries(KEYS.map((k) => [k, measured.map((m) => m[paths[1]!][k] / m[paths[0]!][k])])) as Record<(typeof KEYS)[number], number[]>;
console.log(`\n| ${args.device}, median ms | 8 proposals | 64 answers | one step's generations (both) | 8 proposals, 24 tokens each |`);
console.log('|---|---|---|---|---|');
for (const p of paths) console.log(`| ${p} | ${KEYS.map((k) => median(measured.map((m) => m[p][k])).toFixed(0)).join(' | ')} |`);
console.log(`| device / host speed, median of the rounds' ratios | ${KEYS.map((k) => `${median(ratios[k]).toFixed(2)}x`).join(' | ')} |`);
console.log(`(rounds' ratios, one step's generations: ${ratios.ms.map((r) => r.toFixed(2)).join(', ')}; full-length: ${ratios.fullLengthMs.map((r) => r.toFixed(2)).join(', ')})`);

mkdirSync(dirname(args.out), { recursive: true });
writeFileSync(args.out, `${JSON.stringify({ loadAverage: [loadBefore, loadavg()[0]!], device: args.device, model: FOLDER, repeats, requests: { proposals: proposals.length, answers: answers.length, maxTokens: 24 }, rounds: measured, speedRatios: ratios, medianSpeedRatios: Object.fromEntries(KEYS.map((k) => [k, median(ratios[k])])) }, null, 2)}\n`);
await Promise.all(Object.values(cores).map((core) => core.close()));
backend.destroy();
