// Losing the NATS server is a fault a cluster expects (issue 36). Every cluster process's connection (connectNats)
// has a watch: it says in one line when the server is lost (which server, since when, what the process holds,
// that it reconnects and for how long), reconnects with backoff, says when the server is back, and gives the
// server up after a limit, or sooner when a stop was asked while it is away. Giving up closes the connection and
// fails everything that waits on it with one ServerLostError, whose message says what the process does next.
//
// The requests and deliveries of nats.ts and nats-transport.ts wait here while the server is away, and a try that
// the server's absence broke is not counted against the responder: a server restart never passes for a lost worker.
//
// Limits (environment; wall clock, outside the replayed data, like every deadline of the cluster):
//   POPULORA_NATS_RECONNECT_SECONDS  how long a process keeps reconnecting to a lost server (default 120); then a
//                                    worker exits and a coordinator stops at its last checkpoint
//   POPULORA_NATS_DRAIN_SECONDS      how long a stop waits for an absent server (default 10), and for a drain
//
// Backoff: the wait before the next try is half the time since the loss, from 0.25 s up to 2 s (no randomness:
// a handful of processes reconnecting at once is nothing to a NATS server).

import { setTimeout as sleep } from 'node:timers/promises';
import { connect, errors, type ConnectionOptions, type NatsConnection } from '@nats-io/transport-node';
import { ClusterError, ServerLostError } from './errors.js';

/**
 * The wall clock, the only one this file reads: it paces reconnection, bounds how long a lost server is waited for,
 * and times the lines said. Nothing of a run is decided by it: a worker that gives up ends as a fault.
 */
const wallNowMs = () => Date.now(); // wall-clock-ok: connection pacing and the give-up guard, not a run decision

export interface ServerLimits {
  reconnectMs: number;
  drainMs: number;
}

export const LIMIT_VARIABLES = { reconnect: 'POPULORA_NATS_RECONNECT_SECONDS', drain: 'POPULORA_NATS_DRAIN_SECONDS' } as const;
export const DEFAULT_LIMIT_SECONDS = { reconnect: 120, drain: 10 } as const;
const MAX_LIMIT_SECONDS = 86_400;

/** The limits from the environment, each checked: a bad value is named with its variable. */
export function serverLimits(env: NodeJS.ProcessEnv = process.env): ServerLimits {
  const seconds = (key: keyof typeof LIMIT_VARIABLES) => {
    const text = env[LIMIT_VARIABLES[key]];
    if (text === undefined || text.trim() === '') return DEFAULT_LIMIT_SECONDS[key];
    const value = Number(text);
    if (!Number.isFinite(value) || value <= 0 || value > MAX_LIMIT_SECONDS) {
      throw new ClusterError(`${LIMIT_VARIABLES[key]}=${text}: give a number of seconds above 0 and at most ${MAX_LIMIT_SECONDS} (default ${DEFAULT_LIMIT_SECONDS[key]})`);
    }
    return value;
  };
  return { reconnectMs: seconds('reconnect') * 1000, drainMs: seconds('drain') * 1000 };
}

export const BACKOFF_MS = { first: 250, max: 2000 } as const;

/** The wait before the next try to reach a lost server, `sinceLossMs` after the loss. */
export function reconnectWaitMs(sinceLossMs: number): number {
  return Math.min(BACKOFF_MS.max, Math.max(BACKOFF_MS.first, sinceLossMs / 2));
}

/**
 * After a reconnection, how long "no responders" may only mean that the responder has not reconnected yet (it backs
 * off too, by at most BACKOFF_MS.max): such a try is made again instead of counting against the responder.
 */
export const SETTLE_MS = BACKOFF_MS.max + 2000;

/** Keepalive: a server that stops answering (frozen, or cut off without a reset) is seen as lost within ~80 s. */
const PING = { intervalMs: 20_000, maxOut: 3 } as const;

export interface WatchOptions {
  url: string;
  limits: ServerLimits;
  /** The process, in the lines: "engine worker e0", "the coordinator". */
  who: string;
  /** Where the lines go. */
  say: (line: string) => void;
  /** What giving up the server means for this process (the end of the error's message), given what it held. */
  consequence: (inHand: readonly string[]) => string;
}

/** A duration in the lines: "0.25 s", "120 s". */
export const seconds = (ms: number) => `${Number((ms / 1000).toFixed(2))} s`;
const clockTime = (ms: number) => new Date(ms).toTimeString().slice(0, 8); // display only
const BACKOFF_TEXT = `every ${seconds(BACKOFF_MS.first)}, backing off to ${seconds(BACKOFF_MS.max)}`;

/** Thrown inside a try that the server's loss broke: the try is made again once the server is back. */
class ServerAway extends Error {}

