// Each backward op of the CPU reference against central finite differences of its forward op: for a random
// projection r, f(x) = Σ r · forward(x), and the backward op given dy = r must return ∂f/∂x.
import seedrandom from 'seedrandom';
import { describe, expect, it } from 'vitest';
import type { Tensor } from '../src/backend/backend.js';
import { CpuBackend } from '../src/backend/cpu.js';

const cpu = new CpuBackend();
const H = 1e-2;

function randoms(n: number, seed: string, scale = 1): Float32Array {
  const rng = seedrandom(seed);
  return Float32Array.from({ length: n }, () => (rng() * 2 - 1) * scale);
}

/** Σ r · values in float64. */
function project(values: Float32Array, r: Float32Array): number {
  let sum = 0;
  values.forEach((v, i) => (sum += v * r[i]!));
  return sum;
}

/**
 * Checks `analytic` (∂f/∂x at every entry) against central differences of f at a few entries of x.
 * f is evaluated by running the forward on a modified copy of x.
 */
async function expectFiniteDifferences(x: Float32Array, analytic: Float32Array, f: (x: Float32Array) => Promise<number>, what: string): Promise<void> {
  expect(analytic.length).toBe(x.length);
  const rng = seedrandom(what);
  for (let probe = 0; probe < 12; probe++) {
    const i = Math.floor(rng() * x.length);
    const at = (step: number) => {
      const copy = x.slice();
      copy[i] = copy[i]! + step;
      return f(copy);
    };
    const numeric = ((await at(H)) - (await at(-H))) / (2 * H);
    expect(Math.abs(analytic[i]! - numeric), `${what}[${i}]`).toBeLessThanOrEqual(2e-3 * (1 + Math.abs(numeric)));
  }
}

const up = (data: Float32Array, shape: number[]) => cpu.upload(data, shape);
const ids = (values: number[]) => cpu.uploadI32(Int32Array.from(values), [values.length]);
const read = (t: Tensor) => cpu.readF32(t);

