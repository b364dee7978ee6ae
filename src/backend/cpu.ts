// The CPU reference backend: each op written as the plain maths, in f32 storage with f64 accumulation (the base
// model's dense products may sum in f32 instead, `sums: 'f32'`: cpu-dense-f32.ts). It is the oracle the WGSL kernels
// are tested against, and the fallback when no WebGPU adapter exists. The hot loops, the dense products, the LoRA
// products and decode attention (cpu-dense.ts, cpu-lora.ts, cpu-attention.ts), run WebAssembly SIMD kernels equal
// bit for bit to their plain loops; the weights and KV caches they read live in the CPU arena (cpu-arena.ts).

import { totalmem } from 'node:os';
import { assert, numel, type Backend, type DenseSums, type KvCache, type LinearOp, type Packed, type RopeKv, type SampleRow, type StepRows, type Tensor, type WeightStorage } from './backend.js';
import { roundToF16 } from './half.js';
import { automatonMasks } from './automaton-mask.js';
import { packSampleRows, sampleRow, SAMPLE_ROW_WORDS } from './sampling.js';
import { colsOf, concatColumns, f32Of, i32Of, rowsOf, tensor, type CpuTensor } from './cpu-tensor.js';
import { cpuArena, MAX_MEMORY_BYTES } from './cpu-arena.js';
import { CpuThreads, ONE_THREAD } from './cpu-threads.js';
import * as attend from './cpu-attention.js';
import * as backward from './cpu-backward.js';
import * as trainAttention from './cpu-train-attention.js';
import * as dense from './cpu-dense.js';
import * as denseF32 from './cpu-dense-f32.js';
import * as lora from './cpu-lora.js';
import * as evolution from './cpu-evolution.js';

export class CpuBackend implements Backend {
  readonly name = 'cpu' as const;
  readonly deviceDescription: string;
  /** Whether the hot loops run their WebAssembly SIMD kernels or their plain loops (the reference): the same bits. */
  private readonly simd: boolean;
  readonly viewAlignment = 4;
  readonly maxBindingBytes = Number.POSITIVE_INFINITY;
  /** One matrix fits one memory of the arena (cpu-arena.ts); all of them, the machine's memory. */
  readonly hostMemory = { maxMatrixBytes: MAX_MEMORY_BYTES - 2 ** 20, totalBytes: totalmem() };
  /**
   * The arrays free() gives back to the arena: a kept tensor's (its own block), a KV cache's k and v (one block for
   * both: it goes back when neither is in use).
   */
  private readonly releasable = new WeakMap<Float32Array, { block: Float32Array; inUse: number }>();
  /** uploadSampleRows' rows as given: the packed words hold temperature and topP in f32, sample() reads them in f64. */
  private readonly sampleRowsOf = new WeakMap<Tensor, readonly SampleRow[]>();

  /** The threads the SIMD kernels split their work over (cpu-threads.ts): any count gives the same bits. */
  private threads: CpuThreads;
  private readonly minWorkPerShare: number | undefined;
  readonly sums: DenseSums;

  /**
   * threads: the kernels' threads, this one included (default 1; select.ts gives the machine's cores);
   * minWorkPerShare: the least work a thread is given (tests cut small shapes with 1; cpu-threads.ts);
   * sums: what the dense products sum in (DenseSums; default f64).
   */
  constructor(options: { simd?: boolean; threads?: number; minWorkPerShare?: number; sums?: DenseSums } = {}) {
    this.simd = options.simd ?? true;
    this.minWorkPerShare = options.minWorkPerShare;
    this.sums = options.sums ?? 'f64';
    this.threads = this.simd ? CpuThreads.open(options.threads ?? 1, options.minWorkPerShare) : ONE_THREAD;
    const simd = !this.simd ? '' : cpuArena().count > 0 ? `, WebAssembly SIMD products, ${this.threads.count} thread${this.threads.count === 1 ? '' : 's'}` : '; no WebAssembly memory for its SIMD kernels';
    this.deviceDescription = `cpu (TypeScript reference${simd}${this.sums === 'f32' ? ', dense products summed in f32' : ''})`;
  }

  /** The threads its kernels use. */
  get threadCount(): number {
    return this.threads.count;
  }

  /** Its kernels use `count` threads from now on (a benchmark compares counts on one model; the bits are the same). */
  setThreads(count: number): void {
    if (!this.simd || count === this.threads.count) return;
    const next = CpuThreads.open(count, this.minWorkPerShare);
    this.threads.close();
    this.threads = next;
  }

  dispatches(): number {
    return 0;
  }

