// safetensors against bytes assembled by hand (independently of writeSafetensors) and hand-computed half values.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { bf16BitsToF32, f16BitsToF32, f32ToBf16Bits, roundToF16 } from '../src/backend/half.js';
import { ModelFormatError } from '../src/model/errors.js';
import { readSafetensors, readSafetensorsFolder, writeSafetensors } from '../src/model/safetensors.js';

const dir = mkdtempSync(join(tmpdir(), 'populora-safetensors-'));

/** A safetensors file assembled byte by byte: u64 LE header length, the header text as given, then the body. */
function handBuilt(file: string, header: object | string, body: Buffer, declaredLength?: number): void {
  const json = Buffer.from(typeof header === 'string' ? header : JSON.stringify(header), 'utf8');
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(declaredLength ?? json.length));
  writeFileSync(file, Buffer.concat([length, json, body]));
}

const u16 = (...bits: number[]) => {
  const b = Buffer.alloc(2 * bits.length);
  bits.forEach((v, i) => b.writeUInt16LE(v, 2 * i));
  return b;
};
const f32 = (...values: number[]) => {
  const b = Buffer.alloc(4 * values.length);
  values.forEach((v, i) => b.writeFloatLE(v, 4 * i));
  return b;
};

describe('half-precision bit patterns', () => {
  const F16_CASES: Array<[number, number]> = [
    [0x3c00, 1],
    [0xc000, -2],
    [0x7bff, 65504],
    [0x0001, 2 ** -24],
    [0x03ff, 1023 * 2 ** -24], // largest subnormal
    [0x0400, 2 ** -14], // smallest normal
    [0x7c00, Infinity],
    [0xfc00, -Infinity],
    [0x3555, 0.333251953125],
  ];
  const BF16_CASES: Array<[number, number]> = [
    [0x3f80, 1],
    [0xc040, -3],
    [0x4049, 3.140625],
    [0x7f80, Infinity],
    [0x0001, 2 ** -133], // bf16 subnormal: f32's smallest exponent, mantissa 1 at bit 16
  ];

  it('decode exactly, directly and through a file', () => {
    for (const [bits, value] of F16_CASES) expect(f16BitsToF32(bits)).toBe(value);
    for (const [bits, value] of BF16_CASES) expect(bf16BitsToF32(bits)).toBe(value);
    expect(Object.is(f16BitsToF32(0x8000), -0)).toBe(true);
    expect(f16BitsToF32(0x7e00)).toBeNaN();

    const file = join(dir, 'bits.safetensors');
    const h = u16(...F16_CASES.map(([b]) => b));
    const bf = u16(...BF16_CASES.map(([b]) => b));
    handBuilt(file, { h: { dtype: 'F16', shape: [F16_CASES.length], data_offsets: [0, h.length] }, bf: { dtype: 'BF16', shape: [BF16_CASES.length], data_offsets: [h.length, h.length + bf.length] } }, Buffer.concat([h, bf]));
    const { tensors } = readSafetensors(file);
    expect(Array.from(tensors.get('h')!.decode())).toEqual(F16_CASES.map(([, v]) => Math.fround(v)));
    expect(Array.from(tensors.get('bf')!.decode())).toEqual(BF16_CASES.map(([, v]) => v));
  });
});

