// Training forward and backward of the Llama decoder (src/model/llama.ts) over a packed batch (batch.ts).
//
// The forward is the same maths as LlamaModel.forward, with attention over the packed sequences instead of a
// KV cache, and it keeps what the backward needs. Per layer:
//   xIn ─rmsnorm→ h1 ─q,k,v(+LoRA)→ rope → attention → attended ─o(+LoRA)→ (+ xIn) = xMid
//   xMid ─rmsnorm→ h2 ─gate,up(+LoRA)→ swiglu → activated ─down(+LoRA)→ (+ xMid) = next xIn
// logits = rmsnorm(x)·Wlmᵀ for every token, [T, V], or for the `logitRows` asked for, [M, V]: a policy-gradient
// step wants only the tokens whose loss weight is not zero (the completion's; a prompt's tokens pass 151,936-wide
// rows of zeros back at 0.5B). The backward then gives the other rows the gradient a zero weight gives, +0.
//
// The backward runs the chain rule in reverse. Two modes:
//   'lora': gradients reach only the LoRA factors, per bank slot, laid out like the bank ([S·R, in], [S·out, R]);
//           each sample's gradient is summed over its own tokens, in token order, and a slot's gradient is its
//           samples' added up in sample order ("rounds": round r holds each slot's r-th sample). So an adapter's
//           gradient is the same bit for bit whichever other adapters or samples share the batch, and training in
//           micro-batches of whole samples (src/train/steps.ts) adds up to the whole batch's gradient exactly.
//   'full': every base weight gets a gradient (named as in Hugging Face checkpoints); for pretraining.
//
// Both passes are written as generators that yield after each layer: forward() and backward() run them through,
// forwardPaced() and backwardPaced() await a pause there (src/engine/pacer.ts: a signal is seen between layers).

import { assert, type Backend, type Tensor } from '../backend/backend.js';
import { ropeTable } from '../model/config.js';
import type { LlamaModel } from '../model/llama.js';
import type { LoraBank } from '../model/lora-bank.js';
import type { LoraModule } from '../model/peft.js';
import { sampleRounds, segmentsBy, type PackedBatch } from './batch.js';

export type TrainMode = 'lora' | 'full';

interface LayerTape {
  xIn: Tensor; // [T, D]
  h1: Tensor; // [T, D]
  q: Tensor; // [T, H·hd] after rope
  k: Tensor; // [T, Hkv·hd] after rope
  v: Tensor; // [T, Hkv·hd]
  attended: Tensor; // [T, H·hd]
  xMid: Tensor; // [T, D]
  h2: Tensor; // [T, D]
  gate: Tensor; // [T, F]
  up: Tensor; // [T, F]
  activated: Tensor; // [T, F]
}

/**
 * The rows whose logits a forward computes when not every row's: `rows` (ascending) and one more, `picked`'s last, a
 * row whose loss weight is always zero: its gradient (+0) is what every row left out gets (`scatter`).
 */
interface LogitSelection {
  rows: Int32Array; // [M]
  pickedRows: Int32Array; // [M + 1]: rows, then a row not among them
  picked: Tensor; // pickedRows on the device
  scatter: Tensor; // i32 [T]: row t's place in picked (M for a row left out)
}

/** Activations of one training forward; free with `LlamaTrainer.freeTape`. */
export interface Tape {
  readonly batch: PackedBatch;
  readonly inputs: { tokens: Tensor; positions: Tensor; seqEnds: Tensor; targets: Tensor; adapters?: Tensor }; // targets: of the logits' rows
  readonly selection: LogitSelection | null; // null: every row's logits
  readonly layers: LayerTape[];
  readonly xFinal: Tensor; // [T, D]
  readonly normed: Tensor; // [M, D] (M = T without a selection, else its M + 1)
  readonly logits: Tensor; // [M, V]
}

/** Gradients by parameter name: `${layer}.${module}.a|b` (LoRA, bank layout) or the Hugging Face weight name. */
export type Gradients = Map<string, Tensor>;

/** Every device tensor a tape holds (to free them, or to count their bytes). */
export function tapeTensors(tape: Tape): Tensor[] {
  const selection = tape.selection ? [tape.selection.picked, tape.selection.scatter] : [];
  return [...Object.values(tape.inputs), ...selection, ...tape.layers.flatMap((l) => Object.values(l)), tape.xFinal, tape.normed, tape.logits];
}

/** Each tensor of `tensors` through `keep`. */
function keepAll<T extends Record<string, Tensor>>(keep: (t: Tensor) => Tensor, tensors: T): T {
  return Object.fromEntries(Object.entries(tensors).map(([name, t]) => [name, keep(t)])) as T;
}

