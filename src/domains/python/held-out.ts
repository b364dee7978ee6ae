// The code domain's held-out evaluation tasks (Domain.heldOutTasks): the 200 code_o and 200 code_i tasks
// models/python-tiny was scored on (its held_out.json, copied to held-out-tasks.json beside this file), on programs
// that were never in its training text. A run draws `count` of the 400 by a seeded sample of the evaluation's seed
// alone, kept in the file's order (code_o and code_i alternate), so runs compared with each other share their tasks.

import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Streams } from '../../runtime/streams.js';
import type { CodeTask } from './tasks.js';

const FILE = 'held-out-tasks.json';

/** The whole set; the file sits beside this file's source, also when run from dist/. */
function allTasks(): CodeTask[] {
  const here = dirname(fileURLToPath(import.meta.url));
  const path = [here, here.replace(/\/dist\/src\//, '/src/')].map((d) => join(d, FILE)).find(existsSync);
  if (!path) throw new Error(`${FILE} is missing beside ${here} (the package is incomplete)`);
  return (JSON.parse(readFileSync(path, 'utf8')) as { tasks: CodeTask[] }).tasks;
}

let cached: CodeTask[] | null = null;

export function heldOutTasks(seed: number, count: number): CodeTask[] {
  cached ??= allTasks();
  if (count > cached.length) throw new RangeError(`field "evaluation.tasks": the python domain has ${cached.length} held-out tasks; ask for at most ${cached.length}`);
  const chosen = new Streams(seed).stream('held-out').sample(cached.length, count).sort((a, b) => a - b);
  return chosen.map((i) => cached![i]!);
}
