// A piscina worker of the code domain's verifier: one Python interpreter (loaded at the first job, ~3 s) for the
// worker's lifetime. A job that kills the interpreter ends the worker: piscina replaces it and the pool retries
// the job once on the fresh one (python-pool.ts).

import { SandboxCrash, PythonExecutor } from './executor.js';
import type { VerifyJob, VerifyOutcome } from '../domain.js';
import { verifyCode } from './verify-jobs.js';

let executor: Promise<PythonExecutor> | null = null;

export default async function verifyInWorker({ job, fuel }: { job: VerifyJob; fuel: number }): Promise<VerifyOutcome> {
  executor ??= PythonExecutor.load();
  const python = await executor;
  try {
    return verifyCode(python, job, fuel);
  } catch (error) {
    if (error instanceof SandboxCrash) process.exit(70); // in a worker thread: ends this thread, not the process
    throw error;
  }
}
