// `populora worker SCENARIO --nats URL --engine | --verifier`: a worker of a run over NATS (issue 20), on any machine
// that reaches the server, for the one scenario it was started with (it refuses a coordinator running another). An
// engine worker loads the scenario's base model and holds the shards of adapters the coordinator gives it; a
// verifier worker takes verifier jobs from the queue group. It serves until SIGINT or SIGTERM, then finishes the
// request in hand, drains its connection and exits 0.

import { availableParallelism, hostname } from 'node:os';
import { openBackend } from '../backend/select.js';
import { startEngineWorker } from '../cluster/engine-worker.js';
import { ClusterError, connectNats, subjects } from '../cluster/nats.js';
import { scenarioHash } from '../cluster/scenario-hash.js';
import { startVerifierWorker } from '../cluster/verifier-worker.js';
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

export async function workerCommand(scenarioFile: string, options: WorkerCommandOptions): Promise<void> {
  const roles = ROLES.filter((role) => options[role]);
  if (roles.length !== 1) throw new UsageError(`give exactly one of ${ROLES.map((r) => `--${r}`).join(', ')}: what this worker does`);
  const threads = options.threads ?? Math.min(availableParallelism(), LIMITS.threads);
  if (!Number.isInteger(threads) || threads < 1 || threads > LIMITS.threads) throw new UsageError(`--threads ${threads}: give a whole number from 1 to ${LIMITS.threads}`);
  const id = options.id ?? `${hostname()}-${process.pid}`.replace(/[^A-Za-z0-9_-]/g, '_');
  if (!/^[A-Za-z0-9_-]+$/.test(id)) throw new UsageError(`--id ${id}: a worker's id is letters, digits, '_' and '-' (it names a NATS subject)`);
  const scenario = await openScenario(scenarioFile);
  const hash = scenarioHash(scenario);
  const nc = await connectNats(options.nats);
  const names = subjects(options.cluster);
  const worker = options.engine
    ? startEngineWorker(nc, names, { scenario, scenarioFile, scenarioHash: hash, backend: await openBackend(scenario.backend, undefined, options.threads), id })
    : await startVerifierWorker(nc, names, { scenario, scenarioHash: hash, threads });
  await nc.flush(); // subscribed on the server before the ready line
  const role = options.engine ? `engine worker ${id}` : 'verifier worker';
  console.log(`${role} for scenario ${scenario.name} (hash ${hash.slice(0, 12)}) on ${options.nats}${options.engine ? '' : `, ${threads} thread${threads === 1 ? '' : 's'}`}`);
  const closed = nc.closed().then((error) => {
    throw new ClusterError(`the connection to ${options.nats} closed${error ? `: ${error.message}` : ''}`);
  });
  const signal = await Promise.race([untilSignal(), closed]);
  console.log(`${signal}: stopping after the chunk in hand`);
  await worker.close();
  await nc.drain();
}

/** Resolves with the first SIGINT or SIGTERM. */
function untilSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const onSignal = (name: NodeJS.Signals) => {
      for (const other of ['SIGINT', 'SIGTERM'] as const) process.off(other, onSignal);
      resolve(name);
    };
    for (const name of ['SIGINT', 'SIGTERM'] as const) process.on(name, onSignal);
  });
}
