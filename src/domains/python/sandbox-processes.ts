// How a verifier sandbox process (sandbox-process.ts) is started, and one such process seen from the parent.
//
// The fence, from the outside in:
//   - Linux namespaces (util-linux `unshare`): a network namespace with no interface up, so no socket reaches
//     anything, and a process-id namespace, so no other process can be signalled. As root directly; otherwise
//     inside a user namespace, where the kernel allows one. Node 20's permission model has no network switch,
//     so without a namespace the network stays open: `fence.network` says which, and the pool warns once.
//   - Node's permission model: reads only of the worker's own code and Pyodide's files; no writes, no child
//     processes, no worker threads, no addons, no inspector.
//   - A fixed stack: `prlimit` gives the process's main thread a 64 MiB stack and V8 is allowed 60 MiB of it, the
//     same for every worker and for `populora verify`, so a verdict never depends on which path ran it.
//   - No orphans: `setpriv --pdeathsig KILL` ends the worker when its parent dies, even mid-way through C code.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join, sep } from 'node:path';
import process from 'node:process';
import { compiledWorker } from '../../runtime/worker-threads.js';
import type { VerifyOutcome } from '../domain.js';
import { EXIT_INTERPRETER_DIED, type SandboxMessage, type SandboxRequest } from './sandbox-protocol.js';

const STACK_BYTES = 64 << 20;
const V8_STACK_KB = 60_000; // below STACK_BYTES: V8 must stop with a RangeError before the thread's stack ends
const STDERR_LINES_KEPT = 20;

export interface Fence {
  namespaces: string[]; // the `unshare` flags that worked here, or none
  network: 'none' | 'open';
  permissionFlag: string; // Node's flag for the permission model: --permission (Node >= 22) or --experimental-permission
}

let fenceOfThisHost: Fence | null = null;

/** The strongest fence this machine offers, probed once per process (each probe starts a trivial command). */
export function fence(): Fence {
  if (fenceOfThisHost) return fenceOfThisHost;
  const permissionFlag = process.allowedNodeEnvironmentFlags.has('--permission') ? '--permission' : '--experimental-permission';
  const candidates = process.platform !== 'linux' ? [] : [['--net', '--pid', '--fork', '--kill-child'], ['--user', '--map-root-user', '--net', '--pid', '--fork', '--kill-child']];
  const works = (flags: string[]) => spawnSync('unshare', [...flags, 'true'], { stdio: 'ignore' }).status === 0;
  const namespaces = candidates.find(works) ?? [];
  fenceOfThisHost = { namespaces, network: namespaces.length > 0 ? 'none' : 'open', permissionFlag };
  return fenceOfThisHost;
}

/** The files a sandbox process may read: its own compiled code, the sandbox's Python (sandbox/), and the Pyodide distribution. */
function readablePaths(worker: string): string[] {
  const dist = worker.slice(0, worker.lastIndexOf(`${sep}dist${sep}`) + `${sep}dist${sep}`.length);
  const root = dirname(dist);
  const pyodide = dirname(createRequire(import.meta.url).resolve('pyodide')) + sep; // its real path
  const pyodideAsLinked = join(root, 'node_modules', 'pyodide') + sep; // the path module resolution reads, when linked
  // Node 20 aborts on start-up (an assertion in its permission tree) if one path is granted twice: no duplicates.
  return [...new Set([dist, pyodide, pyodideAsLinked, join(root, 'src', 'domains', 'python', 'sandbox') + sep, join(root, 'package.json')])];
}

export interface SandboxProcessOptions {
  /** JavaScript that a marked job runs inside the process, standing in for an escape (tests only). */
  escapePayloadForTests?: string;
  /** Every program runs with the interpreter's real builtins, as if it had escaped Python's layers (tests only). */
  realBuiltinsForTests?: boolean;
}

