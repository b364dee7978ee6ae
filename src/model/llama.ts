// The Llama-family decoder, written once against the Backend interface so that the CPU reference and the
// WebGPU kernels run the very same sequence of ops.
//
//   x = embed(tokens)                                                  x: [T, D]
//   per layer:  h = rmsnorm(x)
//               q, k, v = h·Wqᵀ(+b), h·Wkᵀ(+b), h·Wvᵀ(+b)  (+ LoRA deltas)  q: [T, H·hd], k, v: [T, Hkv·hd]
//               rope(q), rope(k); cache k, v; a = attention(q, cache)
//               x += a·Woᵀ
//               h = rmsnorm(x);  x += (silu(h·Wgᵀ) * h·Wuᵀ)·Wdᵀ
//   logits = rmsnorm(x[rows])·Wlmᵀ                                     logits: [M, V]
//
// as five fused ops a layer (backend.ts; one dispatch each on WebGPU), q|k|v and gate|up each one projection over
// weights packed at upload, RMSNorm, bias, LoRA expand, RoPE, KV write, SwiGLU and residual add in its prologue
// and epilogue:
//   q = linearRopeKv(x)          rmsnorm, [Wq|Wk|Wv], rope, k and v into the cache
//   a = attention(q, cache)
//   linearResidual(a, x)         x += a·Woᵀ
//   g = linearSwiglu(x)          rmsnorm, [Wg|Wu], silu(gate)·up          g: [T, F]
//   linearResidual(g, x)         x += g·Wdᵀ
// and with LoRA a shrink before each linear (loraShrinkSegments: h = x̂·Aᵀ for the group's modules at once).
// A decode step: 5 dispatches a layer (9 with LoRA on every module), plus the embedding, the LM head (gather,
// rmsnorm and projection in one) and the sampling.
//
// A forward call carries T tokens from any number of sequences: each token names its KV-cache slot, its position
// and its adapter, so prefill, decode and a mix of both are the same call.

import { assert, MAX_CONTEXT, single, uploadPacked, uploadStepRows, type Backend, type KvCache, type LinearLora, type Packed, type StepRows, type Tensor, type WeightStorage } from '../backend/backend.js';
import type { HostTensor, ModelWeights } from './checkpoint.js';
import { ropeTable, type LlamaConfig } from './config.js';
import { checkHostMemoryFit, checkWeightsFit } from './device-fit.js';
import type { LinearGroup, LoraBank } from './lora-bank.js';
import type { LoraModule } from './peft.js';

/** One decoder layer's weights on the device. */
export interface DeviceLayer {
  inputNorm: Tensor;
  postAttentionNorm: Tensor;
  // The fused linears' packed weights (parts in lora-bank.ts's LINEAR_GROUPS order) ...
  qkv: Packed;
  qkvBias?: Packed;
  o: Packed;
  gateUp: Packed;
  down: Packed;
  // ... and each module's view of them (the trainer's unfused ops, src/train/).
  proj: Record<LoraModule, Tensor>;
  bias: Partial<Record<LoraModule, Tensor>>;
}

export interface ForwardBatch {
  tokens: Int32Array; // [T] token ids
  slots: Int32Array; // [T] KV-cache slot of each token's sequence
  positions: Int32Array; // [T] position of each token within its sequence
  adapters: Int32Array; // [T] adapter bank slot, -1 for the base model alone
  logitRows: Int32Array; // [M] the tokens whose next-token logits are wanted
}

export interface ModelUploadOptions {
  /** Device storage of the matrices; defaults to f16 when the checkpoint is f16, else f32. */
  storage?: WeightStorage;
  /** Longest sequence this model instance will run (sizes the rotary table). */
  maxContext?: number;
}

/** The context a model instance of this configuration runs at (what `upload` sizes the rotary table for). */
export const modelContext = (config: LlamaConfig, maxContext?: number) => Math.min(maxContext ?? config.maxPositionEmbeddings, MAX_CONTEXT);

export class LlamaModel {
  private constructor(
    readonly backend: Backend,
    readonly config: LlamaConfig,
    readonly storage: WeightStorage,
    readonly maxContext: number,
    readonly embedTokens: Tensor,
    readonly layers: DeviceLayer[],
    readonly finalNorm: Tensor,
    readonly lmHead: Tensor,
    readonly rope: Tensor,
  ) {}