  upload(data: Float32Array, shape: readonly number[]): Tensor {
    return tensor(data.slice(), shape, 'f32');
  }
  uploadI32(data: Int32Array, shape: readonly number[]): Tensor {
    return tensor(data.slice(), shape, 'i32');
  }
  /** Weights live in the CPU arena, where the SIMD kernels read them in place (a plain array when it is full). */
  uploadWeight(data: Float32Array, shape: readonly [number, number], storage: WeightStorage): Tensor {
    const values = storage === 'f16' ? roundToF16(data) : data;
    const home = cpuArena().f32(values.length) ?? new Float32Array(values.length);
    home.set(values);
    return tensor(home, shape, storage);
  }
  zeros(shape: readonly number[]): Tensor {
    return tensor(new Float32Array(numel(shape)), shape, 'f32');
  }
  write(t: Tensor, data: Float32Array, offset: number): void {
    assert(t.dtype === 'f32', `write needs an f32 tensor, got ${t.dtype}`);
    f32Of(t).set(data, offset);
  }
  rowsView(t: Tensor, first: number, rows: number): Tensor {
    const cols = numel(t.shape.slice(1));
    assert(first >= 0 && first + rows <= (t.shape[0] ?? 1), `rowsView: rows ${first}..${first + rows} outside ${t.shape[0]}`);
    const whole = (t as CpuTensor).data;
    const data = whole.subarray(first * cols, (first + rows) * cols);
    if (whole instanceof Float32Array) cpuArena().keepParent(data as Float32Array, whole);
    return tensor(data, [rows, ...t.shape.slice(1)], t.dtype);
  }
  async readF32(t: Tensor): Promise<Float32Array> {
    return f32Of(t).slice();
  }
  async readI32(t: Tensor): Promise<Int32Array> {
    return i32Of(t).slice();
  }
  /**
   * A copy of t in the CPU arena, which free() gives back at once (arena.release) instead of when the garbage
   * collector gets to it: for a tensor that lives long among short-lived ones (a training micro-batch's tape, its
   * gradients). Plain arrays go back to malloc when collected, and glibc keeps the freed memory between live blocks
   * resident, so a step's memory grew with the timing of collections (docs/scale.md). t itself is left to the
   * collector; an int tensor, or one the arena cannot hold, is returned as it is.
   */
  keep(t: Tensor): Tensor {
    const data = (t as CpuTensor).data;
    const home = data instanceof Float32Array ? cpuArena().f32(data.length) : undefined;
    if (!home) return t;
    home.set(data);
    this.releasable.set(home, { block: home, inUse: 1 });
    return tensor(home, t.shape, t.dtype);
  }

  /**
   * Gives a kept tensor's block (keep) back to the arena at once, and a KV cache's once both its halves are freed (a
   * generation micro-batch's cache, the moment it is done); every other tensor is a plain array or a weight, left
   * to the garbage collector.
   */
  free(t: Tensor): void {
    const data = (t as CpuTensor).data as Float32Array;
    const owner = this.releasable.get(data);
    if (!owner) return;
    this.releasable.delete(data);
    if (--owner.inUse === 0) cpuArena().release(owner.block);
  }
  /** Gives the threads back (the workers end when no backend holds any). */
  destroy(): void {
    this.threads.close();
  }

  /**
   * The cache lives in the CPU arena, k and v in one block (one memory: the attention kernel reads both in place),
   * or in a plain array where the arena cannot hold it.
   */
  createKvCache(dims: Omit<KvCache, 'k' | 'v'>): KvCache {
    const shape = [dims.layers, dims.slots, dims.maxLen, dims.kvHeads, dims.headDim];
    const n = numel(shape);
    const inArena = cpuArena().f32(2 * n)?.fill(0);
    const both = inArena ?? new Float32Array(2 * n);
    const [k, v] = [both.subarray(0, n), both.subarray(n)];
    [k, v].forEach((half) => cpuArena().keepParent(half, both));
    if (inArena) {
      const owner = { block: inArena, inUse: 2 };
      [k, v].forEach((half) => this.releasable.set(half, owner));
    }
    return { ...dims, k: tensor(k, shape, 'f32'), v: tensor(v, shape, 'f32') };
  }

  embedding(table: Tensor, tokens: Tensor): Tensor {
    const [V, D] = table.shape as [number, number];
    const w = f32Of(table);
    const ids = i32Of(tokens);
    const out = new Float32Array(ids.length * D);
    ids.forEach((id, t) => {
      assert(id >= 0 && id < V, `token id ${id} outside the vocabulary [0, ${V})`);
      out.set(w.subarray(id * D, (id + 1) * D), t * D);
    });
    return tensor(out, [ids.length, D], 'f32');
  }

