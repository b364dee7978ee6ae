// The world: recorded delivery in canonical rounds, and job results delivered in request-id order whatever order
// they finish in.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { EventLog, readEventLog } from '../src/runtime/event-log.js';
import { address, delivery, World, type Address, type Delivery, type Handler, type Message } from '../src/runtime/world.js';

const dir = mkdtempSync(join(tmpdir(), 'populora-world-'));

interface Ask extends Message { type: 'ask'; n: number }
interface Answer extends Message { type: 'answer'; n: number; square: number }

/** Three askers each ask a slow "squarer" service twice per step; answers must arrive in request-id order. */
async function run(file: string, finishOrder: 'forward' | 'reverse'): Promise<{ hash: string; received: Record<string, number[]> }> {
  const world = new World(5, new EventLog(file));
  const received: Record<string, number[]> = { 'asker-0': [], 'asker-1': [], 'asker-2': [] };
  const queue: { requestId: number; replyTo: Address<Answer>; n: number }[] = [];
  const askers = ['asker-0', 'asker-1', 'asker-2'].map((name) => address<Ask | Answer>(name));
  world.service({
    name: 'squarer',
    hasPending: () => queue.length > 0,
    flush: async () => {
      const jobs = queue.splice(0);
      // Results finish in a chosen order (as GPU or worker results may): the world must not care.
      const finished: Delivery[] = [];
      for (const job of finishOrder === 'reverse' ? [...jobs].reverse() : jobs) {
        await new Promise<void>((resolve) => setImmediate(resolve));
        finished.push(delivery(job.requestId, job.replyTo, { type: 'answer', n: job.n, square: job.n * job.n }));
      }
      return finished;
    },
  });
  for (const name of askers) {
    world.actor<number, Ask | Answer>(name, 0, (count, message, w, self) => {
      if (message.type === 'ask') {
        for (const n of [message.n, message.n + 10]) queue.push({ requestId: w.requestId(), replyTo: self, n });
        return count;
      }
      received[self]!.push(message.square);
      return count + 1;
    });
  }
  for (let step = 0; step < 2; step++) {
    askers.forEach((name, i) => world.send('runtime', name, { type: 'ask', n: step * 3 + i }));
    await world.barrier();
    world.endStep();
  }
  world.shutdown();
  return { hash: readEventLog(file).hash, received };
}

describe('the world', () => {
  it('delivers job results by request id, so the log does not depend on completion order', async () => {
    const [forward, reverse] = [await run(join(dir, 'f.msgpack'), 'forward'), await run(join(dir, 'r.msgpack'), 'reverse')];
    expect(reverse.hash).toBe(forward.hash);
    expect(reverse.received).toEqual(forward.received);
    expect(forward.received).toEqual({ 'asker-0': [0, 100, 9, 169], 'asker-1': [1, 121, 16, 196], 'asker-2': [4, 144, 25, 225] });
  });

  it('delivers each round in canonical order, by sender and each sender\'s send order, not in the order the senders ran', async () => {
    type Note = { type: 'note'; text: string };
    const file = join(dir, 'canonical.msgpack');
    const world = new World(2, new EventLog(file));
    const heard: string[] = [];
    const sink = address<Note>('sink');
    world.actor<null, Note>(sink, null, (state, message, w) => {
      heard.push(`${message.text}#${w.requestId()}`); // request ids follow delivery order too
      return state;
    });
    const [b, a] = [address<Note>('b'), address<Note>('a')];
    const relay: Handler<null, Note> = (state, message, w, self) => {
      for (let i = 0; i < (self === b ? 2 : 1); i++) w.send(self, sink, { type: 'note', text: `${self}${i} after ${message.text}` });
      return state;
    };
    world.actor(b, null, relay);
    world.actor(a, null, relay);
    world.send('runtime', b, { type: 'note', text: 'first' }); // b runs before a...
    world.send('runtime', a, { type: 'note', text: 'second' });
    await world.barrier();
    world.endStep();
    world.shutdown();
    // ...but a's message reaches the sink first: a < b; b's two keep the order b sent them in.
    expect(heard).toEqual(['a0 after second#0', 'b0 after first#1', 'b1 after first#2']);
    const recorded = readEventLog(file).events.map((e) => `${e.actor}->${(e.payload as { to: string }).to}`);
    expect(recorded).toEqual(['runtime->b', 'runtime->a', 'a->sink', 'b->sink', 'b->sink']);
  });

  it('stops the run with the failing actor, its step and message', async () => {
    const world = new World(1, new EventLog(join(dir, 'fail.msgpack')));
    const fragile = address<Message>('fragile');
    world.actor<null, Message>(fragile, null, () => {
      throw new Error('boom');
    });
    world.send('runtime', fragile, { type: 'poke' });
    await expect(world.barrier()).rejects.toThrow('actor fragile failed at step 0 on message "poke": boom');
    world.shutdown();
    expect(readEventLog(join(dir, 'fail.msgpack')).events.map((e) => e.type)).toEqual(['poke']);
  });
});
