// What the verifier's parent process and its sandbox processes (sandbox-process.ts) say to each other, kept apart
// from the worker's own file: importing that one would start an interpreter.

import type { VerifyJob, VerifyOutcome } from '../domain.js';

export interface SandboxRequest {
  job: VerifyJob;
  fuel: number;
}

export type SandboxMessage = { type: 'ready' } | { type: 'answer'; id: number; outcome: VerifyOutcome };

/** Exit codes the parent reads: the interpreter died, or the job reached for the host and was refused. */
export const EXIT_INTERPRETER_DIED = 70;
export const EXIT_HOST_ACCESS_REFUSED = 71;

/** A validation whose text holds this runs the test's escape payload (only where a test set one: see below). */
export const ESCAPE_MARKER = '# populora-test: escape into JavaScript';

