// A peer in a child process driven by JSON lines: one request a line on its stdin, one reply a line on its stdout
// (a reply with `error` rejects). PyTorch's step (torch_lora_step.py) and a populora build's side
// (populora-build.ts) both speak it.

import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';

export class JsonLinesProcess {
  private readonly replies: Array<(line: string) => void> = [];

  /** exitHint: what to say after "exited (status N)" (what is likely missing). */
  constructor(private readonly name: string, private readonly child: ChildProcessWithoutNullStreams, private readonly exitHint = '') {
    createInterface({ input: child.stdout }).on('line', (line) => this.replies.shift()?.(line));
    child.stderr.on('data', (chunk: Buffer) => process.stderr.write(`[${name}] ${chunk.toString()}`));
  }

  /** `command args` as a peer (its stderr shown, prefixed with its name). */
  static start(name: string, command: string, args: readonly string[], exitHint = ''): JsonLinesProcess {
    return new JsonLinesProcess(name, spawn(command, args, { stdio: 'pipe' }), exitHint);
  }

  request<T>(request: object): Promise<T> {
    return new Promise((resolve, reject) => {
      const onExit = (code: number | null) => reject(new Error(`${this.name}'s process exited (status ${code})${this.exitHint}`));
      this.child.once('exit', onExit);
      this.replies.push((line) => {
        this.child.off('exit', onExit);
        const reply = JSON.parse(line) as T & { error?: string };
        if (reply.error) reject(new Error(`${this.name}: ${reply.error}`));
        else resolve(reply);
      });
      this.child.stdin.write(`${JSON.stringify(request)}\n`);
    });
  }

  /** Ends its input, and resolves when it has exited. */
  close(): Promise<void> {
    return new Promise((resolve) => {
      if (this.child.exitCode !== null) return resolve();
      this.child.once('exit', () => resolve());
      this.child.stdin.end();
    });
  }
}
