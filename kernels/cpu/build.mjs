// Compiles each kernels/cpu/*.wat to the .wasm beside it, and dense.wat a second time with its multiply-adds fused
// (dense_fma.wasm, below). The binaries are committed, so the runtime needs no compiler; run this after editing a
// .wat (npm run build:wasm). test/cpu-kernels.test.ts fails when a committed .wasm is not what its .wat compiles to.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import wabtModule from 'wabt';

/** The WebAssembly binary of one .wat file (128-bit SIMD and shared memory enabled, no debug names). */
export async function compileWat(path, text = readFileSync(path, 'utf8')) {
  const wabt = await wabtModule();
  const features = { simd: true, threads: true, relaxed_simd: true };
  const parsed = wabt.parseWat(path, text, features);
  try {
    parsed.resolveNames();
    parsed.validate(features); // (wabt's types omit validate's features argument; without it, shared memory fails)
    return Buffer.from(parsed.toBinary({ log: false, write_debug_names: false }).buffer);
  } finally {
    parsed.destroy();
  }
}

// The kernels compiled again with every `(f64x2.add (local.get $acc) (f64x2.mul p q))` written as
// `(f64x2.relaxed_madd p q (local.get $acc))` (relaxed SIMD: fused or not, as the engine likes), under <name>_fma.wasm.
// Only for kernels whose every such sum adds products of two f32 values held in f64 (dense.wat: x or g staged from
// f32, w promoted from f32): such a product has at most 48 significant bits, so it is exact in f64, and
// acc + x·w rounded once is fma(x, w, acc): both ways give the same bits (test/cpu-fma.test.ts).
export const FUSED_KERNELS = ['dense'];

/** The text of a .wat with its accumulating multiply-adds fused (comments dropped: they may hold parentheses). */
export function fuseMultiplyAdds(text) {
  const source = text.replace(/;;[^\n]*/g, '');
  const head = /\(f64x2\.add (\(local\.get \$\w+\)) \(f64x2\.mul /g;
  let fused = '';
  let from = 0;
  let count = 0;
  for (let match; (match = head.exec(source)); ) {
    // the mul's two operands: from after its head to the parenthesis that closes it, then the add's own
    let depth = 1;
    let at = head.lastIndex;
    for (; depth > 0; at++) depth += source[at] === '(' ? 1 : source[at] === ')' ? -1 : 0;
    if (source[at] !== ')') throw new Error(`fuseMultiplyAdds: an f64x2.add at character ${match.index} has more than two operands`);
    fused += `${source.slice(from, match.index)}(f64x2.relaxed_madd ${source.slice(head.lastIndex, at - 1)} ${match[1]})`;
    from = head.lastIndex = at + 1;
    count++;
  }
  if (count === 0) throw new Error('fuseMultiplyAdds: no (f64x2.add (local.get $acc) (f64x2.mul p q)) to fuse');
  return fused + source.slice(from);
}

/** The binary of kernels/cpu/<name>_fma.wasm: <name>.wat with its multiply-adds fused. */
export const compileFused = (path) => compileWat(path, fuseMultiplyAdds(readFileSync(path, 'utf8')));

if (fileURLToPath(import.meta.url) === resolve(process.argv[1] ?? '')) {
  const directory = import.meta.dirname;
  for (const file of readdirSync(directory).filter((f) => f.endsWith('.wat')).sort()) {
    const binary = await compileWat(join(directory, file));
    writeFileSync(join(directory, file.replace(/\.wat$/, '.wasm')), binary);
    console.log(`kernels/cpu/${file.replace(/\.wat$/, '.wasm')}: ${binary.length} bytes`);
  }
  for (const name of FUSED_KERNELS) {
    const binary = await compileFused(join(directory, `${name}.wat`));
    writeFileSync(join(directory, `${name}_fma.wasm`), binary);
    console.log(`kernels/cpu/${name}_fma.wasm: ${binary.length} bytes`);
  }
}
