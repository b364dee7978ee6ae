// The WebGPU backend's backward ops (backend.ts, "Backward ops"): one dispatch of a kernels/*.wgsl each (two
// for attention and the RMSNorm weight gradient). Shapes and semantics are those of cpu-backward.ts.

import { assert, colsOf, describeShape, numel, rowsOf, type AdamWHyper, type Tensor } from './backend.js';
import type { Binding, Params, Recorder } from './webgpu-recorder.js';
import { MAX_LORA_TM, MAX_SERIAL_TM, rowKernelLayout, SERIAL_THREADS, serialThreadsFor, serialTiling } from './webgpu-serial.js';

export interface GpuTensor extends Tensor {
  readonly buffer: GPUBuffer;
  readonly bytes: number;
}

/** What the backward ops use of the backend: its recorder, allocation and argument checks. */
export interface GpuContext {
  recorder: Recorder;
  dummy: GPUBuffer;
  output(shape: readonly number[], dtype?: 'f32' | 'i32'): GpuTensor;
  uploadI32(data: Int32Array, shape: readonly number[]): Tensor;
  free(t: Tensor): void;
  f32(t: Tensor, what: string): GpuTensor;
  i32(t: Tensor, count: number, what: string): GpuTensor;
  weight(t: Tensor, what: string): { tensor: GpuTensor; WEIGHT_F16: number };
  layout: 'gpu' | 'cpu'; // the thread layout of kernels that have two (webgpu.ts ThreadLayout)
  serialUnits?: number; // the CPU layout's units a thread, where fixed (tests)
}

const MAX_HEAD_DIM = 256; // attention_backward_kv.wgsl keeps 4 · 64 accumulators per thread

export class BackwardKernels {
  constructor(private readonly g: GpuContext) {}

  private logSoftmax(logits: Tensor, targets: Tensor, backward: boolean, logpWeight?: Tensor, entropyWeight?: Tensor): Tensor {
    const [T, V] = [rowsOf(logits), colsOf(logits)];
    const out = this.g.output(backward ? [T, V] : [T, 2]);
    const weights: Binding[] = backward ? [this.g.f32(logpWeight!, 'logitsBackward: logpWeight'), this.g.f32(entropyWeight!, 'logitsBackward: entropyWeight')] : [{ buffer: this.g.dummy }, { buffer: this.g.dummy }];
    if (backward) assert(numel(logpWeight!.shape) === T && numel(entropyWeight!.shape) === T, `logitsBackward: weights must have ${T} entries`);
    const bindings = [this.g.f32(logits, 'logProbs: logits'), this.g.i32(targets, T, 'logProbs: targets'), ...weights, out];
    const { constants, groups } = rowKernelLayout(this.g.layout === 'cpu', T);
    this.g.recorder.dispatch('log_softmax', { BACKWARD: backward ? 1 : 0, ...constants }, { T, V }, bindings, groups);
    return out;
  }

  logProbs(logits: Tensor, targets: Tensor): Tensor {
    return this.logSoftmax(logits, targets, false);
  }

  logitsBackward(logits: Tensor, targets: Tensor, logpWeight: Tensor, entropyWeight: Tensor): Tensor {
    return this.logSoftmax(logits, targets, true, logpWeight, entropyWeight);
  }

  matmulBackward(dy: Tensor, w: Tensor): Tensor {
    const { tensor: weight, WEIGHT_F16 } = this.g.weight(w, 'matmulBackward: w');
    const [T, N] = [rowsOf(dy), colsOf(dy)];
    const [Nw, K] = weight.shape as [number, number];
    assert(N === Nw, `matmulBackward: dy has ${N} columns but the weight has ${Nw} rows`);
    const out = this.g.output([T, K]);
    const tilesK = Math.ceil(K / 16);
    const fields = { T, N, K, tilesK };
    const bindings = [this.g.f32(dy, 'matmulBackward: dy'), weight, out];
    if (this.g.layout === 'gpu') {
      this.g.recorder.dispatch('matmul_backward', { WEIGHT_F16 }, fields, bindings, tilesK * Math.ceil(T / 16));
      return out;
    }
    const TM = T > 8 ? MAX_SERIAL_TM : 8;
    const tiling = serialTiling(K, false, Math.ceil(T / TM), this.g.serialUnits);
    this.g.recorder.dispatch('matmul_backward', { WEIGHT_F16, SERIAL: 1, TM, ...tiling }, fields, bindings, [Math.ceil(K / (tiling.SERIAL_THREADS * tiling.UNITS)), Math.ceil(T / TM)]);
    return out;
  }

