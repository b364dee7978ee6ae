// File formats against hand-built bytes and hand-computed values: safetensors, config.json, HF model folders,
// tokenizer.json, PEFT adapters, .npy.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { bf16BitsToF32, f16BitsToF32, f32ToF16Bits, roundToF16 } from '../src/backend/half.js';
import { loadModel, randomModel, saveModel } from '../src/model/checkpoint.js';
import { configToJson, parseConfig, ropeInverseFrequencies, ropeTable, TINY_CONFIGS } from '../src/model/config.js';
import { readNpy, writeNpy } from '../src/model/npy.js';
import { denseDelta, loadPeftAdapter, loraScale, randomAdapter, savePeftAdapter, type LoraAdapter } from '../src/model/peft.js';
import { readSafetensors, readSafetensorsFolder, writeSafetensors } from '../src/model/safetensors.js';
import { ARITH_ALPHABET, charTokenizerJson, loadTokenizer } from '../src/model/tokenizer.js';

const dir = mkdtempSync(join(tmpdir(), 'populora-formats-'));
const tiny = TINY_CONFIGS['tiny']!;

/** A safetensors file assembled byte by byte, independently of writeSafetensors. */
function handBuilt(file: string, header: object, body: Buffer): void {
  const json = Buffer.from(JSON.stringify(header));
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(json.length));
  writeFileSync(file, Buffer.concat([length, json, body]));
}

describe('half precision', () => {
  it('decodes hand-computed f16 and bf16 bit patterns exactly', () => {
    expect([0x3c00, 0xc000, 0x7bff, 0x0001, 0x7c00, 0xfc00, 0x3555].map(f16BitsToF32)).toEqual([1, -2, 65504, 2 ** -24, Infinity, -Infinity, 0.333251953125]);
    expect([0x3f80, 0xc040, 0x4049].map(bf16BitsToF32)).toEqual([1, -3, 3.140625]);
  });

  it('rounds to the nearest half, ties to even', () => {
    expect(f32ToF16Bits(1 + 2 ** -11)).toBe(0x3c00); // halfway between 1 and the next half: even wins
    expect(f32ToF16Bits(1 + 3 * 2 ** -11)).toBe(0x3c02);
    expect(f32ToF16Bits(70000)).toBe(0x7c00);
    expect(f32ToF16Bits(2 ** -25 * 1.5)).toBe(0x0001); // subnormal
  });
});

