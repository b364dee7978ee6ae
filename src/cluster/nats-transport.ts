// Actors' mailboxes on NATS (issue 20): the Transport of src/runtime/transport.ts, with a subject for each mailbox.
// Each actor spawned here subscribes to its subject (`<cluster>.actor.<name>`) in this process and keeps its state
// here; a delivery is a request to that subject whose reply says the handler has run. The world awaits each
// delivery before the next, so handlers run one at a time in the world's order, as with nact.
//
// A delivery is retried when its reply does not come (a lost reply, a server restarted in between): deliveries are
// numbered, and a subscriber answers a number it has handled already without running the handler again. The world
// records the message it holds in the event log, and the handler gets msgpack's copy of it: exact.ts makes the
// copy equal, value for value, or refuses a message that is not plain data.

import { randomUUID } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Message, Transport } from '../runtime/transport.js';
import { exact, unpackExact, type Exact } from './exact.js';
import { NO_REPLY, requestReply, serve, type RequestPolicy, type Subjects } from './nats.js';

/** What travels on an actor's subject. `transport` keeps two runs that share a cluster name out of each other's mailboxes. */
interface Delivery {
  transport: string;
  seq: number; // this transport's delivery number, 1, 2, …: a subscriber handles each number once
  message: Exact<Message>;
}

export class NatsTransport implements Transport {
  private readonly subscriptions = new Map<string, { stop(): void }>(); // by actor name
  private readonly owners = new Map<string, string>(); // subject → actor name: two names must not share a subject
  private readonly id = randomUUID(); // names this transport on the wire only; never part of a run's data
  private sequence = 0;

  constructor(
    private readonly nc: NatsConnection,
    private readonly subjects: Subjects,
    private readonly policy: RequestPolicy,
  ) {}

  spawn<State>(name: string, initialState: State, handle: (state: State, message: Message) => State): void {
    const subject = this.subjects.actor(name);
    const owner = this.owners.get(subject);
    if (owner !== undefined) throw new Error(`actors ${owner} and ${name} would share the NATS subject ${subject}`);
    this.owners.set(subject, name);
    let state = initialState;
    let handledSeq = 0; // the last delivery number this actor handled
    const receive = (delivery: Delivery): null | typeof NO_REPLY => {
      if (delivery.transport !== this.id) return NO_REPLY; // another run's delivery to an actor of the same name
      if (delivery.seq <= handledSeq) return null; // a retry of a delivery handled already
      handledSeq = delivery.seq; // before the handler: a retry of a delivery that threw does not run it again
      state = handle(state, unpackExact(delivery.message)); // a throw is the reply's error
      return null;
    };
    this.subscriptions.set(name, serve(this.nc, subject, receive));
  }

  has(name: string): boolean {
    return this.subscriptions.has(name);
  }

  async deliver(to: string, message: Message): Promise<void> {
    if (!this.subscriptions.has(to)) throw new Error(`no actor ${to} to deliver "${message.type}" to`);
    const what = `delivering "${message.type}" to ${to}`;
    const delivery: Delivery = { transport: this.id, seq: ++this.sequence, message: exact(message, what) };
    await requestReply<null>(this.nc, this.subjects.actor(to), delivery, this.policy, what);
  }

  /** Ends the subscriptions; the connection is its owner's to close. */
  close(): void {
    for (const subscription of this.subscriptions.values()) subscription.stop();
    this.subscriptions.clear();
    this.owners.clear();
  }
}