  outerProductSum(u: Tensor, v: Tensor, order: Tensor, offsets: Tensor, scales?: Tensor): Tensor {
    const [T, I, J] = [rowsOf(u), colsOf(u), colsOf(v)];
    assert(rowsOf(v) === T, `outerProductSum: u has ${T} rows, v ${rowsOf(v)}`);
    const S = numel(offsets.shape) - 1;
    assert(S >= 1, 'outerProductSum: offsets needs at least 2 entries');
    if (scales) assert(numel(scales.shape) === S, `outerProductSum: ${numel(scales.shape)} scales for ${S} segments`);
    const out = this.g.output([S * I, J]);
    const [tilesI, tilesJ] = [Math.ceil(I / 16), Math.ceil(J / 16)];
    const fields = { I, J, S, tilesI, tilesJ, T };
    const bindings = [
      this.g.f32(u, 'outerProductSum: u'), this.g.f32(v, 'outerProductSum: v'), this.g.i32(order, numel(order.shape), 'outerProductSum: order'),
      this.g.i32(offsets, S + 1, 'outerProductSum: offsets'), scales ? this.g.f32(scales, 'outerProductSum: scales') : { buffer: this.g.dummy }, out,
    ];
    const HAS_SCALES = scales ? 1 : 0;
    if (this.g.layout === 'gpu') {
      this.g.recorder.dispatch('outer_product_sum', { HAS_SCALES }, fields, bindings, S * tilesI * tilesJ);
      return out;
    }
    // The CPU layout: the longer of i and j across the threads (lane-by-lane loads), the shorter in the tiles' rows.
    const SWAP = I > J ? 1 : 0;
    const [columns, rows] = SWAP ? [I, J] : [J, I];
    const TM = rows > 8 ? MAX_SERIAL_TM : rows > 4 ? 8 : 4;
    const tiles = S * Math.ceil(rows / TM);
    const tiling = serialTiling(columns, false, tiles, this.g.serialUnits);
    this.g.recorder.dispatch('outer_product_sum', { HAS_SCALES, SERIAL: 1, SWAP, TM, ...tiling }, fields, bindings, tiles * Math.ceil(columns / (tiling.SERIAL_THREADS * tiling.UNITS)));
    return out;
  }

  private rmsNormRows(dy: Tensor, x: Tensor, weight: Tensor | undefined, eps: number, inverseRmsOnly: boolean): GpuTensor {
    const [T, D] = [rowsOf(x), colsOf(x)];
    assert(numel(dy.shape) === T * D, `rmsNormBackward: dy ${describeShape(dy.shape)} and x ${describeShape(x.shape)} differ`);
    if (weight) assert(numel(weight.shape) === D, `rmsNormBackward: the weight has ${numel(weight.shape)} values for rows of ${D}`);
    const out = this.g.output(inverseRmsOnly ? [T] : [T, D]);
    const bindings = [this.g.f32(dy, 'rmsNormBackward: dy'), this.g.f32(x, 'rmsNormBackward: x'), weight ? this.g.f32(weight, 'rmsNormBackward: weight') : { buffer: this.g.dummy }, out];
    const { constants, groups } = rowKernelLayout(this.g.layout === 'cpu', T);
    this.g.recorder.dispatch('rmsnorm_backward', { INVERSE_RMS_ONLY: inverseRmsOnly ? 1 : 0, ...constants }, { T, D, eps }, bindings, groups);
    return out;
  }

  rmsNormBackward(dy: Tensor, x: Tensor, weight: Tensor, eps: number): Tensor {
    return this.rmsNormRows(dy, x, weight, eps, false);
  }

  rmsNormWeightGrad(dy: Tensor, x: Tensor, eps: number): Tensor {
    const [T, D] = [rowsOf(x), colsOf(x)];
    const inverseRms = this.rmsNormRows(dy, x, undefined, eps, true);
    const out = this.g.output([D]);
    this.g.recorder.dispatch('rmsnorm_weight_grad', {}, { T, D }, [this.g.f32(dy, 'rmsNormWeightGrad: dy'), this.g.f32(x, 'rmsNormWeightGrad: x'), inverseRms, out], Math.ceil(D / 256));
    this.g.free(inverseRms); // a later reuse is ordered after this dispatch
    return out;
  }

