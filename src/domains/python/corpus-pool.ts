// The code domain's pretraining text, composed from a fixed pool of sandbox-validated programs: the generator
// (corpus.ts) writes programs and inputs, the verifier's validate jobs run each twice and give its outputs (so every
// answer in the corpus is the sandbox's own), and a seeded share of the distinct programs is held out, never shown
// in training text, for the model's score. A training example is a prompt and its completion exactly as the actors
// show and expect them (tasks.ts): a solved code_o, code_i or code_f task, or a teacher's proposal after 0..K
// reference tasks drawn as a teacher's buffer holds them (the seed tasks, then valid tasks).

import type { RandomStream } from '../../runtime/streams.js';
import type { VerifierPool } from '../domain.js';
import { randomProgram, type GeneratedProgram } from './corpus.js';
import { proposalPrompt, solvePrompt } from './prompts.js';
import { FUNCTION_PAIRS, SEED_TASKS, proposalText, type CodeTask, type CodeTaskType } from './tasks.js';

/** A program the sandbox ran on every one of its inputs: outputs[i] is f(inputs[i]). */
export interface PoolProgram {
  recipe: string;
  program: string;
  inputs: string[];
  outputs: string[];
  inputTypes: string[];
  outputTypes: string[];
}

export interface ProgramPool {
  training: PoolProgram[];
  heldOut: PoolProgram[];
  refused: Record<string, number>; // generated programs the sandbox refused, by reason (the generator's slips)
}

export interface CorpusExample {
  prompt: string;
  completion: string;
  kind: `${'solve' | 'propose'}/${CodeTaskType}`;
  task: CodeTask; // the task solved or proposed
}

/**
 * `count` distinct programs validated by the sandbox (generated in rounds until that many pass), then `heldOut` of
 * them drawn aside. Programs are compared by text: one text is in one part only. A verifier fault is an error
 * here, not a skipped program, so that the pool, and every weight trained on it, follows from the seed alone.
 */
export async function buildPool(verifier: VerifierPool, generate: RandomStream, split: RandomStream, count: number, heldOut: number): Promise<ProgramPool> {
  if (heldOut >= count) throw new RangeError(`the held-out programs (${heldOut}) must be fewer than the pool's ${count}`);
  const seen = new Set<string>();
  const programs: PoolProgram[] = [];
  const refused: Record<string, number> = {};
  for (let round = 0; programs.length < count; round++) {
    if (round > 20) throw new Error(`the program generator gives too few distinct valid programs: ${programs.length} of ${count} after ${round} rounds`);
    const drafts: GeneratedProgram[] = [];
    while (drafts.length < count - programs.length) {
      const draft = randomProgram(generate);
      if (seen.has(draft.program)) continue;
      seen.add(draft.program);
      drafts.push(draft);
    }
    const outcomes = await verifier.verify(drafts.map((d) => ({ kind: 'validate', taskType: 'code_f', text: proposalText(d.program, d.inputs) })));
    outcomes.forEach((outcome, i) => {
      if (outcome.kind === 'fault') throw new Error(`the verifier faulted on a generated program, so the pool would not follow from the seed: ${outcome.detail}`);
      if (outcome.kind !== 'validate') throw new Error(`a validate job came back as ${outcome.kind}`);
      const v = outcome.validation;
      if (!v.valid) {
        const reason = v.reason.split(':')[0]!;
        refused[reason] = (refused[reason] ?? 0) + 1;
        return;
      }
      const task = v.task as CodeTask;
      programs.push({ recipe: drafts[i]!.recipe, program: task.program, inputs: task.inputs, outputs: task.outputs, inputTypes: task.inputTypes, outputTypes: task.outputTypes });
    });
  }
  const held = new Set(split.sample(programs.length, heldOut));
  return { training: programs.filter((_, i) => !held.has(i)), heldOut: programs.filter((_, i) => held.has(i)), refused };
}

/** The task of type `type` on input `k` (code_o, code_i) or on the first `pairs` inputs (code_f). */
export function poolTask(p: PoolProgram, type: CodeTaskType, k: number, pairs = FUNCTION_PAIRS.min): CodeTask {
  if (type === 'code_f') return { type, program: p.program, inputs: p.inputs.slice(0, pairs), outputs: p.outputs.slice(0, pairs), inputTypes: p.inputTypes.slice(0, pairs), outputTypes: p.outputTypes.slice(0, pairs) };
  return { type, program: p.program, inputs: [p.inputs[k]!], outputs: [p.outputs[k]!], inputTypes: [p.inputTypes[k]!], outputTypes: [p.outputTypes[k]!] };
}

/** code_f pairs: FUNCTION_PAIRS.min to .max, the short end likelier (long proposals cost context and training time). */
function drawPairs(rng: RandomStream, p: PoolProgram): number {
  const most = Math.min(p.inputs.length, FUNCTION_PAIRS.max);
  return Math.min(most, FUNCTION_PAIRS.min + (rng.next() < 0.6 ? 0 : rng.int(most - FUNCTION_PAIRS.min + 1)));
}

/** A task of the training part, of any type, as a teacher's buffer would hold it. */
function randomTask(rng: RandomStream, training: readonly PoolProgram[]): CodeTask {
  const p = training[rng.int(training.length)]!;
  const type = (['code_o', 'code_i', 'code_f'] as const)[rng.int(3)]!;
  return poolTask(p, type, rng.int(p.inputs.length), drawPairs(rng, p));
}

/** References of a proposal prompt: 0..K of them, each a seed task (what every teacher's buffer starts with) or a valid task. */
export function drawReferences(rng: RandomStream, training: readonly PoolProgram[], most: number): CodeTask[] {
  const shown = rng.int(most + 1);
  return Array.from({ length: shown }, () => (rng.next() < 0.5 ? SEED_TASKS[rng.int(SEED_TASKS.length)]! : randomTask(rng, training)));
}

// Shares of the example kinds: code_o answers most (the step-0 score), proposals next (validity).
const KINDS: Array<[CorpusExample['kind'], number]> = [
  ['solve/code_o', 0.3],
  ['solve/code_i', 0.15],
  ['solve/code_f', 0.1],
  ['propose/code_o', 0.15],
  ['propose/code_i', 0.15],
  ['propose/code_f', 0.15],
];

/** One training example from the training part of the pool. */
export function corpusExample(rng: RandomStream, training: readonly PoolProgram[], references: number): CorpusExample {
  let r = rng.next();
  const kind = KINDS.find(([, share]) => (r -= share) < 0)?.[0] ?? KINDS.at(-1)![0];
  const type = kind.split('/')[1] as CodeTaskType;
  const p = training[rng.int(training.length)]!;
  const task = poolTask(p, type, rng.int(p.inputs.length), drawPairs(rng, p));
  if (kind.startsWith('propose/')) return { prompt: proposalPrompt(type, drawReferences(rng, training, references)), completion: proposalText(task.program, task.inputs), kind, task };
  const completion = type === 'code_o' ? task.outputs[0]! : type === 'code_i' ? task.inputs[0]! : proposalText(task.program, []);
  return { prompt: solvePrompt(task), completion, kind, task };
}
