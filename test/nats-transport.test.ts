// NatsTransport (src/cluster/nats-transport.ts) on a local nats-server: a handler receives a message equal, value
// for value, to the one the world sent (msgpack alone would not keep -0 or a lone surrogate); a delivery whose reply
// or request was lost is retried and its handler runs once; and a run over NATS has the hash of the run over nact.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Msg, MsgCallback, NatsConnection, SubscriptionOptions } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectNats, decode, encode, requestReply, serve, subjects } from '../src/cluster/nats.js';
import { NatsTransport } from '../src/cluster/nats-transport.js';
import { parseScenario } from '../src/scenario/scenario.js';
import { runScenario } from '../src/sim/run.js';
import type { Message } from '../src/runtime/transport.js';
import { localNatsServer, natsInstalled } from './nats.js';

const policy = { deadlineMs: 300, tries: 3 };

/** A connection whose subscribers lose the first message they are handed (`request`) or the reply to it (`reply`). */
function losingFirst(nc: NatsConnection, what: 'request' | 'reply'): NatsConnection {
  let lost = false;
  const subscribe = (subject: string, options: SubscriptionOptions & { callback: MsgCallback<Msg> }) =>
    nc.subscribe(subject, {
      ...options,
      callback: (error, msg) => {
        if (error || lost) return options.callback(error, msg);
        lost = true;
        if (what === 'reply') options.callback(null, new Proxy(msg, { get: (target, key) => (key === 'respond' ? () => true : Reflect.get(target, key)) }));
      },
    });
  return new Proxy(nc, { get: (target, key) => (key === 'subscribe' ? subscribe : Reflect.get(target, key)) });
}

