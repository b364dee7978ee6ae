// The code domain's held-out evaluation tasks (Domain.heldOutTasks): the 200 code_o and 200 code_i tasks
// models/python-tiny was scored on (its held_out.json, copied to held-out-tasks.json beside this file), on programs
// that were never in its training text. A run draws `count` of the 400 by a seeded sample of the evaluation's seed
// alone, kept in the file's order (code_o and code_i alternate), so runs compared with each other share their tasks.
// A part (validation or test, domain.ts's heldOutPart) is taken from the whole file first: 200 tasks, the code_o and
// code_i tasks of 100 programs, and the sample is drawn from it.

import { Streams } from '../../runtime/streams.js';
import { inHeldOutPart, type HeldOutPart } from '../domain.js';
import { readPackageFile } from './package-files.js';
import type { CodeTask } from './tasks.js';

/** The whole set (held-out-tasks.json beside this file's source). */
const allTasks = (): CodeTask[] => (JSON.parse(readPackageFile('held-out-tasks.json')) as { tasks: CodeTask[] }).tasks;

let cached: CodeTask[] | null = null;

export function heldOutTasks(seed: number, count: number, part: HeldOutPart = 'all'): CodeTask[] {
  cached ??= allTasks();
  const inPart = cached.filter((_, position) => inHeldOutPart(position, part));
  const which = part === 'all' ? '' : ` in its ${part} part`;
  if (count > inPart.length) throw new RangeError(`field "evaluation.tasks": the python domain has ${inPart.length} held-out tasks${which}; ask for at most ${inPart.length}`);
  const chosen = new Streams(seed).stream('held-out').sample(inPart.length, count).sort((a, b) => a - b);
  return chosen.map((i) => inPart[i]!);
}
