// Actors' mailboxes on NATS (issue 20): the Transport of src/runtime/transport.ts, with a subject for each mailbox.
// Each actor spawned here subscribes to its subject (`<cluster>.actor.<name>`) in this process and keeps its state
// here. A round's messages are published at once, each numbered by this transport; whatever order they come back
// in, handlers run strictly in number order, one at a time, which is the world's order, as with nact. So a round
// costs about one trip through the server, not one per message.
//
// A delivery not handled within the deadline (lost on the way) is published again; one the server's loss may have
// dropped is published again once the server is back (server-watch.ts), without waiting out the deadline and
// without counting as a try. A number handled already is dropped, so a handler never runs twice. A message over the server's max_payload
// travels in parts. The world records the message it holds in the event log, and the handler gets msgpack's copy
// of it: exact.ts makes the copy equal, value for value, or refuses a message that is not plain data.

import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Message, Transport } from '../runtime/transport.js';
import { exact, unpackExact, type Exact } from './exact.js';
import { decode, encode, NoReplyError, partSize, type RequestPolicy, type Subjects } from './nats.js';
import { ServerWatch, watchOf } from './server-watch.js';

/** What travels on an actor's subject: a delivery, or one part of a large one. */
interface Packet {
  transport: string; // keeps two runs that share a cluster name out of each other's mailboxes
  seq: number; // this transport's delivery number, 1, 2, …: handled once each, in order
  part: number;
  parts: number;
  bytes: Uint8Array; // the delivery's encoded message, or this part of it
}

export class NatsTransport implements Transport {
  private readonly handlers = new Map<string, (message: Message) => void>(); // by actor name
  private readonly subscriptions = new Map<string, { unsubscribe(): void }>();
  private readonly owners = new Map<string, string>(); // subject → actor name: two names must not share a subject
  private readonly id = randomUUID(); // names this transport on the wire only; never part of a run's data
  private sequence = 0; // the last number given out
  private handledSeq = 0; // the last number handled: every one up to it has run
  private readonly arrived = new Map<number, { to: string; parts: Array<Uint8Array | undefined> }>(); // not yet handled
  private readonly waiting: Array<{ seq: number; done: () => void; fail: (error: Error) => void }> = [];

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
    this.handlers.set(name, (message) => (state = handle(state, message)));
    const callback = (error: Error | null, msg: { data: Uint8Array }) => {
      if (!error) this.receive(name, msg.data);
    };
    this.subscriptions.set(name, this.nc.subscribe(subject, { callback }));
  }

  has(name: string): boolean {
    return this.handlers.has(name);
  }

  deliver(to: string, message: Message): Promise<void> {
    return this.deliverAll([{ to, message }]);
  }

  async deliverAll(messages: ReadonlyArray<{ to: string; message: Message }>): Promise<void> {
    const encoded = messages.map(({ to, message }) => {
      if (!this.handlers.has(to)) throw new Error(`no actor ${to} to deliver "${message.type}" to`);
      const what = `delivering "${message.type}" to ${to}`;
      return { to, what, bytes: encode(exact(message, what)) };
    });
    const packets = encoded.map(({ to, what, bytes }) => ({ to, what, packets: this.packets(++this.sequence, bytes) })); // numbered once all are valid: no gap
    const last = this.sequence;
    const watch = watchOf(this.nc);
    const release = watch.hold(`${packets[0]?.what ?? 'a delivery'}${packets.length > 1 ? ` and ${packets.length - 1} more` : ''}`);
    try {
      for (let attempt = 0; attempt < this.policy.tries; ) {
        await watch.untilConnected(); // published while the server is away, a message would be dropped
        for (const { to, packets: parts } of packets) {
          if (parts[0]!.seq > this.handledSeq) parts.forEach((packet) => this.nc.publish(this.subjects.actor(to), encode(packet)));
        }
        try {
          if (await watch.unlessLost(this.handledBy(last, this.policy.deadlineMs))) return;
        } catch (error) {
          if (ServerWatch.brokenByServer(error)) continue; // published again once the server is back
          throw error;
        }
        attempt++;
      }
    } finally {
      release();
    }
    const lost = packets.find(({ packets: parts }) => parts[0]!.seq > this.handledSeq)!;
    throw new NoReplyError(`${lost.what}: not handled after ${this.policy.tries} tries of ${this.policy.deadlineMs} ms (the NATS server drops messages)`);
  }

  /** A delivery's packets: one, or parts that each fit the server's max_payload. */
  private packets(seq: number, bytes: Uint8Array): Packet[] {
    const size = partSize(this.nc);
    const parts = Math.max(1, Math.ceil(bytes.length / size));
    return Array.from({ length: parts }, (_, part) => ({ transport: this.id, seq, part, parts, bytes: bytes.subarray(part * size, (part + 1) * size) }));
  }

  /** Resolves true once every number up to `seq` is handled, false after `deadlineMs` (wall clock, outside the replayed data). */
  private handledBy(seq: number, deadlineMs: number): Promise<boolean> {
    if (this.handledSeq >= seq) return Promise.resolve(true);
    const abort = new AbortController();
    const handled = new Promise<boolean>((resolve, reject) => this.waiting.push({ seq, done: () => resolve(true), fail: reject }));
    const expired = sleep(deadlineMs, false, { signal: abort.signal, ref: false }).catch(() => false); // never what keeps a process alive
    return Promise.race([handled, expired]).finally(() => abort.abort());
  }

  /** A packet arrived: keep it; run every delivery that is now next in order. A broken packet fails the deliveries waiting. */
  private receive(to: string, data: Uint8Array): void {
    try {
      this.keep(to, decode<Packet>(data));
    } catch (error) {
      for (const waiting of this.waiting.splice(0)) waiting.fail(error as Error);
    }
  }

  private keep(to: string, packet: Packet): void {
    if (packet.transport !== this.id || packet.seq <= this.handledSeq) return; // another run's, or handled already
    const entry = this.arrived.get(packet.seq) ?? { to, parts: Array.from({ length: packet.parts }, (): Uint8Array | undefined => undefined) };
    entry.parts[packet.part] = packet.bytes;
    this.arrived.set(packet.seq, entry);
    for (let next = this.arrived.get(this.handledSeq + 1); next && next.parts.every((p) => p !== undefined); next = this.arrived.get(this.handledSeq + 1)) {
      this.arrived.delete(this.handledSeq + 1);
      const bytes = next.parts.length === 1 ? next.parts[0]! : Buffer.concat(next.parts as Uint8Array[]);
      this.handlers.get(next.to)!(unpackExact(decode<Exact<Message>>(bytes))); // never throws: the world's wrapper catches
      this.handledSeq++;
    }
    for (let i = this.waiting.length - 1; i >= 0; i--) {
      if (this.waiting[i]!.seq <= this.handledSeq) this.waiting.splice(i, 1)[0]!.done();
    }
  }

  /** Ends the subscriptions; the connection is its owner's to close. */
  close(): void {
    for (const subscription of this.subscriptions.values()) subscription.unsubscribe();
    this.subscriptions.clear();
    this.handlers.clear();
    this.owners.clear();
  }
}
