// A step of the real-size scenario (scenarios/scale/qwen2.5-0.5b.yaml: 8 members of rank 16 on all seven modules of
// Qwen2.5-0.5B's shape) as its engine runs it, once for each micro-batch budget, each in a child process of its own
// (a process's peak memory only grows): the teachers' proposals (up to 256 tokens), the students' answers (up to
// 128), the policy-gradient update over all of them, and the checkpoint of the 8 adapters and their optimizer state.
// Per phase: wall and CPU seconds, tokens through the model; per budget: the step, the process's peak resident
// memory, and 100 steps at this step's time. A random base proposes noise, which the verifier refuses, so a real run
// of the scenario here answers nothing; this step answers every proposal as a working model's students would
// (--answers per proposal), to cost a whole step. --proposals and --answers shorten it (the same shapes). Sequences
// run to their budget (a random model almost never samples the end token). Prints a table; writes JSON.
//
//   node dist/bench/scale-step.js [--scenario scenarios/scale/qwen2.5-0.5b.yaml] [--budgets 512,1024,2048]
//                                 [--proposals 8] [--answers 4] [--threads N] [--out bench/results/scale-step.json]
//                                 [--trace-memory FILE]   (JSON lines: the memory sampled every 2 s, bench/memory-trace.ts)
//   node dist/bench/scale-step.js --child BUDGET ...   (one step at one budget: what the parent runs; JSON out)

import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BenchUsageError, benchArgs } from './args.js';
import { MemoryTrace } from './memory-trace.js';
import { CpuBackend } from '../src/backend/cpu.js';
import { openBackend } from '../src/backend/select.js';
import type { FormatName } from '../src/domains/domain.js';
import type { CodeTask } from '../src/domains/python/tasks.js';
import { domainNamed } from '../src/domains/index.js';
import { promptSet } from '../src/domains/prompts.js';
import type { BatchTokensSetting } from '../src/engine/budget.js';
import { LocalEngineCore } from '../src/engine/core.js';
import { Pacer } from '../src/engine/pacer.js';
import { randomModel } from '../src/model/checkpoint.js';
import type { GenerationRequest } from '../src/model/generate.js';
import { LlamaModel } from '../src/model/llama.js';
import { randomAdapter } from '../src/model/peft.js';
import { nodeDisk } from '../src/runtime/durable.js';
import { loadScenario, presetModel } from '../src/scenario/scenario.js';
import { writeCheckpoint } from '../src/sim/checkpoints.js';
import { coreSettings, slotCount } from '../src/sim/population.js';
import type { RlSample } from '../src/train/steps.js';

const args = benchArgs(import.meta.url, {
  options: {
    scenario: { type: 'string', default: 'scenarios/scale/qwen2.5-0.5b.yaml' },
    budgets: { type: 'string', default: '512,1024,2048' },
    proposals: { type: 'string', default: '8' },
    answers: { type: 'string', default: '4' },
    threads: { type: 'string' }, // the CPU backend's (default: the scenario's, else one per core)
    out: { type: 'string', default: 'bench/results/scale-step.json' },
    child: { type: 'string' },
    'trace-memory': { type: 'string' }, // a JSON-lines file: the memory sampled through the step (bench/memory-trace.ts)
  },
});

interface Phase {
  wallS: number;
  cpuS: number; // user + system of the whole process
  tokens: number; // through the model: prompts and generated tokens (generation), every token forward and backward once (training)
  rssGiB: number; // resident at the phase's end
}
interface StepResult {
  budget: string;
  threads: number | null; // the CPU backend's; null on another backend
  described: string;
  phases: Record<'proposals' | 'answers' | 'train' | 'checkpoint', Phase>;
  stepS: number;
  stepCpuS: number;
  peakRssGiB: number;
}

const GIB = 2 ** 30;
const count = (name: string, value: string) => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new BenchUsageError(`--${name}: expected a whole number >= 1, got "${value}"`);
  return n;
};
const budgetOf = (value: string): BatchTokensSetting => (value === 'auto' || value === 'unbounded' ? value : count('budgets', value));

