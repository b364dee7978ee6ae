// nats-server for tests: Debian's binary (`apt-get install nats-server`) on a free loopback port. Without it the
// NATS tests skip on a developer's machine; with POPULORA_REQUIRE_NATS=1 (set by .ci/run) they fail instead.
import { spawnSync, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll } from 'vitest';
import { startLocalNatsServer, startWorkerProcess, type LocalNatsServer } from '../src/cluster/local-server.js';
import type { RunOptions } from '../src/sim/run.js';
import { cliBinary, trackProcess } from './cli-process.js';

export { cliBinary, killWorkerProcesses, spawnCli, type CliProcess } from './cli-process.js';

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

/** `populora worker FILE --nats URL --cluster NAME ...role` in a process of its own (the built CLI); resolves once it serves. */
export function startWorker(file: string, url: string, cluster: string, role: readonly string[]): Promise<ChildProcess> {
  return startWorkerProcess(cliBinary, file, url, cluster, role, trackProcess);
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
