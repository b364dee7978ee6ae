// What `populora run --nats URL` adds to a run (issue 20): the actors' messages over NATS (nats-transport.ts), the
// verifier's jobs on the verifier workers (remote-verifier.ts) and, when the scenario's `cluster.engineWorkers` asks
// for them, the engine on engine workers (remote-engine.ts), with the scenario's cluster settings. The connection
// is opened here and closed by `close`, after the run.
//
// Losing the server (issue 36, src/cluster/server-watch.ts): the step in progress waits for it, up to
// POPULORA_NATS_RECONNECT_SECONDS; then, or sooner once a stop was asked (`stopWith`: the first SIGINT or SIGTERM
// waits POPULORA_NATS_DRAIN_SECONDS for an absent server), the run stops at its last checkpoint, and `failure`
// is the one error to show: it names the server, since when, and gives the `--resume` command.

import { connectNats, DEFAULT_CLUSTER, subjects, type NatsConnection, type ServerLostError } from '../cluster/nats.js';
import { RemoteEngineCore } from '../cluster/remote-engine.js';
import { watchOf } from '../cluster/server-watch.js';
import { slotCount } from '../sim/population.js';
import { checkpointSteps } from '../sim/checkpoints.js';
import { NatsTransport } from '../cluster/nats-transport.js';
import { NatsVerifierPool } from '../cluster/remote-verifier.js';
import { scenarioHash } from '../cluster/scenario-hash.js';
import { clusterSettings, requestPolicy } from '../cluster/settings.js';
import type { Scenario } from '../scenario/scenario.js';
import type { RunOptions } from '../sim/run.js';

export type ClusterRunOptions = Required<Pick<RunOptions, 'transport' | 'verifierPool'>> &
  Pick<RunOptions, 'engineCore'> & {
    connection: NatsConnection;
    /** From the abort of `signal` on (a stop asked), an absent server is waited for only the drain limit. */
    stopWith(signal: AbortSignal): void;
    /** The server given up, if it was: the error to show for whatever the run failed with. */
    failure(): ServerLostError | null;
    close(): Promise<void>;
  };

export interface ClusterRunSettings {
  /** The run folder: the `--resume` command when the server is given up names it. */
  outDir?: string;
  /** Told of a lost engine worker and where its shard went, and of the server lost and found again. */
  onEvent?: (text: string) => void;
}

export async function clusterRunOptions(scenario: Scenario, url: string, clusterName: string, { outDir, onEvent }: ClusterRunSettings = {}): Promise<ClusterRunOptions> {
  const names = subjects(clusterName);
  const nc = await connectNats(url, process.env, { who: 'the coordinator', consequence: () => stopsAtCheckpoint(scenario, url, clusterName, outDir), ...(onEvent ? { say: onEvent } : {}) });
  const policy = requestPolicy(scenario);
  const settings = clusterSettings(scenario);
  const verifierPool = new NatsVerifierPool(nc, names, scenarioHash(scenario), policy, settings.verifierChunk);
  const engineCore = async () =>
    RemoteEngineCore.connect(nc, names, {
      scenarioHash: scenarioHash(scenario),
      slots: slotCount(scenario),
      shards: settings.engineWorkers,
      assignment: settings.assignment,
      deadlineMs: settings.deadlineSeconds * 1000,
      onWorkerLoss: settings.onWorkerLoss,
      ...(onEvent ? { onEvent } : {}),
    });
  const watch = watchOf(nc);
  return {
    transport: new NatsTransport(nc, names, policy),
    verifierPool,
    ...(settings.engineWorkers > 0 ? { engineCore } : {}),
    connection: nc,
    stopWith: (signal) => signal.addEventListener('abort', () => watch.stopping(String(signal.reason)), { once: true }),
    failure: () => watch.failure,
    close: async () => {
      await verifierPool.close();
      await nc.close(); // every request of the run has had its reply: nothing to drain
    },
  };
}

/** What the coordinator does when it gives its server up: the run stops, and how to continue it. */
function stopsAtCheckpoint(scenario: Scenario, url: string, clusterName: string, outDir: string | undefined): string {
  if (outDir === undefined) return 'the run stops at its last checkpoint';
  const step = checkpointSteps(outDir).at(-1);
  const folder = step === undefined ? 'has no checkpoint yet (a resume starts it again from step 0)' : `keeps its last checkpoint (step ${step} of ${scenario.steps})`;
  const cluster = clusterName === DEFAULT_CLUSTER ? '' : ` --cluster ${clusterName}`;
  return `the run stops; its folder ${folder}: continue it once the server is back with: populora run --resume ${outDir} --nats ${url}${cluster}`;
}
