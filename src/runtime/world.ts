// The world: the one object through which everything nondeterministic passes (DESIGN.md rules 1, 4, 6).
//   - the step counter and the named seeded streams;
//   - message delivery between named actors, over a transport (transport.ts: nact in one process), in supersteps:
//     the messages sent while one round is handled are the next round, delivered in a canonical order, by sender
//     and each sender's send order, never in the order a scheduler happened to run the senders. The recorder actor
//     appends each round to the event log, with its step, before it is delivered (one mailbox turn per round);
//   - external work (GPU batches, worker-pool verification): an actor never awaits it; it submits a job, and at
//     the step barrier the job's result messages are delivered sorted by request id, never by completion order.
//
// Handlers are synchronous and run one at a time in delivery order, so request ids, handed out as handlers ask,
// follow the canonical order too. The barrier delivers rounds until no message is left, flushes the services with
// pending requests, awaits their jobs, delivers the results as one round, and repeats until nothing is pending.

import { assert } from '../backend/backend.js';
import type { EventLog, RunEvent } from './event-log.js';
import { recorderHandler } from './recorder.js';
import { Streams } from './streams.js';
import { NactTransport, type Message, type Transport } from './transport.js';

export type { Message } from './transport.js';

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
const RECORDER = 'recorder';

/** A message on its way: sent in one round, delivered in the next. */
interface Envelope {
  from: string;
  to: string;
  message: Message;
}

export class World {
  step = 0;
  readonly streams: Streams;
  private readonly states = new Map<string, unknown>();
  private readonly reports: Report[] = [];
  private readonly outbox: Envelope[] = []; // sent during the round being delivered, in send order
  private readonly services: Service[] = [];
  private nextRequestId = 0;
  private failure: ActorFailure | null = null;

  constructor(
    seed: number,
    readonly log: EventLog,
    private readonly transport: Transport = new NactTransport(),
  ) {
    this.streams = new Streams(seed);
    transport.spawn(RECORDER, null, recorderHandler(log) as (state: null, message: Message) => null);
  }

  /** Spawns the actor at `name`. Its handler runs one message at a time; a throw stops the run with its context. */
  actor<State, Msg extends Message>(name: Address<Msg>, initialState: State, handler: Handler<State, NoInfer<Msg>>): void {
    assert(!this.transport.has(name), `two actors named ${name}`);
    this.transport.spawn(name, initialState, (state, message) => {
      try {
        if (this.failure) return state;
        const next = handler(state, message as Msg, this, name);
        this.states.set(name, next);
        return next;
      } catch (error) {
        this.failure ??= new ActorFailure(name, this.step, message, error);
        return state;
      }
    });
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

  /** Sends a message from one actor (or "runtime") to another that takes it: it is recorded and delivered in the next round. */
  send<M extends Message>(from: string, to: Address<M>, message: NoInfer<M>): void {
    if (!this.transport.has(to)) throw new Error(`${from} sent "${message.type}" to ${to}, which does not exist`);
    this.outbox.push({ from, to, message });
  }

  /** A fresh request id: ids order job results, so they are handed out in (deterministic) delivery order. */
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
      await this.deliverRound(deliveries.map(({ from, to, message }) => ({ from, to, message })));
    }
  }

  /** Delivers round after round until no message is left. */
  private async settle(): Promise<void> {
    while (this.outbox.length > 0) await this.deliverRound(this.nextRound());
  }

  /** What the last round sent, in canonical order: by sender, each sender's in its send order (a stable sort). */
  private nextRound(): Envelope[] {
    return this.outbox.splice(0).sort((a, b) => (a.from < b.from ? -1 : a.from > b.from ? 1 : 0));
  }

  /**
   * Records a round, then delivers it message by message (or all at once, handled in the same order, where the
   * transport can). After a failure no handler runs, and what was sent before it is recorded.
   */
  private async deliverRound(round: Envelope[]): Promise<void> {
    await this.record(round);
    if (this.transport.deliverAll) await this.transport.deliverAll(round);
    else {
      for (const { to, message } of round) {
        await this.transport.deliver(to, message);
        if (this.failure) break;
      }
    }
    if (this.failure) {
      await this.record(this.nextRound());
      throw this.failure;
    }
  }

  /** Hands a round's messages to the recorder, as one batch in delivery order. */
  private async record(round: Envelope[]): Promise<void> {
    if (round.length === 0) return;
    const events: RunEvent[] = round.map(({ from, to, message }) => ({ step: this.step, actor: from, type: message.type, payload: { to, message } }));
    await this.transport.deliver(RECORDER, { type: 'record', events } as Message);
  }

  /** Ends the step: the step's events reach the disk. */
  endStep(): void {
    assert(this.outbox.length === 0, 'endStep before the barrier: messages are still in flight');
    this.log.flush();
    this.step++;
  }

  shutdown(): void {
    this.transport.close();
    this.log.close();
  }
}
