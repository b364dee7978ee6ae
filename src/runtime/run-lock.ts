// One run per folder: a run (and a resume) holds `run.lock` in its folder for as long as it writes there. Two runs
// into one folder once both exited 0, the second having deleted the first's files (`--overwrite`) while it ran.
//
// The lock is created whole and atomically (written to a file of its own, then hard-linked to `run.lock`, which
// fails if the name exists). It names its holder (pid, host, command), so the loser says who holds it. A lock whose
// process is gone (a kill -9, a power loss) is stale: a process on the same host takes it over.

import { hostname } from 'node:os';
import { join } from 'node:path';
import { linkSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { RunFolderError } from './durable.js';

export const LOCK_FILE = 'run.lock';

interface LockHolder {
  pid: number;
  host: string;
  command: string;
}

export interface RunLock {
  release(): void;
}

/** Takes the folder's lock, or throws a RunFolderError naming its holder. The folder must exist. */
export function acquireRunLock(dir: string): RunLock {
  const file = join(dir, LOCK_FILE);
  const mine: LockHolder = { pid: process.pid, host: hostname(), command: process.argv.slice(1).join(' ') };
  const text = JSON.stringify(mine);
  for (let attempt = 0; ; attempt++) {
    if (tryCreate(file, text)) break;
    const holder = readHolder(file);
    if (holder === 'gone') continue; // released between our attempt and our read
    if (attempt === 0 && holder !== null && isStale(holder)) {
      removeIfUnchanged(file, holder);
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

/** A holder on this host whose process no longer exists. (One on another host cannot be checked: never stale.) */
function isStale(holder: LockHolder): boolean {
  if (holder.host !== hostname()) return false;
  try {
    process.kill(holder.pid, 0); // signal 0: only asks whether the process exists
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

function removeIfUnchanged(file: string, holder: LockHolder): void {
  const now = readHolder(file);
  if (now !== null && now !== 'gone' && now.pid === holder.pid && now.host === holder.host) unlinkSync(file);
}