  swigluBackward(dy: Tensor, gate: Tensor, up: Tensor): [Tensor, Tensor] {
    const n = numel(gate.shape);
    assert(numel(up.shape) === n && numel(dy.shape) === n, 'swigluBackward: dy, gate and up differ in size');
    const [dGate, dUp] = [this.g.output(gate.shape), this.g.output(up.shape)];
    const bindings = [this.g.f32(dy, 'swigluBackward: dy'), this.g.f32(gate, 'swigluBackward: gate'), this.g.f32(up, 'swigluBackward: up'), dGate, dUp];
    this.g.recorder.dispatch('swiglu_backward', {}, { n }, bindings, Math.ceil(n / 256));
    return [dGate, dUp];
  }

  private attentionShape(q: Tensor, k: Tensor, positions: Tensor, heads: number, kvHeads: number): { T: number; headDim: number; fields: Params } {
    const T = numel(positions.shape);
    const headDim = numel(q.shape) / (T * heads);
    assert(Number.isInteger(headDim) && headDim <= MAX_HEAD_DIM, `attention: q ${describeShape(q.shape)} is not [${T}, ${heads} * headDim <= ${MAX_HEAD_DIM}]`);
    assert(heads % kvHeads === 0 && numel(k.shape) === T * kvHeads * headDim, `attention: k ${describeShape(k.shape)} is not [${T}, ${kvHeads} * ${headDim}]`);
    return { T, headDim, fields: { T, heads, kvHeads, headDim, scale: 1 / Math.sqrt(headDim) } };
  }

  attentionPacked(q: Tensor, k: Tensor, v: Tensor, positions: Tensor, heads: number, kvHeads: number): Tensor {
    const { T, fields } = this.attentionShape(q, k, positions, heads, kvHeads);
    const out = this.g.output(q.shape);
    const bindings = [this.g.f32(q, 'attention: q'), this.g.f32(k, 'attention: k'), this.g.f32(v, 'attention: v'), this.g.i32(positions, T, 'attention: positions'), out];
    const { constants, groups } = rowKernelLayout(this.g.layout === 'cpu', T * heads); // a (token, head) a row
    this.g.recorder.dispatch('attention_packed', constants, fields, bindings, groups);
    return out;
  }

  attentionBackward(dOut: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, positions: Tensor, seqEnds: Tensor, heads: number, kvHeads: number): [Tensor, Tensor, Tensor] {
    const { T, fields } = this.attentionShape(q, k, positions, heads, kvHeads);
    const [qs, ks, vs, gs] = [this.g.f32(q, 'attentionBackward: q'), this.g.f32(k, 'attentionBackward: k'), this.g.f32(v, 'attentionBackward: v'), this.g.f32(dOut, 'attentionBackward: dOut')];
    const [dq, stats] = [this.g.output(q.shape), this.g.output([T * heads, 3])];
    const queryBindings = [qs, ks, vs, gs, this.g.f32(out, 'attentionBackward: out'), this.g.i32(positions, T, 'attentionBackward: positions'), dq, stats];
    const serial = this.g.layout === 'cpu';
    const threads = serialThreadsFor(T * heads); // the CPU layout: a thread per (token, head)
    if (serial) this.g.recorder.dispatch('attention_backward_query', { SERIAL: 1, SERIAL_THREADS: threads }, fields, queryBindings, Math.ceil((T * heads) / threads));
    else this.g.recorder.dispatch('attention_backward_query', {}, fields, queryBindings, T * heads);
    const [dk, dv] = [this.g.output(k.shape), this.g.output(v.shape)];
    const kvBindings = [qs, ks, vs, gs, stats, this.g.i32(seqEnds, T, 'attentionBackward: seqEnds'), dk, dv];
    if (serial) this.g.recorder.dispatch('attention_backward_kv', { SERIAL: 1 }, fields, kvBindings, kvHeads * Math.ceil(T / 8)); // 8 key tokens a workgroup
    else this.g.recorder.dispatch('attention_backward_kv', {}, fields, kvBindings, T * kvHeads);
    this.g.free(stats);
    return [dq, dk, dv];
  }

