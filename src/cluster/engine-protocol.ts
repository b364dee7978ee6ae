// What the coordinator and its engine workers say to each other (NATS request/reply, msgpack; nats.ts), and the
// rule that shards the adapter slots over the workers. Every request carries the coordinator's scenario hash: a
// worker started for another scenario refuses it.
//
// A shard is a fixed set of slots; which worker holds it may change (a lost worker's shard is given to another),
// and which worker holds it never changes a bit of the run. State-changing requests (train, evolve) carry an
// operation number: a worker answers a repeated number (a reply lost on the way) from memory instead of applying
// the operation twice.

import type { GenerationRequest, GenerationResult } from '../model/generate.js';
import type { FormatName } from '../domains/domain.js';
import type { EvolveSpec, SlotState, TrainResult } from '../engine/core.js';
import type { LoraAdapter } from '../model/peft.js';
import type { AdamWSlotState } from '../train/adamw.js';
import type { RlSample } from '../train/steps.js';

/** Scratch slots in a shard's bank: a crossover's two parents, when both live on other shards. */
export const SCRATCH_SLOTS = 2;

export type EngineRequest = { scenarioHash: string } & (
  | { type: 'join' }
  | { type: 'assign'; shard: number; slots: number[]; states: Array<[slot: number, { adapter: LoraAdapter; optimizer: AdamWSlotState | null }]> }
  | { type: 'generate'; shard: number; requests: GenerationRequest[]; formats: Array<FormatName | null> }
  | { type: 'train'; shard: number; op: number; samples: RlSample[] }
  | { type: 'evolve'; shard: number; op: number; spec: EvolveSpec; parents: Array<[slot: number, SlotState]> }
  | { type: 'release'; shard: number }
);

/** What each request is answered with. `states`: the slots the request changed, after it (the coordinator's copy). */
export interface EngineReplies {
  join: { worker: string };
  assign: { states: Array<[number, SlotState]> };
  generate: GenerationResult[];
  train: { result: TrainResult; states: Array<[number, SlotState]> };
  evolve: { states: Array<[number, SlotState]> };
  release: null;
}

export type Assignment = 'round-robin' | 'blocks';

/** The shard of each slot: slot s to s mod N (round-robin), or contiguous blocks of about S/N slots. */
export function shardOf(slot: number, slots: number, shards: number, assignment: Assignment): number {
  return assignment === 'round-robin' ? slot % shards : Math.floor((slot * shards) / slots);
}

/** Each shard's slots, ascending. A shard may be empty when there are more workers than slots. */
export function shardSlots(slots: number, shards: number, assignment: Assignment): number[][] {
  const out = Array.from({ length: shards }, () => [] as number[]);
  for (let slot = 0; slot < slots; slot++) out[shardOf(slot, slots, shards, assignment)]!.push(slot);
  return out;
}
