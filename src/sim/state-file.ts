// A checkpoint's state.msgpack, written piece by piece: the bytes `packr.pack(state)` gives in one buffer, without
// that buffer. A real-size state is 0.84 GB (8 adapters of rank 16 on Qwen2.5-0.5B's shape and their AdamW
// moments); packed whole it needed a buffer as large, grown 1.25x at a time with a copy each (so up to twice the
// state at once), and msgpackr keeps its last buffer for its next pack: a checkpoint's peak memory was the step's
// (docs/scale.md). Here a plain object or array is written as msgpackr writes one (an object: a map16 header, then
// each own enumerable key and its value, in for-in order; an array: a fixarray, array16 or array32 header, then
// each item), and anything else (a number, a string, a typed array...) is `packr.pack`'s bytes for it, written
// before the next pack reuses them. test/state-file.test.ts holds the bytes equal to packr.pack's.

import { closeSync, openSync, readSync } from 'node:fs';
import { createHash } from 'node:crypto';
import type { Packr } from 'msgpackr';
import { writeFully, type Disk } from '../runtime/durable.js';

/** Small pieces are gathered into a buffer of this many bytes before a write; a larger piece is written as it is. */
const CHUNK_BYTES = 2 ** 20;

/** Writes `value` packed by `packr` into the new file `file`, as packr.pack(value) would give it in one buffer. */
export function writePackedFile(disk: Disk, file: string, value: unknown, packr: Packr, advice?: string): void {
  const fd = openSync(file, 'wx');
  try {
    const chunk = Buffer.allocUnsafe(CHUNK_BYTES);
    let used = 0;
    const flush = () => {
      if (used > 0) writeFully(disk, fd, chunk.subarray(0, used), file, advice);
      used = 0;
    };
    const emit = (bytes: Uint8Array) => {
      if (used + bytes.length > CHUNK_BYTES) flush();
      if (bytes.length >= CHUNK_BYTES) return writeFully(disk, fd, bytes, file, advice);
      chunk.set(bytes, used);
      used += bytes.length;
    };
    const arrayHeader = (length: number) => {
      if (length < 0x10) return emit(Uint8Array.of(0x90 | length)); // fixarray
      if (length < 0x10000) return emit(Uint8Array.of(0xdc, length >> 8, length & 0xff)); // array16
      const bytes = Uint8Array.of(0xdd, 0, 0, 0, 0); // array32
      new DataView(bytes.buffer).setUint32(1, length);
      emit(bytes);
    };
    const write = (item: unknown): void => {
      const constructor = (item as { constructor?: unknown } | null | undefined)?.constructor;
      if (typeof item === 'object' && item !== null && constructor === Array) {
        const items = item as unknown[];
        arrayHeader(items.length);
        for (let i = 0; i < items.length; i++) write(items[i]); // a hole as undefined, as msgpackr packs it
      } else if (typeof item === 'object' && item !== null && constructor === Object) {
        // msgpackr's map16, as its fast path for plain objects writes it (useRecords: false)
        const keys: string[] = [];
        for (const key in item) if (Object.prototype.hasOwnProperty.call(item, key)) keys.push(key);
        if (keys.length > 0xffff) throw new RangeError(`${file}: an object of ${keys.length} keys; msgpackr writes at most 65,535 a map`);
        emit(Uint8Array.of(0xde, keys.length >> 8, keys.length & 0xff));
        for (const key of keys) {
          emit(packr.pack(key));
          write((item as Record<string, unknown>)[key]);
        }
      } else emit(packr.pack(item)); // valid until packr's next pack: emit copies or writes it first
    };
    write(value);
    flush();
  } finally {
    closeSync(fd);
  }
}

/** A file's size and SHA-256, read a chunk at a time (a state file is as large as the state). */
export function fileDigest(file: string): { bytes: number; sha256: string } {
  const fd = openSync(file, 'r');
  try {
    const hash = createHash('sha256');
    const chunk = Buffer.allocUnsafe(4 * CHUNK_BYTES);
    let bytes = 0;
    for (let read = readSync(fd, chunk); read > 0; read = readSync(fd, chunk)) {
      hash.update(chunk.subarray(0, read));
      bytes += read;
    }
    return { bytes, sha256: hash.digest('hex') };
  } finally {
    closeSync(fd);
  }
}
