// The backward kernels (kernels/*.wgsl) against the CPU reference (cpu-backward.ts), on odd shapes, and their
// batch invariance: a row, a sequence or a segment gives the same bits alone as among others.
import seedrandom from 'seedrandom';
import { describe, expect, it, onTestFinished } from 'vitest';
import type { Backend, Tensor } from '../src/backend/backend.js';
import { CpuBackend } from '../src/backend/cpu.js';
import { createWebGpuBackend } from '../src/backend/webgpu.js';
import { maxAbs, maxAbsDiff } from './reference-llama.js';
import { gpu } from './webgpu.js';

const cpu = new CpuBackend();

function randoms(n: number, seed: string, scale = 1): Float32Array {
  const rng = seedrandom(seed);
  return Float32Array.from({ length: n }, () => (rng() * 2 - 1) * scale);
}

function expectClose(actual: Float32Array, expected: Float32Array, tol = 1e-4, what = ''): void {
  expect(maxAbsDiff(actual, expected), what).toBeLessThanOrEqual(tol * (1 + maxAbs(expected)));
}

/** Runs `op` on WebGPU (`webgpu`, else the shared backend) and the CPU with the same host inputs, both results as arrays. */
async function both(op: (b: Backend) => Tensor | Tensor[], webgpu = gpu!): Promise<[Float32Array[], Float32Array[]]> {
  const read = async (b: Backend) => Promise.all([op(b)].flat().map((t) => b.readF32(t)));
  return [await read(webgpu), await read(cpu)];
}

const f = (b: Backend, data: Float32Array, shape: number[]) => b.upload(data, shape);
const ids = (b: Backend, values: readonly number[]) => b.uploadI32(Int32Array.from(values), [values.length]);

