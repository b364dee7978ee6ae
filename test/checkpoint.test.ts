// config.json and Hugging Face model folders: published configs written out literally, hand-built folders,
// seeded random models through save and load, and the errors a user sees for a broken folder.
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { roundToF16, bf16BitsToF32, f32ToBf16Bits } from '../src/backend/half.js';
import { expectedShapes, loadModel, randomModel, saveModel, type HostTensor, type ModelWeights } from '../src/model/checkpoint.js';
import { configToJson, parseConfig, ropeInverseFrequencies, ropeTable, TINY_CONFIGS, type LlamaConfig } from '../src/model/config.js';
import { readSafetensors, writeSafetensors, type TensorToWrite } from '../src/model/safetensors.js';
import { charTokenizerJson, ARITH_ALPHABET } from '../src/model/tokenizer.js';

const dir = mkdtempSync(join(tmpdir(), 'populora-checkpoint-'));
const tiny = TINY_CONFIGS['tiny']!;
const qwenTiny = TINY_CONFIGS['qwen2-tiny']!;

// Published config.json files (Qwen/Qwen2.5-0.5B, meta-llama/Llama-3.2-1B, mistralai/Mistral-7B-v0.3), as on the Hub.
const QWEN25_05B = { architectures: ['Qwen2ForCausalLM'], attention_dropout: 0.0, bos_token_id: 151643, eos_token_id: 151643, hidden_act: 'silu', hidden_size: 896, initializer_range: 0.02, intermediate_size: 4864, max_position_embeddings: 32768, max_window_layers: 24, model_type: 'qwen2', num_attention_heads: 14, num_hidden_layers: 24, num_key_value_heads: 2, rms_norm_eps: 1e-6, rope_theta: 1000000.0, sliding_window: 32768, tie_word_embeddings: true, torch_dtype: 'bfloat16', transformers_version: '4.40.1', use_cache: true, use_mrope: false, use_sliding_window: false, vocab_size: 151936 };
const LLAMA32_1B = { architectures: ['LlamaForCausalLM'], attention_bias: false, attention_dropout: 0.0, bos_token_id: 128000, eos_token_id: 128001, head_dim: 64, hidden_act: 'silu', hidden_size: 2048, initializer_range: 0.02, intermediate_size: 8192, max_position_embeddings: 131072, mlp_bias: false, model_type: 'llama', num_attention_heads: 32, num_hidden_layers: 16, num_key_value_heads: 8, pretraining_tp: 1, rms_norm_eps: 1e-5, rope_scaling: { factor: 32.0, high_freq_factor: 4.0, low_freq_factor: 1.0, original_max_position_embeddings: 8192, rope_type: 'llama3' }, rope_theta: 500000.0, tie_word_embeddings: true, torch_dtype: 'bfloat16', transformers_version: '4.45.0.dev0', use_cache: true, vocab_size: 128256 };
const MISTRAL_7B = { architectures: ['MistralForCausalLM'], attention_dropout: 0.0, bos_token_id: 1, eos_token_id: 2, head_dim: 128, hidden_act: 'silu', hidden_size: 4096, initializer_range: 0.02, intermediate_size: 14336, max_position_embeddings: 32768, model_type: 'mistral', num_attention_heads: 32, num_hidden_layers: 32, num_key_value_heads: 8, rms_norm_eps: 1e-5, rope_theta: 1000000.0, sliding_window: null, tie_word_embeddings: false, torch_dtype: 'bfloat16', transformers_version: '4.42.0.dev0', use_cache: true, vocab_size: 32768 };
// Mistral-7B-v0.1 attends within a 4096-token window of its 32768-token context: refused (populora has no window).

