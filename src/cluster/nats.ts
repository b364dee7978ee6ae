// How populora's processes talk over NATS (issue 20): one connection per process, with credentials from the
// environment or a file, never the command line; subjects named after the cluster and the actor or service;
// msgpack payloads; and a request that outlives a lost reply (a deadline, then another try, which the queue group
// may hand to another worker).
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

import { existsSync, readFileSync } from 'node:fs';
import { connect, credsAuthenticator, type ConnectionOptions, type NatsConnection } from '@nats-io/transport-node';
import { Packr } from 'msgpackr';

export type { NatsConnection } from '@nats-io/transport-node';

/** A cluster problem a user can act on: the server, a worker, the credentials. */
export class ClusterError extends Error {}

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
  const options: ConnectionOptions = { servers: url, name: `populora-${process.pid}`, maxReconnectAttempts: -1, reconnectTimeWait: 250 };
  if (env.POPULORA_NATS_TOKEN) options.token = env.POPULORA_NATS_TOKEN;
  if (env.POPULORA_NATS_USER) Object.assign(options, { user: env.POPULORA_NATS_USER, pass: env.POPULORA_NATS_PASSWORD ?? '' });
  const creds = file('POPULORA_NATS_CREDS');
  if (creds) options.authenticator = credsAuthenticator(readFileSync(creds));
  const [ca, cert, key] = [file('POPULORA_NATS_TLS_CA'), file('POPULORA_NATS_TLS_CERT'), file('POPULORA_NATS_TLS_KEY')];
  if (ca || cert || key) options.tls = { ...(ca ? { caFile: ca } : {}), ...(cert ? { certFile: cert } : {}), ...(key ? { keyFile: key } : {}) };
  return options;
}

export async function connectNats(url: string, env: NodeJS.ProcessEnv = process.env): Promise<NatsConnection> {
  try {
    return await connect(natsOptions(url, env));
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
 */
export async function requestReply<T>(nc: NatsConnection, subject: string, payload: unknown, policy: RequestPolicy, what: string): Promise<T> {
  const data = encode(payload);
  const maxPayload = nc.info?.max_payload;
  if (maxPayload !== undefined && data.length > maxPayload) throw new ClusterError(`${what}: ${data.length} bytes, over the NATS server's max_payload of ${maxPayload} bytes; raise max_payload in the server's configuration (at most 64 MB)`);
  let lastError: unknown = null;
  for (let attempt = 0; attempt < policy.tries; attempt++) {
    try {
      const reply = decode<Reply<T>>((await nc.request(subject, data, { timeout: policy.deadlineMs })).data);
      if (reply.ok) return reply.value;
      throw new (reply.refused ? RefusedError : RemoteError)(`${what}: ${reply.error}`);
    } catch (error) {
      if (error instanceof ClusterError) throw error;
      lastError = error;
      if (nc.isClosed()) break;
      await nc.flush().catch(() => undefined); // waits out a reconnection before the next try
    }
  }
  throw new NoReplyError(`${what}: no reply on ${subject} after ${policy.tries} tries of ${policy.deadlineMs} ms (${(lastError as Error)?.message ?? 'no responder'})`);
}

/** Answers requests on `subject` (in a queue group when `queue` is given) with `handle`'s value or its error. */
export function serve<Req, Res>(nc: NatsConnection, subject: string, handle: (request: Req) => Promise<Res> | Res, queue?: string): { stop(): void; done: Promise<void> } {
  const subscription = nc.subscribe(subject, queue ? { queue } : {});
  const done = (async () => {
    for await (const message of subscription) {
      let reply: Reply<Res>;
      try {
        reply = { ok: true, value: await handle(decode<Req>(message.data)) };
      } catch (error) {
        reply = { ok: false, error: (error as Error)?.message ?? String(error), ...(error instanceof RefusedError ? { refused: true } : {}) };
      }
      message.respond(encode(reply));
    }
  })();
  return { stop: () => subscription.unsubscribe(), done };
}

/** A worker's refusal of a coordinator (another scenario): final, the asker does not try another worker. */
export class RefusedError extends ClusterError {}

/** The responder failed on the request (its error, named): final, as it would be in one process. */
export class RemoteError extends ClusterError {}

/** No responder answered in time: the responder may be lost (a worker to replace, a server to wait for). */
export class NoReplyError extends ClusterError {}
