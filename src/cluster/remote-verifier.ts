// The verifier's pool over NATS (issue 20): a batch of verifier jobs is cut into chunks of the scenario's
// `cluster.verifierChunk` jobs, each chunk a request to the verifier workers' queue group (verifier-worker.ts), all
// in flight at once. The results are placed by chunk index, so the verdicts never depend on which worker answered
// a chunk or when (DESIGN.md rule 4); a verdict is a pure function of its job, so a chunk re-sent after its
// deadline (its worker died or hung) may be verified by another worker with the same result.

import { setTimeout as sleep } from 'node:timers/promises';
import type { VerifierPool, VerifyJob, VerifyOutcome } from '../domains/domain.js';
import { exact, unpackExact, type Exact } from './exact.js';
import { ClusterError, decode, encode, requestReply, type NatsConnection, type Reply, type RequestPolicy, type Subjects } from './nats.js';
import { watchOf } from './server-watch.js';

/** The queue group of the verifier workers: each request goes to one of them. */
export const VERIFIER_QUEUE = 'verifiers';

/** What the coordinator asks a verifier worker: a chunk of jobs, or whether it is there (a ping). Jobs and outcomes
 * travel exactly (exact.ts), as a structured clone carries them to a worker thread in one process. */
export type VerifyRequest = { scenarioHash: string; jobs: Exact<VerifyJob[]> } | { scenarioHash: string; ping: true };

/** A worker's answer to a ping. */
export interface VerifierPing {
  threads: number;
}

/** How often `ready` asks again while no worker answers. */
const READY_POLL_MS = 250;

export class NatsVerifierPool implements VerifierPool {
  constructor(
    private readonly nc: NatsConnection,
    private readonly subjects: Subjects,
    private readonly scenarioHash: string,
    private readonly policy: RequestPolicy,
    private readonly chunk: number,
  ) {
    if (!Number.isInteger(chunk) || chunk < 1) throw new RangeError(`a verifier chunk is at least one job, got ${chunk}`);
  }

  /**
   * Waits until a verifier worker answers a ping (workers may start after the coordinator), for up to one
   * request deadline. A worker started for another scenario fails it at once.
   */
  async ready(): Promise<void> {
    const tries = Math.max(1, Math.ceil(this.policy.deadlineMs / READY_POLL_MS));
    const ping: VerifyRequest = { scenarioHash: this.scenarioHash, ping: true };
    let lastError = '';
    const watch = watchOf(this.nc);
    for (let attempt = 0; attempt < tries; ) {
      await watch.untilConnected(); // a lost server is waited for (up to its limit), not counted against the workers
      const epoch = watch.epoch;
      let reply: Reply<VerifierPing>;
      try {
        reply = decode<Reply<VerifierPing>>((await watch.unlessLost(this.nc.request(this.subjects.verify, encode(ping), { timeout: this.policy.deadlineMs }))).data);
      } catch (error) {
        lastError = (error as Error).message; // no responder yet, or a reply lost
        if (watch.failure) throw watch.failure;
        if (this.nc.isClosed()) break;
        if (watch.epoch === epoch) attempt++;
        await sleep(READY_POLL_MS);
        continue;
      }
      if (reply.ok) return;
      throw new ClusterError(`a verifier worker on ${this.subjects.verify}: ${reply.error}`);
    }
    throw new ClusterError(`no verifier worker answers on ${this.subjects.verify} after ${tries} tries over ${(this.policy.deadlineMs / 1000).toFixed(1)} s (${lastError}): start one: populora worker SCENARIO --nats URL --verifier`);
  }

  async verify(jobs: readonly VerifyJob[]): Promise<VerifyOutcome[]> {
    const chunks = Array.from({ length: Math.ceil(jobs.length / this.chunk) }, (_, i) => jobs.slice(i * this.chunk, (i + 1) * this.chunk));
    const results = await Promise.all(chunks.map((chunk, i) => this.verifyChunk(chunk, `verifier chunk ${i + 1} of ${chunks.length}`)));
    return results.flat();
  }

  private async verifyChunk(jobs: VerifyJob[], what: string): Promise<VerifyOutcome[]> {
    const request: VerifyRequest = { scenarioHash: this.scenarioHash, jobs: exact(jobs, what) };
    const outcomes = unpackExact(await requestReply<Exact<VerifyOutcome[]>>(this.nc, this.subjects.verify, request, this.policy, what));
    if (!Array.isArray(outcomes) || outcomes.length !== jobs.length) throw new ClusterError(`${what}: a verifier worker answered ${Array.isArray(outcomes) ? outcomes.length : 'no list of'} outcomes for ${jobs.length} jobs`);
    return outcomes;
  }

  /** Nothing to stop here: the connection is its owner's, the workers serve other runs after this one. */
  async close(): Promise<void> {}
}