  rmsNorm(x: Tensor, weight: Tensor, eps: number): Tensor {
    const [T, D] = [rowsOf(x), colsOf(x)];
    const xs = f32Of(x);
    const w = f32Of(weight);
    const out = new Float32Array(T * D);
    for (let t = 0; t < T; t++) {
      let sumSquares = 0;
      for (let d = 0; d < D; d++) sumSquares += xs[t * D + d]! ** 2;
      const inverseRms = 1 / Math.sqrt(sumSquares / D + eps);
      for (let d = 0; d < D; d++) out[t * D + d] = xs[t * D + d]! * inverseRms * w[d]!;
    }
    return tensor(out, [T, D], 'f32');
  }

  matmul(x: Tensor, w: Tensor, bias?: Tensor): Tensor {
    if (this.sums === 'f32') return this.simd ? denseF32.matmulF32(x, w, bias, this.threads) : denseF32.matmulF32Reference(x, w, bias);
    return this.simd ? dense.matmul(x, w, bias, this.threads) : dense.matmulReference(x, w, bias);
  }

  addInPlace(acc: Tensor, x: Tensor): void {
    const a = f32Of(acc);
    const b = f32Of(x);
    assert(a.length === b.length, `addInPlace: sizes ${a.length} and ${b.length} differ`);
    for (let i = 0; i < a.length; i++) a[i] = a[i]! + b[i]!;
  }

  ropeInPlace(x: Tensor, positions: Tensor, table: Tensor, heads: number, headDim: number): void {
    const xs = f32Of(x);
    const pos = i32Of(positions);
    const cosSin = f32Of(table);
    const half = headDim / 2;
    for (let t = 0; t < pos.length; t++) {
      const row = pos[t]! * headDim;
      for (let h = 0; h < heads; h++) {
        const base = (t * heads + h) * headDim;
        for (let i = 0; i < half; i++) {
          // (plain consts: an array destructured here made the loop 3x slower)
          const cos = cosSin[row + i]!;
          const sin = cosSin[row + half + i]!;
          const x1 = xs[base + i]!;
          const x2 = xs[base + half + i]!;
          xs[base + i] = x1 * cos - x2 * sin;
          xs[base + half + i] = x2 * cos + x1 * sin;
        }
      }
    }
  }

  kvWrite(cache: KvCache, layer: number, k: Tensor, v: Tensor, slots: Tensor, positions: Tensor): void {
    const width = cache.kvHeads * cache.headDim;
    const [ks, vs, s, p] = [f32Of(k), f32Of(v), i32Of(slots), i32Of(positions)];
    const [kc, vc] = [f32Of(cache.k), f32Of(cache.v)];
    for (let t = 0; t < s.length; t++) {
      assert(p[t]! < cache.maxLen, `position ${p[t]} beyond the KV cache length ${cache.maxLen}`);
      const offset = ((layer * cache.slots + s[t]!) * cache.maxLen + p[t]!) * width;
      kc.set(ks.subarray(t * width, (t + 1) * width), offset);
      vc.set(vs.subarray(t * width, (t + 1) * width), offset);
    }
  }

  attention(q: Tensor, cache: KvCache, layer: number, slots: Tensor, positions: Tensor, heads: number): Tensor {
    return this.simd ? attend.attention(q, cache, layer, slots, positions, heads, this.threads) : attend.attentionReference(q, cache, layer, slots, positions, heads);
  }

  swiglu(gate: Tensor, up: Tensor): Tensor {
    return backward.swiglu(gate, up, this.simd ? this.threads : ONE_THREAD);
  }

  gatherRows(x: Tensor, rows: Tensor): Tensor {
    const [T, D] = [rowsOf(x), colsOf(x)];
    const [xs, r] = [f32Of(x), i32Of(rows)];
    const out = new Float32Array(r.length * D);
    r.forEach((row, m) => {
      assert(row >= 0 && row < T, `gatherRows: row ${row} outside [0, ${T})`);
      out.set(xs.subarray(row * D, (row + 1) * D), m * D);
    });
    return tensor(out, [r.length, D], 'f32');
  }

  loraShrink(x: Tensor, a: Tensor, adapters: Tensor, rank: number): Tensor {
    return this.simd ? lora.loraShrink(x, a, adapters, rank, this.threads) : lora.loraShrinkReference(x, a, adapters, rank);
  }

  loraExpandInPlace(y: Tensor, h: Tensor, b: Tensor, adapters: Tensor, scales: Tensor): void {
    if (this.simd) lora.loraExpand(y, h, b, adapters, scales, this.threads);
    else lora.loraExpandReference(y, h, b, adapters, scales);
  }

