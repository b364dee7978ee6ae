// What the actors' messages share: the member registry's view, training samples, and the names of the
// singleton actors. Every message is plain data with a `type` tag; each actor file declares the ones it takes.

import type { ArithTask, ArithTaskType } from '../src/domains/arith/tasks.js';
import type { Format } from '../src/domains/arith/grammar.js';

export const ENGINE = 'engine';
export const VERIFIER = 'verifier';
export const MATCHMAKER = 'matchmaker';
export const POPULATION_MANAGER = 'population-manager';
export const RUNTIME = 'runtime'; // the run loop, which starts each phase

export type Role = 'teacher' | 'student';

/** One generated sequence and its reward, as the engine trains on it. */
export interface TrainingSample {
  member: string;
  role: Role;
  taskType: ArithTaskType;
  slot: number;
  promptTokens: number[];
  completionTokens: number[];
  reward: number;
}

/** A request to the engine for one sampled completion under a grammar. */
export interface GenerateRequest {
  type: 'generate';
  requestId: number;
  replyTo: string;
  slot: number;
  prompt: string;
  format: Format;
}

/** The engine's answer to a GenerateRequest. */
export interface Generated {
  type: 'generated';
  requestId: number;
  promptTokens: number[];
  completionTokens: number[]; // end-of-sequence included when the model stopped
  text: string;
}

/** A task offered for matching: a valid proposal, identified by its proposal's request id. */
export interface Offer {
  type: 'offer';
  taskId: number;
  teacher: string;
  task: ArithTask;
}

/** One student's result on one task: `correct` of `total` answers. */
export interface Outcome {
  type: 'outcome';
  taskId: number;
  teacher: string;
  student: string;
  correct: number;
  total: number;
}

export const mean = (values: readonly number[]) => (values.length === 0 ? 0 : values.reduce((a, b) => a + b, 0) / values.length);
