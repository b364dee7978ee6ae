// The CPU backend's dense forward product with f32 sums, the way llama.cpp sums (opt-in: `backend: {name: cpu,
// sums: f32}` routes the base model's forward matmul here; LoRA, attention and every backward product keep
// cpu-dense.ts's f64 sums):
//   matmulF32:  out[t, n] = f32(s + bias[n]),  s = +0; for k ascending: s = f32(s + f32(x[t, k]·w[n, k]))
//               x [T, K], w [N, K] -> [T, N]                                                  x̂·Wᵀ
// Every product and every sum rounded to f32, so the result is not cpu-dense.ts's matmul (f64 sums, one rounding)
// but its own fixed function of the inputs: matmulF32Reference is the plain loop, kernels/cpu/dense_f32.wasm
// (f32x4, 4 outputs a vector where dense.wasm holds 2) the fast path, equal to it bit for bit on every engine and
// at every thread count (test/cpu-dense-f32.test.ts).
// Two kernels, as cpu-dense.ts's matmul has:
//   matmulBlocksF32  f16 weights, through their row blocks (cpu-dense.ts rowBlocks, [⌈N/16⌉][K][16]), while x
//                    [T, K] f32 fits MAX_BLOCK_X_BYTES (decode, short prompts): tiles of 16 rows x 2 tokens
//   matmulF32        the rest (f32 weights, long x): w row-major [N, K] read in place, x staged transposed and
//                    padded, xT [K][Tpad] (Tpad = T rounded up to 8, extra tokens zero), out transposed
//                    [nPad4][Tpad]: tiles of 4 rows x 8 tokens, w[n, k] splat against x[t..t+3, k]
// and the reference where the arena cannot stage the operands (as cpu-dense.ts's matmul does).

import type { Tensor } from './backend.js';
import { homeOf, matmulThroughBlocks, roundUp, shapes, stage, weightBytes } from './cpu-dense.js';
import { f32Of, tensor } from './cpu-tensor.js';
import { ONE_THREAD, type CpuThreads } from './cpu-threads.js';

/** Tokens a tile of the row-major kernel takes (xT's rows are padded to a multiple of it). */
const TILE_TOKENS = 8;
/** Rows a tile of the row-major kernel takes (threads split rows at multiples of it). */
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
  const xT = s.f32(0, K * tPad).fill(0);
  for (let t = 0; t < T; t++) for (let k = 0; k < K; k++) xT[k * tPad + t] = xs[t * K + k]!;
  const b = s.f32(2, nPad).fill(0);
  if (bias) b.set(f32Of(bias).subarray(0, N));
  const wAt = s.weight(1, ws);
  threads.runRanges(N, TILE_ROWS, T * N * K, (first, end) => [{ fn: 'matmulF32', memory: s.memory, args: [s.at[0]!, tPad, K, wAt, N, s.at[2]!, s.at[3]!, first, end] }]);
  const outT = s.f32(3, nPad * tPad);
  const out = new Float32Array(T * N);
  for (let n = 0; n < N; n++) for (let t = 0; t < T; t++) out[t * N + n] = outT[n * tPad + t]!;
  return tensor(out, [T, N], 'f32');
}