async function oneStep(budget: BatchTokensSetting): Promise<StepResult> {
  const file = args.scenario!;
  const scenario = loadScenario(file);
  if (!('preset' in scenario.model)) throw new BenchUsageError(`${file}: the bench makes the scenario's preset model; this scenario names a folder`);
  const { config, tokenizer } = presetModel(scenario, file);
  const threads = args.threads === undefined ? undefined : count('threads', args.threads);
  const backend = await openBackend(scenario.backend, () => {}, threads);
  // each tensor's values drawn once a 65,536 and repeated: the shapes (and so the time) of the scenario's model, in seconds
  const model = LlamaModel.upload(backend, config, randomModel(config, scenario.model.seed, 65_536));
  const parts = { config, tokenizer, maxContext: model.maxContext, model };
  const slots = slotCount(scenario);
  const trace = args['trace-memory'] === undefined ? undefined : new MemoryTrace(args['trace-memory']);
  const pacer = new Pacer({ onProgress: (p) => trace?.sample(`${p.phase} ${p.done}/${p.total}`) });
  const core = new LocalEngineCore(model, { ...coreSettings(scenario, parts), batchTokens: budget }, Array.from({ length: slots }, (_, s) => s), 0, pacer);
  const { rank, modules, init } = scenario.population.lora;
  await core.load(Array.from({ length: slots }, (_, seed) => randomAdapter(config, { rank, alpha: 2 * rank, targets: modules, seed, init })), null);

  const domain = domainNamed(scenario.domain);
  const prompts = promptSet(domain, scenario.prompts);
  const { teachers, students, subpopulations } = scenario.population;
  const types = scenario.tasks.types;
  const seedOf = (type: string) => domain.seedReferences.find((t) => t.type === type) as CodeTask;
  const request = (requestId: number, prompt: string, adapter: number, maxTokens: number): GenerationRequest => ({ requestId, prompt: tokenizer.encodePrompt(prompt), adapter, maxTokens, seed: scenario.seed, temperature: scenario.sampling.temperature, stopTokens: [tokenizer.eosTokenId!] });
  const proposalCount = count('proposals', args.proposals!);
  const proposals = Array.from({ length: proposalCount }, (_, i) => {
    const type = types[i % types.length]!;
    const teacher = i % (teachers * subpopulations); // teachers hold the first slots (population.ts planMembers)
    // a teacher's first step: `references` of the domain's seed tasks shown (actors/teacher.ts)
    const references = domain.seedReferences.slice(0, scenario.tasks.references);
    return { request: request(i, domain.proposalPrompt(type, references, prompts).prompt, teacher, scenario.sampling.maxTokens), format: `proposal/${type}` as FormatName };
  });
  // a task's answers are one student's (the scenario's studentsPerTask: 1), so they share one prefill
  const answers = proposals.flatMap((p, i) =>
    Array.from({ length: count('answers', args.answers!) }, (_, k) => {
      const type = types[i % types.length]!;
      const student = teachers * subpopulations + (i % (students * subpopulations));
      return { request: request(1000 + i * 100 + k, domain.solvePrompt(seedOf(type), prompts), student, scenario.sampling.answerMaxTokens ?? scenario.sampling.maxTokens), format: `answer/${type}` as FormatName };
    }),
  );

  const started = { wall: performance.now(), cpu: process.cpuUsage() };
  const timed = async <T>(tokens: (result: T) => number, work: () => Promise<T>): Promise<{ result: T; phase: Phase }> => {
    const [wall, cpu] = [performance.now(), process.cpuUsage()];
    const result = await work();
    trace?.sample('phase end', true);
    const used = process.cpuUsage(cpu);
    return { result, phase: { wallS: (performance.now() - wall) / 1000, cpuS: (used.user + used.system) / 1e6, tokens: tokens(result), rssGiB: process.memoryUsage().rss / GIB } };
  };
  const generateAll = (items: typeof proposals) => timed((results: Awaited<ReturnType<typeof core.generate>>) => items.reduce((n, it, i) => n + it.request.prompt.length + results[i]!.tokens.length, 0), () => core.generate(items.map((it) => it.request), items.map((it) => it.format)));
  const proposed = await generateAll(proposals);
  const answered = await generateAll(answers);
  const samples: RlSample[] = [...proposals, ...answers].map((item, i) => {
    const tokens = (i < proposals.length ? proposed.result[i] : answered.result[i - proposals.length])!.tokens;
    return { tokens: [...item.request.prompt, ...tokens], adapter: item.request.adapter, promptLength: item.request.prompt.length, advantage: i % 3 === 0 ? 1 : -0.5 };
  });
  const train = await timed(() => 2 * samples.reduce((n, s) => n + s.tokens.length, 0), () => core.train(samples));
  const folder = mkdtempSync(join(tmpdir(), 'populora-scale-step-'));
  const checkpoint = await timed(() => 0, async () => {
    const { adapters, optimizer } = await core.state();
    const state = { step: 1, requestIdCounter: 0, actorStates: [], adapters, optimizer, coverage: [] };
    writeCheckpoint(folder, { step: 1, events: { count: 0, hash: '' }, scenario, members: adapters.map((adapter, slot) => ({ id: `member-${slot}`, adapter })), state }, nodeDisk, () => {});
  });
  rmSync(folder, { recursive: true, force: true });
  const used = process.cpuUsage(started.cpu);
  const result: StepResult = {
    budget: String(budget),
    threads: backend instanceof CpuBackend ? backend.threadCount : null,
    described: core.budget.described,
    phases: { proposals: proposed.phase, answers: answered.phase, train: train.phase, checkpoint: checkpoint.phase },
    stepS: (performance.now() - started.wall) / 1000,
    stepCpuS: (used.user + used.system) / 1e6,
    peakRssGiB: (process.resourceUsage().maxRSS * 1024) / GIB,
  };
  await core.close();
  backend.destroy();
  return result;
}

