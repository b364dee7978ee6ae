// A nats-server on a loopback port, for tests, the cluster benchmark and trying a cluster on one machine. It is
// the Debian package's binary (`apt-get install nats-server`), started as a child process; `restart` stops it and
// starts it again on the same port (a server restarted mid-run); `pause` freezes it (SIGSTOP: a server that keeps
// its connections but answers nothing, as a hung or partitioned one) until `resume`. And `populora worker`
// processes beside it.

import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { createServer } from 'node:net';
import { ClusterError } from './errors.js';

export interface LocalNatsServer {
  url: string;
  port: number;
  restart(): Promise<void>;
  stop(): Promise<void>;
  /** Resolves once every thread of the server is stopped (a signal reaches a busy thread a little later). */
  pause(): Promise<void>;
  resume(): void;
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
    child.once('error', (error) => reject(new ClusterError(`cannot start ${binary}: ${error.message} (install it: apt-get install nats-server)`)));
    const early = (code: number | null) => reject(new ClusterError(`${binary} exited with code ${code} before it was ready: ${output.trim().split('\n').pop()}`));
    child.once('exit', early);
    const read = (chunk: Buffer) => {
      output += chunk.toString();
      if (!output.includes('Server is ready')) return;
      child.removeListener('exit', early);
      child.stderr!.removeListener('data', read).resume(); // its log is drained and dropped from here on
      resolve(child);
    };
    child.stderr!.on('data', read);
  });
}

function stopServer(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}

/** Waits until every thread of process `pid` is stopped (Linux: /proc; elsewhere a pause that is usually enough). */
async function stopped(pid: number): Promise<void> {
  const tasks = `/proc/${pid}/task`;
  if (!existsSync(tasks)) return sleep(200);
  const state = (task: string) => readFileSync(`${tasks}/${task}/stat`, 'utf8').replace(/^.*\) /s, '')[0];
  for (let tries = 0; tries < 500 && !readdirSync(tasks).every((task) => state(task) === 'T'); tries++) await sleep(2);
}

/**
 * Starts nats-server on a loopback port (`port`, or a free one). `args`: extra server flags (e.g. `--auth TOKEN`).
 * A server stopped is started again by `restart`.
 */
export async function startLocalNatsServer(args: readonly string[] = [], binary = 'nats-server', port?: number): Promise<LocalNatsServer> {
  const at = port ?? (await freePort());
  let child = await startServer(at, binary, args);
  return {
    url: `nats://127.0.0.1:${at}`,
    port: at,
    restart: async () => {
      await stopServer(child);
      child = await startServer(at, binary, args);
    },
    stop: () => stopServer(child),
    pause: async () => {
      child.kill('SIGSTOP');
      await stopped(child.pid!);
    },
    resume: () => void child.kill('SIGCONT'),
  };
}

/**
 * `node CLI worker FILE --nats URL --cluster NAME ...role` (`cli`: the built dist/src/cli/main.js); resolves once it
 * serves. `spawned` sees the process at once (to end it even if it never serves).
 */
export function startWorkerProcess(cli: string, file: string, url: string, cluster: string, role: readonly string[], spawned?: (child: ChildProcess) => void): Promise<ChildProcess> {
  const child = spawn('node', [cli, 'worker', file, '--nats', url, '--cluster', cluster, ...role], { stdio: ['ignore', 'pipe', 'pipe'] });
  spawned?.(child);
  return new Promise((resolve, reject) => {
    let [stdout, stderr] = ['', ''];
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.stdout!.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      if (/worker .*for scenario/.test(stdout)) resolve(child);
    });
    child.once('exit', (code) => reject(new Error(`the worker exited with code ${code} before it served: ${stderr}`)));
  });
}
