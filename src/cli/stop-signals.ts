// Stopping a long command by signals, in two stages: the first SIGINT (Ctrl-C) or SIGTERM asks for a stop at the
// next safe point (`populora run`: the end of the step in progress, which is then checkpointed) and says how to stop
// at once; the second stops at once (`now`: the run abandons its step; it resumes from its last checkpoint). A
// command whose unwinding hangs past HARD_EXIT_MS after the second signal, or that gets a third, exits there.
//
// One place for every long-running command (`populora run`, and a cluster's coordinator and workers), so that they
// all say the same and stop the same way. The signals are seen only while the event loop turns: long compute pauses
// for it between pieces of work (src/engine/pacer.ts).

/** The shell's convention: 128 + the signal's number. */
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
    const code = SIGNAL_EXIT_CODES[name] ?? 1;
    if (now.signal.aborted) {
      log(`\n${name} a third time: exiting`);
      process.exit(code);
    }
    if (afterStep.signal.aborted) {
      log(`\n${name} again: ${words.second}`);
      setTimeout(() => {
        log(`populora: the stop took longer than ${HARD_EXIT_MS / 1000} s to unwind: exiting`);
        process.exit(code);
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
