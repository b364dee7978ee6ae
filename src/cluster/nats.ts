// How populora's processes talk over NATS (issue 20): one connection per process, with credentials from the
// environment or a file, never the command line; subjects named after the cluster and the actor or service;
// msgpack payloads; and a request that outlives a lost reply (a deadline, then another try, which the queue group
// may hand to another worker) and a lost server (server-watch.ts: it waits for the server, up to a limit).
//
// Subjects, under one cluster name (`--cluster`, default "populora"), so that runs sharing a server stay apart:
//   <cluster>.actor.<name>        one actor's mailbox (nats-transport.ts)
//   <cluster>.engine.<worker>     one engine worker's requests (remote-engine.ts); <cluster>.engine.join to find them
//   <cluster>.verify              the verifier workers' queue group (remote-verifier.ts)
//
// Environment (read by connectNats):
//   POPULORA_NATS_TOKEN           a token
//   POPULORA_NATS_USER, POPULORA_NATS_PASSWORD
//   POPULORA_NATS_CREDS           a .creds file (JWT and NKey seed)
//   POPULORA_NATS_TLS_CA, POPULORA_NATS_TLS_CERT, POPULORA_NATS_TLS_KEY   files; with any of them the connection is TLS
//   POPULORA_NATS_RECONNECT_SECONDS, POPULORA_NATS_DRAIN_SECONDS            limits on a lost server (server-watch.ts)

import { existsSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { credsAuthenticator, errors, nuid, type ConnectionOptions, type Msg, type NatsConnection } from '@nats-io/transport-node';
import { Packr } from 'msgpackr';
import { ClusterError, NoReplyError, RefusedError, RemoteError } from './errors.js';
import { connectWatched, serverLimits, ServerWatch, watchOf, type WatchOptions } from './server-watch.js';

export type { NatsConnection } from '@nats-io/transport-node';
export { ClusterError, NoReplyError, RefusedError, RemoteError, ServerLostError } from './errors.js';

const packr = new Packr({ useRecords: false, moreTypes: true }); // typed arrays travel as themselves

export const encode = (value: unknown): Uint8Array => packr.pack(value);
export const decode = <T>(data: Uint8Array): T => packr.unpack(data) as T;

export const DEFAULT_CLUSTER = 'populora';

export function subjects(cluster: string) {
  if (!/^[A-Za-z0-9_-]+$/.test(cluster)) throw new ClusterError(`--cluster "${cluster}": a cluster name is letters, digits, '_' and '-' (it is a NATS subject token)`);
  return {
    actor: (name: string) => `${cluster}.actor.${name.replace(/[^A-Za-z0-9_-]/g, '_')}`,
    engineJoin: `${cluster}.engine.join`,
    engine: (worker: string) => `${cluster}.engine.${worker}`,
    verify: `${cluster}.verify`,
  };
}

export type Subjects = ReturnType<typeof subjects>;

/** Connection options from the environment: authentication and TLS, each from a variable or a file it names. */
export function natsOptions(url: string, env: NodeJS.ProcessEnv = process.env): ConnectionOptions {
  if (/^[a-z]+:\/\/[^/]*@/i.test(url)) throw new ClusterError(`--nats ${url.replace(/\/\/[^@]*@/, '//…@')}: credentials in the URL would show in the process list; set POPULORA_NATS_TOKEN, POPULORA_NATS_USER and POPULORA_NATS_PASSWORD, or POPULORA_NATS_CREDS instead`);
  const file = (variable: string) => {
    const path = env[variable];
    if (path === undefined) return undefined;
    if (!existsSync(path)) throw new ClusterError(`${variable}=${path}: no such file`);
    return path;
  };
  const options: ConnectionOptions = { servers: url, name: `populora-${process.pid}` }; // reconnection: server-watch.ts
  if (env.POPULORA_NATS_TOKEN) options.token = env.POPULORA_NATS_TOKEN;
  if (env.POPULORA_NATS_USER) Object.assign(options, { user: env.POPULORA_NATS_USER, pass: env.POPULORA_NATS_PASSWORD ?? '' });
  const creds = file('POPULORA_NATS_CREDS');
  if (creds) options.authenticator = credsAuthenticator(readFileSync(creds));
  const [ca, cert, key] = [file('POPULORA_NATS_TLS_CA'), file('POPULORA_NATS_TLS_CERT'), file('POPULORA_NATS_TLS_KEY')];
  if (ca || cert || key) options.tls = { ...(ca ? { caFile: ca } : {}), ...(cert ? { certFile: cert } : {}), ...(key ? { keyFile: key } : {}) };
  return options;
}

/** How a process names itself in the lines about its server, and what giving the server up means for it. */
export type ConnectionRole = Partial<Pick<WatchOptions, 'who' | 'say' | 'consequence'>>;

/**
 * A watched connection (server-watch.ts): a server not there yet is waited for as a lost one is, up to the limit.
 * `signal`: a stop asked while waiting for the server resolves null.
 */
export async function connectNats(url: string, env?: NodeJS.ProcessEnv, role?: ConnectionRole): Promise<NatsConnection>;
export async function connectNats(url: string, env: NodeJS.ProcessEnv | undefined, role: ConnectionRole | undefined, signal: AbortSignal): Promise<NatsConnection | null>;
export async function connectNats(url: string, env: NodeJS.ProcessEnv = process.env, role: ConnectionRole = {}, signal?: AbortSignal): Promise<NatsConnection | null> {
  const watch: WatchOptions = {
    url,
    limits: serverLimits(env),
    who: role.who ?? 'this process',
    say: role.say ?? ((line) => console.error(line)),
    consequence: role.consequence ?? (() => 'it stops'),
  };
  try {
    return await connectWatched(natsOptions(url, env), watch, signal);
  } catch (error) {
    if (error instanceof ClusterError) throw error;
    throw new ClusterError(`cannot reach the NATS server at ${url}: ${(error as Error).message} (is nats-server running there, and are the credentials right?)`);
  }
}

/** A reply on the wire: the value, or the error the responder met (named, for the asker to throw or act on). */
export type Reply<T> = { ok: true; value: T } | { ok: false; error: string; refused?: boolean };

export interface RequestPolicy {
  deadlineMs: number; // how long one try waits for its reply (wall clock, outside the replayed data)
  tries: number; // tries before giving up (each may reach another member of a queue group)
}

/**
 * A request that is retried when its reply does not come (no responder yet, a lost reply, a server restart).
 * Only for idempotent requests: a responder that sees a request twice must answer it the same way (see
 * remote-engine.ts: state-changing requests carry an operation number the worker remembers).
 *
 * Payloads over the server's max_payload (1 MiB by default; an adapter's state is often more) travel in parts:
 * a large request is sent part by part, then asked for by its transfer id; a large reply comes back as a transfer
 * id whose parts are fetched one by one. Parts go to the same subject, so only a subject with one responder (an
 * engine worker's) may carry them: a queue group's parts could reach different members.
 */
export async function requestReply<T>(nc: NatsConnection, subject: string, payload: unknown, policy: RequestPolicy, what: string): Promise<T> {
  const ask = async <R>(data: Uint8Array): Promise<R> => {
    const reply = decode<Reply<R>>(await requestBytes(nc, subject, data, policy, what));
    if (reply.ok) return reply.value;
    throw new (reply.refused ? RefusedError : RemoteError)(`${what}: ${reply.error}`);
  };
  const data = encode(payload);
  let reply: T | { [TRANSFER]: Transfer };
  if (data.length <= partLimit(nc)) reply = await ask(data);
  else {
    const size = partSize(nc);
    const transfer = { id: nuid.next(), count: Math.ceil(data.length / size) };
    for (let index = 0; index < transfer.count; index++) await ask(encode({ [UPLOAD]: { ...transfer, index, bytes: data.subarray(index * size, (index + 1) * size) } }));
    reply = await ask(encode({ [ASSEMBLE]: transfer }));
  }
  if (!isTransfer(reply)) return reply;
  const { id, count } = reply[TRANSFER];
  const parts: Uint8Array[] = [];
  for (let index = 0; index < count; index++) parts.push(await ask<Uint8Array>(encode({ [DOWNLOAD]: { id, index } })));
  return decode<T>(Buffer.concat(parts));
}

/**
 * One request's bytes, tried `policy.tries` times. A try that the server's loss broke is made again once the server
 * is back and not counted, nor is "no responders" just after a reconnection (the responder may not be back yet).
 */
async function requestBytes(nc: NatsConnection, subject: string, data: Uint8Array, policy: RequestPolicy, what: string): Promise<Uint8Array> {
  const watch = watchOf(nc);
  const release = watch.hold(what);
  let lastError: unknown = null;
  try {
    for (let attempt = 0; attempt < policy.tries; ) {
      await watch.untilConnected(); // the failure, once the server is given up
      try {
        return (await watch.unlessLost(nc.request(subject, data, { timeout: policy.deadlineMs }))).data;
      } catch (error) {
        lastError = error;
        if (ServerWatch.brokenByServer(error)) continue;
        if (watch.failure) throw watch.failure;
        if (nc.isClosed()) break;
        if (isNoResponders(error) && watch.settling()) {
          await sleep(SETTLE_POLL_MS);
          continue;
        }
        attempt++;
      }
    }
  } finally {
    release();
  }
  throw new NoReplyError(`${what}: no reply on ${subject} after ${policy.tries} tries of ${policy.deadlineMs} ms (${(lastError as Error)?.message ?? 'no responder'})`);
}

/** How often a request asks again while its responder may still be reconnecting. */
const SETTLE_POLL_MS = 250;

const isNoResponders = (error: unknown) => error instanceof errors.NoRespondersError || (error instanceof errors.RequestError && error.isNoResponders());

const [UPLOAD, ASSEMBLE, DOWNLOAD, TRANSFER] = ['$upload', '$assemble', '$download', '$transfer'] as const;
interface Transfer {
  id: string;
  count: number;
}
const isTransfer = (value: unknown): value is { [TRANSFER]: Transfer } => typeof value === 'object' && value !== null && TRANSFER in value;

/** The most bytes one message carries here: the server's max_payload, less room for the envelope. */
const partLimit = (nc: NatsConnection) => (nc.info?.max_payload ?? 1024 * 1024) - 4096;
/** A part's bytes: a part and its envelope stay under partLimit (requests and replies here, deliveries in nats-transport.ts). */
export const partSize = (nc: NatsConnection) => partLimit(nc) - 1024;

/** Transfers a responder keeps (large requests being uploaded, large replies being fetched): older ones are dropped. */
const KEPT_TRANSFERS = 8;

/** What a handler returns to leave a request unanswered (it was meant for another run's responder). */
export const NO_REPLY = Symbol('no reply');

/** A responder of `serve`. */
export interface Responder {
  /**
   * Stops taking requests: the server is told (a drain of the subscription), and what it had sent before is still
   * answered. A server that does not confirm within `limitMs` (away, or not answering) is not waited for: the
   * subscription is then closed here.
   */
  stop(limitMs: number): Promise<void>;
  /** Settles once the subscription is closed and every request it took has its reply sent. */
  done: Promise<void>;
}

export interface ServeOptions<Req> {
  queue?: string; // the queue group, for a pool of responders
  describe?: (request: Req) => string; // names a request in hand in the lines about a lost server
}

/** Answers requests on `subject` with `handle`'s value or its error, one request at a time, in arrival order. */
export function serve<Req, Res>(nc: NatsConnection, subject: string, handle: (request: Req) => Promise<Res | typeof NO_REPLY> | Res | typeof NO_REPLY, options: ServeOptions<Req> = {}): Responder {
  const watch = watchOf(nc);
  const handleHeld = async (request: Req) => {
    const release = watch.hold(options.describe?.(request) ?? `a request on ${subject}`);
    try {
      return await handle(request);
    } finally {
      release();
    }
  };
  const uploads = new Map<string, Uint8Array[]>();
  const downloads = new Map<string, Uint8Array>();
  const keep = <V>(map: Map<string, V>, id: string, value: V) => {
    map.set(id, value);
    if (map.size > KEPT_TRANSFERS) map.delete(map.keys().next().value!);
  };
  const answer = async (data: Uint8Array): Promise<unknown> => {
    const request = decode<Record<string, unknown>>(data);
    if (typeof request === 'object' && request !== null) {
      if (UPLOAD in request) {
        const { id, index, count, bytes } = request[UPLOAD] as Transfer & { index: number; bytes: Uint8Array };
        if (!uploads.has(id)) keep(uploads, id, new Array<Uint8Array>(count));
        uploads.get(id)![index] = bytes;
        return null;
      }
      if (ASSEMBLE in request) {
        const { id, count } = request[ASSEMBLE] as Transfer;
        const parts = uploads.get(id);
        if (!parts || parts.filter(Boolean).length !== count) throw new Error(`transfer ${id}: parts are missing (sent to a queue group, or dropped after ${KEPT_TRANSFERS} newer transfers)`);
        uploads.delete(id);
        return handleHeld(decode<Req>(Buffer.concat(parts)));
      }
      if (DOWNLOAD in request) {
        const { id, index } = request[DOWNLOAD] as { id: string; index: number };
        const bytes = downloads.get(id);
        if (!bytes) throw new Error(`transfer ${id}: no such reply kept here (dropped after ${KEPT_TRANSFERS} newer ones)`);
        const size = partSize(nc);
        return bytes.subarray(index * size, (index + 1) * size);
      }
    }
    return handleHeld(request as Req);
  };
  const respond = async (message: Msg) => {
    let reply: Reply<unknown>;
    try {
      const value = await answer(message.data);
      if (value === NO_REPLY) return;
      reply = { ok: true, value };
    } catch (error) {
      reply = { ok: false, error: (error as Error)?.message ?? String(error), ...(error instanceof RefusedError ? { refused: true } : {}) };
    }
    let bytes = encode(reply);
    if (bytes.length > partLimit(nc)) {
      const id = nuid.next();
      keep(downloads, id, encode((reply as { value: unknown }).value));
      bytes = encode({ ok: true, value: { [TRANSFER]: { id, count: Math.ceil(downloads.get(id)!.length / partSize(nc)) } } });
    }
    if (!nc.isClosed()) message.respond(bytes); // else the reply is lost with the connection: its asker tries again
  };
  let queued = Promise.resolve(); // one request at a time, in arrival order
  const subscription = nc.subscribe(subject, {
    ...(options.queue ? { queue: options.queue } : {}),
    callback: (error, message) => {
      if (!error) queued = queued.then(() => respond(message));
    },
  });
  return {
    stop: async (limitMs) => {
      const confirmed = await Promise.race([subscription.drain().then(() => true, () => false), sleep(limitMs, false, { ref: false })]);
      if (!confirmed) subscription.unsubscribe(); // what the server still sends is lost; its asker tries again
    },
    done: subscription.closed.then(() => queued),
  };
}

