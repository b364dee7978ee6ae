// The held-out evaluation's tasks: a fixed set of deduce tasks of the toy domain, drawn from their own seeded
// stream exactly as `populora pretrain` draws its held-out set (seed 1 gives the 200 tasks models/arith-tiny was
// scored on, none of them in its training text). The set depends on the seed alone, never on the run's seed, so
// runs compared with each other are scored on the same tasks.

import { randomTask } from '../domains/arith/corpus.js';
import type { ArithTask } from '../domains/arith/tasks.js';
import type { Task } from '../domains/domain.js';
import { Streams } from '../runtime/streams.js';

/** The pretraining corpus's expressions: depth at most 2, x in -9..9 (scenarios/pretrain/arith-tiny.yaml). */
const HELD_OUT_CORPUS = { maxDepth: 2, inputAbs: 9 };

export function heldOutTasks(seed: number, count: number): ArithTask[] {
  const stream = new Streams(seed).stream('held-out');
  return Array.from({ length: count }, () => randomTask(stream, 'deduce', HELD_OUT_CORPUS));
}

/** What makes two tasks the same question: type, canonical expression and inputs. */
export const taskKey = (task: Task) => ('expr' in task ? `${task.type}:${task.expr};${task.inputs.join(',')}` : `${task.type}:${task.program}\u0000${task.inputs.join('\u0000')}`);

/** A lookup from a proposed task to its place in the held-out set (undefined: not held out). */
export function heldOutIndex(tasks: readonly ArithTask[]): (task: Task) => number | undefined {
  const index = new Map(tasks.map((task, i) => [taskKey(task), i]));
  return (task) => index.get(taskKey(task));
}
