// Can the RL update teach at all? (docs/science.md, the diagnosis.) One student adapter on the scenario's base model
// trained by the scenario's own update (its rl: lr, objective, masks, advantage groups; its sampling: temperature,
// answers per task) on tasks from an oracle teacher: fresh tasks drawn by the generator the held-out tasks come
// from (arith: the pretraining corpus's small deduce/abduce/induce tasks; python: newly generated programs run by
// the sandbox, code_o and code_i tasks), never a held-out task. Every --eval-every steps it is scored greedily on the
// scenario's held-out part, as a run's evaluator scores, with the answer log-likelihoods of bench/science-likelihood.ts.
// If this student cannot rise above the base model, no teacher of the same distribution will make self-play do it.
//
//   node dist/bench/science-probe.js --scenario FILE [--steps 100] [--tasks 12] [--types deduce,abduce,induce]
//                                    [--eval-every 25] [--seeds 1,2] [--lr X] [--temperature T] [--groups G]
//                                    [--out bench/results/science-probe.json]
// --lr, --temperature and --groups (rl.advantageGroups) override the scenario's; --types defaults to the held-out
// set's types.

import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { benchArgs, BenchUsageError } from './args.js';
import { answerLikelihoods } from './science-likelihood.js';
import { CpuBackend } from '../src/backend/cpu.js';
import type { FormatName, Task, VerifierPool } from '../src/domains/domain.js';
import { randomTask } from '../src/domains/arith/corpus.js';
import type { ArithTaskType } from '../src/domains/arith/tasks.js';
import { domainNamed } from '../src/domains/index.js';
import { promptSet } from '../src/domains/prompts.js';
import { randomProgram } from '../src/domains/python/corpus.js';
import { poolTask, type PoolProgram } from '../src/domains/python/corpus-pool.js';
import { proposalText, type CodeTask, type CodeTaskType } from '../src/domains/python/tasks.js';
import { LocalEngineCore } from '../src/engine/core.js';
import { randomAdapter } from '../src/model/peft.js';
import { tokenTexts } from '../src/model/token-texts.js';
import { Streams, type RandomStream } from '../src/runtime/streams.js';
import { loadScenario, type Scenario } from '../src/scenario/scenario.js';
import { buildModel, coreSettings } from '../src/sim/population.js';
import { ADVANTAGE_GROUPS, advantageGroup, groupAdvantages, type AdvantageGroups } from '../src/train/advantages.js';
import { completionMasks } from '../src/train/grammar-policy.js';
import type { RlSample } from '../src/train/steps.js';

const args = benchArgs(import.meta.url, {
  options: {
    scenario: { type: 'string' },
    steps: { type: 'string', default: '100' },
    tasks: { type: 'string', default: '12' },
    types: { type: 'string' },
    'eval-every': { type: 'string', default: '25' },
    seeds: { type: 'string', default: '1,2' },
    lr: { type: 'string' },
    temperature: { type: 'string' },
    groups: { type: 'string' },
    out: { type: 'string', default: 'bench/results/science-probe.json' },
  },
});
if (!args.scenario) throw new BenchUsageError('--scenario FILE is needed (its model, domain, rl, sampling and evaluation are used)');
const positive = (name: string, text: string) => {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1) throw new BenchUsageError(`--${name} ${text}: expected a whole number >= 1`);
  return n;
};
const loaded = loadScenario(args.scenario);
const number = (name: string, text: string | undefined, fallback: number) => {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!(n >= 0)) throw new BenchUsageError(`--${name} ${text}: expected a number >= 0`);
  return n;
};
const groups = (args.groups ?? loaded.rl.advantageGroups) as AdvantageGroups;
if (!ADVANTAGE_GROUPS.includes(groups)) throw new BenchUsageError(`--groups ${groups}: expected one of ${ADVANTAGE_GROUPS.join(', ')}`);
const scenario: Scenario = { ...loaded, rl: { ...loaded.rl, lr: number('lr', args.lr, loaded.rl.lr), advantageGroups: groups }, sampling: { ...loaded.sampling, temperature: number('temperature', args.temperature, loaded.sampling.temperature) } };
if (!scenario.evaluation) throw new BenchUsageError(`${args.scenario}: the scenario needs an "evaluation" (the held-out part to score)`);
const domain = domainNamed(scenario.domain);
const evaluation = scenario.evaluation;
const heldOut = domain.heldOutTasks!(evaluation.seed, evaluation.tasks, evaluation.part);
const types = args.types ? args.types.split(',') : [...new Set(heldOut.map((t) => t.type))];
const [steps, perStep, evalEvery] = [positive('steps', args.steps!), positive('tasks', args.tasks!), positive('eval-every', args['eval-every']!)];