/** Runs a pass written as a generator (it yields between layers) to its end. */
function runThrough<T>(pass: Generator<void, T>): T {
  for (;;) {
    const next = pass.next();
    if (next.done) return next.value;
  }
}

/** The same, awaiting `pause` at each yield; a pause that throws ends the pass there. */
async function runPaced<T>(pass: Generator<void, T>, pause: () => Promise<void>): Promise<T> {
  for (;;) {
    const next = pass.next();
    if (next.done) return next.value;
    try {
      await pause();
    } catch (error) {
      pass.return(undefined as T);
      throw error;
    }
  }
}

export const loraGradKey = (layer: number, module: LoraModule, factor: 'a' | 'b') => `${layer}.${module}.${factor}`;

const HF_NAMES: Record<LoraModule, string> = {
  q_proj: 'self_attn.q_proj',
  k_proj: 'self_attn.k_proj',
  v_proj: 'self_attn.v_proj',
  o_proj: 'self_attn.o_proj',
  gate_proj: 'mlp.gate_proj',
  up_proj: 'mlp.up_proj',
  down_proj: 'mlp.down_proj',
};

function addBias(b: Backend, logits: Tensor, bias: Float32Array): void {
  const tensor = b.upload(bias, logits.shape);
  b.addInPlace(logits, tensor);
  b.free(tensor);
}

/** The rows of a [T, V] bias a logit selection keeps, in its order: [M, V]. */
function biasRows(bias: Float32Array, rows: Int32Array, vocab: number): Float32Array {
  const out = new Float32Array(rows.length * vocab);
  rows.forEach((row, m) => out.set(bias.subarray(row * vocab, (row + 1) * vocab), m * vocab));
  return out;
}

export class LlamaTrainer {
  private readonly b: Backend;
  private readonly inverseRope: Tensor; // rope's table with sin negated: the transpose of each rotation

  constructor(
    readonly model: LlamaModel,
    readonly bank?: LoraBank,
  ) {
    this.b = model.backend;
    const { headDim } = model.config;
    const table = ropeTable(model.config, model.maxContext);
    for (let row = 0; row < model.maxContext; row++) {
      for (let i = headDim / 2; i < headDim; i++) table[row * headDim + i] = -table[row * headDim + i]!;
    }
    this.inverseRope = this.b.upload(table, [model.maxContext, headDim]);
  }

  /** The weights that get gradients in 'full' mode, by Hugging Face name (a tied lm_head is the embedding). */
  parameters(): Map<string, Tensor> {
    const m = this.model;
    const params = new Map<string, Tensor>([['model.embed_tokens.weight', m.embedTokens]]);
    m.layers.forEach((layer, l) => {
      params.set(`model.layers.${l}.input_layernorm.weight`, layer.inputNorm);
      params.set(`model.layers.${l}.post_attention_layernorm.weight`, layer.postAttentionNorm);
      for (const [module, w] of Object.entries(layer.proj) as [LoraModule, Tensor][]) params.set(`model.layers.${l}.${HF_NAMES[module]}.weight`, w);
      for (const [module, bias] of Object.entries(layer.bias) as [LoraModule, Tensor][]) params.set(`model.layers.${l}.${HF_NAMES[module]}.bias`, bias);
    });
    params.set('model.norm.weight', m.finalNorm);
    if (m.lmHead !== m.embedTokens) params.set('lm_head.weight', m.lmHead);
    return params;
  }

  /** The forward pass of a batch; with `logitRows` (ascending), only those rows' logits. Free the tape with freeTape. */
  forward(batch: PackedBatch, logitRows?: Int32Array): Tape {
    return runThrough(this.forwardPass(batch, logitRows));
  }

  /** forward(), awaiting `pause` after each layer. */
  forwardPaced(batch: PackedBatch, logitRows: Int32Array | undefined, pause: () => Promise<void>): Promise<Tape> {
    return runPaced(this.forwardPass(batch, logitRows), pause);
  }

