// config.json of a Llama-family model (Llama, Qwen2, Mistral), validated field by field.

import { z } from 'zod';
import { ModelFormatError } from './errors.js';

export type RopeScaling =
  | null
  | { type: 'llama3'; factor: number; lowFreqFactor: number; highFreqFactor: number; originalMaxPositionEmbeddings: number }
  | { type: 'linear'; factor: number };

export interface LlamaConfig {
  modelType: string;
  vocabSize: number;
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  rmsNormEps: number;
  ropeTheta: number;
  ropeScaling: RopeScaling;
  tieWordEmbeddings: boolean;
  attentionBias: boolean; // q, k, v projections carry biases (always for Qwen2)
  maxPositionEmbeddings: number;
  bosTokenId: number | null;
  eosTokenIds: number[];
  torchDtype: 'float32' | 'float16' | 'bfloat16';
}

const SUPPORTED_MODEL_TYPES = ['llama', 'qwen2', 'mistral'] as const;
const ARCHITECTURES: Record<string, string> = { llama: 'LlamaForCausalLM', qwen2: 'Qwen2ForCausalLM', mistral: 'MistralForCausalLM' };

const positiveInt = z.number().int().positive();
const tokenId = z.number().int().nonnegative();
const schema = z.object({
  model_type: z.enum(SUPPORTED_MODEL_TYPES),
  vocab_size: positiveInt,
  hidden_size: positiveInt,
  intermediate_size: positiveInt,
  num_hidden_layers: positiveInt,
  num_attention_heads: positiveInt,
  num_key_value_heads: positiveInt.optional(),
  head_dim: positiveInt.nullish(),
  rms_norm_eps: z.number().positive().default(1e-6),
  rope_theta: z.number().positive().default(10000),
  rope_scaling: z
    .object({
      rope_type: z.string().optional(),
      type: z.string().optional(),
      factor: z.number().positive(),
      low_freq_factor: z.number().positive().optional(),
      high_freq_factor: z.number().positive().optional(),
      original_max_position_embeddings: positiveInt.optional(),
    })
    .nullish(),
  tie_word_embeddings: z.boolean().default(false),
  attention_bias: z.boolean().default(false),
  max_position_embeddings: positiveInt.default(2048),
  bos_token_id: tokenId.nullish(),
  eos_token_id: z.union([tokenId, z.array(tokenId)]).nullish(),
  torch_dtype: z.enum(['float32', 'float16', 'bfloat16']).default('float32'),
});

function fail(file: string, field: string, message: string): never {
  throw new ModelFormatError(`${file}: field "${field}": ${message}`);
}

export function parseConfig(json: unknown, file = 'config.json'): LlamaConfig {
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    fail(file, issue.path.join('.') || '(root)', issue.message);
  }
  const c = parsed.data;
  const numKvHeads = c.num_key_value_heads ?? c.num_attention_heads;
  const headDim = c.head_dim ?? c.hidden_size / c.num_attention_heads;
  if (c.num_attention_heads % numKvHeads !== 0) {
    fail(file, 'num_key_value_heads', `must divide "num_attention_heads" (got ${numKvHeads} and ${c.num_attention_heads})`);
  }
  if (!Number.isInteger(headDim) || headDim % 2 !== 0) fail(file, 'head_dim', `must be an even integer (got ${headDim})`);
  const eos = c.eos_token_id ?? [];
  return {
    modelType: c.model_type,
    vocabSize: c.vocab_size,
    hiddenSize: c.hidden_size,
    intermediateSize: c.intermediate_size,
    numLayers: c.num_hidden_layers,
    numHeads: c.num_attention_heads,
    numKvHeads,
    headDim,
    rmsNormEps: c.rms_norm_eps,
    ropeTheta: c.rope_theta,
    ropeScaling: parseRopeScaling(c.rope_scaling, file),
    tieWordEmbeddings: c.tie_word_embeddings,
    attentionBias: c.model_type === 'qwen2' || c.attention_bias,
    maxPositionEmbeddings: c.max_position_embeddings,
    bosTokenId: c.bos_token_id ?? null,
    eosTokenIds: Array.isArray(eos) ? eos : [eos],
    torchDtype: c.torch_dtype,
  };
}

function parseRopeScaling(s: z.infer<typeof schema>['rope_scaling'], file: string): RopeScaling {
  if (!s) return null;
  const type = s.rope_type ?? s.type;
  if (type === 'linear') return { type: 'linear', factor: s.factor };
  if (type === 'llama3') {
    return {
      type: 'llama3',
      factor: s.factor,
      lowFreqFactor: s.low_freq_factor ?? 1,
      highFreqFactor: s.high_freq_factor ?? 4,
      originalMaxPositionEmbeddings: s.original_max_position_embeddings ?? 8192,
    };
  }
  return fail(file, 'rope_scaling.rope_type', `"${type}" is not supported; supported: llama3, linear, or null`);
}

