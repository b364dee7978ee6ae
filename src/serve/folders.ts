// The folders a dashboard serves: each folder named on the command line is a run folder (it holds scenario.json),
// a sweep folder (sweep.json), or a folder that holds runs and sweeps (`runs/`, scanned one level down, again at
// every scan, so runs started later appear). A sweep brings its runs (sweep.json lists them). Each found folder
// gets an id, its path under the named folder's name (`runs/quickstart`): pages look folders up by id, so no
// request ever names a path, and a folder whose real path leaves the named folders (a symbolic link out) is not
// served at all.

import { existsSync, readdirSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { basename, join, resolve, sep } from 'node:path';
import { UsageError } from '../cli/usage-error.js';
import type { SweepRunState, SweepState } from '../sweep/state.js';
import { RunFolder, type RunStatus, type RunSummary } from './run-folder.js';
import { fileInside, realPathInside } from './safe-path.js';

/** Most folders one named folder may hold (a bound on scanning, not on runs: name sub-folders to serve more). */
export const MAX_FOLDERS_PER_ROOT = 2000;

/** A folder the dashboard cannot serve, named with what to do (printed as its message alone: src/cli/run-command.ts). */
export class ServeError extends UsageError {}

export interface SweepSummary {
  kind: 'sweep';
  id: string;
  name: string;
  path: string;
  status: RunStatus;
  runs: number;
  finished: number;
  running: number;
  failed: number;
  step: number; // steps finished over its runs
  steps: number | null;
  etaSeconds: number | null;
  problem: string | null;
}

interface Root {
  label: string;
  given: string;
  absolute: string;
}

export class SweepFolder {
  state: SweepState | null = null;
  problem: string | null = null;
  readonly runs = new Map<string, RunFolder>(); // by the run's folder name in the sweep
  private stamp = '';

  constructor(
    readonly id: string,
    readonly dir: string,
    readonly root: string,
    readonly path: string,
    private readonly clockMs: () => number,
  ) {}

  /** Reads sweep.json again when it changed, and refreshes its runs; the ids of what changed (its own, its runs'). */
  refresh(): string[] {
    const changed = new Set<string>();
    const file = fileInside(this.root, this.dir, 'sweep.json');
    const stats = file ? statSync(file, { throwIfNoEntry: false }) : undefined;
    const stamp = stats ? `${stats.ino}:${stats.mtimeMs}:${stats.size}` : '';
    if (stamp !== this.stamp) {
      this.stamp = stamp;
      changed.add(this.id);
      try {
        const state = JSON.parse(readFileSync(file!, 'utf8')) as SweepState;
        if (!Array.isArray(state.runs)) throw new Error('no "runs" list');
        this.state = state;
        this.problem = null;
      } catch (error) {
        this.problem = `${join(this.path, 'sweep.json')}: cannot be read (${(error as Error).message}); a sweep rewrites it whole at every change, so it is being replaced, or it is damaged`;
      }
    }
    for (const run of this.state?.runs ?? []) {
      let folder = this.runs.get(run.dir);
      if (!folder) {
        const lexical = join(this.dir, String(run.dir));
        if (!lexical.startsWith(this.dir + sep)) continue; // a name that leads out of the sweep: not served
        // A run not started yet has no folder: its files are looked up (through links) when they appear.
        const dir = realPathInside(this.dir, lexical) ?? lexical;
        folder = new RunFolder(`${this.id}/${run.dir}`, dir, this.root, join(this.path, run.dir), this.clockMs);
        this.runs.set(run.dir, folder);
        changed.add(this.id);
      }
      folder.sweepStatus = run.status;
      if (folder.refresh()) changed.add(folder.id).add(this.id);
    }
    return [...changed];
  }

  private runStates(): SweepRunState[] {
    return this.state?.runs ?? [];
  }

  summary(): SweepSummary {
    const runs = [...this.runs.values()].map((r) => r.summary());
    const count = (status: RunStatus) => runs.filter((r) => r.status === status).length;
    const totals = runs.map((r) => r.steps);
    const steps = totals.every((t): t is number => t !== null) ? totals.reduce((a, b) => a + b, 0) : null;
    const step = runs.reduce((n, r) => n + r.step, 0);
    const running = runs.filter((r) => r.status === 'running');
    const status: RunStatus = running.length > 0 ? 'running' : count('finished') === this.runStates().length && runs.length > 0 ? 'finished' : count('failed') > 0 ? 'failed' : count('pending') === runs.length ? 'pending' : 'stopped';
    // The sweep's ETA: its steps left at the pace of its running runs' steps, `running.length` at a time.
    const paces = running.map((r) => (r.etaSeconds !== null && r.steps !== null && r.steps > r.step ? r.etaSeconds / (r.steps - r.step) : null)).filter((p): p is number => p !== null);
    const etaSeconds = status === 'running' && steps !== null && paces.length > 0 ? ((steps - step) * (paces.reduce((a, b) => a + b, 0) / paces.length)) / running.length : null;
    return { kind: 'sweep', id: this.id, name: this.state?.name ?? basename(this.dir), path: this.path, status, runs: this.runStates().length, finished: count('finished'), running: running.length, failed: count('failed'), step, steps, etaSeconds, problem: this.problem };
  }
}

/** Every run and sweep under the named folders, found again at each scan. */
export class Library {
  private readonly standalone = new Map<string, RunFolder>(); // runs that are no sweep's
  readonly sweeps = new Map<string, SweepFolder>();
  runs = new Map<string, RunFolder>(); // every run by id: the standalone ones and the sweeps'
  private readonly roots: Root[];

  constructor(
    dirs: readonly string[],
    private readonly clockMs: () => number,
  ) {
    const labels = new Set<string>();
    this.roots = dirs.map((given) => {
      const absolute = resolve(given);
      const stats = statSync(absolute, { throwIfNoEntry: false });
      if (stats && !stats.isDirectory()) throw new ServeError(`${given}: not a folder; name run folders, sweep folders or folders that hold them (e.g. runs/)`);
      const name = basename(stats ? realpathSync(absolute) : absolute) || 'root';
      let label = name;
      for (let k = 2; labels.has(label); k++) label = `${name}-${k}`;
      labels.add(label);
      return { label, given, absolute };
    });
  }

  /** The named folders that do not exist (yet): they are served once they do. */
  missing(): string[] {
    return this.roots.filter((root) => !existsSync(root.absolute)).map((root) => root.given);
  }

  /** Finds new folders (and forgets vanished ones), then reads what every folder appended; the ids that changed. */
  scan(): string[] {
    const found = new Map<string, { dir: string; root: string; path: string; kind: 'run' | 'sweep' }>();
    for (const root of this.roots) {
      const real = realPathInside('/', root.absolute); // taken again at every scan: a folder may appear, or be replaced
      if (!real) continue;
      const kind = kindOf(real, real);
      for (const f of kind ? [{ dir: real, id: root.label, path: root.given, kind }] : this.children(root, real)) found.set(f.id, { ...f, root: real });
    }
    const changed: string[] = [];
    const forget = <T>(folders: Map<string, T>, kind: 'run' | 'sweep') => {
      for (const id of folders.keys()) if (found.get(id)?.kind !== kind) (folders.delete(id), changed.push(id));
    };
    forget(this.standalone, 'run');
    forget(this.sweeps, 'sweep');
    for (const [id, f] of found) {
      if (f.kind === 'run' && !this.standalone.has(id)) this.standalone.set(id, new RunFolder(id, f.dir, f.root, f.path, this.clockMs));
      if (f.kind === 'sweep' && !this.sweeps.has(id)) this.sweeps.set(id, new SweepFolder(id, f.dir, f.root, f.path, this.clockMs));
    }
    for (const [id, run] of this.standalone) if (run.refresh()) changed.push(id);
    for (const sweep of this.sweeps.values()) changed.push(...sweep.refresh());
    this.runs = new Map([...this.standalone, ...[...this.sweeps.values()].flatMap((s) => [...s.runs.values()].map((r): [string, RunFolder] => [r.id, r]))]);
    return changed;
  }

  /** The runs and sweeps one level under a named folder, in name order. */
  private children(root: Root, real: string): Array<{ dir: string; id: string; path: string; kind: 'run' | 'sweep' }> {
    let names: string[];
    try {
      names = readdirSync(real).filter((name) => !name.startsWith('.')).sort();
    } catch {
      return [];
    }
    const found = [];
    for (const name of names.slice(0, MAX_FOLDERS_PER_ROOT)) {
      const dir = realPathInside(real, join(real, name));
      if (!dir || dir === real) continue; // missing, or a link out of the folder (or back to it)
      const kind = kindOf(real, dir);
      if (kind) found.push({ dir, id: `${root.label}/${name}`, path: join(root.given, name), kind });
    }
    return found;
  }

  /** The list the index page shows: sweeps, then the runs that are no sweep's, each in id order. */
  list(): Array<RunSummary | SweepSummary> {
    const byId = <T extends { id: string }>(items: T[]) => items.sort((a, b) => (a.id < b.id ? -1 : 1));
    return [...byId([...this.sweeps.values()].map((s) => s.summary())), ...byId([...this.standalone.values()].map((r) => r.summary()))];
  }
}

/** What a folder is, from the file that marks it. */
function kindOf(root: string, dir: string): 'run' | 'sweep' | null {
  if (!statSync(dir, { throwIfNoEntry: false })?.isDirectory()) return null;
  if (fileInside(root, dir, 'sweep.json')) return 'sweep';
  if (fileInside(root, dir, 'scenario.json')) return 'run';
  return null;
}
