// The event log and the named random streams: the two things replay rests on.
import { appendFileSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
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
