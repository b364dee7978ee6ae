// One run folder as the dashboard sees it while it grows: its scenario, the metrics lines written so far (read
// incrementally: only the bytes appended since the last poll), its status, ETA and headline numbers, and, once a
// page asks for its samples, the index of its event log (samples.ts), kept up to date at every poll. It only
// reads: no file of the folder is opened for writing, and each is taken through safe-path.ts.
//
// Status, from what the folder holds (the run's own files; a sweep's runs also have sweep.json's word):
//   running   run.lock is held by a live process (or one on another host, which cannot be checked)
//   finished  summary.json is written (the last step's checkpoint and the lineage are too)
//   stopped   no lock, and the last finished step has its checkpoint: `populora run --resume` continues it
//   failed    no lock, and steps finished after the last checkpoint: it crashed or was killed
// ETA: the steps left times the mean of the last steps' wall time (metrics' `timing.stepMs`, which `populora run`
// records), or else of the intervals at which this server saw the steps arrive.

import { readFileSync, statSync, type Stats } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { checkpointSteps } from '../sim/checkpoints.js';
import type { StepMetrics } from '../sim/metrics.js';
import { LogTail, readAt, readEventAt, type LoggedEvent } from './log-tail.js';
import { fileInside } from './safe-path.js';
import { SampleIndex, type StepSamples } from './samples.js';

export type RunStatus = 'running' | 'finished' | 'stopped' | 'failed' | 'pending';

/** What the runs list shows of a run. */
export interface RunSummary {
  kind: 'run';
  id: string;
  name: string;
  path: string; // as the user named it, for display
  status: RunStatus;
  step: number; // steps finished
  steps: number | null; // the scenario's
  etaSeconds: number | null;
  headline: { solveRate: number | null; teacherReward: number | null; validity: number | null; coverage: number | null } | null;
  problem: string | null; // a file that cannot be read, named
}

/** How many steps' durations the ETA averages. */
const ETA_WINDOW_STEPS = 10;

export class RunFolder {
  scenario: Record<string, unknown> | null = null;
  metrics: StepMetrics[] = [];
  problem: string | null = null;
  /** Bumped whenever the folder turns out to hold another run (rewritten with --overwrite): pages start over. */
  generation = 0;
  private metricsRead = 0; // bytes of metrics.jsonl consumed (whole lines)
  private metricsIdentity: string | null = null;
  private scenarioStamp = '';
  private readonly arrivalsMs: number[] = []; // when this server saw each new step (ETA without timing)
  private index: SampleIndex | null = null;
  private tail: LogTail | null = null;
  private offsets: number[] = []; // byte offset of each record, for the event page
  private lastStatus: RunStatus | null = null;
  sweepStatus: RunStatus | null = null; // the sweep's word on this run, when it is one of a sweep's

  constructor(
    readonly id: string,
    readonly dir: string, // real path
    readonly root: string, // the served folder's real path
    readonly path: string, // for display
    private readonly clockMs: () => number,
  ) {}

  private file(name: string): string | null {
    return fileInside(this.root, this.dir, name);
  }

  /** Reads what was appended since the last call; true when anything a page shows changed. */
  refresh(): boolean {
    let changed = this.readScenario();
    changed = this.readMetrics() || changed;
    if (this.index) changed = this.readLog() || changed;
    const status = this.status();
    changed ||= status !== this.lastStatus;
    this.lastStatus = status;
    return changed;
  }

  private readScenario(): boolean {
    const file = this.file('scenario.json');
    const stats = file ? statOrNull(file) : null;
    const stamp = stats ? `${stats.ino}:${stats.mtimeMs}:${stats.size}` : '';
    if (stamp === this.scenarioStamp) return false;
    if (this.scenarioStamp !== '') this.startOver();
    this.scenarioStamp = stamp;
    try {
      this.scenario = file ? (JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>) : null;
    } catch (error) {
      this.scenario = null;
      this.problem = `${join(this.path, 'scenario.json')}: not valid JSON (${(error as Error).message})`;
    }
    return true;
  }

  /** The folder holds another run now: forget the old one's metrics and index. */
  private startOver(): void {
    this.metrics = [];
    this.metricsRead = 0;
    this.metricsIdentity = null;
    this.arrivalsMs.length = 0;
    this.problem = null;
    if (this.index) this.index = null;
    this.tail = null;
    this.offsets = [];
    this.generation++;
  }

  private readMetrics(): boolean {
    const file = this.file('metrics.jsonl');
    const stats = file ? statOrNull(file) : null;
    if (!file || !stats) {
      if (this.metrics.length > 0) this.startOver();
      return false;
    }
    const identity = `${stats.ino}:${stats.birthtimeMs}`;
    if (this.metricsIdentity !== null && (identity !== this.metricsIdentity || stats.size < this.metricsRead)) this.startOver();
    this.metricsIdentity = identity;
    if (stats.size === this.metricsRead) return false;
    const bytes = readAt(file, this.metricsRead, stats.size - this.metricsRead);
    const end = bytes.lastIndexOf(0x0a); // whole lines only: the last one may be half written
    if (end < 0) return false;
    const lines = bytes.subarray(0, end).toString('utf8').split('\n');
    this.metricsRead += end + 1;
    for (const line of lines) {
      if (line.trim() === '') continue;
      try {
        this.metrics.push(JSON.parse(line) as StepMetrics);
        this.arrivalsMs.push(this.clockMs());
      } catch {
        this.problem = `${join(this.path, 'metrics.jsonl')}: line ${this.metrics.length + 1} is not JSON; the lines after it are not shown`;
        this.metricsRead = stats.size; // nothing after a damaged line is trusted
        break;
      }
    }
    return true;
  }

