// nats-server for tests: Debian's binary (`apt-get install nats-server`) on a free loopback port. Without it the
// NATS tests skip on a developer's machine; with POPULORA_REQUIRE_NATS=1 (set by .ci/run) they fail instead.
import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll } from 'vitest';
import { startLocalNatsServer, type LocalNatsServer } from '../src/cluster/local-server.js';

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
