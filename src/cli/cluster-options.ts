// What `populora run --nats URL` adds to a run (issue 20): the actors' messages over NATS (nats-transport.ts) and
// the verifier's jobs on the verifier workers (remote-verifier.ts), with the scenario's cluster settings. The
// connection is opened here and closed by `close`, after the run.

import { connectNats, subjects } from '../cluster/nats.js';
import { NatsTransport } from '../cluster/nats-transport.js';
import { NatsVerifierPool } from '../cluster/remote-verifier.js';
import { scenarioHash } from '../cluster/scenario-hash.js';
import { clusterSettings, requestPolicy } from '../cluster/settings.js';
import type { Scenario } from '../scenario/scenario.js';
import type { RunOptions } from '../sim/run.js';

export type ClusterRunOptions = Required<Pick<RunOptions, 'transport' | 'verifierPool'>> & { close(): Promise<void> };

export async function clusterRunOptions(scenario: Scenario, url: string, clusterName: string): Promise<ClusterRunOptions> {
  const nc = await connectNats(url);
  const names = subjects(clusterName);
  const policy = requestPolicy(scenario);
  const verifierPool = new NatsVerifierPool(nc, names, scenarioHash(scenario), policy, clusterSettings(scenario).verifierChunk);
  return {
    transport: new NatsTransport(nc, names, policy),
    verifierPool,
    close: async () => {
      await verifierPool.close();
      await nc.close(); // every request of the run has had its reply: nothing to drain
    },
  };
}
