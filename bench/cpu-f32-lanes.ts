// What f32 accumulation would buy the CPU backend's decode (issue 31: 8 × 8 decode at 1 thread is 0.72-0.76x
// llama.cpp, bound by the f64x2 multiply-adds; docs/cpu-backend.md). The shipped kernel sums each output in an f64
// lane, so that it equals the f64 reference (src/backend/cpu-dense.ts) bit for bit; llama.cpp sums in f32 lanes.
// This times, on one thread, matmulBlocks of kernels/cpu/dense.wasm and dense_fma.wasm (f64 lanes, plain and fused:
// the shipped ones) against a prototype written here with the same row blocks and tiles of 16 rows by 2 tokens, but
// 4 f32 lanes a vector:
//   f32 mul + add   each product and each sum rounded to f32, k ascending: deterministic on every engine, equal bit
//                   for bit to a plain loop `s = fround(s + fround(x·w))` (checked here before timing);
//   f32 madd        f32x4.relaxed_madd (fused or not, as the engine likes: not deterministic across machines, so
//                   not a candidate for a replayable backend; the upper bound).
// Shapes of the 0.5B model's decode against 8 tokens (8 × 8 decode) and 2: the q projection (896 x 896, from
// cache), the down projection (896 x 4,864, 17 MB) and the packed gate|up projection (9,728 x 896, 33 MB). Rounds
// alternate the kernels; prints a table of medians and writes JSON. The prototype is no part of the backend: it
// is here to size the change (a new reference, and every CPU run hash) before anyone makes it.
//
//   node dist/bench/cpu-f32-lanes.js [--rounds 30] [--out bench/results/cpu-f32-lanes.json]

import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname } from 'node:path';
import { benchArgs, BenchUsageError } from './args.js';
import { median } from './stats.js';
import { watModule } from './wat.js';
import { cpuKernelBuild, cpuKernelModule } from '../src/backend/kernel-files.js';

const args = benchArgs(import.meta.url, {
  options: {
    rounds: { type: 'string', default: '30' },
    out: { type: 'string', default: 'bench/results/cpu-f32-lanes.json' },
  },
});
const rounds = Number(args.rounds);
if (!(Number.isInteger(rounds) && rounds >= 1)) throw new BenchUsageError(`--rounds: a whole number >= 1, not ${args.rounds}`);
// (cpuKernelBuild also sets the V8 flag Node 20 needs for relaxed SIMD, which the f32 madd build uses too)
if (cpuKernelBuild('dense') !== 'dense_fma') throw new BenchUsageError('this V8 does not compile relaxed SIMD (or POPULORA_CPU_FMA=0): no fused build to time');

