// A scenario's cluster settings with every default filled in (a scenario without a `cluster:` section runs over
// NATS too), and the request policy they give: how long one try of a request waits, and how many tries it gets.

import { scenarioSchema, type Scenario } from '../scenario/scenario.js';
import type { RequestPolicy } from './nats.js';

export type ClusterSettings = NonNullable<Scenario['cluster']>;

/** Tries of one request: a lost reply, then a lost worker or a server restart, and the third gets through. */
export const REQUEST_TRIES = 3;

export function clusterSettings(scenario: Scenario): ClusterSettings {
  return scenario.cluster ?? scenarioSchema.shape.cluster.unwrap().parse({});
}

export function requestPolicy(scenario: Scenario): RequestPolicy {
  return { deadlineMs: clusterSettings(scenario).deadlineSeconds * 1000, tries: REQUEST_TRIES };
}
