// The CPU backend's WebAssembly SIMD paths (cpu-dense.ts, cpu-lora.ts, cpu-attention.ts, cpu-train-attention.ts;
// kernels/cpu/dense.wat, attention.wat, train_attention.wat) and logitsBackward's fast path against their
// plain-loop references, bit for bit, over random shapes (odd sizes, sizes around the
// kernels' tiles of 4 and 8, f32 and f16-rounded weights, weights in the arena, outside it and as parts of a packed
// tensor, adapter slots in runs, unused and past the bank; f16 weights through their row blocks) and inputs
// whose sums cancel; the references against sums computed here; and a whole model, forward, decode at batch 1 and
// gradients, equal on the SIMD and the plain backend.
import { describe, expect, it } from 'vitest';
import { uploadPacked, type Tensor, type WeightStorage } from '../src/backend/backend.js';
import { cpuArena } from '../src/backend/cpu-arena.js';
import { f32Of } from '../src/backend/cpu-tensor.js';
import * as attend from '../src/backend/cpu-attention.js';
import * as dense from '../src/backend/cpu-dense.js';
import * as lora from '../src/backend/cpu-lora.js';
import { CpuBackend } from '../src/backend/cpu.js';
import { randomModel } from '../src/model/checkpoint.js';
import { TINY_CONFIGS } from '../src/model/config.js';
import { bits, H, hugeEnds, random, sameEndColumns, sameEndRows } from './cpu-inputs.js';
import { LlamaModel } from '../src/model/llama.js';
import { LoraBank } from '../src/model/lora-bank.js';
import { LORA_MODULES, randomAdapter } from '../src/model/peft.js';
import { packSequences } from '../src/train/batch.js';
import { LlamaTrainer } from '../src/train/llama-backward.js';

const cpu = new CpuBackend();
const read = (t: Tensor) => f32Of(t).slice();
const plain = new CpuBackend({ simd: false });
type Home = 'arena' | 'plain' | 'packed';

/** A weight [rows, cols] in the arena (uploadWeight), in a plain array (upload), or as the first part of a packed pair. */
function weight(values: Float32Array, rows: number, cols: number, storage: WeightStorage, home: Home): Tensor {
  if (home === 'arena') return cpu.uploadWeight(values, [rows, cols], storage);
  if (home === 'plain') return cpu.upload(storage === 'f16' ? read(cpu.uploadWeight(values, [rows, cols], 'f16')) : values, [rows, cols]);
  return uploadPacked(cpu, [{ rows, data: values }, { rows: 3, data: new Float32Array(3 * cols).fill(7) }], [cols], storage).parts[0]!;
}

/** Shapes around the tiles: 1, odd, 4k ± 1, 8k ± 1, and a layer-sized one. */
const SIZES = [1, 2, 3, 5, 7, 8, 9, 13, 16, 17, 31, 33, 64];

