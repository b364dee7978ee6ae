// NumPy .npy for float32 arrays: how users inspect logits and gradients. Written as format 1.0:
//   \x93NUMPY, version 1 0, header length (u16 LE), then a Python dict literal
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with spaces and a final '\n' so the data
//   starts at a multiple of 64 bytes; then the raw little-endian values, row-major. Read: versions 1.0 to 3.0.

import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { ModelFormatError } from './errors.js';

const MAGIC = '\x93NUMPY';

export function writeNpy(file: string, data: Float32Array, shape: number[]): void {
  if (!shape.every((d) => Number.isSafeInteger(d) && d >= 0)) throw new RangeError(`${file}: shape [${shape.join(', ')}] is not a list of non-negative integers`);
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
  // Through a temporary file and a rename: a crash never leaves a truncated array under the real name.
  writeFileSync(`${file}.partial`, Buffer.concat([prefix, Buffer.from(header, 'latin1'), body]));
  renameSync(`${file}.partial`, file);
}

export function readNpy(file: string): { data: Float32Array; shape: number[] } {
  if (!existsSync(file)) throw new ModelFormatError(`${file}: file not found`);
  const bytes = readFileSync(file);
  if (bytes.length < 10 || bytes.subarray(0, 6).toString('latin1') !== MAGIC) throw new ModelFormatError(`${file}: not a .npy file (it does not start with \\x93NUMPY)`);
  const major = bytes[6]!;
  if (major < 1 || major > 3) throw new ModelFormatError(`${file}: .npy format version ${major}.${bytes[7]} is not one of 1.0, 2.0, 3.0`);
  // Version 1 stores the header length in 2 bytes, versions 2 and 3 in 4 (3 only changes the header's encoding).
  const headerStart = major === 1 ? 10 : 12;
  const headerLength = major === 1 ? bytes.readUInt16LE(8) : bytes.readUInt32LE(8);
  if (headerStart + headerLength > bytes.length) throw new ModelFormatError(`${file}: header length ${headerLength} runs past the end of the file`);
  const header = bytes.subarray(headerStart, headerStart + headerLength).toString(major === 3 ? 'utf8' : 'latin1');
  if (!/'descr':\s*'<f4'/.test(header)) throw new ModelFormatError(`${file}: only little-endian float32 ('<f4') arrays are supported; header: ${header.trim()} (convert with arr.astype('<f4'))`);
  if (!/'fortran_order':\s*False/.test(header)) throw new ModelFormatError(`${file}: Fortran-ordered arrays are not supported (save np.ascontiguousarray(arr))`);
  const shapeText = /'shape':\s*\(([^)]*)\)/.exec(header)?.[1];
  if (shapeText === undefined) throw new ModelFormatError(`${file}: header has no shape: ${header.trim()}`);
  const shape = shapeText.split(',').map((s) => s.trim()).filter((s) => s !== '').map(Number);
  if (!shape.every((d) => Number.isSafeInteger(d) && d >= 0)) throw new ModelFormatError(`${file}: shape (${shapeText}) is not a tuple of non-negative integers`);
  const start = headerStart + headerLength;
  const count = shape.reduce((a, b) => a * b, 1);
  if (bytes.length - start !== count * 4) {
    throw new ModelFormatError(`${file}: shape (${shape.join(', ')}) needs ${count * 4} bytes of float32 data, but the file holds ${bytes.length - start}`);
  }
  // A copy: the file's data starts at an offset that need not be 4-byte aligned within the read buffer.
  const data = new Float32Array(bytes.buffer.slice(bytes.byteOffset + start, bytes.byteOffset + bytes.length));
  return { data, shape };
}
