// PEFT adapters: the exact file layout PEFT and vLLM read, round trips, hand-computed deltas, and named errors.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { roundToF16 } from '../src/backend/half.js';
import { TINY_CONFIGS } from '../src/model/config.js';
import { denseDelta, LORA_MODULES, loadPeftAdapter, loraModuleShape, loraScale, peftKey, randomAdapter, savePeftAdapter, type LoraAdapter } from '../src/model/peft.js';
import { readSafetensors, writeSafetensors } from '../src/model/safetensors.js';

const dir = mkdtempSync(join(tmpdir(), 'populora-peft-'));
const tiny = TINY_CONFIGS['tiny']!; // D 64, F 128, 4 heads and 2 kv heads of 16, 2 layers
const qwen = TINY_CONFIGS['qwen2.5-0.5b-shape']!;

const readJson = (file: string) => JSON.parse(readFileSync(file, 'utf8'));

describe('module shapes and scale', () => {
  it('loraModuleShape gives each projection its in and out features', () => {
    expect(Object.fromEntries(LORA_MODULES.map((m) => [m, loraModuleShape(tiny, m)]))).toEqual({
      q_proj: { inFeatures: 64, outFeatures: 64 },
      k_proj: { inFeatures: 64, outFeatures: 32 },
      v_proj: { inFeatures: 64, outFeatures: 32 },
      o_proj: { inFeatures: 64, outFeatures: 64 },
      gate_proj: { inFeatures: 64, outFeatures: 128 },
      up_proj: { inFeatures: 64, outFeatures: 128 },
      down_proj: { inFeatures: 128, outFeatures: 64 },
    });
    expect(loraModuleShape(qwen, 'k_proj')).toEqual({ inFeatures: 896, outFeatures: 128 });
    expect(loraModuleShape(qwen, 'down_proj')).toEqual({ inFeatures: 4864, outFeatures: 896 });
  });

  it('loraScale is alpha / r, or alpha / sqrt(r) with rsLoRA', () => {
    const adapter = randomAdapter(tiny, { rank: 4, alpha: 8, targets: ['q_proj'], seed: 1, init: 'peft' });
    expect(loraScale(adapter)).toBe(2);
    expect(loraScale({ ...adapter, useRslora: true })).toBe(4);
    expect(loraScale({ ...adapter, rank: 16, alpha: 8, useRslora: true })).toBe(2);
  });

  it('names tensors as PEFT does: self_attn or mlp, lora_A / lora_B, no adapter name', () => {
    expect(peftKey(3, 'q_proj', 'A')).toBe('base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight');
    expect(peftKey(0, 'o_proj', 'B')).toBe('base_model.model.model.layers.0.self_attn.o_proj.lora_B.weight');
    expect(peftKey(11, 'gate_proj', 'B')).toBe('base_model.model.model.layers.11.mlp.gate_proj.lora_B.weight');
    expect(peftKey(1, 'down_proj', 'A')).toBe('base_model.model.model.layers.1.mlp.down_proj.lora_A.weight');
  });
});

describe('randomAdapter', () => {
  it("'peft' init: A uniform in ±1/sqrt(in), B zero, so the delta starts at zero", () => {
    const adapter = randomAdapter(tiny, { rank: 4, targets: ['q_proj', 'down_proj'], seed: 7, init: 'peft' });
    expect(adapter).toMatchObject({ rank: 4, alpha: 8, useRslora: false, targetModules: ['q_proj', 'down_proj'], baseModel: null });
    expect(adapter.layers).toHaveLength(2);
    const down = adapter.layers[1]!.down_proj!;
    expect(down.a).toHaveLength(4 * 128);
    expect(down.b).toHaveLength(64 * 4);
    expect(Math.max(...down.a.map(Math.abs))).toBeLessThanOrEqual(1 / Math.sqrt(128));
    expect(Math.max(...down.a.map(Math.abs))).toBeGreaterThan(0.8 / Math.sqrt(128));
    expect(down.b.every((v) => v === 0)).toBe(true);
    expect(denseDelta(tiny, adapter, 1, 'down_proj').every((v) => v === 0)).toBe(true);
    expect(adapter.layers[0]!.k_proj).toBeUndefined();
  });

  it("'gaussian' init has a non-zero delta; seeds decide the values", () => {
    const options = { rank: 2, targets: ['v_proj'] as const, seed: 3, init: 'gaussian' as const };
    const adapter = randomAdapter(tiny, options);
    expect(adapter.layers[0]!.v_proj!.b.some((v) => v !== 0)).toBe(true);
    expect(denseDelta(tiny, adapter, 0, 'v_proj').some((v) => v !== 0)).toBe(true);
    expect(randomAdapter(tiny, options)).toEqual(adapter);
    expect(randomAdapter(tiny, { ...options, seed: 4 }).layers[0]!.v_proj!.a).not.toEqual(adapter.layers[0]!.v_proj!.a);
    expect(adapter.layers[0]!.v_proj!.a).not.toEqual(adapter.layers[1]!.v_proj!.a); // layers draw different values
  });
});

