// The engine core of a run over NATS (the coordinator's side): the scenario's `cluster.engineWorkers` shards of the
// adapter slots (engine-protocol.ts's rule), each held by one engine worker. A step's generations and training
// samples are split by shard and sent to the shards' workers at once; each shard's results are put back in
// request order, so the engine actor sees what one process would have given it (src/engine/core.ts says why the
// bits are the same).
//
// Losing a worker. The coordinator keeps a copy of every slot's state (adapter and optimizer moments), refreshed
// by each reply that changed one. A request that gets no reply within the deadline (a killed worker: at once, "no
// responders"; a hung one: after `cluster.deadlineSeconds`) gives the worker's shards to another worker, from
// that copy, and sends the request again: the finished run is the one an uninterrupted run would have made. With
// `onWorkerLoss: wait`, it waits for a new worker to join instead. The copy is what lets a shard move; it costs
// one transfer of the changed slots per update (docs/scaling.md weighs it at scale).

import type { FormatName } from '../domains/domain.js';
import type { ChildSpec, EngineCore, EvolveSpec, SlotState, TrainResult } from '../engine/core.js';
import type { GenerationRequest, GenerationResult } from '../model/generate.js';
import type { LoraAdapter } from '../model/peft.js';
import { joinSlotStates, slotStateOf, type AdamWState } from '../train/adamw.js';
import type { RlSample } from '../train/steps.js';
import { shardOf, shardSlots, type Assignment, type EngineReplies, type EngineRequest } from './engine-protocol.js';
import { exact, unpackExact, type Exact } from './exact.js';
import { ClusterError, decode, encode, NoReplyError, requestReply, type NatsConnection, type Reply, type RequestPolicy, type Subjects } from './nats.js';
import { watchOf } from './server-watch.js';

export interface RemoteEngineOptions {
  scenarioHash: string;
  slots: number;
  shards: number; // cluster.engineWorkers
  assignment: Assignment;
  deadlineMs: number; // cluster.deadlineSeconds
  onWorkerLoss: 'reassign' | 'wait';
  /** Told of each worker lost and where its shard went (the CLI prints it; never part of the run's data). */
  onEvent?: (text: string) => void;
}

type Distributive<T> = T extends unknown ? Omit<T, 'scenarioHash'> : never;
type Request = Distributive<EngineRequest>;

export class RemoteEngineCore implements EngineCore {
  private readonly slotsOf: number[][]; // shard → its slots
  private readonly holder: string[] = []; // shard → the worker holding it
  private readonly live = new Set<string>(); // workers that have answered and not been lost
  private readonly states = new Map<number, SlotState>(); // the coordinator's copy of every slot
  private nextOp = 0;
  private readonly losing = new Map<string, Promise<void>>(); // a lost worker → its shards' reassignment

  private constructor(
    private readonly nc: NatsConnection,
    private readonly subjects: Subjects,
    private readonly options: RemoteEngineOptions,
  ) {
    this.slotsOf = shardSlots(options.slots, options.shards, options.assignment);
  }

  /** Finds the engine workers (at least one per shard, waiting up to the deadline for them) and gives out the shards. */
  static async connect(nc: NatsConnection, subjects: Subjects, options: RemoteEngineOptions): Promise<RemoteEngineCore> {
    const core = new RemoteEngineCore(nc, subjects, options);
    const workers = await core.discover(options.shards);
    workers.slice(0, options.shards).forEach((worker, shard) => (core.holder[shard] = worker));
    return core;
  }

  private get policy(): RequestPolicy {
    return { deadlineMs: this.options.deadlineMs, tries: 2 };
  }