export class ServerWatch {
  private nc: NatsConnection | null = null;
  private lostAt: number | null = null; // wall clock ms of the current loss; null while connected
  private reconnectedAt = Number.NEGATIVE_INFINITY;
  private stop: { reason: string; at: number } | null = null;
  private giveUpTimer: NodeJS.Timeout | null = null;
  private closed = false;
  private readonly changed = new Set<() => void>(); // each called once, at the next loss, reconnection, give-up or close
  private readonly held = new Map<number, string>();
  private heldCount = 0;
  /** Losses so far: a try that saw it change was broken by the server, not by its responder. */
  epoch = 0;
  failure: ServerLostError | null = null;

  constructor(readonly options: WatchOptions) {}

  /** Starts following the connection's status. */
  attach(nc: NatsConnection): void {
    this.nc = nc;
    void (async () => {
      for await (const status of nc.status()) {
        if (status.type === 'disconnect') this.lost();
        else if (status.type === 'reconnect') this.regained();
      }
    })();
    void nc.closed().then(() => this.ended());
  }

  /** The reconnection handler's wait (ConnectionOptions.reconnectDelayHandler). */
  nextWaitMs(): number {
    return reconnectWaitMs(this.lostAt === null ? 0 : wallNowMs() - this.lostAt);
  }

  get connected(): boolean {
    return this.lostAt === null && !this.closed;
  }

  /** Within SETTLE_MS of a reconnection. */
  settling(): boolean {
    return wallNowMs() - this.reconnectedAt < SETTLE_MS;
  }

  /** Notes work in hand (named in the lines) until the returned function is called. */
  hold(what: string): () => void {
    const id = this.heldCount++;
    this.held.set(id, what);
    return () => this.held.delete(id);
  }

  inHand(): string[] {
    return [...this.held.values()];
  }

  /** Resolves once the server is there; fails with the failure once it was given up, or when the connection closed. */
  async untilConnected(): Promise<void> {
    while (!this.connected) {
      this.throwIfOver();
      await this.nextChange();
    }
    this.throwIfOver();
  }

  /** Resolves once the server is given up (`failure`) or the connection is closed. */
  async whenOver(): Promise<void> {
    while (!this.failure && !this.closed) await this.nextChange();
  }

  /** `work`, or ServerAway when the server is lost before it settles (what it then rejects with is dropped). */
  unlessLost<T>(work: Promise<T>): Promise<T> {
    const epoch = this.epoch;
    work.catch(() => undefined);
    return new Promise<T>((resolve, reject) => {
      const onChange = () => {
        if (this.epoch === epoch && !this.closed && !this.failure) return void this.changed.add(onChange); // a reconnection: still the same try
        reject(this.failure ?? new ServerAway(`the NATS server at ${this.options.url} was lost`));
      };
      this.changed.add(onChange);
      const settle = () => this.changed.delete(onChange);
      work.then(
        (value) => (settle(), resolve(value)),
        (error: unknown) => (settle(), reject(error)),
      );
    });
  }

  /** Whether `error` came from a try the server's loss broke (not from the responder). */
  static brokenByServer(error: unknown): boolean {
    return error instanceof ServerAway;
  }

  /**
   * A stop was asked (`reason`: "SIGTERM"): from now on an absent server is waited for at most the drain limit,
   * counted from the later of now and the loss. Said in one line when the server is away.
   */
  stopping(reason: string): void {
    if (this.stop || this.closed) return;
    this.stop = { reason, at: wallNowMs() };
    if (this.lostAt !== null) {
      this.options.say(`${reason}: the NATS server at ${this.options.url} has been unreachable since ${clockTime(this.lostAt)}; waiting at most ${seconds(this.options.limits.drainMs)} more for it (${LIMIT_VARIABLES.drain}), then stopping with what is in hand abandoned`);
      this.arm();
    }
  }

  private throwIfOver(): void {
    if (this.failure) throw this.failure;
    if (this.closed) throw new ClusterError(`the connection to the NATS server at ${this.options.url} is closed`);
  }

  private nextChange(): Promise<void> {
    return new Promise((resolve) => this.changed.add(resolve));
  }

  private wake(): void {
    const waiters = [...this.changed];
    this.changed.clear();
    for (const waiter of waiters) waiter();
  }

  private doing(): string {
    const held = this.inHand();
    return `${this.options.who}, ${held.length > 0 ? `in hand: ${held.join('; ')}` : 'nothing in hand'}`;
  }

  private lost(): void {
    if (this.closed || this.lostAt !== null) return;
    this.epoch++;
    this.lostAt = wallNowMs();
    const { url, limits } = this.options;
    this.options.say(`lost the NATS server at ${url} at ${clockTime(this.lostAt)}; reconnecting (${BACKOFF_TEXT}) for up to ${seconds(limits.reconnectMs)} (${LIMIT_VARIABLES.reconnect}); ${this.doing()}`);
    if (this.stop) this.options.say(`${this.stop.reason}: waiting at most ${seconds(limits.drainMs)} for the NATS server (${LIMIT_VARIABLES.drain}), then stopping with what is in hand abandoned`);
    this.arm();
    this.wake();
  }

