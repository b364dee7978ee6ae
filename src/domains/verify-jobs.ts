// The verifier's work, as plain data that crosses to worker threads: validate a teacher's proposal (run twice:
// a task is valid only if both runs agree, DESIGN.md's determinism check) or check a student's answer.

import { checkAnswer, validateProposal, type AnswerCheck, type ArithTask, type ArithTaskType, type Validation } from './arith/tasks.js';

export type VerifyJob = { kind: 'validate'; taskType: ArithTaskType; text: string } | { kind: 'check'; task: ArithTask; answer: string };
export type VerifyResult = { kind: 'validate'; validation: Validation } | { kind: 'check'; check: AnswerCheck };

export function verify(job: VerifyJob): VerifyResult {
  if (job.kind === 'check') return { kind: 'check', check: checkAnswer(job.task, job.answer) };
  const first = validateProposal(job.taskType, job.text);
  const second = validateProposal(job.taskType, job.text);
  if (JSON.stringify(first) !== JSON.stringify(second)) return { kind: 'validate', validation: { valid: false, reason: 'nondeterministic: two runs disagree' } };
  return { kind: 'validate', validation: first };
}
