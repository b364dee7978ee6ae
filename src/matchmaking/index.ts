// The matchmaking policies by name, as scenarios name them.
import { cross } from './cross.js';
import { pfsp } from './pfsp.js';
import type { MatchPolicy } from './policy.js';
import { random } from './random.js';
import { rating } from './rating.js';
import { self } from './self.js';
import { within } from './within.js';
import type { MATCHMAKING_POLICIES } from '../scenario/scenario.js';

export const MATCH_POLICIES: Record<(typeof MATCHMAKING_POLICIES)[number], MatchPolicy> = { self, within, cross, random, rating, pfsp };
export type { MatchPolicy, MatchRequest, MemberView } from './policy.js';
