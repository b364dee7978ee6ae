// The run's event log (DESIGN.md rule 6): every message with its step, append-only, each record checksummed,
// and a rolling hash over all of them that names the run.
//
// File layout, one record after another:
//   [u32 LE payload length][payload: msgpack of the event][u32 LE crc32 of the payload]
// The payload encodes the event with every object's keys sorted, so equal events are equal bytes whatever order
// their fields were built in. Run hash: sha256("populora-events-v2" ‖ len₁ ‖ payload₁ ‖ len₂ ‖ payload₂ ‖ …) with each
// length a u32 LE: one streaming hash over the framed payloads (the hash of any prefix is a copy of its state).
//
// Records are written at each step barrier (`flush`), so a crash loses at most the step in progress; a reader
// reports a torn last record instead of failing on it.

import { createHash } from 'node:crypto';
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import { crc32 } from 'node:zlib';
import { Packr } from 'msgpackr';

/** A log that cannot be read: a record fails its checksum. */
export class EventLogError extends Error {}

export interface RunEvent {
  step: number;
  actor: string; // the sending actor's name
  type: string; // the message's type tag
  payload: unknown;
}

const packr = new Packr({ useRecords: false, moreTypes: true });
const HASH_SEED = 'populora-events-v2';
const MAX_RECORD_BYTES = 64 << 20;

/**
 * The value with every plain object's keys sorted (typed arrays and arrays kept as they are). A subtree that is
 * already canonical is returned as it is, so a message built in key order costs no copy (the recorder's hot path).
 */
function canonical(value: unknown): unknown {
  if (value === null || typeof value !== 'object' || ArrayBuffer.isView(value)) return value;
  if (Array.isArray(value)) {
    let copy: unknown[] | null = null;
    for (let i = 0; i < value.length; i++) {
      const item = canonical(value[i]);
      if (item !== value[i]) (copy ??= value.slice())[i] = item;
    }
    return copy ?? value;
  }
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  let sorted = true;
  for (let i = 1; i < keys.length && sorted; i++) sorted = keys[i - 1]! < keys[i]!;
  let changed = !sorted;
  const values = keys.map((k) => {
    const item = canonical(record[k]);
    changed ||= item !== record[k];
    return item;
  });
  if (!changed) return value;
  const order = keys.map((_, i) => i);
  if (!sorted) order.sort((a, b) => (keys[a]! < keys[b]! ? -1 : 1));
  const out: Record<string, unknown> = {};
  for (const i of order) out[keys[i]!] = values[i];
  return out;
}

export function encodeEvent(event: RunEvent): Buffer {
  return packr.pack(canonical(event));
}

export class RunHash {
  private readonly state = createHash('sha256').update(HASH_SEED);

  private readonly length = Buffer.alloc(4);

  add(payload: Uint8Array): void {
    this.length.writeUInt32LE(payload.length, 0);
    this.state.update(this.length).update(payload);
  }

  get hex(): string {
    return this.state.copy().digest('hex');
  }
}

export class EventLog {
  private readonly pending: Buffer[] = [];
  private readonly runHash = new RunHash();
  private fd: number | null;
  count = 0;

  constructor(public file: string) {
    this.fd = openSync(file, 'w');
  }

  /**
   * Reopens a run's log to continue it from `step` (a resume from a checkpoint): keeps the events of earlier
   * steps, drops the rest (the steps being re-run, and a torn record), and carries on their hash.
   */
  static continueFrom(file: string, step: number): EventLog {
    const { events } = readEventLog(file);
    const log = new EventLog(`${file}.resume`); // the old log stays whole until the new one is on disk
    for (const event of events) if (event.step < step) log.append(event);
    log.flush();
    renameSync(log.file, file); // the open descriptor follows the file
    return Object.assign(log, { file });
  }

  append(event: RunEvent): void {
    const payload = encodeEvent(event);
    if (payload.length > MAX_RECORD_BYTES) throw new RangeError(`event ${event.type} from ${event.actor} at step ${event.step} is ${payload.length} bytes, over the ${MAX_RECORD_BYTES}-byte record limit`);
    const frame = Buffer.alloc(payload.length + 8);
    frame.writeUInt32LE(payload.length, 0);
    payload.copy(frame, 4);
    frame.writeUInt32LE(crc32(payload), payload.length + 4);
    this.pending.push(frame);
    this.runHash.add(payload);
    this.count++;
  }

  /** Writes what was appended since the last flush and syncs it to disk: call at every step barrier. */
  flush(): void {
    if (this.fd === null) throw new Error(`event log ${this.file} is closed`);
    if (this.pending.length === 0) return;
    writeSync(this.fd, Buffer.concat(this.pending.splice(0)));
    fsyncSync(this.fd);
  }

  get hash(): string {
    return this.runHash.hex;
  }

  close(): void {
    if (this.fd === null) return;
    this.flush();
    closeSync(this.fd);
    this.fd = null;
  }
}

export interface ReadLog {
  events: RunEvent[];
  hash: string;
  /** Bytes after the last whole record (a crash mid-write), if any. */
  tornTailBytes: number;
}

/** Reads and verifies a log; a corrupt record (checksum mismatch) is an error naming its index and offset. */
export function readEventLog(file: string): ReadLog {
  const bytes = readFileSync(file);
  const events: RunEvent[] = [];
  const runHash = new RunHash();
  let offset = 0;
  while (offset + 4 <= bytes.length) {
    const length = bytes.readUInt32LE(offset);
    if (offset + 8 + length > bytes.length) break;
    const payload = bytes.subarray(offset + 4, offset + 4 + length);
    if (crc32(payload) !== bytes.readUInt32LE(offset + 4 + length)) {
      throw new EventLogError(`${file}: record ${events.length} at byte ${offset} fails its checksum: the log is corrupt`);
    }
    events.push(packr.unpack(payload) as RunEvent);
    runHash.add(payload);
    offset += 8 + length;
  }
  return { events, hash: runHash.hex, tornTailBytes: bytes.length - offset };
}
