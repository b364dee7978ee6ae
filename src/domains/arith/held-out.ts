// The arith domain's held-out evaluation tasks (Domain.heldOutTasks): a fixed set of deduce tasks drawn from their
// own seeded stream exactly as `populora pretrain` draws its held-out set (seed 1 gives the 200 tasks
// models/arith-tiny was scored on, none of them in its training text). The set depends on the seed alone, never
// on the run's seed, so runs compared with each other are scored on the same tasks. A part (validation or test,
// domain.ts's heldOutPart) keeps the stream's draws at that part's positions, until it holds `count` tasks: the
// first 100 validation and the first 100 test tasks of seed 1 split the 200 the model was scored on.

import { Streams } from '../../runtime/streams.js';
import { inHeldOutPart, type HeldOutPart } from '../domain.js';
import { randomTask } from './corpus.js';
import type { ArithTask } from './tasks.js';

/** The pretraining corpus's expressions: depth at most 2, x in -9..9 (scenarios/pretrain/arith-tiny.yaml). */
const HELD_OUT_CORPUS = { maxDepth: 2, inputAbs: 9 };

export function heldOutTasks(seed: number, count: number, part: HeldOutPart = 'all'): ArithTask[] {
  const stream = new Streams(seed).stream('held-out');
  const tasks: ArithTask[] = [];
  for (let position = 0; tasks.length < count; position++) {
    const task = randomTask(stream, 'deduce', HELD_OUT_CORPUS);
    if (inHeldOutPart(position, part)) tasks.push(task);
  }
  return tasks;
}
