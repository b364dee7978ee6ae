// safetensors: an 8-byte little-endian header length N, N bytes of JSON header
//   {"__metadata__": {string: string}, name: {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...}
// then the raw little-endian tensor bytes, offsets counted from the end of the header. The reference
// implementation requires the tensors to tile the data section exactly (no gaps, no overlaps, nothing after the
// last one); this reader checks the same, so a file that passes here loads in `safetensors` and vice versa.
//
// Reading is lazy: `readSafetensors` parses and checks the header only, and each tensor is decoded to a
// Float32Array when its `decode()` is called (real checkpoints are gigabytes; a caller picks what it needs).

import { closeSync, existsSync, fstatSync, openSync, readFileSync, readSync, renameSync, rmSync, writeSync } from 'node:fs';
import { endianness } from 'node:os';
import { join } from 'node:path';
import { bf16BitsToF32, f16BitsToF32, f32ToBf16Bits, f32ToF16Bits } from '../backend/half.js';
import { ModelFormatError } from './errors.js';

export type StoredDType = 'F32' | 'F16' | 'BF16';
const BYTES: Record<StoredDType, number> = { F32: 4, F16: 2, BF16: 2 };
const isStoredDType = (d: unknown): d is StoredDType => d === 'F32' || d === 'F16' || d === 'BF16';

/** The reference implementation refuses headers over 100 MB; so do we (a corrupt length would allocate wildly). */
const MAX_HEADER_BYTES = 100_000_000;
/** Read and write at most this many bytes per system call (readSync/writeSync take at most 2 GiB). */
const CHUNK_BYTES = 1 << 26;
const LITTLE_ENDIAN_HOST = endianness() === 'LE';

export interface HostTensor {
  data: Float32Array;
  shape: number[];
}

/** A tensor of a file, decoded when `decode()` is called (each call reads the file again and returns a new array). */
export interface StoredTensor {
  dtype: StoredDType;
  shape: number[];
  file: string;
  decode(): Float32Array;
}

export interface TensorToWrite {
  name: string;
  dtype: StoredDType;
  shape: number[];
  data: Float32Array;
}

const numel = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);
const showShape = (shape: readonly number[]) => `[${shape.join(', ')}]`;
const isCount = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) >= 0;

interface CheckedEntry {
  name: string;
  dtype: StoredDType;
  shape: number[];
  begin: number;
  end: number;
}

/** One header entry, checked field by field; the message says which field of which tensor is wrong. */
function checkEntry(file: string, name: string, value: unknown): CheckedEntry {
  const bad = (why: string): never => {
    throw new ModelFormatError(`${file}: header entry for tensor "${name}" ${why}`);
  };
  if (typeof value !== 'object' || value === null || Array.isArray(value)) bad(`must be an object {dtype, shape, data_offsets}, got ${JSON.stringify(value)}`);
  const { dtype, shape, data_offsets: offsets } = value as Record<string, unknown>;
  if (typeof dtype !== 'string') bad(`has no "dtype" string`);
  if (!isStoredDType(dtype)) {
    throw new ModelFormatError(`${file}: tensor "${name}" has dtype ${dtype}; supported: F32, F16, BF16 (convert the checkpoint, e.g. with torch: model.to(torch.bfloat16))`);
  }
  if (!Array.isArray(shape) || !shape.every(isCount)) bad(`has "shape" ${JSON.stringify(shape)}; expected a list of non-negative integers`);
  const [begin, end] = Array.isArray(offsets) && offsets.length === 2 && offsets.every(isCount) ? (offsets as [number, number]) : [-1, -1];
  if (begin < 0 || begin > end) bad(`has "data_offsets" ${JSON.stringify(offsets)}; expected [begin, end] with 0 <= begin <= end`);
  const count = numel(shape as number[]);
  if (!Number.isSafeInteger(count * BYTES[dtype])) bad(`has a shape too large to address: ${showShape(shape as number[])}`);
  if (end - begin !== count * BYTES[dtype]) {
    throw new ModelFormatError(`${file}: tensor "${name}" spans ${end - begin} bytes, but shape ${showShape(shape as number[])} of ${dtype} needs ${count * BYTES[dtype]}`);
  }
  return { name, dtype, shape: shape as number[], begin, end };
}