describe('the SIMD products equal their references bit for bit', () => {
  it('matmul and matmulBackward, over random shapes, storages and weight homes', () => {
    const r = random('dense');
    for (let trial = 0; trial < 80; trial++) {
      const [T, K, N] = [r.pick([1, 2, 3, 4, 5, 6, 7, 9, 34]), r.pick(SIZES), r.pick(SIZES)];
      const [storage, home] = [r.pick(['f32', 'f16'] as const), r.pick(['arena', 'plain', 'packed'] as const)];
      const cancel = trial % 3 !== 0; // Σ_k and Σ_n both start at +H and end at −H
      const ws = r.floats(N * K, 4);
      if (trial % 4 === 1) [ws[0], ws[ws.length >> 1], ws[ws.length - 1]] = [2 ** -20, -0, -(2 ** -17)]; // f16 subnormals, -0
      const w = weight(cancel ? sameEndRows(sameEndColumns(ws, K), N, K) : ws, N, K, storage, home);
      const x = cpu.upload(cancel ? hugeEnds(r.floats(T * K), K) : r.floats(T * K), [T, K]);
      const bias = trial % 2 ? cpu.upload(r.floats(N), [N]) : undefined;
      const what = `T ${T}, K ${K}, N ${N}, ${storage} in ${home}${cancel ? ', cancelling' : ''}`;
      expect(bits(dense.matmul(x, w, bias)), what).toEqual(bits(dense.matmulReference(x, w, bias)));
      const dy = cpu.upload(cancel ? hugeEnds(r.floats(T * N), N) : r.floats(T * N), [T, N]);
      expect(bits(dense.matmulBackward(dy, w)), what).toEqual(bits(dense.matmulBackwardReference(dy, w)));
    }
  });

  it('a layer-sized matmul (prefill: many tokens, K not a multiple of 4)', () => {
    const r = random('layer');
    const [T, K, N] = [37, 259, 130];
    const w = weight(sameEndRows(sameEndColumns(r.floats(N * K, 4), K), N, K), N, K, 'f16', 'arena');
    const x = cpu.upload(hugeEnds(r.floats(T * K), K), [T, K]);
    expect(bits(dense.matmul(x, w))).toEqual(bits(dense.matmulReference(x, w)));
    const dy = cpu.upload(hugeEnds(r.floats(T * N), N), [T, N]);
    expect(bits(dense.matmulBackward(dy, w))).toEqual(bits(dense.matmulBackwardReference(dy, w)));
  });

  it('matmul against an f16 weight, through its row blocks (tokens in pairs and alone, rows around 8 and 16, odd K)', () => {
    const r = random('blocks');
    for (let trial = 0; trial < 60; trial++) {
      const [T, K, N, home] = [r.pick([1, 2, 3, 4, 5, 8, 9]), r.pick(SIZES), r.pick([...SIZES, 15, 24, 47, 48, 49, 130]), r.pick(['arena', 'packed'] as const)];
      const cancel = trial % 3 !== 0;
      const ws = r.floats(N * K, 4);
      if (trial % 4 === 1) [ws[0], ws[ws.length >> 1], ws[ws.length - 1]] = [2 ** -20, -0, -(2 ** -17)];
      const w = weight(cancel ? sameEndRows(sameEndColumns(ws, K), N, K) : ws, N, K, 'f16', home);
      const x = cpu.upload(cancel ? hugeEnds(r.floats(T * K), K) : r.floats(T * K), [T, K]);
      const bias = trial % 2 ? cpu.upload(r.floats(N), [N]) : undefined;
      const what = `T ${T}, K ${K}, N ${N}, f16 in ${home}${cancel ? ', cancelling' : ''}`;
      expect(dense.hasRowBlocks(w), what).toBe(false);
      expect(bits(dense.matmul(x, w, bias)), what).toEqual(bits(dense.matmulReference(x, w, bias)));
      expect(dense.hasRowBlocks(w), what).toBe(true); // the product made them, so it went through them
      expect(bits(dense.matmul(x, w, bias)), `${what}, again`).toEqual(bits(dense.matmulReference(x, w, bias)));
    }
  });

  it('row blocks: 16 rows interleaved by k, rows past N zero; none for f32 weights (they may change)', () => {
    const [N, K] = [19, 3];
    const values = Float32Array.from({ length: N * K }, (_, i) => i + 1); // exact in f16
    const blocks = dense.rowBlocks(cpu.uploadWeight(values, [N, K], 'f16'))!;
    const expected = new Float32Array(32 * K);
    for (let n = 0; n < N; n++) for (let k = 0; k < K; k++) expected[Math.floor(n / 16) * 16 * K + k * 16 + (n % 16)] = n * K + k + 1;
    expect(Array.from(blocks)).toEqual(Array.from(expected));
    expect(dense.rowBlocks(cpu.uploadWeight(values, [N, K], 'f32'))).toBeUndefined();
    expect(() => cpu.adamwInPlace(cpu.uploadWeight(values, [N, K], 'f16'), cpu.zeros([N * K]), cpu.zeros([N * K]), cpu.zeros([N * K]), N * K, cpu.zeros([4]), { beta1: 0.9, beta2: 0.99, eps: 1e-8, weightDecay: 0 }))
      .toThrow(/adamwInPlace: f16 weights are read-only/);
  });

  it('outerProductSum, with segments in any order, empty segments and negative scales (-0 stays -0)', () => {
    const r = random('outer');
    for (let trial = 0; trial < 30; trial++) {
      const [T, I, J, S] = [r.pick([1, 3, 8, 11]), r.pick(SIZES), r.pick(SIZES), r.pick([1, 2, 4])];
      const order = Int32Array.from({ length: T }, (_, i) => i).sort(() => r.int(3) - 1);
      const cuts = Array.from({ length: S - 1 }, () => r.int(T + 1)).sort((a, b) => a - b);
      const bounds = [0, ...cuts, T];
      const offsets = cpu.uploadI32(Int32Array.from(bounds), [S + 1]);
      const [us, vs] = [trial % 5 === 0 ? new Float32Array(T * I) : r.floats(T * I), r.floats(T * J)];
      // Cancelling: each segment's sum starts at +H·v and ends at −H·v.
      for (let seg = 0; seg < S && trial % 3 !== 0; seg++) {
        const [first, last] = [order[bounds[seg]!]!, order[bounds[seg + 1]! - 1]!];
        if (bounds[seg + 1]! - bounds[seg]! < 2) continue;
        us.fill(H, first * I, (first + 1) * I).fill(-H, last * I, (last + 1) * I);
        vs.copyWithin(last * J, first * J, (first + 1) * J);
      }
      const [u, v] = [cpu.upload(us, [T, I]), cpu.upload(vs, [T, J])];
      const scales = trial % 2 ? cpu.upload(r.floats(S), [S]) : undefined;
      const args = [u, v, cpu.uploadI32(order, [T]), offsets, scales] as const;
      expect(bits(dense.outerProductSum(...args)), `T ${T}, I ${I}, J ${J}, S ${S}`).toEqual(bits(dense.outerProductSumReference(...args)));
    }
  });

  it('the four LoRA products (and the shrinks of several parts at once), with slots in runs, alone and unused (-1), f32 and f16 banks', () => {
    const r = random('lora');
    for (let trial = 0; trial < 40; trial++) {
      const [T, K, N, rank, slots] = [r.pick([1, 2, 5, 8, 12]), r.pick(SIZES), r.pick(SIZES), r.pick([1, 2, 4, 8, 16]), r.pick([1, 3])];
      const [storage, home] = [r.pick(['f32', 'f16'] as const), r.pick(['arena', 'plain', 'packed'] as const)];
      const cancel = trial % 3 !== 0; // every sum starts at +H and ends at −H
      const [as, bs] = [r.floats(slots * rank * K, 4), r.floats(slots * N * rank, 4)];
      if (cancel) {
        sameEndRows(sameEndColumns(as, K), rank, K);
        sameEndRows(sameEndColumns(bs, rank), N, rank);
      }
      const a = weight(as, slots * rank, K, storage, home);
      const b = weight(bs, slots * N, rank, storage, home);
      const ends = (values: Float32Array, cols: number) => (cancel ? hugeEnds(values, cols) : values);
      const run = r.int(3) + 1;
      // Now and then a slot past the bank: the fast path hands the call to the reference (NaN rows).
      const adapters = cpu.uploadI32(Int32Array.from({ length: T }, (_, t) => (r.int(5) === 0 ? -1 : trial % 7 === 3 && t === 0 ? slots : Math.floor(t / run) % slots)), [T]);
      const scales = cpu.upload(Float32Array.from({ length: slots }, (_, s) => (s === 1 ? -0.5 : 2 * (s + 1))), [slots]);
      const what = `T ${T}, K ${K}, N ${N}, rank ${rank}, ${slots} slots, ${storage} in ${home}`;
      const x = cpu.upload(ends(r.floats(T * K), K), [T, K]);
      expect(bits(lora.loraShrink(x, a, adapters, rank)), what).toEqual(bits(lora.loraShrinkReference(x, a, adapters, rank)));
      // The shrinks of a fused linear's parts, side by side: [T, parts·rank], each part's columns its own shrink.
      const second = weight(r.floats(slots * rank * K, 4), slots * rank, K, storage, home);
      const sideBySide = read(lora.loraShrinkParts(x, [a, second, a], adapters, rank));
      const partsOne = [a, second, a].map((part) => read(lora.loraShrinkReference(x, part, adapters, rank)));
      for (let t = 0; t < T; t++) partsOne.forEach((one, p) => expect(bits(sideBySide.subarray((t * 3 + p) * rank, (t * 3 + p + 1) * rank)), `${what}, part ${p}`).toEqual(bits(one.subarray(t * rank, (t + 1) * rank))));
      const h = cpu.upload(ends(r.floats(T * rank), rank), [T, rank]);
      const [y1, y2] = [0, 1].map(() => cpu.upload(Float32Array.from({ length: T * N }, (_, i) => Math.cos(i)), [T, N])) as [Tensor, Tensor];
      lora.loraExpand(y1, h, b, adapters, scales);
      lora.loraExpandReference(y2, h, b, adapters, scales);
      expect(bits(y1), what).toEqual(bits(y2));
      const dy = cpu.upload(trial % 4 === 0 ? new Float32Array(T * N) : ends(r.floats(T * N), N), [T, N]);
      expect(bits(lora.loraExpandBackward(dy, b, adapters, scales, rank)), what).toEqual(bits(lora.loraExpandBackwardReference(dy, b, adapters, scales, rank)));
      const [dx1, dx2] = [0, 1].map(() => cpu.upload(Float32Array.from({ length: T * K }, (_, i) => Math.sin(i)), [T, K])) as [Tensor, Tensor];
      lora.loraShrinkBackward(dx1, h, a, adapters);
      lora.loraShrinkBackwardReference(dx2, h, a, adapters);
      expect(bits(dx1), what).toEqual(bits(dx2));
    }
  });

  it('decode attention over a cache in the arena: any heads per kv head, head sizes around 8, ragged positions', () => {
    const r = random('attention');
    for (let trial = 0; trial < 40; trial++) {
      const [kvHeads, group, headDim] = [r.pick([1, 2, 3]), r.pick([1, 2, 4]), r.pick([1, 3, 8, 9, 16, 20])];
      const heads = kvHeads * group;
      // Cancelling: every token at the last position, whose key is position 0's (the same weight p_0) and whose
      // value is −H against +H at position 0. Otherwise: ragged positions and scores beyond exp's range.
      const cancel = trial % 2 === 0;
      const [layers, slots, maxLen, T] = [2, 3, cancel ? r.pick([3, 5, 17]) : r.pick([1, 5, 17]), r.pick([1, 2, 4, 7])];
      const cache = cpu.createKvCache({ layers, slots, maxLen, kvHeads, headDim });
      expect(cpuArena().memoryOf(f32Of(cache.k))).toBeDefined();
      const [ks, vs] = [f32Of(cache.k), f32Of(cache.v)];
      ks.set(r.floats(ks.length, cancel ? 0 : 6));
      vs.set(r.floats(vs.length));
      const row = kvHeads * headDim;
      for (let slot = 0; slot < layers * slots && cancel; slot++) {
        const [first, last] = [slot * maxLen * row, (slot * maxLen + maxLen - 1) * row];
        ks.copyWithin(last, first, first + row);
        vs.fill(H, first, first + row).fill(-H, last, last + row);
      }
      const q = cpu.upload(r.floats(T * heads * headDim, cancel ? 0 : 6), [T, heads * headDim]);
      const slotsOf = cpu.uploadI32(Int32Array.from({ length: T }, () => r.int(slots)), [T]);
      const positions = cpu.uploadI32(Int32Array.from({ length: T }, () => (cancel ? maxLen - 1 : r.int(maxLen))), [T]);
      const layer = r.int(layers);
      const what = `${heads} heads, ${kvHeads} kv heads, head size ${headDim}, ${T} tokens, cache of ${maxLen}${cancel ? ', cancelling' : ''}`;
      expect(bits(attend.attention(q, cache, layer, slotsOf, positions, heads)), what).toEqual(bits(attend.attentionReference(q, cache, layer, slotsOf, positions, heads)));
    }
  });

  it('training attention and its backward over packed sequences: any heads per kv head, odd head sizes, ragged sequences', () => {
    const r = random('training attention');
    for (let trial = 0; trial < 60; trial++) {
      const [kvHeads, group, headDim] = [r.pick([1, 2, 3]), r.pick([1, 2, 4]), r.pick([1, 3, 8, 9, 16, 20])];
      const heads = kvHeads * group;
      const cancel = trial % 2 === 0;
      const lengths = Array.from({ length: 1 + r.int(4) }, () => (cancel ? r.pick([2, 4, 8, 32]) : 1 + r.int(trial % 3 === 0 ? 40 : 9)));
      const positions = lengths.flatMap((n) => Array.from({ length: n }, (_, i) => i));
      const seqEnds = lengths.flatMap((n, s) => Array(n).fill(lengths.slice(0, s + 1).reduce((x, y) => x + y, 0)) as number[]);
      const T = positions.length;
      // Cancelling: sequences of n = 2^i tokens whose keys are all the same (probabilities 1/(t + 1), exact), the
      // first key's values +H and the last's −H (the forward's sums over keys cancel), the first token's output
      // gradients +H and the last's −H·n (dV's sums over tokens and heads cancel at key 0: 1·H against (1/n)·H·n),
      // so that another order of either sum gives other bits. Otherwise: ragged sequences, scores beyond exp's range.
      const [q, k, v, dOut] = [r.floats(T * heads * headDim, cancel ? 0 : 6), r.floats(T * kvHeads * headDim, cancel ? 0 : 6), r.floats(T * kvHeads * headDim), r.floats(T * heads * headDim)];
      let first = 0;
      for (const n of lengths.filter(() => cancel)) {
        const [kvRow, qRow] = [kvHeads * headDim, heads * headDim];
        for (let i = 1; i < n; i++) k.copyWithin((first + i) * kvRow, first * kvRow, (first + 1) * kvRow);
        v.fill(H, first * kvRow, (first + 1) * kvRow).fill(-H, (first + n - 1) * kvRow, (first + n) * kvRow);
        dOut.fill(H, first * qRow, (first + 1) * qRow).fill(-H * n, (first + n - 1) * qRow, (first + n) * qRow);
        first += n;
      }
      const [qt, kt, vt, gt] = [cpu.upload(q, [T, heads * headDim]), cpu.upload(k, [T, kvHeads * headDim]), cpu.upload(v, [T, kvHeads * headDim]), cpu.upload(dOut, [T, heads * headDim])];
      const [pos, ends] = [cpu.uploadI32(Int32Array.from(positions), [T]), cpu.uploadI32(Int32Array.from(seqEnds), [T])];
      const what = `${heads} heads, ${kvHeads} kv heads, head size ${headDim}, sequences of ${lengths.join(', ')}${cancel ? ', cancelling' : ''}`;
      const out = cpu.attentionPacked(qt, kt, vt, pos, heads, kvHeads);
      expect(bits(out), what).toEqual(bits(plain.attentionPacked(qt, kt, vt, pos, heads, kvHeads)));
      const fast = cpu.attentionBackward(gt, qt, kt, vt, out, pos, ends, heads, kvHeads);
      const reference = plain.attentionBackward(gt, qt, kt, vt, out, pos, ends, heads, kvHeads);
      fast.forEach((grad, i) => expect(bits(grad), `${['dq', 'dk', 'dv'][i]}: ${what}`).toEqual(bits(reference[i]!)));
    }
  });

  it('logitsBackward: odd vocabularies, probabilities that underflow to 0, zero and negative weights', () => {
    const r = random('logits backward');
    for (let trial = 0; trial < 30; trial++) {
      const [T, V] = [r.pick([1, 2, 5, 9]), r.pick([1, 2, 3, 7, 64, 65, 1001])];
      // Logits over 2^±6 (some exp(z - max) underflow to 0, so log p is skipped); a few rows share one huge value.
      // Order: rows whose first logit is the max (term 1) and the rest e^-38 below it (terms under half an ulp
      // of 1): added in order each rounds away and p_0 = 1 exactly, so the target 0's 1 - p_0 is 0; added in
      // another order they add up, and 1 - p_0 is not 0.
      const z = r.floats(T * V, 6);
      if (trial % 3 === 0) for (let i = 0; i < z.length; i += 5) z[i] = 1e4;
      const order = trial % 3 === 1 && V > 100;
      if (order) for (let i = 0; i < z.length; i++) z[i] = i % V === 0 ? 0 : -38;
      const logits = cpu.upload(z, [T, V]);
      const targets = cpu.uploadI32(Int32Array.from({ length: T }, () => (order ? 0 : r.int(V))), [T]);
      const weights = () => cpu.upload(Float32Array.from({ length: T }, () => (order ? 1 : r.pick([0, -0.5, 1, 3e-3, r.floats(1)[0]!]))), [T]);
      const [logpWeight, entropyWeight] = [weights(), weights()];
      expect(bits(cpu.logitsBackward(logits, targets, logpWeight, entropyWeight)), `${T} rows of ${V}`).toEqual(bits(plain.logitsBackward(logits, targets, logpWeight, entropyWeight)));
    }
  });

  it('bad shapes get the references\' errors', () => {
    const w = cpu.uploadWeight(new Float32Array(8), [2, 4], 'f32');
    expect(() => dense.matmul(cpu.upload(new Float32Array(6), [2, 3]), w)).toThrow(/matmul: x has 3 columns but the weight has 4/);
    expect(() => dense.matmulBackward(cpu.upload(new Float32Array(6), [2, 3]), w)).toThrow(/matmulBackward: dy has 3 columns but the weight has 2 rows/);
  });
});

