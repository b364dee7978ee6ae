// The diagnosis of docs/science.md ("why do members end below their base model on held-out tasks?"), from run
// folders (a sweep's folder stands for its runs; scenarios/sweeps/teaches-diagnose.yaml makes suitable ones: an
// evaluation every 10 steps, a checkpoint every 10). Per run and, averaged, per sweep group, over the steps:
//   - held-out greedy score of each member, per task type (the evaluator's answers in the event log);
//   - the answer log-likelihood: at each checkpoint, log p(reference answer, EOS | prompt) that each student gives
//     the run's held-out tasks, teacher-forced, and the mean entropy of its next-token distribution there
//     (bench/science-likelihood.ts); where the domain has a grammar, also renormalised over the tokens it allows
//     (what the sampler sees) and the probability left on the tokens it forbids; the base model's for comparison;
//   - the drift of the self-play tasks from the held-out ones: the share of valid tasks of each type; for the arith
//     domain the share inside the held-out generator's support (depth <= 2, |x| <= 9, constants <= 99), mean |x|,
//     the answer's length in characters; for the code domain program and answer lengths;
//   - the students' answers: their length and the share right, per task type.
// Prints a table per group (means over its runs) and writes everything as JSON.
//
//   node dist/bench/science-diagnose.js RUN_OR_SWEEP... [--out bench/results/science-diagnose.json]
//                                       [--backend cpu] [--no-checkpoints]

import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import { benchArgs } from './args.js';
import { baseVerdicts, messageOf, runFolders, scenarioOf } from './science-runs.js';
import { answerLikelihoods, referenceAnswer } from './science-likelihood.js';
import { openBackend, type BackendChoice } from '../src/backend/select.js';
import type { Task } from '../src/domains/domain.js';
import { depthOf, parseExpr, type Expr } from '../src/domains/arith/expr.js';
import { domainNamed } from '../src/domains/index.js';
import { promptSet } from '../src/domains/prompts.js';
import { loadModel } from '../src/model/checkpoint.js';
import { LlamaModel } from '../src/model/llama.js';
import { LoraBank } from '../src/model/lora-bank.js';
import { loadPeftAdapter } from '../src/model/peft.js';
import { tokenTexts } from '../src/model/token-texts.js';
import { loadTokenizer } from '../src/model/tokenizer.js';
import { readEventLog } from '../src/runtime/event-log.js';
import type { Scenario } from '../src/scenario/scenario.js';
import { LlamaTrainer } from '../src/train/llama-backward.js';

const options = {
  out: { type: 'string', default: 'bench/results/science-diagnose.json' },
  backend: { type: 'string', default: 'cpu' },
  'no-checkpoints': { type: 'boolean', default: false },
} as const;
const args = benchArgs(import.meta.url, { options, allowPositionals: true });
const { positionals } = parseArgs({ options, allowPositionals: true, args: process.argv.slice(2) });

type Features = Record<string, number>;

/** The constants of an expression. */
const constantsOf = (e: Expr): number[] => (e.kind === 'num' ? [e.value] : e.kind === 'var' ? [] : [...constantsOf(e.left), ...constantsOf(e.right)]);

/** What a valid task looks like, as numbers to average over a step (per domain). */
function taskFeatures(task: Task): Features {
  const answerChars = referenceAnswer(task).length;
  if ('expr' in task) {
    const t = task as Task & { expr: string; inputs: number[] };
    const e = parseExpr(t.expr);
    const maxX = Math.max(...t.inputs.map(Math.abs));
    const inSupport = depthOf(e) <= 2 && maxX <= 9 && constantsOf(e).every((c) => c <= 99) ? 1 : 0;
    return { inSupport, depth: depthOf(e), absX: maxX, answerChars };
  }
  const t = task as Task & { program: string; inputs: string[] };
  return { programChars: t.program.length, inputChars: t.inputs[0]!.length, answerChars };
}

