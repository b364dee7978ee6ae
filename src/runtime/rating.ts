// Elo-style ratings of teachers and students. One match = one (task, student) pair; the student's score is the
// fraction of its answers that were correct (1: it solved the task, a win; 0: a loss). Zero-sum: what the student
// gains the teacher loses.   E = 1 / (1 + 10^((R_teacher - R_student) / 400)),  ΔR_student = k·(score - E)

import { expectedSolveRate, type MemberView } from '../matchmaking/policy.js';

export interface RatingChange {
  student: number;
  teacher: number;
}

export function eloUpdate(student: MemberView, teacher: MemberView, score: number, k: number): RatingChange {
  if (!(score >= 0 && score <= 1)) throw new RangeError(`a match score must be in [0, 1], got ${score}`);
  const delta = k * (score - expectedSolveRate(student, teacher));
  return { student: student.rating + delta, teacher: teacher.rating - delta };
}