  /** Feeds the log's new records to the index. */
  private readLog(): boolean {
    const file = this.file('events.msgpack');
    if (!file) return false;
    if (!this.tail || this.tail.file !== file) this.tail = new LogTail(file);
    let changed = false;
    for (;;) {
      let read: ReturnType<LogTail['read']>;
      try {
        read = this.tail.read();
      } catch (error) {
        this.problem = (error as Error).message;
        return true;
      }
      if (read.reset) {
        this.index = this.newIndex();
        this.offsets = [];
        changed = true;
      }
      for (const event of read.events) {
        this.index!.add(event);
        this.offsets[event.index] = event.offset;
      }
      changed ||= read.events.length > 0;
      if (!read.more) return changed;
    }
  }

  private newIndex(): SampleIndex {
    const sampling = (this.scenario?.sampling ?? {}) as { answersPerStudent?: unknown };
    return new SampleIndex(typeof sampling.answersPerStudent === 'number' ? sampling.answersPerStudent : null);
  }

  /** The sample index, built on first use (one pass over the log), then kept up to date by refresh(). */
  samples(): SampleIndex {
    if (!this.index) {
      this.index = this.newIndex();
      this.tail = null;
      this.offsets = [];
      this.readLog();
    }
    return this.index!;
  }

  step(step: number): StepSamples | null {
    return this.samples().step(step);
  }

  /** One record of the log by its number (the index knows where it starts). */
  event(index: number): LoggedEvent | null {
    this.samples();
    const offset = this.offsets[index];
    const file = this.file('events.msgpack');
    return offset === undefined || !file ? null : readEventAt(file, offset, index);
  }

  get eventCount(): number {
    return this.index?.events ?? 0;
  }

  checkpoints(): number[] {
    return this.file('checkpoints') ? checkpointSteps(this.dir) : [];
  }

  status(): RunStatus {
    if (this.lockHeld()) return 'running';
    if (this.file('summary.json')) return 'finished';
    if (this.sweepStatus === 'pending') return 'pending';
    const done = this.metrics.length;
    if (done === 0 && this.sweepStatus !== null) return this.sweepStatus;
    return this.checkpoints().at(-1) === done && done > 0 ? 'stopped' : 'failed';
  }

  /** run.lock names its holder (src/runtime/run-lock.ts); a holder on this host must still be alive. */
  private lockHeld(): boolean {
    const file = this.file('run.lock');
    if (!file) return false;
    let holder: { pid?: unknown; host?: unknown };
    try {
      holder = JSON.parse(readFileSync(file, 'utf8')) as typeof holder;
    } catch {
      return true; // being written, or unreadable: the run's own lock says someone holds it
    }
    if (holder.host !== hostname() || typeof holder.pid !== 'number') return true;
    try {
      process.kill(holder.pid, 0); // signal 0: only asks whether the process exists
      return true;
    } catch (error) {
      return (error as NodeJS.ErrnoException).code === 'EPERM';
    }
  }

  etaSeconds(status: RunStatus): number | null {
    const total = typeof this.scenario?.steps === 'number' ? this.scenario.steps : null;
    if (status !== 'running' || total === null) return null;
    const left = total - this.metrics.length;
    const timed = this.metrics.slice(-ETA_WINDOW_STEPS).map((m) => m.timing?.stepMs).filter((ms): ms is number => typeof ms === 'number');
    if (timed.length > 0) return (left * timed.reduce((a, b) => a + b, 0)) / timed.length / 1000;
    const seen = this.arrivalsMs.slice(-ETA_WINDOW_STEPS - 1);
    if (seen.length < 2) return null;
    return (left * (seen.at(-1)! - seen[0]!)) / (seen.length - 1) / 1000;
  }

  summary(): RunSummary {
    const status = this.status();
    const last = this.metrics.at(-1);
    return {
      kind: 'run',
      id: this.id,
      name: typeof this.scenario?.name === 'string' ? this.scenario.name : this.id,
      path: this.path,
      status,
      step: this.metrics.length,
      steps: typeof this.scenario?.steps === 'number' ? this.scenario.steps : null,
      etaSeconds: this.etaSeconds(status),
      headline: last ? { solveRate: last.solveRate ?? null, teacherReward: last.teacherReward ?? null, validity: last.validity ?? null, coverage: last.coverage ?? null } : null,
      problem: this.problem,
    };
  }
}

function statOrNull(file: string): Stats | null {
  try {
    return statSync(file);
  } catch {
    return null;
  }
}