describe('safetensors', () => {
  it('reads a hand-built file with F32, F16 and BF16 tensors', () => {
    const body = Buffer.alloc(8 + 4 + 4);
    body.writeFloatLE(1.5, 0);
    body.writeFloatLE(-2, 4);
    body.writeUInt16LE(0x3c00, 8);
    body.writeUInt16LE(0xc000, 10);
    body.writeUInt16LE(0x3f80, 12);
    body.writeUInt16LE(0xc040, 14);
    const file = join(dir, 'hand.safetensors');
    handBuilt(file, { __metadata__: { format: 'pt' }, a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] }, b: { dtype: 'F16', shape: [1, 2], data_offsets: [8, 12] }, c: { dtype: 'BF16', shape: [2], data_offsets: [12, 16] } }, body);
    const { tensors, metadata } = readSafetensors(file);
    expect(metadata).toEqual({ format: 'pt' });
    expect(Array.from(tensors.get('a')!.decode())).toEqual([1.5, -2]);
    expect(tensors.get('b')!.shape).toEqual([1, 2]);
    expect(Array.from(tensors.get('b')!.decode())).toEqual([1, -2]);
    expect(Array.from(tensors.get('c')!.decode())).toEqual([1, -3]);
  });

  it('round-trips F32 exactly and F16/BF16 to their rounding, with the data 8-byte aligned', () => {
    const data = Float32Array.from({ length: 37 }, (_, i) => Math.sin(i) * 100);
    const file = join(dir, 'rt.safetensors');
    writeSafetensors(file, [{ name: 'x', dtype: 'F32', shape: [37], data }, { name: 'h', dtype: 'F16', shape: [37], data }, { name: 'bf', dtype: 'BF16', shape: [37, 1], data }]);
    expect(Number(readFileSync(file).readBigUInt64LE(0)) % 8).toBe(0);
    const { tensors } = readSafetensors(file);
    expect(tensors.get('x')!.decode()).toEqual(data);
    expect(tensors.get('h')!.decode()).toEqual(roundToF16(data));
    const bf = tensors.get('bf')!.decode();
    bf.forEach((v, i) => expect(Math.abs(v - data[i]!)).toBeLessThanOrEqual(Math.abs(data[i]!) * 2 ** -8));
  });

  it('names the problem in a corrupt file', () => {
    const file = join(dir, 'bad.safetensors');
    handBuilt(file, { w: { dtype: 'F32', shape: [4], data_offsets: [0, 16] } }, Buffer.alloc(8));
    expect(() => readSafetensors(file)).toThrow(/tensor "w" ends at byte .* past the end of the file/);
    handBuilt(file, { w: { dtype: 'F32', shape: [3], data_offsets: [0, 16] } }, Buffer.alloc(16));
    expect(() => readSafetensors(file)).toThrow(/tensor "w" spans 16 bytes, but shape \[3\] of F32 needs 12/);
    handBuilt(file, { w: { dtype: 'I64', shape: [1], data_offsets: [0, 8] } }, Buffer.alloc(8));
    expect(() => readSafetensors(file)).toThrow(/tensor "w" has dtype I64; supported: F32, F16, BF16/);
    writeFileSync(file, Buffer.from([1, 0, 0, 0, 0, 0, 0, 0, 0x7b]));
    expect(() => readSafetensors(file)).toThrow(/header is not valid JSON/);
  });

  it('reads a sharded folder through its index and names a missing shard', () => {
    const sharded = join(dir, 'sharded');
    mkdirSync(sharded);
    writeSafetensors(join(sharded, 'model-00001-of-00002.safetensors'), [{ name: 'a', dtype: 'F32', shape: [1], data: Float32Array.of(1) }]);
    writeSafetensors(join(sharded, 'model-00002-of-00002.safetensors'), [{ name: 'b', dtype: 'F32', shape: [1], data: Float32Array.of(2) }]);
    const index = { metadata: {}, weight_map: { a: 'model-00001-of-00002.safetensors', b: 'model-00002-of-00002.safetensors' } };
    writeFileSync(join(sharded, 'model.safetensors.index.json'), JSON.stringify(index));
    const tensors = readSafetensorsFolder(sharded);
    expect([tensors.get('a')!.decode()[0], tensors.get('b')!.decode()[0]]).toEqual([1, 2]);
    rmSync(join(sharded, 'model-00002-of-00002.safetensors'));
    expect(() => readSafetensorsFolder(sharded)).toThrow(/shard model-00002-of-00002.safetensors \(holding "b"\) is missing/);
  });
});

const QWEN25_05B = { architectures: ['Qwen2ForCausalLM'], attention_dropout: 0, bos_token_id: 151643, eos_token_id: 151643, hidden_act: 'silu', hidden_size: 896, initializer_range: 0.02, intermediate_size: 4864, max_position_embeddings: 32768, max_window_layers: 24, model_type: 'qwen2', num_attention_heads: 14, num_hidden_layers: 24, num_key_value_heads: 2, rms_norm_eps: 1e-6, rope_theta: 1000000, sliding_window: 32768, tie_word_embeddings: true, torch_dtype: 'bfloat16', transformers_version: '4.43.1', use_cache: true, use_sliding_window: false, vocab_size: 151936 };
const LLAMA32_1B = { architectures: ['LlamaForCausalLM'], attention_bias: false, attention_dropout: 0, bos_token_id: 128000, eos_token_id: [128001, 128008, 128009], head_dim: 64, hidden_act: 'silu', hidden_size: 2048, initializer_range: 0.02, intermediate_size: 8192, max_position_embeddings: 131072, mlp_bias: false, model_type: 'llama', num_attention_heads: 32, num_hidden_layers: 16, num_key_value_heads: 8, pretraining_tp: 1, rms_norm_eps: 1e-5, rope_scaling: { factor: 32, high_freq_factor: 4, low_freq_factor: 1, original_max_position_embeddings: 8192, rope_type: 'llama3' }, rope_theta: 500000, tie_word_embeddings: true, torch_dtype: 'bfloat16', vocab_size: 128256 };

