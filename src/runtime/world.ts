// The world: the one object through which everything nondeterministic passes (DESIGN.md rules 1, 4, 6).
//   - the step counter and the named seeded streams;
//   - message delivery between named actors (nact); the recorder actor appends every message to the event log
//     with its step (the world hands it the messages of each delivery round as one batch, in send order, so
//     recording costs one mailbox turn per round instead of one per message);
//   - external work (GPU batches, worker-pool verification): an actor never awaits it; it submits a job, and at
//     the step barrier the job's result messages are delivered sorted by request id, never by completion order.
//
// Handlers are synchronous, so once every delivered message has been handled the system is quiescent; the
// barrier waits for that, flushes the services with pending requests, awaits their jobs, delivers the results,
// and repeats until nothing is pending.

import { dispatch, spawn, start, stop, type Ref } from 'nact';
import { assert } from '../backend/backend.js';
import type { EventLog, RunEvent } from './event-log.js';
import { recorderHandler, type RecordMessage } from './recorder.js';
import { Streams } from './streams.js';

/** Every message is plain data with a `type` tag. */
export interface Message {
  type: string;
}

declare const takes: unique symbol;

/**
 * An actor's address: its name, typed by the messages it takes, so that `send` refuses at compile time a message
 * its receiver has no case for. At run time it is the name alone. The message type sits in a parameter position,
 * so an actor that takes more stands where one that takes fewer is asked for (a teacher's address is a reply
 * address for `generated`), never the other way round.
 */
export type Address<M extends Message> = string & { readonly [takes]: (message: M) => void };

/** The address of an actor named `name` that takes messages `M` (made once per actor kind: actors/protocol.ts). */
export const address = <M extends Message>(name: string) => name as Address<M>;

/** A message produced by a job, delivered at the barrier. Ties in requestId keep submission order. */
export interface Delivery {
  requestId: number;
  to: Address<never>; // any actor's
  message: Message;
}

/** A delivery whose message its receiver takes (checked at compile time, as `send` checks). */
export const delivery = <M extends Message>(requestId: number, to: Address<M>, message: NoInfer<M>): Delivery => ({ requestId, to, message });

/** An actor's handler: synchronous, returns the new state. `world` is how it sends and draws randomness. */
export type Handler<State, Msg extends Message> = (state: State, message: Msg, world: World, self: Address<Msg>) => State;

/** A service with requests queued until the barrier (engine, verifier): `flush` starts their job. */
export interface Service {
  name: string;
  hasPending(): boolean;
  /** Takes the pending requests and starts the work; the promise resolves to the messages it produces. */
  flush(world: World): Promise<Delivery[]>;
}

export class ActorFailure extends Error {
  constructor(
    readonly actor: string,
    readonly step: number,
    readonly failedMessage: Message,
    error: unknown,
  ) {
    super(`actor ${actor} failed at step ${step} on message "${failedMessage.type}": ${(error as Error)?.message ?? String(error)}`, { cause: error });
  }
}

/** What actors report for the run's metrics (not messages: they take no part in the simulation). */
export interface Report {
  kind: string;
  data: unknown;
}

/** Most barrier rounds in one phase: a message cascade longer than this is a protocol bug, not work. */
const MAX_BARRIER_ROUNDS = 64;
let worldCount = 0; // names each actor system: nact keeps a process-wide map of them

export class World {
  step = 0;
  readonly streams: Streams;
  // nact names an unnamed system at random; its typings omit the name option.
  private readonly system = start({ name: `populora-${worldCount++}` } as unknown as Parameters<typeof start>[0]);
  private readonly refs = new Map<string, Ref<Message>>();
  private readonly states = new Map<string, unknown>();
  private readonly reports: Report[] = [];
  private readonly recorder: Ref<RecordMessage>;
  private unrecorded: RunEvent[] = [];
  private readonly services: Service[] = [];
  private inFlight = 0;
  private nextRequestId = 0;
  private failure: ActorFailure | null = null;

  constructor(
    seed: number,
    readonly log: EventLog,
  ) {
    this.streams = new Streams(seed);
    // The recorder keeps recording after an actor fails: the log must hold everything up to the failure.
    const record = recorderHandler(log);
    const recorder = (state: null, message: RecordMessage) => {
      try {
        return record(state, message);
      } finally {
        this.inFlight--;
      }
    };
    this.recorder = spawn(this.system, recorder, 'recorder', { initialState: null }) as Ref<RecordMessage>;
  }

