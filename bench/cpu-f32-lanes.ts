// The f32-sum dense kernels (kernels/cpu/dense_f32.wasm, src/backend/cpu-dense-f32.ts: opt-in, `backend: {name:
// cpu, sums: f32}`) against the shipped f64-sum ones (dense.wasm and dense_fma.wasm, cpu-dense.ts), one thread, the
// 0.5B model's shapes: the q projection (896 x 896, from cache), the down projection (896 x 4,864, 17 MB of f32)
// and the packed gate|up projection (9,728 x 896, 35 MB). The shipped kernels sum each output in an f64 lane (2 a
// vector) to equal an f64 reference bit for bit; the f32 ones in f32 lanes (4 a vector), each product and sum
// rounded to f32, k ascending, as llama.cpp sums (and deterministic on every engine: mul then add, never fused).
//   T = 1, 2, 8 (decode: batch 1, 8 × 8 adapters): matmulBlocks of dense.wasm (f64 plain) and dense_fma.wasm (f64
//     fused, what ships where relaxed SIMD compiles) against matmulBlocksF32, all over row blocks; and, as an upper
//     bound, matmulBlocksF32 with its multiply-adds fused (f32x4.relaxed_madd: fused or not as the engine likes, so
//     never a candidate for a backend that replays).
//   T = 256 (a prompt, past the row blocks' budget): the row-major matmul of dense.wasm and dense_fma.wasm against
//     matmulF32 (x staged transposed, [K][Tpad]); and the same products through their TypeScript functions,
//     cpu-dense.ts's matmul and cpu-dense-f32.ts's matmulF32 (the staging and the copies out included: the
//     transposes of x and out are matmulF32's own cost), f32 weights in the CPU backend's arena.
//   backward, T = 256 (the input gradient dx = dy·W of training, dy [T, N], w [N, K] -> [T, K]): matmulBackward of
//     dense.wasm and dense_fma.wasm against matmulBackwardF32 (dy staged transposed, [N][Tpad]: the forward tile
//     loop over w's columns); and cpu-dense.ts's matmulBackward against cpu-dense-f32.ts's matmulBackwardF32.
// Each f32 kernel is checked against its plain loop (`s = fround(s + fround(x·w))`, k ascending; backward n
// ascending) on sampled outputs before it is timed. Rounds alternate the kernels; prints a table of medians and
// writes JSON. "vs shipped": the shipped kernel's median over this one's (f64 fused, dense_fma.wasm), or for the
// TypeScript functions, matmul's (matmulBackward's) over this one's.
//
//   node dist/bench/cpu-f32-lanes.js [--rounds 30] [--prompt-rounds 10] [--out bench/results/cpu-f32-lanes.json]

import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { benchArgs, BenchUsageError } from './args.js';
import { median } from './stats.js';
import { watModule } from './wat.js';
import { matmul, matmulBackward } from '../src/backend/cpu-dense.js';
import { matmulBackwardF32, matmulF32 } from '../src/backend/cpu-dense-f32.js';
import { CpuBackend } from '../src/backend/cpu.js';
import { cpuKernelBuild, cpuKernelModule, kernelsDirectory } from '../src/backend/kernel-files.js';

const args = benchArgs(import.meta.url, {
  options: {
    rounds: { type: 'string', default: '30' },
    'prompt-rounds': { type: 'string', default: '10' },
    out: { type: 'string', default: 'bench/results/cpu-f32-lanes.json' },
  },
});
const count = (name: string, text: string) => {
  const n = Number(text);
  if (!(Number.isInteger(n) && n >= 1)) throw new BenchUsageError(`--${name}: a whole number >= 1, not ${text}`);
  return n;
};
const [rounds, promptRounds] = [count('rounds', args.rounds), count('prompt-rounds', args['prompt-rounds'])];
// (cpuKernelBuild also sets the V8 flag Node 20 needs for relaxed SIMD, which the fused f32 bound uses too)
if (cpuKernelBuild('dense') !== 'dense_fma') throw new BenchUsageError('this V8 does not compile relaxed SIMD (or POPULORA_CPU_FMA=0): no fused build to time');

