// Stopping a long command by signals, in two stages: the first SIGINT (Ctrl-C) or SIGTERM asks for a stop at the
// next safe point (`populora run`: the end of the step in progress, which is then checkpointed; exit code 130 or
// 143) and says how to stop at once; the second stops at once (`now`: the run abandons its step, which a resume
// runs again from the last checkpoint; exit code EXIT_ABANDONED, 75). A command whose unwinding hangs past
// HARD_EXIT_MS after the second signal, or that gets a third, exits there with EXIT_ABANDONED.
//
// One place for a long-running command that stops at a safe point (`populora run`, in one process or as a cluster's
// coordinator). The signals are seen only while the event loop turns: long compute pauses for it between pieces of
// work (src/engine/pacer.ts).

import { EXIT_ABANDONED } from '../cluster/errors.js';

/** A clean stop's exit code, the shell's convention: 128 + the signal's number. */
export const SIGNAL_EXIT_CODES: Record<string, number> = { SIGINT: 130, SIGTERM: 143 };

/** How long a stop at once may take to unwind (close worker processes, release the run folder) before the process exits anyway. */
const HARD_EXIT_MS = 10_000;

export interface StopSignals {
  /** Aborted by the first signal (its reason: the signal's name). */
  afterStep: AbortSignal;
  /** Aborted by the second. */
  now: AbortSignal;
  dispose(): void;
}

export interface StopWords {
  /** What the first signal makes the command do, e.g. "finishing the step in progress, then saving a checkpoint and stopping". */
  first: string;
  /** What the second one does, e.g. "stopping now, inside the step; the run resumes from its last checkpoint". */
  second: string;
}

export function stopOnSignals(words: StopWords, log: (line: string) => void = (line) => console.error(line)): StopSignals {
  const afterStep = new AbortController();
  const now = new AbortController();
  const onSignal = (name: NodeJS.Signals) => {
    if (now.signal.aborted) {
      log(`\n${name} a third time: exiting`);
      process.exit(EXIT_ABANDONED);
    }
    if (afterStep.signal.aborted) {
      log(`\n${name} again: ${words.second}`);
      setTimeout(() => {
        log(`populora: the stop took longer than ${HARD_EXIT_MS / 1000} s to unwind: exiting`);
        process.exit(EXIT_ABANDONED);
      }, HARD_EXIT_MS).unref();
      now.abort(name);
      return;
    }
    log(`\n${name}: ${words.first} (${name === 'SIGINT' ? 'Ctrl-C' : name} again stops at once)`);
    afterStep.abort(name);
  };
  for (const name of ['SIGINT', 'SIGTERM'] as const) process.on(name, onSignal);
  return { afterStep: afterStep.signal, now: now.signal, dispose: () => ['SIGINT', 'SIGTERM'].forEach((name) => process.off(name, onSignal)) };
}