// One product of the tile: acc += w·x, as mul then add or fused; the loop body writes it out for 4 row groups x 2 tokens.
const F32_TILE_WAT = (fused: boolean) => {
  const madd = (acc: string, x: string) => (fused ? `(f32x4.relaxed_madd (local.get $v) (local.get ${x}) (local.get ${acc}))` : `(f32x4.add (local.get ${acc}) (f32x4.mul (local.get $v) (local.get ${x})))`);
  const groups = [0, 1, 2, 3].map((g) => `(local.set $v (v128.load offset=${16 * g} (local.get $wp)))
      (local.set $a${g} ${madd(`$a${g}`, '$s')}) (local.set $b${g} ${madd(`$b${g}`, '$u')})`);
  const stores = [0, 1, 2, 3].map((g) => `(v128.store offset=${16 * g} (local.get $out0) (local.get $a${g})) (v128.store offset=${16 * g} (local.get $out1) (local.get $b${g}))`);
  return `(module (import "env" "memory" (memory 1 65536 shared))
  ;; the 16 rows of a block (wp = its first k: [K][16] f32) against tokens x0, x1 (f32 [K]), k ascending; out0/out1: 16 f32
  (func $tile (param $wp i32) (param $x0 i32) (param $x1 i32) (param $K i32) (param $out0 i32) (param $out1 i32)
    (local $xEnd i32) (local $s v128) (local $u v128) (local $v v128)
    (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $a3 v128) (local $b0 v128) (local $b1 v128) (local $b2 v128) (local $b3 v128)
    (local.set $xEnd (i32.add (local.get $x0) (i32.shl (local.get $K) (i32.const 2))))
    (block $done (loop $ks
      (br_if $done (i32.ge_u (local.get $x0) (local.get $xEnd)))
      (local.set $s (v128.load32_splat (local.get $x0)))
      (local.set $u (v128.load32_splat (local.get $x1)))
      ${groups.join('\n      ')}
      (local.set $x0 (i32.add (local.get $x0) (i32.const 4)))
      (local.set $x1 (i32.add (local.get $x1) (i32.const 4)))
      (local.set $wp (i32.add (local.get $wp) (i32.const 64)))
      (br $ks)))
    ${stores.join('\n    ')})
  ;; out [T, nPad] f32 = x [T, K] f32 against w [N, K] in row blocks; T even
  (func (export "matmulBlocksF32") (param $x i32) (param $T i32) (param $K i32) (param $w i32) (param $N i32) (param $out i32)
    (local $n i32) (local $wp i32) (local $t i32) (local $nPad i32) (local $xBytes i32)
    (local.set $nPad (i32.and (i32.add (local.get $N) (i32.const 15)) (i32.const -16)))
    (local.set $xBytes (i32.shl (local.get $K) (i32.const 2)))
    (local.set $wp (local.get $w))
    (block $blocksDone (loop $blocks
      (br_if $blocksDone (i32.ge_u (local.get $n) (local.get $N)))
      (local.set $t (i32.const 0))
      (block $pairsDone (loop $pairs
        (br_if $pairsDone (i32.gt_u (i32.add (local.get $t) (i32.const 2)) (local.get $T)))
        (call $tile (local.get $wp) (i32.add (local.get $x) (i32.mul (local.get $t) (local.get $xBytes)))
          (i32.add (local.get $x) (i32.mul (i32.add (local.get $t) (i32.const 1)) (local.get $xBytes))) (local.get $K)
          (i32.add (local.get $out) (i32.shl (i32.add (i32.mul (local.get $t) (local.get $nPad)) (local.get $n)) (i32.const 2)))
          (i32.add (local.get $out) (i32.shl (i32.add (i32.mul (i32.add (local.get $t) (i32.const 1)) (local.get $nPad)) (local.get $n)) (i32.const 2))))
        (local.set $t (i32.add (local.get $t) (i32.const 2)))
        (br $pairs)))
      (local.set $n (i32.add (local.get $n) (i32.const 16)))
      (local.set $wp (i32.add (local.get $wp) (i32.shl (local.get $K) (i32.const 6))))
      (br $blocks)))))`;
};

type Kernel = 'f64 plain' | 'f64 fused (shipped)' | 'f32 mul + add' | 'f32 madd';
const memory = new WebAssembly.Memory({ initial: 1, maximum: 65536, shared: true });
const instance = (module: WebAssembly.Module) => new WebAssembly.Instance(module, { env: { memory } }).exports as Record<string, (...a: number[]) => void>;
const kernels = {
  f64Plain: instance(cpuKernelModule('dense')),
  f64Fused: instance(cpuKernelModule('dense_fma')),
  f32: instance(await watModule('f32-lanes.wat', F32_TILE_WAT(false))),
  f32Fused: instance(await watModule('f32-lanes-madd.wat', F32_TILE_WAT(true))),
};

const SHAPES = [
  { name: 'q projection', N: 896, K: 896, T: 8 },
  { name: 'down projection', N: 896, K: 4864, T: 8 },
  { name: 'gate|up projection', N: 9728, K: 896, T: 8 },
  { name: 'down projection', N: 896, K: 4864, T: 2 },
];