// dense_f32.wat with each `(f32x4.add (local.get $acc) (f32x4.mul p q))` fused, by build.mjs's rewriting for f64x2
// (the file holds no f64x2 instruction, so the round trip through that name touches nothing else)
const { fuseMultiplyAdds } = (await import(pathToFileURL(join(kernelsDirectory(), 'cpu', 'build.mjs')).href)) as { fuseMultiplyAdds: (text: string) => string };
const f32Text = readFileSync(join(kernelsDirectory(), 'cpu', 'dense_f32.wat'), 'utf8');
const fusedF32Text = fuseMultiplyAdds(f32Text.replaceAll('f32x4.', 'f64x2.')).replaceAll('f64x2.', 'f32x4.');

type Kernels = Record<string, (...a: number[]) => void>;
const memory = new WebAssembly.Memory({ initial: 1, maximum: 65536, shared: true });
const instance = (module: WebAssembly.Module) => new WebAssembly.Instance(module, { env: { memory } }).exports as Kernels;
const kernels = {
  f64Plain: instance(cpuKernelModule('dense')),
  f64Fused: instance(cpuKernelModule('dense_fma')),
  f32: instance(cpuKernelModule('dense_f32')),
  f32Fused: instance(await watModule('dense_f32-relaxed.wat', fusedF32Text)),
};

const SHIPPED = 'f64 fused (shipped)';
const SHIPPED_FUNCTION = 'matmul (cpu-dense.ts)';
const SHIPPED_BACKWARD = 'matmulBackward (cpu-dense.ts)';
const cpu = new CpuBackend();
const PROJECTIONS = [
  { name: 'q projection', N: 896, K: 896 },
  { name: 'down projection', N: 896, K: 4864 },
  { name: 'gate|up projection', N: 9728, K: 896 },
];
const SHAPES = [
  ...[1, 2, 8, 256].flatMap((T) => PROJECTIONS.map((p) => ({ ...p, T, backward: false }))),
  ...PROJECTIONS.map((p) => ({ ...p, T: 256, backward: true })),
];
const roundUp = (n: number, multiple: number) => Math.ceil(n / multiple) * multiple;

/** Byte addresses in the memory for regions of these sizes (grown to hold them). */
function layOut(sizes: Record<string, number>): Record<string, number> {
  const at: Record<string, number> = {};
  let end = 0;
  for (const [name, bytes] of Object.entries(sizes)) (at[name] = end), (end += roundUp(bytes + 32, 64)); // 32 bytes of slack, as the arena gives
  if (end > memory.buffer.byteLength) memory.grow(Math.ceil((end - memory.buffer.byteLength) / 65536));
  return at;
}
/** The values both directions' operands take: f32, of the magnitudes a model's activations and weights have. */
const activation = (i: number) => Math.fround(Math.cos(i) / 4);
const weightValue = (i: number) => Math.fround(Math.sin(i) / 16);

