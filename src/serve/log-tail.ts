// Reading a run's event log as it grows: each call reads only the bytes appended since the last one and returns the
// whole records among them, checked against their checksums. The framing is the writer's (src/runtime/event-log.ts):
//   [u32 LE payload length][payload: msgpack of the event][u32 LE crc32 of the payload]
// A run writes whole steps at its barriers, but a reader can still catch a write half done: bytes after the last
// whole record wait for the next call. A file that shrank or was replaced (`populora run --overwrite`) is a new
// run: the tail says so, and its owner starts over.
//
// Only reads: the file is opened read-only, and never through a link that leads out of the folder being served
// (the caller checks the real path).

import { closeSync, openSync, readSync, statSync, type Stats } from 'node:fs';
import { crc32 } from 'node:zlib';
import { Packr } from 'msgpackr';
import { EventLogError, type RunEvent } from '../runtime/event-log.js';

/** The writer's options (event-log.ts): typed arrays round-trip (logs of some older versions hold token ids as Int32Array). */
const packr = new Packr({ useRecords: false, moreTypes: true });

/** The most bytes one poll reads, so that a huge log is indexed in slices and the server keeps answering. */
const MAX_READ_BYTES = 16 << 20;
/** The writer's own record limit (event-log.ts MAX_RECORD_BYTES): a length above it is damage, not a record. */
const MAX_RECORD_BYTES = 64 << 20;

/** A log whose records cannot be read (a damaged length, a failed checksum): named by record and byte. */
export class LogReadError extends EventLogError {}

/** One record of the log: where it starts, its index, and the event. */
export interface LoggedEvent extends RunEvent {
  index: number; // 0-based record number
  offset: number; // byte offset of its frame in the file
  bytes: number; // frame length (payload + 8)
}

/** What identifies one file on disk: a new inode or a new birth time means the run was written afresh. */
const identityOf = (stats: Stats) => `${stats.ino}:${stats.birthtimeMs}:${stats.dev}`;

export class LogTail {
  private offset = 0;
  private index = 0;
  private identity: string | null = null;

  constructor(readonly file: string) {}

  /** Bytes read so far (the offset of the next record). */
  get position(): number {
    return this.offset;
  }

  get records(): number {
    return this.index;
  }

  /**
   * The records appended since the last call (empty when none, or the file does not exist yet), and `reset` when
   * the file is no longer the one read so far (it shrank or was replaced): the caller drops what it built.
   */
  read(): { events: LoggedEvent[]; reset: boolean; more: boolean } {
    let stats: Stats;
    try {
      stats = statSync(this.file);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      const reset = this.identity !== null;
      this.restart(null);
      return { events: [], reset, more: false };
    }
    let reset = false;
    if (this.identity !== null && (identityOf(stats) !== this.identity || stats.size < this.offset)) {
      this.restart(identityOf(stats));
      reset = true;
    }
    this.identity = identityOf(stats);
    if (stats.size <= this.offset) return { events: [], reset, more: false };
    const available = stats.size - this.offset;
    let bytes = readAt(this.file, this.offset, Math.min(available, MAX_READ_BYTES));
    const first = bytes.length >= 4 ? bytes.readUInt32LE(0) + 8 : 0;
    if (first > bytes.length && first <= available && first <= MAX_RECORD_BYTES + 8) bytes = readAt(this.file, this.offset, first); // one record over a slice
    const events = this.parse(bytes);
    return { events, reset, more: this.offset < stats.size && events.length > 0 };
  }

  private restart(identity: string | null): void {
    this.offset = 0;
    this.index = 0;
    this.identity = identity;
  }

  /** The whole records at the start of `bytes` (which begin at this.offset); the rest waits for more bytes. */
  private parse(bytes: Buffer): LoggedEvent[] {
    const events: LoggedEvent[] = [];
    let at = 0;
    while (at + 4 <= bytes.length) {
      const length = bytes.readUInt32LE(at);
      if (length > MAX_RECORD_BYTES) throw new LogReadError(`${this.file}: record ${this.index} at byte ${this.offset + at} claims ${length} bytes, over the ${MAX_RECORD_BYTES}-byte record limit: the log is damaged there (populora replay names the first event that differs)`);
      if (at + 8 + length > bytes.length) {
        break; // a record still being written, or beyond this slice
      }
      const payload = bytes.subarray(at + 4, at + 4 + length);
      if (crc32(payload) !== bytes.readUInt32LE(at + 4 + length)) {
        throw new LogReadError(`${this.file}: record ${this.index} at byte ${this.offset + at} fails its checksum: the log is corrupt (populora replay names the first event that differs)`);
      }
      const event = packr.unpack(payload) as LoggedEvent; // its position added in place: a log holds many records
      event.index = this.index;
      event.offset = this.offset + at;
      event.bytes = length + 8;
      events.push(event);
      this.index++;
      at += 8 + length;
    }
    this.offset += at;
    return events;
  }
}

/** `length` bytes of `file` from `offset` (fewer if the file is shorter). */
export function readAt(file: string, offset: number, length: number): Buffer {
  const bytes = Buffer.alloc(length);
  const fd = openSync(file, 'r');
  try {
    let got = 0;
    while (got < length) {
      const n = readSync(fd, bytes, got, length - got, offset + got);
      if (n === 0) break;
      got += n;
    }
    return bytes.subarray(0, got);
  } finally {
    closeSync(fd);
  }
}

/** One record read back by its position (the event page): the frame at `offset`, checked. */
export function readEventAt(file: string, offset: number, index: number): LoggedEvent {
  const head = readAt(file, offset, 4);
  if (head.length !== 4) throw new LogReadError(`${file}: no record ${index} at byte ${offset}`);
  const length = head.readUInt32LE(0);
  if (length > MAX_RECORD_BYTES) throw new LogReadError(`${file}: record ${index} at byte ${offset} claims ${length} bytes: the log is damaged there`);
  const frame = readAt(file, offset, length + 8);
  if (frame.length !== length + 8) throw new LogReadError(`${file}: record ${index} at byte ${offset} is cut short`);
  const payload = frame.subarray(4, 4 + length);
  if (crc32(payload) !== frame.readUInt32LE(4 + length)) throw new LogReadError(`${file}: record ${index} at byte ${offset} fails its checksum`);
  return { ...(packr.unpack(payload) as RunEvent), index, offset, bytes: length + 8 };
}
