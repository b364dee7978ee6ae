// The benchmarks' own probe kernels (a read loop, prototypes), written as WebAssembly text and compiled with the
// compiler the CPU kernels are built with: kernels/cpu/build.mjs's compileWat (SIMD, shared memory and relaxed SIMD
// enabled), loaded from the kernels folder, which sits beside both bench/ and dist/bench/.
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { kernelsDirectory } from '../src/backend/kernel-files.js';

type CompileWat = (path: string, text: string) => Promise<Uint8Array<ArrayBuffer>>; // (a Buffer)

/** `text` compiled to a module (`name` stands for its file in errors), to instantiate over a shared memory. */
export async function watModule(name: string, text: string): Promise<WebAssembly.Module> {
  const { compileWat } = (await import(pathToFileURL(join(kernelsDirectory(), 'cpu', 'build.mjs')).href)) as { compileWat: CompileWat };
  return new WebAssembly.Module(await compileWat(name, text));
}
