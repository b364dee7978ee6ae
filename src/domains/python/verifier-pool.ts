// The code domain's verifier pool: sandbox processes (sandbox-processes.ts), each holding one Python interpreter,
// each job handed to the next free one and run from the interpreter's state after load, so a verdict does not depend
// on which process ran the job or what ran before it. Results are in job order whatever the number of workers or the
// order in which they finish (DESIGN.md rule 4).
//
// Faults, never verdicts (rule 5): a job whose process died (a WebAssembly stack overflow, an internal error) is
// retried once on a fresh process, and given up as an infrastructure fault if that one dies too; a job that outlives
// the wall-clock guard ends its process and is a fault at once (a program that hung once hangs again: no retry).
// The guard is one budget per job, shared by its try and its retry, so a job costs the pool at most the guard plus
// one restart (a fresh process loading: a few seconds), whatever it does; each job's pool time is reported
// (`jobTimes`), never logged (a wall-clock time is no part of a run).

import process from 'node:process';
import type { VerifierPool, VerifyJob, VerifyOutcome } from '../domain.js';
import { DEFAULT_FUEL } from './executor.js';
import { fence, SandboxProcess, type SandboxProcessOptions } from './sandbox-processes.js';

export interface PythonPoolOptions extends SandboxProcessOptions {
  fuel?: number; // steps per program run (executor.ts)
  wallClockGuardMs?: number; // safety net only: counted fuel ends every ordinary program long before
}

/**
 * The wall clock, for the guard's budget and the pool time each job is reported with: a fault or a report, never
 * a verdict (DESIGN.md rule 5). The only reading of it in the verifier.
 */
// eslint-disable-next-line no-restricted-properties -- the wall-clock guard (a safety net) and reporting, never a decision of a run
const wallClockMs = () => performance.now(); // wall-clock-ok: the guard and pool-time reporting

/** A few seconds: an ordinary job takes milliseconds; only C code that spends no fuel can run this long. */
export const DEFAULT_WALL_CLOCK_GUARD_MS = 5_000;

let warnedOpenNetwork = false;

export class PythonVerifierPool implements VerifierPool {
  private readonly processes: Array<SandboxProcess | null>;
  readonly fuel: number;
  readonly guardMs: number;
  faults = 0; // jobs given up, over the pool's life
  /** Wall-clock ms each job of the last `verify` held its worker, restarts included (reporting only). */
  jobTimes: number[] = [];

  constructor(readonly workers: number, private readonly options: PythonPoolOptions = {}) {
    if (!Number.isInteger(workers) || workers < 1) throw new RangeError(`the verifier needs at least one worker, got ${workers}`);
    this.fuel = options.fuel ?? DEFAULT_FUEL;
    this.guardMs = options.wallClockGuardMs ?? DEFAULT_WALL_CLOCK_GUARD_MS;
    if (!(this.guardMs > 0)) throw new RangeError(`the wall-clock guard must be a positive number of ms, got ${this.guardMs}`);
    if (fence().network === 'open' && !warnedOpenNetwork) {
      warnedOpenNetwork = true;
      process.emitWarning('no network namespace could be made here (util-linux unshare, Linux): the verifier\'s sandbox processes are fenced by Node\'s permission model, which leaves sockets open');
    }
    this.processes = Array.from({ length: workers }, () => this.start());
  }

  private start(): SandboxProcess {
    return new SandboxProcess({ escapePayloadForTests: this.options.escapePayloadForTests, realBuiltinsForTests: this.options.realBuiltinsForTests });
  }

  /** Waits until every sandbox process has loaded its interpreter (a few seconds); fails if one cannot start. */
  async ready(): Promise<void> {
    await Promise.all(this.processes.map((p) => p!.ready));
  }

  async verify(jobs: readonly VerifyJob[]): Promise<VerifyOutcome[]> {
    const outcomes = new Array<VerifyOutcome>(jobs.length);
    const times = new Array<number>(jobs.length);
    let next = 0;
    const drain = async (slot: number) => {
      while (next < jobs.length) {
        const index = next++;
        const started = wallClockMs();
        outcomes[index] = await this.runJob(slot, jobs[index]!);
        times[index] = wallClockMs() - started;
      }
    };
    await Promise.all(this.processes.map((_, slot) => drain(slot)));
    this.jobTimes = times;
    return outcomes;
  }

  private async runJob(slot: number, job: VerifyJob): Promise<VerifyOutcome> {
    const deaths: string[] = [];
    let budgetMs = this.guardMs; // shared by the try and the retry: the time spent running, not loading
    while (deaths.length < 2) {
      const worker = this.processOf(slot);
      try {
        await worker.ready;
      } catch (error) {
        throw new Error(`the Python verifier cannot run: ${(error as Error).message}`); // broken set-up, not a job's fault
      }
      const handedOver = wallClockMs();
      const result = await worker.run({ job, fuel: this.fuel }, Math.ceil(budgetMs));
      if (result.kind === 'outcome') {
        if (worker.exited) await this.restart(slot); // it refused a job that reached for the host: this job's restart
        return result.outcome;
      }
      if (result.kind === 'timeout') {
        await this.restart(slot);
        return this.fault(job, `no answer within the ${this.guardMs} ms wall-clock guard`);
      }
      deaths.push(result.detail);
      budgetMs -= wallClockMs() - handedOver;
      if (budgetMs <= 0) return this.fault(job, `the worker died and the ${this.guardMs} ms wall-clock guard is spent (${deaths.join('; ')})`);
    }
    return this.fault(job, `the worker failed twice (${deaths.join('; ')})`);
  }

  /** A fresh process in the slot, loaded: the restart a job that ended its process costs (its pool time shows it). */
  private async restart(slot: number): Promise<void> {
    const fresh = (this.processes[slot] = this.start());
    await fresh.ready.catch(() => {}); // a set-up that cannot start is reported by the next job that needs it
  }

  private processOf(slot: number): SandboxProcess {
    const current = this.processes[slot];
    if (current && !current.exited) return current;
    return (this.processes[slot] = this.start());
  }

  private fault(job: VerifyJob, why: string): VerifyOutcome {
    this.faults++;
    return { kind: 'fault', detail: `infrastructure fault on this ${job.kind} job: ${why}` };
  }

  async close(): Promise<void> {
    for (const worker of this.processes) worker?.kill();
  }
}
