// The toy domain's three task types, mirroring Absolute Zero Reasoner's:
//   deduce  (expression, x → value)      teacher writes "EXPR;X"        student sees "EXPR;x=X;=?"  answers "V"
//   abduce  (expression, value → an x)   teacher writes "EXPR;X"        student sees "EXPR;x=?;=V"  answers any X' with f(X') = V
//   induce  (pairs → an expression)      teacher writes "EXPR;X1,..,X5" student sees "X1:V1,X2:V2,X3:V3;??" answers an
//                                         expression that matches all five pairs (two held out)
// Teachers' prompts are the type's marker alone. Every text uses only ARITH_ALPHABET's characters.

import { evaluate, ExprError, depthOf, operatorsOf, parseExpr, printExpr, signatureOf, sizeOf, type Expr } from './expr.js';
import type { AnswerCheck, TaskMetrics } from '../domain.js';
import type { Format } from './grammar.js';

export const ARITH_TASK_TYPES = ['deduce', 'abduce', 'induce'] as const;
export type ArithTaskType = (typeof ARITH_TASK_TYPES)[number];

/** A validated task: the canonical expression, its inputs and their values. */
export interface ArithTask {
  type: ArithTaskType;
  expr: string;
  inputs: number[];
  outputs: number[];
}

export type ArithValidation = { valid: true; task: ArithTask; fuelUsed: number } | { valid: false; reason: string };

const INPUT_DIGITS = 3; // x in -999..999
const VALUE_DIGITS = 6; // values within ±999999 (LIMITS.valueAbs)
export const INDUCE_PAIRS = 5;
export const INDUCE_SHOWN = 3;

const expr = { kind: 'expr' } as const;
const input = { kind: 'int', digits: INPUT_DIGITS } as const;
const literal = (text: string) => ({ kind: 'literal', text }) as const;

const MARKERS: Record<ArithTaskType, string> = { deduce: '=?', abduce: '?=', induce: '??' };

/**
 * A teacher's prompt: the type's marker; with reference tasks (a scenario's tasks.referenceBuffer, AZR's buffer),
 * each reference first, as its own type's proposal example ("=?\nx+1;3\n"), the way the corpus writes proposals.
 */
export function proposalPrompt(type: ArithTaskType, references: readonly ArithTask[] = []): string {
  return `${references.map((r) => `${MARKERS[r.type]}\n${r.expr};${r.inputs.join(',')}\n`).join('')}${MARKERS[type]}\n`;
}

export function proposalFormat(type: ArithTaskType): Format {
  if (type !== 'induce') return [expr, literal(';'), input];
  return [expr, literal(';'), input, ...Array.from({ length: INDUCE_PAIRS - 1 }, () => [literal(','), input]).flat()];
}

export function answerFormat(type: ArithTaskType): Format {
  return type === 'deduce' ? [{ kind: 'int', digits: VALUE_DIGITS }] : type === 'abduce' ? [input] : [expr];
}

export function solvePrompt(task: ArithTask): string {
  const [x, v] = [task.inputs[0]!, task.outputs[0]!];
  if (task.type === 'deduce') return `${task.expr};x=${x};=?\n`;
  if (task.type === 'abduce') return `${task.expr};x=?;=${v}\n`;
  const shown = task.inputs.slice(0, INDUCE_SHOWN).map((x, i) => `${x}:${task.outputs[i]}`);
  return `${shown.join(',')};${MARKERS.induce}\n`;
}

const INTEGER = /^(0|-?[1-9][0-9]*)$/;

function parseInteger(text: string, digits: number, what: string): number {
  if (!INTEGER.test(text) || text.replace('-', '').length > digits) throw new ExprError('syntax', `${what} ${JSON.stringify(text)} is not an integer of at most ${digits} digits`);
  return Number(text);
}

function evaluateAll(e: Expr, inputs: number[]): { outputs: number[]; fuelUsed: number } {
  let fuelUsed = 0;
  const outputs = inputs.map((x) => {
    const r = evaluate(e, x);
    fuelUsed += r.fuelUsed;
    return r.value;
  });
  return { outputs, fuelUsed };
}

/** Validates a teacher's proposal text: parses, evaluates within the limits, distinct inputs for induce. */
export function validateProposal(type: ArithTaskType, text: string): ArithValidation {
  try {
    const [exprText, inputText, ...rest] = text.split(';');
    if (inputText === undefined || rest.length > 0) return { valid: false, reason: `format: expected "EXPR;INPUTS", got ${JSON.stringify(text)}` };
    const e = parseExpr(exprText!);
    const inputs = inputText.split(',').map((s) => parseInteger(s, INPUT_DIGITS, 'input'));
    const wanted = type === 'induce' ? INDUCE_PAIRS : 1;
    if (inputs.length !== wanted) return { valid: false, reason: `format: ${type} needs ${wanted} input(s), got ${inputs.length}` };
    if (new Set(inputs).size !== inputs.length) return { valid: false, reason: 'induce: the inputs must be distinct' };
    const { outputs, fuelUsed } = evaluateAll(e, inputs);
    return { valid: true, task: { type, expr: printExpr(e), inputs, outputs }, fuelUsed };
  } catch (error) {
    if (error instanceof ExprError) return { valid: false, reason: `${error.reason}: ${error.message}` };
    throw error;
  }
}

/** Checks a student's answer text against a validated task. */
export function checkAnswer(task: ArithTask, text: string): AnswerCheck {
  try {
    if (task.type === 'deduce') {
      const value = parseInteger(text, VALUE_DIGITS, 'answer');
      return value === task.outputs[0] ? { correct: true, reason: 'correct' } : { correct: false, reason: `wrong value ${value}` };
    }
    if (task.type === 'abduce') {
      const x = parseInteger(text, INPUT_DIGITS, 'answer');
      const { value } = evaluate(parseExpr(task.expr), x);
      return value === task.outputs[0] ? { correct: true, reason: 'correct' } : { correct: false, reason: `f(${x}) = ${value}, not ${task.outputs[0]}` };
    }
    const candidate = parseExpr(text);
    const { outputs } = evaluateAll(candidate, task.inputs);
    const miss = outputs.findIndex((v, i) => v !== task.outputs[i]);
    return miss < 0 ? { correct: true, reason: 'correct' } : { correct: false, reason: `${miss < INDUCE_SHOWN ? 'shown' : 'held-out'} pair ${task.inputs[miss]} → ${task.outputs[miss]} gives ${outputs[miss]}` };
  } catch (error) {
    if (error instanceof ExprError) return { correct: false, reason: `${error.reason}: ${error.message}` };
    throw error;
  }
}

export function taskMetrics(task: ArithTask): TaskMetrics {
  const e = parseExpr(task.expr);
  return { size: sizeOf(e), depth: depthOf(e), operators: operatorsOf(e), signature: `${task.type}:${signatureOf(e)}` };
}

/** The tasks a teacher's reference buffer starts with (none of them held out): two of each type, small as the corpus's. */
export const SEED_TASKS: readonly ArithTask[] = (['deduce;x*3+1;4', 'deduce;x-7;-2', 'abduce;x+5;3', 'abduce;2*x;-4', 'induce;x*x;-2,0,1,3,5', 'induce;x-3;6,2,-1,4,8'] as const).map((text) => {
  const [type, proposal] = [text.slice(0, 6) as ArithTaskType, text.slice(7)];
  const validation = validateProposal(type, proposal);
  if (!validation.valid) throw new Error(`seed task ${text}: ${validation.reason}`);
  return validation.task;
});
