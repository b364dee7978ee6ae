// A connection's watch on its NATS server (src/cluster/server-watch.ts), piece by piece, in this process: the
// limits and the backoff; a request the server's loss broke, sent again once it is back (not counted against its
// responder, even one that comes back later than the asker); a delivery asked while the server is away; a server
// given up past the limit, failing what waits on it with one error; a server not there yet at the start. Each
// request here has one try, so a try counted against the responder would fail it. (The whole processes:
// test/cluster-faults.test.ts.)
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort, startLocalNatsServer, type LocalNatsServer } from '../src/cluster/local-server.js';
import { connectNats, NO_REPLY, requestReply, serve, ServerLostError, subjects, type NatsConnection } from '../src/cluster/nats.js';
import { NatsTransport } from '../src/cluster/nats-transport.js';
import { BACKOFF_MS, DEFAULT_LIMIT_SECONDS, reconnectWaitMs, serverLimits, SETTLE_MS } from '../src/cluster/server-watch.js';
import type { Message } from '../src/runtime/transport.js';
import { until } from './cli-process.js';
import { natsInstalled } from './nats.js';

const ONE_TRY = { deadlineMs: 20_000, tries: 1 };

describe('the limits on a lost server', () => {
  it('come from the environment, with defaults, and a bad value is named with its variable', () => {
    expect(serverLimits({})).toEqual({ reconnectMs: DEFAULT_LIMIT_SECONDS.reconnect * 1000, drainMs: DEFAULT_LIMIT_SECONDS.drain * 1000 });
    expect(serverLimits({ POPULORA_NATS_RECONNECT_SECONDS: '2.5', POPULORA_NATS_DRAIN_SECONDS: '0.5' })).toEqual({ reconnectMs: 2500, drainMs: 500 });
    for (const bad of ['soon', '0', '-3', '1e9', 'Infinity']) {
      expect(() => serverLimits({ POPULORA_NATS_DRAIN_SECONDS: bad })).toThrow(`POPULORA_NATS_DRAIN_SECONDS=${bad}: give a number of seconds above 0 and at most 86400 (default 10)`);
    }
  });

  it('back off: the wait before the next try is half the time since the loss, from 0.25 s up to 2 s', () => {
    expect([0, 400, 1000, 3000, 3999, 4000, 60_000].map(reconnectWaitMs)).toEqual([250, 250, 500, 1500, 1999.5, 2000, 2000]);
    expect(SETTLE_MS).toBeGreaterThan(BACKOFF_MS.max); // a responder backing off is given time to come back
  });
});

