// A nats-server on a loopback port, for tests, the cluster benchmark and trying a cluster on one machine. It is
// the Debian package's binary (`apt-get install nats-server`), started as a child process; `restart` stops it and
// starts it again on the same port (a server restarted mid-run).

import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { ClusterError } from './nats.js';

export interface LocalNatsServer {
  url: string;
  port: number;
  restart(): Promise<void>;
  stop(): Promise<void>;
}

/** A free TCP port on 127.0.0.1 (the OS picks one; it is free again once the probe closes). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const port = (probe.address() as { port: number }).port;
      probe.close(() => resolve(port));
    });
  });
}

function startServer(port: number, binary: string, args: readonly string[]): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, ['-a', '127.0.0.1', '-p', String(port), ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
    let output = '';
    const failed = (code: number | null) => reject(new ClusterError(`${binary} exited with code ${code} before it was ready: ${output.trim().split('\n').pop()}`));
    child.once('error', (error) => reject(new ClusterError(`cannot start ${binary}: ${error.message} (install it: apt-get install nats-server)`)));
    child.once('exit', failed);
    const onOutput = (chunk: Buffer) => {
      output += chunk.toString();
      if (!output.includes('Server is ready')) return;
      child.off('exit', failed); // only this listener: stopServer's comes later, and the log goes on (shutdown lines)
      child.stderr!.off('data', onOutput);
      child.stderr!.resume(); // keep reading the log, or a full pipe would block the server
      resolve(child);
    };
    child.stderr!.on('data', onOutput);
  });
}

function stopServer(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}

/** Starts nats-server on a free loopback port. `args`: extra server flags (e.g. `--auth TOKEN`). */
export async function startLocalNatsServer(args: readonly string[] = [], binary = 'nats-server'): Promise<LocalNatsServer> {
  const port = await freePort();
  let child = await startServer(port, binary, args);
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    restart: async () => {
      await stopServer(child);
      child = await startServer(port, binary, args);
    },
    stop: () => stopServer(child),
  };
}