/** Lays out one shape's operands in every kernel's layout; returns the calls to time and a check of the f32 kernel. */
function setUp({ N, K, T, backward }: { N: number; K: number; T: number; backward: boolean }) {
  if (backward) return setUpBackward({ N, K, T });
  const [n16, n4, tPad] = [roundUp(N, 16), roundUp(N, 4), roundUp(T, 8)];
  const blocked = T <= 8;
  const at = layOut({ x64: T * K * 8, x32: T * K * 4, xT: K * tPad * 4, w: N * K * 4, blocks: blocked ? n16 * K * 4 : 0, bias: n16 * 4, out: Math.max(T * n16, n4 * tPad) * 4 });
  const buffer = memory.buffer;
  const [x32, x64, xT, w] = [new Float32Array(buffer, at.x32!, T * K), new Float64Array(buffer, at.x64!, T * K), new Float32Array(buffer, at.xT!, K * tPad), new Float32Array(buffer, at.w!, N * K)];
  xT.fill(0);
  for (let i = 0; i < T * K; i++) x64[i] = x32[i] = xT[(i % K) * tPad + Math.floor(i / K)] = activation(i);
  for (let i = 0; i < N * K; i++) w[i] = weightValue(i);
  if (blocked) {
    const blocks = new Float32Array(buffer, at.blocks!, n16 * K).fill(0);
    for (let n = 0; n < N; n++) for (let k = 0; k < K; k++) blocks[(n >> 4) * 16 * K + 16 * k + (n & 15)] = w[n * K + k]!;
  }
  new Float32Array(buffer, at.bias!, n16).fill(0);
  const f32 = blocked
    ? () => kernels.f32.matmulBlocksF32!(at.x32!, T, K, at.blocks!, N, at.bias!, at.out!, 0, N)
    : () => kernels.f32.matmulF32!(at.xT!, tPad, K, at.w!, N, at.bias!, at.out!, 0, N);
  /** The f32 kernel's outputs against the plain loop, every 37th row. */
  const exact = () => {
    f32();
    const out = new Float32Array(buffer, at.out!, Math.max(T * n16, n4 * tPad));
    for (let t = 0; t < T; t++)
      for (let n = 0; n < N; n += 37) {
        let sum = 0;
        for (let k = 0; k < K; k++) sum = Math.fround(sum + Math.fround(x32[t * K + k]! * w[n * K + k]!));
        if (!Object.is(sum, out[blocked ? t * n16 + n : n * tPad + t])) return false;
      }
    return true;
  };
  const shipped = (k: Kernels) => (blocked ? () => k.matmulBlocks!(at.x64!, T, K, at.blocks!, N, at.bias!, at.out!, 0, 1, 0, N) : () => k.matmul!(at.x64!, T, K, at.w!, N, at.bias!, at.out!, 0, 1, 0, N));
  const calls: Record<string, () => void> = { 'f64 plain': shipped(kernels.f64Plain), [SHIPPED]: shipped(kernels.f64Fused), 'f32 (dense_f32)': f32 };
  if (!blocked) {
    const [xt, wt] = [cpu.upload(x32.slice(), [T, K]), cpu.uploadWeight(w, [N, K], 'f32')];
    calls[SHIPPED_FUNCTION] = () => matmul(xt, wt);
    calls['matmulF32 (cpu-dense-f32)'] = () => matmulF32(xt, wt);
  }
  if (blocked) calls['f32 relaxed (bound)'] = () => kernels.f32Fused.matmulBlocksF32!(at.x32!, T, K, at.blocks!, N, at.bias!, at.out!, 0, N);
  return { calls, exact, kernel: blocked ? 'row blocks' : 'row-major' };
}

