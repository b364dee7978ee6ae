// What the actors' messages share: the member registry's view, training samples, and the addresses of the actor
// kinds. Every message is plain data with a `type` tag; each actor file declares the ones it takes, and an
// address carries them, so a message sent to an actor that has no case for it does not compile.

import type { FormatName, Task, TaskType } from '../src/domains/domain.js';
import { address, type Address } from '../src/runtime/world.js';
import type { EngineMessage } from './engine.js';
import type { EvaluatorMessage } from './evaluator.js';
import type { MatchmakerMessage } from './matchmaker.js';
import type { PopulationMessage } from './population-manager.js';
import type { StudentMessage } from './student.js';
import type { TeacherMessage } from './teacher.js';
import type { VerifierMessage } from './verifier.js';

export const ENGINE = address<EngineMessage>('engine');
export const VERIFIER = address<VerifierMessage>('verifier');
export const MATCHMAKER = address<MatchmakerMessage>('matchmaker');
export const POPULATION_MANAGER = address<PopulationMessage>('population-manager');
export const EVALUATOR = address<EvaluatorMessage>('evaluator'); // the held-out evaluation (actors/evaluator.ts), when a scenario has one
export const RUNTIME = 'runtime'; // the run loop, which starts each phase: a sender, never sent to

/** A member's address is its id (`teacher-S-T`, `student-S-I`): the roster and the matchmaking policies name
 * members by id, and the actors that message them make the address from it. */
export const teacherAt = (id: string) => address<TeacherMessage>(id);
export const studentAt = (id: string) => address<StudentMessage>(id);

export type Role = 'teacher' | 'student';

/** The run loop's last phase message of a step to every member: hand in your samples. */
export interface Learn {
  type: 'learn';
}

/** The reward of one of this step's generations (the engine keeps its tokens and adapter slot). */
export interface TrainingSample {
  requestId: number;
  role: Role;
  taskType: TaskType;
  reward: number;
}

// Requests and replies carry lists: an actor asks for all it needs in one message, and the engine and the
// verifier answer each actor with one message per batch. Messaging then grows with the number of actors, not of
// samples (a step of 16 members is ~200 messages instead of ~800).

/** One sampled completion under a grammar. */
export interface GenerateItem {
  requestId: number;
  slot: number;
  prompt: string;
  format: FormatName; // the grammar its output is decoded under (free text where the domain has none)
  greedy?: true; // an evaluation: temperature 0, and never trained on
}

export interface GenerateRequest {
  type: 'generate';
  replyTo: Address<Generated>;
  requests: GenerateItem[];
}

/** A generation's text. Its tokens stay with the engine, which trains on them at the step's learn phase. */
export interface GeneratedItem {
  requestId: number;
  text: string;
}

/** The engine's answer to an actor's generate requests of one batch, in request order. */
export interface Generated {
  type: 'generated';
  results: GeneratedItem[];
}

/** A task offered for matching: a valid proposal, identified by its proposal's request id. */
export interface OfferedTask {
  taskId: number;
  teacher: Address<Outcomes>;
  task: Task;
}

/** One student's result on one task: `correct` of `total` answers. */
export interface Outcome {
  taskId: number;
  teacher: Address<Outcomes>;
  student: string;
  correct: number;
  total: number;
}

export interface Outcomes {
  type: 'outcomes';
  outcomes: Outcome[];
}

/** Groups items by a key, keeping first-seen key order and item order. */
export function groupBy<T, K extends string>(items: readonly T[], key: (item: T) => K): Map<K, T[]> {
  const groups = new Map<K, T[]>();
  for (const item of items) groups.set(key(item), [...(groups.get(key(item)) ?? []), item]);
  return groups;
}

/** The item of this step with the request id, or an error naming what is missing (a protocol bug). */
export function byRequestId<T extends { requestId: number }>(items: readonly T[], requestId: number, what: string): T {
  const found = items.find((item) => item.requestId === requestId);
  if (!found) throw new Error(`no ${what} with request id ${requestId}`);
  return found;
}

export const mean = (values: readonly number[]) => (values.length === 0 ? 0 : values.reduce((a, b) => a + b, 0) / values.length);
