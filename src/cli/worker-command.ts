// `populora worker SCENARIO --nats URL --verifier`: a worker of a run over NATS (issue 20), on any machine that
// reaches the server, for the one scenario it was started with (it refuses a coordinator running another). It
// serves until SIGINT or SIGTERM, then finishes the chunk in hand, drains its connection and exits 0.

import { availableParallelism } from 'node:os';
import { ClusterError, connectNats, subjects } from '../cluster/nats.js';
import { scenarioHash } from '../cluster/scenario-hash.js';
import { startVerifierWorker } from '../cluster/verifier-worker.js';
import { LIMITS, loadScenario } from '../scenario/scenario.js';
import { UsageError } from './usage-error.js';

export interface WorkerCommandOptions {
  nats: string;
  cluster: string;
  verifier?: boolean;
  engine?: boolean;
  threads?: number;
}

const ROLES = ['engine', 'verifier'] as const;

export async function workerCommand(scenarioFile: string, options: WorkerCommandOptions): Promise<void> {
  const roles = ROLES.filter((role) => options[role]);
  if (roles.length !== 1) throw new UsageError(`give exactly one of ${ROLES.map((r) => `--${r}`).join(', ')}: what this worker does`);
  if (options.engine) throw new UsageError('populora worker --engine: not yet');
  const threads = options.threads ?? Math.min(availableParallelism(), LIMITS.threads);
  if (!Number.isInteger(threads) || threads < 1 || threads > LIMITS.threads) throw new UsageError(`--threads ${threads}: give a whole number from 1 to ${LIMITS.threads}`);
  const scenario = loadScenario(scenarioFile);
  const hash = scenarioHash(scenario);
  const nc = await connectNats(options.nats);
  const worker = await startVerifierWorker(nc, subjects(options.cluster), { scenario, scenarioHash: hash, threads });
  console.log(`verifier worker for scenario ${scenario.name} (hash ${hash.slice(0, 12)}) on ${options.nats}, ${threads} thread${threads === 1 ? '' : 's'}`);
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
