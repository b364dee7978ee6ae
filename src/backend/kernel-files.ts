// Where the kernel files live: kernels/ beside src/ in the package (src/backend under vitest, dist/src/backend
// when built). kernels/*.wgsl are the WebGPU kernels, kernels/cpu/*.wasm the CPU ones (built from their .wat by
// kernels/cpu/build.mjs), loaded here with the helper that lays out their memory.

import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { assert } from './backend.js';

export function kernelsDirectory(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++, dir = dirname(dir)) {
    if (existsSync(join(dir, 'kernels', 'matmul.wgsl'))) return join(dir, 'kernels');
  }
  throw new Error('populora: cannot find the kernels/ folder (expected at the package root, beside src/)');
}

/** An instance of kernels/cpu/<name>.wasm (each thread makes its own). */
export function loadCpuKernel<T>(name: string): T & { memory: WebAssembly.Memory } {
  const module = new WebAssembly.Module(readFileSync(join(kernelsDirectory(), 'cpu', `${name}.wasm`)));
  return new WebAssembly.Instance(module).exports as unknown as T & { memory: WebAssembly.Memory };
}

/** Byte offsets of regions of the given sizes laid end to end from byte 0, each 16-byte aligned; grows the memory to hold them. */
export function reserve(memory: WebAssembly.Memory, bytes: number[]): number[] {
  const offsets: number[] = [];
  let end = 0;
  for (const size of bytes) {
    offsets.push(end);
    end += Math.ceil(size / 16) * 16;
  }
  assert(end < 2 ** 31, `CPU kernel: ${end} bytes do not fit a 32-bit WebAssembly memory`);
  const missing = end - memory.buffer.byteLength;
  if (missing > 0) memory.grow(Math.ceil(missing / 65536));
  return offsets;
}
