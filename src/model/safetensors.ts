// safetensors: an 8-byte little-endian header length, a JSON header {name: {dtype, shape, data_offsets}},
// then the raw little-endian tensor bytes. Tensors are decoded to Float32Array on request.

import { closeSync, existsSync, fstatSync, openSync, readFileSync, readSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { bf16BitsToF32, f16BitsToF32, f32ToBf16Bits, f32ToF16Bits } from '../backend/half.js';
import { ModelFormatError } from './errors.js';

export type StoredDType = 'F32' | 'F16' | 'BF16';
const BYTES: Record<StoredDType, number> = { F32: 4, F16: 2, BF16: 2 };

export interface HostTensor {
  data: Float32Array;
  shape: number[];
}

/** A tensor of a file, decoded when `decode()` is called (real checkpoints are large). */
export interface StoredTensor {
  dtype: StoredDType;
  shape: number[];
  file: string;
  decode(): Float32Array;
}

interface HeaderEntry {
  dtype: string;
  shape: number[];
  data_offsets: [number, number];
}

export function readSafetensors(file: string): { tensors: Map<string, StoredTensor>; metadata: Record<string, string> } {
  if (!existsSync(file)) throw new ModelFormatError(`${file}: file not found`);
  const fd = openSync(file, 'r');
  try {
    const lengthBytes = Buffer.alloc(8);
    if (readSync(fd, lengthBytes, 0, 8, 0) !== 8) throw new ModelFormatError(`${file}: too short to be safetensors (no 8-byte header length)`);
    const headerLength = Number(lengthBytes.readBigUInt64LE(0));
    const headerBytes = Buffer.alloc(Math.min(headerLength, 100_000_000));
    if (headerLength > 100_000_000 || readSync(fd, headerBytes, 0, headerLength, 8) !== headerLength) {
      throw new ModelFormatError(`${file}: header length ${headerLength} runs past the end of the file`);
    }
    let header: Record<string, unknown>;
    try {
      header = JSON.parse(headerBytes.toString('utf8'));
    } catch (error) {
      throw new ModelFormatError(`${file}: header is not valid JSON (${(error as Error).message})`);
    }
    const { __metadata__: metadata, ...entries } = header;
    const dataStart = 8 + headerLength;
    const tensors = new Map<string, StoredTensor>();
    for (const [name, value] of Object.entries(entries)) {
      const entry = value as HeaderEntry;
      if (!(entry.dtype in BYTES)) throw new ModelFormatError(`${file}: tensor "${name}" has dtype ${entry.dtype}; supported: F32, F16, BF16`);
      const dtype = entry.dtype as StoredDType;
      const count = entry.shape.reduce((a, b) => a * b, 1);
      const [begin, end] = entry.data_offsets;
      if (end - begin !== count * BYTES[dtype]) {
        throw new ModelFormatError(`${file}: tensor "${name}" spans ${end - begin} bytes, but shape [${entry.shape.join(', ')}] of ${dtype} needs ${count * BYTES[dtype]}`);
      }
      tensors.set(name, { dtype, shape: entry.shape, file, decode: () => decodeAt(file, dataStart + begin, count, dtype, name) });
    }
    const size = fstatSync(fd).size;
    for (const name of tensors.keys()) {
      const end = (entries[name] as HeaderEntry).data_offsets[1];
      if (dataStart + end > size) throw new ModelFormatError(`${file}: tensor "${name}" ends at byte ${dataStart + end}, past the end of the file (${size} bytes): the file is truncated`);
    }
    return { tensors, metadata: (metadata ?? {}) as Record<string, string> };
  } finally {
    closeSync(fd);
  }
}

function decodeAt(file: string, offset: number, count: number, dtype: StoredDType, name: string): Float32Array {
  const bytes = Buffer.alloc(count * BYTES[dtype]);
  const fd = openSync(file, 'r');
  try {
    if (readSync(fd, bytes, 0, bytes.length, offset) !== bytes.length) throw new ModelFormatError(`${file}: tensor "${name}" is truncated`);
  } finally {
    closeSync(fd);
  }
  const out = new Float32Array(count);
  if (dtype === 'F32') for (let i = 0; i < count; i++) out[i] = bytes.readFloatLE(i * 4);
  else if (dtype === 'F16') for (let i = 0; i < count; i++) out[i] = f16BitsToF32(bytes.readUInt16LE(i * 2));
  else for (let i = 0; i < count; i++) out[i] = bf16BitsToF32(bytes.readUInt16LE(i * 2));
  return out;
}

export interface TensorToWrite {
  name: string;
  dtype: StoredDType;
  shape: number[];
  data: Float32Array;
}

/** Writes through a temporary file and a rename, so a crash never leaves a half-written file behind. */
export function writeSafetensors(file: string, tensors: TensorToWrite[], metadata: Record<string, string> = {}): void {
  const header: Record<string, unknown> = Object.keys(metadata).length > 0 ? { __metadata__: metadata } : {};
  let offset = 0;
  for (const t of tensors) {
    const count = t.shape.reduce((a, b) => a * b, 1);
    if (count !== t.data.length) throw new RangeError(`${file}: tensor "${t.name}" has ${t.data.length} values for shape [${t.shape.join(', ')}]`);
    const size = count * BYTES[t.dtype];
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + size] };
    offset += size;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (json.length % 8)) % 8); // the data starts 8-byte aligned, as the reference writer does
  const headerBytes = Buffer.from(json, 'utf8');
  const out = Buffer.alloc(8 + headerBytes.length + offset);
  out.writeBigUInt64LE(BigInt(headerBytes.length), 0);
  headerBytes.copy(out, 8);
  let at = 8 + headerBytes.length;
  for (const t of tensors) {
    for (const value of t.data) {
      if (t.dtype === 'F32') at = out.writeFloatLE(value, at);
      else at = out.writeUInt16LE(t.dtype === 'F16' ? f32ToF16Bits(value) : f32ToBf16Bits(value), at);
    }
  }
  const temporary = `${file}.partial`;
  writeFileSync(temporary, out);
  renameSync(temporary, file);
}

/** Every tensor of a model folder: `model.safetensors`, or the shards listed by `model.safetensors.index.json`. */
export function readSafetensorsFolder(dir: string): Map<string, StoredTensor> {
  const single = join(dir, 'model.safetensors');
  const indexFile = join(dir, 'model.safetensors.index.json');
  if (existsSync(single)) return readSafetensors(single).tensors;
  if (!existsSync(indexFile)) throw new ModelFormatError(`model folder ${dir} has no model.safetensors or model.safetensors.index.json`);
  const index = JSON.parse(readFileSync(indexFile, 'utf8')) as { weight_map?: Record<string, string> };
  if (!index.weight_map) throw new ModelFormatError(`${indexFile}: no "weight_map" field`);
  const shards = new Map<string, Map<string, StoredTensor>>();
  const tensors = new Map<string, StoredTensor>();
  for (const [name, shard] of Object.entries(index.weight_map)) {
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
