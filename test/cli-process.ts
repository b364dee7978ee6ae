// The built `populora` command line run as a user runs it, in processes of their own, for tests that signal, kill
// or watch a command (test/nats.ts starts its cluster workers through the same registry).
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/** The built command line (tests that start processes run it as a user does). */
export const cliBinary = join(import.meta.dirname, '..', 'dist', 'src', 'cli', 'main.js');
const started: ChildProcess[] = [];

/** Records a process a test started, for killWorkerProcesses. */
export const trackProcess = (child: ChildProcess): void => void started.push(child);

/** Ends every process a test started (startWorker, spawnCli) and left running (afterEach). */
export function killWorkerProcesses(): void {
  for (const child of started.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
}

/** Waits for `done` to hold (what a process a test started brings about), polling; fails past `withinMs`, naming `what`. */
export async function until(done: () => boolean, what: string, withinMs = 60_000): Promise<void> {
  const end = performance.now() + withinMs;
  while (!done()) {
    if (performance.now() > end) throw new Error(`not within ${withinMs} ms: ${what}`);
    await sleep(25);
  }
}

/** A `populora` process a test started (spawnCli), with what it printed so far and how it ended. */
export interface CliProcess {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Settles when it exits: its code or signal, and ms from the start of the test's clock (performance.now). */
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null; atMs: number }>;
  /** Resolves once its stdout or stderr matches `pattern`; fails if it exits first or `withinMs` pass. */
  printed(pattern: RegExp, withinMs?: number): Promise<void>;
}

/** `node dist/src/cli/main.js ...args` with `env` added to the environment; ended by killWorkerProcesses if left. */
export function spawnCli(args: readonly string[], env: Record<string, string> = {}): CliProcess {
  const child = spawn('node', [cliBinary, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  trackProcess(child);
  let [stdout, stderr] = ['', ''];
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null; atMs: number }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal, atMs: performance.now() })));
  const printed = async (pattern: RegExp, withinMs = 60_000) => {
    const until = performance.now() + withinMs;
    while (!pattern.test(stdout) && !pattern.test(stderr)) {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`populora ${args[0]} exited (${child.exitCode ?? child.signalCode}) before printing ${pattern}:\n${stdout}\n${stderr}`);
      if (performance.now() > until) throw new Error(`populora ${args[0]} did not print ${pattern} within ${withinMs} ms:\n${stdout}\n${stderr}`);
      await sleep(25);
    }
  };
  return { child, stdout: () => stdout, stderr: () => stderr, exit, printed };
}
