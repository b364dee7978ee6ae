// The code domain's three task types, in Absolute Zero Reasoner's formats:
//   code_o  program + input        → predict the output  (compared as Python values, "[1,2]" equals "[1, 2]")
//   code_i  program + output       → any input whose output equals it
//   code_f  input/output pairs     → a program that matches them all (half shown, half held out)
// A teacher writes a program in a fenced block and its inputs in ```input blocks (or as f(...) lines); a code_f
// teacher may add a ```message for the students (AZR's). Where a text holds AZR's <answer> tags, only the answer
// is read (what a <think> before it drafted does not count). Parsing is lenient, and what cannot be parsed is a
// format error, recorded as the proposal's invalid reason. The prompts are in prompts.ts.

import type { AnswerCheck, TaskMetrics } from '../domain.js';
import { DEFAULT_FUEL, type PythonExecutor, type ProgramMetrics } from './executor.js';

export const CODE_TASK_TYPES = ['code_o', 'code_i', 'code_f'] as const;
export type CodeTaskType = (typeof CODE_TASK_TYPES)[number];

/** Printable ASCII, newline and tab: what Python source and literals are written in (a preset's tokenizer). */
export const PYTHON_ALPHABET = Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)).join('') + '\n\t';

/** A validated task: the program, its inputs (argument lists as text) and the outputs' reprs. */
export interface CodeTask {
  type: CodeTaskType;
  program: string;
  inputs: string[];
  outputs: string[];
  inputTypes: string[];
  outputTypes: string[];
  message?: string; // code_f: the teacher's note to the students (AZR's), when it wrote one
}

export const FUNCTION_PAIRS = { min: 4, max: 8 }; // code_f: inputs a proposal must give
export const shownPairs = (task: CodeTask) => Math.ceil(task.inputs.length / 2);

export type CodeValidation = { valid: true; task: CodeTask; fuelUsed: number; metrics: TaskMetrics } | { valid: false; reason: string };

// ---- model text → parts ------------------------------------------------------------------------------------

const FENCE = /```[ \t]*([A-Za-z_]*)[ \t]*\n([\s\S]*?)```/g;

/** The part of a model's text that answers: the last <answer>…</answer> (AZR's), else what follows </think>, else all. */
export function answerOf(text: string): string {
  const start = text.lastIndexOf('<answer>');
  if (start >= 0) {
    const body = text.slice(start + '<answer>'.length);
    const end = body.indexOf('</answer>');
    return end < 0 ? body : body.slice(0, end);
  }
  const thought = text.lastIndexOf('</think>');
  return thought < 0 ? text : text.slice(thought + '</think>'.length);
}

function fencedBlocks(text: string): Array<{ tag: string; body: string }> {
  return [...text.matchAll(FENCE)].map((m) => ({ tag: m[1]!.toLowerCase(), body: m[2]!.replace(/\s+$/, '') }));
}