describe('parseConfig', () => {
  it("reads Qwen2.5-0.5B's config: biases implied by qwen2, head_dim derived, tied embeddings", () => {
    const qwen = parseConfig(QWEN25_05B);
    expect(qwen).toEqual({
      modelType: 'qwen2', vocabSize: 151936, hiddenSize: 896, intermediateSize: 4864, numLayers: 24, numHeads: 14, numKvHeads: 2, headDim: 64,
      rmsNormEps: 1e-6, ropeTheta: 1e6, ropeScaling: null, tieWordEmbeddings: true, attentionBias: true, maxPositionEmbeddings: 32768,
      bosTokenId: 151643, eosTokenIds: [151643], torchDtype: 'bfloat16',
    });
    // The benchmark preset has the real model's dimensions.
    expect({ ...TINY_CONFIGS['qwen2.5-0.5b-shape']!, bosTokenId: 151643 }).toEqual(qwen);
  });

  it("reads Llama-3.2-1B's config with llama3 rope scaling, and Mistral-7B's", () => {
    expect(parseConfig(LLAMA32_1B)).toEqual({
      modelType: 'llama', vocabSize: 128256, hiddenSize: 2048, intermediateSize: 8192, numLayers: 16, numHeads: 32, numKvHeads: 8, headDim: 64,
      rmsNormEps: 1e-5, ropeTheta: 500000, ropeScaling: { type: 'llama3', factor: 32, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8192 },
      tieWordEmbeddings: true, attentionBias: false, maxPositionEmbeddings: 131072, bosTokenId: 128000, eosTokenIds: [128001], torchDtype: 'bfloat16',
    });
    expect(parseConfig({ ...LLAMA32_1B, eos_token_id: [128001, 128008, 128009] }).eosTokenIds).toEqual([128001, 128008, 128009]);
    expect(parseConfig(MISTRAL_7B)).toMatchObject({ modelType: 'mistral', numKvHeads: 8, headDim: 128, attentionBias: false, tieWordEmbeddings: false, ropeScaling: null });
    expect(() => parseConfig({ ...MISTRAL_7B, sliding_window: 4096 })).toThrow(/sliding_window.*4096 is smaller than the context/);
  });

  it("fills transformers' defaults for fields a config leaves out", () => {
    const minimal = { model_type: 'llama', vocab_size: 10, hidden_size: 8, intermediate_size: 16, num_hidden_layers: 1, num_attention_heads: 2 };
    expect(parseConfig(minimal)).toEqual({
      modelType: 'llama', vocabSize: 10, hiddenSize: 8, intermediateSize: 16, numLayers: 1, numHeads: 2, numKvHeads: 2, headDim: 4,
      rmsNormEps: 1e-6, ropeTheta: 10000, ropeScaling: null, tieWordEmbeddings: false, attentionBias: false, maxPositionEmbeddings: 2048,
      bosTokenId: null, eosTokenIds: [], torchDtype: 'float32',
    });
    expect(parseConfig({ ...minimal, model_type: 'qwen2' }).maxPositionEmbeddings).toBe(32768);
    expect(parseConfig({ ...minimal, rope_scaling: { rope_type: 'linear', factor: 2 } }).ropeScaling).toEqual({ type: 'linear', factor: 2 });
    expect(parseConfig({ ...minimal, rope_scaling: { type: 'linear', factor: 4 } }).ropeScaling).toEqual({ type: 'linear', factor: 4 }); // older key
    expect(parseConfig({ ...minimal, rope_scaling: { rope_type: 'default' } }).ropeScaling).toBeNull();
    // transformers 5 writes "dtype" and nests rope settings in "rope_parameters".
    expect(parseConfig({ ...minimal, dtype: 'float16', rope_parameters: { rope_type: 'linear', rope_theta: 5000, factor: 2 } })).toMatchObject({ torchDtype: 'float16', ropeTheta: 5000, ropeScaling: { type: 'linear', factor: 2 } });
  });

  it('round-trips through configToJson, which writes what transformers expects', () => {
    for (const config of [parseConfig(QWEN25_05B), parseConfig(LLAMA32_1B), parseConfig(MISTRAL_7B), tiny, qwenTiny, { ...tiny, ropeScaling: { type: 'linear' as const, factor: 3 } }]) {
      expect(parseConfig(JSON.parse(JSON.stringify(configToJson(config))))).toEqual(config);
    }
    const json = configToJson(parseConfig(LLAMA32_1B));
    expect(json).toMatchObject({ architectures: ['LlamaForCausalLM'], model_type: 'llama', num_hidden_layers: 16, num_key_value_heads: 8, hidden_act: 'silu', rope_scaling: LLAMA32_1B.rope_scaling, eos_token_id: 128001 });
    expect(configToJson(qwenTiny).architectures).toEqual(['Qwen2ForCausalLM']);
    expect(configToJson(parseConfig(MISTRAL_7B)).architectures).toEqual(['MistralForCausalLM']);
  });

  it('names the field that is wrong, what was expected, and what was found', () => {
    const attempt = (patch: object, file?: string) => () => parseConfig({ ...QWEN25_05B, ...patch }, file);
    expect(attempt({ hidden_size: -1 })).toThrow('config.json: field "hidden_size": expected a positive integer (got -1)');
    expect(attempt({ hidden_size: 89.5 }, '/m/config.json')).toThrow('/m/config.json: field "hidden_size": expected a positive integer (got 89.5)');
    expect(attempt({ vocab_size: undefined })).toThrow('config.json: field "vocab_size" is missing: expected a positive integer');
    expect(attempt({ num_key_value_heads: 3 })).toThrow('config.json: field "num_key_value_heads": must divide "num_attention_heads" (got 3 and 14)');
    expect(attempt({ model_type: 'gpt2' })).toThrow(/field "model_type": expected one of "llama", "qwen2", "mistral" .*\(got "gpt2"\)/);
    expect(attempt({ rms_norm_eps: 0 })).toThrow(/field "rms_norm_eps": expected a positive number \(got 0\)/);
    expect(attempt({ tie_word_embeddings: 'yes' })).toThrow(/field "tie_word_embeddings": expected true or false/);
    expect(attempt({ eos_token_id: [1, -2] })).toThrow('config.json: field "eos_token_id[1]": expected a token id (an integer >= 0) (got -2)');
    expect(attempt({ eos_token_id: '</s>' })).toThrow('config.json: field "eos_token_id": expected a token id or a list of token ids (got "</s>")');
    expect(attempt({ eos_token_id: 999999 })).toThrow(/field "eos_token_id": token id 999999 is outside the vocabulary \(vocab_size 151936\)/);
    expect(attempt({ torch_dtype: 'float64' })).toThrow(/field "torch_dtype": expected one of float32, float16, bfloat16/);
    expect(attempt({ hidden_act: 'gelu' })).toThrow(/field "hidden_act": expected "silu"/);
    expect(attempt({ mlp_bias: true })).toThrow(/field "mlp_bias": expected false/);
    expect(attempt({ head_dim: 63 })).toThrow(/field "head_dim": must be even/);
    expect(attempt({ hidden_size: 900 })).toThrow(/field "head_dim": missing, and hidden_size \/ num_attention_heads = 900 \/ 14 is not an integer/);
    expect(attempt({ rope_scaling: { rope_type: 'yarn', factor: 4 } })).toThrow('config.json: field "rope_scaling.rope_type": "yarn" is not supported; supported: llama3, linear, or null');
    expect(attempt({ rope_scaling: { ...LLAMA32_1B.rope_scaling, low_freq_factor: undefined } })).toThrow('config.json: field "rope_scaling.low_freq_factor": expected a positive number (got undefined)');
    expect(attempt({ rope_scaling: { ...LLAMA32_1B.rope_scaling, high_freq_factor: 1 } })).toThrow(/field "rope_scaling.high_freq_factor": must exceed low_freq_factor/);
    expect(() => parseConfig([1, 2])).toThrow(/config\.json: expected a JSON object/);
  });
});