describe('config.json', () => {
  it("reads Qwen2.5-0.5B's and Llama-3.2-1B's published configs", () => {
    const qwen = parseConfig(QWEN25_05B);
    expect(qwen).toMatchObject({ hiddenSize: 896, numKvHeads: 2, headDim: 64, attentionBias: true, tieWordEmbeddings: true, ropeTheta: 1e6, eosTokenIds: [151643] });
    expect(qwen).toEqual({ ...TINY_CONFIGS['qwen2.5-0.5b-shape'], bosTokenId: 151643, maxPositionEmbeddings: 32768 });
    const llama = parseConfig(LLAMA32_1B);
    expect(llama).toMatchObject({ numKvHeads: 8, attentionBias: false, eosTokenIds: [128001, 128008, 128009], ropeScaling: { type: 'llama3', factor: 32 } });
    expect(parseConfig(configToJson(llama))).toEqual(llama);
    expect(parseConfig(configToJson(qwen))).toEqual(qwen);
  });

  it('names the field that is wrong', () => {
    expect(() => parseConfig({ ...QWEN25_05B, hidden_size: -1 })).toThrow(/config\.json: field "hidden_size"/);
    expect(() => parseConfig({ ...QWEN25_05B, num_key_value_heads: 3 })).toThrow(/field "num_key_value_heads": must divide "num_attention_heads" \(got 3 and 14\)/);
    expect(() => parseConfig({ ...QWEN25_05B, model_type: 'gpt2' })).toThrow(/field "model_type"/);
    expect(() => parseConfig({ ...LLAMA32_1B, rope_scaling: { rope_type: 'yarn', factor: 4 } })).toThrow(/"yarn" is not supported; supported: llama3, linear/);
  });

  it('computes the rotary table and llama3 frequency scaling', () => {
    const table = ropeTable(tiny, 8);
    const inv = (i: number) => 10000 ** (-(2 * i) / 16);
    for (const [p, i] of [[0, 0], [3, 1], [7, 7]] as const) {
      expect(table[p * 16 + i]).toBeCloseTo(Math.cos(p * inv(i)), 6);
      expect(table[p * 16 + 8 + i]).toBeCloseTo(Math.sin(p * inv(i)), 6);
    }
    const llama = parseConfig(LLAMA32_1B);
    const scaled = ropeInverseFrequencies(llama);
    const plain = ropeInverseFrequencies({ ...llama, ropeScaling: null });
    expect(scaled[0]).toBe(plain[0]); // high frequency: wavelength below 8192 / 4, untouched
    expect(scaled[31]).toBeCloseTo(plain[31]! / 32, 15); // lowest frequency: divided by the factor
  });
});

