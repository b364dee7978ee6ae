// The replay rules at run time, for plug-ins (DESIGN.md rules 1 and 5): while a plug-in's function runs, the wall
// clock and the unseeded random sources throw, naming the plug-in and what to use instead. The lint rule holds the
// built-ins to the same; a plug-in is code the lint never saw. A call is synchronous, so the globals are swapped
// for exactly its duration and nothing else runs meanwhile.
//
// What this cannot catch: a source captured before the call (`const r = Math.random` at the module's top level),
// work an async function does after its first await, and state a plug-in keeps between calls (replay names the
// first event where that shows: docs/plugins.md).

const RANDOM_ADVICE = 'draw from the seeded stream the context gives (context.rng or context.random)';
const CLOCK_ADVICE = 'decide on the step (context.step), never on the time';

import { PluginError } from './errors.js';

/** Thrown when a plug-in reaches for the clock or unseeded randomness. */
export class PluginRuleError extends PluginError {}

type Swap = [target: object, key: string, shown: string, advice: string];

function swaps(): Swap[] {
  const list: Swap[] = [
    [Math, 'random', 'Math.random()', RANDOM_ADVICE], // wall-clock-ok: what the guard refuses, never read
    [Date, 'now', 'Date.now()', CLOCK_ADVICE], // wall-clock-ok: what the guard refuses, never read
    [globalThis, 'Date', 'new Date()', CLOCK_ADVICE], // wall-clock-ok: what the guard refuses, never read
    [performance, 'now', 'performance.now()', CLOCK_ADVICE], // wall-clock-ok: what the guard refuses, never read
    [process, 'hrtime', 'process.hrtime()', CLOCK_ADVICE],
  ];
  const crypto = globalThis.crypto as Crypto | undefined;
  if (crypto) list.push([crypto, 'getRandomValues', 'crypto.getRandomValues()', RANDOM_ADVICE], [crypto, 'randomUUID', 'crypto.randomUUID()', RANDOM_ADVICE]);
  return list;
}

const RealDate = Date;

/** A Date that still parses and formats given times, but will not tell the time. */
function dateWithoutClock(refuse: () => never): DateConstructor {
  const Guarded = function (this: unknown, ...args: unknown[]) {
    if (args.length === 0 || !new.target) refuse();
    return Reflect.construct(RealDate, args, new.target);
  } as unknown as DateConstructor;
  Object.setPrototypeOf(Guarded, RealDate);
  Object.defineProperty(Guarded, 'prototype', { value: RealDate.prototype });
  return Guarded;
}

/**
 * `fn` wrapped so that, while it runs, every clock and random source swaps() lists throws a PluginRuleError naming
 * `who` (e.g. 'the matchmaking policy ./p.js, choose()').
 */
export function guarded<A extends unknown[], R>(who: string, fn: (...args: A) => R): (...args: A) => R {
  return (...args: A): R => {
    const saved = swaps().map(([target, key, shown, advice]) => {
      const original = (target as Record<string, unknown>)[key];
      const refuse = (): never => {
        throw new PluginRuleError(`${who} called ${shown}: a plug-in's results must replay from the scenario's seed; ${advice} (docs/plugins.md, "The rules")`);
      };
      (target as Record<string, unknown>)[key] = key === 'Date' ? dateWithoutClock(refuse) : refuse;
      return [target, key, original] as const;
    });
    try {
      return fn(...args);
    } finally {
      for (const [target, key, original] of saved.reverse()) (target as Record<string, unknown>)[key] = original;
    }
  };
}