describe('the references', () => {
  it('equal f64 sums computed here (matmul, matmulBackward, shrink, expand)', () => {
    const r = random('references');
    const [T, K, N, rank] = [3, 7, 5, 2];
    const [xs, ws, bs] = [r.floats(T * K), r.floats(N * K), r.floats(N)];
    const [x, w, bias] = [cpu.upload(xs, [T, K]), cpu.upload(ws, [N, K]), cpu.upload(bs, [N])];
    const out = read(dense.matmulReference(x, w, bias));
    const dy = r.floats(T * N);
    const back = read(dense.matmulBackwardReference(cpu.upload(dy, [T, N]), w));
    for (let t = 0; t < T; t++) {
      for (let n = 0; n < N; n++) expect(out[t * N + n]).toBe(Math.fround(Array.from({ length: K }, (_, k) => xs[t * K + k]! * ws[n * K + k]!).reduce((s, p) => s + p, 0) + bs[n]!));
      for (let k = 0; k < K; k++) expect(back[t * K + k]).toBe(Math.fround(Array.from({ length: N }, (_, n) => dy[t * N + n]! * ws[n * K + k]!).reduce((s, p) => s + p, 0)));
    }
    // Slot 1 of a two-slot bank for token 0, none for token 1.
    const adapters = cpu.uploadI32(Int32Array.of(1, -1), [2]);
    const h = read(lora.loraShrinkReference(cpu.upload(xs.subarray(0, 2 * K), [2, K]), cpu.upload(ws.subarray(0, 2 * rank * K), [2 * rank, K]), adapters, rank));
    for (let j = 0; j < rank; j++) expect(h[j]).toBe(Math.fround(Array.from({ length: K }, (_, k) => xs[k]! * ws[(rank + j) * K + k]!).reduce((s, p) => s + p, 0)));
    expect(Array.from(h.subarray(rank))).toEqual([0, 0]);
  });

  it('ropeInPlace and adamwInPlace equal their definitions computed here, element by element (their loops were rewritten for speed)', () => {
    const r = random('rope and adamw');
    const [T, heads, headDim, maxLen] = [5, 3, 6, 9];
    const [xs, table] = [r.floats(T * heads * headDim, 4), r.floats(maxLen * headDim, 0)];
    const positions = Int32Array.from({ length: T }, () => r.int(maxLen));
    const x = cpu.upload(xs, [T, heads * headDim]);
    cpu.ropeInPlace(x, cpu.uploadI32(positions, [T]), cpu.upload(table, [maxLen, headDim]), heads, headDim);
    const half = headDim / 2;
    const rotated = read(x);
    for (let t = 0; t < T; t++) {
      for (let i = 0; i < heads * half; i++) {
        const [base, j] = [(t * heads + Math.floor(i / half)) * headDim, i % half];
        const [cos, sin] = [table[positions[t]! * headDim + j]!, table[positions[t]! * headDim + half + j]!];
        expect(rotated[base + j]).toBe(Math.fround(xs[base + j]! * cos - xs[base + half + j]! * sin));
        expect(rotated[base + half + j]).toBe(Math.fround(xs[base + half + j]! * cos + xs[base + j]! * sin));
      }
    }
    // Three slots of 5: the middle one frozen (lr 0).
    const [slotSize, hyper] = [5, { beta1: 0.9, beta2: 0.99, eps: 1e-8, weightDecay: 0.1 }];
    const [p0, g, m0, v0] = [r.floats(15, 2), r.floats(15, 4), r.floats(15, 2), r.floats(15, 2).map(Math.abs)];
    const sp = Float32Array.of(0.01, 0.5, 1.1, 1.01, 0, 1, 1, 1, 0.003, 2, 10, 100);
    const [param, m, v] = [cpu.upload(p0, [15]), cpu.upload(m0, [15]), cpu.upload(v0, [15])];
    cpu.adamwInPlace(param, cpu.upload(g, [15]), m, v, slotSize, cpu.upload(sp, [3, 4]), hyper);
    for (let i = 0; i < 15; i++) {
      const s = Math.floor(i / slotSize);
      const [lr, scale, c1, c2] = [sp[s * 4]!, sp[s * 4 + 1]!, sp[s * 4 + 2]!, sp[s * 4 + 3]!];
      const gi = g[i]! * scale;
      const mi = Math.fround(hyper.beta1 * m0[i]! + (1 - hyper.beta1) * gi);
      const vi = Math.fround(hyper.beta2 * v0[i]! + (1 - hyper.beta2) * gi * gi);
      const pi = Math.fround(p0[i]! - lr * ((mi * c1) / (Math.sqrt(vi * c2) + hyper.eps) + hyper.weightDecay * p0[i]!));
      expect([read(param)[i], read(m)[i], read(v)[i]], `element ${i}`).toEqual(lr === 0 ? [p0[i], m0[i], v0[i]] : [pi, mi, vi]);
    }
  });
});