/** Parses and checks the header of a safetensors file; tensors decode on demand. */
export function readSafetensors(file: string): { tensors: Map<string, StoredTensor>; metadata: Record<string, string> } {
  if (!existsSync(file)) throw new ModelFormatError(`${file}: file not found`);
  const fd = openSync(file, 'r');
  let headerLength: number;
  let headerText: string;
  let fileSize: number;
  try {
    fileSize = fstatSync(fd).size;
    const lengthBytes = Buffer.alloc(8);
    if (readSync(fd, lengthBytes, 0, 8, 0) !== 8) throw new ModelFormatError(`${file}: too short to be safetensors (${fileSize} bytes; no 8-byte header length)`);
    const declared = lengthBytes.readBigUInt64LE(0);
    if (declared > BigInt(Math.min(MAX_HEADER_BYTES, fileSize - 8))) {
      throw new ModelFormatError(`${file}: header length ${declared} is larger than the file (${fileSize} bytes) or the 100 MB limit: not a safetensors file, or a corrupt one`);
    }
    headerLength = Number(declared);
    const headerBytes = Buffer.alloc(headerLength);
    readSync(fd, headerBytes, 0, headerLength, 8);
    headerText = headerBytes.toString('utf8');
  } finally {
    closeSync(fd);
  }

  let header: unknown;
  try {
    header = JSON.parse(headerText);
  } catch (error) {
    throw new ModelFormatError(`${file}: header is not valid JSON (${(error as Error).message})`);
  }
  if (typeof header !== 'object' || header === null || Array.isArray(header)) throw new ModelFormatError(`${file}: header must be a JSON object, got ${headerText.slice(0, 40)}`);
  const { __metadata__: metadata = {}, ...entries } = header as Record<string, unknown>;
  if (typeof metadata !== 'object' || metadata === null || Object.values(metadata).some((v) => typeof v !== 'string')) {
    throw new ModelFormatError(`${file}: "__metadata__" must map strings to strings, got ${JSON.stringify(metadata)}`);
  }

  const checked = Object.entries(entries).map(([name, value]) => checkEntry(file, name, value));
  const dataStart = 8 + headerLength;
  checkTiling(file, checked, fileSize - dataStart, dataStart);

  const tensors = new Map<string, StoredTensor>();
  for (const { name, dtype, shape, begin } of checked) {
    tensors.set(name, { dtype, shape, file, decode: () => decodeAt(file, name, dataStart + begin, numel(shape), dtype) });
  }
  return { tensors, metadata: metadata as Record<string, string> };
}

/** The tensors must cover the data section exactly, as the reference implementation requires. */
function checkTiling(file: string, entries: CheckedEntry[], dataBytes: number, dataStart: number): void {
  const sorted = [...entries].sort((x, y) => x.begin - y.begin || x.end - y.end);
  let previous: CheckedEntry | undefined;
  for (const e of sorted) {
    const expectedBegin = previous?.end ?? 0;
    if (e.begin !== expectedBegin) {
      const after = previous ? `the previous tensor "${previous.name}" ends at ${previous.end}` : 'the data section starts at 0';
      const what = e.begin > expectedBegin ? `a gap of ${e.begin - expectedBegin} bytes` : `an overlap of ${expectedBegin - e.begin} bytes`;
      throw new ModelFormatError(`${file}: tensor "${e.name}" has data_offsets [${e.begin}, ${e.end}], but ${after} (${what}); tensors must be stored back to back`);
    }
    previous = e;
  }
  const end = previous?.end ?? 0;
  if (end > dataBytes) {
    throw new ModelFormatError(`${file}: tensor "${previous!.name}" ends at byte ${dataStart + end}, past the end of the file (${dataStart + dataBytes} bytes): the file is truncated`);
  }
  if (end < dataBytes) throw new ModelFormatError(`${file}: ${dataBytes - end} bytes after the last tensor's data; the header does not describe the whole file`);
}