export function configToJson(c: LlamaConfig): Record<string, unknown> {
  const scaling = c.ropeScaling;
  return {
    architectures: [ARCHITECTURES[c.modelType] ?? 'LlamaForCausalLM'],
    model_type: c.modelType,
    vocab_size: c.vocabSize,
    hidden_size: c.hiddenSize,
    intermediate_size: c.intermediateSize,
    num_hidden_layers: c.numLayers,
    num_attention_heads: c.numHeads,
    num_key_value_heads: c.numKvHeads,
    head_dim: c.headDim,
    rms_norm_eps: c.rmsNormEps,
    rope_theta: c.ropeTheta,
    rope_scaling:
      scaling === null
        ? null
        : scaling.type === 'linear'
          ? { rope_type: 'linear', factor: scaling.factor }
          : { rope_type: 'llama3', factor: scaling.factor, low_freq_factor: scaling.lowFreqFactor, high_freq_factor: scaling.highFreqFactor, original_max_position_embeddings: scaling.originalMaxPositionEmbeddings },
    tie_word_embeddings: c.tieWordEmbeddings,
    attention_bias: c.attentionBias,
    max_position_embeddings: c.maxPositionEmbeddings,
    bos_token_id: c.bosTokenId,
    eos_token_id: c.eosTokenIds.length === 1 ? c.eosTokenIds[0] : c.eosTokenIds,
    torch_dtype: c.torchDtype,
  };
}

/** θ^(-2i/hd) for i < hd/2, with llama3 or linear scaling as in HF's rope initialisation. */
export function ropeInverseFrequencies(c: LlamaConfig): Float64Array {
  const half = c.headDim / 2;
  const inv = Float64Array.from({ length: half }, (_, i) => c.ropeTheta ** (-(2 * i) / c.headDim));
  const s = c.ropeScaling;
  if (s?.type === 'linear') return inv.map((f) => f / s.factor);
  if (s?.type === 'llama3') {
    const lowWavelength = s.originalMaxPositionEmbeddings / s.lowFreqFactor;
    const highWavelength = s.originalMaxPositionEmbeddings / s.highFreqFactor;
    return inv.map((f) => {
      const wavelength = (2 * Math.PI) / f;
      if (wavelength < highWavelength) return f;
      if (wavelength > lowWavelength) return f / s.factor;
      const smooth = (s.originalMaxPositionEmbeddings / wavelength - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
      return (1 - smooth) * (f / s.factor) + smooth * f;
    });
  }
  return inv;
}

/** [maxLen, headDim]: cos(p·invᵢ) in columns [0, hd/2), sin(p·invᵢ) in [hd/2, hd); computed in f64. */
export function ropeTable(c: LlamaConfig, maxLen: number): Float32Array {
  const inv = ropeInverseFrequencies(c);
  const half = c.headDim / 2;
  const table = new Float32Array(maxLen * c.headDim);
  for (let p = 0; p < maxLen; p++) {
    for (let i = 0; i < half; i++) {
      table[p * c.headDim + i] = Math.cos(p * inv[i]!);
      table[p * c.headDim + half + i] = Math.sin(p * inv[i]!);
    }
  }
  return table;
}

const TINY: LlamaConfig = {
  modelType: 'llama',
  vocabSize: 64,
  hiddenSize: 64,
  intermediateSize: 128,
  numLayers: 2,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 16,
  rmsNormEps: 1e-6,
  ropeTheta: 10000,
  ropeScaling: null,
  tieWordEmbeddings: false,
  attentionBias: false,
  maxPositionEmbeddings: 512,
  bosTokenId: 1,
  eosTokenIds: [2],
  torchDtype: 'float32',
};

/** Named shapes: `tiny` and `qwen2-tiny` for tests and the toy tier, `qwen2.5-0.5b-shape` for benchmarks. */
export const TINY_CONFIGS: Record<string, LlamaConfig> = {
  tiny: TINY,
  'qwen2-tiny': { ...TINY, modelType: 'qwen2', attentionBias: true, tieWordEmbeddings: true },
  'qwen2.5-0.5b-shape': {
    ...TINY,
    modelType: 'qwen2',
    vocabSize: 151936,
    hiddenSize: 896,
    intermediateSize: 4864,
    numLayers: 24,
    numHeads: 14,
    numKvHeads: 2,
    headDim: 64,
    ropeTheta: 1000000,
    attentionBias: true,
    tieWordEmbeddings: true,
    maxPositionEmbeddings: 32768,
    bosTokenId: null,
    eosTokenIds: [151643],
    torchDtype: 'bfloat16',
  },
};