/** Fresh tasks of the held-out set's generator, none of them held out. */
interface TaskSource {
  next(count: number): Promise<Task[]>;
}

function arithSource(rng: RandomStream): TaskSource {
  const banned = new Set(domain.heldOutTasks!(evaluation.seed, 200).map((t) => JSON.stringify(t))); // the set's first 200, both parts
  return {
    next: async (count) =>
      Array.from({ length: count }, (_, i) => {
        for (;;) {
          const task = randomTask(rng, types[i % types.length] as ArithTaskType, { maxDepth: 2, inputAbs: 9 });
          if (!banned.has(JSON.stringify({ ...task, type: 'deduce' }))) return task;
        }
      }),
  };
}

function pythonSource(rng: RandomStream, pool: VerifierPool): TaskSource {
  const banned = new Set(domain.heldOutTasks!(evaluation.seed, 400).map((t) => (t as CodeTask).program));
  const programs: PoolProgram[] = [];
  let used = 0;
  return {
    next: async (count) => {
      while (programs.length - used < count) {
        const drafts = Array.from({ length: 4 * count }, () => randomProgram(rng)).filter((d) => !banned.has(d.program));
        const outcomes = await pool.verify(drafts.map((d) => ({ kind: 'validate' as const, taskType: 'code_f', text: proposalText(d.program, d.inputs) })));
        for (const o of outcomes) if (o.kind === 'validate' && o.validation.valid) programs.push({ recipe: '', ...(o.validation.task as CodeTask) });
      }
      return programs.slice(used, (used += count)).map((p, i) => poolTask(p, types[i % types.length] as CodeTaskType, rng.int(p.inputs.length)));
    },
  };
}

interface Evaluation {
  step: number;
  score: number;
  logLikelihood: number;
  maskedLogLikelihood: number | null;
  trainSolveRate: number | null; // the sampled answers' share right over the steps since the last evaluation
}

