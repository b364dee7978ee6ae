// An engine worker (`populora worker SCENARIO --nats URL --engine`): it loads the scenario's base model once, then
// holds the shards of the LoRA bank the coordinator assigns to it, each a LocalEngineCore over its slots (and two
// scratch slots for parents held elsewhere), and runs their generations, updates and evolution on request.
//
// Requests are handled one at a time, in arrival order (`serve`), which is the order the coordinator sends a
// shard's requests in. A train or evolve request seen again (its reply was lost) is answered from memory.
// How it stops: worker-lifecycle.ts.

import type { Backend } from '../backend/backend.js';
import { LocalEngineCore } from '../engine/core.js';
import { buildModel, coreSettings, type ModelParts } from '../sim/population.js';
import type { Scenario } from '../scenario/scenario.js';
import { SCRATCH_SLOTS, type EngineReplies, type EngineRequest } from './engine-protocol.js';
import { exact, unpackExact, type Exact } from './exact.js';
import { RefusedError, serve, type NatsConnection, type Subjects } from './nats.js';
import { clusterWorker, type ClusterWorker } from './worker-lifecycle.js';

export interface EngineWorkerOptions {
  scenario: Scenario;
  scenarioFile: string;
  scenarioHash: string;
  backend: Backend;
  id: string; // unique among the cluster's workers: its subject
}

export interface EngineWorker extends ClusterWorker {
  id: string;
}

interface Shard {
  core: LocalEngineCore;
  lastOp: { op: number; reply: unknown } | null;
}

export function startEngineWorker(nc: NatsConnection, subjects: Subjects, options: EngineWorkerOptions): EngineWorker {
  const parts: ModelParts = buildModel(options.scenario, options.backend, options.scenarioFile);
  const settings = coreSettings(options.scenario, parts);
  const shards = new Map<number, Shard>();

  const shardAt = (shard: number) => {
    const held = shards.get(shard);
    if (!held) throw new Error(`engine worker ${options.id} holds no shard ${shard} (it was restarted, or the shard was given to another worker)`);
    return held;
  };
  /** A state-changing operation, applied once whatever the number of times it is asked for. */
  const once = async <T>(shard: Shard, op: number, apply: () => Promise<T>): Promise<T> => {
    if (shard.lastOp?.op === op) return shard.lastOp.reply as T;
    const reply = await apply();
    shard.lastOp = { op, reply };
    return reply;
  };

  const handle = async (request: EngineRequest): Promise<EngineReplies[keyof EngineReplies]> => {
    if (request.scenarioHash !== options.scenarioHash) {
      throw new RefusedError(`engine worker ${options.id} was started for scenario ${options.scenario.name} (hash ${options.scenarioHash.slice(0, 12)}), not for the coordinator's (hash ${request.scenarioHash.slice(0, 12)}): start it with the scenario the coordinator runs`);
    }
    switch (request.type) {
      case 'join':
        return { worker: options.id };
      case 'assign': {
        await shards.get(request.shard)?.core.close();
        const core = new LocalEngineCore(parts.model, settings, request.slots, SCRATCH_SLOTS);
        shards.set(request.shard, { core, lastOp: null });
        core.importSlots(request.states);
        return { states: await core.exportSlots() };
      }
      case 'generate':
        return shardAt(request.shard).core.generate(request.requests, request.formats);
      case 'train': {
        const shard = shardAt(request.shard);
        return once(shard, request.op, async () => {
          const result = await shard.core.train(request.samples);
          return { result, states: await shard.core.exportSlots(result.gradNorms.map(([slot]) => slot)) };
        });
      }
      case 'evolve': {
        const shard = shardAt(request.shard);
        return once(shard, request.op, async () => {
          await shard.core.evolveWith(request.spec, new Map(request.parents));
          return { states: await shard.core.exportSlots(request.spec.children.map((c) => c.slot)) };
        });
      }
      case 'release':
        await shards.get(request.shard)?.core.close();
        shards.delete(request.shard);
        return null;
    }
  };

  // every value as sent: -0 and lone surrogates survive msgpack (exact.ts)
  const handleExact = async (request: Exact<EngineRequest>) => exact(await handle(unpackExact(request)), `engine worker ${options.id}'s reply`);
  const describe = ({ value }: Exact<EngineRequest>) => (value.type === 'join' ? 'a join request' : `${value.type} for shard ${value.shard}`);
  const servers = [serve(nc, subjects.engineJoin, handleExact, { describe }), serve(nc, subjects.engine(options.id), handleExact, { describe })];
  const free = async () => {
    for (const shard of shards.values()) await shard.core.close();
    shards.clear();
    parts.model.destroy();
  };
  return { id: options.id, ...clusterWorker(servers, free) };
}
