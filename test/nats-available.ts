// Whether the cluster tests can start a nats-server here. They skip on a developer's machine without one, and fail
// where POPULORA_REQUIRE_NATS=1 says one must be there (CI installs Debian's nats-server: .ci/run).
import { spawnSync } from 'node:child_process';

export function natsServerAvailable(): boolean {
  const found = spawnSync('nats-server', ['--version']).status === 0;
  if (!found && process.env.POPULORA_REQUIRE_NATS === '1') throw new Error('POPULORA_REQUIRE_NATS=1 and no nats-server on the PATH: install it (apt-get install nats-server)');
  return found;
}
