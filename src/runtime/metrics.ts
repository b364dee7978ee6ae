// A step's metrics, summarised from the actors' reports: solve rates per member and sub-population, teacher
// reward, task validity and complexity, problem-space coverage (distinct (task type, expression shape) bins seen
// so far), ratings, who met whom, the training loss and the evolutionary replacements. One JSON line per step;
// with a clock (`populora run`), also the step's wall-clock `timing`, which replay does not compare.

import { mean } from '../../actors/protocol.js';
import type { Report } from './world.js';

interface TeacherReport {
  id: string;
  subpopulation: number;
  proposals: number; // judged ones: faults excluded
  valid: number;
  faults: number;
  rewardMean: number;
  tasks: Array<{ type: string; size: number; depth: number; signature: string; program?: string; solveRate: number | null }>;
  invalidReasons: string[];
}

interface StudentReport {
  id: string;
  subpopulation: number;
  tasks: number;
  answers: number;
  correct: number;
  faults: number;
  byTeacher: Record<string, { correct: number; answers: number }>;
}

export interface StepMetrics {
  step: number;
  solveRate: number | null; // over every answer of the step (null: no task was matched)
  teacherReward: number;
  validity: number; // share of proposals that were valid tasks
  taskSize: number | null; // mean AST nodes of the valid tasks
  taskDepth: number | null;
  extremeSolveRateShare: number | null; // share of matched tasks solved by all or by none (no learning signal)
  coverage: number; // distinct bins seen up to this step
  newBins: number;
  distinctPrograms: number | null; // distinct programs (normalised ASTs) among valid tasks up to this step, where tasks are programs
  verifierFaults: number; // proposals and answers the verifier could not judge (infrastructure faults, dropped)
  trainLoss: number | null;
  subpopulations: Array<{ subpopulation: number; solveRate: number | null; teacherReward: number | null }>;
  members: Record<string, { rating: number; rewardMean?: number; solveRate?: number | null; validity?: number }>;
  matches: Array<{ teacher: string; student: string; tasks: number; correct: number; answers: number }>; // who met whom, how it went
  invalidReasons: Record<string, number>;
  evolution: unknown[];
  timing?: StepTiming; // wall clock: differs from run to run, so outside what replay compares (withoutTiming)
}

/** Where a step's wall-clock time went (step-timing.ts). */
export interface StepTiming {
  stepMs: number;
  engineMs: number; // in the engine's batches (generation, training, evolution)
  verifierMs: number; // in the verifier's batches
  verifierShare: number; // verifierMs / stepMs
  validations: number; // proposals validated
  validationsPerSecond: number | null; // per second of the verifier's time on them (null: none)
  checks: number; // answers checked
  checksPerSecond: number | null;
}

/** A metrics record (a metrics.jsonl line, or summary.json whose `last` is one) without its wall-clock timing. */
export function withoutTiming(value: unknown): unknown {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
  const { timing: _, ...rest } = value as Record<string, unknown>;
  return 'last' in rest ? { ...rest, last: withoutTiming(rest.last) } : rest;
}

const ratio = (a: number, b: number) => (b === 0 ? null : a / b);
const meanOrNull = (values: number[]) => (values.length === 0 ? null : mean(values));

export function summarizeStep(step: number, reports: readonly Report[], coverage: Set<string>): StepMetrics {
  const of = <T>(kind: string) => reports.filter((r) => r.kind === kind).map((r) => r.data as T);
  const teachers = of<TeacherReport>('teacher');
  const students = of<StudentReport>('student');
  const ratings = of<Record<string, number>>('ratings').at(-1) ?? {};
  const tasks = teachers.flatMap((t) => t.tasks);
  // One set holds both kinds of bins (it is what a checkpoint saves): coverage bins, and "program:" hashes.
  const bins = (set: Set<string>) => [...set].filter((key) => !key.startsWith('program:')).length;
  const before = bins(coverage);
  tasks.forEach((t) => coverage.add(t.signature));
  tasks.forEach((t) => t.program && coverage.add(`program:${t.program}`));
  const programs = coverage.size - bins(coverage);
  const matched = tasks.filter((t) => t.solveRate !== null);
  const members: StepMetrics['members'] = {};
  for (const t of teachers) members[t.id] = { rating: ratings[t.id] ?? 0, rewardMean: t.rewardMean, validity: t.proposals === 0 ? 0 : t.valid / t.proposals };
  for (const s of students) members[s.id] = { rating: ratings[s.id] ?? 0, solveRate: ratio(s.correct, s.answers) };
  const subpopulations = [...new Set([...teachers, ...students].map((m) => m.subpopulation))].sort((a, b) => a - b).map((sub) => {
    const st = students.filter((s) => s.subpopulation === sub);
    const te = teachers.filter((t) => t.subpopulation === sub);
    return { subpopulation: sub, solveRate: ratio(st.reduce((n, s) => n + s.correct, 0), st.reduce((n, s) => n + s.answers, 0)), teacherReward: meanOrNull(te.map((t) => t.rewardMean)) };
  });
  const pairCounts = new Map<string, number>();
  for (const pair of of<Array<{ teacher: string; student: string }>>('matches').flat()) pairCounts.set(`${pair.teacher} ${pair.student}`, (pairCounts.get(`${pair.teacher} ${pair.student}`) ?? 0) + 1);
  const invalidReasons: Record<string, number> = {};
  for (const reason of teachers.flatMap((t) => t.invalidReasons)) invalidReasons[reason] = (invalidReasons[reason] ?? 0) + 1;
  const train = of<{ loss: number }>('train').at(-1);
  return {
    step,
    solveRate: ratio(students.reduce((n, s) => n + s.correct, 0), students.reduce((n, s) => n + s.answers, 0)),
    teacherReward: mean(teachers.map((t) => t.rewardMean)),
    validity: ratio(tasks.length, teachers.reduce((n, t) => n + t.proposals, 0)) ?? 0,
    taskSize: meanOrNull(tasks.map((t) => t.size)),
    taskDepth: meanOrNull(tasks.map((t) => t.depth)),
    extremeSolveRateShare: ratio(matched.filter((t) => t.solveRate === 0 || t.solveRate === 1).length, matched.length),
    coverage: bins(coverage),
    newBins: bins(coverage) - before,
    distinctPrograms: programs > 0 ? programs : null,
    verifierFaults: [...teachers, ...students].reduce((n, m) => n + (m.faults ?? 0), 0),
    trainLoss: train?.loss ?? null,
    subpopulations,
    members,
    matches: [...pairCounts].map(([key, tasks]) => {
      const [teacher, student] = key.split(' ') as [string, string];
      const tally = students.find((s) => s.id === student)?.byTeacher[teacher] ?? { correct: 0, answers: 0 };
      return { teacher, student, tasks, ...tally };
    }),
    invalidReasons,
    evolution: of<unknown[]>('evolution').flat(),
  };
}
