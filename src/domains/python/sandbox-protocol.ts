// What the verifier's parent process and its sandbox processes (sandbox-process.ts) say to each other, kept apart
// from the worker's own file: importing that one would start an interpreter.

import type { VerifyJob, VerifyOutcome } from '../domain.js';

export interface SandboxRequest {
  job: VerifyJob;
  fuel: number;
}

/** `retire`: the process answered a job that reached for the host and must not take another: the parent ends it. */
export type SandboxMessage = { type: 'ready' } | { type: 'answer'; id: number; outcome: VerifyOutcome; retire?: true };

/** The exit code the parent reads when the interpreter died. */
export const EXIT_INTERPRETER_DIED = 70;

/** A validation whose text holds this runs the test's escape payload (only where a test set one: see below). */
export const ESCAPE_MARKER = '# populora-test: escape into JavaScript';

