// The verifier's worker pool (piscina). A batch is cut into one contiguous chunk per worker and the results are
// concatenated in job order, so the verdicts never depend on the number of workers or on which finishes first
// (DESIGN.md rule 4). A worker that crashes is replaced by piscina and its chunk is retried once; a chunk that
// outlives the wall-clock guard is an infrastructure fault, never a verdict (rule 5).

import { Piscina } from 'piscina';
import { compiledWorker, contiguousChunks } from '../runtime/worker-threads.js';
import type { VerifyJob, VerifyResult } from './verify-jobs.js';

/** Safety net only: arith jobs take microseconds; a chunk still running after this means a hung worker. */
const WALL_CLOCK_GUARD_MS = 60_000;

export class VerifierFault extends Error {}

export class VerifierPool {
  private readonly pool: Piscina;

  constructor(readonly workers: number) {
    if (!Number.isInteger(workers) || workers < 1) throw new RangeError(`the verifier needs at least one worker, got ${workers}`);
    this.pool = new Piscina({ filename: compiledWorker(new URL('./verify-worker.js', import.meta.url)), minThreads: workers, maxThreads: workers, idleTimeout: Infinity });
  }

  async verify(jobs: readonly VerifyJob[]): Promise<VerifyResult[]> {
    const results = await Promise.all(contiguousChunks(jobs, this.workers).map((chunk) => this.runChunk(chunk)));
    return results.flat();
  }

  private async runChunk(chunk: VerifyJob[]): Promise<VerifyResult[]> {
    for (let attempt = 1; ; attempt++) {
      try {
        return (await this.pool.run(chunk, { signal: AbortSignal.timeout(WALL_CLOCK_GUARD_MS) })) as VerifyResult[];
      } catch (error) {
        if (attempt >= 2) throw new VerifierFault(`verifier infrastructure fault (a worker crashed or hung twice on a chunk of ${chunk.length} jobs): ${(error as Error).message}`);
      }
    }
  }

  async close(): Promise<void> {
    await this.pool.destroy();
  }
}