  private regained(): void {
    if (this.closed || this.lostAt === null) return;
    this.options.say(`reconnected to the NATS server at ${this.options.url} after ${seconds(wallNowMs() - this.lostAt)}; carrying on`);
    this.lostAt = null;
    this.reconnectedAt = wallNowMs();
    this.disarm();
    this.wake();
  }

  /** Sets the give-up time: the reconnect limit after the loss, or the drain limit once a stop was asked. */
  private arm(): void {
    this.disarm();
    if (this.lostAt === null) return;
    const { reconnectMs, drainMs } = this.options.limits;
    const at = Math.min(this.lostAt + reconnectMs, this.stop ? Math.max(this.lostAt, this.stop.at) + drainMs : Number.POSITIVE_INFINITY);
    this.giveUpTimer = setTimeout(() => this.giveUp(), Math.max(0, at - wallNowMs()));
    this.giveUpTimer.unref(); // the connection's own reconnection keeps the process alive meanwhile
  }

  private disarm(): void {
    if (this.giveUpTimer) clearTimeout(this.giveUpTimer);
    this.giveUpTimer = null;
  }

  private giveUp(): void {
    if (this.closed || this.lostAt === null) return;
    const { url, limits } = this.options;
    const since = clockTime(this.lostAt);
    const why = this.stop && wallNowMs() - this.lostAt < limits.reconnectMs
      ? `${this.stop.reason}, and the NATS server at ${url} has been unreachable since ${since}: gave up waiting for it after ${seconds(wallNowMs() - Math.max(this.lostAt, this.stop.at))} (${LIMIT_VARIABLES.drain})`
      : `the NATS server at ${url} has been unreachable since ${since}, for ${seconds(limits.reconnectMs)}, the limit (${LIMIT_VARIABLES.reconnect})`;
    this.failure = new ServerLostError(`${why}: ${this.options.consequence(this.inHand())}`);
    this.wake();
    void this.nc?.close();
  }

  private ended(): void {
    this.closed = true;
    this.disarm();
    this.wake();
  }
}

/** Where a connection keeps its watch (a property, so that a wrapper of the connection, a Proxy, finds it too). */
const WATCH = Symbol('populora server watch');

/** The watch of a connection made by connectWatched (every connection of populora's: nats.ts's connectNats). */
export function watchOf(nc: NatsConnection): ServerWatch {
  const watch = (nc as NatsConnection & { [WATCH]?: ServerWatch })[WATCH];
  if (!watch) throw new Error('a NATS connection without a server watch: open it with connectNats');
  return watch;
}

/** Errors of a server not (yet) there, worth another try; anything else (credentials, TLS, no such host) is final. */
function worthRetrying(error: unknown): boolean {
  if (error instanceof errors.ConnectionError || error instanceof errors.TimeoutError) return true;
  const code = (error as NodeJS.ErrnoException)?.code;
  return code !== undefined && ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN'].includes(code);
}

/**
 * Connects, waiting for a server that is not there yet as for a lost one (backoff, up to the reconnect limit, said in
 * one line), and watches the connection. `signal`: a stop asked meanwhile ends the wait (resolves null).
 */
export async function connectWatched(connection: ConnectionOptions, options: WatchOptions, signal?: AbortSignal): Promise<NatsConnection | null> {
  const watch = new ServerWatch(options);
  const settings: ConnectionOptions = { ...connection, maxReconnectAttempts: -1, reconnectDelayHandler: () => watch.nextWaitMs(), pingInterval: PING.intervalMs, maxPingOut: PING.maxOut };
  const { url, limits, say } = options;
  const started = wallNowMs();
  for (let said = false; ; said = true) {
    try {
      const nc = await connect(settings);
      if (said) say(`reached the NATS server at ${url} after ${seconds(wallNowMs() - started)}`);
      watch.attach(nc);
      Object.defineProperty(nc, WATCH, { value: watch });
      return nc;
    } catch (error) {
      if (!worthRetrying(error)) throw error;
      const waited = wallNowMs() - started;
      const why = (error as Error).message;
      if (waited >= limits.reconnectMs) throw new ServerLostError(`no NATS server answers at ${url} after ${seconds(waited)} (${why}; the limit: ${LIMIT_VARIABLES.reconnect}): start nats-server there, or check the URL`);
      if (!said) say(`waiting for the NATS server at ${url} (${why}); trying again (${BACKOFF_TEXT}) for up to ${seconds(limits.reconnectMs)} (${LIMIT_VARIABLES.reconnect})`);
      try {
        await sleep(Math.min(reconnectWaitMs(waited), limits.reconnectMs - waited), undefined, signal ? { signal } : {});
      } catch {
        return null; // stopped while waiting
      }
    }
  }
}