const mean = (values: readonly number[]) => (values.length === 0 ? NaN : values.reduce((a, b) => a + b, 0) / values.length);

function averageFeatures(list: readonly Features[]): Features {
  const keys = [...new Set(list.flatMap((f) => Object.keys(f)))];
  return Object.fromEntries(keys.map((k) => [k, mean(list.map((f) => f[k]!).filter((v) => v !== undefined))]));
}

/** Means over the held-out tasks: unmasked, and (grammar domains) renormalised over the allowed tokens. */
interface Likelihood {
  logLikelihood: number;
  entropy: number;
  maskedLogLikelihood?: number;
  maskedEntropy?: number;
}

interface RunDiagnosis {
  dir: string;
  group: string;
  seed: number;
  domain: string;
  baseScore: number | null; // the base model's greedy score on the run's held-out tasks (all of them)
  evaluations: Array<{ step: number; members: Record<string, Record<string, number>> }>; // member → task type → greedy score
  likelihood: Array<{ step: number; members: Record<string, Likelihood> }>; // step 0: the base model, as "base"
  tasks: Array<{ step: number; valid: number; types: Record<string, number>; features: Features }>; // per step, the valid tasks
  answers: Array<{ step: number; byType: Record<string, { answers: number; right: number; chars: number }> }>; // the students' sampled answers
}

/** Everything the event log tells about tasks, answers and evaluations. */
function fromEvents(dir: string): Pick<RunDiagnosis, 'evaluations' | 'tasks' | 'answers'> {
  const { events } = readEventLog(join(dir, 'events.msgpack'));
  const formats = new Map<number, { actor: string; type: string; greedy: boolean; slot: number }>();
  const texts = new Map<number, string>();
  const slotMembers = new Map<number, string[]>();
  const tasks = new Map<number, Task[]>();
  const answers = new Map<number, Record<string, { answers: number; right: number; chars: number }>>();
  const evaluations = new Map<number, Record<string, Record<string, { right: number; total: number }>>>();
  for (const event of events) {
    const message = messageOf(event);
    if (message.type === 'evaluate') {
      slotMembers.clear();
      for (const m of message.members!) slotMembers.set(m.slot, [...(slotMembers.get(m.slot) ?? []), m.id]);
    }
    if (message.type === 'generate') {
      for (const r of message.requests!) formats.set(r.requestId, { actor: event.actor, type: r.format!.split('/')[1]!, greedy: r.greedy === true, slot: r.slot! });
    }
    if (message.type === 'generated') for (const r of message.results!) texts.set(r.requestId, r.text!);
    if (message.type === 'validated') {
      const valid = message.results!.flatMap((r) => (r.validation?.valid ? [r.validation.task!] : []));
      tasks.set(event.step, [...(tasks.get(event.step) ?? []), ...valid]);
    }
    if (message.type === 'checked') {
      for (const r of message.results!) {
        const request = formats.get(r.requestId);
        if (!request || !r.check) continue;
        if (request.greedy) {
          const byMember = (evaluations.get(event.step) ?? evaluations.set(event.step, {}).get(event.step))!;
          for (const member of slotMembers.get(request.slot) ?? []) {
            const tally = ((byMember[member] ??= {})[request.type] ??= { right: 0, total: 0 });
            tally.total++;
            if (r.check.correct) tally.right++;
          }
        } else if (request.actor.startsWith('student')) {
          const byType = (answers.get(event.step) ?? answers.set(event.step, {}).get(event.step))!;
          const tally = (byType[request.type] ??= { answers: 0, right: 0, chars: 0 });
          tally.answers++;
          if (r.check.correct) tally.right++;
          tally.chars += texts.get(r.requestId)?.length ?? 0;
        }
      }
    }
  }
  return {
    evaluations: [...evaluations].map(([step, byMember]) => ({ step, members: Object.fromEntries(Object.entries(byMember).map(([id, byType]) => [id, Object.fromEntries(Object.entries(byType).map(([type, t]) => [type, t.right / t.total]))])) })),
    tasks: [...tasks].map(([step, list]) => ({ step, valid: list.length, types: Object.fromEntries([...new Set(list.map((t) => t.type))].map((type) => [type, list.filter((t) => t.type === type).length / list.length])), features: averageFeatures(list.map(taskFeatures)) })),
    answers: [...answers].map(([step, byType]) => ({ step, byType })),
  };
}

