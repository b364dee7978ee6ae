// Where the kernel files live: kernels/ beside src/ in the package (src/backend under vitest, dist/src/backend
// when built). kernels/*.wgsl are the WebGPU kernels, kernels/cpu/*.wasm the CPU ones (built from their .wat by
// kernels/cpu/build.mjs), loaded here with the helper that lays out their memory.

import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { assert } from './backend.js';

export function kernelsDirectory(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++, dir = dirname(dir)) {
    if (existsSync(join(dir, 'kernels', 'matmul.wgsl'))) return join(dir, 'kernels');
  }
  throw new Error('populora: cannot find the kernels/ folder (expected at the package root, beside src/)');
}

/**
 * kernels/<name>.wgsl with each `#include "file.wgsl"` line replaced by kernels/include/file.wgsl (one level: an
 * include includes nothing), and where a line of the expanded source came from, for compilation errors.
 */
export function kernelSource(name: string): { code: string; origin(line: number): string } {
  const directory = kernelsDirectory();
  const lines: string[] = [];
  const origins: string[] = [];
  readFileSync(join(directory, `${name}.wgsl`), 'utf8').split('\n').forEach((line, i) => {
    const include = /^#include "([\w.-]+\.wgsl)"\s*$/.exec(line);
    if (!include) return void (lines.push(line), origins.push(`kernels/${name}.wgsl:${i + 1}`));
    const file = join(directory, 'include', include[1]!);
    if (!existsSync(file)) throw new Error(`populora: kernels/${name}.wgsl:${i + 1}: #include names kernels/include/${include[1]}, which does not exist`);
    readFileSync(file, 'utf8').split('\n').forEach((included, j) => (lines.push(included), origins.push(`kernels/include/${include[1]}:${j + 1}`)));
  });
  return { code: lines.join('\n'), origin: (line) => origins[line - 1] ?? `kernels/${name}.wgsl` };
}

const modules = new Map<string, WebAssembly.Module>();

/** kernels/cpu/<name>.wasm compiled (once a process), to instantiate on any thread's memory (cpu-threads.ts). */
export function cpuKernelModule(name: string): WebAssembly.Module {
  let module = modules.get(name);
  if (!module) {
    const file = join(kernelsDirectory(), 'cpu', `${name}.wasm`);
    try {
      module = new WebAssembly.Module(readFileSync(file));
    } catch (error) {
      throw new Error(`populora: cannot load the CPU kernel ${file}: ${error instanceof Error ? error.message : String(error)} (${NEEDS_SIMD})`);
    }
    modules.set(name, module);
  }
  return module;
}

/**
 * The build of kernels/cpu/<name> this process runs: <name>_fma.wasm, its multiply-adds fused (kernels/cpu/build.mjs:
 * the same bits, one instruction in place of a multiplication and an addition), where the file exists and this V8
 * compiles WebAssembly's relaxed SIMD; else the plain <name>.wasm. Node 22 ships relaxed SIMD; Node 20's V8 (11.3)
 * has it behind a flag, set here before the build compiles (V8's flags are the process's: the CPU threads, which
 * instantiate the module compiled here, need nothing more). POPULORA_CPU_FMA=0 keeps the plain builds (the same
 * bits: to time one against the other).
 */
export function cpuKernelBuild(name: string): string {
  const fused = join(kernelsDirectory(), 'cpu', `${name}_fma.wasm`);
  if (process.env.POPULORA_CPU_FMA === '0' || !existsSync(fused)) return name;
  const bytes = readFileSync(fused);
  if (!WebAssembly.validate(bytes)) setFlagsFromString('--experimental-wasm-relaxed-simd');
  return WebAssembly.validate(bytes) ? `${name}_fma` : name;
}

const NEEDS_SIMD = 'it needs WebAssembly with 128-bit SIMD: Node 20 or later on x64 with SSE4.1, or on arm64; after editing its .wat, run npm run build:wasm';

/** An instance of kernels/cpu/<name>.wasm (each thread makes its own), on its own memory or on the one `env` gives it (with any other imports). */
export function loadCpuKernel<T>(name: string, env?: { memory: WebAssembly.Memory } & Record<string, WebAssembly.ImportValue>): T & { memory: WebAssembly.Memory } {
  const module = cpuKernelModule(name);
  try {
    const instance = new WebAssembly.Instance(module, env ? { env } : {});
    return (env ? { ...instance.exports, memory: env.memory } : instance.exports) as unknown as T & { memory: WebAssembly.Memory };
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    throw new Error(`populora: cannot instantiate the CPU kernel kernels/cpu/${name}.wasm: ${why} (${NEEDS_SIMD})`);
  }
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
