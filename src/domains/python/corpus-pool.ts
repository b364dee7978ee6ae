// The code domain's pretraining text, composed from a fixed pool of sandbox-validated programs: the generator
// (corpus.ts) writes programs and inputs, the verifier's validate jobs run each twice and give its outputs (so every
// answer in the corpus is the sandbox's own), and a seeded share of the distinct programs is held out, never shown
// in training text, for the model's score. A training example is a prompt and its completion exactly as the actors
// show and expect them (tasks.ts): a solved code_o, code_i or code_f task, or a teacher's proposal after 0..K
// reference tasks drawn as a teacher's buffer holds them (the seed tasks, then valid tasks).

import type { RandomStream } from '../../runtime/streams.js';
import type { VerifierPool } from '../domain.js';
import { drawRecipe, randomProgram, type GeneratedProgram } from './corpus.js';
import { proposalPrompt, solvePrompt } from './prompts.js';
import { CODE_TASK_TYPES, FUNCTION_PAIRS, SEED_TASKS, proposalText, type CodeTask, type CodeTaskType } from './tasks.js';

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
 * them drawn aside. Programs are compared by text: one text is in one part only, and a text in `excluded` (another
 * model's held-out programs) in none. A verifier fault is an error here, not a skipped program, so that the pool,
 * and every weight trained on it, follows from the seed alone.
 */
export async function buildPool(verifier: VerifierPool, generate: RandomStream, split: RandomStream, count: number, heldOut: number, excluded: ReadonlySet<string> = new Set()): Promise<ProgramPool> {
  if (heldOut >= count) throw new RangeError(`the held-out programs (${heldOut}) must be fewer than the pool's ${count}`);
  const seen = new Set<string>(excluded);
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
      if (excluded.has(task.program)) return; // the sandbox's text of a draft, should it differ from the draft's
      programs.push({ recipe: drafts[i]!.recipe, program: task.program, inputs: task.inputs, outputs: task.outputs, inputTypes: task.inputTypes, outputTypes: task.outputTypes });
    });
  }
  const held = holdOut(programs, heldOut, split);
  return { training: programs.filter((_, i) => !held.has(i)), heldOut: programs.filter((_, i) => held.has(i)), refused };
}

/**
 * Indices of `count` programs to hold out, drawn by recipe as training examples are (so the held-out score weighs the
 * shapes as training does), at most half of any recipe's programs (a shape with one variant stays in training).
 */
function holdOut(programs: readonly PoolProgram[], count: number, rng: RandomStream): Set<number> {
  const byRecipe = new Map<string, number[]>();
  programs.forEach((p, i) => byRecipe.set(p.recipe, [...(byRecipe.get(p.recipe) ?? []), i]));
  const room = [...byRecipe.values()].reduce((n, indices) => n + Math.floor(indices.length / 2), 0);
  if (count > room) throw new RangeError(`${count} held-out programs are more than half of each recipe's programs allow (${room})`);
  const held = new Set<number>();
  while (held.size < count) {
    const indices = byRecipe.get(drawRecipe(rng));
    if (!indices) continue;
    const free = indices.filter((i) => !held.has(i));
    if (indices.length - free.length < Math.floor(indices.length / 2)) held.add(free[rng.int(free.length)]!);
  }
  return held;
}

/**
 * The training part, drawn by recipe: a recipe as the generator draws one, then one of its programs. The pool holds
 * each program text once, so a shape with few variants (`xs[::-1]`) has few programs and one with many (a branch on
 * constants) has thousands; drawing by recipe keeps the shapes' shares the generator's.
 */
export class TrainingPrograms {
  private readonly byRecipe = new Map<string, PoolProgram[]>();

  constructor(readonly programs: readonly PoolProgram[]) {
    if (programs.length === 0) throw new RangeError('the training part of the pool is empty');
    for (const p of programs) this.byRecipe.set(p.recipe, [...(this.byRecipe.get(p.recipe) ?? []), p]);
  }

  draw(rng: RandomStream): PoolProgram {
    for (;;) {
      const programs = this.byRecipe.get(drawRecipe(rng));
      if (programs) return programs[rng.int(programs.length)]!;
    }
  }
}

/** The task of type `type` on input `k` (code_o, code_i) or on the first `pairs` inputs (code_f). */
export function poolTask(p: PoolProgram, type: CodeTaskType, k: number, pairs = FUNCTION_PAIRS.min): CodeTask {
  if (type === 'code_f') return { type, program: p.program, inputs: p.inputs.slice(0, pairs), outputs: p.outputs.slice(0, pairs), inputTypes: p.inputTypes.slice(0, pairs), outputTypes: p.outputTypes.slice(0, pairs) };
  return { type, program: p.program, inputs: [p.inputs[k]!], outputs: [p.outputs[k]!], inputTypes: [p.inputTypes[k]!], outputTypes: [p.outputTypes[k]!] };
}

/** A code_f task to solve: FUNCTION_PAIRS.min pairs or more, the short end likelier (long prompts cost context and time). */
function drawPairs(rng: RandomStream, p: PoolProgram): number {
  const most = Math.min(p.inputs.length, FUNCTION_PAIRS.max);
  return Math.min(most, FUNCTION_PAIRS.min + (rng.next() < 0.6 ? 0 : rng.int(most - FUNCTION_PAIRS.min + 1)));
}

/**
 * A task of the training part, of any type, as a teacher's buffer would hold it. Proposed code_f tasks (references
 * and proposals) give FUNCTION_PAIRS.min inputs: the fewest a teacher may, and a count a small model learns to keep.
 */
function proposedTask(rng: RandomStream, p: PoolProgram, type: CodeTaskType): CodeTask {
  return poolTask(p, type, rng.int(p.inputs.length), FUNCTION_PAIRS.min);
}

/** References of a proposal prompt: 0..K of them, each a seed task (what every teacher's buffer starts with) or a valid task. */
export function drawReferences(rng: RandomStream, training: TrainingPrograms, most: number): CodeTask[] {
  const shown = rng.int(most + 1);
  return Array.from({ length: shown }, () => (rng.next() < 0.5 ? SEED_TASKS[rng.int(SEED_TASKS.length)]! : proposedTask(rng, training.draw(rng), CODE_TASK_TYPES[rng.int(3)]!)));
}

// Shares of the example kinds: half proposals (a teacher's every proposal must parse and run), code_o answers next.
const KINDS: Array<[CorpusExample['kind'], number]> = [
  ['solve/code_o', 0.3],
  ['solve/code_i', 0.1],
  ['solve/code_f', 0.1],
  ['propose/code_o', 0.17],
  ['propose/code_i', 0.17],
  ['propose/code_f', 0.16],
];

/** One training example from the training part of the pool. */
export function corpusExample(rng: RandomStream, training: TrainingPrograms, references: number): CorpusExample {
  let r = rng.next();
  const kind = KINDS.find(([, share]) => (r -= share) < 0)?.[0] ?? KINDS.at(-1)![0];
  const type = kind.split('/')[1] as CodeTaskType;
  const p = training.draw(rng);
  if (kind.startsWith('propose/')) {
    const task = proposedTask(rng, p, type);
    return { prompt: proposalPrompt(type, drawReferences(rng, training, references)), completion: proposalText(task.program, task.inputs), kind, task };
  }
  const task = poolTask(p, type, rng.int(p.inputs.length), drawPairs(rng, p));
  const completion = type === 'code_o' ? task.outputs[0]! : type === 'code_i' ? task.inputs[0]! : proposalText(task.program, []);
  return { prompt: solvePrompt(task), completion, kind, task };
}