  private *forwardPass(batch: PackedBatch, logitRows?: Int32Array): Generator<void, Tape> {
    const { b, model } = this;
    const c = model.config;
    const T = batch.tokens.length;
    const useLora = this.bank !== undefined && batch.adapters.some((a) => a >= 0);
    assert(batch.adapters.every((a) => a < (this.bank?.capacity ?? 0)), 'training batch names an adapter slot outside the bank');
    const selection = logitRows && logitRows.length < T ? this.selectionOf(logitRows, T) : null;
    const inputs = {
      tokens: b.uploadI32(batch.tokens, [T]),
      positions: b.uploadI32(batch.positions, [T]),
      seqEnds: b.uploadI32(batch.seqEnds, [T]),
      targets: selection ? b.uploadI32(Int32Array.from(selection.pickedRows, (t) => batch.targets[t]!), [selection.pickedRows.length]) : b.uploadI32(batch.targets, [T]),
      ...(useLora && { adapters: b.uploadI32(batch.adapters, [T]) }),
    };
    const linear = (x: Tensor, layer: number, module: LoraModule): Tensor => {
      const y = b.matmul(x, model.layers[layer]!.proj[module], model.layers[layer]!.bias[module]);
      if (inputs.adapters && this.bank!.targets(module)) this.bank!.apply(y, x, layer, module, inputs.adapters);
      return y;
    };
    // The tape is kept where free() gives it back at once (Backend.keep: the CPU backend's arena), so that a
    // micro-batch's activations go back when freeTape is called, whatever the thread count or the collector's timing.
    const keep = (t: Tensor) => b.keep?.(t) ?? t;
    const layers: LayerTape[] = [];
    let x = keep(b.embedding(model.embedTokens, inputs.tokens)); // [T, D]
    for (const [l, weights] of model.layers.entries()) {
      const h1 = b.rmsNorm(x, weights.inputNorm, c.rmsNormEps);
      const [q, k, v] = [linear(h1, l, 'q_proj'), linear(h1, l, 'k_proj'), linear(h1, l, 'v_proj')];
      b.ropeInPlace(q, inputs.positions, model.rope, c.numHeads, c.headDim);
      b.ropeInPlace(k, inputs.positions, model.rope, c.numKvHeads, c.headDim);
      const attended = b.attentionPacked(q, k, v, inputs.positions, c.numHeads, c.numKvHeads);
      const xMid = linear(attended, l, 'o_proj');
      b.addInPlace(xMid, x); // xMid = x + o(attended): a new tensor, x stays on the tape
      const h2 = b.rmsNorm(xMid, weights.postAttentionNorm, c.rmsNormEps);
      const [gate, up] = [linear(h2, l, 'gate_proj'), linear(h2, l, 'up_proj')];
      const activated = b.swiglu(gate, up);
      const next = linear(activated, l, 'down_proj');
      b.addInPlace(next, xMid);
      layers.push({ xIn: x, ...keepAll(keep, { h1, q, k, v, attended, xMid, h2, gate, up, activated }) });
      x = keep(next);
      yield;
    }
    const rows = selection ? b.gatherRows(x, selection.picked) : x; // [M, D]
    const normed = b.rmsNorm(rows, model.finalNorm, c.rmsNormEps);
    if (rows !== x) b.free(rows);
    const logits = keep(b.matmul(normed, model.lmHead)); // [M, V]
    if (batch.logitBias) addBias(b, logits, selection ? biasRows(batch.logitBias, selection.pickedRows, logits.shape[1]!) : batch.logitBias); // a grammar's forbidden tokens (grammar-policy.ts)
    return { batch, inputs, selection, layers, xFinal: x, normed, logits };
  }

  private selectionOf(rows: Int32Array, T: number): LogitSelection {
    rows.forEach((row, m) => assert(row >= 0 && row < T && (m === 0 || row > rows[m - 1]!), `logit rows must be ascending rows of the batch, got ${row} at ${m}`));
    let left = 0; // the first row not asked for
    while (left < rows.length && rows[left] === left) left++;
    const scatter = new Int32Array(T).fill(rows.length);
    rows.forEach((row, m) => (scatter[row] = m));
    const pickedRows = Int32Array.from([...rows, left]);
    return { rows, pickedRows, picked: this.b.uploadI32(pickedRows, [pickedRows.length]), scatter: this.b.uploadI32(scatter, [T]) };
  }

  /**
   * Gradients of L = -Σ_t (logpWeight[t]·log p_t(targets[t]) + entropyWeight[t]·H(p_t)) for the tape's batch, added
   * to `into`'s (a previous micro-batch's: 'lora' mode) and returned in it. A row without logits (the tape's
   * selection) must have weights 0. The caller owns the returned tensors (free them, or hand them to the optimizer).
   */
  backward(tape: Tape, logpWeight: Float32Array, entropyWeight: Float32Array, mode: TrainMode, into: Gradients = new Map()): Gradients {
    return runThrough(this.backwardPass(tape, logpWeight, entropyWeight, mode, into));
  }