describe('rotary embeddings', () => {
  it('ropeTable holds cos(p·θ^(-2i/hd)) then sin, row per position', () => {
    const table = ropeTable(tiny, 600);
    expect(table).toHaveLength(600 * 16);
    for (const [p, i] of [[0, 0], [1, 0], [3, 1], [7, 7], [599, 2], [599, 7]] as const) {
      const angle = p * Math.pow(10000, (-2 * i) / 16);
      expect(table[p * 16 + i]).toBeCloseTo(Math.cos(angle), 6);
      expect(table[p * 16 + 8 + i]).toBeCloseTo(Math.sin(angle), 6);
    }
    expect(Array.from(table.subarray(0, 16))).toEqual([...Array(8).fill(1), ...Array(8).fill(0)]); // position 0: no rotation
    const qwen = ropeInverseFrequencies(parseConfig(QWEN25_05B));
    expect(qwen).toHaveLength(32);
    expect(qwen[1]).toBeCloseTo(1e6 ** (-2 / 64), 15);
  });

  it('llama3 scaling divides low frequencies by the factor, keeps high ones, and blends between (HF formula)', () => {
    const llama = parseConfig(LLAMA32_1B);
    const scaled = ropeInverseFrequencies(llama);
    const plain = ropeInverseFrequencies({ ...llama, ropeScaling: null });
    const bands = { high: 0, low: 0, medium: 0 };
    for (let i = 0; i < 32; i++) {
      const base = 500000 ** (-(2 * i) / 64);
      expect(plain[i]).toBeCloseTo(base, 15);
      const wavelength = (2 * Math.PI) / base;
      if (wavelength < 8192 / 4) {
        bands.high++;
        expect(scaled[i]).toBe(plain[i]);
      } else if (wavelength > 8192 / 1) {
        bands.low++;
        expect(scaled[i]).toBeCloseTo(plain[i]! / 32, 18);
      } else {
        bands.medium++;
        const smooth = (8192 / wavelength - 1) / (4 - 1);
        expect(scaled[i]).toBeCloseTo((1 - smooth) * (plain[i]! / 32) + smooth * plain[i]!, 15);
        expect(scaled[i]).toBeLessThan(plain[i]!);
        expect(scaled[i]).toBeGreaterThan(plain[i]! / 32);
      }
    }
    expect(bands).toEqual({ high: 15, medium: 3, low: 14 }); // every band is exercised
  });

  it('linear scaling divides every frequency by the factor', () => {
    const scaled = ropeInverseFrequencies({ ...tiny, ropeScaling: { type: 'linear', factor: 4 } });
    ropeInverseFrequencies(tiny).forEach((f, i) => expect(scaled[i]).toBeCloseTo(f / 4, 18));
  });
});