describe('readSafetensors', () => {
  it('reads a hand-built file: dtypes, shapes, metadata, and tensors at unaligned offsets', () => {
    // A 2-byte f16 tensor first puts the f32 tensor after it at an offset that is not a multiple of 4, and a
    // header of odd length (no padding) misaligns everything relative to the file start.
    const body = Buffer.concat([u16(0x3c00), f32(1.5, -2.25, 1e-30), u16(0x3f80, 0xc040), f32(7)]);
    const header = {
      __metadata__: { format: 'pt', note: 'hand made' },
      one: { dtype: 'F16', shape: [], data_offsets: [0, 2] },
      matrix: { dtype: 'F32', shape: [1, 3], data_offsets: [2, 14] },
      pair: { dtype: 'BF16', shape: [2], data_offsets: [14, 18] },
      last: { dtype: 'F32', shape: [1, 1, 1], data_offsets: [18, 22] },
    };
    const file = join(dir, 'hand.safetensors');
    handBuilt(file, JSON.stringify(header) + ' ', body); // odd length with the space: 8 + header is not 8-aligned
    const { tensors, metadata } = readSafetensors(file);
    expect(metadata).toEqual({ format: 'pt', note: 'hand made' });
    expect([...tensors.keys()]).toEqual(['one', 'matrix', 'pair', 'last']);
    expect(tensors.get('one')).toMatchObject({ dtype: 'F16', shape: [], file });
    expect(Array.from(tensors.get('one')!.decode())).toEqual([1]);
    expect(tensors.get('matrix')!.shape).toEqual([1, 3]);
    expect(Array.from(tensors.get('matrix')!.decode())).toEqual([1.5, -2.25, Math.fround(1e-30)]);
    expect(Array.from(tensors.get('pair')!.decode())).toEqual([1, -3]);
    expect(Array.from(tensors.get('last')!.decode())).toEqual([7]);
  });

  it('decodes a fresh array on every call (callers may modify what they get)', () => {
    const file = join(dir, 'fresh.safetensors');
    handBuilt(file, { x: { dtype: 'F32', shape: [2], data_offsets: [0, 8] } }, f32(1, 2));
    const x = readSafetensors(file).tensors.get('x')!;
    x.decode()[0] = 99;
    expect(Array.from(x.decode())).toEqual([1, 2]);
  });

  it('reads an empty file (no tensors) and zero-sized tensors', () => {
    const file = join(dir, 'empty.safetensors');
    handBuilt(file, { z: { dtype: 'F32', shape: [0, 4], data_offsets: [0, 0] } }, Buffer.alloc(0));
    const { tensors, metadata } = readSafetensors(file);
    expect(metadata).toEqual({});
    expect(tensors.get('z')!.decode()).toHaveLength(0);
  });

  describe('names the problem in a corrupt file', () => {
    const file = join(dir, 'bad.safetensors');
    const attempt = (header: object | string, body: Buffer, declaredLength?: number) => {
      handBuilt(file, header, body, declaredLength);
      return () => readSafetensors(file);
    };

    it('header problems', () => {
      expect(() => readSafetensors(join(dir, 'nope.safetensors'))).toThrow(/nope\.safetensors: file not found/);
      writeFileSync(file, Buffer.from([1, 2, 3]));
      expect(() => readSafetensors(file)).toThrow(/too short to be safetensors \(3 bytes/);
      expect(attempt('{"a":', Buffer.alloc(0))).toThrow(/bad\.safetensors: header is not valid JSON/);
      expect(attempt('{}', Buffer.alloc(0), 1_000_000)).toThrow(/header length 1000000 is larger than the file \(10 bytes\)/);
      expect(attempt('[1, 2]', Buffer.alloc(0))).toThrow(/header must be a JSON object/);
      expect(attempt({ __metadata__: { step: 3 } }, Buffer.alloc(0))).toThrow(/"__metadata__" must map strings to strings/);
      expect(attempt({ w: 'x' }, Buffer.alloc(0))).toThrow(/header entry for tensor "w" must be an object/);
      expect(attempt({ w: { dtype: 'F32', shape: [-1], data_offsets: [0, 0] } }, Buffer.alloc(0))).toThrow(/tensor "w" has "shape" \[-1\]; expected a list of non-negative integers/);
      expect(attempt({ w: { dtype: 'F32', shape: [1], data_offsets: [4, 0] } }, Buffer.alloc(4))).toThrow(/tensor "w" has "data_offsets" \[4,0\]; expected \[begin, end\]/);
      expect(attempt({ w: { dtype: 'I64', shape: [1], data_offsets: [0, 8] } }, Buffer.alloc(8))).toThrow(/tensor "w" has dtype I64; supported: F32, F16, BF16/);
      expect(attempt({ w: { dtype: 'F16', shape: [3], data_offsets: [0, 8] } }, Buffer.alloc(8))).toThrow(/tensor "w" spans 8 bytes, but shape \[3\] of F16 needs 6/);
    });

    it('offsets out of range, with gaps, overlaps or bytes left over', () => {
      expect(attempt({ w: { dtype: 'F32', shape: [4], data_offsets: [0, 16] } }, Buffer.alloc(8))).toThrow(/tensor "w" ends at byte \d+, past the end of the file .* truncated/);
      const a = { dtype: 'F32', shape: [1], data_offsets: [0, 4] };
      expect(attempt({ a, b: { dtype: 'F32', shape: [1], data_offsets: [8, 12] } }, Buffer.alloc(12))).toThrow(/tensor "b" has data_offsets \[8, 12\], but the previous tensor "a" ends at 4 \(a gap of 4 bytes\)/);
      expect(attempt({ a, b: { dtype: 'F32', shape: [1], data_offsets: [2, 6] } }, Buffer.alloc(6))).toThrow(/tensor "b" has data_offsets \[2, 6\], but the previous tensor "a" ends at 4 \(an overlap of 2 bytes\)/);
      expect(attempt({ b: { dtype: 'F32', shape: [1], data_offsets: [4, 8] } }, Buffer.alloc(8))).toThrow(/tensor "b" .* the data section starts at 0/);
      expect(attempt({ a }, Buffer.alloc(7))).toThrow(/3 bytes after the last tensor's data/);
    });

    it('as a ModelFormatError', () => {
      expect(attempt('{', Buffer.alloc(0))).toThrow(ModelFormatError);
    });
  });
});

describe('writeSafetensors', () => {
  const data = Float32Array.from({ length: 37 }, (_, i) => Math.sin(i) * 100 * 3 ** (i % 5 - 2));
  const special = Float32Array.of(0, -0, Infinity, -Infinity, 65504, 65520, 1e-8, -1e-7, 2 ** -24, 1 + 2 ** -11);

  it('round-trips F32 exactly, F16 to roundToF16 and BF16 to its nearest-even rounding', () => {
    const file = join(dir, 'rt.safetensors');
    const both = Float32Array.from([...data, ...special]);
    writeSafetensors(file, [
      { name: 'x', dtype: 'F32', shape: [both.length], data: both },
      { name: 'h', dtype: 'F16', shape: [both.length], data: both },
      { name: 'bf', dtype: 'BF16', shape: [both.length, 1], data: both },
    ]);
    const { tensors } = readSafetensors(file);
    expect(tensors.get('x')!.decode()).toEqual(both);
    expect(tensors.get('h')!.decode()).toEqual(roundToF16(both));
    expect(tensors.get('bf')!.decode()).toEqual(both.map((v) => bf16BitsToF32(f32ToBf16Bits(v))));
    expect(tensors.get('bf')!.shape).toEqual([both.length, 1]);
    // Hand-checked points of the rounding: 65520 is halfway to f16 infinity and rounds up, 1 + 2^-11 ties to 1.
    expect(Array.from(tensors.get('h')!.decode().slice(data.length + 4, data.length + 6))).toEqual([65504, Infinity]);
    expect(tensors.get('h')!.decode()[both.length - 1]).toBe(1);
  });

  it('writes what the format says: header order, metadata, offsets, 8-byte alignment with space padding', () => {
    const file = join(dir, 'layout.safetensors');
    writeSafetensors(file, [
      { name: 'zeta', dtype: 'F16', shape: [3], data: Float32Array.of(1, -2, 0.5) },
      { name: 'alpha', dtype: 'F32', shape: [2, 1], data: Float32Array.of(3, 4) },
      { name: 'ωμέγα', dtype: 'BF16', shape: [1], data: Float32Array.of(1) }, // multi-byte UTF-8 name
    ], { format: 'pt' });
    const bytes = readFileSync(file);
    const headerLength = Number(bytes.readBigUInt64LE(0));
    expect((8 + headerLength) % 8).toBe(0);
    const headerText = bytes.subarray(8, 8 + headerLength).toString('utf8');
    expect(headerText).toMatch(/^\{.*\} *$/);
    const header = JSON.parse(headerText);
    expect(Object.keys(header)).toEqual(['__metadata__', 'zeta', 'alpha', 'ωμέγα']);
    expect(header.__metadata__).toEqual({ format: 'pt' });
    expect(header.zeta).toEqual({ dtype: 'F16', shape: [3], data_offsets: [0, 6] });
    expect(header.alpha).toEqual({ dtype: 'F32', shape: [2, 1], data_offsets: [6, 14] });
    expect(header['ωμέγα']).toEqual({ dtype: 'BF16', shape: [1], data_offsets: [14, 16] });
    const body = bytes.subarray(8 + headerLength);
    expect(body.length).toBe(16);
    expect([body.readUInt16LE(0), body.readUInt16LE(2), body.readUInt16LE(4)]).toEqual([0x3c00, 0xc000, 0x3800]);
    expect([body.readFloatLE(6), body.readFloatLE(10)]).toEqual([3, 4]);
    expect(body.readUInt16LE(14)).toBe(0x3f80);
  });

  it('leaves no temporary file behind, replaces an old file, and writes nothing for bad input', () => {
    const sub = join(dir, 'atomic');
    mkdirSync(sub);
    const file = join(sub, 'w.safetensors');
    writeSafetensors(file, [{ name: 'a', dtype: 'F32', shape: [1], data: Float32Array.of(1) }]);
    writeSafetensors(file, [{ name: 'a', dtype: 'F32', shape: [1], data: Float32Array.of(2) }]);
    expect(readdirSync(sub)).toEqual(['w.safetensors']);
    expect(readSafetensors(file).tensors.get('a')!.decode()[0]).toBe(2);
    expect(() => writeSafetensors(join(sub, 'bad.safetensors'), [{ name: 'a', dtype: 'F32', shape: [2, 2], data: new Float32Array(3) }])).toThrow(/tensor "a" has 3 values for shape \[2, 2\] \(4 values\)/);
    expect(() => writeSafetensors(join(sub, 'bad.safetensors'), [{ name: 'a', dtype: 'F32', shape: [1], data: new Float32Array(1) }, { name: 'a', dtype: 'F32', shape: [1], data: new Float32Array(1) }])).toThrow(/"a" is reserved or used twice/);
    expect(readdirSync(sub)).toEqual(['w.safetensors']);
  });
});

describe('readSafetensorsFolder', () => {
  const one = (name: string, value: number) => ({ name, dtype: 'F32' as const, shape: [1], data: Float32Array.of(value) });

  it('reads model.safetensors when there is one', () => {
    const folder = join(dir, 'single');
    mkdirSync(folder);
    writeSafetensors(join(folder, 'model.safetensors'), [one('a', 1), one('b', 2)]);
    const tensors = readSafetensorsFolder(folder);
    expect([...tensors.keys()]).toEqual(['a', 'b']);
  });

  it('reads the union of the shards an index lists, and names a missing shard or tensor', () => {
    const folder = join(dir, 'sharded');
    mkdirSync(folder);
    const [s1, s2] = ['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors'];
    writeSafetensors(join(folder, s1), [one('a', 1), one('c', 3)]);
    writeSafetensors(join(folder, s2), [one('b', 2)]);
    const indexFile = join(folder, 'model.safetensors.index.json');
    writeFileSync(indexFile, JSON.stringify({ metadata: { total_size: 12 }, weight_map: { a: s1, b: s2, c: s1 } }));
    const tensors = readSafetensorsFolder(folder);
    expect(new Set(tensors.keys())).toEqual(new Set(['a', 'b', 'c']));
    expect(['a', 'b', 'c'].map((k) => tensors.get(k)!.decode()[0])).toEqual([1, 2, 3]);
    expect(tensors.get('b')!.file).toBe(join(folder, s2));

    writeFileSync(indexFile, JSON.stringify({ weight_map: { a: s1, d: s1 } }));
    expect(() => readSafetensorsFolder(folder)).toThrow(/lists "d" in model-00001-of-00002\.safetensors, but that shard does not hold it/);
    writeFileSync(indexFile, JSON.stringify({ weight_map: { a: s1, b: 'model-00003-of-00003.safetensors' } }));
    expect(() => readSafetensorsFolder(folder)).toThrow(/shard model-00003-of-00003\.safetensors \(holding "b"\) is missing/);
    writeFileSync(indexFile, '{"weight_map": ');
    expect(() => readSafetensorsFolder(folder)).toThrow(/model\.safetensors\.index\.json: not valid JSON/);
    writeFileSync(indexFile, JSON.stringify({ metadata: {} }));
    expect(() => readSafetensorsFolder(folder)).toThrow(/field "weight_map" must be an object/);
    writeFileSync(indexFile, JSON.stringify({ weight_map: { a: '../elsewhere.safetensors' } }));
    expect(() => readSafetensorsFolder(folder)).toThrow(/"weight_map"\."a" must be a file name in the same folder/);
  });

  it('names a folder without weights', () => {
    const folder = join(dir, 'weightless');
    mkdirSync(folder);
    expect(() => readSafetensorsFolder(folder)).toThrow(`model folder ${folder} has no model.safetensors or model.safetensors.index.json`);
    rmSync(folder, { recursive: true });
    expect(existsSync(folder)).toBe(false);
  });
});