describe('backward ops of the cpu reference against finite differences', () => {
  it('logitsBackward is the gradient of the weighted log-prob and entropy loss that logProbs computes', async () => {
    const [T, V] = [5, 11];
    const logits = randoms(T * V, 'z', 3);
    const targets = ids([0, 10, 4, 4, 7]);
    const [lw, ew] = [randoms(T, 'lw'), randoms(T, 'ew')];
    const loss = async (z: Float32Array) => {
      const lp = await read(cpu.logProbs(up(z, [T, V]), targets));
      let sum = 0;
      for (let t = 0; t < T; t++) sum -= lw[t]! * lp[t * 2]! + ew[t]! * lp[t * 2 + 1]!;
      return sum;
    };
    const analytic = await read(cpu.logitsBackward(up(logits, [T, V]), targets, up(lw, [T]), up(ew, [T])));
    await expectFiniteDifferences(logits, analytic, loss, 'logits');
  });

  it('matmulBackward and outerProductSum are the input and per-segment weight gradients of matmul', async () => {
    const [T, K, N] = [6, 7, 5];
    const [x, w, r] = [randoms(T * K, 'x'), randoms(N * K, 'w'), randoms(T * N, 'r')];
    const f = async (xv: Float32Array, wv: Float32Array) => project(await read(cpu.matmul(up(xv, [T, K]), cpu.uploadWeight(wv, [N, K], 'f32'))), r);
    const dy = up(r, [T, N]);
    await expectFiniteDifferences(x, await read(cpu.matmulBackward(dy, cpu.uploadWeight(w, [N, K], 'f32'))), (xv) => f(xv, w), 'x');
    // Segments {4, 1} and {0, 2, 5} (row 3 in none): segment s's sum is the gradient of rows in s only.
    const order = ids([4, 1, 0, 2, 5]);
    const dw = await read(cpu.outerProductSum(dy, up(x, [T, K]), order, ids([0, 2, 5]), up(Float32Array.of(1, 0.5), [2])));
    const maskRows = (rows: number[]) => Float32Array.from(r, (v, i) => (rows.includes(Math.floor(i / N)) ? v : 0));
    for (const [s, rows, scale] of [[0, [4, 1], 1], [1, [0, 2, 5], 0.5]] as const) {
      const rs = maskRows([...rows]);
      const fs = async (wv: Float32Array) => scale * project(await read(cpu.matmul(up(x, [T, K]), cpu.uploadWeight(wv, [N, K], 'f32'))), rs);
      await expectFiniteDifferences(w, dw.slice(s * N * K, (s + 1) * N * K), fs, `w segment ${s}`);
    }
  });

  it('rmsNormBackward and rmsNormWeightGrad are the gradients of rmsNorm', async () => {
    const [T, D] = [4, 9];
    const [x, w, r] = [randoms(T * D, 'x', 2), randoms(D, 'w'), randoms(T * D, 'r')];
    const f = async (xv: Float32Array, wv: Float32Array) => project(await read(cpu.rmsNorm(up(xv, [T, D]), up(wv, [D]), 1e-5)), r);
    await expectFiniteDifferences(x, await read(cpu.rmsNormBackward(up(r, [T, D]), up(x, [T, D]), up(w, [D]), 1e-5)), (xv) => f(xv, w), 'x');
    await expectFiniteDifferences(w, await read(cpu.rmsNormWeightGrad(up(r, [T, D]), up(x, [T, D]), 1e-5)), (wv) => f(x, wv), 'weight');
  });

  it('swigluBackward is the gradient of swiglu', async () => {
    const [gate, upValues, r] = [randoms(21, 'g', 3), randoms(21, 'u'), randoms(21, 'r')];
    const f = async (g: Float32Array, u: Float32Array) => project(await read(cpu.swiglu(up(g, [3, 7]), up(u, [3, 7]))), r);
    const [dGate, dUp] = cpu.swigluBackward(up(r, [3, 7]), up(gate, [3, 7]), up(upValues, [3, 7]));
    await expectFiniteDifferences(gate, await read(dGate), (g) => f(g, upValues), 'gate');
    await expectFiniteDifferences(upValues, await read(dUp), (u) => f(gate, u), 'up');
  });

  it('attentionBackward is the gradient of causal attention over packed sequences with GQA', async () => {
    // Sequences of 4, 1 and 3 tokens; 4 query heads over 2 kv heads of dimension 3.
    const positions = [0, 1, 2, 3, 0, 0, 1, 2];
    const seqEnds = [4, 4, 4, 4, 5, 8, 8, 8];
    const [T, heads, kvHeads, hd] = [8, 4, 2, 3];
    const [q, k, v, r] = [randoms(T * heads * hd, 'q'), randoms(T * kvHeads * hd, 'k'), randoms(T * kvHeads * hd, 'v'), randoms(T * heads * hd, 'r')];
    const shapes = { q: [T, heads * hd], kv: [T, kvHeads * hd] };
    const forward = (qv: Float32Array, kv: Float32Array, vv: Float32Array) => cpu.attentionPacked(up(qv, shapes.q), up(kv, shapes.kv), up(vv, shapes.kv), ids(positions), heads, kvHeads);
    const out = forward(q, k, v);
    const [dq, dk, dv] = cpu.attentionBackward(up(r, shapes.q), up(q, shapes.q), up(k, shapes.kv), up(v, shapes.kv), out, ids(positions), ids(seqEnds), heads, kvHeads);
    await expectFiniteDifferences(q, await read(dq), async (x) => project(await read(forward(x, k, v)), r), 'q');
    await expectFiniteDifferences(k, await read(dk), async (x) => project(await read(forward(q, x, v)), r), 'k');
    await expectFiniteDifferences(v, await read(dv), async (x) => project(await read(forward(q, k, x)), r), 'v');
  });

  it('loraExpandBackward and loraShrinkBackwardInPlace give the input gradient of the LoRA delta', async () => {
    // y = x·Wᵀ + scale·(x·Aₛᵀ)·Bₛᵀ per row's slot s (or none); dx = dy·W + (scale·dy·Bₛ)·Aₛ
    const [T, K, N, R, S] = [5, 6, 4, 3, 2];
    const [x, w, a, b, r] = [randoms(T * K, 'x'), randoms(N * K, 'w'), randoms(S * R * K, 'a'), randoms(S * N * R, 'b'), randoms(T * N, 'r')];
    const slots = ids([1, -1, 0, 1, 0]);
    const scales = up(Float32Array.of(0.5, 2), [S]);
    const f = async (xv: Float32Array) => {
      const xt = up(xv, [T, K]);
      const y = cpu.matmul(xt, cpu.uploadWeight(w, [N, K], 'f32'));
      cpu.loraExpandInPlace(y, cpu.loraShrink(xt, up(a, [S * R, K]), slots, R), up(b, [S * N, R]), slots, scales);
      return project(await read(y), r);
    };
    const dy = up(r, [T, N]);
    const dx = cpu.matmulBackward(dy, cpu.uploadWeight(w, [N, K], 'f32'));
    const dh = cpu.loraExpandBackward(dy, up(b, [S * N, R]), slots, scales, R);
    cpu.loraShrinkBackwardInPlace(dx, dh, up(a, [S * R, K]), slots);
    await expectFiniteDifferences(x, await read(dx), f, 'x');
  });

  it('sumSquaresBySlot and adamwInPlace follow their definitions on a hand-checked case', async () => {
    const grad = up(Float32Array.of(3, 4, 1, 2), [4]);
    expect(Array.from(await read(cpu.sumSquaresBySlot(grad, 2)))).toEqual([25, 5]);
    expect(Array.from(await read(cpu.sumSquaresBySlot(grad, 2, 1, 1)))).toEqual([5]); // slot 1 only
    expect(() => cpu.sumSquaresBySlot(grad, 2, 1, 2)).toThrow(/slots 1 .. 2 are not among the 2/);
    // Slot 0: step 1, lr 0.1, gradient scaled by 0.2 (clipped from norm 5 to 1): g = (0.6, 0.8).
    // m = 0.1·g, v = 0.001·g², m̂ = g, v̂ = g²: the update is lr·(sign(g)·|g|/(|g| + eps) + wd·p).
    const param = up(Float32Array.of(1, -2, 5, 6), [4]);
    const [m, v] = [cpu.zeros([4]), cpu.zeros([4])];
    const slotParams = up(Float32Array.of(0.1, 0.2, 1 / (1 - 0.9), 1 / (1 - 0.999), 0, 1, 1, 1), [2, 4]);
    cpu.adamwInPlace(param, grad, m, v, 2, slotParams, { beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.01 });
    const expected = [1 - 0.1 * (0.6 / (0.6 + 1e-8) + 0.01 * 1), -2 - 0.1 * (0.8 / (0.8 + 1e-8) + 0.01 * -2), 5, 6];
    const actual = await read(param);
    expected.forEach((e, i) => expect(actual[i]).toBeCloseTo(e, 6));
    const [mValues, vValues] = [await read(m), await read(v)];
    [0.06, 0.08, 0, 0].forEach((e, i) => expect(mValues[i]).toBeCloseTo(e, 7));
    [0.00036, 0.00064, 0, 0].forEach((e, i) => expect(vValues[i]).toBeCloseTo(e, 9));
  });
});
