// A checkpoint's state.msgpack written piece by piece (src/sim/state-file.ts): the bytes must be packr.pack's for
// the whole state, or a resume would read another state (and old checkpoints' files would stop matching new ones).
import { mkdtempSync, readFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Packr } from 'msgpackr';
import { describe, expect, it } from 'vitest';
import { TINY_CONFIGS } from '../src/model/config.js';
import { LORA_MODULES, randomAdapter } from '../src/model/peft.js';
import { nodeDisk } from '../src/runtime/durable.js';
import { fileDigest, writePackedFile } from '../src/sim/state-file.js';

const dir = mkdtempSync(join(tmpdir(), 'populora-state-file-'));
const checkpointPackr = () => new Packr({ useRecords: false, moreTypes: true }); // as src/sim/checkpoints.ts packs a state
let files = 0;
const written = (value: unknown, packr = checkpointPackr()) => {
  const file = join(dir, `state-${files++}.msgpack`);
  writePackedFile(nodeDisk, file, value, packr);
  return { file, bytes: readFileSync(file) };
};

// A checkpoint state of the shape a run writes: adapters, the optimizer's moments, actor states of every JSON kind.
const config = TINY_CONFIGS['tiny']!;
const adapters = [0, 1, 2].map((seed) => randomAdapter(config, { rank: 4, alpha: 8, targets: LORA_MODULES, seed, init: 'gaussian' }));
const state = {
  step: 3,
  requestIdCounter: 70_000, // a uint32 on the wire
  actorStates: [
    ['teacher-0', { kind: 'teacher', pending: [], scores: [0.5, -1.25, 1e300], names: Array.from({ length: 20 }, (_, i) => `task-${i}`), seen: null, done: true, skipped: undefined }],
    ['matchmaker', { ratings: Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`member-${i}`, { mu: 25 - i / 3, sigma: 8.3 }])), unicode: 'naïve ∑ 😀' }],
  ],
  adapters,
  optimizer: { moments: { '0.q_proj.a': { m: new Float32Array(300).map((_, i) => Math.sin(i)), v: new Float32Array(300).fill(1e-8) } }, steps: [3, 0, 3] },
  coverage: Array.from({ length: 70_000 }, (_, i) => i % 7), // an array32 header
  big: new Float32Array(3 * 2 ** 18).map((_, i) => i), // 3 MiB: written past the chunk
  ids: Int32Array.of(-1, 2, 3),
  map: new Map([['a', 1]]),
};

describe('writePackedFile', () => {
  it("writes the bytes packr.pack gives for a whole checkpoint state, and they unpack to it", () => {
    const { bytes } = written(state);
    const whole = checkpointPackr().pack(state);
    expect(bytes.length).toBe(whole.length);
    expect(bytes.equals(whole)).toBe(true);
    const back = checkpointPackr().unpack(bytes) as typeof state;
    expect(back.adapters[1]!.layers[0]!.q_proj!.a).toEqual(adapters[1]!.layers[0]!.q_proj!.a);
    expect(back.big).toEqual(state.big);
  });

  it('writes every header size as msgpackr does: arrays of 0, 15, 16, 65,535 and 65,536 items; empty and large objects', () => {
    for (const value of [[], Array(15).fill('x'), Array(16).fill(1.5), Array(65_535).fill(0), Array(65_536).fill(null), {}, Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`k${i}`, [i]])), [[[{}]]], [1, , 3], 'just a string', 42]) {
      const packr = checkpointPackr();
      expect(written(value, packr).bytes.equals(checkpointPackr().pack(value))).toBe(true);
    }
  });

  it('refuses an object of more keys than a map16 holds, by its file, as msgpackr would', () => {
    const huge = Object.fromEntries(Array.from({ length: 65_536 }, (_, i) => [`k${i}`, 0]));
    expect(() => checkpointPackr().pack(huge)).toThrow(/16-bit map size/);
    expect(() => written(huge)).toThrow(/state-\d+\.msgpack: an object of 65536 keys/);
  });
});

describe('fileDigest', () => {
  it("gives a file's size and SHA-256, read a chunk at a time (here a 3 MiB file and a one-byte one)", () => {
    for (const value of [state, []]) {
      const { file, bytes } = written(value);
      expect(fileDigest(file)).toEqual({ bytes: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') });
    }
  });
});