  sample(logits: Tensor, rows: readonly SampleRow[], mask?: Tensor): Tensor {
    const [M, V] = [rowsOf(logits), colsOf(logits)];
    assert(rows.length === M, `sample: ${rows.length} parameter rows for ${M} logit rows`);
    const ls = f32Of(logits);
    const bits = mask ? new Uint32Array(i32Of(mask).buffer) : undefined;
    const words = Math.ceil(V / 32);
    const out = new Int32Array(M);
    for (let m = 0; m < M; m++) {
      const allowed = bits ? (v: number) => ((bits[m * words + (v >>> 5)]! >>> (v & 31)) & 1) === 1 : undefined;
      out[m] = sampleRow(ls.subarray(m * V, (m + 1) * V), rows[m]!, allowed);
    }
    return tensor(out, [M], 'i32');
  }

  uploadSampleRows(rows: readonly SampleRow[]): Tensor {
    const params = tensor(new Int32Array(packSampleRows(rows).buffer), [rows.length, SAMPLE_ROW_WORDS], 'u32');
    this.sampleRowsOf.set(params, rows.map((r) => ({ ...r })));
    return params;
  }

  sampleStep(logits: Tensor, params: Tensor, step: number, history: Tensor, next: StepRows, tables?: Tensor): void {
    const rows = this.sampleRowsOf.get(params);
    assert(rows !== undefined, 'sampleStep: params must come from uploadSampleRows');
    const M = rows.length;
    const [past, tokens, positions] = [i32Of(history), i32Of(next.tokens), i32Of(next.positions)];
    assert((step + 1) * M <= past.length && tokens.length === M, `sampleStep: step ${step} of ${M} rows overruns the history [${history.shape.join(', ')}] or the next step's ${tokens.length} tokens`);
    const [V, words] = [colsOf(logits), Math.ceil(colsOf(logits) / 32)];
    const masks = tables ? automatonMasks(i32Of(tables), i32Of(params), M, V, step, tokens) : undefined;
    // A row its automaton allows nothing in draws -1 (as sample.wgsl does): sampled unmasked, then overwritten.
    const dead = Array.from({ length: M }, (_, m) => masks !== undefined && masks.subarray(m * words, (m + 1) * words).every((w) => w === 0));
    dead.forEach((d, m) => d && masks!.fill(-1, m * words, (m + 1) * words));
    const drawn = i32Of(this.sample(logits, rows.map((r) => ({ ...r, position: (r.position + step) >>> 0 })), masks && tensor(masks, [M, words], 'u32')));
    dead.forEach((d, m) => d && (drawn[m] = -1));
    past.set(drawn, step * M);
    tokens.set(drawn.map((token) => Math.max(token, 0))); // the next forward needs a real token, even from a dead row
    for (let m = 0; m < M; m++) positions[m] = positions[m]! + 1;
  }

  submit(): void {}

  // Fused ops: the plain ops above, composed in the order the unfused model runs them (so the results are the
  // same bits as that sequence).

  /** Each part's r_p = x̂·W_pᵀ + bias_p (+ its LoRA delta): [T, N_p]. */
  private linearParts(op: LinearOp, rows: StepRows): Tensor[] {
    assert(!(op.gather && op.lora), 'a gathered linear (the LM head) takes no LoRA');
    const gathered = op.gather ? this.gatherRows(op.x, rows.logitRows) : op.x;
    const x = op.norm ? this.rmsNorm(gathered, op.norm.weight, op.norm.eps) : gathered;
    return op.w.parts.map((w, p) => {
      const y = this.matmul(x, w, op.bias?.parts[p]);
      const lora = op.lora;
      const index = lora?.of[p] ?? -1;
      if (lora && index >= 0) this.loraExpandInPlace(y, columns(lora.h, index * lora.rank, lora.rank), lora.b.parts[index]!, rows.adapters, lora.scales);
      return y;
    });
  }

  linear(op: LinearOp, rows: StepRows): Tensor {
    return concatColumns(this.linearParts(op, rows));
  }

  linearResidual(op: LinearOp, rows: StepRows, y: Tensor): void {
    this.addInPlace(y, this.linear(op, rows));
  }

  linearSwiglu(op: LinearOp, rows: StepRows): Tensor {
    const [gate, up] = this.linearParts(op, rows);
    assert(op.w.parts.length === 2 && gate && up, 'linearSwiglu takes two parts: gate and up');
    return this.swiglu(gate, up);
  }

