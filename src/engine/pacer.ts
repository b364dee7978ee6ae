// The engine's compute runs on the main thread, synchronously: while a decode step or a layer of a training
// micro-batch runs, nothing else does, not even a signal handler. A step of a real-size run lasts minutes, so the
// engine's long loops (generation's prefill chunks and decode steps, training's layers) call a Pacer between two
// pieces of work. Its pause lets the event loop turn, so that a Ctrl-C is seen and a progress bar redrawn, then
// throws RunStopped if a stop at once was asked for (populora run's second signal); its report tells where the
// phase stands (display only: nothing reads it back).
//
// Neither changes what is computed: a pause only waits, and it stops the work between two pieces or not at all.

/** Where a phase of a step stands: `done` of `total` units of work (tokens through the model). */
export interface PhaseProgress {
  phase: 'generate' | 'train';
  done: number;
  total: number;
}

/** A stop at once: the step in progress is abandoned; the run folder resumes from its last checkpoint. */
export class RunStopped extends Error {
  override name = 'RunStopped';
  constructor(readonly reason: string) {
    super(`stopped at once on ${reason}, inside a step`);
  }
}

export interface PacerOptions {
  /** Aborted: the next pause throws RunStopped (the abort's reason names the cause, e.g. SIGINT). */
  stopNow?: AbortSignal;
  onProgress?: (progress: PhaseProgress) => void;
}

export class Pacer {
  constructor(private readonly options: PacerOptions = {}) {}

  /** Lets the event loop run (timers, I/O, signal handlers), then stops here if asked to. */
  async pause(): Promise<void> {
    await new Promise<void>((resolve) => setImmediate(resolve));
    this.throwIfStopped();
  }

  throwIfStopped(): void {
    const { stopNow } = this.options;
    if (stopNow?.aborted) throw new RunStopped(String(stopNow.reason));
  }

  report(progress: PhaseProgress): void {
    this.options.onProgress?.({ ...progress, done: Math.min(progress.done, progress.total) });
  }
}
