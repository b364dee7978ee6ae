// The code domain's verifier pool: piscina workers, each holding one Python interpreter. Every job is its own
// pool task, so a program that kills its interpreter costs one job, not a batch: piscina replaces the worker and
// the job is retried once on the fresh one. A job that fails twice (crash, or the wall-clock guard) comes back
// as an infrastructure fault, which the actors record and drop, never a verdict (DESIGN.md rule 5). Results are
// in job order whatever the number of workers or the order in which they finish (rule 4).

import { Piscina } from 'piscina';
import { compiledWorker } from '../../runtime/worker-threads.js';
import type { VerifierPool, VerifyJob, VerifyOutcome } from '../domain.js';
import { DEFAULT_FUEL } from './executor.js';

export interface PythonPoolOptions {
  fuel?: number; // steps per program run (executor.ts)
  wallClockGuardMs?: number; // safety net only: counted fuel ends every ordinary program long before
}

const DEFAULT_WALL_CLOCK_GUARD_MS = 30_000;

export class PythonVerifierPool implements VerifierPool {
  private readonly pool: Piscina;
  readonly fuel: number;
  private readonly guardMs: number;
  faults = 0; // jobs given up after two failed attempts, over the pool's life

  constructor(readonly workers: number, options: PythonPoolOptions = {}) {
    if (!Number.isInteger(workers) || workers < 1) throw new RangeError(`the verifier needs at least one worker, got ${workers}`);
    this.fuel = options.fuel ?? DEFAULT_FUEL;
    this.guardMs = options.wallClockGuardMs ?? DEFAULT_WALL_CLOCK_GUARD_MS;
    // Pyodide's interpreter recurses on the thread's stack: give it room beyond Node's 4 MB default.
    this.pool = new Piscina({ filename: compiledWorker(new URL('./verify-worker.js', import.meta.url)), minThreads: workers, maxThreads: workers, idleTimeout: Infinity, resourceLimits: { stackSizeMb: 16 } });
  }

  async verify(jobs: readonly VerifyJob[]): Promise<VerifyOutcome[]> {
    return Promise.all(jobs.map((job) => this.runJob(job)));
  }

  private async runJob(job: VerifyJob): Promise<VerifyOutcome> {
    const failures: string[] = [];
    while (failures.length < 2) {
      try {
        return (await this.pool.run({ job, fuel: this.fuel }, { signal: AbortSignal.timeout(this.guardMs) })) as VerifyOutcome;
      } catch (error) {
        const aborted = (error as Error).name === 'AbortError' || (error as Error).name === 'TimeoutError';
        failures.push(aborted ? `no answer within the ${this.guardMs} ms wall-clock guard` : (error as Error).message);
      }
    }
    this.faults++;
    return { kind: 'fault', detail: `infrastructure fault: the worker failed twice on this ${job.kind} job (${failures.join('; ')})` };
  }

  async close(): Promise<void> {
    await this.pool.destroy();
  }
}
