// Compiles each kernels/cpu/*.wat to the .wasm beside it. The binaries are committed, so the runtime needs no
// compiler; run this after editing a .wat (npm run build:wasm). test/cpu-kernels.test.ts fails when a
// committed .wasm is not what its .wat compiles to.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import wabtModule from 'wabt';

/** The WebAssembly binary of one .wat file (128-bit SIMD and shared memory enabled, no debug names). */
export async function compileWat(path) {
  const wabt = await wabtModule();
  const features = { simd: true, threads: true };
  const parsed = wabt.parseWat(path, readFileSync(path, 'utf8'), features);
  try {
    parsed.resolveNames();
    parsed.validate(features); // (wabt's types omit validate's features argument; without it, shared memory fails)
    return Buffer.from(parsed.toBinary({ log: false, write_debug_names: false }).buffer);
  } finally {
    parsed.destroy();
  }
}

if (fileURLToPath(import.meta.url) === resolve(process.argv[1] ?? '')) {
  const directory = import.meta.dirname;
  for (const file of readdirSync(directory).filter((f) => f.endsWith('.wat')).sort()) {
    const binary = await compileWat(join(directory, file));
    writeFileSync(join(directory, file.replace(/\.wat$/, '.wasm')), binary);
    console.log(`kernels/cpu/${file.replace(/\.wat$/, '.wasm')}: ${binary.length} bytes`);
  }
}