describe('presets and expected tensors', () => {
  it('TINY_CONFIGS have the documented shapes', () => {
    expect(tiny).toMatchObject({ modelType: 'llama', vocabSize: 64, hiddenSize: 64, intermediateSize: 128, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 16, tieWordEmbeddings: false, attentionBias: false });
    expect(qwenTiny).toMatchObject({ ...tiny, modelType: 'qwen2', attentionBias: true, tieWordEmbeddings: true });
  });

  it('expectedShapes lists every Hugging Face tensor name with its shape', () => {
    const shapes = expectedShapes(tiny);
    expect(shapes.size).toBe(1 + 2 * 9 + 1 + 1);
    expect(Object.fromEntries([...shapes].filter(([k]) => !k.startsWith('model.layers.1.')))).toEqual({
      'model.embed_tokens.weight': [64, 64],
      'model.layers.0.input_layernorm.weight': [64],
      'model.layers.0.self_attn.q_proj.weight': [64, 64],
      'model.layers.0.self_attn.k_proj.weight': [32, 64],
      'model.layers.0.self_attn.v_proj.weight': [32, 64],
      'model.layers.0.self_attn.o_proj.weight': [64, 64],
      'model.layers.0.post_attention_layernorm.weight': [64],
      'model.layers.0.mlp.gate_proj.weight': [128, 64],
      'model.layers.0.mlp.up_proj.weight': [128, 64],
      'model.layers.0.mlp.down_proj.weight': [64, 128],
      'model.norm.weight': [64],
      'lm_head.weight': [64, 64],
    });
    const qwen = expectedShapes(qwenTiny);
    expect(qwen.has('lm_head.weight')).toBe(false);
    expect(qwen.get('model.layers.1.self_attn.q_proj.bias')).toEqual([64]);
    expect(qwen.get('model.layers.1.self_attn.k_proj.bias')).toEqual([32]);
    expect(qwen.get('model.layers.1.self_attn.v_proj.bias')).toEqual([32]);
    expect(qwen.has('model.layers.1.self_attn.o_proj.bias')).toBe(false);
    // Real dimensions: q_proj of Qwen2.5-0.5B is [14·64, 896], k_proj [2·64, 896].
    const real = expectedShapes(parseConfig(QWEN25_05B));
    expect(real.get('model.layers.23.self_attn.q_proj.weight')).toEqual([896, 896]);
    expect(real.get('model.layers.23.self_attn.k_proj.weight')).toEqual([128, 896]);
    expect(real.get('model.layers.23.mlp.down_proj.weight')).toEqual([896, 4864]);
  });
});