  loraExpandBackward(dy: Tensor, b: Tensor, adapters: Tensor, scales: Tensor, rank: number): Tensor {
    const [T, N] = [rowsOf(dy), colsOf(dy)];
    const bank = this.g.f32(b, 'loraExpandBackward: the B bank');
    assert(colsOf(bank) === rank && rowsOf(bank) % N === 0, `loraExpandBackward: the B bank ${describeShape(b.shape)} is not [slots * ${N}, ${rank}]`);
    const out = this.g.output([T, rank]);
    const fields = { T, N, rank, slots: Math.min(rowsOf(bank) / N, numel(scales.shape)) };
    const bindings = [this.g.f32(dy, 'loraExpandBackward: dy'), bank, this.g.i32(adapters, T, 'loraExpandBackward: adapters'), this.g.f32(scales, 'loraExpandBackward: scales'), out];
    if (this.g.layout === 'gpu') {
      this.g.recorder.dispatch('lora_expand_backward', {}, fields, bindings, T);
      return out;
    }
    // The CPU layout: a thread a rank column, over tiles of up to 8 rows that share each load of B.
    const TM = Math.min(MAX_LORA_TM, 2 ** Math.ceil(Math.log2(Math.max(T, 1))));
    const threads = Math.min(SERIAL_THREADS, 8 * Math.ceil(rank / 8));
    this.g.recorder.dispatch('lora_expand_backward', { SERIAL: 1, TM, SERIAL_THREADS: threads }, fields, bindings, [Math.ceil(rank / threads), Math.ceil(T / TM)]);
    return out;
  }

  loraShrinkBackwardInPlace(dx: Tensor, dh: Tensor, a: Tensor, adapters: Tensor): void {
    const [T, K] = [rowsOf(dx), colsOf(dx)];
    const rank = colsOf(dh);
    const bank = this.g.f32(a, 'loraShrinkBackward: the A bank');
    assert(colsOf(bank) === K && rowsOf(bank) % rank === 0, `loraShrinkBackward: the A bank ${describeShape(a.shape)} is not [slots * ${rank}, ${K}]`);
    const fields = { T, K, rank, slots: rowsOf(bank) / rank };
    const bindings = [this.g.f32(dh, 'loraShrinkBackward: dh'), bank, this.g.i32(adapters, T, 'loraShrinkBackward: adapters'), this.g.f32(dx, 'loraShrinkBackward: dx')];
    if (this.g.layout === 'gpu') {
      this.g.recorder.dispatch('lora_shrink_backward', {}, fields, bindings, Math.ceil((T * K) / 256));
      return;
    }
    // The CPU layout: a register tile of columns × rows, the rows of one adapter sharing each load of A.
    const TM = T > 4 ? MAX_LORA_TM : 4;
    const tiling = serialTiling(K, false, Math.ceil(T / TM), this.g.serialUnits);
    this.g.recorder.dispatch('lora_shrink_backward', { SERIAL: 1, TM, ...tiling }, fields, bindings, [Math.ceil(K / (tiling.SERIAL_THREADS * tiling.UNITS)), Math.ceil(T / TM)]);
  }

  sumSquaresBySlot(x: Tensor, slotSize: number, first = 0, count = numel(x.shape) / slotSize - first): Tensor {
    const n = numel(x.shape);
    assert(n % slotSize === 0, `sumSquaresBySlot: ${n} elements are not whole slots of ${slotSize}`);
    assert(Number.isInteger(first) && Number.isInteger(count) && first >= 0 && count > 0 && (first + count) * slotSize <= n, `sumSquaresBySlot: slots ${first} .. ${first + count - 1} are not among the ${n / slotSize}`);
    const out = this.g.output([count]);
    this.g.recorder.dispatch('sum_squares', {}, { S: count, slotSize, first }, [this.g.f32(x, 'sumSquaresBySlot: x'), out], count);
    return out;
  }

  adamwInPlace(param: Tensor, grad: Tensor, m: Tensor, v: Tensor, slotSize: number, slotParams: Tensor, hyper: AdamWHyper): void {
    const n = numel(param.shape);
    assert([grad, m, v].every((t) => numel(t.shape) === n), 'adamwInPlace: param, grad, m and v differ in size');
    assert(n === (numel(slotParams.shape) / 4) * slotSize, `adamwInPlace: ${n} elements for ${numel(slotParams.shape) / 4} slots of ${slotSize}`);
    const fields = { n, slotSize, beta1: hyper.beta1, beta2: hyper.beta2, eps: hyper.eps, weightDecay: hyper.weightDecay };
    const bindings = [this.g.f32(param, 'adamw: param'), this.g.f32(grad, 'adamw: grad'), this.g.f32(m, 'adamw: m'), this.g.f32(v, 'adamw: v'), this.g.f32(slotParams, 'adamw: slotParams')];
    this.g.recorder.dispatch('adamw', {}, fields, bindings, Math.ceil(n / 256));
  }
}
