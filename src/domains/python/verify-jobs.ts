// The code domain's verifier work, as plain data that crosses to the sandbox processes: validate a teacher's
// proposal (run twice, tasks.ts) or check a student's answer. Every run and comparison starts from the interpreter's
// state after load (executor.ts), so no job can change another's verdict.

import type { VerifyJob, VerifyOutcome } from '../domain.js';
import type { PythonExecutor } from './executor.js';
import { checkAnswer, validateProposal, type CodeTask, type CodeTaskType } from './tasks.js';

export function verifyCode(python: PythonExecutor, job: VerifyJob, fuel: number): VerifyOutcome {
  if (job.kind === 'check') return { kind: 'check', check: checkAnswer(python, job.task as CodeTask, job.answer, fuel) };
  return { kind: 'validate', validation: validateProposal(python, job.taskType as CodeTaskType, job.text, fuel, job.given) };
}
