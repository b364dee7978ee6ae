// Writes into a run folder (DESIGN.md, "Trust boundaries": the run folder is evidence). Every write is complete or
// fails at once with a message that says what to do: `writeSync` may write fewer bytes than asked (a disk that
// fills mid-write), and a short write that went unnoticed once left a log with a hole that neither replayed nor
// resumed. Syncs make a step's records, and a checkpoint before its rename, durable against power loss, not only
// against a crash of the process.
//
// All writes and syncs go through a `Disk`, so that tests inject short writes and a full disk, and bench/ times
// what syncing costs.

import { closeSync, fstatSync, fsyncSync, ftruncateSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';

/** A file in a run folder that is missing, damaged, locked or cannot be written: printed as its message alone. */
export class RunFolderError extends Error {}

/** The two system calls whose results a run folder's integrity rests on. */
export interface Disk {
  /** Writes `length` bytes of `bytes` from `offset`; returns how many were written (possibly fewer). */
  write(fd: number, bytes: Uint8Array, offset: number, length: number): number;
  fsync(fd: number): void;
}

export const nodeDisk: Disk = {
  write: (fd, bytes, offset, length) => writeSync(fd, bytes, offset, length),
  fsync: (fd) => fsyncSync(fd),
};

/** How to go on after the disk filled up under a run: its last checkpoint and its log up to it are intact. */
export const resumeAdvice = (runDir: string) => `free some space, then continue the run from its last checkpoint with: populora run --resume ${runDir}`;

const isDiskFull = (error: unknown) => ['ENOSPC', 'EDQUOT'].includes((error as NodeJS.ErrnoException)?.code ?? '');

/** `error` as a RunFolderError saying the disk is full and what to do, when it is that; otherwise as it is. */
export function asDiskFull(error: unknown, file: string, advice: string = resumeAdvice(dirname(file))): unknown {
  return isDiskFull(error) ? new RunFolderError(`${file}: the disk is full (${(error as Error).message}); ${advice}`, { cause: error }) : error;
}

/** Writes every byte, retrying the rest after a short write; a write that makes no progress means a full disk. */
export function writeFully(disk: Disk, fd: number, bytes: Uint8Array, file: string, advice: string = resumeAdvice(dirname(file))): void {
  let done = 0;
  try {
    while (done < bytes.length) {
      const written = disk.write(fd, bytes, done, bytes.length - done);
      if (written <= 0) throw new RunFolderError(`${file}: the disk is full (wrote ${done} of ${bytes.length} bytes, then no more); ${advice}`);
      done += written;
    }
  } catch (error) {
    throw asDiskFull(error, file, advice);
  }
}

/** Syncs a file or a folder (a folder's sync makes the renames and new names in it durable). */
export function syncPath(disk: Disk, path: string): void {
  const fd = openSync(path, 'r');
  try {
    disk.fsync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Writes a new file whole, without syncing it (a checkpoint syncs its files together, before its folder's rename). */
export function writeNewFile(disk: Disk, file: string, bytes: Uint8Array | string, advice?: string): void {
  const fd = openSync(file, 'wx');
  try {
    writeFully(disk, fd, typeof bytes === 'string' ? Buffer.from(bytes) : bytes, file, advice);
  } finally {
    closeSync(fd);
  }
}

/** Writes a whole file through a temporary file, synced before its rename: a crash leaves the old file or the new. */
export function writeFileDurably(disk: Disk, file: string, bytes: Uint8Array | string, advice?: string): void {
  const temporary = `${file}.partial`;
  const fd = openSync(temporary, 'w');
  try {
    writeFully(disk, fd, typeof bytes === 'string' ? Buffer.from(bytes) : bytes, file, advice);
    disk.fsync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(temporary, file);
  syncPath(disk, dirname(file));
}

export const jsonText = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;

/**
 * A file that only grows (the event log, metrics.jsonl). A write that fails cuts the file back to its last whole
 * write and closes it for good, so what is on disk is always a sequence of whole writes.
 */
export class AppendOnlyFile {
  private fd: number | null;
  private bytesOnDisk: number;

  constructor(
    public file: string,
    private readonly disk: Disk,
    mode: 'create' | 'append',
  ) {
    this.fd = openSync(file, mode === 'create' ? 'w' : 'a');
    this.bytesOnDisk = fstatSync(this.fd).size;
  }

  /** Syncs the file and moves it over `file` (the open descriptor follows it), durably. */
  replace(file: string): void {
    this.sync();
    renameSync(this.file, file);
    syncPath(this.disk, dirname(file));
    this.file = file;
  }

  append(bytes: Uint8Array): void {
    if (this.fd === null) throw new RunFolderError(`${this.file} is closed (an earlier write failed)`);
    try {
      writeFully(this.disk, this.fd, bytes, this.file);
      this.bytesOnDisk += bytes.length;
    } catch (error) {
      this.abandon();
      throw error;
    }
  }

  sync(): void {
    if (this.fd !== null) this.disk.fsync(this.fd);
  }

  get closed(): boolean {
    return this.fd === null;
  }

  /** Syncs what was written and closes the file. */
  close(): void {
    if (this.fd === null) return;
    this.sync();
    closeSync(this.fd);
    this.fd = null;
  }

  /** After a failed write: drops its partial bytes (best effort: the disk may refuse that too) and closes. */
  private abandon(): void {
    const fd = this.fd!;
    this.fd = null;
    try {
      ftruncateSync(fd, this.bytesOnDisk);
    } catch {
      // A reader drops a torn tail anyway; the write's own error is the one to report.
    } finally {
      closeSync(fd);
    }
  }
}

/** Reads a JSON file of a run folder; a missing or garbled one is a RunFolderError naming it and what to do. */
export function readJsonFile<T>(file: string, whatToDo: string): T {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new RunFolderError(`${file}: cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}); ${whatToDo}`);
  }
  try {
    return JSON.parse(text) as T;
  } catch (error) {
    throw new RunFolderError(`${file}: not valid JSON (${(error as Error).message}): the file is damaged; ${whatToDo}`);
  }
}