  static upload(backend: Backend, config: LlamaConfig, weights: ModelWeights, options: ModelUploadOptions = {}): LlamaModel {
    const storage = options.storage ?? (weights.storedDType === 'F16' ? 'f16' : 'f32');
    const maxContext = modelContext(config, options.maxContext);
    checkWeightsFit(config, storage, backend.maxBindingBytes, backend.viewAlignment);
    if (backend.hostMemory) checkHostMemoryFit(config, storage, backend.hostMemory);
    const matrix = (t: HostTensor) => backend.uploadWeight(t.data, t.shape as [number, number], storage);
    const vector = (t: HostTensor) => backend.upload(t.data, t.shape);
    const matrices = (ts: HostTensor[]) => uploadPacked(backend, ts.map((t) => ({ rows: t.shape[0]!, data: t.data })), [ts[0]!.shape[1]!], storage);
    const layers = weights.layers.map((w): DeviceLayer => {
      const [qkv, gateUp] = [matrices([w.qProj, w.kProj, w.vProj]), matrices([w.gateProj, w.upProj])];
      const [o, down] = [single(matrix(w.oProj)), single(matrix(w.downProj))];
      const biases = [w.qBias, w.kBias, w.vBias];
      // A missing bias of the three is packed as zeros (adding 0 changes nothing); the trainer sees the real ones.
      const qkvBias = biases.some((b) => b) ? uploadPacked(backend, biases.map((b, i) => ({ rows: qkv.parts[i]!.shape[0]!, data: b?.data })), [], 'f32') : undefined;
      const proj = { q_proj: qkv.parts[0]!, k_proj: qkv.parts[1]!, v_proj: qkv.parts[2]!, o_proj: o.whole, gate_proj: gateUp.parts[0]!, up_proj: gateUp.parts[1]!, down_proj: down.whole };
      const bias = Object.fromEntries((['q_proj', 'k_proj', 'v_proj'] as const).flatMap((m, i) => (biases[i] ? [[m, qkvBias!.parts[i]!]] : [])));
      return { inputNorm: vector(w.inputNorm), postAttentionNorm: vector(w.postAttentionNorm), qkv, qkvBias, o, gateUp, down, proj, bias };
    });
    const embedTokens = matrix(weights.embedTokens);
    const lmHead = weights.lmHead ? matrix(weights.lmHead) : embedTokens;
    const rope = backend.upload(ropeTable(config, maxContext), [maxContext, config.headDim]);
    return new LlamaModel(backend, config, storage, maxContext, embedTokens, layers, vector(weights.norm), lmHead, rope);
  }

  createKvCache(slots: number, maxLen: number): KvCache {
    assert(maxLen <= this.maxContext, `KV cache length ${maxLen} exceeds the model's context ${this.maxContext}`);
    const { numLayers: layers, numKvHeads: kvHeads, headDim } = this.config;
    return this.backend.createKvCache({ layers, slots, maxLen, kvHeads, headDim });
  }

  freeKvCache(cache: KvCache): void {
    this.backend.free(cache.k);
    this.backend.free(cache.v);
  }

  /** Runs the batch through every layer, writing its keys and values into `cache`. Returns logits [M, V]. */
  forward(batch: ForwardBatch, cache: KvCache, bank?: LoraBank): Tensor {
    const { rows, lora } = this.uploadRows(batch, cache, bank);
    const logits = this.forwardRows(rows, cache, lora);
    this.backend.free(rows.packed.whole);
    return logits;
  }

  /**
   * The batch checked and uploaded for forwardRows, and the bank it needs: none when no row has an adapter (the
   * rows' adapters are then all -1, so the base-only kernels run).
   */
  uploadRows(batch: ForwardBatch, cache: KvCache, bank?: LoraBank): { rows: StepRows; lora?: LoraBank } {
    this.checkBatch(batch, cache, bank);
    const lora = bank !== undefined && batch.adapters.some((a) => a >= 0) ? bank : undefined;
    return { rows: uploadStepRows(this.backend, { ...batch, adapters: lora ? batch.adapters : batch.adapters.map(() => -1) }), lora };
  }

