// Training forward and backward of the Llama decoder (src/model/llama.ts) over a packed batch (batch.ts).
//
// The forward is the same maths as LlamaModel.forward, with attention over the packed sequences instead of a
// KV cache, and it keeps what the backward needs. Per layer:
//   xIn ─rmsnorm→ h1 ─q,k,v(+LoRA)→ rope → attention → attended ─o(+LoRA)→ (+ xIn) = xMid
//   xMid ─rmsnorm→ h2 ─gate,up(+LoRA)→ swiglu → activated ─down(+LoRA)→ (+ xMid) = next xIn
// logits = rmsnorm(x)·Wlmᵀ for every token: [T, V].
//
// The backward runs the chain rule in reverse. Two modes:
//   'lora': gradients reach only the LoRA factors, per bank slot, laid out like the bank ([S·R, in], [S·out, R]);
//           the sums for slot s run over s's tokens alone, in token order, so an adapter's gradient is the same
//           bit for bit whichever other adapters share the batch.
//   'full': every base weight gets a gradient (named as in Hugging Face checkpoints); for pretraining.

import { assert, type Backend, type Tensor } from '../backend/backend.js';
import { ropeTable } from '../model/config.js';
import type { LlamaModel } from '../model/llama.js';
import type { LoraBank } from '../model/lora-bank.js';
import type { LoraModule } from '../model/peft.js';
import { segmentsBy, type PackedBatch } from './batch.js';

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

/** Activations of one training forward; free with `LlamaTrainer.freeTape`. */
export interface Tape {
  readonly batch: PackedBatch;
  readonly inputs: { tokens: Tensor; positions: Tensor; seqEnds: Tensor; targets: Tensor; adapters?: Tensor };
  readonly layers: LayerTape[];
  readonly xFinal: Tensor; // [T, D]
  readonly normed: Tensor; // [T, D]
  readonly logits: Tensor; // [T, V]
}

/** Gradients by parameter name: `${layer}.${module}.a|b` (LoRA, bank layout) or the Hugging Face weight name. */
export type Gradients = Map<string, Tensor>;

