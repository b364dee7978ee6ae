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

export const SUPPORTED_MODEL_TYPES = ['llama', 'qwen2', 'mistral'] as const;
const ARCHITECTURES: Record<string, string> = { llama: 'LlamaForCausalLM', qwen2: 'Qwen2ForCausalLM', mistral: 'MistralForCausalLM' };
/** transformers' defaults for max_position_embeddings when config.json leaves it out. */
const DEFAULT_MAX_POSITIONS: Record<string, number> = { llama: 2048, qwen2: 32768, mistral: 131072 };

const positiveInt = (what = 'a positive integer') => z.number({ error: `expected ${what}` }).int({ error: `expected ${what}` }).positive({ error: `expected ${what}` });
const positiveNumber = z.number({ error: 'expected a positive number' }).positive({ error: 'expected a positive number' });
const tokenId = z.number({ error: 'expected a token id (an integer >= 0)' }).int({ error: 'expected a token id (an integer >= 0)' }).nonnegative({ error: 'expected a token id (an integer >= 0)' });
const bool = z.boolean({ error: 'expected true or false' });
const DTYPES = ['float32', 'float16', 'bfloat16'] as const;

// Fields transformers reads for these three architectures that change the computation. Every other field in
// config.json must be in HARMLESS_CONFIG_FIELDS, be checked by checkSlidingWindow, or be off (null, false, [] or {}).
const schema = z.object({
  model_type: z.enum(SUPPORTED_MODEL_TYPES, { error: `expected one of ${SUPPORTED_MODEL_TYPES.map((t) => `"${t}"`).join(', ')} (Llama-family decoders)` }),
  vocab_size: positiveInt(),
  hidden_size: positiveInt(),
  intermediate_size: positiveInt(),
  num_hidden_layers: positiveInt(),
  num_attention_heads: positiveInt(),
  num_key_value_heads: positiveInt().nullish(),
  head_dim: positiveInt().nullish(),
  hidden_act: z.literal('silu', { error: 'expected "silu" (the SwiGLU MLP of Llama-family models)' }).optional(),
  rms_norm_eps: positiveNumber.default(1e-6),
  rope_theta: positiveNumber.optional(),
  rope_scaling: z.record(z.string(), z.unknown(), { error: 'expected an object such as {"rope_type": "llama3", ...} or null' }).nullish(),
  rope_parameters: z.record(z.string(), z.unknown(), { error: 'expected an object {"rope_type", "rope_theta", ...}' }).nullish(), // transformers 5
  tie_word_embeddings: bool.default(false),
  attention_bias: bool.default(false),
  mlp_bias: z.literal(false, { error: 'expected false: biases on the MLP projections are not supported' }).optional(),
  max_position_embeddings: positiveInt().optional(),
  bos_token_id: tokenId.nullish(),
  eos_token_id: z.union([tokenId, z.array(tokenId)], { error: 'expected a token id or a list of token ids' }).nullish(),
  torch_dtype: z.enum(DTYPES, { error: `expected one of ${DTYPES.join(', ')}` }).nullish(),
  dtype: z.enum(DTYPES, { error: `expected one of ${DTYPES.join(', ')}` }).nullish(), // transformers 5 renamed torch_dtype
});

/**
 * config.json fields that do not change what a Llama, Qwen2 or Mistral model computes at inference: bookkeeping,
 * training-only settings (dropout, initialisation, tensor-parallel splits), generation defaults and token ids
 * populora takes from elsewhere. Keys starting with "_" (_name_or_path, ...) are transformers' own bookkeeping.
 */
const HARMLESS_CONFIG_FIELDS = new Set([
  'architectures', 'transformers_version', 'auto_map', 'use_cache', 'initializer_range', 'attention_dropout', 'pretraining_tp',
  'pad_token_id', 'sep_token_id', 'decoder_start_token_id', 'tokenizer_class', 'id2label', 'label2id', 'finetuning_task',
  'problem_type', 'task_specific_params', 'prefix', 'return_dict', 'output_attentions', 'output_hidden_states', 'torchscript',
  'use_bfloat16', 'tf_legacy_loss', 'pruned_heads', 'chunk_size_feed_forward', 'is_decoder', 'add_cross_attention',
  'cross_attention_hidden_size', 'tie_encoder_decoder', 'max_length', 'min_length', 'do_sample', 'early_stopping', 'num_beams',
  'num_beam_groups', 'diversity_penalty', 'temperature', 'top_k', 'top_p', 'typical_p', 'repetition_penalty', 'length_penalty',
  'no_repeat_ngram_size', 'encoder_no_repeat_ngram_size', 'bad_words_ids', 'num_return_sequences', 'output_scores',
  'return_dict_in_generate', 'forced_bos_token_id', 'forced_eos_token_id', 'remove_invalid_values',
  'exponential_decay_length_penalty', 'suppress_tokens', 'begin_suppress_tokens', 'unsloth_version', 'unsloth_fixed',
]);
/** Read by checkSlidingWindow. */
const SLIDING_WINDOW_FIELDS = new Set(['sliding_window', 'use_sliding_window', 'max_window_layers', 'layer_types']);
const isOff = (value: unknown) => value === undefined || value === null || value === false || (Array.isArray(value) ? value.length === 0 : typeof value === 'object' && Object.keys(value).length === 0);