  /**
   * forward() over rows already on the device (uploadRows), which it leaves there: a device-resident decode loop
   * advances their tokens and positions in place (Backend.sampleStep) and runs the next step on them.
   */
  forwardRows(rows: StepRows, cache: KvCache, lora?: LoraBank): Tensor {
    const b = this.backend;
    const c = this.config;
    /** The LoRA of one fused linear: its input's shrink for the group's targeted modules (one dispatch). */
    const loraOf = (layer: number, group: LinearGroup, x: Tensor, norm?: { weight: Tensor; eps: number }): LinearLora | undefined => {
      const factors = lora?.group(layer, group);
      if (!factors) return undefined;
      const h = b.loraShrinkSegments(x, factors.a, rows, lora!.rank, norm); // [T, targeted·R]
      return { h, b: factors.b, of: factors.of, scales: lora!.scaleTensor, rank: lora!.rank };
    };
    const free = (...tensors: (Tensor | undefined)[]) => tensors.forEach((t) => t && b.free(t));

    const x = b.embedding(this.embedTokens, rows.tokens); // x: [T, D]
    for (let l = 0; l < this.layers.length; l++) {
      const layer = this.layers[l]!;
      const norm1 = { weight: layer.inputNorm, eps: c.rmsNormEps };
      const lora1 = loraOf(l, 'qkv', x, norm1);
      const q = b.linearRopeKv({ x, norm: norm1, w: layer.qkv, bias: layer.qkvBias, lora: lora1 }, rows, { table: this.rope, heads: c.numHeads, cache, layer: l }); // [T, H·hd]
      const attended = b.attention(q, cache, l, rows.slots, rows.positions, c.numHeads); // [T, H·hd]
      const lora2 = loraOf(l, 'o', attended);
      b.linearResidual({ x: attended, w: layer.o, lora: lora2 }, rows, x); // x += attended·Woᵀ
      free(lora1?.h, q, lora2?.h, attended);

      const norm2 = { weight: layer.postAttentionNorm, eps: c.rmsNormEps };
      const lora3 = loraOf(l, 'gateUp', x, norm2);
      const activated = b.linearSwiglu({ x, norm: norm2, w: layer.gateUp, lora: lora3 }, rows); // [T, F]
      const lora4 = loraOf(l, 'down', activated);
      b.linearResidual({ x: activated, w: layer.down, lora: lora4 }, rows, x); // x += activated·Wdᵀ
      free(lora3?.h, activated, lora4?.h);
    }
    const logits = b.linear({ x, gather: true, norm: { weight: this.finalNorm, eps: c.rmsNormEps }, w: single(this.lmHead) }, rows); // [M, V]
    free(x);
    return logits;
  }

  /** Logits [tokens.length, V] of one sequence, every position, as one forward pass. */
  async logits(tokens: readonly number[], adapter = -1, bank?: LoraBank): Promise<Float32Array> {
    const T = tokens.length;
    const cache = this.createKvCache(1, T);
    try {
      const all = Int32Array.from({ length: T }, (_, t) => t);
      const batch = { tokens: Int32Array.from(tokens), slots: new Int32Array(T), positions: all, adapters: new Int32Array(T).fill(adapter), logitRows: all };
      const logits = this.forward(batch, cache, bank);
      const values = await this.backend.readF32(logits);
      this.backend.free(logits);
      return values;
    } finally {
      this.freeKvCache(cache);
    }
  }

  private checkBatch(batch: ForwardBatch, cache: KvCache, bank?: LoraBank): void {
    const T = batch.tokens.length;
    assert(T > 0, 'a forward batch needs at least one token');
    for (const [name, array] of [['slots', batch.slots], ['positions', batch.positions], ['adapters', batch.adapters]] as const) {
      assert(array.length === T, `forward batch: ${name} has ${array.length} entries for ${T} tokens`);
    }
    for (let t = 0; t < T; t++) {
      const [token, slot, position, adapter] = [batch.tokens[t]!, batch.slots[t]!, batch.positions[t]!, batch.adapters[t]!];
      if (token < 0 || token >= this.config.vocabSize) {
        throw new RangeError(`token id ${token} at index ${t} is outside the vocabulary [0, ${this.config.vocabSize})`);
      }
      if (position >= cache.maxLen) {
        throw new RangeError(`position ${position} at index ${t} is beyond the context length ${cache.maxLen}`);
      }
      assert(slot >= 0 && slot < cache.slots, `KV slot ${slot} outside [0, ${cache.slots})`);
      assert(adapter < (bank?.capacity ?? 0), `adapter slot ${adapter} but the bank holds ${bank?.capacity ?? 0}`);
    }
    batch.logitRows.forEach((row) => assert(row >= 0 && row < T, `logit row ${row} outside [0, ${T})`));
  }

  destroy(): void {
    const b = this.backend;
    for (const layer of this.layers) {
      [layer.inputNorm, layer.postAttentionNorm, layer.qkv.whole, layer.o.whole, layer.gateUp.whole, layer.down.whole].forEach((t) => b.free(t));
      if (layer.qkvBias) b.free(layer.qkvBias.whole);
    }
    if (this.lmHead !== this.embedTokens) b.free(this.lmHead);
    [this.embedTokens, this.finalNorm, this.rope].forEach((t) => b.free(t));
  }
}
