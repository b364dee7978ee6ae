// The event log and the named random streams: the two things replay rests on. The log's writes go through an
// injected disk here, which writes short or runs full on the calls a test chooses.
import { appendFileSync, existsSync, mkdtempSync, readFileSync, truncateSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { nodeDisk, type Disk } from '../src/runtime/durable.js';
import { EventLog, readEventLog, type RunEvent } from '../src/runtime/event-log.js';
import { Streams } from '../src/runtime/streams.js';

const dir = mkdtempSync(join(tmpdir(), 'populora-log-'));
const events: RunEvent[] = [
  { step: 0, actor: 'teacher-0', type: 'propose', payload: { tasks: ['1+2'], logProbs: Float32Array.of(-0.5, -1.25) } },
  { step: 0, actor: 'verifier', type: 'verdicts', payload: { valid: [true], fuel: [3] } },
  { step: 1, actor: 'student-1', type: 'answer', payload: { text: '3', reward: 1 } },
];

function write(file: string, list: RunEvent[]): string {
  const log = new EventLog(file);
  list.forEach((e) => log.append(e));
  log.close();
  return log.hash;
}

describe('the event log', () => {
  it('reads back every event, typed arrays included, with the hash the writer reported', () => {
    const file = join(dir, 'a.msgpack');
    const hash = write(file, events);
    const read = readEventLog(file);
    expect(read.events).toEqual(events);
    expect(read.hash).toBe(hash);
    expect(read.tornTailBytes).toBe(0);
  });

  it('hashes by content: key order does not matter, any changed value does', () => {
    const reordered = events.map((e) => ({ payload: e.payload, type: e.type, actor: e.actor, step: e.step }));
    expect(write(join(dir, 'b.msgpack'), reordered)).toBe(write(join(dir, 'c.msgpack'), events));
    const changed = structuredClone(events);
    (changed[2]!.payload as { reward: number }).reward = 0;
    expect(write(join(dir, 'd.msgpack'), changed)).not.toBe(write(join(dir, 'e.msgpack'), events));
  });

  it('keeps the whole records of a crashed write and names a corrupt one', () => {
    const file = join(dir, 'f.msgpack');
    write(file, events);
    appendFileSync(file, Buffer.from([200, 0, 0, 0, 1, 2])); // a record cut off mid-write
    const read = readEventLog(file);
    expect(read.events).toHaveLength(3);
    expect(read.tornTailBytes).toBe(6);
    const bytes = readFileSync(file);
    bytes[10] = bytes[10]! ^ 0xff; // flip a bit inside the first record
    writeFileSync(file, bytes);
    expect(() => readEventLog(file)).toThrow(/record 0 at byte 0 fails its checksum/);
  });
});

/** A disk whose `n`th write (from 0) does what `plan` says: write all, write only `part` bytes, or fail as full. */
function faultyDisk(plan: (n: number) => 'whole' | { part: number } | 'full'): Disk & { writes: number } {
  const disk = {
    writes: 0,
    write(fd: number, bytes: Uint8Array, offset: number, length: number): number {
      const action = plan(disk.writes++);
      if (action === 'full') throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
      return writeSync(fd, bytes, offset, action === 'whole' ? length : Math.min(length, action.part));
    },
    fsync: nodeDisk.fsync,
  };
  return disk;
}

/** Byte offsets where each record of a log file starts, read from the framing ([u32 length][payload][u32 crc]). */
function recordStarts(file: string): number[] {
  const bytes = readFileSync(file);
  const starts: number[] = [];
  for (let at = 0; at < bytes.length; at += 8 + bytes.readUInt32LE(at)) starts.push(at);
  return starts;
}

const manyEvents: RunEvent[] = Array.from({ length: 12 }, (_, i) => ({ step: Math.floor(i / 4), actor: `a-${i % 3}`, type: 'poke', payload: { i, text: 'x'.repeat(10 + i) } }));

describe('the event log on a disk that misbehaves', () => {
  it('completes a short write instead of losing the rest of it', () => {
    const file = join(dir, 'short.msgpack');
    const disk = faultyDisk(() => ({ part: 7 })); // every write takes 7 bytes at most
    const log = new EventLog(file, disk);
    manyEvents.slice(0, 6).forEach((e) => log.append(e));
    log.flush();
    manyEvents.slice(6).forEach((e) => log.append(e));
    log.close();
    expect(disk.writes).toBeGreaterThan(2); // the flushes were cut short many times
    expect(readEventLog(file)).toEqual({ events: manyEvents, hash: write(join(dir, 'short-reference.msgpack'), manyEvents), tornTailBytes: 0 });
  });

  it('fails a flush at once on a full disk, names the file, the full disk and the resume command, and keeps only whole records', () => {
    const file = join(dir, 'full.msgpack');
    // The first flush goes through; the second writes 5 bytes, then the disk is full.
    const log = new EventLog(file, faultyDisk((n) => (n === 0 ? 'whole' : n === 1 ? { part: 5 } : 'full')));
    manyEvents.slice(0, 4).forEach((e) => log.append(e));
    log.flush();
    manyEvents.slice(4).forEach((e) => log.append(e));
    expect(() => log.flush()).toThrow(new RegExp(`^${file}: the disk is full \\(ENOSPC.*\\); free some space, then continue the run from its last checkpoint with: populora run --resume ${dir}$`));
    log.close(); // writes nothing more, and does not throw again
    expect(readEventLog(file)).toMatchObject({ events: manyEvents.slice(0, 4), tornTailBytes: 0 });
  });
});

describe('continuing a log from a checkpoint', () => {
  const at = { count: 9, hash: '' };
  const fresh = (name: string) => {
    const file = join(dir, name);
    const log = new EventLog(file);
    manyEvents.slice(0, at.count).forEach((e) => log.append(e));
    at.hash = log.hash;
    manyEvents.slice(at.count).forEach((e) => log.append(e));
    log.close();
    return file;
  };
  const options = { checkpoint: 'checkpoint step-2', whatToDo: 'Start again.' };

  it('keeps exactly the records the checkpoint counted, byte for byte, and goes on from their hash', () => {
    const file = fresh('continue.msgpack');
    const before = readFileSync(file);
    const log = EventLog.continueFrom(file, at, options);
    expect(log.hash).toBe(at.hash);
    log.append(manyEvents[at.count]!);
    log.close();
    expect(readFileSync(file).subarray(0, recordStarts(file)[at.count]!)).toEqual(before.subarray(0, recordStarts(file)[at.count]!));
    expect(readEventLog(file).events).toEqual(manyEvents.slice(0, at.count + 1));
    expect(existsSync(`${file}.resume`)).toBe(false);
  });

  it('refuses a log cut at a record boundary before the checkpoint, naming the first missing record', () => {
    const file = fresh('cut.msgpack');
    const starts = recordStarts(file);
    truncateSync(file, starts[6]!);
    expect(() => EventLog.continueFrom(file, at, options)).toThrow(`${file}: record 6 (from byte ${starts[6]}) is missing, and every record after it: the log holds 6 whole records, but checkpoint step-2 was taken after 9. Start again.`);
    expect(readFileSync(file).length).toBe(starts[6]); // the refused resume left the log as it was
  });

  it('refuses a log whose flipped length byte reads as a torn tail, naming the record', () => {
    const file = fresh('flipped-length.msgpack');
    const starts = recordStarts(file);
    const bytes = readFileSync(file);
    bytes[starts[3]! + 3] = bytes[starts[3]! + 3]! ^ 0x40; // the length's high byte: record 3 now claims to run past the end of the file
    writeFileSync(file, bytes);
    expect(readEventLog(file)).toMatchObject({ events: manyEvents.slice(0, 3), tornTailBytes: bytes.length - starts[3]! });
    expect(() => EventLog.continueFrom(file, at, options)).toThrow(new RegExp(`record 3 \\(from byte ${starts[3]}\\) is missing.*the ${bytes.length - starts[3]!} bytes after it do not form a whole record`));
  });

  it('refuses a log whose records before the checkpoint are not the ones it hashed', () => {
    const file = join(dir, 'other.msgpack');
    write(file, manyEvents.map((e) => ({ ...e, actor: 'someone-else' })));
    expect(() => EventLog.continueFrom(file, at, options)).toThrow(/other\.msgpack: its first 9 records do not hash to what checkpoint step-2 recorded .*: the log was changed before the checkpoint\. Start again\.$/);
  });
});

describe('named random streams', () => {
  it('depend only on the seed and their key, not on draws from other streams', () => {
    const a = new Streams(7);
    const b = new Streams(7);
    const first = Array.from({ length: 5 }, () => a.stream('teacher-0', 'propose', 3).next());
    b.stream('student-2', 'answer', 3).next(); // unrelated draws first
    expect(Array.from({ length: 5 }, () => b.stream('teacher-0', 'propose', 3).next())).toEqual(first);
    expect(new Streams(8).stream('teacher-0', 'propose', 3).next()).not.toBe(first[0]);
    expect(a.stream('teacher-0', 'propose', 4).next()).not.toBe(first[0]);
  });

  it('draw uniform integers and distinct samples', () => {
    const s = new Streams(1).stream('x');
    const counts = new Array<number>(4).fill(0);
    for (let i = 0; i < 4000; i++) counts[s.int(4)]!++;
    counts.forEach((c) => expect(Math.abs(c - 1000)).toBeLessThan(120));
    const picked = s.sample(10, 10);
    expect([...picked].sort((x, y) => x - y)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(() => s.sample(3, 4)).toThrow(/cannot draw 4 distinct of 3/);
  });
});
