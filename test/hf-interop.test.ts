// Hugging Face interop: adapter_config.json as PEFT 0.14-0.21 writes it (full module paths, suffixes, regexes,
// layers_to_transform, exclude_modules) and config.json as real Llama / Qwen2 / Mistral checkpoints ship it; options
// populora does not compute (aLoRA, sliding windows, unknown fields) are refused by file and field.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig, TINY_CONFIGS } from '../src/model/config.js';
import { loadPeftAdapter, peftKey, randomAdapter, savePeftAdapter, type LoraModule } from '../src/model/peft.js';
import { readSafetensors, writeSafetensors } from '../src/model/safetensors.js';

const dir = mkdtempSync(join(tmpdir(), 'populora-hf-interop-'));
const three = { ...TINY_CONFIGS['tiny']!, numLayers: 3 }; // three layers, so "some layers only" has a gap in the middle

/** Every LoRA-able module on all three layers, saved; the tests then cut the file and config down to what they need. */
const full = randomAdapter(three, { rank: 2, targets: ['q_proj', 'k_proj', 'v_proj', 'down_proj'], seed: 5, init: 'gaussian' });

/** An adapter folder holding only the tensors of `keep`'s (layer, module) pairs, with `config` over PEFT's defaults. */
function adapterFolder(name: string, keep: Array<[number, LoraModule]>, config: object): string {
  const out = join(dir, name);
  savePeftAdapter(out, full);
  const written = readJson(join(out, 'adapter_config.json'));
  const wanted = new Set(keep.flatMap(([l, m]) => [peftKey(l, m, 'A'), peftKey(l, m, 'B')]));
  const { tensors } = readSafetensors(join(out, 'adapter_model.safetensors'));
  writeSafetensors(join(out, 'adapter_model.safetensors'), [...tensors].filter(([key]) => wanted.has(key)).map(([key, t]) => ({ name: key, dtype: t.dtype, shape: t.shape, data: t.decode() })));
  writeFileSync(join(out, 'adapter_config.json'), JSON.stringify({ ...written, ...config }));
  return out;
}
const readJson = (file: string) => JSON.parse(readFileSync(file, 'utf8'));
/** The loaded adapter's (layer, module) pairs, and a check that each holds the saved factors. */
function pairs(out: string, config = three): string[] {
  const loaded = loadPeftAdapter(out, config);
  return loaded.layers.flatMap((layer, l) =>
    Object.entries(layer).map(([m, f]) => {
      expect(f).toEqual(full.layers[l]![m as LoraModule]);
      return `${l}.${m}`;
    }),
  );
}