async function probe(seed: number): Promise<Evaluation[]> {
  const streams = new Streams(seed);
  const parts = buildModel(scenario, new CpuBackend(), args.scenario!);
  const core = new LocalEngineCore(parts.model, coreSettings(scenario, parts), [0]);
  const { rank, alpha, modules, init } = scenario.population.lora;
  await core.load([randomAdapter(parts.config, { rank, alpha: alpha ?? 2 * rank, targets: modules, seed: streams.stream('adapter').u32(), init })], null);
  const pool = domain.verifierPool(1, { fuel: scenario.tasks.fuel, guardMs: scenario.tasks.guardMs });
  const source = domain.name === 'python' ? pythonSource(streams.stream('tasks'), pool) : arithSource(streams.stream('tasks'));
  const prompts = promptSet(domain, scenario.prompts);
  const vocab = tokenTexts(parts.tokenizer, parts.config.vocabSize);
  const { maxTokens, temperature, answersPerStudent } = scenario.sampling;
  const eos = parts.tokenizer.eosTokenId!;
  let requestId = 0;
  const answer = async (tasks: readonly Task[], slot: number, greedy: boolean, copies: number) => {
    const list = tasks.flatMap((task) => Array.from({ length: copies }, () => task));
    const requests = list.map((task) => ({ requestId: requestId++, prompt: parts.tokenizer.encodePrompt(domain.solvePrompt(task, prompts)), adapter: slot, maxTokens, seed: seed >>> 0, temperature: greedy ? 0 : temperature, topP: scenario.sampling.topP, stopTokens: [eos] }));
    const formats = list.map((task) => `answer/${task.type}` as FormatName);
    const results = await core.generate(requests, formats);
    const outcomes = await pool.verify(results.map((r, i) => ({ kind: 'check' as const, task: list[i]!, answer: parts.tokenizer.decode(r.tokens) })));
    return results.map((r, i) => ({ task: list[i]!, format: formats[i]!, prompt: requests[i]!.prompt, completion: r.tokens, right: outcomes[i]!.kind === 'check' && (outcomes[i] as { check: { correct: boolean } }).check.correct }));
  };
  const evaluations: Evaluation[] = [];
  let [right, total] = [0, 0];
  try {
    for (let step = 0; step <= steps; step++) {
      if (step % evalEvery === 0 || step === steps) {
        const verdicts = await answer(heldOut, 0, true, 1);
        const plain = await answerLikelihoods(core.trainer, parts.tokenizer, domain, prompts, heldOut, 0);
        const masked = domain.tokenMask ? await answerLikelihoods(core.trainer, parts.tokenizer, domain, prompts, heldOut, 0, { vocab, maxTokens }) : null;
        const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;
        evaluations.push({ step, score: verdicts.filter((v) => v.right).length / verdicts.length, logLikelihood: mean(plain.logLikelihood), maskedLogLikelihood: masked && mean(masked.logLikelihood), trainSolveRate: total === 0 ? null : right / total });
        [right, total] = [0, 0];
        process.stderr.write(`seed ${seed} step ${step}: held-out ${evaluations.at(-1)!.score.toFixed(3)}, log-lik ${evaluations.at(-1)!.logLikelihood.toFixed(3)}\n`);
      }
      if (step === steps) break;
      const sampled = await answer(await source.next(perStep), 0, false, answersPerStudent);
      right += sampled.filter((s) => s.right).length;
      total += sampled.length;
      const groups = sampled.map((s) => advantageGroup(scenario.rl.advantageGroups, { role: 'student', taskType: s.task.type, slot: 0, task: s.prompt.join(',') }));
      const advantages = groupAdvantages(sampled.map((s) => (s.right ? 1 : 0)), groups, scenario.rl.advantageScaling ?? 'whiten');
      const samples: RlSample[] = sampled.map((s, i) => {
        const mask = scenario.rl.maskedLogProbs ? domain.tokenMask?.(s.format, vocab) : undefined;
        const allowed = mask ? { allowed: { start: s.prompt.length, masks: completionMasks(mask, vocab, s.completion, maxTokens) } } : {};
        return { tokens: [...s.prompt, ...s.completion], adapter: 0, promptLength: s.prompt.length, advantage: advantages[i]!, ...allowed };
      });
      await core.train(samples);
    }
  } finally {
    await pool.close();
    await core.close();
    parts.model.destroy();
  }
  return evaluations;
}

const seeds = args.seeds!.split(',').map((s) => positive('seeds', s));
const results: Array<{ seed: number; evaluations: Evaluation[] }> = [];
for (const seed of seeds) results.push({ seed, evaluations: await probe(seed) });
const rows = results[0]!.evaluations.map((e, k) => {
  const at = results.map((r) => r.evaluations[k]!);
  const mean = (get: (e: Evaluation) => number | null) => at.map(get).filter((v): v is number => v !== null).reduce((a, b, _, all) => a + b / all.length, 0);
  return { step: e.step, score: mean((x) => x.score), logLikelihood: mean((x) => x.logLikelihood), maskedLogLikelihood: mean((x) => x.maskedLogLikelihood), trainSolveRate: mean((x) => x.trainSolveRate) };
});
console.log(`\n${args.scenario} (${domain.name}, lr ${scenario.rl.lr}, temperature ${scenario.sampling.temperature}, ${scenario.rl.maskedLogProbs ? 'masked' : 'unmasked'} log p, ${scenario.rl.advantageGroups} groups), ${perStep} tasks x ${scenario.sampling.answersPerStudent} answers a step, types ${types.join('/')}, seeds ${seeds.join(',')}`);
console.log('| step | held-out (greedy) | answer log-lik | under the grammar | training solve rate since the last |');
console.log('|---|---|---|---|---|');
for (const r of rows) console.log(`| ${r.step} | ${r.score.toFixed(3)} | ${r.logLikelihood.toFixed(3)} | ${domain.tokenMask ? r.maskedLogLikelihood.toFixed(3) : '-'} | ${r.step === 0 ? '-' : r.trainSolveRate.toFixed(3)} |`);
mkdirSync(dirname(args.out!), { recursive: true });
writeFileSync(args.out!, JSON.stringify({ scenario: args.scenario, lr: scenario.rl.lr, temperature: scenario.sampling.temperature, types, tasksPerStep: perStep, answersPerTask: scenario.sampling.answersPerStudent, steps, results, rows }, null, 1) + '\n');
console.log(`\nwrote ${args.out}`);
