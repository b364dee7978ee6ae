// The Llama-family decoder, written once against the Backend interface so that the CPU reference and the
// WebGPU kernels run the very same sequence of ops.
//
//   x = embed(tokens)                                        x: [T, D]
//   per layer:  h = rmsnorm(x)
//               q, k, v = h·Wqᵀ(+b), h·Wkᵀ(+b), h·Wvᵀ(+b)    (+ LoRA deltas)     q: [T, H·hd], k, v: [T, Hkv·hd]
//               rope(q), rope(k); cache k, v; a = attention(q, cache)
//               x += a·Woᵀ
//               h = rmsnorm(x);  x += (silu(h·Wgᵀ) * h·Wuᵀ)·Wdᵀ
//   logits = rmsnorm(x[rows])·Wlmᵀ                           logits: [M, V]
//
// A forward call carries T tokens from any number of sequences: each token names its KV-cache slot, its position
// and its adapter, so prefill, decode and a mix of both are the same call.

import { assert, MAX_CONTEXT, type Backend, type KvCache, type Tensor, type WeightStorage } from '../backend/backend.js';
import type { HostTensor, ModelWeights } from './checkpoint.js';
import { ropeTable, type LlamaConfig } from './config.js';
import type { LoraBank } from './lora-bank.js';
import type { LoraModule } from './peft.js';

/** One decoder layer's weights on the device (read by the trainer, src/train/). */
export interface DeviceLayer {
  inputNorm: Tensor;
  postAttentionNorm: Tensor;
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
    const maxContext = Math.min(options.maxContext ?? config.maxPositionEmbeddings, MAX_CONTEXT);
    const matrix = (t: HostTensor) => backend.uploadWeight(t.data, t.shape as [number, number], storage);
    const vector = (t: HostTensor) => backend.upload(t.data, t.shape);
    const layers = weights.layers.map((w) => ({
      inputNorm: vector(w.inputNorm),
      postAttentionNorm: vector(w.postAttentionNorm),
      proj: {
        q_proj: matrix(w.qProj),
        k_proj: matrix(w.kProj),
        v_proj: matrix(w.vProj),
        o_proj: matrix(w.oProj),
        gate_proj: matrix(w.gateProj),
        up_proj: matrix(w.upProj),
        down_proj: matrix(w.downProj),
      },
      bias: {
        ...(w.qBias && { q_proj: vector(w.qBias) }),
        ...(w.kBias && { k_proj: vector(w.kBias) }),
        ...(w.vBias && { v_proj: vector(w.vBias) }),
      },
    }));
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
    this.checkBatch(batch, cache, bank);
    const b = this.backend;
    const c = this.config;
    const T = batch.tokens.length;
    const tokens = b.uploadI32(batch.tokens, [T]);
    const slots = b.uploadI32(batch.slots, [T]);
    const positions = b.uploadI32(batch.positions, [T]);
    const useLora = bank !== undefined && batch.adapters.some((a) => a >= 0);
    const adapters = useLora ? b.uploadI32(batch.adapters, [T]) : undefined;
    const linear = (x: Tensor, layer: number, module: LoraModule): Tensor => {
      const y = b.matmul(x, this.layers[layer]!.proj[module], this.layers[layer]!.bias[module]);
      if (adapters && bank!.targets(module)) bank!.apply(y, x, layer, module, adapters);
      return y;
    };

    const x = b.embedding(this.embedTokens, tokens); // x: [T, D]
    for (let l = 0; l < this.layers.length; l++) {
      const layer = this.layers[l]!;
      const h = b.rmsNorm(x, layer.inputNorm, c.rmsNormEps);
      const q = linear(h, l, 'q_proj'); // [T, H·hd]
      const k = linear(h, l, 'k_proj'); // [T, Hkv·hd]
      const v = linear(h, l, 'v_proj'); // [T, Hkv·hd]
      b.free(h);
      b.ropeInPlace(q, positions, this.rope, c.numHeads, c.headDim);
      b.ropeInPlace(k, positions, this.rope, c.numKvHeads, c.headDim);
      b.kvWrite(cache, l, k, v, slots, positions);
      const attended = b.attention(q, cache, l, slots, positions, c.numHeads); // [T, H·hd]
      const attentionOut = linear(attended, l, 'o_proj'); // [T, D]
      b.addInPlace(x, attentionOut);
      [q, k, v, attended, attentionOut].forEach((t) => b.free(t));

      const h2 = b.rmsNorm(x, layer.postAttentionNorm, c.rmsNormEps);
      const gate = linear(h2, l, 'gate_proj'); // [T, F]
      const up = linear(h2, l, 'up_proj'); // [T, F]
      const activated = b.swiglu(gate, up); // [T, F]
      const mlpOut = linear(activated, l, 'down_proj'); // [T, D]
      b.addInPlace(x, mlpOut);
      [h2, gate, up, activated, mlpOut].forEach((t) => b.free(t));
    }
    const rows = b.uploadI32(batch.logitRows, [batch.logitRows.length]);
    const selected = b.gatherRows(x, rows); // [M, D]
    const normed = b.rmsNorm(selected, this.finalNorm, c.rmsNormEps);
    const logits = b.matmul(normed, this.lmHead); // [M, V]
    [x, rows, selected, normed, tokens, slots, positions].forEach((t) => b.free(t));
    if (adapters) b.free(adapters);
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
      [layer.inputNorm, layer.postAttentionNorm, ...Object.values(layer.proj), ...Object.values(layer.bias)].forEach((t) => b.free(t));
    }
    if (this.lmHead !== this.embedTokens) b.free(this.lmHead);
    [this.embedTokens, this.finalNorm, this.rope].forEach((t) => b.free(t));
  }
}
