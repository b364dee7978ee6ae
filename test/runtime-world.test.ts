// The world: recorded delivery, and job results delivered in request-id order whatever order they finish in.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { EventLog, readEventLog } from '../src/runtime/event-log.js';
import { address, delivery, World, type Address, type Delivery, type Message } from '../src/runtime/world.js';

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
