// nats-server for tests: Debian's binary (`apt-get install nats-server`) on a free loopback port. Without it the
// NATS tests skip on a developer's machine; with POPULORA_REQUIRE_NATS=1 (set by .ci/run) they fail instead.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { startLocalNatsServer, startWorkerProcess, type LocalNatsServer } from '../src/cluster/local-server.js';
import type { RunOptions } from '../src/sim/run.js';

const installed = spawnSync('nats-server', ['--version']).status === 0;
if (!installed && process.env.POPULORA_REQUIRE_NATS === '1') throw new Error('POPULORA_REQUIRE_NATS=1 but nats-server is not installed: apt-get install nats-server (.ci/install-nats)');
if (!installed) console.warn('NATS tests skipped: nats-server is not installed (apt-get install nats-server)');

export const natsInstalled = installed;

/** A server for the test file, started before its tests and stopped after them (call at the top of a describe). */
export function localNatsServer(): { readonly server: LocalNatsServer } {
  const holder = {} as { server: LocalNatsServer };
  beforeAll(async () => {
    holder.server = await startLocalNatsServer();
  });
  afterAll(() => holder.server?.stop());
  return holder;
}

/** The built command line (tests that start processes run it as a user does). */
export const cliBinary = join(import.meta.dirname, '..', 'dist', 'src', 'cli', 'main.js');
const started: ChildProcess[] = [];

/** `populora worker FILE --nats URL --cluster NAME ...role` in a process of its own (the built CLI); resolves once it serves. */
export function startWorker(file: string, url: string, cluster: string, role: readonly string[]): Promise<ChildProcess> {
  return startWorkerProcess(cliBinary, file, url, cluster, role, (child) => started.push(child));
}

/** Ends every process a test started (startWorker, spawnCli) and left running (afterEach). */
export function killWorkerProcesses(): void {
  for (const child of started.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
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
  started.push(child);
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

/** Whether a process with this pid exists (a zombie counts: Node reaps its children on exit, so none is left). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Run options that run `act` once, just before the engine's first job of step `step`: a worker lost mid-step. */
export function beforeEngineAt(step: number, act: () => Promise<void>): Pick<RunOptions, 'wrapService'> {
  let done = false;
  return {
    wrapService: (service) =>
      service.name !== 'engine'
        ? service
        : {
            name: service.name,
            hasPending: () => service.hasPending(),
            flush: async (world) => {
              if (!done && world.step === step) {
                done = true;
                await act();
              }
              return service.flush(world);
            },
          },
  };
}