/** An unknown field that is switched on is an option populora would silently not compute: refuse it by name. */
function checkKnownFields(file: string, json: Record<string, unknown>): void {
  for (const [field, value] of Object.entries(json)) {
    if (field in schema.shape || HARMLESS_CONFIG_FIELDS.has(field) || SLIDING_WINDOW_FIELDS.has(field) || field.startsWith('_') || isOff(value)) continue;
    if (field === 'quantization_config') fail(file, field, 'quantized checkpoints are not supported; use the unquantized (F32, F16 or BF16) model');
    fail(file, field, `unknown to populora (it reads Llama, Qwen2 and Mistral configs as transformers 4 and 5 write them) and set to ${JSON.stringify(value)}, so it may change what the model computes; if the model does not use it, remove the field or set it to null`);
  }
}

/**
 * Mistral attends over the last `sliding_window` tokens only, and so does Qwen2 when use_sliding_window is true (in
 * its layers from max_window_layers on, or those layer_types marks "sliding_attention"); Llama ignores the field.
 * populora attends over the whole context, which is the same computation only while the context fits the window.
 */
function checkSlidingWindow(file: string, json: Record<string, unknown>, modelType: string, numLayers: number, context: number): void {
  const window = json['sliding_window'];
  const layerTypes = json['layer_types'] ?? null;
  if (layerTypes !== null && (!Array.isArray(layerTypes) || !layerTypes.every((t) => t === 'full_attention' || t === 'sliding_attention'))) {
    fail(file, 'layer_types', `expected a list of "full_attention" or "sliding_attention" (got ${JSON.stringify(layerTypes)}); other attention kinds are not supported`);
  }
  if (window === undefined || window === null || modelType === 'llama') return;
  if (!Number.isInteger(window) || (window as number) < 1) fail(file, 'sliding_window', `expected a positive integer or null (got ${JSON.stringify(window)})`);
  let where = 'every layer';
  if (modelType === 'qwen2') {
    if (json['use_sliding_window'] !== true) return;
    const maxWindowLayers = json['max_window_layers'] ?? 28; // transformers' Qwen2Config default
    const sliding = layerTypes ? layerTypes.includes('sliding_attention') : numLayers > (maxWindowLayers as number);
    if (!sliding) return;
    where = layerTypes ? 'the layers layer_types marks "sliding_attention"' : `layers ${String(maxWindowLayers)} and up (max_window_layers)`;
  }
  if ((window as number) < context) {
    fail(file, 'sliding_window', `${String(window)} is smaller than the context (max_position_embeddings ${context}): the model attends only to the last ${String(window)} tokens in ${where}, and populora, which does not implement sliding windows, to all of them, so longer sequences would compute something else; set "max_position_embeddings" to ${String(window)} to use the model within its window`);
  }
}

function fail(file: string, field: string, message: string): never {
  throw new ModelFormatError(`${file}: field "${field}": ${message}`);
}

/** The value at a zod issue path, to show what was found ("got -1") or that the field is missing. */
function valueAt(json: unknown, path: PropertyKey[]): unknown {
  return path.reduce<unknown>((value, key) => (typeof value === 'object' && value !== null ? (value as Record<PropertyKey, unknown>)[key] : undefined), json);
}