  /** Spawns the actor at `name`. Its handler runs one message at a time; a throw stops the run with its context. */
  actor<State, Msg extends Message>(name: Address<Msg>, initialState: State, handler: Handler<State, NoInfer<Msg>>): void {
    assert(!this.refs.has(name), `two actors named ${name}`);
    const ref = spawn(
      this.system,
      (state: State, message: Msg) => {
        try {
          if (this.failure) return state;
          const next = handler(state, message, this, name);
          this.states.set(name, next);
          return next;
        } catch (error) {
          this.failure ??= new ActorFailure(name, this.step, message, error);
          return state;
        } finally {
          this.inFlight--;
        }
      },
      name,
      { initialState },
    );
    this.refs.set(name, ref as Ref<Message>);
    this.states.set(name, initialState);
  }

  /** Every actor's state as of the last handled message (for checkpoints: plain data). */
  actorStates(): Map<string, unknown> {
    return new Map(this.states);
  }

  /** An actor's metrics record for this step (read by the run loop; never read back by actors). */
  report(kind: string, data: unknown): void {
    this.reports.push({ kind, data });
  }

  takeReports(): Report[] {
    return this.reports.splice(0);
  }

  service(service: Service): void {
    this.services.push(service);
  }

  /** Records and delivers a message from one actor (or "runtime") to another that takes it. */
  send<M extends Message>(from: string, to: Address<M>, message: NoInfer<M>): void {
    this.deliver(from, to, message);
  }

  private deliver(from: string, to: string, message: Message): void {
    const ref = this.refs.get(to);
    if (!ref) throw new Error(`${from} sent "${message.type}" to ${to}, which does not exist`);
    this.unrecorded.push({ step: this.step, actor: from, type: message.type, payload: { to, message } });
    this.inFlight++;
    dispatch(ref, message);
  }

  /** A fresh request id: ids order job results, so they are handed out in (deterministic) send order. */
  requestId(): number {
    return this.nextRequestId++;
  }

  /** The next request id to be handed out (saved in checkpoints). */
  get requestIdCounter(): number {
    return this.nextRequestId;
  }

  set requestIdCounter(value: number) {
    this.nextRequestId = value;
  }

  /** Runs the message cascade to quiescence, including every job it starts. Throws the first actor failure. */
  async barrier(): Promise<void> {
    for (let round = 0; ; round++) {
      await this.settle();
      const ready = this.services.filter((s) => s.hasPending());
      if (ready.length === 0) return;
      if (round >= MAX_BARRIER_ROUNDS) throw new Error(`step ${this.step}: messages still flowing after ${MAX_BARRIER_ROUNDS} barrier rounds`);
      const results = await Promise.all(ready.map((s) => s.flush(this)));
      const deliveries = results.flatMap((list, i) => list.map((d) => ({ ...d, from: ready[i]!.name }))).map((d, order) => ({ ...d, order }));
      deliveries.sort((a, b) => a.requestId - b.requestId || a.order - b.order);
      for (const d of deliveries) this.deliver(d.from, d.to, d.message);
    }
  }

  /** Waits until every delivered message has been handled (nact delivers one message per setImmediate). */
  private async settle(): Promise<void> {
    while (this.inFlight > 0 || this.unrecorded.length > 0) {
      this.record();
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    if (this.failure) throw this.failure;
  }

  /** Hands the messages sent since the last call to the recorder. */
  private record(): void {
    if (this.unrecorded.length === 0) return;
    this.inFlight++;
    dispatch(this.recorder, { type: 'record', events: this.unrecorded });
    this.unrecorded = [];
  }

  /** Ends the step: the step's events reach the disk. */
  endStep(): void {
    assert(this.unrecorded.length === 0 && this.inFlight === 0, 'endStep before the barrier: messages are still in flight');
    this.log.flush();
    this.step++;
  }

  shutdown(): void {
    for (const ref of this.refs.values()) stop(ref);
    stop(this.recorder);
    stop(this.system);
    this.log.close();
  }
}