/** The backward product's operands: dy [T, N] as f64 (dense.wasm) and transposed, dyT [N][Tpad] (dense_f32.wasm). */
function setUpBackward({ N, K, T }: { N: number; K: number; T: number }) {
  const [k8, k4, tPad] = [roundUp(K, 8), roundUp(K, 4), roundUp(T, 8)];
  const at = layOut({ g64: T * N * 8, dyT: N * tPad * 4, w: N * K * 4, zeros: k4 * 4, out: Math.max(T * k8, k4 * tPad) * 4 });
  const buffer = memory.buffer;
  const [dy, g64, dyT, w] = [new Float32Array(T * N), new Float64Array(buffer, at.g64!, T * N), new Float32Array(buffer, at.dyT!, N * tPad), new Float32Array(buffer, at.w!, N * K)];
  dyT.fill(0);
  for (let i = 0; i < T * N; i++) g64[i] = dy[i] = dyT[(i % N) * tPad + Math.floor(i / N)] = activation(i);
  for (let i = 0; i < N * K; i++) w[i] = weightValue(i);
  new Float32Array(buffer, at.zeros!, k4).fill(0);
  const f32 = () => kernels.f32.matmulBackwardF32!(at.dyT!, tPad, N, at.w!, K, at.zeros!, at.out!, 0, K);
  /** The f32 kernel's outputs against the plain loop (n ascending), every 37th column. */
  const exact = () => {
    f32();
    const outT = new Float32Array(buffer, at.out!, k4 * tPad);
    for (let t = 0; t < T; t++)
      for (let k = 0; k < K; k += 37) {
        let sum = 0;
        for (let n = 0; n < N; n++) sum = Math.fround(sum + Math.fround(dy[t * N + n]! * w[n * K + k]!));
        if (!Object.is(sum, outT[k * tPad + t])) return false;
      }
    return true;
  };
  const shipped = (k: Kernels) => () => k.matmulBackward!(at.g64!, T, N, at.w!, K, at.out!, 0, 1, 0, K);
  const [dyt, wt] = [cpu.upload(dy, [T, N]), cpu.uploadWeight(w, [N, K], 'f32')];
  const calls: Record<string, () => void> = {
    'f64 plain': shipped(kernels.f64Plain),
    [SHIPPED]: shipped(kernels.f64Fused),
    'f32 (dense_f32)': f32,
    [SHIPPED_BACKWARD]: () => matmulBackward(dyt, wt),
    'matmulBackwardF32 (cpu-dense-f32)': () => matmulBackwardF32(dyt, wt),
  };
  return { calls, exact, kernel: 'backward' };
}

const loads = [loadavg()[0]!];
const rows = [];
console.log('shape                        N      K    T  layout      kernel                                ms   GMAC/s  vs shipped');
for (const shape of SHAPES) {
  const { calls, exact, kernel: layout } = setUp(shape);
  if (!exact()) throw new Error(`${shape.name}, T ${shape.T}${shape.backward ? ', backward' : ''}: dense_f32 does not equal its plain loop: the comparison would time something else`);
  const names = Object.keys(calls);
  const samples = new Map<string, number[]>(names.map((k) => [k, []]));
  for (let round = 0; round < (shape.T > 8 ? promptRounds : rounds); round++)
    for (const name of round % 2 ? [...names].reverse() : names) {
      const start = performance.now();
      calls[name]!();
      samples.get(name)!.push(performance.now() - start);
    }
  for (const name of names) {
    // the TypeScript functions against the shipped one's (cpu-dense.ts's matmul), the kernels against the shipped kernel
    const shippedMs = median(samples.get(name.includes('(cpu-dense') ? (shape.backward ? SHIPPED_BACKWARD : SHIPPED_FUNCTION) : SHIPPED)!);
    const ms = median(samples.get(name)!);
    const gmacPerS = (shape.N * shape.K * shape.T) / ms / 1e6;
    rows.push({ ...shape, layout, kernel: name, ms, gmacPerS, vsShipped: shippedMs / ms, samplesMs: samples.get(name) });
    console.log(`${shape.name.padEnd(20)}${String(shape.N).padStart(7)}${String(shape.K).padStart(7)}${String(shape.T).padStart(5)}  ${layout.padEnd(12)}${name.padEnd(35)}${ms.toFixed(3).padStart(8)}${gmacPerS.toFixed(2).padStart(9)}${(shippedMs / ms).toFixed(2).padStart(11)}x`);
  }
}
loads.push(loadavg()[0]!);
console.log(`1 thread, ${rounds} rounds (T = 256: ${promptRounds}), medians; load average ${Math.min(...loads).toFixed(1)}-${Math.max(...loads).toFixed(1)}; dense_f32 equals fround(s + fround(x·w)) in the reference's order in every shape`);
mkdirSync(dirname(args.out), { recursive: true });
writeFileSync(args.out, JSON.stringify({ loadAverage: [Math.min(...loads), Math.max(...loads)], rounds, promptRounds, rows }, null, 2) + '\n');
console.log(`wrote ${args.out}`);