export function parseConfig(json: unknown, file = 'config.json'): LlamaConfig {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new ModelFormatError(`${file}: expected a JSON object of model hyperparameters`);
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const field = issue.path.map((k, i) => (typeof k === 'number' ? `[${k}]` : i === 0 ? String(k) : `.${String(k)}`)).join('') || '(root)';
    const value = valueAt(json, issue.path);
    if (value === undefined) throw new ModelFormatError(`${file}: field "${field}" is missing: ${issue.message}`);
    fail(file, field, `${issue.message} (got ${JSON.stringify(value)})`);
  }
  const c = parsed.data;
  const maxPositionEmbeddings = c.max_position_embeddings ?? DEFAULT_MAX_POSITIONS[c.model_type]!;
  checkKnownFields(file, json as Record<string, unknown>);
  checkSlidingWindow(file, json as Record<string, unknown>, c.model_type, c.num_hidden_layers, maxPositionEmbeddings);
  const numKvHeads = c.num_key_value_heads ?? c.num_attention_heads;
  if (c.num_attention_heads % numKvHeads !== 0) {
    fail(file, 'num_key_value_heads', `must divide "num_attention_heads" (got ${numKvHeads} and ${c.num_attention_heads})`);
  }
  const headDim = c.head_dim ?? c.hidden_size / c.num_attention_heads;
  if (!Number.isInteger(headDim)) {
    fail(file, 'head_dim', `missing, and hidden_size / num_attention_heads = ${c.hidden_size} / ${c.num_attention_heads} is not an integer; set "head_dim"`);
  }
  if (headDim % 2 !== 0) fail(file, 'head_dim', `must be even: rotary embeddings rotate pairs of dimensions (got ${headDim})`);
  const eos = c.eos_token_id ?? [];
  const eosTokenIds = Array.isArray(eos) ? eos : [eos];
  const bosTokenId = c.bos_token_id ?? null;
  for (const [field, id] of [['bos_token_id', bosTokenId], ...eosTokenIds.map((id) => ['eos_token_id', id] as const)] as const) {
    if (id !== null && id >= c.vocab_size) fail(file, field, `token id ${id} is outside the vocabulary (vocab_size ${c.vocab_size})`);
  }
  // transformers 5 moves rope_theta and the scaling into "rope_parameters"; older files have them at the top level.
  const rope = c.rope_parameters;
  const ropeTheta = c.rope_theta ?? (rope?.['rope_theta'] === undefined ? 10000 : ropeNumber(file, 'rope_parameters.rope_theta', rope['rope_theta']));
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
    ropeTheta,
    ropeScaling: c.rope_scaling ? parseRopeScaling(c.rope_scaling, 'rope_scaling', file) : rope ? parseRopeScaling(rope, 'rope_parameters', file) : null,
    tieWordEmbeddings: c.tie_word_embeddings,
    attentionBias: c.model_type === 'qwen2' || c.attention_bias, // Qwen2's q/k/v projections always carry biases
    maxPositionEmbeddings,
    bosTokenId,
    eosTokenIds,
    torchDtype: c.torch_dtype ?? c.dtype ?? 'float32',
  };
}

function ropeNumber(file: string, field: string, value: unknown): number {
  if (typeof value !== 'number' || !(value > 0)) fail(file, field, `expected a positive number (got ${JSON.stringify(value)})`);
  return value;
}

/** rope_scaling as transformers reads it: "rope_type" (or the older "type"); llama3 needs all four of its fields. */
function parseRopeScaling(s: Record<string, unknown>, field: string, file: string): RopeScaling {
  const type = s['rope_type'] ?? s['type'];
  const need = (key: string) => ropeNumber(file, `${field}.${key}`, s[key]);
  if (type === undefined || type === 'default') return null;
  if (type === 'linear') return { type: 'linear', factor: need('factor') };
  if (type === 'llama3') {
    const scaling = {
      type: 'llama3' as const,
      factor: need('factor'),
      lowFreqFactor: need('low_freq_factor'),
      highFreqFactor: need('high_freq_factor'),
      originalMaxPositionEmbeddings: need('original_max_position_embeddings'),
    };
    if (scaling.highFreqFactor <= scaling.lowFreqFactor) {
      fail(file, `${field}.high_freq_factor`, `must exceed low_freq_factor (got ${scaling.highFreqFactor} and ${scaling.lowFreqFactor})`);
    }
    return scaling;
  }
  return fail(file, `${field}.rope_type`, `${JSON.stringify(type)} is not supported; supported: llama3, linear, or null (no scaling)`);
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
    hidden_act: 'silu',
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

/**
 * Named shapes: `tiny` and `qwen2-tiny` for tests and the toy tier, `code-tiny` for the code domain's embedded base
 * model (tiny's shape with room for a reference task, a prompt and a proposal), `code-small` for the stronger one
 * (twice as wide: 0.33 M parameters, about 2.2x code-tiny's CPU time a training step), `qwen2.5-0.5b-shape` for
 * benchmarks.
 */
export const TINY_CONFIGS: Record<string, LlamaConfig> = {
  tiny: TINY,
  'code-tiny': { ...TINY, maxPositionEmbeddings: 768 },
  'code-small': { ...TINY, hiddenSize: 128, intermediateSize: 256, numHeads: 8, numKvHeads: 4, maxPositionEmbeddings: 768 },
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