describe('Hugging Face model folders', () => {
  it('save then load round-trips (f32 exactly, f16 rounded); seeds decide the weights', () => {
    const weights = randomModel(tiny, 1);
    saveModel(join(dir, 'm32'), tiny, weights);
    const loaded = loadModel(join(dir, 'm32'));
    expect(loaded.config).toEqual(tiny);
    expect(loaded.weights.layers[1]!.downProj.data).toEqual(weights.layers[1]!.downProj.data);
    expect(loaded.weights.lmHead!.data).toEqual(weights.lmHead!.data);
    saveModel(join(dir, 'm16'), tiny, weights, { dtype: 'F16' });
    const half = loadModel(join(dir, 'm16'));
    expect(half.weights.storedDType).toBe('F16');
    expect(half.weights.layers[0]!.qProj.data).toEqual(roundToF16(weights.layers[0]!.qProj.data));
    expect(randomModel(tiny, 1).layers[0]!.qProj.data).toEqual(weights.layers[0]!.qProj.data);
    expect(randomModel(tiny, 2).layers[0]!.qProj.data).not.toEqual(weights.layers[0]!.qProj.data);
    const tied = TINY_CONFIGS['qwen2-tiny']!;
    saveModel(join(dir, 'tied'), tied, randomModel(tied, 1));
    expect(loadModel(join(dir, 'tied')).weights.lmHead).toBeUndefined();
    expect(loadModel(join(dir, 'tied')).weights.layers[0]!.qBias!.shape).toEqual([64]);
  });

  it('names a missing config, a missing tensor and a misshapen tensor', () => {
    expect(() => loadModel(join(dir, 'absent'))).toThrow(/absent has no config\.json/);
    const weights = randomModel(tiny, 1);
    saveModel(join(dir, 'broken'), tiny, { ...weights, layers: [weights.layers[0]!, { ...weights.layers[1]!, vProj: { data: new Float32Array(16 * 64), shape: [16, 64] } }] });
    expect(() => loadModel(join(dir, 'broken'))).toThrow(/tensor "model\.layers\.1\.self_attn\.v_proj\.weight" has shape \[16, 64\], expected \[32, 64\]/);
    saveModel(join(dir, 'no-head'), { ...tiny, tieWordEmbeddings: true }, { ...weights, lmHead: undefined });
    writeFileSync(join(dir, 'no-head', 'config.json'), JSON.stringify(configToJson(tiny)));
    expect(() => loadModel(join(dir, 'no-head'))).toThrow(/tensor "lm_head\.weight" is missing \(expected shape \[64, 64\]/);
  });
});

describe('tokenizer.json', () => {
  it('a character-level tokenizer loads in the HF library and round-trips text', () => {
    const file = join(dir, 'tokenizer.json');
    writeFileSync(file, JSON.stringify(charTokenizerJson(ARITH_ALPHABET)));
    const tokenizer = loadTokenizer(file);
    const ids = tokenizer.encode('12+x');
    expect(ids).toEqual([...'12+x'].map((c) => 3 + ARITH_ALPHABET.indexOf(c)));
    expect(tokenizer.decode(ids)).toBe('12+x');
    expect(tokenizer.decode(tokenizer.encode('(3 * x) % 7 = ?\n'))).toBe('(3 * x) % 7 = ?\n');
    expect([tokenizer.encodePrompt('12+x'), tokenizer.eosTokenId, tokenizer.vocabSize]).toEqual([[1, ...ids], 2, ARITH_ALPHABET.length + 3]); // <bos> from the post-processor
    expect(tokenizer.decode([1, ...ids, 2])).toBe('12+x');
  });
});

describe('PEFT adapters', () => {
  it('save then load round-trips bit for bit with PEFT key names and config fields', () => {
    const adapter = randomAdapter(tiny, { rank: 4, alpha: 8, targets: ['q_proj', 'down_proj'], seed: 3, init: 'gaussian' });
    const out = join(dir, 'adapter');
    savePeftAdapter(out, adapter);
    expect(loadPeftAdapter(out, tiny)).toEqual(adapter);
    const keys = [...readSafetensors(join(out, 'adapter_model.safetensors')).tensors.keys()];
    expect(keys).toContain('base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight');
    expect(keys).toContain('base_model.model.model.layers.1.mlp.down_proj.lora_B.weight');
    expect(keys).toHaveLength(2 * 2 * 2);
    const config = JSON.parse(readFileSync(join(out, 'adapter_config.json'), 'utf8'));
    expect(config).toMatchObject({ peft_type: 'LORA', task_type: 'CAUSAL_LM', r: 4, lora_alpha: 8, target_modules: ['q_proj', 'down_proj'], bias: 'none', use_dora: false });
    expect(readSafetensors(join(out, 'adapter_model.safetensors')).tensors.get('base_model.model.model.layers.0.mlp.down_proj.lora_A.weight')!.shape).toEqual([4, 128]);
  });

  it('computes the dense delta scale·B·A and the rsLoRA scale', () => {
    const adapter: LoraAdapter = { ...randomAdapter(tiny, { rank: 1, alpha: 3, targets: ['k_proj'], seed: 1, init: 'peft' }) };
    const a = new Float32Array(64).fill(0);
    a[5] = 2;
    const b = new Float32Array(32).fill(0);
    b[7] = -1.5;
    adapter.layers[0]!.k_proj = { a, b };
    const delta = denseDelta(tiny, adapter, 0, 'k_proj');
    expect(delta[7 * 64 + 5]).toBe(3 * -1.5 * 2);
    expect(delta.filter((v) => v !== 0)).toHaveLength(1);
    expect(loraScale({ ...adapter, rank: 4, alpha: 8, useRslora: true })).toBe(4);
    expect(loraScale({ ...adapter, rank: 4, alpha: 8 })).toBe(2);
  });

  it('names what is wrong with a bad adapter', () => {
    const out = join(dir, 'adapter-bad');
    savePeftAdapter(out, randomAdapter(tiny, { rank: 2, targets: ['v_proj'], seed: 1, init: 'peft' }));
    const configFile = join(out, 'adapter_config.json');
    const config = JSON.parse(readFileSync(configFile, 'utf8'));
    const attempt = (patch: object) => {
      writeFileSync(configFile, JSON.stringify({ ...config, ...patch }));
      return () => loadPeftAdapter(out, tiny);
    };
    expect(attempt({ use_dora: true })).toThrow(/field "use_dora": DoRA is not supported/);
    expect(attempt({ target_modules: ['v_proj', 'lm_head'] })).toThrow(/field "target_modules": entry "lm_head" names lm_head, which populora does not adapt/);
    expect(attempt({ target_modules: '.*proj' })).toThrow(/tensor "base_model\.model\.model\.layers\.0\.self_attn\.q_proj\.lora_A\.weight" is missing/); // a regex, read as PEFT does
    expect(attempt({ target_modules: ['q_proj'] })).toThrow(/tensor "base_model\.model\.model\.layers\.0\.self_attn\.q_proj\.lora_A\.weight" is missing/);
    expect(attempt({ r: 3 })).toThrow(/v_proj\.lora_A\.weight" has shape \[2, 64\], expected \[3, 64\]/);
  });
});

describe('.npy', () => {
  it('writes a NumPy 1.0 header that numpy would parse, and reads it back', () => {
    const file = join(dir, 'x.npy');
    const data = Float32Array.from({ length: 6 }, (_, i) => i / 3);
    writeNpy(file, data, [2, 3]);
    const bytes = readFileSync(file);
    expect(bytes.subarray(0, 6).toString('latin1')).toBe('\x93NUMPY');
    expect([bytes[6], bytes[7]]).toEqual([1, 0]);
    const headerLength = bytes.readUInt16LE(8);
    expect((10 + headerLength) % 64).toBe(0);
    const header = bytes.subarray(10, 10 + headerLength).toString('latin1');
    expect(header).toMatch(/^\{'descr': '<f4', 'fortran_order': False, 'shape': \(2, 3\), \} *\n$/);
    expect(new Float32Array(bytes.buffer.slice(bytes.byteOffset + 10 + headerLength, bytes.byteOffset + bytes.length))).toEqual(data);
    expect(readNpy(file)).toEqual({ data, shape: [2, 3] });
  });
});
