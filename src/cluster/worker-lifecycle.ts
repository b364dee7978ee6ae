// How a worker process (`populora worker`, engine or verifier) lives and stops (issue 36): it serves until the
// first SIGINT or SIGTERM, or until its server is given up (server-watch.ts), and always stops within a bounded
// time, saying how in one line, with an exit code that says whether it abandoned anything:
//
//   first signal, server there   stops taking requests (the server is told), answers those in hand, drains its
//                                connection, exits 0. Bounded by the work in hand, plus at most the drain limit
//                                (POPULORA_NATS_DRAIN_SECONDS) for each of the two confirmations it waits for.
//   first signal, server away    waits at most the drain limit for the server, then exits EXIT_ABANDONED (75):
//                                what it held is lost here, and its coordinator sends it again elsewhere.
//   second signal                exits EXIT_ABANDONED at once.
//   server lost, no signal       keeps reconnecting for POPULORA_NATS_RECONNECT_SECONDS, then exits EXIT_ABANDONED.
//
// A worker's work is never lost for the run: an unanswered request is sent again by the coordinator (remote-engine.ts
// moves a shard from its copy, remote-verifier.ts re-sends a chunk), so abandoning costs time, never a bit.

import { setTimeout as sleep } from 'node:timers/promises';
import { EXIT_ABANDONED, ClusterError, ServerLostError } from './errors.js';
import type { NatsConnection, Responder } from './nats.js';
import { LIMIT_VARIABLES, seconds, watchOf } from './server-watch.js';

/** What a worker offers its process. */
export interface ClusterWorker {
  /** Stops taking requests (each responder's drain, not waited for beyond `limitMs`). */
  stopTaking(limitMs: number): Promise<void>;
  /** Settles once every request taken has its reply sent (after stopTaking). */
  answered(): Promise<void>;
  /** Frees what the worker holds (a model, a pool): after `answered`, or when its work is abandoned. */
  free(): Promise<void>;
  /** stopTaking, answered, free: a clean stop (tests, benchmarks). */
  close(): Promise<void>;
}

/** The responders' stop and the worker's own `free`, as a ClusterWorker. */
export function clusterWorker(responders: readonly Responder[], free: () => Promise<void>): ClusterWorker {
  const stopTaking = async (limitMs: number) => void (await Promise.all(responders.map((r) => r.stop(limitMs))));
  const answered = async () => void (await Promise.all(responders.map((r) => r.done)));
  return { stopTaking, answered, free, close: async () => (await stopTaking(CLOSE_LIMIT_MS), await answered(), await free()) };
}

/** How long `close` waits for the server to confirm a responder's drain. */
const CLOSE_LIMIT_MS = 10_000;

/** How long freeing what a worker held may take when its work is abandoned, before the process exits anyway. */
const FREE_LIMIT_MS = 2000;

export interface WorkerStopOptions {
  who: string; // "engine worker e0"
  url: string;
  drainMs: number;
  say: (line: string) => void;
  signals: StopSignals;
  /** Ends the process with this code, at once (the second signal). */
  exitNow: (code: number) => void;
}

/**
 * Serves until a stop is asked or the server is given up, then stops as the header says. Resolves on a clean stop
 * (exit 0); throws a ServerLostError (exit EXIT_ABANDONED) when work was abandoned, or a ClusterError when the
 * connection closed for another reason (the server refused it).
 */
export async function serveUntilStopped(nc: NatsConnection, worker: ClusterWorker, options: WorkerStopOptions): Promise<void> {
  const watch = watchOf(nc);
  const over = watch.whenOver();
  const first = await Promise.race([options.signals.first, over.then(() => null)]);
  if (first === null) return abandon(worker, watch.failure ?? new ClusterError(`the connection to the NATS server at ${options.url} closed`));

  const held = watch.inHand();
  options.say(`${first}: ${options.who} stops taking requests${held.length === 0 ? ' (nothing in hand)' : `, answers what it holds (${held.join('; ')})`}, then drains its connection (${first} again stops at once)`);
  watch.stopping(first);
  options.signals.again((name) => {
    options.say(`${name} again: ${options.who} stops now${abandonedText(watch.inHand())}`);
    options.exitNow(EXIT_ABANDONED);
  });
  const answered = (async () => {
    await worker.stopTaking(options.drainMs);
    await worker.answered();
  })();
  await Promise.race([answered, over]);
  await Promise.race([watch.untilConnected().catch(() => undefined), over]); // the drain needs the server: wait while the watch allows
  if (watch.failure) return abandon(worker, watch.failure);
  const drained = await Promise.race([nc.drain().then(() => true, () => false), sleep(options.drainMs, false, { ref: false })]);
  if (!drained) {
    await nc.close();
    return abandon(worker, new ServerLostError(`${first}: the NATS server at ${options.url} did not confirm ${options.who}'s drain within ${seconds(options.drainMs)} (${LIMIT_VARIABLES.drain}): the replies it sent last may be lost, and their coordinator sends those requests again`));
  }
  await worker.free();
}

/** Frees what the worker held (not waiting long), then throws `error`. */
async function abandon(worker: ClusterWorker, error: Error): Promise<never> {
  await Promise.race([worker.free().catch(() => undefined), sleep(FREE_LIMIT_MS, undefined, { ref: false })]);
  throw error;
}

const abandonedText = (held: readonly string[]) => (held.length === 0 ? '' : `, abandoning ${held.join('; ')} (its coordinator sends it again)`);

/** What a worker that gives its server up says it does next (the end of its ServerLostError). */
export function workerConsequence(who: string): (held: readonly string[]) => string {
  return (held) => `${who} exits${abandonedText(held)}; start it again once the server is back`;
}

/** The process's SIGINT and SIGTERM: the first resolves `first`, each later one calls `again`'s function. */
export interface StopSignals {
  first: Promise<string>;
  again(then: (name: string) => void): void;
  dispose(): void;
}

export function stopSignals(): StopSignals {
  let seen = false;
  let onFirst: (name: string) => void = () => undefined;
  let onAgain: (name: string) => void = () => undefined;
  const first = new Promise<string>((resolve) => (onFirst = resolve));
  const handler = (name: NodeJS.Signals) => {
    if (seen) return onAgain(name);
    seen = true;
    onFirst(name);
  };
  for (const name of SIGNALS) process.on(name, handler);
  return { first, again: (then) => void (onAgain = then), dispose: () => SIGNALS.forEach((name) => process.off(name, handler)) };
}

const SIGNALS = ['SIGINT', 'SIGTERM'] as const;