describe.skipIf(!natsInstalled)('a connection losing its NATS server', () => {
  const opened: Array<NatsConnection | LocalNatsServer> = [];
  const server = async (port?: number) => {
    const started = await startLocalNatsServer([], 'nats-server', port);
    opened.push(started);
    return started;
  };
  const connection = async (url: string, env: NodeJS.ProcessEnv = {}, lines: string[] = []) => {
    const nc = await connectNats(url, env, { who: 'the test', say: (line) => lines.push(line), consequence: () => 'the test stops' });
    opened.push(nc);
    return nc;
  };
  afterEach(async () => {
    for (const thing of opened.splice(0)) await ('stop' in thing ? thing.stop() : thing.close());
  });

  it('sends a request the loss broke again once the server is back, and waits for a responder that comes back later', async () => {
    const nats = await server();
    const asker = await connection(nats.url);
    const first = await connection(nats.url);
    serve(first, 'echo', async (request: { n: number }) => {
      await sleep(500); // the request is in hand when the server goes
      return request.n;
    });
    await first.flush();
    const reply = requestReply<number>(asker, 'echo', { n: 7 }, ONE_TRY, 'an echo');
    await sleep(200);
    await first.close(); // this responder is gone for good; its reply is never sent
    await nats.restart();
    await sleep(1000); // the asker is back, and finds no responder for a while
    const second = await connection(nats.url);
    serve(second, 'echo', (request: { n: number }) => request.n * 2);
    expect(await reply).toBe(14); // the second responder's answer
  });

  it('holds a delivery asked while the server is away until it is back, and runs its handler once', async () => {
    const nats = await server();
    const lines: string[] = [];
    const nc = await connection(nats.url, {}, lines);
    const transport = new NatsTransport(nc, subjects('away'), ONE_TRY);
    const received: Message[] = [];
    transport.spawn('a', 0, (count, message) => (received.push(message), count + 1));
    await nc.flush();
    await nats.stop();
    await until(() => lines.length > 0, 'the client logs the server gone', 10_000);
    const delivered = transport.deliver('a', { type: 'while-away' }); // published now, the client would drop it
    await sleep(500);
    await nats.restart();
    await delivered;
    expect(received).toEqual([{ type: 'while-away' }]);
    expect(lines[0]).toMatch(new RegExp(`^lost the NATS server at ${nats.url.replace(/\./g, '\\.')} at \\d\\d:\\d\\d:\\d\\d; reconnecting \\(every 0.25 s, backing off to 2 s\\) for up to 120 s \\(POPULORA_NATS_RECONNECT_SECONDS\\); the test, nothing in hand$`));
    expect(lines.at(-1)).toMatch(/^reconnected to the NATS server at .* after [\d.]+ s; carrying on$/);
    transport.close();
  });

  it('gives the server up past the limit: what waits on it fails with one ServerLostError, and the connection closes', async () => {
    const nats = await server();
    const lines: string[] = [];
    const nc = await connection(nats.url, { POPULORA_NATS_RECONNECT_SECONDS: '1' }, lines);
    serve(nc, 'silent', () => NO_REPLY);
    await nc.flush();
    const waiting = requestReply(nc, 'silent', {}, ONE_TRY, 'a silent request');
    await sleep(100);
    await nats.stop();
    const stoppedAt = performance.now();
    await expect(waiting).rejects.toBeInstanceOf(ServerLostError);
    expect(performance.now() - stoppedAt).toBeLessThan(1000 + 10_000); // the limit, and a slack for a loaded machine
    await expect(waiting).rejects.toThrow(new RegExp(`^the NATS server at ${nats.url.replace(/\./g, '\\.')} has been unreachable since \\d\\d:\\d\\d:\\d\\d, for 1 s, the limit \\(POPULORA_NATS_RECONNECT_SECONDS\\): the test stops$`));
    expect(lines[0]).toMatch(/^lost the NATS server .* for up to 1 s .*; the test, in hand: a silent request$/);
    expect(nc.isClosed()).toBe(true);
  });

  it('waits for a server not there yet, and gives it up past the limit', async () => {
    const port = await freePort();
    const lines: string[] = [];
    const late = connection(`nats://127.0.0.1:${port}`, { POPULORA_NATS_RECONNECT_SECONDS: '30' }, lines);
    await until(() => lines.length > 0, 'the client logs that it waits for the server', 10_000);
    await server(port);
    expect((await late).isClosed()).toBe(false);
    expect(lines).toEqual([
      `waiting for the NATS server at nats://127.0.0.1:${port} (connection refused); trying again (every 0.25 s, backing off to 2 s) for up to 30 s (POPULORA_NATS_RECONNECT_SECONDS)`,
      expect.stringMatching(new RegExp(`^reached the NATS server at nats://127.0.0.1:${port} after [\\d.]+ s$`)),
    ]);

    const nowhere = await freePort();
    await expect(connection(`nats://127.0.0.1:${nowhere}`, { POPULORA_NATS_RECONNECT_SECONDS: '0.6' })).rejects.toThrow(
      new RegExp(`^no NATS server answers at nats://127.0.0.1:${nowhere} after [\\d.]+ s \\(connection refused; the limit: POPULORA_NATS_RECONNECT_SECONDS\\): start nats-server there, or check the URL$`),
    );
  });
});