/** Every device tensor a tape holds (to free them, or to count their bytes). */
export function tapeTensors(tape: Tape): Tensor[] {
  return [...Object.values(tape.inputs), ...tape.layers.flatMap((l) => Object.values(l)), tape.xFinal, tape.normed, tape.logits];
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

  forward(batch: PackedBatch): Tape {
    const { b, model } = this;
    const c = model.config;
    const T = batch.tokens.length;
    const useLora = this.bank !== undefined && batch.adapters.some((a) => a >= 0);
    assert(batch.adapters.every((a) => a < (this.bank?.capacity ?? 0)), 'training batch names an adapter slot outside the bank');
    const inputs = {
      tokens: b.uploadI32(batch.tokens, [T]),
      positions: b.uploadI32(batch.positions, [T]),
      seqEnds: b.uploadI32(batch.seqEnds, [T]),
      targets: b.uploadI32(batch.targets, [T]),
      ...(useLora && { adapters: b.uploadI32(batch.adapters, [T]) }),
    };
    const linear = (x: Tensor, layer: number, module: LoraModule): Tensor => {
      const y = b.matmul(x, model.layers[layer]!.proj[module], model.layers[layer]!.bias[module]);
      if (inputs.adapters && this.bank!.targets(module)) this.bank!.apply(y, x, layer, module, inputs.adapters);
      return y;
    };
    const layers: LayerTape[] = [];
    let x = b.embedding(model.embedTokens, inputs.tokens); // [T, D]
    model.layers.forEach((weights, l) => {
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
      layers.push({ xIn: x, h1, q, k, v, attended, xMid, h2, gate, up, activated });
      x = next;
    });
    const normed = b.rmsNorm(x, model.finalNorm, c.rmsNormEps);
    const logits = b.matmul(normed, model.lmHead); // [T, V]
    if (batch.logitBias) addBias(b, logits, batch.logitBias); // a grammar's forbidden tokens (grammar-policy.ts)
    return { batch, inputs, layers, xFinal: x, normed, logits };
  }

  /**
   * Gradients of L = -Σ_t (logpWeight[t]·log p_t(targets[t]) + entropyWeight[t]·H(p_t)) for the tape's batch.
   * The caller owns the returned tensors (free them, or hand them to the optimizer).
   */
  backward(tape: Tape, logpWeight: Float32Array, entropyWeight: Float32Array, mode: TrainMode): Gradients {
    const { b, model } = this;
    const c = model.config;
    const T = tape.batch.tokens.length;
    assert(logpWeight.length === T && entropyWeight.length === T, `backward: loss weights for ${logpWeight.length} tokens, batch of ${T}`);
    assert(mode === 'full' || this.bank, "backward in 'lora' mode needs the trainer's LoRA bank");
    if (mode === 'full' && model.storage !== 'f32') {
      throw new RangeError("full-parameter training needs the model uploaded with f32 storage (LlamaModel.upload(..., { storage: 'f32' }))");
    }
    const grads: Gradients = new Map();
    const accumulate = (key: string, g: Tensor) => {
      const existing = grads.get(key);
      if (!existing) return void grads.set(key, g);
      b.addInPlace(existing, g);
      b.free(g);
    };
    const all = { order: b.uploadI32(Int32Array.from({ length: T }, (_, t) => t), [T]), offsets: b.uploadI32(Int32Array.of(0, T), [2]) };
    const ones = b.upload(new Float32Array(T).fill(1), [T, 1]);
    const bySlot = this.bank && tape.inputs.adapters ? segmentsBy(tape.batch.adapters, this.bank.capacity) : undefined;
    const slots = bySlot && { order: b.uploadI32(bySlot.order, [bySlot.order.length]), offsets: b.uploadI32(bySlot.offsets, [bySlot.offsets.length]) };
    const weightGrad = (dy: Tensor, x: Tensor) => b.outerProductSum(dy, x, all.order, all.offsets);

    /** dx of y = x·Wᵀ (+ bias) (+ LoRA), recording the parameters' gradients. */
    const linearBackward = (dy: Tensor, x: Tensor, layer: number, module: LoraModule): Tensor => {
      const name = `model.layers.${layer}.${HF_NAMES[module]}`;
      const dx = b.matmulBackward(dy, model.layers[layer]!.proj[module]);
      if (mode === 'full') {
        accumulate(`${name}.weight`, weightGrad(dy, x));
        if (model.layers[layer]!.bias[module]) accumulate(`${name}.bias`, b.outerProductSum(dy, ones, all.order, all.offsets));
      }
      if (slots && this.bank!.targets(module)) {
        const bank = this.bank!;
        const { a, b: bFactor } = bank.factors(layer, module);
        const h = b.loraShrink(x, a, tape.inputs.adapters!, bank.rank); // [T, R]
        const dh = b.loraExpandBackward(dy, bFactor, tape.inputs.adapters!, bank.scaleTensor, bank.rank); // [T, R]
        b.loraShrinkBackwardInPlace(dx, dh, a, tape.inputs.adapters!);
        if (mode === 'lora') {
          accumulate(loraGradKey(layer, module, 'b'), b.outerProductSum(dy, h, slots.order, slots.offsets, bank.scaleTensor)); // [S·out, R]
          accumulate(loraGradKey(layer, module, 'a'), b.outerProductSum(dh, x, slots.order, slots.offsets)); // [S·R, in]
        }
        [h, dh].forEach((t) => b.free(t));
      }
      return dx;
    };
    const sum = (tensors: Tensor[]): Tensor => {
      tensors.slice(1).forEach((t) => (b.addInPlace(tensors[0]!, t), b.free(t)));
      return tensors[0]!;
    };

    const lw = b.upload(logpWeight, [T]);
    const ew = b.upload(entropyWeight, [T]);
    const dLogits = b.logitsBackward(tape.logits, tape.inputs.targets, lw, ew); // [T, V]
    const dNormed = b.matmulBackward(dLogits, model.lmHead); // [T, D]
    if (mode === 'full') {
      accumulate(model.lmHead === model.embedTokens ? 'model.embed_tokens.weight' : 'lm_head.weight', weightGrad(dLogits, tape.normed));
      accumulate('model.norm.weight', b.rmsNormWeightGrad(dNormed, tape.xFinal, c.rmsNormEps));
    }
    let dx = b.rmsNormBackward(dNormed, tape.xFinal, model.finalNorm, c.rmsNormEps); // [T, D]
    [lw, ew, dLogits, dNormed].forEach((t) => b.free(t));

    for (let l = model.layers.length - 1; l >= 0; l--) {
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
    [dx, ones, all.order, all.offsets, ...(slots ? [slots.order, slots.offsets] : [])].forEach((t) => b.free(t));
    return grads;
  }

  freeTape(tape: Tape): void {
    tapeTensors(tape).forEach((t) => this.b.free(t));
  }

  destroy(): void {
    this.b.free(this.inverseRope);
  }
}
