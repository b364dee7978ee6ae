// A step's metrics, summarised from the actors' reports: solve rates per member and sub-population, teacher
// reward, task validity and complexity, problem-space coverage (distinct (task type, expression shape) bins seen
// so far) and its finer companions (distinct expressions seen so far; the entropy of the step's tasks over the
// bins), ratings, who met whom, the training loss, the evolutionary replacements and, at evaluation steps, the
// held-out solve rates. One JSON line per step; with a clock (`populora run`), also the step's wall-clock `timing`,
// which replay does not compare.

import { mean } from '../../actors/protocol.js';
import type { EvaluationReport } from '../../actors/evaluator.js';
import type { Task } from '../domains/domain.js';
import type { Report } from '../runtime/world.js';

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
  members: Record<string, { rating: number; sigma?: number; rewardMean?: number; solveRate?: number | null; validity?: number }>; // sigma: TrueSkill's
  matches: Array<{ teacher: string; student: string; tasks: number; correct: number; answers: number }>; // who met whom, how it went
  invalidReasons: Record<string, number>;
  evolution: unknown[];
  distinctExpressions: number | null; // arith: distinct (task type, canonical expression) among valid tasks up to this step
  taskEntropy: number | null; // bits: the entropy of this step's valid tasks over the coverage bins
  heldOut: HeldOutMetrics | null; // at evaluation steps
  timing?: StepTiming; // wall clock: differs from run to run, so outside what replay compares (withoutTiming)
}

/** Where a step's wall-clock time went (step-timing.ts). */
export interface StepTiming {
  stepMs: number;
  engineMs: number; // in the engine's batches (generation, training, evolution)
  generateMs: number; // of which in its generation (proposals, answers, evaluations)
  trainMs: number; // in its policy-gradient update
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

/** The held-out evaluation (actors/evaluator.ts): each member's greedy solve rate on tasks never proposed. */
export interface HeldOutMetrics {
  solveRate: number | null; // mean over the students
  best: number | null; // the best student's
  solveRateAllTasks: number | null; // mean over the students, on the whole set (proposed tasks too): the same tasks in every run
  tasks: number; // scored (the held-out set less the tasks proposed during the run)
  excluded: number;
  members: Record<string, number | null>;
}

/** Shannon entropy in bits of the distribution that `counts` make. */
export function entropyBits(counts: Iterable<number>): number {
  const values = [...counts].filter((c) => c > 0);
  const total = values.reduce((a, b) => a + b, 0);
  return values.reduce((h, c) => h - (c / total) * Math.log2(c / total), 0);
}

/** The held-out scores of this step's evaluation, if there was one. */
function heldOutMetrics(report: EvaluationReport | undefined): HeldOutMetrics | null {
  if (!report) return null;
  const ofStudents = (get: (m: EvaluationReport['members'][string]) => number | null) => Object.values(report.members).filter((m) => m.role === 'student').map(get).filter((r): r is number => r !== null);
  const [students, onAll] = [ofStudents((m) => m.solveRate), ofStudents((m) => m.solveRateAllTasks)];
  return {
    solveRate: students.length === 0 ? null : mean(students),
    best: students.length === 0 ? null : Math.max(...students),
    solveRateAllTasks: onAll.length === 0 ? null : mean(onAll),
    tasks: report.tasks,
    excluded: report.excluded,
    members: Object.fromEntries(Object.entries(report.members).map(([id, m]) => [id, m.solveRate])),
  };
}

const ratio = (a: number, b: number) => (b === 0 ? null : a / b);
const meanOrNull = (values: number[]) => (values.length === 0 ? null : mean(values));

export function summarizeStep(step: number, reports: readonly Report[], coverage: Set<string>): StepMetrics {
  const of = <T>(kind: string) => reports.filter((r) => r.kind === kind).map((r) => r.data as T);
  const teachers = of<TeacherReport>('teacher');
  const students = of<StudentReport>('student');
  const ratings = of<Record<string, number>>('ratings').at(-1) ?? {};
  const sigmas = of<Record<string, number>>('rating-sigmas').at(-1);
  const tasks = teachers.flatMap((t) => t.tasks);
  // One set holds every kind of key (it is what a checkpoint saves): coverage bins, "program:" hashes and
  // "expr:" expressions.
  const count = (set: Set<string>, prefix: string | null) => [...set].filter((key) => (prefix === null ? !key.startsWith('program:') && !key.startsWith('expr:') : key.startsWith(prefix))).length;
  const bins = (set: Set<string>) => count(set, null);
  const before = bins(coverage);
  tasks.forEach((t) => coverage.add(t.signature));
  tasks.forEach((t) => t.program && coverage.add(`program:${t.program}`));
  const programs = count(coverage, 'program:');
  const offered = of<Task[]>('tasks').flat();
  offered.forEach((task) => 'expr' in task && coverage.add(`expr:${task.type}:${task.expr}`));
  const expressions = count(coverage, 'expr:');
  const binCounts = new Map<string, number>();
  tasks.forEach((t) => binCounts.set(t.signature, (binCounts.get(t.signature) ?? 0) + 1));
  const matched = tasks.filter((t) => t.solveRate !== null);
  const members: StepMetrics['members'] = {};
  const skill = (id: string) => (sigmas ? { rating: ratings[id] ?? 0, sigma: sigmas[id] } : { rating: ratings[id] ?? 0 });
  for (const t of teachers) members[t.id] = { ...skill(t.id), rewardMean: t.rewardMean, validity: t.proposals === 0 ? 0 : t.valid / t.proposals };
  for (const s of students) members[s.id] = { ...skill(s.id), solveRate: ratio(s.correct, s.answers) };
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
    distinctExpressions: expressions > 0 ? expressions : null,
    taskEntropy: tasks.length === 0 ? null : entropyBits(binCounts.values()),
    heldOut: heldOutMetrics(of<EvaluationReport>('evaluation').at(-1)),
  };
}
