// The matchmaking policies by name, as scenarios name them: the scenario schema takes its list of names and each
// policy's options from here.
import { cross } from './cross.js';
import { pfsp } from './pfsp.js';
import type { MatchPolicy } from './policy.js';
import { random } from './random.js';
import { rating } from './rating.js';
import { self } from './self.js';
import { within } from './within.js';

export const MATCH_POLICIES = { self, within, cross, random, rating, pfsp };
export type MatchPolicyName = keyof typeof MATCH_POLICIES;
export const MATCH_POLICY_NAMES = Object.keys(MATCH_POLICIES) as [MatchPolicyName, ...MatchPolicyName[]];

/** A policy by name, typed loosely (its options as parsed by its own schema). */
export const matchPolicy = (name: MatchPolicyName) => MATCH_POLICIES[name] as unknown as MatchPolicy<Record<string, unknown>>;

export { NO_HISTORY, type MatchContext, type MatchPolicy, type MemberView, type PairHistory, type PopulationShape } from './policy.js';