  /** backward(), awaiting `pause` after each layer. */
  backwardPaced(tape: Tape, logpWeight: Float32Array, entropyWeight: Float32Array, mode: TrainMode, into: Gradients, pause: () => Promise<void>): Promise<Gradients> {
    return runPaced(this.backwardPass(tape, logpWeight, entropyWeight, mode, into), pause);
  }

  private *backwardPass(tape: Tape, logpWeight: Float32Array, entropyWeight: Float32Array, mode: TrainMode, grads: Gradients): Generator<void, Gradients> {
    const { b, model } = this;
    const c = model.config;
    const T = tape.batch.tokens.length;
    assert(logpWeight.length === T && entropyWeight.length === T, `backward: loss weights for ${logpWeight.length} tokens, batch of ${T}`);
    assert(mode === 'full' || this.bank, "backward in 'lora' mode needs the trainer's LoRA bank");
    assert(mode === 'lora' || grads.size === 0, "'full' mode takes a whole batch: no gradients to add to");
    if (mode === 'full' && model.storage !== 'f32') {
      throw new RangeError("full-parameter training needs the model uploaded with f32 storage (LlamaModel.upload(..., { storage: 'f32' }))");
    }
    const { selection } = tape;
    if (selection) {
      const kept = new Uint8Array(T);
      selection.rows.forEach((row) => (kept[row] = 1));
      kept.forEach((k, t) => assert(k === 1 || (logpWeight[t] === 0 && entropyWeight[t] === 0), `backward: row ${t} has a loss weight but no logits (not among the forward's logit rows)`));
    }
    const accumulate = (key: string, g: Tensor) => {
      const existing = grads.get(key);
      if (!existing) return void grads.set(key, b.keep?.(g) ?? g); // kept as the tape is: they live the whole step
      b.addInPlace(existing, g);
      b.free(g);
    };
    const rowsOf = (n: number) => ({ order: b.uploadI32(Int32Array.from({ length: n }, (_, t) => t), [n]), offsets: b.uploadI32(Int32Array.of(0, n), [2]) });
    const all = rowsOf(T);
    const ones = b.upload(new Float32Array(T).fill(1), [T, 1]);
    // 'lora': one segment a slot per round, round r holding each slot's r-th sample (batch.ts sampleRounds)
    const rounds = this.bank && tape.inputs.adapters ? sampleRounds(tape.batch, this.bank.capacity).map((r) => ({ order: b.uploadI32(r.order, [r.order.length]), offsets: b.uploadI32(r.offsets, [r.offsets.length]) })) : [];
    const weightGrad = (dy: Tensor, x: Tensor) => b.outerProductSum(dy, x, all.order, all.offsets);

    /** dx of y = x·Wᵀ (+ bias) (+ LoRA), recording the parameters' gradients. */
    const linearBackward = (dy: Tensor, x: Tensor, layer: number, module: LoraModule): Tensor => {
      const name = `model.layers.${layer}.${HF_NAMES[module]}`;
      const dx = b.matmulBackward(dy, model.layers[layer]!.proj[module]);
      if (mode === 'full') {
        accumulate(`${name}.weight`, weightGrad(dy, x));
        if (model.layers[layer]!.bias[module]) accumulate(`${name}.bias`, b.outerProductSum(dy, ones, all.order, all.offsets));
      }
      if (rounds.length > 0 && this.bank!.targets(module)) {
        const bank = this.bank!;
        const { a, b: bFactor } = bank.factors(layer, module);
        const h = b.loraShrink(x, a, tape.inputs.adapters!, bank.rank); // [T, R]
        const dh = b.loraExpandBackward(dy, bFactor, tape.inputs.adapters!, bank.scaleTensor, bank.rank); // [T, R]
        b.loraShrinkBackwardInPlace(dx, dh, a, tape.inputs.adapters!);
        if (mode === 'lora') {
          for (const round of rounds) {
            accumulate(loraGradKey(layer, module, 'b'), b.outerProductSum(dy, h, round.order, round.offsets, bank.scaleTensor)); // [S·out, R]
            accumulate(loraGradKey(layer, module, 'a'), b.outerProductSum(dh, x, round.order, round.offsets)); // [S·R, in]
          }
        }
        [h, dh].forEach((t) => b.free(t));
      }
      return dx;
    };
    const sum = (tensors: Tensor[]): Tensor => {
      tensors.slice(1).forEach((t) => (b.addInPlace(tensors[0]!, t), b.free(t)));
      return tensors[0]!;
    };

    // The logits' rows: every row, or the selection's (its last row, not asked for, weighs 0).
    const picked = selection?.pickedRows;
    const weightsOf = (w: Float32Array) => (picked ? Float32Array.from(picked, (t, m) => (m < picked.length - 1 ? w[t]! : 0)) : w);
    const lw = b.upload(weightsOf(logpWeight), [picked?.length ?? T]);
    const ew = b.upload(weightsOf(entropyWeight), [picked?.length ?? T]);
    const dLogits = b.logitsBackward(tape.logits, tape.inputs.targets, lw, ew); // [M, V]
    const dPicked = b.matmulBackward(dLogits, model.lmHead); // [M, D]
    const dNormed = selection ? b.gatherRows(dPicked, selection.scatter) : dPicked; // [T, D]: a row left out gets the zero-weight row's
    if (mode === 'full') {
      const logitRows = rowsOf(picked?.length ?? T);
      accumulate(model.lmHead === model.embedTokens ? 'model.embed_tokens.weight' : 'lm_head.weight', b.outerProductSum(dLogits, tape.normed, logitRows.order, logitRows.offsets));
      accumulate('model.norm.weight', b.rmsNormWeightGrad(dNormed, tape.xFinal, c.rmsNormEps));
      [logitRows.order, logitRows.offsets].forEach((t) => b.free(t));
    }
    let dx = b.rmsNormBackward(dNormed, tape.xFinal, model.finalNorm, c.rmsNormEps); // [T, D]
    [lw, ew, dLogits, dPicked, ...(dNormed === dPicked ? [] : [dNormed])].forEach((t) => b.free(t));

    for (let l = model.layers.length - 1; l >= 0; l--) {
      yield;
      const a = tape.layers[l]!;
      const weights = model.layers[l]!;
      const dActivated = linearBackward(dx, a.activated, l, 'down_proj');
      const [dGate, dUp] = b.swigluBackward(dActivated, a.gate, a.up);
      const dh2 = sum([linearBackward(dGate, a.h2, l, 'gate_proj'), linearBackward(dUp, a.h2, l, 'up_proj')]);
      if (mode === 'full') accumulate(`model.layers.${l}.post_attention_layernorm.weight`, b.rmsNormWeightGrad(dh2, a.xMid, c.rmsNormEps));
      const dxMid = b.rmsNormBackward(dh2, a.xMid, weights.postAttentionNorm, c.rmsNormEps);
      b.addInPlace(dxMid, dx); // the residual path
      [dx, dActivated, dGate, dUp, dh2].forEach((t) => b.free(t));

      const dAttended = linearBackward(dxMid, a.attended, l, 'o_proj');
      const [dq, dk, dv] = b.attentionBackward(dAttended, a.q, a.k, a.v, a.attended, tape.inputs.positions, tape.inputs.seqEnds, c.numHeads, c.numKvHeads);
      b.ropeInPlace(dq, tape.inputs.positions, this.inverseRope, c.numHeads, c.headDim);
      b.ropeInPlace(dk, tape.inputs.positions, this.inverseRope, c.numKvHeads, c.headDim);
      const dh1 = sum([linearBackward(dq, a.h1, l, 'q_proj'), linearBackward(dk, a.h1, l, 'k_proj'), linearBackward(dv, a.h1, l, 'v_proj')]);
      if (mode === 'full') accumulate(`model.layers.${l}.input_layernorm.weight`, b.rmsNormWeightGrad(dh1, a.xIn, c.rmsNormEps));
      dx = b.rmsNormBackward(dh1, a.xIn, weights.inputNorm, c.rmsNormEps);
      b.addInPlace(dx, dxMid);
      [dxMid, dAttended, dq, dk, dv, dh1].forEach((t) => b.free(t));
    }
    if (mode === 'full') {
      const byToken = segmentsBy(tape.batch.tokens, c.vocabSize);
      const order = b.uploadI32(byToken.order, [T]);
      const offsets = b.uploadI32(byToken.offsets, [c.vocabSize + 1]);
      accumulate('model.embed_tokens.weight', b.outerProductSum(ones, dx, order, offsets)); // [V, D]
      [order, offsets].forEach((t) => b.free(t));
    }
    [dx, ones, all.order, all.offsets, ...rounds.flatMap((r) => [r.order, r.offsets])].forEach((t) => b.free(t));
    return grads;
  }

  freeTape(tape: Tape): void {
    tapeTensors(tape).forEach((t) => this.b.free(t));
  }

  destroy(): void {
    this.b.free(this.inverseRope);
  }
}