describe.skipIf(!gpu)('backward kernels on webgpu', () => {
  // The row kernels (log_softmax, rmsnorm_backward) in both thread layouts: a workgroup and a tree a row (GPU), a
  // thread a row (CPU, lavapipe's default).
  it.each(['gpu', 'cpu'] as const)('log_softmax, %s layout: log-probs, entropies and their gradient match the cpu; a row is the same alone', async (layout) => {
    const b = await createWebGpuBackend({ layout });
    onTestFinished(() => b.destroy());
    for (const [T, V] of [[1, 50], [7, 301], [5, 1000], [70, 64]] as const) {
      const logits = randoms(T * V, `z${V}`, 4);
      const targets = Array.from({ length: T }, (_, t) => (t * 37) % V);
      const [lw, ew] = [randoms(T, 'lw'), randoms(T, 'ew')];
      const [g, c] = await both((be) => [be.logProbs(f(be, logits, [T, V]), ids(be, targets)), be.logitsBackward(f(be, logits, [T, V]), ids(be, targets), f(be, lw, [T]), f(be, ew, [T]))], b);
      expectClose(g[0]!, c[0]!, 1e-5, 'logProbs');
      expectClose(g[1]!, c[1]!, 1e-5, 'logitsBackward');
      const alone = await b.readF32(b.logitsBackward(f(b, logits.slice(-V), [1, V]), ids(b, targets.slice(-1)), f(b, lw.slice(-1), [1]), f(b, ew.slice(-1), [1])));
      expect(alone).toEqual(g[1]!.slice(-V));
      const aloneLogProbs = await b.readF32(b.logProbs(f(b, logits.slice(-V), [1, V]), ids(b, targets.slice(-1))));
      expect(aloneLogProbs).toEqual(g[0]!.slice(-2));
    }
  });

  it('matmul_backward: dy·W for f32 and f16 weights matches the cpu; a row is the same alone', async () => {
    for (const [T, N, K] of [[1, 5, 1], [7, 67, 130], [37, 130, 67]] as const) {
      const [dy, w] = [randoms(T * N, `dy${K}`), randoms(N * K, `w${K}`)];
      for (const storage of ['f32', 'f16'] as const) {
        const [g, c] = await both((b) => b.matmulBackward(f(b, dy, [T, N]), b.uploadWeight(w, [N, K], storage)));
        expectClose(g[0]!, c[0]!, 1e-5, `${storage} [${T}, ${N}, ${K}]`);
        const alone = await gpu!.readF32(gpu!.matmulBackward(f(gpu!, dy.slice(0, N), [1, N]), gpu!.uploadWeight(w, [N, K], storage)));
        expect(alone).toEqual(g[0]!.slice(0, K));
      }
    }
  });

  it("matmul_backward's two thread layouts make the same sums, bit for bit, whatever a CPU-layout thread's units", async () => {
    const [gpuLayout, ...cpuLayouts] = await Promise.all([{ layout: 'gpu' as const }, { layout: 'cpu' as const, serialUnits: 1 }, { layout: 'cpu' as const, serialUnits: 8 }].map((o) => createWebGpuBackend(o)));
    // N over several staged chunks of n (256 at 16 rows, 512 at 8), K over several workgroups of columns, odd sizes
    for (const [T, N, K] of [[37, 601, 67], [5, 70, 1100], [1, 3, 9]] as const) {
      const [dy, w] = [randoms(T * N, `dy${N}`), randoms(N * K, `w${N}`)];
      const run = (b: Backend) => b.readF32(b.matmulBackward(f(b, dy, [T, N]), b.uploadWeight(w, [N, K], 'f16')));
      const reference = await run(gpuLayout!);
      expectClose(reference, await run(cpu), 1e-5, `[${T}, ${N}, ${K}]`);
      for (const b of cpuLayouts) expect(await run(b)).toEqual(reference);
    }
    [gpuLayout, ...cpuLayouts].forEach((b) => b!.destroy());
  });

  it('outer_product_sum: per-segment sums with scales match the cpu; a segment is the same without the others', async () => {
    const [T, I, J] = [41, 19, 35];
    const [u, v] = [randoms(T * I, 'u'), randoms(T * J, 'v')];
    const order = Array.from({ length: 37 }, (_, i) => (i * 11) % T); // 4 rows left out
    const offsets = [0, 5, 5, 30, 37]; // an empty segment too
    const scales = Float32Array.of(1, 2, -0.5, 3);
    const [g, c] = await both((b) => b.outerProductSum(f(b, u, [T, I]), f(b, v, [T, J]), ids(b, order), ids(b, offsets), f(b, scales, [4])));
    expectClose(g[0]!, c[0]!, 1e-5);
    const alone = await gpu!.readF32(gpu!.outerProductSum(f(gpu!, u, [T, I]), f(gpu!, v, [T, J]), ids(gpu!, order.slice(5, 30)), ids(gpu!, [0, 25]), f(gpu!, scales.slice(2, 3), [1])));
    expect(alone).toEqual(g[0]!.slice(2 * I * J, 3 * I * J));
  });

  it("outer_product_sum's two thread layouts make the same sums, bit for bit, whatever a CPU-layout thread's units", async () => {
    const [gpuLayout, ...cpuLayouts] = await Promise.all([{ layout: 'gpu' as const }, { layout: 'cpu' as const, serialUnits: 1 }, { layout: 'cpu' as const, serialUnits: 8 }].map((o) => createWebGpuBackend(o)));
    // i or j the longer (the CPU layout's columns), over several tiles of rows and workgroups of columns; odd sizes
    for (const [T, I, J] of [[41, 130, 16], [41, 16, 601], [13, 3, 5], [40, 67, 67]] as const) {
      const [u, v] = [randoms(T * I, `u${I}`), randoms(T * J, `v${J}`)];
      const order = Array.from({ length: T - 2 }, (_, i) => (i * 7) % T);
      const offsets = [0, 3, 3, T - 10, T - 2]; // an empty segment too
      const scales = Float32Array.of(1, 2, -0.5, 3);
      for (const withScales of [true, false]) {
        const run = (b: Backend) => b.readF32(b.outerProductSum(f(b, u, [T, I]), f(b, v, [T, J]), ids(b, order), ids(b, offsets), withScales ? f(b, scales, [4]) : undefined));
        const reference = await run(gpuLayout!);
        expectClose(reference, await run(cpu), 1e-5, `[${T}, ${I}, ${J}]`);
        for (const b of cpuLayouts) expect(await run(b)).toEqual(reference);
      }
    }
    [gpuLayout, ...cpuLayouts].forEach((b) => b!.destroy());
  });

  it.each(['gpu', 'cpu'] as const)('rmsnorm_backward and rmsnorm_weight_grad, %s layout, match the cpu; a row is the same alone', async (layout) => {
    const b = await createWebGpuBackend({ layout });
    onTestFinished(() => b.destroy());
    for (const [T, D] of [[9, 301], [70, 64]] as const) {
      const [dy, x, w] = [randoms(T * D, 'dy'), randoms(T * D, 'x', 2), randoms(D, 'w')];
      const [g, c] = await both((be) => [be.rmsNormBackward(f(be, dy, [T, D]), f(be, x, [T, D]), f(be, w, [D]), 1e-6), be.rmsNormWeightGrad(f(be, dy, [T, D]), f(be, x, [T, D]), 1e-6)], b);
      expectClose(g[0]!, c[0]!, 1e-5, 'dx');
      expectClose(g[1]!, c[1]!, 1e-5, 'dweight');
      const alone = await b.readF32(b.rmsNormBackward(f(b, dy.slice(-D), [1, D]), f(b, x.slice(-D), [1, D]), f(b, w, [D]), 1e-6));
      expect(alone).toEqual(g[0]!.slice(-D));
    }
  });

  it('swiglu_backward matches the cpu', async () => {
    const [dy, gate, up] = [randoms(777, 'dy'), randoms(777, 'g', 4), randoms(777, 'u')];
    const [g, c] = await both((b) => b.swigluBackward(f(b, dy, [7, 111]), f(b, gate, [7, 111]), f(b, up, [7, 111])));
    expectClose(g[0]!, c[0]!, 1e-5, 'dGate');
    expectClose(g[1]!, c[1]!, 1e-5, 'dUp');
  });

  it.each(['gpu', 'cpu'] as const)("%s layout: the training forward's attention over packed sequences is the inference's over the KV cache, bit for bit", async (layout) => {
    const b = await createWebGpuBackend({ layout });
    onTestFinished(() => b.destroy());
    const [heads, kvHeads, hd] = [4, 2, 16];
    const lengths = [5, 1, 70, 3];
    const positions = lengths.flatMap((L) => Array.from({ length: L }, (_, i) => i));
    const slots = lengths.flatMap((L, s) => Array(L).fill(s) as number[]);
    const T = positions.length;
    const [q, k, v] = [f(b, randoms(T * heads * hd, 'q'), [T, heads * hd]), f(b, randoms(T * kvHeads * hd, 'k'), [T, kvHeads * hd]), f(b, randoms(T * kvHeads * hd, 'v'), [T, kvHeads * hd])];
    const cache = b.createKvCache({ layers: 2, slots: lengths.length, maxLen: 80, kvHeads, headDim: hd });
    b.kvWrite(cache, 1, k, v, ids(b, slots), ids(b, positions));
    const inference = await b.readF32(b.attention(q, cache, 1, ids(b, slots), ids(b, positions), heads));
    const training = await b.readF32(b.attentionPacked(q, k, v, ids(b, positions), heads, kvHeads));
    expect(new Uint32Array(training.buffer)).toEqual(new Uint32Array(inference.buffer));
  });

  it('attention forward and backward over packed sequences match the cpu; a sequence is the same alone', async () => {
    for (const [heads, kvHeads, hd] of [[4, 2, 16], [4, 1, 67], [2, 2, 8]] as const) {
      const lengths = [5, 1, 70, 3];
      const positions = lengths.flatMap((L) => Array.from({ length: L }, (_, i) => i));
      const seqEnds = lengths.flatMap((L, s) => Array(L).fill(lengths.slice(0, s + 1).reduce((a, b) => a + b, 0)) as number[]);
      const T = positions.length;
      const [q, k, v, dOut] = [randoms(T * heads * hd, 'q'), randoms(T * kvHeads * hd, 'k'), randoms(T * kvHeads * hd, 'v'), randoms(T * heads * hd, 'do')];
      const run = (b: Backend, rows: [number, number]) => {
        const [from, to] = rows;
        const slice = (a: Float32Array, width: number) => f(b, a.slice(from * width, to * width), [to - from, width]);
        const [qt, kt, vt] = [slice(q, heads * hd), slice(k, kvHeads * hd), slice(v, kvHeads * hd)];
        const pos = ids(b, positions.slice(from, to));
        const out = b.attentionPacked(qt, kt, vt, pos, heads, kvHeads);
        return [out, ...b.attentionBackward(slice(dOut, heads * hd), qt, kt, vt, out, pos, ids(b, seqEnds.slice(from, to).map((e) => e - from)), heads, kvHeads)];
      };
      const [g, c] = await both((b) => run(b, [0, T]));
      ['out', 'dq', 'dk', 'dv'].forEach((name, i) => expectClose(g[i]!, c[i]!, 1e-5, `${name} ${heads}/${kvHeads}×${hd}`));
      const [from, to] = [6, 76]; // the 70-token sequence
      const alone = await Promise.all(run(gpu!, [from, to]).map((t) => gpu!.readF32(t)));
      [heads, heads, kvHeads, kvHeads].forEach((h, i) => expect(alone[i]).toEqual(g[i]!.slice(from * h * hd, to * h * hd)));
    }
  });

  it("attention_backward_query's and attention_backward_kv's two thread layouts make the same sums, bit for bit", async () => {
    const [gpuLayout, cpuLayout] = await Promise.all([createWebGpuBackend({ layout: 'gpu' }), createWebGpuBackend({ layout: 'cpu' })]);
    // sequences across the CPU layout's workgroups of 8 key tokens, one past 64 positions (the softmax sum's lanes);
    // head sizes past one 64-lane round, odd
    for (const [heads, kvHeads, hd] of [[4, 2, 16], [4, 1, 67], [2, 2, 130]] as const) {
      const lengths = [5, 1, 70, 3, 9];
      const positions = lengths.flatMap((L) => Array.from({ length: L }, (_, i) => i));
      const seqEnds = lengths.flatMap((L, s) => Array(L).fill(lengths.slice(0, s + 1).reduce((a, b) => a + b, 0)) as number[]);
      const T = positions.length;
      const [q, k, v, dOut, out] = [randoms(T * heads * hd, 'q'), randoms(T * kvHeads * hd, 'k'), randoms(T * kvHeads * hd, 'v'), randoms(T * heads * hd, 'do'), randoms(T * heads * hd, 'o')];
      const run = (b: Backend) => {
        const [qt, kt, vt] = [f(b, q, [T, heads * hd]), f(b, k, [T, kvHeads * hd]), f(b, v, [T, kvHeads * hd])];
        return Promise.all(b.attentionBackward(f(b, dOut, [T, heads * hd]), qt, kt, vt, f(b, out, [T, heads * hd]), ids(b, positions), ids(b, seqEnds), heads, kvHeads).map((t) => b.readF32(t)));
      };
      const [reference, reference2] = [await run(gpuLayout), await run(cpu)];
      ['dq', 'dk', 'dv'].forEach((name, i) => expectClose(reference[i]!, reference2[i]!, 1e-5, `${name} ${heads}/${kvHeads}×${hd}`));
      expect(await run(cpuLayout)).toEqual(reference);
    }
    [gpuLayout, cpuLayout].forEach((b) => b.destroy());
  });

  it('lora_expand_backward and lora_shrink_backward match the cpu, rows without an adapter untouched', async () => {
    const [T, N, K, R, S] = [9, 67, 45, 5, 3];
    const [dy, b, a, dx0] = [randoms(T * N, 'dy'), randoms(S * N * R, 'b'), randoms(S * R * K, 'a'), randoms(T * K, 'dx')];
    const adapters = [2, -1, 0, 1, 1, 7, 0, 2, -1]; // 7: past the bank, counts as none
    const scales = Float32Array.of(0.5, 2, 1.5);
    const [g, c] = await both((be) => {
      const dh = be.loraExpandBackward(f(be, dy, [T, N]), f(be, b, [S * N, R]), ids(be, adapters), f(be, scales, [S]), R);
      const dx = f(be, dx0, [T, K]);
      be.loraShrinkBackwardInPlace(dx, dh, f(be, a, [S * R, K]), ids(be, adapters));
      return [dh, dx];
    });
    // The cpu reference treats slot 7 as out of range too only through the bank size; compare the rows it defines.
    const rows = adapters.map((s, t) => (s >= 0 && s < S ? t : -1)).filter((t) => t >= 0);
    for (const t of rows) {
      expectClose(g[0]!.slice(t * R, (t + 1) * R), c[0]!.slice(t * R, (t + 1) * R), 1e-5, `dh row ${t}`);
      expectClose(g[1]!.slice(t * K, (t + 1) * K), c[1]!.slice(t * K, (t + 1) * K), 1e-5, `dx row ${t}`);
    }
    for (const t of [1, 5, 8]) {
      expect(Array.from(g[0]!.slice(t * R, (t + 1) * R))).toEqual(Array(R).fill(0));
      expect(g[1]!.slice(t * K, (t + 1) * K)).toEqual(dx0.slice(t * K, (t + 1) * K));
    }
  });

  it("lora_expand_backward's and lora_shrink_backward's two thread layouts make the same sums, bit for bit", async () => {
    const [gpuLayout, ...cpuLayouts] = await Promise.all([{ layout: 'gpu' as const }, { layout: 'cpu' as const, serialUnits: 1 }, { layout: 'cpu' as const, serialUnits: 8 }].map((o) => createWebGpuBackend(o)));
    // tiles of 8 rows of one adapter, of several, of none; N past several 32-lane rounds, odd; rank past 64 threads;
    // K past a workgroup's columns
    for (const [T, N, K, R] of [[37, 601, 133, 16], [20, 64, 700, 5], [1, 3, 1, 1], [11, 130, 9, 70]] as const) {
      const S = 3;
      const [dy, b, a, dx0] = [randoms(T * N, `dy${N}`), randoms(S * N * R, `b${N}`), randoms(S * R * K, `a${K}`), randoms(T * K, `dx${K}`)];
      const adapters = Array.from({ length: T }, (_, t) => (t < 16 ? [2, 0][t >> 3]! : t % 7 === 0 ? -1 : [0, 1, 2, 7][t % 4]!));
      const scales = Float32Array.of(0.5, 2, 1.5);
      const run = (be: Backend) => {
        const dh = be.loraExpandBackward(f(be, dy, [T, N]), f(be, b, [S * N, R]), ids(be, adapters), f(be, scales, [S]), R);
        const dx = f(be, dx0, [T, K]);
        be.loraShrinkBackwardInPlace(dx, dh, f(be, a, [S * R, K]), ids(be, adapters));
        return Promise.all([dh, dx].map((t) => be.readF32(t)));
      };
      const reference = await run(gpuLayout!);
      for (const be of cpuLayouts) expect(await run(be!)).toEqual(reference);
    }
    [gpuLayout, ...cpuLayouts].forEach((b) => b!.destroy());
  });

  it('sum_squares and adamw match the cpu over several steps, a slot with lr 0 untouched', async () => {
    const n = 3 * 333;
    const param0 = randoms(n, 'p');
    const states = [gpu!, cpu].map((b) => ({ b, param: f(b, param0, [n]), m: b.zeros([n]), v: b.zeros([n]) }));
    for (let step = 1; step <= 3; step++) {
      const grad = randoms(n, `g${step}`);
      const slotParams = Float32Array.of(0.01, 0.5, 1 / (1 - 0.9 ** step), 1 / (1 - 0.999 ** step), 0, 1, 1, 1, 0.02, 1, 1 / (1 - 0.9 ** step), 1 / (1 - 0.999 ** step));
      for (const s of states) s.b.adamwInPlace(s.param, f(s.b, grad, [n]), s.m, s.v, 333, f(s.b, slotParams, [3, 4]), { beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.1 });
      const [sg, sc] = [await gpu!.readF32(gpu!.sumSquaresBySlot(f(gpu!, grad, [n]), 333)), await cpu.readF32(cpu.sumSquaresBySlot(f(cpu, grad, [n]), 333))];
      expectClose(sg, sc, 1e-5, 'sum of squares');
      const [lastTwoGpu, lastTwoCpu] = [await gpu!.readF32(gpu!.sumSquaresBySlot(f(gpu!, grad, [n]), 333, 1, 2)), await cpu.readF32(cpu.sumSquaresBySlot(f(cpu, grad, [n]), 333, 1, 2))];
      expectClose(lastTwoGpu, lastTwoCpu, 1e-5, 'sum of squares of slots 1 and 2');
      expectClose(lastTwoCpu, sc.subarray(1), 0, 'slots 1 and 2 of all');
    }
    const [pg, pc] = [await gpu!.readF32(states[0]!.param), await cpu.readF32(states[1]!.param)];
    expectClose(pg, pc, 1e-5, 'param');
    expect(pg.slice(333, 666)).toEqual(param0.slice(333, 666));
  });
});