/** f16 and bf16 have 65536 bit patterns each: decode through a table built once from half.ts. */
const halfTables: Partial<Record<'F16' | 'BF16', Float32Array>> = {};
function halfTable(dtype: 'F16' | 'BF16'): Float32Array {
  let table = halfTables[dtype];
  if (!table) {
    const toF32 = dtype === 'F16' ? f16BitsToF32 : bf16BitsToF32;
    table = Float32Array.from({ length: 65536 }, (_, bits) => toF32(bits));
    halfTables[dtype] = table;
  }
  return table;
}

function decodeAt(file: string, name: string, offset: number, count: number, dtype: StoredDType): Float32Array {
  // A fresh, unpooled buffer starts at byte 0 of its ArrayBuffer, so typed-array views over it are aligned
  // whatever the tensor's offset in the file was.
  const bytes = Buffer.allocUnsafeSlow(count * BYTES[dtype]);
  const fd = openSync(file, 'r');
  try {
    for (let done = 0; done < bytes.length; ) {
      const read = readSync(fd, bytes, done, Math.min(CHUNK_BYTES, bytes.length - done), offset + done);
      if (read === 0) throw new ModelFormatError(`${file}: tensor "${name}" is truncated (the file changed after its header was read?)`);
      done += read;
    }
  } finally {
    closeSync(fd);
  }
  if (!LITTLE_ENDIAN_HOST) return decodeBigEndianHost(bytes, count, dtype);
  if (dtype === 'F32') return new Float32Array(bytes.buffer, bytes.byteOffset, count);
  const bits = new Uint16Array(bytes.buffer, bytes.byteOffset, count);
  const table = halfTable(dtype);
  const out = new Float32Array(count);
  for (let i = 0; i < count; i++) out[i] = table[bits[i]!]!;
  return out;
}

function decodeBigEndianHost(bytes: Buffer, count: number, dtype: StoredDType): Float32Array {
  const out = new Float32Array(count);
  if (dtype === 'F32') for (let i = 0; i < count; i++) out[i] = bytes.readFloatLE(4 * i);
  else for (let i = 0, table = halfTable(dtype); i < count; i++) out[i] = table[bytes.readUInt16LE(2 * i)]!;
  return out;
}

/** The little-endian bytes of `data` as `dtype` (f16/bf16 rounded to nearest even by half.ts). */
function encode(data: Float32Array, dtype: StoredDType): Buffer {
  if (dtype === 'F32') {
    if (LITTLE_ENDIAN_HOST) return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    const out = Buffer.allocUnsafe(data.length * 4);
    data.forEach((v, i) => out.writeFloatLE(v, 4 * i));
    return out;
  }
  const toBits = dtype === 'F16' ? f32ToF16Bits : f32ToBf16Bits;
  const out = Buffer.allocUnsafe(data.length * 2);
  for (let i = 0; i < data.length; i++) out.writeUInt16LE(toBits(data[i]!), 2 * i);
  return out;
}

/**
 * Writes tensors in the given order (the header lists them in that order too). The data section starts 8-byte
 * aligned, the header padded with spaces as the reference writer does. Written to `<file>.partial` and renamed,
 * so a crash never leaves a half-written file under the real name.
 */