/** The command line that starts one sandbox process. */
export function sandboxCommand(options: SandboxProcessOptions = {}): { command: string; args: string[]; env: NodeJS.ProcessEnv } {
  const worker = compiledWorker(new URL('./sandbox-process.js', import.meta.url));
  const { namespaces, permissionFlag } = fence();
  const node = [process.execPath, permissionFlag, ...readablePaths(worker).map((path) => `--allow-fs-read=${path}`), `--stack-size=${V8_STACK_KB}`, worker];
  // On Linux, the process this one starts is killed when this one dies (a worker stuck in C code would not notice
  // the IPC channel closing), and `unshare --kill-child` passes that on to the worker.
  const linux = process.platform === 'linux';
  const killedWithParent = linux ? ['setpriv', '--pdeathsig', 'KILL', '--'] : [];
  const fixedStack = linux ? ['prlimit', `--stack=${STACK_BYTES}`, '--'] : [];
  const line = [...killedWithParent, ...(namespaces.length > 0 ? ['unshare', ...namespaces] : []), ...fixedStack, ...node];
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, NODE_OPTIONS: '' };
  if (options.escapePayloadForTests) env.POPULORA_SANDBOX_ESCAPE_PAYLOAD = options.escapePayloadForTests;
  if (options.realBuiltinsForTests) env.POPULORA_SANDBOX_REAL_BUILTINS_FOR_TESTS = '1';
  return { command: line[0]!, args: line.slice(1), env };
}

export type ProcessResult = { kind: 'outcome'; outcome: VerifyOutcome } | { kind: 'died'; detail: string } | { kind: 'timeout' };

/** One sandbox process: started at construction, ready once its interpreter has loaded, one job at a time. */
export class SandboxProcess {
  readonly ready: Promise<void>;
  private readonly child: ChildProcess;
  private readonly stderr: string[] = [];
  private pending: { id: number; settle: (result: ProcessResult) => void } | null = null;
  private nextId = 0;
  exited = false;

  constructor(options: SandboxProcessOptions = {}) {
    const { command, args, env } = sandboxCommand(options);
    this.child = spawn(command, args, { env, stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
    this.child.stderr!.setEncoding('utf8').on('data', (text: string) => {
      this.stderr.push(...text.split('\n').filter(Boolean));
      this.stderr.splice(0, this.stderr.length - STDERR_LINES_KEPT);
    });
    this.ready = new Promise((resolve, reject) => {
      this.child.on('message', (message: SandboxMessage) => {
        if (message.type === 'ready') resolve();
        else if (this.pending?.id === message.id) {
          if (message.retire) this.kill(); // it answered a job that reached for the host: no other job for it
          this.settle({ kind: 'outcome', outcome: message.outcome });
        }
      });
      this.child.on('exit', (code, signal) => {
        this.exited = true;
        const detail = exitReason(code, signal, this.stderr);
        reject(new Error(`a verifier sandbox process did not start: ${detail}`));
        // A job still pending when its process exits was cut short.
        this.settle({ kind: 'died', detail });
      });
      this.child.on('error', reject);
    });
    this.ready.catch(() => {}); // observed by run() and by the pool's start; never an unhandled rejection
  }

  /** Runs one job; the guard counts from the moment the job is handed over, never the process's start-up. */
  async run(request: SandboxRequest, guardMs: number): Promise<ProcessResult> {
    await this.ready;
    if (this.exited) return { kind: 'died', detail: 'the process had already exited' };
    const id = this.nextId++;
    const result = new Promise<ProcessResult>((settle) => (this.pending = { id, settle }));
    const guard = AbortSignal.timeout(guardMs); // a safety net: counted fuel ends every ordinary program first
    const onGuard = () => {
      this.settle({ kind: 'timeout' });
      this.kill();
    };
    guard.addEventListener('abort', onGuard, { once: true });
    this.child.send({ id, request }, (error) => error && this.settle({ kind: 'died', detail: `the process had gone: ${error.message}` }));
    try {
      return await result;
    } finally {
      guard.removeEventListener('abort', onGuard);
    }
  }

  private settle(result: ProcessResult): void {
    const pending = this.pending;
    this.pending = null;
    pending?.settle(result);
  }

  kill(): void {
    if (this.exited) return;
    this.exited = true; // from now on no job is handed to it, whenever its exit event comes
    this.child.kill('SIGKILL');
  }
}

function exitReason(code: number | null, signal: NodeJS.Signals | null, stderr: string[]): string {
  const why =
    code === EXIT_INTERPRETER_DIED ? 'the Python interpreter died (exit 70)'
    : signal ? `killed by ${signal}`
    : `exit code ${code}`;
  const lines = stderr.filter((line) => !/ExperimentalWarning|--trace-warnings|^\s+at /.test(line));
  const tail = [...lines.filter((line) => /Error/.test(line)).slice(0, 1), ...lines.slice(-2)].join(' | ');
  return tail ? `${why}: ${tail}` : why;
}
