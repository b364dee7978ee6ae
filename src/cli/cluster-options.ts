// What `populora run --nats URL` adds to a run (issue 20): the actors' messages over NATS (nats-transport.ts), the
// verifier's jobs on the verifier workers (remote-verifier.ts) and, when the scenario's `cluster.engineWorkers` asks
// for them, the engine on engine workers (remote-engine.ts), with the scenario's cluster settings. The connection
// is opened here and closed by `close`, after the run.

import { connectNats, subjects, type NatsConnection } from '../cluster/nats.js';
import { RemoteEngineCore } from '../cluster/remote-engine.js';
import { slotCount } from '../sim/population.js';
import { NatsTransport } from '../cluster/nats-transport.js';
import { NatsVerifierPool } from '../cluster/remote-verifier.js';
import { scenarioHash } from '../cluster/scenario-hash.js';
import { clusterSettings, requestPolicy } from '../cluster/settings.js';
import type { Scenario } from '../scenario/scenario.js';
import type { RunOptions } from '../sim/run.js';

export type ClusterRunOptions = Required<Pick<RunOptions, 'transport' | 'verifierPool'>> & Pick<RunOptions, 'engineCore'> & { connection: NatsConnection; close(): Promise<void> };

/** `onEvent`: told of a lost engine worker and where its shard went. */
export async function clusterRunOptions(scenario: Scenario, url: string, clusterName: string, onEvent?: (text: string) => void): Promise<ClusterRunOptions> {
  const nc = await connectNats(url);
  const names = subjects(clusterName);
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
  return {
    transport: new NatsTransport(nc, names, policy),
    verifierPool,
    ...(settings.engineWorkers > 0 ? { engineCore } : {}),
    connection: nc,
    close: async () => {
      await verifierPool.close();
      await nc.close(); // every request of the run has had its reply: nothing to drain
    },
  };
}