describe('the arena', () => {
  it('keeps earlier weights readable when it grows, and the kernels read them in place', () => {
    const r = random('arena');
    const values = r.floats(6 * 10);
    const w = cpu.uploadWeight(values, [6, 10], 'f32');
    expect(cpuArena().memoryOf(f32Of(w))).toBe(0); // the weight lives in the arena
    expect(cpuArena().memoryOf(read(w))).toBeUndefined(); // a read is a copy
    const before = cpuArena().memory(0).buffer.byteLength;
    const big = cpu.uploadWeight(new Float32Array(4 * 1024 * 1024), [1024, 4096], 'f32'); // 16 MiB: the memory grows
    expect(cpuArena().memory(0).buffer.byteLength).toBeGreaterThan(before);
    expect(Array.from(read(w))).toEqual(Array.from(values));
    const x = cpu.upload(r.floats(2 * 10), [2, 10]);
    expect(bits(dense.matmul(x, w))).toEqual(bits(dense.matmulReference(x, w)));
    expect(big.shape).toEqual([1024, 4096]);
  });
});

describe('a whole model on the SIMD and the plain backend', () => {
  it('decodes at batch 1 with the same logits, bit for bit (f16 weights, base and one adapter)', async () => {
    const config = TINY_CONFIGS['qwen2-tiny']!;
    const weights = randomModel(config, 11);
    const [simd, reference] = await Promise.all([cpu, plain].map(async (backend) => {
      const model = LlamaModel.upload(backend, config, weights, { storage: 'f16', maxContext: 16 });
      const bank = new LoraBank(backend, config, 2, 4, LORA_MODULES);
      bank.load(1, randomAdapter(config, { rank: 4, targets: [...LORA_MODULES], seed: 3, init: 'gaussian' }));
      const logits: number[][] = [];
      for (const adapter of [-1, 1]) {
        const cache = model.createKvCache(1, 16);
        for (let position = 0; position < 6; position++) {
          const one = (value: number) => Int32Array.of(value);
          const step = model.forward({ tokens: one((position * 5 + 2) % config.vocabSize), slots: one(0), positions: one(position), adapters: one(adapter), logitRows: one(0) }, cache, bank);
          logits.push(bits(await backend.readF32(step)));
        }
        model.freeKvCache(cache);
      }
      return logits;
    }));
    expect(simd).toEqual(reference);
  });

  for (const [storage, mode] of [['f16', 'lora'], ['f32', 'full']] as const) {
    it(`gives the same logits and the same gradients, bit for bit (${storage} weights, ${mode} mode, two adapters)`, async () => {
      const config = TINY_CONFIGS['qwen2-tiny']!;
      const weights = randomModel(config, 7);
      const results = await Promise.all([cpu, plain].map(async (backend) => {
        const model = LlamaModel.upload(backend, config, weights, { storage, maxContext: 16 });
        const bank = new LoraBank(backend, config, 2, 4, LORA_MODULES);
        for (let slot = 0; slot < 2; slot++) bank.load(slot, randomAdapter(config, { rank: 4, targets: [...LORA_MODULES], seed: slot, init: 'gaussian' }));
        const logits = await model.logits([1, 5, 9, 3, 7, 2, 11], 1, bank);
        const trainer = new LlamaTrainer(model, bank);
        const sequences = [{ tokens: [1, 4, 6, 8, 10], adapter: 0 }, { tokens: [1, 3, 5, 7, 9, 11, 13], adapter: 1 }, { tokens: [2, 4, 6], adapter: -1 }];
        const tape = trainer.forward(packSequences(sequences, config.vocabSize, 16));
        const T = tape.batch.tokens.length;
        const logpWeight = Float32Array.from({ length: T }, (_, t) => (t % 3) / 7);
        const grads = trainer.backward(tape, logpWeight, Float32Array.from({ length: T }, (_, t) => (t % 2) / 11), mode);
        return { logits, grads: new Map([...grads].map(([key, g]) => [key, bits(read(g))])) };
      }));
      const [simd, reference] = results as [(typeof results)[0], (typeof results)[0]];
      expect(bits(simd.logits)).toEqual(bits(reference.logits));
      expect([...simd.grads.keys()].sort()).toEqual([...reference.grads.keys()].sort());
      expect(simd.grads.size).toBeGreaterThan(10);
      for (const [key, g] of simd.grads) expect(g, key).toEqual(reference.grads.get(key));
    });
  }
});
