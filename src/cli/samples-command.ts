// `populora samples DIR [--step N] [--member ID] [--type T] [--json]`: what the population said, without a browser:
// each proposal (teacher, task type, text, verdict, solve rate, reward), each answer (student, its task's teacher,
// the task, text, verdict, reward) and each evolution event of a run, from its event log (src/serve/samples.ts, the
// dashboard's index). A table, or JSON lines (one object per sample, `kind` first) that pandas reads with
// `pd.read_json(path, lines=True)`.
// --member keeps what the dashboard shows for a member: a teacher's proposals and the answers to its tasks; a
// student's answers and the proposals it was given.

import { existsSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import type { Command } from 'commander';
import { RunFolder } from '../serve/run-folder.js';
import type { AnswerSample, EvolutionSample, ProposalSample } from '../serve/samples.js';
import { runCommand, UsageError } from './run-command.js';
import { integer } from './integer-option.js';

type Sample = ProposalSample | AnswerSample | EvolutionSample;

interface SamplesOptions {
  step?: number;
  member?: string;
  type?: string;
  json?: boolean;
}

export async function samplesCommand(dir: string, options: SamplesOptions): Promise<void> {
  if (!existsSync(join(dir, 'scenario.json')) || !existsSync(join(dir, 'events.msgpack'))) throw new UsageError(`${dir}: not a run folder (it needs scenario.json and events.msgpack)`);
  const real = realpathSync(dir);
  const run = new RunFolder(dir, real, real, dir, () => 0);
  run.refresh();
  const index = run.samples();
  if (run.problem) throw new UsageError(run.problem);
  const steps = index.stepNumbers;
  if (options.step !== undefined && !steps.includes(options.step)) throw new UsageError(`--step ${options.step}: the log of ${dir} holds steps ${steps.length === 0 ? 'none' : `0 to ${steps.at(-1)}`}`);
  const members = [...new Set(steps.flatMap((s) => index.step(s)!.members.map((m) => m.id)))].sort();
  if (options.member !== undefined && !members.includes(options.member)) throw new UsageError(`--member ${options.member}: no such member in ${dir}; its members are ${members.join(', ')}`);
  const types = [...new Set(steps.flatMap((s) => index.step(s)!.proposals.map((p) => p.taskType)))].filter((t): t is string => t !== null).sort();
  if (options.type !== undefined && !types.includes(options.type)) throw new UsageError(`--type ${options.type}: no proposal of that type in ${dir}; its task types are ${types.join(', ')}`);

  const chosen = (options.step === undefined ? steps : [options.step]).flatMap((step) => selected(index.step(step)!, options));
  for (const note of index.notes) console.error(`note: ${note}`);
  if (options.json) {
    for (const sample of chosen) console.log(JSON.stringify(sample));
    return;
  }
  printTable(chosen);
}

/** A step's samples that the member and type keep: proposals, then answers, then evolution. */
function selected(step: NonNullable<ReturnType<RunFolder['step']>>, { member, type }: SamplesOptions): Sample[] {
  const proposals = step.proposals.filter((p) => (member === undefined || p.teacher === member || p.students.includes(member)) && (type === undefined || p.taskType === type));
  const answers = step.answers.filter((a) => (member === undefined || a.student === member || a.teacher === member) && (type === undefined || a.taskType === type));
  const evolution = type !== undefined ? [] : step.evolution.filter((e) => member === undefined || e.replaced.includes(member) || e.parents.some((p) => p.startsWith(`${member}.`)));
  return [...proposals, ...answers, ...evolution];
}

/**
 * Text from a run for a terminal: generated text is hostile, and a control character (ESC, CSI, a carriage return)
 * could rewrite what the terminal shows; each is written as its escape (\n, \u001b, ...) instead.
 */
export function terminalText(text: string | null | undefined): string {
  if (text === null || text === undefined) return '-';
  return text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, (c) => (c === '\n' ? '\\n' : c === '\t' ? '\\t' : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`));
}

const number = (x: number | null) => (x === null ? '-' : x.toFixed(2));
const taskText = (task: Record<string, unknown> | null) => (task === null ? '-' : Object.entries(task).filter(([k]) => k !== 'type').map(([k, v]) => `${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`).join('; '));

function printTable(samples: Sample[]): void {
  const rows = samples.map((s) => {
    if (s.kind === 'proposal') {
      const verdict = s.fault !== null ? `fault: ${s.fault}` : s.valid === null ? 'not judged' : s.valid ? `valid, solved ${s.answers > 0 ? `${s.correct}/${s.answers}` : '-'}` : `invalid: ${s.reason}`;
      return [String(s.step), 'proposal', String(s.requestId), s.teacher, s.students.join(' ') || '-', s.taskType ?? '-', verdict, number(s.reward), s.text, taskText(s.task)];
    }
    if (s.kind === 'answer') {
      const verdict = s.fault !== null ? `fault: ${s.fault}` : s.correct === null ? 'not checked' : s.correct ? 'correct' : `wrong: ${s.reason ?? ''}`;
      return [String(s.step), 'answer', String(s.requestId), s.teacher ?? '-', s.student, s.taskType ?? '-', verdict, number(s.reward), s.text, taskText(s.task)];
    }
    return [String(s.step), 'evolution', `slot ${s.slot}`, '-', '-', '-', `${s.operator} of ${s.parents.join(' + ')}`, '-', `${s.replaced.join(', ')} -> ${s.children.join(', ')}`, '-'];
  }).map((cells) => cells.map((c) => terminalText(c)));
  const head = ['step', 'kind', 'id', 'teacher', 'student', 'type', 'verdict', 'reward', 'text', 'task'];
  const widths = head.map((h, i) => (i >= 8 ? 0 : Math.min(40, Math.max(h.length, ...rows.map((r) => r[i]!.length)))));
  const line = (cells: string[]) => cells.map((c, i) => (i >= 8 ? c : c.length > widths[i]! ? `${c.slice(0, widths[i]! - 1)}…` : c.padEnd(widths[i]!))).join('  ');
  console.log(line(head));
  for (const row of rows) console.log(line(row));
  console.log(`${rows.length} samples`);
}

/** Registers `populora samples` (main.ts). */
export function addSamplesCommand(program: Command): void {
  program
    .command('samples')
    .description('a run\'s proposals, answers (with verdicts and rewards) and evolution events from its event log, as a table or JSON lines')
    .argument('<dir>', 'run folder')
    .option('--step <n>', 'only this step (default: every step)', integer('--step', 0))
    .option('--member <id>', 'only what concerns this member (a teacher\'s proposals and the answers to them; a student\'s answers and the tasks it got)')
    .option('--type <type>', 'only this task type (e.g. deduce, code_o)')
    .option('--json', 'JSON lines, one object per sample (pandas: pd.read_json(file, lines=True))')
    .action(runCommand(samplesCommand));
}
