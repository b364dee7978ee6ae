// A verifier worker process: one Python interpreter, and the jobs the parent sends it over the IPC channel, one at
// a time, each from the interpreter's state right after load (executor.ts restores a memory snapshot first).
//
// sandbox-processes.ts starts it under Node's permission model (reads only of its own code and Pyodide's files; no
// file writes, child processes, worker threads, addons, inspector or process.binding) and, on Linux, in network
// and process-id namespaces of its own (no network interface up; no other process visible to signal). So even a
// program that escaped every layer of the sandbox's Python (sandbox/) into JavaScript finds nothing to touch. This file adds one more
// layer above those: once Pyodide has loaded, the constructors that turn a string into JavaScript code are gone
// from every function's prototype, and so are the network globals.
//
// Messages: parent → child `{ id, request }`; child → parent `{ type: 'ready' }`, `{ type: 'answer', id, outcome, retire? }`.

import { constants as fsConstants } from 'node:fs';
import process from 'node:process';
import type { VerifyJob, VerifyOutcome } from '../domain.js';
import { HostAccessRefused, PythonExecutor, SandboxCrash } from './executor.js';
import { ESCAPE_MARKER, EXIT_INTERPRETER_DIED, type SandboxRequest } from './sandbox-protocol.js';
import { verifyCode } from './verify-jobs.js';

// The permission model closes process.binding, and Pyodide's start-up reads the file-system constants through it:
// hand it those and nothing else, and close it again once Pyodide has loaded.
type Binding = (name: string) => unknown;
const withBinding = process as unknown as { binding: Binding };
const closedBinding = withBinding.binding;
withBinding.binding = (name) => (name === 'constants' ? { fs: fsConstants } : closedBinding.call(process, name));

// A test stands in for a program that escaped into JavaScript: the parent may hand this process JavaScript to run
// as part of a job (only through this variable, which the parent sets for tests alone), compiled before the
// lock-down, as an escape would find the Function constructor.
const escapePayload = process.env.POPULORA_SANDBOX_ESCAPE_PAYLOAD;
delete process.env.POPULORA_SANDBOX_ESCAPE_PAYLOAD;
type Payload = (modules: Record<string, unknown>, text: string) => Promise<unknown>;
const AsyncFunction = Object.getPrototypeOf(async function () {}).constructor as new (...parameters: string[]) => Payload;
const escape = escapePayload ? new AsyncFunction('modules', 'text', escapePayload) : null;
const escapeModules = escape ? { fs: await import('node:fs'), childProcess: await import('node:child_process'), net: await import('node:net'), process } : {};

// The test-only door of executor.ts (programs with the real builtins), opened only where the parent says so for a
// test, through this variable; a program cannot set it.
const realBuiltinsForTests = process.env.POPULORA_SANDBOX_REAL_BUILTINS_FOR_TESTS === '1';
delete process.env.POPULORA_SANDBOX_REAL_BUILTINS_FOR_TESTS;

const python = await PythonExecutor.load({ realBuiltinsForTests });
lockDown();

function lockDown(): void {
  withBinding.binding = closedBinding;
  const codeMakers = [function () {}, async function () {}, function* () {}, async function* () {}];
  for (const maker of codeMakers) Object.defineProperty(Object.getPrototypeOf(maker), 'constructor', { value: undefined, writable: false, configurable: false });
  const globals = globalThis as Record<string, unknown>;
  for (const name of ['fetch', 'WebSocket', 'EventSource', 'XMLHttpRequest']) delete globals[name];
}

/**
 * An error thrown because the job reached for the host and was stopped: by the interpreter's gate or the process
 * fence (executor.ts recognises both, also where they ended the interpreter), or, for the test's stand-in escape,
 * by the fence directly (a write, a spawn, a socket, an addon).
 */
function refusalOf(error: unknown): HostAccessRefused | null {
  if (error instanceof HostAccessRefused) return error;
  const code = (error as NodeJS.ErrnoException | null)?.code;
  const fence = ['ERR_ACCESS_DENIED', 'ERR_DLOPEN_DISABLED', 'ENETUNREACH', 'ENETDOWN', 'ECONNREFUSED', 'EPERM', 'EACCES'];
  return typeof code === 'string' && fence.includes(code) ? new HostAccessRefused(code, (error as Error).message.split('\n')[0]!) : null;
}

function refusedOutcome(job: VerifyJob, refusal: HostAccessRefused): VerifyOutcome {
  const reason = refusal.message;
  return job.kind === 'check' ? { kind: 'check', check: { correct: false, reason } } : { kind: 'validate', validation: { valid: false, reason } };
}

async function answer({ job, fuel }: SandboxRequest): Promise<VerifyOutcome> {
  if (escape && job.kind === 'validate' && job.text.includes(ESCAPE_MARKER)) await escape(escapeModules, job.text);
  return verifyCode(python, job, fuel);
}

const send = (message: unknown) => new Promise<void>((resolve) => process.send!(message, () => resolve()));

process.on('message', (message: { id: number; request: SandboxRequest }) => {
  void answer(message.request).then(
    async (outcome) => {
      await send({ type: 'answer', id: message.id, outcome });
    },
    async (error: unknown) => {
      const refusal = refusalOf(error);
      if (refusal) {
        // A verdict, not a crash to retry; but the state of this process can no longer be trusted: the answer
        // says so, and the parent ends this process once it has the answer (an exit of its own could overtake it).
        await send({ type: 'answer', id: message.id, outcome: refusedOutcome(message.request.job, refusal), retire: true });
        return;
      }
      if (error instanceof SandboxCrash) process.exit(EXIT_INTERPRETER_DIED);
      throw error; // a bug of the sandbox itself: the process dies, the parent reports it
    },
  );
});
await send({ type: 'ready' });
