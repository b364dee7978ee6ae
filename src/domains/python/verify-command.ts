// `populora verify`: one code-domain task through the sandbox, the verdict printed as JSON. For inspecting tasks
// by hand. It takes the path a run takes: the same sandbox process, fence and wall-clock guard (one worker of the
// verifier pool), the same jobs (validate, then check), so it gives the verdict a run would give.
// Exit codes: 0 for a verdict, valid or not; 3 for an infrastructure fault (the guard fired, the interpreter died
// twice), still with its JSON; 1 for bad usage (a missing file, a missing option). The JSON ends with `poolMs`: the
// wall-clock time the jobs held the sandbox process (reporting only: a verdict never depends on it).

import { existsSync, readFileSync } from 'node:fs';
import { UsageError } from '../../cli/usage-error.js';
import type { DomainCommand, VerifyJob, VerifyOutcome } from '../domain.js';
import { DEFAULT_FUEL } from './executor.js';
import { CODE_TASK_TYPES, proposalText, type CodeTask, type CodeTaskType } from './tasks.js';
import { DEFAULT_WALL_CLOCK_GUARD_MS, PythonVerifierPool } from './verifier-pool.js';

export interface VerifyOptions {
  type: CodeTaskType;
  program: string; // a file
  input: string[];
  output?: string;
  answer?: string; // text, or @FILE
  fuel: number;
  guardMs: number;
}

const EXIT_FAULT = 3;

/** The command as the domain adds it to `populora` (src/cli/main.ts registers every domain's commands). */
export const VERIFY_COMMAND: DomainCommand = {
  name: 'verify',
  description: 'run one code-domain task in the Python sandbox and print the verdict as JSON (valid, correct, reason, fuel)',
  options: [
    { flags: '--type <type>', description: 'code_o | code_i | code_f', required: true },
    { flags: '--program <file>', description: 'Python source defining f', required: true },
    { flags: '--input <args>', description: 'an argument list, e.g. "[1, 2], 3" (code_f: give it 4 or more times)', repeatable: true },
    { flags: '--output <value>', description: "code_i: the output to reach (without --input); otherwise checked against the program's output" },
    { flags: '--answer <text>', description: "a student's answer: code_o an output, code_i an input, code_f a program (@FILE reads a file)" },
    { flags: '--fuel <steps>', description: 'steps (lines and jumps) the program may take', integer: true, default: DEFAULT_FUEL },
    { flags: '--guard-ms <ms>', description: 'wall-clock safety net per job: past it the job is an infrastructure fault (exit 3), never a verdict', integer: true, default: DEFAULT_WALL_CLOCK_GUARD_MS },
  ],
  run: (options) => verifyCommand(options as unknown as VerifyOptions),
};

function readText(file: string, what: string): string {
  if (!existsSync(file)) throw new UsageError(`${what} ${file} does not exist`);
  return readFileSync(file, 'utf8');
}

export async function verifyCommand(options: VerifyOptions): Promise<void> {
  if (!CODE_TASK_TYPES.includes(options.type)) throw new UsageError(`--type must be one of ${CODE_TASK_TYPES.join(', ')}, got "${options.type}"`);
  const program = readText(options.program, '--program').trimEnd();
  const answer = options.answer?.startsWith('@') ? readText(options.answer.slice(1), '--answer') : options.answer;
  const fromOutput = options.input.length === 0 && options.type === 'code_i' && options.output !== undefined;
  if (options.input.length === 0 && !fromOutput) {
    throw new UsageError(options.type === 'code_i' ? 'code_i needs --input (the output is then computed) or --output' : `${options.type} needs --input${options.type === 'code_f' ? ' (4 or more times)' : ''}`);
  }
  if (fromOutput && answer === undefined) throw new UsageError('code_i with --output and no --input needs --answer (an input to check)');
  const pool = new PythonVerifierPool(1, { fuel: options.fuel, wallClockGuardMs: options.guardMs });
  try {
    const jobs = new Jobs(pool);
    const result = await verdict(jobs, options, program, answer);
    console.log(JSON.stringify({ ...result, poolMs: Math.round(jobs.poolMs) }, null, 2));
    if ('fault' in result) process.exitCode = EXIT_FAULT;
  } finally {
    await pool.close();
  }
}

/** The pool's jobs one at a time; a fault ends the verdict. */
class Jobs {
  poolMs = 0; // what the jobs cost the pool, together

  constructor(private readonly pool: PythonVerifierPool) {}

  async validate(type: CodeTaskType, text: string) {
    return (await this.one({ kind: 'validate', taskType: type, text })) as Extract<VerifyOutcome, { kind: 'validate' }>;
  }

  async check(task: CodeTask, answer: string) {
    return (await this.one({ kind: 'check', task, answer })) as Extract<VerifyOutcome, { kind: 'check' }>;
  }

  private async one(job: VerifyJob): Promise<VerifyOutcome> {
    const [outcome] = await this.pool.verify([job]);
    this.poolMs += this.pool.jobTimes[0]!;
    if (outcome!.kind === 'fault') throw new Fault(outcome!.detail);
    return outcome!;
  }
}

class Fault extends Error {}

async function verdict(jobs: Jobs, options: VerifyOptions, program: string, answer: string | undefined) {
  try {
    return await verdictOf(jobs, options, program, answer);
  } catch (error) {
    if (error instanceof Fault) return { valid: null, correct: null, reason: error.message, fault: true };
    throw error;
  }
}

async function verdictOf(jobs: Jobs, options: VerifyOptions, program: string, answer: string | undefined) {
  if (options.input.length === 0) {
    // code_i from a given output: the task is the program and that output; only the answer is run, so the task
    // itself is not validated.
    const task: CodeTask = { type: 'code_i', program, inputs: [], outputs: [options.output!], inputTypes: [], outputTypes: [] };
    const { check } = await jobs.check(task, answer!);
    return { valid: null, correct: check.correct, reason: check.reason, fuel: null, task };
  }
  const { validation } = await jobs.validate(options.type, proposalText(program, options.input));
  if (!validation.valid) return { valid: false, correct: null, reason: validation.reason, fuel: null };
  const task = validation.task as CodeTask;
  const fuel = validation.fuelUsed;
  if (options.output !== undefined) {
    const firstPair: CodeTask = { ...task, type: 'code_o', inputs: task.inputs.slice(0, 1), outputs: task.outputs.slice(0, 1) };
    const { check } = await jobs.check(firstPair, options.output);
    if (!check.correct) return { valid: true, correct: null, reason: `the program's output ${task.outputs[0]} differs from --output ${options.output}`, fuel, task };
  }
  if (answer === undefined) return { valid: true, correct: null, reason: 'valid', fuel, task };
  const { check } = await jobs.check(task, answer);
  return { valid: true, correct: check.correct, reason: check.reason, fuel, task };
}