if (args.child !== undefined) {
  console.log(JSON.stringify(await oneStep(budgetOf(args.child))));
} else {
  const script = fileURLToPath(import.meta.url);
  const passed = ['--scenario', args.scenario!, '--proposals', args.proposals!, '--answers', args.answers!, ...(args.threads === undefined ? [] : ['--threads', args.threads]), ...(args['trace-memory'] === undefined ? [] : ['--trace-memory', args['trace-memory']])];
  const results: StepResult[] = [];
  for (const budget of args.budgets!.split(',')) {
    budgetOf(budget); // a bad value is named before any child runs
    console.error(`budget ${budget}: one step in a child process...`);
    const child = spawnSync(process.execPath, [script, ...passed, '--child', budget], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 2 ** 24 });
    if (child.status !== 0) throw new Error(`budget ${budget}: the child process failed (exit ${child.status ?? child.signal})`);
    results.push(JSON.parse(child.stdout.trim().split('\n').at(-1)!) as StepResult);
  }
  const f = (x: number, digits = 0) => x.toFixed(digits).padStart(7);
  console.log('\nbudget     threads  proposals s (cpu)   answers s (cpu)    train s (cpu)   checkpoint s   step s (cpu)   peak RSS GiB   100 steps h');
  for (const r of results) {
    const p = r.phases;
    console.log(`${r.budget.padEnd(10)} ${String(r.threads ?? '-').padStart(7)} ${f(p.proposals.wallS)} (${f(p.proposals.cpuS)}) ${f(p.answers.wallS)} (${f(p.answers.cpuS)}) ${f(p.train.wallS)} (${f(p.train.cpuS)}) ${f(p.checkpoint.wallS, 1)}      ${f(r.stepS)} (${f(r.stepCpuS)}) ${f(r.peakRssGiB, 2)}        ${f((100 * r.stepS) / 3600, 1)}`);
  }
  const out = { what: 'one step of scenarios/scale/qwen2.5-0.5b.yaml at the engine (bench/scale-step.ts), each budget in a process of its own', machine: `${cpus().length} cores (${cpus()[0]?.model ?? 'unknown'}), load average ${loadavg().map((l) => l.toFixed(1)).join(' ')} at the end`, command: process.argv.slice(1).join(' '), results };
  mkdirSync(dirname(args.out!), { recursive: true });
  writeFileSync(args.out!, `${JSON.stringify(out, null, 2)}\n`);
  console.log(`\nwritten: ${args.out}`);
}
