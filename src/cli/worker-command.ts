// `populora worker SCENARIO --nats URL --engine | --verifier`: a worker of a run over NATS (issue 20), on any machine
// that reaches the server, for the one scenario it was started with (it refuses a coordinator running another). An
// engine worker loads the scenario's base model and holds the shards of adapters the coordinator gives it; a
// verifier worker takes verifier jobs from the queue group. A server not there yet is waited for; the worker then
// serves until SIGINT or SIGTERM, or until its server is given up, and stops as src/cluster/worker-lifecycle.ts
// says: exit 0 after a clean drain, EXIT_ABANDONED (75) when it gave up what it held.

import { availableParallelism, hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { openBackend } from '../backend/select.js';
import { startEngineWorker } from '../cluster/engine-worker.js';
import { connectNats, subjects } from '../cluster/nats.js';
import { scenarioHash } from '../cluster/scenario-hash.js';
import { serverLimits } from '../cluster/server-watch.js';
import { startVerifierWorker } from '../cluster/verifier-worker.js';
import { serveUntilStopped, stopSignals, workerConsequence, type ClusterWorker } from '../cluster/worker-lifecycle.js';
import { LIMITS, openScenario } from '../scenario/scenario.js';
import { UsageError } from './usage-error.js';

export interface WorkerCommandOptions {
  nats: string;
  cluster: string;
  verifier?: boolean;
  engine?: boolean;
  threads?: number;
  id?: string;
}

const ROLES = ['engine', 'verifier'] as const;

/** After a stop that abandoned work, how long the process may take to end before it is ended (a handle left open). */
const EXIT_GRACE_MS = 2000;

export async function workerCommand(scenarioFile: string, options: WorkerCommandOptions): Promise<void> {
  const roles = ROLES.filter((role) => options[role]);
  if (roles.length !== 1) throw new UsageError(`give exactly one of ${ROLES.map((r) => `--${r}`).join(', ')}: what this worker does`);
  const threads = options.threads ?? Math.min(availableParallelism(), LIMITS.threads);
  if (!Number.isInteger(threads) || threads < 1 || threads > LIMITS.threads) throw new UsageError(`--threads ${threads}: give a whole number from 1 to ${LIMITS.threads}`);
  const id = options.id ?? `${hostname()}-${process.pid}`.replace(/[^A-Za-z0-9_-]/g, '_');
  if (!/^[A-Za-z0-9_-]+$/.test(id)) throw new UsageError(`--id ${id}: a worker's id is letters, digits, '_' and '-' (it names a NATS subject)`);
  const scenario = await openScenario(scenarioFile);
  const hash = scenarioHash(scenario);
  const names = subjects(options.cluster);
  const limits = serverLimits();
  const who = options.engine ? `engine worker ${id}` : 'verifier worker';
  const say = (line: string) => console.error(line);

  const signals = stopSignals(); // a stop asked while the server is awaited ends the wait
  const stopped = new AbortController();
  void signals.first.then(() => stopped.abort());
  try {
    const nc = await connectNats(options.nats, process.env, { who, say, consequence: workerConsequence(who) }, stopped.signal);
    if (!nc) return say(`${who} stopped before its NATS server at ${options.nats} was there`);
    let worker: ClusterWorker;
    try {
      worker = options.engine
        ? startEngineWorker(nc, names, { scenario, scenarioFile, scenarioHash: hash, backend: await openBackend(scenario.backend, undefined, options.threads), id })
        : await startVerifierWorker(nc, names, { scenario, scenarioHash: hash, threads });
      await nc.flush(); // subscribed on the server before the ready line
    } catch (error) {
      await nc.close();
      throw error;
    }
    console.log(`${who} for scenario ${scenario.name} (hash ${hash.slice(0, 12)}) on ${options.nats}${options.engine ? '' : `, ${threads} thread${threads === 1 ? '' : 's'}`}`);
    await serveUntilStopped(nc, worker, { who, url: options.nats, drainMs: limits.drainMs, say, signals, exitNow: (code) => process.exit(code) });
    say(`${who} stopped cleanly: every request it took was answered`);
  } catch (error) {
    void sleep(EXIT_GRACE_MS, undefined, { ref: false }).then(() => process.exit()); // whatever still holds the event loop, the stop is bounded
    throw error;
  } finally {
    signals.dispose();
  }
}