describe('denseDelta', () => {
  it('is scale · B @ A: a hand-made rank-1 adapter gives the outer product', () => {
    const adapter: LoraAdapter = { rank: 1, alpha: 3, useRslora: false, targetModules: ['k_proj'], layers: [{}, {}], baseModel: null };
    const a = new Float32Array(64); // [1, 64]
    a[5] = 2;
    a[9] = -1;
    const b = new Float32Array(32); // [32, 1]
    b[7] = -1.5;
    b[0] = 0.5;
    adapter.layers[1]!.k_proj = { a, b };
    const delta = denseDelta(tiny, adapter, 1, 'k_proj'); // [32, 64]
    expect(delta).toHaveLength(32 * 64);
    expect([delta[7 * 64 + 5], delta[7 * 64 + 9], delta[0 * 64 + 5], delta[0 * 64 + 9]]).toEqual([3 * -1.5 * 2, 3 * -1.5 * -1, 3 * 0.5 * 2, 3 * 0.5 * -1]);
    expect(delta.filter((v) => v !== 0)).toHaveLength(4);
    expect(denseDelta(tiny, adapter, 0, 'k_proj').every((v) => v === 0)).toBe(true); // layer without the module
  });

  it('sums over the rank: rank 2 by hand', () => {
    const adapter: LoraAdapter = { rank: 2, alpha: 2, useRslora: false, targetModules: ['q_proj'], layers: [{}], baseModel: null };
    const a = new Float32Array(2 * 64); // rows: A[0] = e_1 · 3, A[1] = e_1 · 5
    a[0 * 64 + 1] = 3;
    a[1 * 64 + 1] = 5;
    const b = new Float32Array(64 * 2); // B[4] = [1, 10]
    b[4 * 2 + 0] = 1;
    b[4 * 2 + 1] = 10;
    adapter.layers[0]!.q_proj = { a, b };
    expect(denseDelta(tiny, adapter, 0, 'q_proj')[4 * 64 + 1]).toBe(1 * (1 * 3 + 10 * 5));
  });
});