  linearRopeKv(op: LinearOp, rows: StepRows, rope: RopeKv): Tensor {
    const [q, k, v] = this.linearParts(op, rows);
    assert(op.w.parts.length === 3 && q && k && v, 'linearRopeKv takes three parts: q, k and v');
    const { cache, heads } = rope;
    this.ropeInPlace(q, rows.positions, rope.table, heads, cache.headDim);
    this.ropeInPlace(k, rows.positions, rope.table, cache.kvHeads, cache.headDim);
    this.kvWrite(cache, rope.layer, k, v, rows.slots, rows.positions);
    return q;
  }

  loraShrinkSegments(x: Tensor, a: Packed, rows: StepRows, rank: number, norm?: { weight: Tensor; eps: number }): Tensor {
    const input = norm ? this.rmsNorm(x, norm.weight, norm.eps) : x;
    if (this.simd) return lora.loraShrinkParts(input, a.parts, rows.adapters, rank, this.threads);
    return concatColumns(a.parts.map((part) => this.loraShrink(input, part, rows.adapters, rank)));
  }

  // Backward ops: the maths lives in cpu-backward.ts.
  logProbs: Backend['logProbs'] = (logits, targets) => (this.simd ? backward.logProbs(logits, targets, this.threads) : backward.logProbsReference(logits, targets));
  logitsBackward: Backend['logitsBackward'] = (logits, targets, logpWeight, entropyWeight) =>
    this.simd ? backward.logitsBackward(logits, targets, logpWeight, entropyWeight, this.threads) : backward.logitsBackwardReference(logits, targets, logpWeight, entropyWeight);
  matmulBackward: Backend['matmulBackward'] = (dy, w) => {
    if (this.sums === 'f32') return this.simd ? denseF32.matmulBackwardF32(dy, w, this.threads) : denseF32.matmulBackwardF32Reference(dy, w);
    return this.simd ? dense.matmulBackward(dy, w, this.threads) : dense.matmulBackwardReference(dy, w);
  };
  outerProductSum: Backend['outerProductSum'] = (u, v, order, offsets, scales) => (this.simd ? dense.outerProductSum(u, v, order, offsets, scales, this.threads) : dense.outerProductSumReference(u, v, order, offsets, scales));
  rmsNormBackward = backward.rmsNormBackward;
  rmsNormWeightGrad = backward.rmsNormWeightGrad;
  swigluBackward: Backend['swigluBackward'] = (dy, gate, up) => backward.swigluBackward(dy, gate, up, this.simd ? this.threads : ONE_THREAD);
  attentionPacked: Backend['attentionPacked'] = (q, k, v, positions, heads, kvHeads) => (this.simd ? trainAttention.attentionPacked(q, k, v, positions, heads, kvHeads, this.threads) : backward.attentionPackedReference(q, k, v, positions, heads, kvHeads));
  attentionBackward: Backend['attentionBackward'] = (dOut, q, k, v, out, positions, seqEnds, heads, kvHeads) =>
    this.simd ? trainAttention.attentionBackward(dOut, q, k, v, out, positions, seqEnds, heads, kvHeads, this.threads) : backward.attentionBackwardReference(dOut, q, k, v, out, positions, seqEnds, heads, kvHeads);
  loraExpandBackward: Backend['loraExpandBackward'] = (dy, b, adapters, scales, rank) => (this.simd ? lora.loraExpandBackward(dy, b, adapters, scales, rank, this.threads) : lora.loraExpandBackwardReference(dy, b, adapters, scales, rank));
  loraShrinkBackwardInPlace: Backend['loraShrinkBackwardInPlace'] = (dx, dh, a, adapters) => (this.simd ? lora.loraShrinkBackward(dx, dh, a, adapters, this.threads) : lora.loraShrinkBackwardReference(dx, dh, a, adapters));
  sumSquaresBySlot = backward.sumSquaresBySlot;
  adamwInPlace = backward.adamwInPlace;

  // Evolution ops: cpu-evolution.ts.
  mutateSlotInto = evolution.mutateSlotInto;
  mixSlotsInPlace = evolution.mixSlotsInPlace;
  gramsInto = evolution.gramsInto;
  combineInPlace = evolution.combineInPlace;
}

/** Columns first .. first + count - 1 of x [T, N], as a tensor [T, count] to read (a view of x for one row). */
function columns(x: Tensor, first: number, count: number): Tensor {
  const [T, N] = [rowsOf(x), colsOf(x)];
  const xs = f32Of(x);
  if (T === 1) return tensor(xs.subarray(first, first + count), [1, count], 'f32');
  const out = new Float32Array(T * count);
  for (let t = 0; t < T; t++) out.set(xs.subarray(t * N + first, t * N + first + count), t * count);
  return tensor(out, [T, count], 'f32');
}
