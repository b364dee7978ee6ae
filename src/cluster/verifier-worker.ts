// A verifier worker (issue 20; `populora worker SCENARIO --nats URL --verifier`): serves the verifier workers'
// queue group with the scenario's domain's own pool (the same workers a run uses in one process), one chunk at a
// time, so a pool never has two batches at once. It answers only a coordinator running the scenario it was started
// for: a request with another scenario hash is refused, naming both (remote-verifier.ts fails the run on it).

import { domainNamed } from '../domains/index.js';
import type { Scenario } from '../scenario/scenario.js';
import { exact, unpackExact, type Exact } from './exact.js';
import { RefusedError, serve, type NatsConnection, type Subjects } from './nats.js';
import { clusterWorker, type ClusterWorker } from './worker-lifecycle.js';
import { VERIFIER_QUEUE, type VerifierPing, type VerifyRequest } from './remote-verifier.js';
import type { VerifyOutcome } from '../domains/domain.js';

export interface VerifierWorkerOptions {
  scenario: Scenario;
  scenarioHash: string;
  threads: number; // the local pool's workers (threads or sandbox processes)
}

/** A ClusterWorker (worker-lifecycle.ts) whose `free` stops the pool; the connection is its owner's. */
export type VerifierWorker = ClusterWorker;

/** Starts the pool, waits until it can take jobs, then joins the queue group. */
export async function startVerifierWorker(nc: NatsConnection, subjects: Subjects, { scenario, scenarioHash, threads }: VerifierWorkerOptions): Promise<VerifierWorker> {
  const pool = domainNamed(scenario.domain).verifierPool(threads, { fuel: scenario.tasks.fuel, guardMs: scenario.tasks.guardMs });
  try {
    await pool.ready?.();
  } catch (error) {
    await pool.close();
    throw error;
  }
  const handle = async (request: VerifyRequest): Promise<VerifierPing | Exact<VerifyOutcome[]>> => {
    if (request.scenarioHash !== scenarioHash) {
      throw new RefusedError(`refused: this verifier worker was started for scenario "${scenario.name}" (hash ${scenarioHash.slice(0, 12)}…), the coordinator runs another (hash ${request.scenarioHash.slice(0, 12)}…); start the worker with the run's scenario file`);
    }
    if ('ping' in request) return { threads };
    return exact(await pool.verify(unpackExact(request.jobs)), 'verifier outcomes');
  };
  const describe = (request: VerifyRequest) => ('ping' in request ? 'a ping' : `a verifier chunk of ${request.jobs.value.length} jobs`);
  const server = serve(nc, subjects.verify, handle, { queue: VERIFIER_QUEUE, describe });
  return clusterWorker([server], () => pool.close());
}