describe('save and load', () => {
  it('round-trips bit for bit in F32 with PEFT key names, shapes and metadata', () => {
    const adapter = { ...randomAdapter(tiny, { rank: 4, alpha: 16, targets: ['q_proj', 'v_proj', 'down_proj'], seed: 3, init: 'gaussian' }), useRslora: true, baseModel: 'Qwen/Qwen2.5-0.5B' };
    const out = join(dir, 'adapter');
    savePeftAdapter(out, adapter);
    expect(loadPeftAdapter(out, tiny)).toEqual(adapter);
    expect(loadPeftAdapter(out)).toEqual(adapter); // without the base config: layers and shapes from the file
    const { tensors, metadata } = readSafetensors(join(out, 'adapter_model.safetensors'));
    expect(metadata).toEqual({ format: 'pt' });
    const expected = [0, 1].flatMap((l) => [
      [`base_model.model.model.layers.${l}.self_attn.q_proj.lora_A.weight`, [4, 64]],
      [`base_model.model.model.layers.${l}.self_attn.q_proj.lora_B.weight`, [64, 4]],
      [`base_model.model.model.layers.${l}.self_attn.v_proj.lora_A.weight`, [4, 64]],
      [`base_model.model.model.layers.${l}.self_attn.v_proj.lora_B.weight`, [32, 4]],
      [`base_model.model.model.layers.${l}.mlp.down_proj.lora_A.weight`, [4, 128]],
      [`base_model.model.model.layers.${l}.mlp.down_proj.lora_B.weight`, [64, 4]],
    ]);
    expect([...tensors].map(([name, t]) => [name, t.shape]).sort()).toEqual(expected.sort());
    expect([...tensors.values()].every((t) => t.dtype === 'F32')).toBe(true);
  });

  it("writes adapter_config.json with PEFT's fields", () => {
    const out = join(dir, 'adapter-config');
    savePeftAdapter(out, randomAdapter(tiny, { rank: 8, alpha: 16, targets: ['q_proj', 'up_proj'], seed: 1, init: 'peft' }));
    expect(readJson(join(out, 'adapter_config.json'))).toEqual({
      peft_type: 'LORA', task_type: 'CAUSAL_LM', base_model_name_or_path: null, r: 8, lora_alpha: 16, lora_dropout: 0,
      target_modules: ['q_proj', 'up_proj'], bias: 'none', fan_in_fan_out: false, use_rslora: false, use_dora: false,
      init_lora_weights: true, inference_mode: true, modules_to_save: null, layers_to_transform: null,
      rank_pattern: {}, alpha_pattern: {}, revision: null, auto_mapping: null,
    });
  });

  it('stores F16 to its rounding, and writes layers_to_transform for an adapter on some layers only', () => {
    const adapter = randomAdapter(tiny, { rank: 2, targets: ['o_proj', 'gate_proj'], seed: 9, init: 'gaussian' });
    adapter.layers[0] = {};
    const out = join(dir, 'adapter-layer1');
    savePeftAdapter(out, adapter, { dtype: 'F16' });
    expect(readJson(join(out, 'adapter_config.json')).layers_to_transform).toEqual([1]);
    expect([...readSafetensors(join(out, 'adapter_model.safetensors')).tensors.keys()].every((k) => k.includes('.layers.1.'))).toBe(true);
    const loaded = loadPeftAdapter(out, tiny);
    expect(loaded.layers[0]).toEqual({});
    expect(loaded.layers[1]!.gate_proj!.b).toEqual(roundToF16(adapter.layers[1]!.gate_proj!.b));
    expect(loaded.layers[1]!.o_proj!.a).toEqual(roundToF16(adapter.layers[1]!.o_proj!.a));
  });

  it('saves modules that differ between layers by their full names, as PEFT matches them, and loads them back', () => {
    const adapter = randomAdapter(tiny, { rank: 2, targets: ['q_proj', 'v_proj', 'up_proj'], seed: 1, init: 'gaussian' });
    delete adapter.layers[1]!.v_proj; // layer 0: q, v, up; layer 1: q, up
    delete adapter.layers[0]!.up_proj; // layer 0: q, v
    const out = join(dir, 'per-layer');
    savePeftAdapter(out, adapter);
    const config = readJson(join(out, 'adapter_config.json'));
    // PEFT's rule: a module is adapted when its name equals an entry or ends in "." + entry.
    expect(config.target_modules).toEqual(['model.layers.0.self_attn.q_proj', 'model.layers.0.self_attn.v_proj', 'model.layers.1.self_attn.q_proj', 'model.layers.1.mlp.up_proj']);
    expect(config.layers_to_transform).toBeNull();
    const loaded = loadPeftAdapter(out, tiny);
    expect(loaded.layers).toEqual(adapter.layers);
    expect(loaded.layers[1]!.v_proj).toBeUndefined();
  });

  it('resolves target_modules "all-linear" as PEFT does for Llama-family models', () => {
    const out = join(dir, 'all-linear');
    savePeftAdapter(out, randomAdapter(tiny, { rank: 1, targets: LORA_MODULES, seed: 2, init: 'peft' }));
    const configFile = join(out, 'adapter_config.json');
    writeFileSync(configFile, JSON.stringify({ ...readJson(configFile), target_modules: 'all-linear' }));
    expect(loadPeftAdapter(out, tiny).targetModules).toEqual([...LORA_MODULES]);
  });
});

