// The arith domain's held-out evaluation tasks (Domain.heldOutTasks): a fixed set of deduce tasks drawn from their
// own seeded stream exactly as `populora pretrain` draws its held-out set (seed 1 gives the 200 tasks
// models/arith-tiny was scored on, none of them in its training text). The set depends on the seed alone, never
// on the run's seed, so runs compared with each other are scored on the same tasks.

import { Streams } from '../../runtime/streams.js';
import { randomTask } from './corpus.js';
import type { ArithTask } from './tasks.js';

/** The pretraining corpus's expressions: depth at most 2, x in -9..9 (scenarios/pretrain/arith-tiny.yaml). */
const HELD_OUT_CORPUS = { maxDepth: 2, inputAbs: 9 };

export function heldOutTasks(seed: number, count: number): ArithTask[] {
  const stream = new Streams(seed).stream('held-out');
  return Array.from({ length: count }, () => randomTask(stream, 'deduce', HELD_OUT_CORPUS));
}
