// The matchmaking policies by name, as scenarios name them: the built-ins below, and plug-ins registered at run time
// under their module's absolute path (src/plugins/: `matchmaking: { policy: ./my-policy.js }`). The scenario
// schema validates `matchmaking.options` with the named policy's own schema.
import { cross } from './cross.js';
import { pfsp } from './pfsp.js';
import type { MatchPolicy } from './policy.js';
import { random } from './random.js';
import { rating } from './rating.js';
import { self } from './self.js';
import { within } from './within.js';

export const MATCH_POLICIES = { self, within, cross, random, rating, pfsp };
export type BuiltInPolicyName = keyof typeof MATCH_POLICIES;
/** A built-in's name, or a plug-in's key (its module's absolute path). */
export type MatchPolicyName = string;
export const MATCH_POLICY_NAMES = Object.keys(MATCH_POLICIES) as [BuiltInPolicyName, ...BuiltInPolicyName[]];

const plugins = new Map<string, MatchPolicy<Record<string, unknown>>>();

/** Adds a plug-in policy under its key (src/plugins/ does, once it has checked the module). */
export function registerMatchPolicy(key: string, policy: MatchPolicy<Record<string, unknown>>): void {
  plugins.set(key, policy);
}

export const isMatchPolicy = (name: string): boolean => Object.hasOwn(MATCH_POLICIES, name) || plugins.has(name);

/** A policy by name, typed loosely (its options as parsed by its own schema). */
export function matchPolicy(name: MatchPolicyName): MatchPolicy<Record<string, unknown>> {
  if (Object.hasOwn(MATCH_POLICIES, name)) return MATCH_POLICIES[name as BuiltInPolicyName] as unknown as MatchPolicy<Record<string, unknown>>;
  const plugin = plugins.get(name);
  if (!plugin) throw new RangeError(`no matchmaking policy "${name}" (the built-ins are ${MATCH_POLICY_NAMES.join(', ')}; a plug-in is loaded with its scenario)`);
  return plugin;
}

export { NO_HISTORY, type MatchContext, type MatchPolicy, type MemberView, type PairHistory, type PopulationShape } from './policy.js';