describe('bad adapters give named errors', () => {
  const out = join(dir, 'adapter-bad');
  savePeftAdapter(out, randomAdapter(tiny, { rank: 2, targets: ['v_proj', 'up_proj'], seed: 1, init: 'peft' }));
  const configFile = join(out, 'adapter_config.json');
  const config = readJson(configFile);
  const attempt = (patch: object) => {
    writeFileSync(configFile, JSON.stringify({ ...config, ...patch }));
    return () => loadPeftAdapter(out, tiny);
  };

  it('in adapter_config.json', () => {
    expect(attempt({ use_dora: true })).toThrow(`${configFile}: field "use_dora": DoRA is not supported`);
    expect(attempt({ target_modules: ['v_proj', 'lm_head'] })).toThrow(`${configFile}: field "target_modules": entry "lm_head" names lm_head, which populora does not adapt; it adapts only the attention and MLP projections (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj)`);
    expect(attempt({ target_modules: ['v_proj', 'embed_tokens'] })).toThrow(/field "target_modules": entry "embed_tokens" names model\.embed_tokens, which populora does not adapt/);
    expect(attempt({ target_modules: { v_proj: true } })).toThrow(/field "target_modules": must be a list of module names or a regular expression/);
    expect(attempt({ rank_pattern: { 'model.layers.0.self_attn.v_proj': 4 } })).toThrow(/field "rank_pattern": per-module ranks are not supported/);
    expect(attempt({ alpha_pattern: { v_proj: 4 } })).toThrow(/field "alpha_pattern": per-module alphas are not supported/);
    expect(attempt({ fan_in_fan_out: true })).toThrow(/field "fan_in_fan_out"/);
    expect(attempt({ bias: 'lora_only' })).toThrow(/field "bias": "lora_only" means the adapter trains bias vectors/);
    expect(attempt({ modules_to_save: ['lm_head'] })).toThrow(/field "modules_to_save": lm_head would replace whole base-model modules/);
    expect(attempt({ peft_type: 'IA3' })).toThrow(/field "peft_type": "IA3" is not supported; only LORA/);
    expect(attempt({ r: 0 })).toThrow(/field "r": must be a positive integer, got 0/);
    expect(attempt({ lora_alpha: '16' })).toThrow(/field "lora_alpha": must be a number/);
    expect(attempt({ layers_to_transform: [5] })).toThrow(/field "layers_to_transform": layer 5 does not exist in the base model's 2 layers/);
    writeFileSync(configFile, '{"r": 2,');
    expect(() => loadPeftAdapter(out, tiny)).toThrow(`${configFile}: not valid JSON`);
    expect(() => loadPeftAdapter(join(dir, 'nowhere'), tiny)).toThrow(/nowhere\/adapter_config\.json: missing/);
  });

  it('in adapter_model.safetensors: missing, misshapen and stray tensors', () => {
    const weightsFile = join(out, 'adapter_model.safetensors');
    expect(attempt({ target_modules: ['q_proj'] })).toThrow(`${weightsFile}: tensor "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight" is missing (expected shape [2, 64]`);
    expect(attempt({ r: 3 })).toThrow(`${weightsFile}: tensor "base_model.model.model.layers.0.self_attn.v_proj.lora_A.weight" has shape [2, 64], expected [3, 64]`);
    expect(attempt({ target_modules: ['v_proj'] })).toThrow(`${weightsFile}: tensor "base_model.model.model.layers.0.mlp.up_proj.lora_A.weight" is not part of the adapter adapter_config.json describes (target_modules v_proj, the base model's 2 layers)`);
    attempt({})(); // the untouched config loads
    // An adapter made for a base model with other dimensions (e.g. a larger hidden size) names the mismatch.
    expect(() => loadPeftAdapter(out, { ...tiny, hiddenSize: 128, headDim: 32 })).toThrow(/v_proj\.lora_A\.weight" has shape \[2, 64\], expected \[2, 128\]/);
    // One with more layers than the base model.
    expect(() => loadPeftAdapter(out, { ...tiny, numLayers: 1 })).toThrow(/tensor "base_model\.model\.model\.layers\.1\..*" is not part of the adapter .*the base model's 1 layers/);
    // Keys under another naming scheme (here: an adapter name left in) are missing by the PEFT name.
    const renamed = join(dir, 'adapter-renamed');
    savePeftAdapter(renamed, randomAdapter(tiny, { rank: 2, targets: ['v_proj'], seed: 1, init: 'peft' }));
    const { tensors } = readSafetensors(join(renamed, 'adapter_model.safetensors'));
    writeSafetensors(join(renamed, 'adapter_model.safetensors'), [...tensors].map(([name, t]) => ({ name: name.replace('.weight', '.default.weight'), dtype: t.dtype, shape: t.shape, data: t.decode() })));
    expect(() => loadPeftAdapter(renamed, tiny)).toThrow(/tensor "base_model\.model\.model\.layers\.0\.self_attn\.v_proj\.lora_A\.weight" is missing/);
  });

  it('in adapter_model.safetensors: a NaN or an infinity, named with its tensor and place', () => {
    for (const [bad, shown] of [[Number.NaN, 'NaN'], [-Infinity, '-Infinity']] as const) {
      const broken = join(dir, `adapter-${shown}`);
      const adapter = randomAdapter(tiny, { rank: 2, targets: ['v_proj'], seed: 1, init: 'gaussian' });
      adapter.layers[1]!.v_proj!.b[2 * 5 + 1] = bad; // B [out, r]: row 5, column 1
      savePeftAdapter(broken, adapter);
      expect(() => loadPeftAdapter(broken, tiny)).toThrow(`${join(broken, 'adapter_model.safetensors')}: tensor "base_model.model.model.layers.1.self_attn.v_proj.lora_B.weight" holds ${shown} at [5, 1]: an adapter's factors must be finite`);
    }
  });
});