/** Each checkpoint's students (and the base model, as step 0) on the run's held-out tasks. */
async function fromCheckpoints(dir: string, scenario: Scenario, backendChoice: BackendChoice): Promise<RunDiagnosis['likelihood']> {
  if (!('path' in scenario.model) || !scenario.evaluation) return [];
  const domain = domainNamed(scenario.domain);
  const tasks = domain.heldOutTasks!(scenario.evaluation.seed, scenario.evaluation.tasks, scenario.evaluation.part);
  const { config, weights, tokenizerFile } = loadModel(scenario.model.path);
  const tokenizer = loadTokenizer(tokenizerFile!);
  const prompts = promptSet(domain, scenario.prompts);
  const backend = await openBackend(backendChoice, () => {});
  try {
    const model = LlamaModel.upload(backend, config, weights);
    const steps = readdirSync(join(dir, 'checkpoints')).map((name) => Number(name.replace('step-', ''))).sort((a, b) => a - b);
    const { rank, modules } = scenario.population.lora;
    const bank = new LoraBank(backend, config, 1, rank, modules);
    const trainer = new LlamaTrainer(model, bank);
    const vocab = tokenTexts(tokenizer, config.vocabSize);
    const score = async (slot: number): Promise<Likelihood> => {
      const plain = await answerLikelihoods(trainer, tokenizer, domain, prompts, tasks, slot);
      const out: Likelihood = { logLikelihood: mean(plain.logLikelihood), entropy: mean(plain.entropy) };
      if (!domain.tokenMask) return out;
      const masked = await answerLikelihoods(trainer, tokenizer, domain, prompts, tasks, slot, { vocab, maxTokens: scenario.sampling.maxTokens });
      return { ...out, maskedLogLikelihood: mean(masked.logLikelihood), maskedEntropy: mean(masked.entropy) };
    };
    const out: RunDiagnosis['likelihood'] = [{ step: 0, members: { base: await score(-1) } }];
    for (const step of steps) {
      const folder = join(dir, 'checkpoints', `step-${step}`);
      const members: Record<string, Likelihood> = {};
      for (const id of readdirSync(folder).filter((name) => name.startsWith('student-')).sort()) {
        bank.load(0, loadPeftAdapter(join(folder, id), config));
        members[id] = await score(0);
      }
      out.push({ step, members });
    }
    trainer.destroy();
    bank.destroy();
    return out;
  } finally {
    backend.destroy();
  }
}

async function diagnose(dir: string, group: string): Promise<RunDiagnosis> {
  const scenario = scenarioOf(dir);
  const likelihood = args['no-checkpoints'] ? [] : await fromCheckpoints(dir, scenario, args.backend as BackendChoice);
  const base = scenario.evaluation ? (await baseVerdicts(scenario)).verdicts : null;
  return { dir, group, seed: scenario.seed, domain: scenario.domain, baseScore: base && base.filter(Boolean).length / base.length, ...fromEvents(dir), likelihood };
}

/** Steps bucketed by tens (1-10 → 10, ...), for the table. */
const bucket = (step: number) => Math.ceil((step + 1) / 10) * 10;