  /**
   * Asks every engine worker to answer; returns the live ones, sorted, once at least `wanted` have (or fails). A
   * round the server's absence spoiled, or one just after a reconnection (workers reconnect too), is not counted.
   */
  private async discover(wanted: number): Promise<string[]> {
    const watch = watchOf(this.nc);
    const tries = Math.max(1, Math.ceil(this.options.deadlineMs / 1000));
    for (let attempt = 0; attempt < tries; ) {
      await watch.untilConnected();
      const epoch = watch.epoch;
      try {
        const replies = await this.nc.requestMany(this.subjects.engineJoin, encode(exact({ type: 'join', scenarioHash: this.options.scenarioHash }, 'join')), { maxWait: 1000 });
        for await (const message of replies) {
          if (message.data.length === 0) continue; // the "no responders" status message
          const reply = decode<Reply<Exact<EngineReplies['join']>>>(message.data);
          if (!reply.ok) throw new ClusterError(`an engine worker refused the coordinator: ${reply.error}`);
          this.live.add(unpackExact(reply.value).worker);
        }
      } catch (error) {
        if (error instanceof ClusterError) throw error;
        if (watch.failure) throw watch.failure;
        if (watch.connected) throw error; // not the server's absence: a bug to see
      }
      if (this.live.size >= wanted) return [...this.live].sort();
      if (watch.epoch === epoch && !watch.settling()) attempt++;
    }
    throw new ClusterError(`${this.live.size} engine worker(s) answered within ${this.options.deadlineMs} ms, and the scenario's cluster.engineWorkers asks for ${wanted}: start them with \`populora worker SCENARIO --nats URL --engine\``);
  }

  /** Sends a request to the worker holding `shard`; a lost worker's shards move (or wait) and the request is sent again. */
  private async call<K extends Request['type']>(shard: number, request: Extract<Request, { type: K }>): Promise<EngineReplies[K]> {
    for (;;) {
      const worker = this.holder[shard]!;
      try {
        const what = `engine worker ${worker} (shard ${shard}, ${request.type})`;
        return unpackExact(await requestReply<Exact<EngineReplies[K]>>(this.nc, this.subjects.engine(worker), exact({ ...request, scenarioHash: this.options.scenarioHash }, what), this.policy, what));
      } catch (error) {
        if (!(error instanceof NoReplyError)) throw error;
        await this.lose(worker, error.message);
      }
    }
  }

  /** Gives each shard the lost worker held to a live worker (or a new one, when waiting), from the coordinator's copy. */
  private lose(worker: string, why: string): Promise<void> {
    let losing = this.losing.get(worker); // shards' calls in parallel may find the same worker lost
    if (!losing) this.losing.set(worker, (losing = this.reassign(worker, why)));
    return losing;
  }

  private async reassign(worker: string, why: string): Promise<void> {
    this.live.delete(worker);
    const orphans = this.holder.flatMap((held, shard) => (held === worker ? [shard] : []));
    for (const shard of orphans) {
      const to = await this.replacement(worker);
      this.holder[shard] = to;
      this.options.onEvent?.(`engine worker ${worker} lost (${why}); shard ${shard} (slots ${this.slotsOf[shard]!.join(', ')}) goes to ${to}`);
      await this.assign(shard);
    }
  }

  /** A worker to take a shard: a spare first, else the one holding fewest shards; with `wait`, only a new one. */
  private async replacement(lost: string): Promise<string> {
    if (this.options.onWorkerLoss === 'wait' || this.live.size === 0) {
      const before = new Set(this.live);
      const found = await this.discover(before.size + 1).catch((error: unknown) => {
        throw new ClusterError(`engine worker ${lost} was lost and no worker took its place: ${(error as Error).message}`);
      });
      return found.find((w) => !before.has(w))!;
    }
    const load = (w: string) => this.holder.filter((h) => h === w).length;
    return [...this.live].sort((a, b) => load(a) - load(b) || (a < b ? -1 : 1))[0]!;
  }

  /** Hands a shard its slots' states (by default the coordinator's copy) and keeps what the worker then holds. */
  private async assign(shard: number, stateOf: (slot: number) => { adapter: LoraAdapter; optimizer: SlotState['optimizer'] | null } = (slot) => this.copyOf(slot)): Promise<void> {
    const slots = this.slotsOf[shard]!;
    const states = slots.map((slot): [number, ReturnType<typeof stateOf>] => [slot, stateOf(slot)]);
    this.keep((await this.call(shard, { type: 'assign', shard, slots, states })).states);
  }

  private copyOf(slot: number): SlotState {
    const state = this.states.get(slot);
    if (!state) throw new ClusterError(`engine: no copy of slot ${slot} to hand to a worker`);
    return state;
  }