/** Lays out x (f64 and f32), w in row blocks, bias and out for one shape; returns the calls to time. */
function setUp({ N, K, T }: { N: number; K: number; T: number }): { calls: Record<Kernel, () => void>; exact: boolean } {
  const nPad = Math.ceil(N / 16) * 16;
  const sizes = { x64: T * K * 8, x32: T * K * 4, w: nPad * K * 4, bias: nPad * 4, out: T * nPad * 4 };
  const at: Record<string, number> = {};
  let end = 0;
  for (const [name, bytes] of Object.entries(sizes)) (at[name] = end), (end += Math.ceil((bytes + 32) / 64) * 64); // 32 bytes of slack, as the arena gives
  if (end > memory.buffer.byteLength) memory.grow(Math.ceil((end - memory.buffer.byteLength) / 65536));
  const buffer = memory.buffer;
  const [x32, x64, w] = [new Float32Array(buffer, at.x32!, T * K), new Float64Array(buffer, at.x64!, T * K), new Float32Array(buffer, at.w!, nPad * K)];
  for (let i = 0; i < T * K; i++) x64[i] = x32[i] = Math.fround(Math.cos(i) / 4);
  for (let i = 0; i < nPad * K; i++) w[i] = Math.fround(Math.sin(i) / 16);
  new Float32Array(buffer, at.bias!, nPad).fill(0);
  const out = new Float32Array(buffer, at.out!, T * nPad);
  // the prototype against the plain loop it claims to equal (row blocks: w[n, k] at (n >> 4)·16K + 16k + (n & 15))
  kernels.f32.matmulBlocksF32!(at.x32!, T, K, at.w!, N, at.out!);
  let exact = true;
  for (let t = 0; t < T; t++)
    for (let n = 0; n < N; n += 37) {
      let sum = 0;
      for (let k = 0; k < K; k++) sum = Math.fround(sum + Math.fround(x32[t * K + k]! * w[(n >> 4) * 16 * K + 16 * k + (n & 15)]!));
      if (!Object.is(sum, out[t * nPad + n])) exact = false;
    }
  const shipped = (k: Record<string, (...a: number[]) => void>) => () => k.matmulBlocks!(at.x64!, T, K, at.w!, N, at.bias!, at.out!, 0, 1, 0, nPad);
  return {
    exact,
    calls: {
      'f64 plain': shipped(kernels.f64Plain),
      'f64 fused (shipped)': shipped(kernels.f64Fused),
      'f32 mul + add': () => kernels.f32.matmulBlocksF32!(at.x32!, T, K, at.w!, N, at.out!),
      'f32 madd': () => kernels.f32Fused.matmulBlocksF32!(at.x32!, T, K, at.w!, N, at.out!),
    },
  };
}

const loads = [loadavg()[0]!];
const rows = [];
console.log('shape                        N      K   T  kernel                 ms   GMAC/s  vs shipped');
for (const shape of SHAPES) {
  const { calls, exact } = setUp(shape);
  if (!exact) throw new Error(`${shape.name}: the f32 prototype does not equal its plain loop: the comparison would time something else`);
  const names = Object.keys(calls) as Kernel[];
  const samples = new Map<Kernel, number[]>(names.map((k) => [k, []]));
  for (let round = 0; round < rounds; round++)
    for (const name of round % 2 ? [...names].reverse() : names) {
      const start = performance.now();
      calls[name]();
      samples.get(name)!.push(performance.now() - start);
    }
  const shippedMs = median(samples.get('f64 fused (shipped)')!);
  for (const name of names) {
    const ms = median(samples.get(name)!);
    const gmacPerS = (shape.N * shape.K * shape.T) / ms / 1e6;
    rows.push({ ...shape, kernel: name, ms, gmacPerS, vsShipped: shippedMs / ms, samplesMs: samples.get(name) });
    console.log(`${shape.name.padEnd(20)}${String(shape.N).padStart(7)}${String(shape.K).padStart(7)}${String(shape.T).padStart(4)}  ${name.padEnd(20)}${ms.toFixed(3).padStart(7)}${gmacPerS.toFixed(2).padStart(9)}${(shippedMs / ms).toFixed(2).padStart(11)}x`);
  }
}
loads.push(loadavg()[0]!);
console.log(`1 thread, ${rounds} rounds, medians; load average ${Math.min(...loads).toFixed(1)}-${Math.max(...loads).toFixed(1)}; f32 mul + add equals fround(s + fround(x·w)), k ascending, in every shape`);
mkdirSync(dirname(args.out), { recursive: true });
writeFileSync(args.out, JSON.stringify({ loadAverage: [Math.min(...loads), Math.max(...loads)], rounds, rows }, null, 2) + '\n');
console.log(`wrote ${args.out}`);
