// One run per folder: a run (and a resume) holds `run.lock` in its folder for as long as it writes there. Two runs
// into one folder once both exited 0, the second having deleted the first's files (`--overwrite`) while it ran.
//
// The lock is created whole and atomically (written to a file of its own, then hard-linked to `run.lock`, which
// fails if the name exists). It names its holder (pid, host, command), so the loser says who holds it. A lock whose
// process is gone (a kill -9, a power loss) is stale: a process on the same host takes it over. Two races are closed:
// - pid reuse: the holder also records its process's start time (Linux: /proc/PID/stat), so a live process that
//   merely got the dead holder's pid does not keep the folder locked;
// - two processes taking over one stale lock: only the one that holds `run.lock.takeover` (created as run.lock is)
//   may delete it, after reading it again; otherwise one could delete the lock the other had just taken.

import { hostname } from 'node:os';
import { join } from 'node:path';
import { existsSync, linkSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { RunFolderError } from './durable.js';

export const LOCK_FILE = 'run.lock';
const STALE_TAKEOVER_ATTEMPTS = 3; // a takeover in progress elsewhere resolves within a few attempts

interface LockHolder {
  pid: number;
  host: string;
  command: string;
  started?: string; // the process's start time in clock ticks since boot (Linux); absent where unknown
}

export interface RunLock {
  release(): void;
}

/** Takes the folder's lock, or throws a RunFolderError naming its holder. The folder must exist. */
export function acquireRunLock(dir: string): RunLock {
  const file = join(dir, LOCK_FILE);
  const started = processStartTime(process.pid);
  const mine: LockHolder = { pid: process.pid, host: hostname(), command: process.argv.slice(1).join(' '), ...(started === null ? {} : { started }) };
  const text = JSON.stringify(mine);
  for (let attempt = 0; ; attempt++) {
    if (tryCreate(file, text)) break;
    const holder = readHolder(file);
    if (holder === 'gone') continue; // released between our attempt and our read
    if (attempt < STALE_TAKEOVER_ATTEMPTS && holder !== null && isStale(holder)) {
      removeStale(file, holder, text);
      continue;
    }
    const who = holder === null ? 'a process whose lock cannot be read' : `populora (pid ${holder.pid} on ${holder.host}: ${holder.command})`;
    throw new RunFolderError(`${dir} is in use by ${who}: wait for it to finish, or choose another --out. If no such process runs any more, delete ${file}`);
  }
  const release = () => {
    process.off('exit', release);
    removeIfUnchanged(file, mine);
  };
  process.on('exit', release); // a process.exit() mid-run still lets go of the folder
  return { release };
}

function tryCreate(file: string, text: string): boolean {
  const own = `${file}.${process.pid}`;
  writeFileSync(own, text);
  try {
    linkSync(own, file);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  } finally {
    unlinkSync(own);
  }
}

function readHolder(file: string): LockHolder | null | 'gone' {
  try {
    const holder = JSON.parse(readFileSync(file, 'utf8')) as LockHolder;
    return Number.isInteger(holder.pid) && typeof holder.host === 'string' ? holder : null;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'gone' : null;
  }
}

/**
 * A holder on this host whose process no longer exists, or whose pid now names a process started at another time.
 * (One on another host cannot be checked: never stale.)
 */
function isStale(holder: LockHolder): boolean {
  if (holder.host !== hostname()) return false;
  try {
    process.kill(holder.pid, 0); // signal 0: only asks whether the process exists
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
  const started = processStartTime(holder.pid);
  return holder.started !== undefined && started !== null && started !== holder.started;
}

/** Deletes a stale lock under the takeover guard; if another process holds the guard, leaves it to that one. */
function removeStale(file: string, stale: LockHolder, text: string): void {
  const guard = `${file}.takeover`;
  if (!tryCreate(guard, text)) return;
  try {
    removeIfUnchanged(file, stale);
  } finally {
    unlinkSync(guard);
  }
}

function removeIfUnchanged(file: string, holder: LockHolder): void {
  const now = readHolder(file);
  if (now !== null && now !== 'gone' && now.pid === holder.pid && now.host === holder.host && now.started === holder.started) unlinkSync(file);
}

/** Field 22 of /proc/PID/stat (after the parenthesised command name, which may hold spaces); null off Linux. */
function processStartTime(pid: number): string | null {
  const file = `/proc/${pid}/stat`;
  if (!existsSync(file)) return null;
  try {
    const stat = readFileSync(file, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null; // [0] is field 3 (state)
  } catch {
    return null; // the process ended in between
  }
}
