// .npy files: the header parsed here byte by byte, independently of readNpy, and hand-built files read back.
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readNpy, writeNpy } from '../src/model/npy.js';

const dir = mkdtempSync(join(tmpdir(), 'populora-npy-'));

/** The parts of a .npy file, parsed by hand: magic, version, header text and data bytes. */
function parts(file: string) {
  const bytes = readFileSync(file);
  const headerLength = bytes.readUInt16LE(8);
  return {
    magic: bytes.subarray(0, 6).toString('latin1'),
    version: [bytes[6], bytes[7]],
    headerLength,
    header: bytes.subarray(10, 10 + headerLength).toString('latin1'),
    data: new Float32Array(bytes.buffer.slice(bytes.byteOffset + 10 + headerLength, bytes.byteOffset + bytes.length)),
  };
}

/** A version 1.0 file built by hand from a header dict text and raw little-endian float32 values. */
function handBuilt(file: string, dict: string, values: number[], version: 1 | 2 = 1): void {
  const prefixLength = version === 1 ? 10 : 12;
  const padded = dict + ' '.repeat((64 - ((prefixLength + dict.length + 1) % 64)) % 64) + '\n';
  const prefix = Buffer.alloc(prefixLength);
  prefix.write('\x93NUMPY', 0, 'latin1');
  prefix[6] = version;
  if (version === 1) prefix.writeUInt16LE(padded.length, 8);
  else prefix.writeUInt32LE(padded.length, 8);
  const body = Buffer.alloc(4 * values.length);
  values.forEach((v, i) => body.writeFloatLE(v, 4 * i));
  writeFileSync(file, Buffer.concat([prefix, Buffer.from(padded, 'latin1'), body]));
}

describe('writeNpy', () => {
  it('writes a NumPy 1.0 header that numpy would parse, the data 64-byte aligned', () => {
    const file = join(dir, 'matrix.npy');
    const data = Float32Array.from({ length: 6 }, (_, i) => i / 3 - 1);
    writeNpy(file, data, [2, 3]);
    const p = parts(file);
    expect(p.magic).toBe('\x93NUMPY');
    expect(p.version).toEqual([1, 0]);
    expect((10 + p.headerLength) % 64).toBe(0);
    expect(p.header).toContain("'descr': '<f4'");
    expect(p.header).toContain("'fortran_order': False");
    expect(p.header).toContain("'shape': (2, 3)");
    expect(p.header).toMatch(/^\{'descr': '<f4', 'fortran_order': False, 'shape': \(2, 3\), \} *\n$/);
    expect(p.data).toEqual(data);
    expect(readNpy(file)).toEqual({ data, shape: [2, 3] });
  });

  it('writes 1-d shapes as a one-element tuple, scalars as (), and larger shapes', () => {
    writeNpy(join(dir, 'vector.npy'), Float32Array.of(1, 2, 3), [3]);
    expect(parts(join(dir, 'vector.npy')).header).toContain("'shape': (3,)");
    expect(readNpy(join(dir, 'vector.npy')).shape).toEqual([3]);
    writeNpy(join(dir, 'scalar.npy'), Float32Array.of(42), []);
    expect(parts(join(dir, 'scalar.npy')).header).toContain("'shape': ()");
    expect(readNpy(join(dir, 'scalar.npy'))).toEqual({ data: Float32Array.of(42), shape: [] });
    const big = Float32Array.from({ length: 4 * 5 * 151 }, (_, i) => Math.fround(Math.sin(i)));
    writeNpy(join(dir, 'big.npy'), big, [4, 5, 151]);
    expect((10 + parts(join(dir, 'big.npy')).headerLength) % 64).toBe(0);
    expect(readNpy(join(dir, 'big.npy'))).toEqual({ data: big, shape: [4, 5, 151] });
  });

  it('refuses values that do not fill the shape, and leaves no temporary file', () => {
    expect(() => writeNpy(join(dir, 'short.npy'), new Float32Array(5), [2, 3])).toThrow(/5 values do not fill shape \[2, 3\]/);
    expect(() => writeNpy(join(dir, 'short.npy'), new Float32Array(0), [-1])).toThrow(/shape \[-1\] is not a list of non-negative integers/);
    expect(readdirSync(dir).filter((f) => f.endsWith('.partial'))).toEqual([]);
  });
});

describe('readNpy', () => {
  it('reads hand-built version 1.0 and 2.0 files', () => {
    handBuilt(join(dir, 'v1.npy'), "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", [1, -2, 0.5, 8]);
    expect(readNpy(join(dir, 'v1.npy'))).toEqual({ data: Float32Array.of(1, -2, 0.5, 8), shape: [2, 2] });
    handBuilt(join(dir, 'v2.npy'), "{'descr':'<f4','fortran_order':False,'shape':(3,)}", [4, 5, 6], 2);
    expect(readNpy(join(dir, 'v2.npy'))).toEqual({ data: Float32Array.of(4, 5, 6), shape: [3] });
  });

  it('names what is wrong with a file it cannot read', () => {
    const file = join(dir, 'bad.npy');
    expect(() => readNpy(join(dir, 'absent.npy'))).toThrow(/absent\.npy: file not found/);
    writeFileSync(file, 'PK\x03\x04 this is a zip');
    expect(() => readNpy(file)).toThrow(/bad\.npy: not a \.npy file/);
    handBuilt(file, "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", [0, 0]);
    expect(() => readNpy(file)).toThrow(/only little-endian float32 \('<f4'\) arrays are supported.*'<f8'/);
    handBuilt(file, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 1), }", [1, 2]);
    expect(() => readNpy(file)).toThrow(/Fortran-ordered arrays are not supported/);
    handBuilt(file, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", [1, 2, 3]);
    expect(() => readNpy(file)).toThrow(/shape \(2, 3\) needs 24 bytes of float32 data, but the file holds 12/);
  });
});
