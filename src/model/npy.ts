// NumPy .npy (format version 1.0) for float32 arrays: how users inspect logits and gradients.

import { readFileSync, writeFileSync } from 'node:fs';
import { ModelFormatError } from './errors.js';

const MAGIC = '\x93NUMPY';

export function writeNpy(file: string, data: Float32Array, shape: number[]): void {
  const count = shape.reduce((a, b) => a * b, 1);
  if (count !== data.length) throw new RangeError(`${file}: ${data.length} values do not fill shape [${shape.join(', ')}]`);
  const shapeText = shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': ${shapeText}, }`;
  const unpadded = MAGIC.length + 2 + 2 + header.length + 1; // magic, version, header length, header, newline
  header += ' '.repeat((64 - (unpadded % 64)) % 64) + '\n';
  const prefix = Buffer.alloc(10);
  prefix.write(MAGIC, 0, 'latin1');
  prefix[6] = 1;
  prefix[7] = 0;
  prefix.writeUInt16LE(header.length, 8);
  const body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  writeFileSync(file, Buffer.concat([prefix, Buffer.from(header, 'latin1'), body]));
}

export function readNpy(file: string): { data: Float32Array; shape: number[] } {
  const bytes = readFileSync(file);
  if (bytes.subarray(0, 6).toString('latin1') !== MAGIC) throw new ModelFormatError(`${file}: not a .npy file (bad magic)`);
  const major = bytes[6]!;
  const headerLength = major === 1 ? bytes.readUInt16LE(8) : bytes.readUInt32LE(8);
  const headerStart = major === 1 ? 10 : 12;
  const header = bytes.subarray(headerStart, headerStart + headerLength).toString('latin1');
  if (!/'descr':\s*'<f4'/.test(header)) throw new ModelFormatError(`${file}: only little-endian float32 ('<f4') arrays are supported; header: ${header.trim()}`);
  if (/'fortran_order':\s*True/.test(header)) throw new ModelFormatError(`${file}: Fortran-ordered arrays are not supported`);
  const shapeText = /'shape':\s*\(([^)]*)\)/.exec(header)?.[1];
  if (shapeText === undefined) throw new ModelFormatError(`${file}: header has no shape: ${header.trim()}`);
  const shape = shapeText.split(',').map((s) => s.trim()).filter((s) => s !== '').map(Number);
  const start = headerStart + headerLength;
  const data = new Float32Array(bytes.buffer.slice(bytes.byteOffset + start, bytes.byteOffset + bytes.length));
  return { data, shape };
}
