// Text for pretraining a base model on the toy domain: the same prompts and answers the actors use (tasks.ts),
// for random small expressions. A corpus example is a prompt and its completion: a solved deduce, abduce or
// induce task, or a teacher's proposal of a valid task. Seeded: one stream draws every example.

import type { RandomStream } from '../../runtime/streams.js';
import type { BinaryOp, Expr } from './expr.js';
import { printExpr } from './expr.js';
import { INDUCE_PAIRS, proposalPrompt, solvePrompt, validateProposal, type ArithTask, type ArithTaskType } from './tasks.js';

export interface CorpusOptions {
  maxDepth: number; // AST depth of the expressions
  inputAbs: number; // inputs x in [-inputAbs, inputAbs]
}

export interface CorpusExample {
  prompt: string;
  completion: string;
  kind: `${'solve' | 'propose'}/${ArithTaskType}`;
}

// Small expressions first: +, - and * with one-digit constants are what a tiny model can learn to evaluate.
const OPERATORS: BinaryOp[] = ['+', '+', '-', '-', '*', '*', '//', '%'];

export function randomExpr(rng: RandomStream, depth: number): Expr {
  if (depth <= 1 || rng.next() < 0.35) return rng.next() < 0.5 ? { kind: 'var' } : { kind: 'num', value: rng.int(rng.next() < 0.8 ? 10 : 100) };
  return { kind: 'bin', op: OPERATORS[rng.int(OPERATORS.length)]!, left: randomExpr(rng, depth - 1), right: randomExpr(rng, depth - 1) };
}

/** A valid task of the type (drawn until validation passes: division by zero and overflow are redrawn). */
export function randomTask(rng: RandomStream, type: ArithTaskType, options: CorpusOptions): ArithTask {
  for (;;) {
    const expr = printExpr(randomExpr(rng, options.maxDepth));
    const count = type === 'induce' ? INDUCE_PAIRS : 1;
    const inputs = rng.sample(2 * options.inputAbs + 1, count).map((k) => k - options.inputAbs);
    const validation = validateProposal(type, `${expr};${inputs.join(',')}`);
    if (validation.valid && expr.includes('x')) return validation.task;
  }
}

/** One example: 70% solved tasks (deduce most), 30% proposals. */
export function corpusExample(rng: RandomStream, options: CorpusOptions): CorpusExample {
  const r = rng.next();
  const type: ArithTaskType = r < 0.5 ? 'deduce' : r < 0.75 ? 'abduce' : 'induce';
  const task = randomTask(rng, type, options);
  if (rng.next() < 0.3) return { prompt: proposalPrompt(type), completion: `${task.expr};${task.inputs.join(',')}`, kind: `propose/${type}` };
  const completion = type === 'deduce' ? String(task.outputs[0]) : type === 'abduce' ? String(task.inputs[0]) : task.expr;
  return { prompt: solvePrompt(task), completion, kind: `solve/${type}` };
}