/** The program: a fenced python (or untagged) block defining f, else the text from "def f" on. */
export function parseProgram(model: string): string | null {
  const text = answerOf(model);
  const block = fencedBlocks(text).find((b) => (b.tag === 'python' || b.tag === 'py' || b.tag === '') && /\bdef f\s*\(/.test(b.body));
  if (block) return block.body;
  const start = text.search(/^def f\s*\(/m);
  if (start < 0) return null;
  return text.slice(start).split('```')[0]!.replace(/\s+$/, '');
}

/** An argument list as a task keeps it: `f('ab', 3)` and `'ab', 3` are the same input. */
const argumentsOf = (text: string) => text.trim().replace(/^f\(([\s\S]*)\)$/, '$1').trim();

/** Inputs: ```input blocks, else lines of the form f(...) outside the program. */
export function parseInputs(model: string): string[] {
  const text = answerOf(model);
  const blocks = fencedBlocks(text).filter((b) => b.tag === 'input').map((b) => argumentsOf(b.body));
  if (blocks.length > 0) return blocks;
  return text.split('\n').map((line) => line.trim()).filter((line) => /^f\(.*\)$/.test(line)).map(argumentsOf);
}

/** A single answer value (code_o's output, code_i's input): its tagged block, else the whole text. */
export function parseValue(model: string, tag: 'output' | 'input'): string {
  const text = answerOf(model);
  const value = (fencedBlocks(text).find((b) => b.tag === tag)?.body ?? text).trim();
  return tag === 'input' ? argumentsOf(value) : value;
}

/** A code_f teacher's message to the students: its ```message block, if any. */
export function parseMessage(model: string): string | undefined {
  return fencedBlocks(answerOf(model)).find((b) => b.tag === 'message')?.body.trim() || undefined;
}

// ---- a proposal's text ------------------------------------------------------------------------------------------

const fence = (tag: string, body: string) => `\`\`\`${tag}\n${body}\n\`\`\``;

/** A proposal written the way teachers are asked to: the program's block, then one input block per input. */
export function proposalText(program: string, inputs: readonly string[]): string {
  return [fence('python', program), ...inputs.map((input) => fence('input', input))].join('\n');
}

// ---- validation and checks -----------------------------------------------------------------------------------

const VALIDATION_PERTURB_SEED = 7919;

export function taskMetrics(type: CodeTaskType, program: ProgramMetrics, inputTypes: string[], outputTypes: string[]): TaskMetrics {
  const types = [...new Set([...inputTypes.map((t) => `in:${t}`), ...outputTypes.map((t) => `out:${t}`)])].sort();
  const band = program.cyclomatic <= 1 ? 'straight' : program.cyclomatic <= 3 ? 'branching' : 'complex';
  return { size: program.nodes, depth: program.depth, cyclomatic: program.cyclomatic, operators: types, signature: `${type}:${types.join(',')}:${band}`, program: program.hash };
}

/**
 * A teacher's proposal → a task: parsed, run twice (the second time with the allocator moved), both runs equal.
 * `given` is what the teacher's prompt supplied of it (a program to write inputs for): its program is the task's.
 */
export function validateProposal(executor: PythonExecutor, type: CodeTaskType, text: string, fuel = DEFAULT_FUEL, given = ''): CodeValidation {
  const program = parseProgram(given) ?? parseProgram(text);
  if (program === null) return { valid: false, reason: 'format: no program defining f (a ```python block, or a line starting "def f(")' };
  const inputs = [...new Set(parseInputs(text))];
  if (inputs.length === 0) return { valid: false, reason: 'format: no input (an ```input block, or a line "f(...)")' };
  const wanted = type === 'code_f' ? inputs.slice(0, FUNCTION_PAIRS.max) : inputs.slice(0, 1);
  if (wanted.length < (type === 'code_f' ? FUNCTION_PAIRS.min : 1)) return { valid: false, reason: `format: code_f needs ${FUNCTION_PAIRS.min} distinct inputs, got ${wanted.length}` };
  // Two runs from the snapshot, the second with the allocator moved: a check will run the program as the first did.
  const first = executor.run(program, wanted, fuel);
  const second = executor.run(program, wanted, fuel, VALIDATION_PERTURB_SEED);
  if (!first.ok) return { valid: false, reason: `${first.reason}: ${first.detail}` };
  if (JSON.stringify(first) !== JSON.stringify(second)) return { valid: false, reason: 'nondeterministic: two runs of the program disagree' };
  const message = type === 'code_f' ? parseMessage(text) : undefined;
  const task: CodeTask = { type, program, inputs: wanted, outputs: first.outputs, inputTypes: first.inputTypes, outputTypes: first.outputTypes, ...(message === undefined ? {} : { message }) };
  return { valid: true, task, fuelUsed: first.fuel, metrics: taskMetrics(type, first.metrics, first.inputTypes, first.outputTypes) };
}

/** A student's answer to a validated task. */
export function checkAnswer(executor: PythonExecutor, task: CodeTask, text: string, fuel = DEFAULT_FUEL): AnswerCheck {
  if (task.type === 'code_o') {
    const value = parseValue(text, 'output');
    return executor.sameValue(value, task.outputs[0]!) ? { correct: true, reason: 'correct' } : { correct: false, reason: `wrong output ${value.slice(0, 60)}` };
  }
  if (task.type === 'code_i') {
    const input = parseValue(text, 'input');
    const result = executor.run(task.program, [input], fuel);
    if (!result.ok) return { correct: false, reason: `${result.reason}: ${result.detail}` };
    return executor.sameValue(result.outputs[0]!, task.outputs[0]!) ? { correct: true, reason: 'correct' } : { correct: false, reason: `f(${input.slice(0, 40)}) = ${result.outputs[0]!.slice(0, 40)}, not ${task.outputs[0]!.slice(0, 40)}` };
  }
  const program = parseProgram(text);
  if (program === null) return { correct: false, reason: 'format: no program defining f' };
  const result = executor.run(program, task.inputs, fuel);
  if (!result.ok) return { correct: false, reason: `${result.reason}: ${result.detail}` };
  // The student's outputs (read out of its interpreter, one per input) and the gold ones, in their shared form.
  const forms = executor.canonical([...result.outputs, ...task.outputs]);
  const miss = result.outputs.findIndex((_, i) => forms[i] === null || forms[i] !== forms[result.outputs.length + i]);
  if (miss < 0) return { correct: true, reason: 'correct' };
  return { correct: false, reason: `${miss < shownPairs(task) ? 'shown' : 'held-out'} pair f(${task.inputs[miss]!.slice(0, 40)}) gives ${result.outputs[miss]!.slice(0, 40)}, not ${task.outputs[miss]!.slice(0, 40)}` };
}

/**
 * The reference buffer's start: hand-written tasks in AZR's style, outputs worked out by hand (a test checks them
 * against the sandbox). A teacher's buffer then fills with its own valid proposals.
 */
export const SEED_TASKS: readonly CodeTask[] = [
  { type: 'code_o', program: 'def f(numbers, k):\n    return sorted(numbers)[-k:]', inputs: ['[5, 1, 4, 2], 2'], outputs: ['[4, 5]'], inputTypes: ['list[int], int'], outputTypes: ['list[int]'] },
  {
    type: 'code_i',
    program: 'def f(text):\n    counts = {}\n    for ch in text:\n        counts[ch] = counts.get(ch, 0) + 1\n    return max(counts, key=counts.get)',
    inputs: ["'banana'"],
    outputs: ["'a'"],
    inputTypes: ['str'],
    outputTypes: ['str'],
  },
  {
    type: 'code_f',
    program: 'def f(n):\n    total = 0\n    while n > 0:\n        total += n % 10\n        n //= 10\n    return total',
    inputs: ['7', '42', '305', '9999'],
    outputs: ['7', '6', '8', '36'],
    inputTypes: ['int', 'int', 'int', 'int'],
    outputTypes: ['int', 'int', 'int', 'int'],
  },
];