function printGroup(group: string, runs: readonly RunDiagnosis[]): void {
  console.log(`\n${group} (${runs.length} run${runs.length === 1 ? '' : 's'})`);
  const base = runs[0]?.likelihood[0]?.members.base;
  console.log(`base model: held-out score ${runs[0]?.baseScore?.toFixed(3) ?? '-'}`);
  if (base) console.log(`base model: held-out answer log-likelihood ${base.logLikelihood.toFixed(3)} nats (under the grammar ${base.maskedLogLikelihood?.toFixed(3) ?? '-'}), entropy ${base.entropy.toFixed(3)} (${base.maskedEntropy?.toFixed(3) ?? '-'}) nats`);
  const buckets = [...new Set(runs.flatMap((r) => r.tasks.map((t) => bucket(t.step))))].sort((a, b) => a - b);
  const types = [...new Set(runs.flatMap((r) => r.answers.flatMap((a) => Object.keys(a.byType))))].sort();
  const featureKeys = [...new Set(runs.flatMap((r) => r.tasks.flatMap((t) => Object.keys(t.features))))];
  const header = ['steps', 'held-out (students)', 'log-lik', 'entropy', 'masked log-lik', 'masked entropy', ...types.map((t) => `share ${t}`), ...featureKeys, ...types.map((t) => `right ${t}`), 'answer chars'];
  console.log(header.join(' | '));
  for (const b of buckets) {
    const inBucket = <T extends { step: number }>(list: readonly T[]) => list.filter((x) => bucket(x.step) === b);
    const evals = runs.flatMap((r) => inBucket(r.evaluations).flatMap((e) => Object.entries(e.members).filter(([id]) => id.startsWith('student')).map(([, byType]) => mean(Object.values(byType)))));
    const likes = runs.flatMap((r) => r.likelihood.filter((l) => l.step === b).flatMap((l) => Object.values(l.members)));
    const tasks = runs.flatMap((r) => inBucket(r.tasks));
    const answers = runs.flatMap((r) => inBucket(r.answers));
    const share = (type: string) => mean(tasks.map((t) => t.types[type] ?? 0));
    const feature = (key: string) => mean(tasks.map((t) => t.features[key]!).filter(Number.isFinite));
    const right = (type: string) => {
      const tallies = answers.map((a) => a.byType[type]).filter((t) => t !== undefined);
      return tallies.reduce((n, t) => n + t.right, 0) / tallies.reduce((n, t) => n + t.answers, 0);
    };
    const chars = answers.flatMap((a) => Object.values(a.byType));
    const cells = [
      `${b - 9}-${b}`,
      evals.length ? mean(evals).toFixed(3) : '-',
      likes.length ? mean(likes.map((l) => l.logLikelihood)).toFixed(3) : '-',
      likes.length ? mean(likes.map((l) => l.entropy)).toFixed(3) : '-',
      likes.length ? mean(likes.map((l) => l.maskedLogLikelihood ?? NaN)).toFixed(3) : '-',
      likes.length ? mean(likes.map((l) => l.maskedEntropy ?? NaN)).toFixed(3) : '-',
      ...types.map((t) => share(t).toFixed(2)),
      ...featureKeys.map((k) => feature(k).toFixed(2)),
      ...types.map((t) => right(t).toFixed(2)),
      (chars.reduce((n, t) => n + t.chars, 0) / chars.reduce((n, t) => n + t.answers, 0)).toFixed(2),
    ];
    console.log(cells.join(' | '));
  }
}

const folders = runFolders(positionals);
const results: RunDiagnosis[] = [];
for (const { dir, group } of folders) {
  process.stderr.write(`diagnosing ${dir}\n`);
  results.push(await diagnose(dir, group));
}
const groups = [...new Set(results.map((r) => r.group))];
for (const group of groups) printGroup(group, results.filter((r) => r.group === group));
mkdirSync(dirname(args.out!), { recursive: true });
// one run a line, numbers to 4 significant digits: the file is kept in bench/results
const rounded = (_: string, value: unknown) => (typeof value === 'number' && !Number.isInteger(value) ? Number(value.toPrecision(4)) : value);
writeFileSync(args.out!, `{"runs": [\n${results.map((r) => JSON.stringify(r, rounded)).join(',\n')}\n]}\n`);
console.log(`\nwrote ${args.out}`);
