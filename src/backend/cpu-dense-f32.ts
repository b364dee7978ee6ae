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

/** Threads each own whole rows n of w (16 at a time through row blocks, else 4). */
export function matmulF32(x: Tensor, w: Tensor, bias?: Tensor, threads: CpuThreads = ONE_THREAD): Tensor {
  const { T, N, K } = shapes('matmul', x, w);
  const [xs, ws] = [f32Of(x), f32Of(w)];
  const blocked = matmulThroughBlocks(xs, w, T, N, K, bias, threads, 'f32');
  if (blocked) return blocked;
  const [tPad, nPad] = [roundUp(T, TILE_TOKENS), roundUp(N, TILE_ROWS)];
  const home = homeOf(ws);
  const s = stage([K * tPad * 4, weightBytes(ws, home), nPad * 4, nPad * tPad * 4], home);
  if (!s) return matmulF32Reference(x, w, bias);
  stageTransposed(s, 0, xs, T, K, tPad);
  const b = s.f32(2, nPad).fill(0);
  if (bias) b.set(f32Of(bias).subarray(0, N));
  const wAt = s.weight(1, ws);
  threads.runRanges(N, TILE_ROWS, T * N * K, (first, end) => [{ fn: 'matmulF32', memory: s.memory, args: [s.at[0]!, tPad, K, wAt, N, s.at[2]!, s.at[3]!, first, end] }]);
  return tensor(unstageTransposed(s, 3, T, N, tPad), [T, N], 'f32');
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
  const [g, ws] = [f32Of(dy), f32Of(w)];
  const [tPad, kPad] = [roundUp(T, TILE_TOKENS), roundUp(K, TILE_ROWS)];
  const home = homeOf(ws);
  const s = stage([N * tPad * 4, weightBytes(ws, home), kPad * 4, kPad * tPad * 4], home);
  if (!s) return matmulBackwardF32Reference(dy, w);
  stageTransposed(s, 0, g, T, N, tPad);
  s.f32(2, kPad).fill(0); // the tiles' bias: +0
  const wAt = s.weight(1, ws);
  threads.runRanges(K, TILE_ROWS, T * N * K, (first, end) => [{ fn: 'matmulBackwardF32', memory: s.memory, args: [s.at[0]!, tPad, N, wAt, K, s.at[2]!, s.at[3]!, first, end] }]);
  return tensor(unstageTransposed(s, 3, T, K, tPad), [T, K], 'f32');
}