describe.skipIf(!natsInstalled)('NatsTransport', () => {
  const nats = localNatsServer();
  let nc: NatsConnection;
  beforeAll(async () => {
    nc = await connectNats(nats.server.url);
  });
  afterAll(() => nc?.close());

  /** A transport with one actor "a" that keeps what it receives. */
  function oneActor(connection: NatsConnection, cluster: string) {
    const transport = new NatsTransport(connection, subjects(cluster), policy);
    const received: Message[] = [];
    transport.spawn('a', 0, (count, message) => {
      received.push(message);
      return count + 1;
    });
    return { transport, received };
  }

  it('hands the handler a message equal to the one sent, value for value', async () => {
    const { transport, received } = oneActor(nc, 'exact');
    const message = {
      type: 'tricky',
      missing: undefined,
      negativeZero: -0,
      nested: [{ z: -0, text: 'x\udc00' }, 0, -0.5],
      lone: 'a\ud800b',
      pair: 'a😀b',
      floats: new Float32Array([1.5, -0, NaN]),
      doubles: new Float64Array([Math.PI, -1e300]),
      bytes: new Uint8Array([0, 255]),
      ints: new Int32Array([-7]),
      numbers: [2 ** 53 - 1, -(2 ** 40), 5e-324, NaN, -Infinity, 0.1],
      nothing: null,
      flags: [true, false],
    };
    // msgpack alone writes -0 as 0 and a lone surrogate as replacement characters: the patches keep them.
    expect(Object.is(decode<{ z: number }>(encode({ z: -0 })).z, -0)).toBe(false);
    expect(decode<string>(encode('a\ud800b'))).not.toBe('a\ud800b');

    await transport.deliver('a', message);
    expect(received).toHaveLength(1);
    const got = received[0] as typeof message;
    expect(got).not.toBe(message); // a copy, through the server
    expect(got).toStrictEqual(message);
    expect(Object.keys(got)).toEqual(Object.keys(message));
    expect('missing' in got).toBe(true);
    expect(Object.is(got.negativeZero, -0)).toBe(true);
    expect(Object.is((got.nested[0] as { z: number }).z, -0)).toBe(true);
    expect((got.nested[0] as { text: string }).text).toBe('x\udc00');
    expect(got.lone).toBe('a\ud800b');
    expect(got.pair).toBe('a😀b');
    for (const key of ['floats', 'doubles', 'bytes', 'ints'] as const) {
      expect(got[key].constructor).toBe(message[key].constructor);
      expect(Buffer.from(got[key].buffer, got[key].byteOffset, got[key].byteLength)).toEqual(Buffer.from(message[key].buffer));
    }
    expect(Object.is(got.floats[1], -0)).toBe(true);
    transport.close();
  });

  it('refuses a message that is not plain data, naming where', async () => {
    const { transport, received } = oneActor(nc, 'plain');
    await expect(transport.deliver('a', { type: 'bad', payload: { seen: new Map([[1, 2]]) } } as Message)).rejects.toThrow('delivering "bad" to a: field payload.seen is a Map');
    await expect(transport.deliver('a', { type: 'bad', at: [new Date(0)] } as Message)).rejects.toThrow('field at[0] is a Date');
    await expect(transport.deliver('a', { type: 'bad', sparse: [1, , 3] } as Message)).rejects.toThrow('field sparse has a hole at index 1');
    await expect(transport.deliver('b', { type: 'x' })).rejects.toThrow('no actor b');
    expect(received).toEqual([]);
    transport.close();
  });

  it('carries a message over the server\'s max_payload in parts, and a reply likewise', async () => {
    const { transport, received } = oneActor(nc, 'big');
    const limit = nc.info!.max_payload; // nats-server's default: 1 MiB
    const big = { type: 'big', text: 'x'.repeat(Math.floor(limit * 2.5)) };
    await transport.deliver('a', big);
    expect(received).toEqual([big]);
    transport.close();
    const halves = (n: number) => Float32Array.from({ length: n }, (_, i) => i / 2);
    const responder = serve(nc, 'big.reply', (request: { n: number }) => halves(request.n));
    const reply = await requestReply<Float32Array>(nc, 'big.reply', { n: limit }, policy, 'a large reply'); // 4 bytes a number: 4 parts
    expect(reply).toEqual(halves(limit));
    await responder.stop(1000);
  });

  for (const lost of ['reply', 'request'] as const) {
    it(`retries a delivery whose ${lost} was lost, and runs its handler once`, async () => {
      const { transport, received } = oneActor(losingFirst(nc, lost), `lost-${lost}`);
      await transport.deliver('a', { type: 'first' }); // the first try gets no reply within 300 ms; the second does
      await transport.deliver('a', { type: 'second' });
      expect(received.map((m) => m.type)).toEqual(['first', 'second']);
      transport.close();
    });
  }

  it('runs a round\'s handlers in the round\'s order, whatever order its messages arrive in', async () => {
    const held: Array<() => void> = [];
    const subscribe = (subject: string, options: SubscriptionOptions & { callback: MsgCallback<Msg> }) =>
      nc.subscribe(subject, {
        ...options,
        callback: (error, msg) => {
          held.push(() => options.callback(error, msg));
          if (held.length === 3) held.splice(0).reverse().forEach((release) => release()); // the third arrives first
        },
      });
    const reversing = new Proxy(nc, { get: (target, key) => (key === 'subscribe' ? subscribe : Reflect.get(target, key)) });
    const { transport, received } = oneActor(reversing, 'reversed');
    await transport.deliverAll(['m0', 'm1', 'm2'].map((type) => ({ to: 'a', message: { type } })));
    expect(received.map((m) => m.type)).toEqual(['m0', 'm1', 'm2']);
    transport.close();
  });

  it('keeps two runs that share a cluster name out of each other\'s mailboxes', async () => {
    const [one, two] = [oneActor(nc, 'shared'), oneActor(nc, 'shared')];
    await one.transport.deliver('a', { type: 'to-one' });
    await two.transport.deliver('a', { type: 'to-two' });
    expect(one.received.map((m) => m.type)).toEqual(['to-one']);
    expect(two.received.map((m) => m.type)).toEqual(['to-two']);
    one.transport.close();
    two.transport.close();
  });

  it('gives a run the hash it has over nact', async () => {
    const scenario = parseScenario(
      `
name: transport
seed: 3
steps: 2
backend: cpu
model: { preset: tiny, seed: 1 }
population: { subpopulations: 2, teachers: 1, students: 1, lora: { rank: 4 } }
tasks: { perTeacher: 1 }
matchmaking: { policy: cross, studentsPerTask: 1 }
sampling: { answersPerStudent: 2, maxTokens: 16 }
rl: { lr: 0.01 }
evolution: { every: 2, fraction: 0.5 }
`,
      'transport.yaml',
    );
    const fresh = () => mkdtempSync(join(tmpdir(), 'populora-transport-'));
    const overNact = await runScenario(scenario, { outDir: fresh() });
    const overNats = await runScenario(scenario, { outDir: fresh(), transport: new NatsTransport(nc, subjects('run'), { deadlineMs: 10_000, tries: 3 }) });
    expect(overNats.hash).toBe(overNact.hash);
    expect(overNats.events).toBe(overNact.events);
    expect(overNact.events).toBeGreaterThan(50);
  });
});