export function writeSafetensors(file: string, tensors: TensorToWrite[], metadata: Record<string, string> = {}): void {
  const header: Record<string, unknown> = Object.keys(metadata).length > 0 ? { __metadata__: metadata } : {};
  let offset = 0;
  for (const t of tensors) {
    if (t.name === '__metadata__' || t.name in header) throw new RangeError(`${file}: tensor name "${t.name}" is reserved or used twice`);
    if (!isStoredDType(t.dtype)) throw new RangeError(`${file}: tensor "${t.name}" has dtype ${String(t.dtype)}; supported: F32, F16, BF16`);
    if (!t.shape.every(isCount)) throw new RangeError(`${file}: tensor "${t.name}" has shape ${showShape(t.shape)}; expected non-negative integers`);
    if (numel(t.shape) !== t.data.length) throw new RangeError(`${file}: tensor "${t.name}" has ${t.data.length} values for shape ${showShape(t.shape)} (${numel(t.shape)} values)`);
    const size = t.data.length * BYTES[t.dtype];
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + size] };
    offset += size;
  }
  const json = Buffer.from(JSON.stringify(header), 'utf8');
  const headerBytes = Buffer.concat([json, Buffer.alloc((8 - (json.length % 8)) % 8, ' ')]); // pad the byte length, not the character count
  const lengthBytes = Buffer.alloc(8);
  lengthBytes.writeBigUInt64LE(BigInt(headerBytes.length));

  const temporary = `${file}.partial`;
  const fd = openSync(temporary, 'w');
  let written = false;
  try {
    writeAll(fd, lengthBytes);
    writeAll(fd, headerBytes);
    const valuesPerChunk = CHUNK_BYTES / 4; // bounds the memory for encoding f16/bf16 copies
    for (const t of tensors) {
      for (let at = 0; at < t.data.length; at += valuesPerChunk) writeAll(fd, encode(t.data.subarray(at, at + valuesPerChunk), t.dtype));
    }
    written = true;
  } finally {
    closeSync(fd);
    if (!written) rmSync(temporary, { force: true });
  }
  renameSync(temporary, file);
}

function writeAll(fd: number, bytes: Buffer): void {
  for (let done = 0; done < bytes.length; ) done += writeSync(fd, bytes, done, Math.min(CHUNK_BYTES, bytes.length - done));
}

/**
 * Every tensor of a model folder: `model.safetensors`, or (when there is none) the union of the shards listed in
 * `model.safetensors.index.json` {"weight_map": {tensor name: shard file}}, as transformers resolves them.
 */
export function readSafetensorsFolder(dir: string): Map<string, StoredTensor> {
  const single = join(dir, 'model.safetensors');
  const indexFile = join(dir, 'model.safetensors.index.json');
  if (existsSync(single)) return readSafetensors(single).tensors;
  if (!existsSync(indexFile)) throw new ModelFormatError(`model folder ${dir} has no model.safetensors or model.safetensors.index.json`);
  let index: unknown;
  try {
    index = JSON.parse(readFileSync(indexFile, 'utf8'));
  } catch (error) {
    throw new ModelFormatError(`${indexFile}: not valid JSON (${(error as Error).message})`);
  }
  const weightMap = (index as { weight_map?: unknown } | null)?.weight_map;
  if (typeof weightMap !== 'object' || weightMap === null || Array.isArray(weightMap)) {
    throw new ModelFormatError(`${indexFile}: field "weight_map" must be an object {tensor name: shard file}`);
  }
  const shards = new Map<string, Map<string, StoredTensor>>();
  const tensors = new Map<string, StoredTensor>();
  for (const [name, shard] of Object.entries(weightMap)) {
    if (typeof shard !== 'string' || shard.includes('/') || shard.includes('\\')) {
      throw new ModelFormatError(`${indexFile}: "weight_map"."${name}" must be a file name in the same folder, got ${JSON.stringify(shard)}`);
    }
    if (!shards.has(shard)) {
      const path = join(dir, shard);
      if (!existsSync(path)) throw new ModelFormatError(`${indexFile}: shard ${shard} (holding "${name}") is missing from ${dir}`);
      shards.set(shard, readSafetensors(path).tensors);
    }
    const tensor = shards.get(shard)!.get(name);
    if (!tensor) throw new ModelFormatError(`${indexFile}: lists "${name}" in ${shard}, but that shard does not hold it`);
    tensors.set(name, tensor);
  }
  return tensors;
}
