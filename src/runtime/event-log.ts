// The run's event log (DESIGN.md rule 6): every message with its step, append-only, each record checksummed,
// and a rolling hash over all of them that names the run.
//
// File layout, one record after another:
//   [u32 LE payload length][payload: msgpack of the event][u32 LE crc32 of the payload]
// The payload encodes the event with every object's keys sorted, so equal events are equal bytes whatever order
// their fields were built in. Run hash: sha256("populora-events-v2" ‖ len₁ ‖ payload₁ ‖ len₂ ‖ payload₂ ‖ …) with each
// length a u32 LE: one streaming hash over the framed payloads (the hash of any prefix is a copy of its state).
//
// Records are written at each step barrier (`flush`), whole and synced, so a crash or a power loss loses at most
// the step in progress; a reader reports a torn last record instead of failing on it. A checkpoint records the
// log's position (count and hash) at its step, and a resume checks the log against it (`continueFrom`).

import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { crc32 } from 'node:zlib';
import { Packr } from 'msgpackr';
import { AppendOnlyFile, nodeDisk, RunFolderError, type Disk } from './durable.js';

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
export function canonical(value: unknown): unknown {
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

/** Where a log stood at a checkpoint: the records written before it and the run hash over them. */
export interface LogPosition {
  count: number;
  hash: string;
}

export class EventLog {
  private readonly pending: Buffer[] = [];
  private readonly runHash = new RunHash();
  private readonly out: AppendOnlyFile;
  count = 0;

  constructor(file: string, disk: Disk = nodeDisk) {
    this.out = new AppendOnlyFile(file, disk, 'create');
  }

  get file(): string {
    return this.out.file;
  }

  /**
   * Reopens a run's log to continue it from a checkpoint: verifies that its first records are the ones the
   * checkpoint counted and hashed, keeps exactly those (byte for byte), and drops the rest (the steps being re-run,
   * and a torn record). `checkpoint` names the checkpoint in errors; `whatToDo` says how to go on without it.
   */
  static continueFrom(file: string, at: LogPosition, options: { disk?: Disk; checkpoint: string; whatToDo: string }): EventLog {
    const { bytes, records, tornTailBytes } = readRecords(file);
    if (records.length < at.count) {
      const cut = tornTailBytes > 0 ? `; the ${tornTailBytes} bytes after it do not form a whole record (a damaged length field, or a cut)` : '';
      throw new RunFolderError(`${file}: record ${records.length} (from byte ${bytes.length - tornTailBytes}) is missing, and every record after it: the log holds ${records.length} whole records${cut}, but ${options.checkpoint} was taken after ${at.count}. ${options.whatToDo}`);
    }
    const kept = records.slice(0, at.count);
    const hash = new RunHash();
    kept.forEach((record) => hash.add(record.payload));
    if (hash.hex !== at.hash) {
      throw new RunFolderError(`${file}: its first ${at.count} records do not hash to what ${options.checkpoint} recorded (${hash.hex.slice(0, 16)}… instead of ${at.hash.slice(0, 16)}…): the log was changed before the checkpoint. ${options.whatToDo}`);
    }
    const log = new EventLog(`${file}.resume`, options.disk); // the old log stays whole until the new one is on disk
    kept.forEach((record) => log.appendRecord(record));
    log.flush();
    log.out.replace(file);
    return log;
  }

  append(event: RunEvent): void {
    const payload = encodeEvent(event);
    if (payload.length > MAX_RECORD_BYTES) throw new RangeError(`event ${event.type} from ${event.actor} at step ${event.step} is ${payload.length} bytes, over the ${MAX_RECORD_BYTES}-byte record limit`);
    this.appendRecord({ frame: frameOf(payload), payload });
  }

  private appendRecord(record: RawRecord): void {
    this.pending.push(record.frame);
    this.runHash.add(record.payload);
    this.count++;
  }

  /** Writes what was appended since the last flush, whole, and syncs it to disk: call at every step barrier. */
  flush(): void {
    if (this.out.closed) throw new RunFolderError(`event log ${this.file} is closed`);
    if (this.pending.length === 0) return;
    this.out.append(Buffer.concat(this.pending.splice(0)));
    this.out.sync();
  }

  get hash(): string {
    return this.runHash.hex;
  }

  get position(): LogPosition {
    return { count: this.count, hash: this.hash };
  }

  /** Flushes and closes; after a failed write (the file is closed already) the pending records are dropped. */
  close(): void {
    if (this.out.closed) return;
    this.flush();
    this.out.close();
  }
}

export interface ReadLog {
  events: RunEvent[];
  hash: string;
  /** Bytes after the last whole record (a crash mid-write), if any. */
  tornTailBytes: number;
}

interface RawRecord {
  frame: Buffer; // length, payload, checksum
  payload: Buffer;
}

function frameOf(payload: Buffer): Buffer {
  const frame = Buffer.alloc(payload.length + 8);
  frame.writeUInt32LE(payload.length, 0);
  payload.copy(frame, 4);
  frame.writeUInt32LE(crc32(payload), payload.length + 4);
  return frame;
}

/** The whole records of a log file, each checked against its checksum, and the bytes after the last of them. */
function readRecords(file: string): { bytes: Buffer; records: RawRecord[]; tornTailBytes: number } {
  const bytes = readFileSync(file);
  const records: RawRecord[] = [];
  let offset = 0;
  while (offset + 4 <= bytes.length) {
    const length = bytes.readUInt32LE(offset);
    if (offset + 8 + length > bytes.length) break;
    const payload = bytes.subarray(offset + 4, offset + 4 + length);
    if (crc32(payload) !== bytes.readUInt32LE(offset + 4 + length)) {
      throw new EventLogError(`${file}: record ${records.length} at byte ${offset} fails its checksum: the log is corrupt`);
    }
    records.push({ frame: bytes.subarray(offset, offset + 8 + length), payload });
    offset += 8 + length;
  }
  return { bytes, records, tornTailBytes: bytes.length - offset };
}

/** Reads and verifies a log; a corrupt record (checksum mismatch) is an error naming its index and offset. */
export function readEventLog(file: string): ReadLog {
  const { records, tornTailBytes } = readRecords(file);
  const runHash = new RunHash();
  for (const record of records) runHash.add(record.payload);
  return { events: records.map((record) => packr.unpack(record.payload) as RunEvent), hash: runHash.hex, tornTailBytes };
}
