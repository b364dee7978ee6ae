// The code domain's held-out evaluation tasks (Domain.heldOutTasks): the 200 code_o and 200 code_i tasks
// models/python-tiny was scored on (its held_out.json, copied to held-out-tasks.json beside this file), on programs
// that were never in its training text. A run draws `count` of the 400 by a seeded sample of the evaluation's seed
// alone, kept in the file's order (code_o and code_i alternate), so runs compared with each other share their tasks.

import { Streams } from '../../runtime/streams.js';
import { readPackageFile } from './package-files.js';
import type { CodeTask } from './tasks.js';

/** The whole set (held-out-tasks.json beside this file's source). */
const allTasks = (): CodeTask[] => (JSON.parse(readPackageFile('held-out-tasks.json')) as { tasks: CodeTask[] }).tasks;

let cached: CodeTask[] | null = null;

export function heldOutTasks(seed: number, count: number): CodeTask[] {
  cached ??= allTasks();
  if (count > cached.length) throw new RangeError(`field "evaluation.tasks": the python domain has ${cached.length} held-out tasks; ask for at most ${cached.length}`);
  const chosen = new Streams(seed).stream('held-out').sample(cached.length, count).sort((a, b) => a - b);
  return chosen.map((i) => cached![i]!);
}