  private keep(states: ReadonlyArray<[number, SlotState]>): void {
    for (const [slot, state] of states) this.states.set(slot, state);
  }

  private shardOf(slot: number): number {
    return shardOf(slot, this.options.slots, this.options.shards, this.options.assignment);
  }

  async load(adapters: readonly LoraAdapter[], optimizer: AdamWState | null): Promise<void> {
    await Promise.all(this.slotsOf.map((_, shard) => this.assign(shard, (slot) => ({ adapter: adapters[slot]!, optimizer: optimizer ? slotStateOf(optimizer, slot) : null }))));
  }

  async state(): Promise<{ adapters: LoraAdapter[]; optimizer: AdamWState }> {
    const all = Array.from({ length: this.options.slots }, (_, slot) => this.copyOf(slot));
    return { adapters: all.map((s) => s.adapter), optimizer: joinSlotStates(all.map((s) => s.optimizer)) };
  }

  async generate(requests: readonly GenerationRequest[], formats: ReadonlyArray<FormatName | null>): Promise<GenerationResult[]> {
    // base-model requests (slot -1) are spread by request id: they need no adapter
    const parts = this.split(requests.map((r) => (r.adapter === -1 ? r.requestId % this.options.shards : this.shardOf(r.adapter))));
    const results = new Array<GenerationResult>(requests.length);
    await Promise.all(parts.map(async (indices, shard) => {
      if (indices.length === 0) return;
      const got = await this.call(shard, { type: 'generate', shard, requests: indices.map((i) => requests[i]!), formats: indices.map((i) => formats[i]!) });
      indices.forEach((i, k) => (results[i] = got[k]!));
    }));
    return results;
  }

  async train(samples: readonly RlSample[]): Promise<TrainResult> {
    const parts = this.split(samples.map((s) => this.shardOf(s.adapter)));
    const perSample = new Array<TrainResult['perSample'][number]>(samples.length);
    const gradNorms: TrainResult['gradNorms'] = [];
    await Promise.all(parts.map(async (indices, shard) => {
      if (indices.length === 0) return;
      const { result, states } = await this.call(shard, { type: 'train', shard, op: this.nextOp++, samples: indices.map((i) => samples[i]!) });
      indices.forEach((i, k) => (perSample[i] = result.perSample[k]!));
      gradNorms.push(...result.gradNorms);
      this.keep(states);
    }));
    return { perSample, gradNorms: gradNorms.sort((a, b) => a[0] - b[0]) };
  }

  async evolve(spec: EvolveSpec): Promise<void> {
    const byShard = new Map<number, ChildSpec[]>();
    for (const child of spec.children) byShard.set(this.shardOf(child.slot), [...(byShard.get(this.shardOf(child.slot)) ?? []), child]);
    await Promise.all([...byShard].map(async ([shard, children]) => {
      const away = [...new Set(children.flatMap((c) => c.parentSlots))].filter((slot) => this.shardOf(slot) !== shard).sort((a, b) => a - b);
      const parents = away.map((slot): [number, SlotState] => [slot, this.copyOf(slot)]); // parents' factors move to the child's worker
      this.keep((await this.call(shard, { type: 'evolve', shard, op: this.nextOp++, spec: { ...spec, children }, parents })).states);
    }));
  }

  /** Item indices per shard, each in item order. */
  private split(shards: readonly number[]): number[][] {
    const out = Array.from({ length: this.options.shards }, () => [] as number[]);
    shards.forEach((shard, i) => out[shard]!.push(i));
    return out;
  }

  /**
   * Frees the shards on their workers (a worker that does not answer is not waited for; with the server away, none
   * is asked: a worker's shards are replaced by the next coordinator's anyway).
   */
  async close(): Promise<void> {
    if (!watchOf(this.nc).connected) return;
    const release = (worker: string, shard: number) => requestReply(this.nc, this.subjects.engine(worker), exact({ type: 'release', shard, scenarioHash: this.options.scenarioHash }, 'release'), { deadlineMs: this.options.deadlineMs, tries: 1 }, 'release');
    await Promise.all(this.holder.map((worker, shard) => release(worker, shard).catch(() => undefined)));
  }
}
