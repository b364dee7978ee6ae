// `populora verify`: one code-domain task through the sandbox, the verdict printed as JSON. For inspecting tasks
// by hand: a verdict, valid or not, exits 0; only bad usage (a missing file, a missing option) exits non-zero.

import { existsSync, readFileSync } from 'node:fs';
import { PythonExecutor } from '../domains/python/executor.js';
import { CODE_TASK_TYPES, checkAnswer, proposalText, validateProposal, type CodeTask, type CodeTaskType } from '../domains/python/tasks.js';
import { UsageError } from './run-command.js';

export interface VerifyOptions {
  type: CodeTaskType;
  program: string; // a file
  input: string[];
  output?: string;
  answer?: string; // text, or @FILE
  fuel: number;
}

function readText(file: string, what: string): string {
  if (!existsSync(file)) throw new UsageError(`${what} ${file} does not exist`);
  return readFileSync(file, 'utf8');
}

export async function verifyCommand(options: VerifyOptions): Promise<void> {
  if (!CODE_TASK_TYPES.includes(options.type)) throw new UsageError(`--type must be one of ${CODE_TASK_TYPES.join(', ')}, got "${options.type}"`);
  const program = readText(options.program, '--program').trimEnd();
  const answer = options.answer?.startsWith('@') ? readText(options.answer.slice(1), '--answer') : options.answer;
  if (options.input.length === 0 && !(options.type === 'code_i' && options.output !== undefined)) {
    throw new UsageError(options.type === 'code_i' ? 'code_i needs --input (the output is then computed) or --output' : `${options.type} needs --input${options.type === 'code_f' ? ' (4 or more times)' : ''}`);
  }
  const python = await PythonExecutor.load();
  try {
    console.log(JSON.stringify(verdict(python, options, program, answer), null, 2));
  } finally {
    python.close();
  }
}

function verdict(python: PythonExecutor, options: VerifyOptions, program: string, answer: string | undefined) {
  let task: CodeTask;
  let fuel: number;
  if (options.input.length === 0) {
    // code_i from a given output: the task is the program and that output; only the answer is run.
    const check = python.check(program);
    if (!check.ok) return { valid: false, correct: null, reason: `${check.reason}: ${check.detail}`, fuel: 0 };
    task = { type: 'code_i', program, inputs: [], outputs: [options.output!], inputTypes: [], outputTypes: [] };
    fuel = 0;
  } else {
    const validation = validateProposal(python, options.type, proposalText(program, options.input), options.fuel);
    if (!validation.valid) return { valid: false, correct: null, reason: validation.reason, fuel: null };
    task = validation.task;
    fuel = validation.fuelUsed;
    if (options.output !== undefined && !python.sameValue(options.output, task.outputs[0]!)) {
      return { valid: true, correct: null, reason: `the program's output ${task.outputs[0]} differs from --output ${options.output}`, fuel, task };
    }
  }
  if (answer === undefined) return { valid: true, correct: null, reason: 'valid', fuel, task };
  const check = checkAnswer(python, task, answer, options.fuel);
  return { valid: true, correct: check.correct, reason: check.reason, fuel, task };
}
