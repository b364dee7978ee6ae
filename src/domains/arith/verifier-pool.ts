// The toy domain's verifier pool (piscina). A batch is cut into one contiguous chunk per worker and the results
// are concatenated in job order, so the verdicts never depend on the number of workers or on which finishes first
// (DESIGN.md rule 4). A worker that crashes is replaced by piscina and its chunk is retried once; a chunk that
// fails twice or outlives the wall-clock guard twice comes back as infrastructure faults, never verdicts (rule 5).

import { Piscina } from 'piscina';
import { compiledWorker, contiguousChunks } from '../../runtime/worker-threads.js';
import type { VerifierPool, VerifyJob, VerifyOutcome } from '../domain.js';

/** Safety net only: arith jobs take microseconds; a chunk still running after this means a hung worker. */
const WALL_CLOCK_GUARD_MS = 60_000;

export class ArithVerifierPool implements VerifierPool {
  private readonly pool: Piscina;

  constructor(readonly workers: number) {
    if (!Number.isInteger(workers) || workers < 1) throw new RangeError(`the verifier needs at least one worker, got ${workers}`);
    this.pool = new Piscina({ filename: compiledWorker(new URL('./verify-worker.js', import.meta.url)), minThreads: workers, maxThreads: workers, idleTimeout: Infinity });
  }

  async verify(jobs: readonly VerifyJob[]): Promise<VerifyOutcome[]> {
    const results = await Promise.all(contiguousChunks(jobs, this.workers).map((chunk) => this.runChunk(chunk)));
    return results.flat();
  }

  private async runChunk(chunk: VerifyJob[]): Promise<VerifyOutcome[]> {
    for (let attempt = 1; ; attempt++) {
      try {
        return (await this.pool.run(chunk, { signal: AbortSignal.timeout(WALL_CLOCK_GUARD_MS) })) as VerifyOutcome[];
      } catch (error) {
        const detail = `infrastructure fault: a worker crashed or hung twice on a chunk of ${chunk.length} jobs (${(error as Error).message})`;
        if (attempt >= 2) return chunk.map(() => ({ kind: 'fault', detail }));
      }
    }
  }

  async close(): Promise<void> {
    await this.pool.destroy();
  }
}