/** A model folder written tensor by tensor: each tensor's values are 1000·(its index) + position, so a swap shows. */
function handBuiltFolder(name: string, config: LlamaConfig, edit: (tensors: TensorToWrite[]) => TensorToWrite[] = (t) => t): string {
  const folder = join(dir, name);
  mkdirSync(folder, { recursive: true });
  const tensors = [...expectedShapes(config)].map(([tensorName, shape], k) => ({
    name: tensorName,
    dtype: 'F32' as const,
    shape,
    data: Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, (_, i) => 1000 * k + i),
  }));
  writeSafetensors(join(folder, 'model.safetensors'), edit(tensors));
  writeFileSync(join(folder, 'config.json'), JSON.stringify(configToJson(config)));
  return folder;
}

const firstValue = (t: { data: Float32Array }) => t.data[0]! / 1000; // the tensor's index in expectedShapes order

describe('loadModel', () => {
  it('puts every Hugging Face tensor in its field', () => {
    const { config, weights, tokenizerFile } = loadModel(handBuiltFolder('hand-qwen', qwenTiny));
    expect(config).toEqual(qwenTiny);
    expect(tokenizerFile).toBeNull();
    const order = [...expectedShapes(qwenTiny).keys()];
    const at = (name: string) => order.indexOf(name);
    expect(firstValue(weights.embedTokens)).toBe(at('model.embed_tokens.weight'));
    expect(firstValue(weights.norm)).toBe(at('model.norm.weight'));
    const l1 = weights.layers[1]!;
    const fields: Array<[keyof typeof l1, string]> = [
      ['inputNorm', 'input_layernorm.weight'], ['qProj', 'self_attn.q_proj.weight'], ['kProj', 'self_attn.k_proj.weight'],
      ['vProj', 'self_attn.v_proj.weight'], ['oProj', 'self_attn.o_proj.weight'], ['qBias', 'self_attn.q_proj.bias'],
      ['kBias', 'self_attn.k_proj.bias'], ['vBias', 'self_attn.v_proj.bias'], ['postAttentionNorm', 'post_attention_layernorm.weight'],
      ['gateProj', 'mlp.gate_proj.weight'], ['upProj', 'mlp.up_proj.weight'], ['downProj', 'mlp.down_proj.weight'],
    ];
    for (const [field, suffix] of fields) expect(firstValue(l1[field]!)).toBe(at(`model.layers.1.${suffix}`));
    expect(l1.downProj.shape).toEqual([64, 128]);
    expect(l1.downProj.data[5]).toBe(1000 * at('model.layers.1.mlp.down_proj.weight') + 5);
    expect(weights.lmHead).toBeUndefined();
    expect(weights.storedDType).toBe('F32');
  });

  it('ignores extra tensors, and a tied model that ships lm_head.weight anyway', () => {
    const folder = handBuiltFolder('extras', qwenTiny, (t) => [
      ...t,
      { name: 'model.layers.0.self_attn.rotary_emb.inv_freq', dtype: 'F32', shape: [8], data: new Float32Array(8) },
      { name: 'lm_head.weight', dtype: 'F32', shape: [64, 64], data: new Float32Array(64 * 64) },
      { name: 'model.layers.0.self_attn.o_proj.bias', dtype: 'F32', shape: [64], data: new Float32Array(64) }, // zero: harmless
    ]);
    const { weights } = loadModel(folder);
    expect(weights.lmHead).toBeUndefined();
    expect(weights.layers).toHaveLength(2);
  });

  it('reads a sharded model through its index', () => {
    const folder = join(dir, 'sharded-model');
    mkdirSync(folder);
    const weights = randomModel(tiny, 5);
    saveModel(join(dir, 'sharded-source'), tiny, weights);
    const { tensors } = readSafetensors(join(dir, 'sharded-source', 'model.safetensors'));
    const all = [...tensors].map(([name, t]) => ({ name, dtype: t.dtype, shape: t.shape, data: t.decode() }));
    const [s1, s2] = ['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors'];
    writeSafetensors(join(folder, s1), all.slice(0, 7));
    writeSafetensors(join(folder, s2), all.slice(7));
    writeFileSync(join(folder, 'model.safetensors.index.json'), JSON.stringify({ metadata: {}, weight_map: Object.fromEntries(all.map((t, i) => [t.name, i < 7 ? s1 : s2])) }));
    writeFileSync(join(folder, 'config.json'), JSON.stringify(configToJson(tiny)));
    expect(loadModel(folder).weights).toEqual(weights);
  });

  it('names a missing config.json, a broken one, a missing tensor and a misshapen one', () => {
    expect(() => loadModel(join(dir, 'absent'))).toThrow(`model folder ${join(dir, 'absent')} has no config.json`);
    const broken = handBuiltFolder('broken-config', tiny);
    writeFileSync(join(broken, 'config.json'), '{"model_type": "llama",');
    expect(() => loadModel(broken)).toThrow(`${join(broken, 'config.json')}: not valid JSON`);
    writeFileSync(join(broken, 'config.json'), JSON.stringify({ ...configToJson(tiny), num_attention_heads: 0 }));
    expect(() => loadModel(broken)).toThrow(`${join(broken, 'config.json')}: field "num_attention_heads": expected a positive integer (got 0)`);

    const missing = handBuiltFolder('missing-tensor', tiny, (t) => t.filter((x) => x.name !== 'model.layers.1.mlp.up_proj.weight'));
    expect(() => loadModel(missing)).toThrow(`${join(missing, 'model.safetensors')}: tensor "model.layers.1.mlp.up_proj.weight" is missing (expected shape [128, 64] from config.json)`);

    const misshapen = handBuiltFolder('misshapen', tiny, (t) => t.map((x) => (x.name === 'model.layers.0.self_attn.k_proj.weight' ? { ...x, shape: [64, 32] } : x)));
    expect(() => loadModel(misshapen)).toThrow(`${join(misshapen, 'model.safetensors')}: tensor "model.layers.0.self_attn.k_proj.weight" has shape [64, 32], expected [32, 64] from config.json`);

    const untied = handBuiltFolder('untied-without-head', tiny, (t) => t.filter((x) => x.name !== 'lm_head.weight'));
    expect(() => loadModel(untied)).toThrow(/tensor "lm_head\.weight" is missing \(expected shape \[64, 64\]/);

    const renamed = handBuiltFolder('renamed', tiny, (t) => t.map((x) => ({ ...x, name: x.name.replace(/^model\./, 'transformer.') })));
    expect(() => loadModel(renamed)).toThrow(/is missing .*; its tensor names do not follow Hugging Face Llama naming .*"transformer\.embed_tokens\.weight"/);

    const biased = handBuiltFolder('o-bias', tiny, (t) => [...t, { name: 'model.layers.1.self_attn.o_proj.bias', dtype: 'F32', shape: [64], data: new Float32Array(64).fill(0.5) }]);
    expect(() => loadModel(biased)).toThrow(/tensor "model\.layers\.1\.self_attn\.o_proj\.bias" is a non-zero bias/);
  });
});

describe('randomModel and saveModel', () => {
  const allTensors = (w: ModelWeights) => [w.embedTokens, w.norm, ...(w.lmHead ? [w.lmHead] : []), ...w.layers.flatMap((l) => Object.values(l) as HostTensor[])];

  it('is seeded: the same seed gives identical weights, another seed different ones', () => {
    const a = randomModel(tiny, 1);
    expect(randomModel(tiny, 1)).toEqual(a);
    const b = randomModel(tiny, 2);
    allTensors(a).forEach((t, i) => expect(t.data).not.toEqual(allTensors(b)[i]!.data));
  });

  it('has the documented scales: projections ~ N(0, 1/in), norms 1 + N(0, 0.1²), q/k/v biases only when configured', () => {
    const w = randomModel(qwenTiny, 3);
    const std = (d: Float32Array) => Math.sqrt(d.reduce((s, v) => s + v * v, 0) / d.length);
    const mean = (d: Float32Array) => d.reduce((s, v) => s + v, 0) / d.length;
    expect(std(w.layers[0]!.downProj.data)).toBeCloseTo(1 / Math.sqrt(128), 2);
    expect(std(w.layers[0]!.qProj.data)).toBeCloseTo(1 / Math.sqrt(64), 2);
    expect(mean(w.layers[0]!.inputNorm.data)).toBeCloseTo(1, 1);
    expect(w.layers[0]!.inputNorm.data.some((v) => v !== 1)).toBe(true); // a norm left out changes the output
    expect(w.layers[0]!.qBias!.shape).toEqual([64]);
    expect(w.lmHead).toBeUndefined();
    expect(randomModel(tiny, 3).layers[0]!.qBias).toBeUndefined();
    for (const t of allTensors(w)) expect(t.data.length).toBe(t.shape.reduce((a, b) => a * b, 1));
  });

  it('save then load round-trips: F32 exactly, F16 and BF16 to their rounding', () => {
    const weights = randomModel(tiny, 1);
    saveModel(join(dir, 'm32'), tiny, weights, { tokenizerJson: charTokenizerJson(ARITH_ALPHABET) });
    const loaded = loadModel(join(dir, 'm32'));
    expect(loaded.config).toEqual(tiny);
    expect(loaded.weights).toEqual(weights);
    expect(loaded.tokenizerFile).toBe(join(dir, 'm32', 'tokenizer.json'));
    expect(JSON.parse(readFileSync(join(dir, 'm32', 'tokenizer_config.json'), 'utf8'))).toMatchObject({ tokenizer_class: 'PreTrainedTokenizerFast', bos_token: '<bos>', eos_token: '<eos>', pad_token: '<pad>' });
    expect(readSafetensors(join(dir, 'm32', 'model.safetensors')).metadata).toEqual({ format: 'pt' });

    saveModel(join(dir, 'm16'), tiny, weights, { dtype: 'F16' });
    const half = loadModel(join(dir, 'm16'));
    expect(half.weights.storedDType).toBe('F16');
    expect(half.config.torchDtype).toBe('float16');
    allTensors(half.weights).forEach((t, i) => expect(t.data).toEqual(roundToF16(allTensors(weights)[i]!.data)));

    saveModel(join(dir, 'mbf16'), tiny, weights, { dtype: 'BF16' });
    const brain = loadModel(join(dir, 'mbf16'));
    expect(brain.weights.storedDType).toBe('BF16');
    expect(JSON.parse(readFileSync(join(dir, 'mbf16', 'config.json'), 'utf8')).torch_dtype).toBe('bfloat16');
    expect(brain.weights.layers[1]!.upProj.data).toEqual(weights.layers[1]!.upProj.data.map((v) => bf16BitsToF32(f32ToBf16Bits(v))));
  });

  it('a tied model has no lm_head in the file or in the weights', () => {
    saveModel(join(dir, 'tied'), qwenTiny, randomModel(qwenTiny, 1));
    expect(readSafetensors(join(dir, 'tied', 'model.safetensors')).tensors.has('lm_head.weight')).toBe(false);
    const { weights } = loadModel(join(dir, 'tied'));
    expect(weights.lmHead).toBeUndefined();
    expect(weights.layers[0]!.qBias!.shape).toEqual([64]);
    expect(JSON.parse(readFileSync(join(dir, 'tied', 'config.json'), 'utf8'))).toMatchObject({ architectures: ['Qwen2ForCausalLM'], tie_word_embeddings: true });
  });
});
