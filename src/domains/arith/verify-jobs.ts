// The toy domain's verifier work, as plain data that crosses to worker threads: validate a teacher's proposal
// (run twice: a task is valid only if both runs agree, DESIGN.md's determinism check) or check a student's answer.

import type { VerifyJob, VerifyOutcome } from '../domain.js';
import { checkAnswer, taskMetrics, validateProposal, type ArithTask, type ArithTaskType } from './tasks.js';

export function verifyArith(job: VerifyJob): VerifyOutcome {
  if (job.kind === 'check') return { kind: 'check', check: checkAnswer(job.task as ArithTask, job.answer) };
  const first = validateProposal(job.taskType as ArithTaskType, job.text);
  const second = validateProposal(job.taskType as ArithTaskType, job.text);
  if (JSON.stringify(first) !== JSON.stringify(second)) return { kind: 'validate', validation: { valid: false, reason: 'nondeterministic: two runs disagree' } };
  return { kind: 'validate', validation: first.valid ? { ...first, metrics: taskMetrics(first.task) } : first };
}