describe('target_modules as PEFT matches it', () => {
  it('full module paths for some layers only (what target_modules="all-linear" saves since PEFT 0.14)', () => {
    const out = adapterFolder('full-paths', [[0, 'q_proj'], [2, 'q_proj'], [2, 'down_proj']], {
      target_modules: ['model.layers.2.mlp.down_proj', 'model.layers.0.self_attn.q_proj', 'model.layers.2.self_attn.q_proj'],
    });
    expect(pairs(out)).toEqual(['0.q_proj', '2.q_proj', '2.down_proj']);
    expect(loadPeftAdapter(out, three).targetModules).toEqual(['down_proj', 'q_proj']);
    expect(loadPeftAdapter(out)).toEqual(loadPeftAdapter(out, three)); // without the base config too
  });

  it('suffixes, narrowed by layers_to_transform; a full path is taken as written, as in PEFT', () => {
    const suffixes = adapterFolder('suffixes', [[1, 'v_proj'], [1, 'k_proj']], { target_modules: ['v_proj', 'self_attn.k_proj'], layers_to_transform: [1], layers_pattern: 'layers' });
    expect(pairs(suffixes)).toEqual(['1.k_proj', '1.v_proj']);
    const mixed = adapterFolder('mixed', [[0, 'v_proj'], [1, 'k_proj']], { target_modules: ['model.layers.0.self_attn.v_proj', 'k_proj'], layers_to_transform: 1 });
    expect(pairs(mixed)).toEqual(['0.v_proj', '1.k_proj']);
  });

  it('a regex string, matched against the whole module name (and not narrowed by layers_to_transform)', () => {
    const out = adapterFolder('regex', [[0, 'q_proj'], [0, 'v_proj'], [2, 'q_proj'], [2, 'v_proj']], {
      target_modules: 'model\\.layers\\.[02]\\.self_attn\\.(q|v)_proj',
      layers_to_transform: [1],
    });
    expect(pairs(out)).toEqual(['0.q_proj', '0.v_proj', '2.q_proj', '2.v_proj']);
    // fullmatch: "q_proj" alone as a regex matches no full name, where the same string in a list is a suffix.
    expect(() => loadPeftAdapter(adapterFolder('regex-partial', [], { target_modules: 'q_proj' }), three)).toThrow(/field "target_modules": "q_proj" matches none of the attention and MLP projections/);
  });

  it('exclude_modules, as a list or a regex', () => {
    const keep: Array<[number, LoraModule]> = [[0, 'q_proj'], [1, 'q_proj'], [2, 'q_proj'], [0, 'down_proj'], [1, 'down_proj'], [2, 'down_proj']];
    const listed = adapterFolder('exclude-list', keep.filter(([l, m]) => !(l === 1 && m === 'q_proj')), { target_modules: ['q_proj', 'down_proj'], exclude_modules: ['model.layers.1.self_attn.q_proj'] });
    expect(pairs(listed)).toEqual(['0.q_proj', '0.down_proj', '1.down_proj', '2.q_proj', '2.down_proj']);
    const regex = adapterFolder('exclude-regex', keep.filter(([, m]) => m === 'q_proj'), { target_modules: ['q_proj', 'down_proj', 'lm_head'], exclude_modules: '.*(mlp\\..*|lm_head)' });
    expect(pairs(regex)).toEqual(['0.q_proj', '1.q_proj', '2.q_proj']);
  });

  it('refuses what populora cannot honour, naming the entry', () => {
    const file = (name: string) => join(dir, name, 'adapter_config.json');
    const attempt = (name: string, config: object) => () => loadPeftAdapter(adapterFolder(name, [[0, 'q_proj']], config), three);
    expect(attempt('bad-lm-head', { target_modules: ['model.layers.0.self_attn.q_proj', 'lm_head'] })).toThrow(
      `${file('bad-lm-head')}: field "target_modules": entry "lm_head" names lm_head, which populora does not adapt; it adapts only the attention and MLP projections (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj) of each layer`,
    );
    expect(attempt('bad-embed', { target_modules: ['q_proj', 'model.embed_tokens'] })).toThrow(/entry "model\.embed_tokens" names model\.embed_tokens, which populora does not adapt/);
    expect(attempt('bad-regex-all', { target_modules: '.*' })).toThrow(/field "target_modules": "\.\*" matches model\.embed_tokens, which populora does not adapt/);
    expect(attempt('bad-module', { target_modules: ['q_proj', 'c_attn'] })).toThrow(`${file('bad-module')}: field "target_modules": entry "c_attn" names no module populora can adapt in the base model's 3 layers`);
    expect(attempt('bad-depth', { target_modules: ['model.layers.0.self_attn.q_proj', 'model.layers.7.self_attn.q_proj'] })).toThrow(/entry "model\.layers\.7\.self_attn\.q_proj" names no module populora can adapt in the base model's 3 layers/);
    expect(attempt('bad-syntax', { target_modules: '(?P<x>q_proj)' })).toThrow(/field "target_modules": "\(\?P<x>q_proj\)" is a regular expression populora cannot read/);
    expect(attempt('bad-pattern', { target_modules: ['q_proj'], layers_to_transform: [0], layers_pattern: ['h'] })).toThrow(/field "layers_pattern": \["h"\] names no layer list of a Llama-family model/);
    expect(attempt('bad-exclude', { target_modules: ['q_proj'], exclude_modules: ['self_attn.q_proj'] })).toThrow(/field "exclude_modules": excludes every module target_modules names/);
    // A module the config names but the file lacks is still reported by tensor, as before.
    expect(attempt('missing', { target_modules: ['model.layers.0.self_attn.q_proj', 'model.layers.1.self_attn.q_proj'] })).toThrow(/tensor "base_model\.model\.model\.layers\.1\.self_attn\.q_proj\.lora_A\.weight" is missing/);
  });
});

/** adapter_config.json with every LoraConfig field at its default, as PEFT 0.18-0.21 saves it. */
const PEFT_021_DEFAULTS = {
  alora_invocation_tokens: null, alpha_pattern: {}, arrow_config: null, auto_mapping: null, base_model_name_or_path: 'Qwen/Qwen2.5-0.5B', bias: 'none',
  corda_config: null, ensure_weight_tying: false, eva_config: null, exclude_modules: null, fan_in_fan_out: false, inference_mode: true,
  init_lora_weights: true, layer_replication: null, layers_pattern: null, layers_to_transform: null, loftq_config: {}, lora_alpha: 16,
  lora_bias: false, lora_dropout: 0.05, megatron_config: null, megatron_core: 'megatron.core', modules_to_save: null, peft_type: 'LORA',
  peft_version: '0.18.0', qalora_group_size: 16, r: 2, rank_pattern: {}, revision: null, runtime_config: { ephemeral_gpu_offload: false },
  target_modules: ['v_proj', 'q_proj'], target_parameters: null, task_type: 'CAUSAL_LM', trainable_token_indices: null, use_dora: false,
  use_qalora: false, use_rslora: false,
};

describe('adapter_config.json fields: an allow-list', () => {
  const keep: Array<[number, LoraModule]> = [0, 1, 2].flatMap((l) => [[l, 'q_proj'], [l, 'v_proj']] as Array<[number, LoraModule]>);
  const out = adapterFolder('allow-list', keep, {});
  const configFile = join(out, 'adapter_config.json');
  const attempt = (patch: object) => {
    writeFileSync(configFile, JSON.stringify({ ...PEFT_021_DEFAULTS, ...patch }));
    return () => loadPeftAdapter(out, three);
  };

  it("loads a PEFT 0.21 config with all of LoraConfig's fields at their defaults", () => {
    expect(attempt({})().targetModules).toEqual(['v_proj', 'q_proj']);
    expect(attempt({ some_future_option: null, another: false })().rank).toBe(2); // unknown but off
  });

  it('refuses activated LoRA and other options it does not compute, by file and field', () => {
    expect(attempt({ alora_invocation_tokens: [128006, 882] })).toThrow(`${configFile}: field "alora_invocation_tokens": [128006,882]: activated LoRA (aLoRA) applies the adapter only after these invocation tokens, which is not supported`);
    expect(attempt({ trainable_token_indices: [5, 6] })).toThrow(/field "trainable_token_indices": \[5,6\]: trained embedding rows are not supported/);
    expect(attempt({ target_parameters: ['mlp.experts.gate_up_proj'] })).toThrow(/field "target_parameters"/);
    expect(attempt({ use_qalora: true })).toThrow(/field "use_qalora": true: QA-LoRA/);
  });

  it('refuses an unknown field that is switched on, saying what to do', () => {
    expect(attempt({ use_future_lora: true })).toThrow(`${configFile}: field "use_future_lora": unknown to populora (it reads PEFT 0.14 to 0.21 LoRA configs) and set to true, so it may change what the adapter computes; if the adapter does not use it, remove the field or set it to null`);
  });
});

// Published config.json files (as on the Hugging Face Hub), with the fields populora reads and those it may ignore.
const TINYLLAMA = { architectures: ['LlamaForCausalLM'], attention_bias: false, bos_token_id: 1, eos_token_id: 2, hidden_act: 'silu', hidden_size: 2048, initializer_range: 0.02, intermediate_size: 5632, max_position_embeddings: 2048, model_type: 'llama', num_attention_heads: 32, num_hidden_layers: 22, num_key_value_heads: 4, pretraining_tp: 1, rms_norm_eps: 1e-5, rope_scaling: null, rope_theta: 10000, tie_word_embeddings: false, torch_dtype: 'bfloat16', transformers_version: '4.35.0', use_cache: true, vocab_size: 32000 };
const LLAMA31_8B = { architectures: ['LlamaForCausalLM'], attention_bias: false, attention_dropout: 0, bos_token_id: 128000, eos_token_id: [128001, 128008, 128009], hidden_act: 'silu', hidden_size: 4096, initializer_range: 0.02, intermediate_size: 14336, max_position_embeddings: 131072, mlp_bias: false, model_type: 'llama', num_attention_heads: 32, num_hidden_layers: 32, num_key_value_heads: 8, pretraining_tp: 1, rms_norm_eps: 1e-5, rope_scaling: { factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8192, rope_type: 'llama3' }, rope_theta: 500000, tie_word_embeddings: false, torch_dtype: 'bfloat16', transformers_version: '4.43.0.dev0', use_cache: true, vocab_size: 128256 };
const QWEN25_7B = { architectures: ['Qwen2ForCausalLM'], attention_dropout: 0, bos_token_id: 151643, eos_token_id: 151645, hidden_act: 'silu', hidden_size: 3584, initializer_range: 0.02, intermediate_size: 18944, max_position_embeddings: 32768, max_window_layers: 28, model_type: 'qwen2', num_attention_heads: 28, num_hidden_layers: 28, num_key_value_heads: 4, rms_norm_eps: 1e-6, rope_theta: 1000000, sliding_window: 131072, tie_word_embeddings: false, torch_dtype: 'bfloat16', transformers_version: '4.43.1', use_cache: true, use_sliding_window: false, vocab_size: 152064 };
const MISTRAL_7B_V03 = { architectures: ['MistralForCausalLM'], attention_dropout: 0, bos_token_id: 1, eos_token_id: 2, hidden_act: 'silu', hidden_size: 4096, initializer_range: 0.02, intermediate_size: 14336, max_position_embeddings: 32768, model_type: 'mistral', num_attention_heads: 32, num_hidden_layers: 32, num_key_value_heads: 8, rms_norm_eps: 1e-5, rope_theta: 1000000, sliding_window: null, tie_word_embeddings: false, torch_dtype: 'bfloat16', transformers_version: '4.42.0.dev0', use_cache: true, vocab_size: 32768 };
const MISTRAL_7B_V01 = { ...MISTRAL_7B_V03, rope_theta: 10000, sliding_window: 4096, vocab_size: 32000, transformers_version: '4.34.0.dev0' };
// As transformers 5 saves a Qwen2 config: dtype, rope_parameters, layer_types.
const QWEN2_TRANSFORMERS5 = { ...QWEN25_7B, torch_dtype: undefined, rope_theta: undefined, dtype: 'bfloat16', rope_parameters: { rope_type: 'default', rope_theta: 1000000 }, layer_types: Array(28).fill('full_attention'), sliding_window: null, transformers_version: '5.0.0', pad_token_id: null };

describe('config.json fields: an allow-list, and sliding windows', () => {
  it('loads real Llama 3, TinyLlama, Qwen2.5, Mistral and transformers 5 configs', () => {
    expect(parseConfig(TINYLLAMA)).toMatchObject({ numLayers: 22, numKvHeads: 4, maxPositionEmbeddings: 2048 });
    expect(parseConfig(LLAMA31_8B)).toMatchObject({ ropeScaling: { type: 'llama3', factor: 8 } });
    expect(parseConfig(QWEN25_7B)).toMatchObject({ attentionBias: true, maxPositionEmbeddings: 32768 }); // window off
    expect(parseConfig(MISTRAL_7B_V03)).toMatchObject({ modelType: 'mistral', vocabSize: 32768 });
    expect(parseConfig(QWEN2_TRANSFORMERS5)).toMatchObject({ ropeTheta: 1000000, torchDtype: 'bfloat16' });
    expect(parseConfig({ ...TINYLLAMA, _name_or_path: 'TinyLlama/TinyLlama-1.1B-Chat-v1.0', some_future_flag: false })).toMatchObject({ numLayers: 22 });
  });

  it('refuses a sliding window smaller than the context, naming the fix', () => {
    expect(() => parseConfig(MISTRAL_7B_V01, 'mistral/config.json')).toThrow(
      'mistral/config.json: field "sliding_window": 4096 is smaller than the context (max_position_embeddings 32768): the model attends only to the last 4096 tokens in every layer',
    );
    expect(() => parseConfig(MISTRAL_7B_V01)).toThrow(/set "max_position_embeddings" to 4096 to use the model within its window/);
    expect(parseConfig({ ...MISTRAL_7B_V01, max_position_embeddings: 4096 }).maxPositionEmbeddings).toBe(4096); // the fix
    const qwenWindow = { ...QWEN25_7B, use_sliding_window: true, sliding_window: 4096, max_window_layers: 21 };
    expect(() => parseConfig(qwenWindow)).toThrow(/field "sliding_window": 4096 is smaller than the context \(max_position_embeddings 32768\): the model attends only to the last 4096 tokens in layers 21 and up \(max_window_layers\)/);
    expect(parseConfig({ ...qwenWindow, max_window_layers: 28 }).numLayers).toBe(28); // no layer past max_window_layers
    expect(parseConfig({ ...qwenWindow, layer_types: Array(28).fill('full_attention') }).numLayers).toBe(28);
    expect(() => parseConfig({ ...qwenWindow, layer_types: [...Array(27).fill('full_attention'), 'sliding_attention'] })).toThrow(/in the layers layer_types marks "sliding_attention"/);
    expect(() => parseConfig({ ...QWEN2_TRANSFORMERS5, layer_types: Array(28).fill('chunked_attention') })).toThrow(/field "layer_types": expected a list of "full_attention" or "sliding_attention"/);
    expect(parseConfig({ ...TINYLLAMA, sliding_window: 512 }).maxPositionEmbeddings).toBe(2048); // Llama ignores it, as transformers does
  });

  it('refuses an unknown field that is switched on, saying what to do', () => {
    expect(() => parseConfig({ ...TINYLLAMA, attn_logit_softcapping: 50 }, 'm/config.json')).toThrow(
      'm/config.json: field "attn_logit_softcapping": unknown to populora (it reads Llama, Qwen2 and Mistral configs as transformers 4 and 5 write them) and set to 50, so it may change what the model computes; if the model does not use it, remove the field or set it to null',
    );
    expect(() => parseConfig({ ...TINYLLAMA, quantization_config: { quant_method: 'bitsandbytes', load_in_4bit: true } })).toThrow(/field "quantization_config": quantized checkpoints are not supported/);
  });
});
