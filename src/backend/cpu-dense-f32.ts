// The CPU backend's dense products with f32 sums, the way llama.cpp sums (opt-in: `backend: {name: cpu, sums: f32}`
// routes the base model's products here, forward and backward; LoRA products, attention and the outer products of
// weight gradients keep cpu-dense.ts's f64 sums):
//   matmulF32:          out[t, n] = f32(s + bias[n]),  s = +0; for k ascending: s = f32(s + f32(x[t, k]·w[n, k]))
//                       x [T, K], w [N, K] -> [T, N]                                                  x̂·Wᵀ
//   matmulBackwardF32:  out[t, k] = s,                 s = +0; for n ascending: s = f32(s + f32(dy[t, n]·w[n, k]))
//                       dy [T, N], w [N, K] -> [T, K]                                                 dy·W
// Every product and every sum rounded to f32, so the results are not cpu-dense.ts's matmul and matmulBackward (f64
// sums, one rounding) but their own fixed functions of the inputs: the *Reference functions are the plain loops,
// kernels/cpu/dense_f32.wasm (f32x4, 4 outputs a vector where dense.wasm holds 2) the fast paths, equal to them bit
// for bit on every engine and at every thread count (test/cpu-dense-f32.test.ts).
// The forward product has two kernels, as cpu-dense.ts's matmul has:
//   matmulBlocksF32  f16 weights, through their row blocks (cpu-dense.ts rowBlocks, [⌈N/16⌉][K][16]), while x
//                    [T, K] f32 fits MAX_BLOCK_X_BYTES (decode, short prompts): tiles of 16 rows x 2 tokens
//   matmulF32        the rest (f32 weights, long x): w row-major [N, K] read in place, x staged transposed and
//                    padded, xT [K][Tpad] (Tpad = T rounded up to 8, extra tokens zero), out transposed
//                    [nPad4][Tpad]: tiles of 4 rows x 8 tokens, w[n, k] splat against x[t..t+3, k]
// The backward product runs matmulF32's tile loop with w's columns for rows: w read in place, dy staged transposed,
// dyT [N][Tpad], out transposed [kPad4][Tpad]: tiles of 4 columns x 8 tokens, w[n, k] splat against dy[t..t+3, n].
// Each takes the reference where the arena cannot stage the operands (as cpu-dense.ts's products do).

import type { Tensor } from './backend.js';
import { homeOf, matmulThroughBlocks, roundUp, shapes, stage, type Staged, weightBytes } from './cpu-dense.js';
import { f32Of, tensor } from './cpu-tensor.js';
import { ONE_THREAD, type CpuThreads } from './cpu-threads.js';

/** Tokens a tile of the row-major kernel takes (xT's rows are padded to a multiple of it). */
const TILE_TOKENS = 8;
/** Rows a tile of the row-major kernel takes (threads split rows, or the backward product's columns, at multiples of it). */
const TILE_ROWS = 4;

export function matmulF32Reference(x: Tensor, w: Tensor, bias?: Tensor): Tensor {
  const { T, N, K } = shapes('matmul', x, w);
  const [xs, ws, b] = [f32Of(x), f32Of(w), bias ? f32Of(bias) : undefined];
  const out = new Float32Array(T * N);
  for (let t = 0; t < T; t++) {
    for (let n = 0; n < N; n++) {
      let sum = 0;
      for (let k = 0; k < K; k++) sum = Math.fround(sum + Math.fround(xs[t * K + k]! * ws[n * K + k]!));
      out[t * N + n] = sum + (b ? b[n]! : 0); // (rounded to f32 as it is stored)
    }
  }
  return tensor(out, [T, N], 'f32');
}

/** a [T, L] into region `region` of `s` as aT [L][tPad], the padding tokens zero (the row-major kernel's x). */
function stageTransposed(s: Staged, region: number, a: Float32Array, T: number, L: number, tPad: number): void {
  const aT = s.f32(region, L * tPad).fill(0);
  for (let t = 0; t < T; t++) for (let j = 0; j < L; j++) aT[j * tPad + t] = a[t * L + j]!;
}

/** Region `region` of `s`, outT [≥R][tPad], as out [T, R]. */
function unstageTransposed(s: Staged, region: number, T: number, R: number, tPad: number): Float32Array {
  const outT = s.f32(region, R * tPad);
  const out = new Float32Array(T * R);
  for (let r = 0; r < R; r++) for (let t = 0; t < T; t++) out[t * R + r] = outT[r * tPad + t]!;
  return out;
}

/**
 * Both directions' row-major kernel (`fn`, dense_f32.wat's tile loop): a [T, L] staged transposed against w read in
 * place, out [T, R] = its R rows' sums over L steps plus `bias` [R] (+0s without one); threads each own whole rows
 * (4 at a time, the tile's). The reference where the arena cannot stage them (undefined).
 */
function throughTiles(fn: 'matmulF32' | 'matmulBackwardF32', a: Float32Array, T: number, L: number, ws: Float32Array, R: number, bias: Tensor | undefined, threads: CpuThreads): Float32Array | undefined {
  const [tPad, rPad] = [roundUp(T, TILE_TOKENS), roundUp(R, TILE_ROWS)];
  const home = homeOf(ws);
  const s = stage([L * tPad * 4, weightBytes(ws, home), rPad * 4, rPad * tPad * 4], home);
  if (!s) return undefined;
  stageTransposed(s, 0, a, T, L, tPad);
  const b = s.f32(2, rPad).fill(0);
  if (bias) b.set(f32Of(bias).subarray(0, R));
  const wAt = s.weight(1, ws);
  threads.runRanges(R, TILE_ROWS, T * R * L, (first, end) => [{ fn, memory: s.memory, args: [s.at[0]!, tPad, L, wAt, R, s.at[2]!, s.at[3]!, first, end] }]);
  return unstageTransposed(s, 3, T, R, tPad);
}

/** Threads each own whole rows n of w (16 at a time through row blocks, else 4). */
export function matmulF32(x: Tensor, w: Tensor, bias?: Tensor, threads: CpuThreads = ONE_THREAD): Tensor {
  const { T, N, K } = shapes('matmul', x, w);
  const xs = f32Of(x);
  const blocked = matmulThroughBlocks(xs, w, T, N, K, bias, threads, 'f32');
  if (blocked) return blocked;
  const out = throughTiles('matmulF32', xs, T, K, f32Of(w), N, bias, threads);
  return out ? tensor(out, [T, N], 'f32') : matmulF32Reference(x, w, bias);
}

export function matmulBackwardF32Reference(dy: Tensor, w: Tensor): Tensor {
  const { T, N, K } = shapes('matmulBackward', dy, w);
  const [g, ws] = [f32Of(dy), f32Of(w)];
  const out = new Float32Array(T * K);
  for (let t = 0; t < T; t++) {
    for (let k = 0; k < K; k++) {
      let sum = 0;
      for (let n = 0; n < N; n++) sum = Math.fround(sum + Math.fround(g[t * N + n]! * ws[n * K + k]!));
      out[t * K + k] = sum;
    }
  }
  return tensor(out, [T, K], 'f32');
}

/** Threads each own whole columns k of w (4 at a time, the tile's rows). f16 weights are read as their f32 values, row-major. */
export function matmulBackwardF32(dy: Tensor, w: Tensor, threads: CpuThreads = ONE_THREAD): Tensor {
  const { T, N, K } = shapes('matmulBackward', dy, w);
  const out = throughTiles('matmulBackwardF32', f32Of(dy), T, N, f32Of(w), K, undefined, threads);
  return out ? tensor(out, [T, K], 'f32') : matmulBackwardF32Reference(dy, w);
}
