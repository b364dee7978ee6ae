// nats-server for tests: Debian's binary (`apt-get install nats-server`) on a free loopback port. Without it the
// NATS tests skip on a developer's machine; with POPULORA_REQUIRE_NATS=1 (set by .ci/run) they fail instead.
import { spawnSync, type ChildProcess } from 'node:child_process';
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

/** Ends every worker process a test left running (afterEach). */
export function killWorkerProcesses(): void {
  for (const child of started.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
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
