// LoRA adapters in PEFT layout: adapter_config.json + adapter_model.safetensors with keys
//   base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight   [r, in]
//   base_model.model.model.layers.N.self_attn.q_proj.lora_B.weight   [out, r]
// (mlp modules under `.mlp.`), scale alpha / r, or alpha / √r with rsLoRA. Loads in PEFT and vLLM as written.

import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { writeJsonAtomically } from './checkpoint.js';
import { join } from 'node:path';
import { normalStream } from './random.js';
import type { LlamaConfig } from './config.js';
import { ModelFormatError } from './errors.js';
import { readSafetensors, writeSafetensors, type StoredDType, type TensorToWrite } from './safetensors.js';

export const LORA_MODULES = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] as const;
export type LoraModule = (typeof LORA_MODULES)[number];

export interface LoraFactors {
  a: Float32Array; // [rank, in]
  b: Float32Array; // [out, rank]
}

export interface LoraAdapter {
  rank: number;
  alpha: number;
  useRslora: boolean;
  targetModules: LoraModule[];
  layers: Array<Partial<Record<LoraModule, LoraFactors>>>; // one entry per model layer
  baseModel: string | null;
}

export function loraModuleShape(c: LlamaConfig, m: LoraModule): { inFeatures: number; outFeatures: number } {
  const { hiddenSize: D, intermediateSize: F, numHeads: H, numKvHeads: Hkv, headDim: hd } = c;
  const shapes: Record<LoraModule, [number, number]> = {
    q_proj: [D, H * hd], k_proj: [D, Hkv * hd], v_proj: [D, Hkv * hd], o_proj: [H * hd, D],
    gate_proj: [D, F], up_proj: [D, F], down_proj: [F, D],
  };
  const [inFeatures, outFeatures] = shapes[m];
  return { inFeatures, outFeatures };
}

/**
 * The largest LoRA rank that adds capacity on these modules of this model: the smallest dimension among them (a
 * rank above a module's smaller dimension adds parameters and no capacity), with the module that sets it.
 */
export function maxLoraRank(c: LlamaConfig, modules: readonly LoraModule[]): { rank: number; module: LoraModule; inFeatures: number; outFeatures: number } {
  const shapes = modules.map((module) => ({ module, ...loraModuleShape(c, module) }));
  const limiting = shapes.reduce((a, b) => (Math.min(b.inFeatures, b.outFeatures) < Math.min(a.inFeatures, a.outFeatures) ? b : a));
  return { ...limiting, rank: Math.min(limiting.inFeatures, limiting.outFeatures) };
}

/** Why a rank above `limit` (maxLoraRank's) is refused, and what to use: the words a scenario and a command share. */
export function rankExceeds(limit: ReturnType<typeof maxLoraRank>, c: LlamaConfig): string {
  return `exceeds ${limit.module}'s ${limit.inFeatures} x ${limit.outFeatures} in this model (hidden size ${c.hiddenSize}): a LoRA rank above the smaller dimension adds parameters and no capacity; use at most ${limit.rank}`;
}

export function loraScale(a: LoraAdapter): number {
  return a.useRslora ? a.alpha / Math.sqrt(a.rank) : a.alpha / a.rank;
}

/** The module's name in transformers (model.layers.N.self_attn.q_proj): what PEFT matches target_modules against. */
export function moduleName(layer: number, module: LoraModule): string {
  const block = ['gate_proj', 'up_proj', 'down_proj'].includes(module) ? 'mlp' : 'self_attn';
  return `model.layers.${layer}.${block}.${module}`;
}

export function peftKey(layer: number, module: LoraModule, factor: 'A' | 'B'): string {
  return `base_model.model.${moduleName(layer, module)}.lora_${factor}.weight`;
}

/** Modules PEFT can put LoRA on in a Llama-family model but populora does not: refused by name, never skipped. */
const UNADAPTED_MODULES = ['model.embed_tokens', 'lm_head'];

interface PeftConfig {
  peft_type?: string;
  r?: number;
  lora_alpha?: number;
  target_modules?: string[] | string;
  exclude_modules?: string[] | string | null;
  use_rslora?: boolean;
  use_dora?: boolean;
  fan_in_fan_out?: boolean;
  bias?: string;
  lora_bias?: boolean;
  modules_to_save?: string[] | null;
  rank_pattern?: Record<string, number>;
  alpha_pattern?: Record<string, number>;
  layers_to_transform?: number[] | number | null;
  layers_pattern?: string[] | string | null;
  base_model_name_or_path?: string | null;
}

/**
 * adapter_config.json fields (PEFT 0.14 to 0.21's LoraConfig) that never change what a loaded LoRA adapter computes:
 * bookkeeping, dropout, and initialisation settings whose result is already in the saved factors.
 */
const HARMLESS_PEFT_FIELDS = new Set([
  'task_type', 'inference_mode', 'revision', 'auto_mapping', 'peft_version', 'base_model_name_or_path', 'lora_dropout',
  'init_lora_weights', 'loftq_config', 'eva_config', 'corda_config', 'lora_ga_config', 'megatron_core', 'qalora_group_size',
  'runtime_config', 'ensure_weight_tying',
]);
/** Fields checked in checkPeftConfig or resolveTargets below. */
const CHECKED_PEFT_FIELDS = new Set([
  'peft_type', 'r', 'lora_alpha', 'target_modules', 'exclude_modules', 'use_rslora', 'use_dora', 'fan_in_fan_out', 'bias',
  'lora_bias', 'modules_to_save', 'rank_pattern', 'alpha_pattern', 'layers_to_transform', 'layers_pattern',
]);
/** PEFT options that change the computation, and why populora cannot honour them; their defaults are null or false. */
const UNSUPPORTED_PEFT_OPTIONS: Record<string, string> = {
  alora_invocation_tokens: 'activated LoRA (aLoRA) applies the adapter only after these invocation tokens, which is not supported; use a plain LoRA adapter',
  trainable_token_indices: 'trained embedding rows are not supported; only LoRA factors are',
  layer_replication: 'replicated base-model layers are not supported',
  use_qalora: 'QA-LoRA (pooled inputs for a quantized base) is not supported',
  target_parameters: 'LoRA on raw parameters (e.g. MoE experts) is not supported; only the linear projections',
  arrow_config: 'Arrow routing between adapters is not supported',
  use_bdlora: 'block-diagonal LoRA is not supported',
  velora_config: 'VeLoRA is not supported',
  monteclora_config: 'MonteCLoRA is not supported',
  megatron_config: 'Megatron parallel linear layers are not supported',
};

/** What PEFT writes when an option is off: null, false, an empty list or an empty object. */
function isDefaultLike(value: unknown): boolean {
  if (value === null || value === false || value === undefined) return true;
  if (Array.isArray(value)) return value.length === 0;
  return typeof value === 'object' && Object.keys(value).length === 0;
}

function readPeftConfig(file: string): PeftConfig {
  if (!existsSync(file)) throw new ModelFormatError(`${file}: missing (a PEFT adapter folder holds adapter_config.json and adapter_model.safetensors)`);
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new ModelFormatError(`${file}: not valid JSON (${(error as Error).message})`);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new ModelFormatError(`${file}: expected a JSON object as PEFT writes it`);
  return json as PeftConfig;
}

/** Everything in adapter_config.json that would change what the adapter computes must be something we compute. */
function checkPeftConfig(file: string, c: PeftConfig): { rank: number; alpha: number } {
  const bad = (field: string, why: string): never => {
    throw new ModelFormatError(`${file}: field "${field}": ${why}`);
  };
  if (c.peft_type !== undefined && c.peft_type !== 'LORA') bad('peft_type', `"${c.peft_type}" is not supported; only LORA`);
  // An allow-list, so that an option a later PEFT adds fails loudly here instead of being computed as plain LoRA.
  for (const [field, value] of Object.entries(c)) {
    if (HARMLESS_PEFT_FIELDS.has(field) || CHECKED_PEFT_FIELDS.has(field) || isDefaultLike(value)) continue;
    const why = UNSUPPORTED_PEFT_OPTIONS[field];
    if (why !== undefined) bad(field, `${JSON.stringify(value)}: ${why}`);
    bad(field, `unknown to populora (it reads PEFT 0.14 to 0.21 LoRA configs) and set to ${JSON.stringify(value)}, so it may change what the adapter computes; if the adapter does not use it, remove the field or set it to null`);
  }
  if (!Number.isInteger(c.r) || c.r! < 1) bad('r', `must be a positive integer, got ${JSON.stringify(c.r)}`);
  if (typeof c.lora_alpha !== 'number') bad('lora_alpha', `must be a number, got ${JSON.stringify(c.lora_alpha)}`);
  if (c.use_dora) bad('use_dora', 'DoRA is not supported; save a plain LoRA adapter');
  if (c.fan_in_fan_out) bad('fan_in_fan_out', 'transposed (Conv1D-style) factors are not supported for Llama-family models');
  if (c.bias !== undefined && c.bias !== 'none') bad('bias', `"${c.bias}" means the adapter trains bias vectors, which are not supported; train with bias="none"`);
  if (c.lora_bias) bad('lora_bias', 'a bias on lora_B is not supported');
  if (Array.isArray(c.modules_to_save) && c.modules_to_save.length > 0) {
    bad('modules_to_save', `${c.modules_to_save.join(', ')} would replace whole base-model modules, which is not supported; only LoRA factors are`);
  }
  if (Object.keys(c.rank_pattern ?? {}).length > 0) bad('rank_pattern', 'per-module ranks are not supported; every module must have rank r');
  if (Object.keys(c.alpha_pattern ?? {}).length > 0) bad('alpha_pattern', 'per-module alphas are not supported');
  return { rank: c.r!, alpha: c.lora_alpha! };
}

/**
 * PEFT's rule for target_modules and exclude_modules (peft.tuners.tuners_utils.check_target_module_exists): a string
 * is a regular expression that must match the whole module name; a list entry matches a name equal to it or ending in
 * "." + entry. Python's and JavaScript's regex syntax agree on what such patterns use.
 */
function pythonFullMatch(file: string, field: string, pattern: string): (name: string) => boolean {
  let re: RegExp;
  try {
    re = new RegExp(`^(?:${pattern})$`);
  } catch (error) {
    throw new ModelFormatError(`${file}: field "${field}": ${JSON.stringify(pattern)} is a regular expression populora cannot read (${(error as Error).message}); list the module names instead, e.g. ["q_proj", "v_proj"]`);
  }
  return (name) => re.test(name);
}
const entryMatches = (entry: string, name: string) => name === entry || name.endsWith(`.${entry}`);

interface AdapterPlan {
  targets: LoraModule[]; // every module some layer adapts, in the order the config names them
  perLayer: LoraModule[][]; // the modules each layer adapts
}

/** Which (layer, module) pairs the config adapts, out of `numLayers` layers: PEFT's matching, on populora's modules. */
function resolveTargets(file: string, c: PeftConfig, numLayers: number, depth: string): AdapterPlan {
  const bad = (field: string, why: string): never => {
    throw new ModelFormatError(`${file}: field "${field}": ${why}`);
  };
  const adaptable = `the attention and MLP projections (${LORA_MODULES.join(', ')}) of each layer, e.g. "q_proj" or "model.layers.0.self_attn.q_proj"`;
  const raw = c.layers_to_transform;
  // PEFT treats an empty list as "every layer".
  const onlyLayers = raw === undefined || raw === null || (Array.isArray(raw) && raw.length === 0) ? null : [raw].flat();
  if (onlyLayers && !onlyLayers.every((l) => Number.isInteger(l) && l >= 0)) bad('layers_to_transform', `must be a layer index or a list of them, got ${JSON.stringify(raw)}`);
  if (onlyLayers?.some((l) => l >= numLayers)) bad('layers_to_transform', `layer ${Math.max(...onlyLayers)} does not exist in ${depth}`);
  // layers_pattern names the module list that holds the layers; in a Llama-family model that is model.layers.
  const patterns = [c.layers_pattern ?? []].flat();
  if (onlyLayers && patterns.length > 0 && !patterns.includes('layers')) {
    bad('layers_pattern', `${JSON.stringify(c.layers_pattern)} names no layer list of a Llama-family model, whose layers are model.layers.N; set it to "layers" or null`);
  }
  const excludeSpec = c.exclude_modules ?? [];
  const excluded =
    typeof excludeSpec === 'string'
      ? pythonFullMatch(file, 'exclude_modules', excludeSpec)
      : Array.isArray(excludeSpec) && excludeSpec.every((e) => typeof e === 'string')
        ? (name: string) => excludeSpec.some((e) => entryMatches(e, name))
        : bad('exclude_modules', `must be a list of module names or a regular expression, got ${JSON.stringify(excludeSpec)}`);

  const modules = Array.from({ length: numLayers }, (_, layer) => LORA_MODULES.map((module) => ({ layer, module, name: moduleName(layer, module) }))).flat();
  const chosen: typeof modules = [];
  // PEFT's "all-linear" means every linear layer but the output head: for these models, exactly LORA_MODULES.
  const spec = c.target_modules === 'all-linear' ? [...LORA_MODULES] : c.target_modules;
  if (typeof spec === 'string') {
    const matches = pythonFullMatch(file, 'target_modules', spec);
    // A regex selects by full name, and PEFT then ignores layers_to_transform.
    const unadapted = UNADAPTED_MODULES.find((name) => matches(name) && !excluded(name));
    if (unadapted !== undefined) bad('target_modules', `${JSON.stringify(spec)} matches ${unadapted}, which populora does not adapt; it adapts only ${adaptable}`);
    chosen.push(...modules.filter((m) => matches(m.name)));
    if (chosen.length === 0) bad('target_modules', `${JSON.stringify(spec)} matches none of ${adaptable}, in ${depth}`);
  } else if (Array.isArray(spec) && spec.every((e) => typeof e === 'string')) {
    for (const entry of spec) {
      const unadapted = UNADAPTED_MODULES.find((name) => entryMatches(entry, name) && !excluded(name));
      if (unadapted !== undefined) bad('target_modules', `entry "${entry}" names ${unadapted}, which populora does not adapt; it adapts only ${adaptable}`);
      const named = modules.filter((m) => entryMatches(entry, m.name));
      if (named.length === 0 && UNADAPTED_MODULES.some((name) => entryMatches(entry, name))) continue; // excluded above
      if (named.length === 0) bad('target_modules', `entry "${entry}" names no module populora can adapt in ${depth}; it adapts ${adaptable}`);
      // layers_to_transform narrows suffix matches only: a full name that equals the entry is taken as written.
      chosen.push(...named.filter((m) => m.name === entry || onlyLayers === null || onlyLayers.includes(m.layer)));
    }
  } else {
    bad('target_modules', `must be a list of module names or a regular expression, got ${JSON.stringify(c.target_modules)}; e.g. ["q_proj", "v_proj"]`);
  }
  const kept = chosen.filter((m) => !excluded(m.name));
  if (kept.length === 0) bad('exclude_modules', `excludes every module target_modules names, so the adapter would change nothing`);
  const perLayer = Array.from({ length: numLayers }, (_, l) => LORA_MODULES.filter((m) => kept.some((k) => k.layer === l && k.module === m)));
  return { targets: [...new Set(kept.map((m) => m.module))], perLayer };
}

/**
 * Loads a PEFT adapter. With the base model's config every factor's shape is checked against it; without one
 * (adapters handled on their own, as by `populora evolve`) the layers and shapes are read from the file.
 */
export function loadPeftAdapter(dir: string, config?: LlamaConfig): LoraAdapter {
  const configFile = join(dir, 'adapter_config.json');
  const peft = readPeftConfig(configFile);
  const { rank, alpha } = checkPeftConfig(configFile, peft);
  const weightsFile = join(dir, 'adapter_model.safetensors');
  const { tensors } = readSafetensors(weightsFile);
  const numLayers = config?.numLayers ?? 1 + Math.max(-1, ...[...tensors.keys()].map((k) => Number(/\.layers\.(\d+)\./.exec(k)?.[1] ?? -1)));
  const factor = (key: string, expected: Array<number | null>, why: string): Float32Array => {
    const t = tensors.get(key);
    const shown = `[${expected.map((d) => d ?? '*').join(', ')}]`;
    if (!t) throw new ModelFormatError(`${weightsFile}: tensor "${key}" is missing (expected shape ${shown} from ${why})`);
    if (t.shape.length !== 2 || expected.some((d, i) => d !== null && t.shape[i] !== d)) {
      throw new ModelFormatError(`${weightsFile}: tensor "${key}" has shape [${t.shape.join(', ')}], expected ${shown} (${why})`);
    }
    const values = t.decode();
    // A NaN or an infinity would spread through every product that reads the adapter (a crossover child, logits).
    const bad = values.findIndex((v) => !Number.isFinite(v));
    if (bad >= 0) {
      const at = `[${Math.floor(bad / t.shape[1]!)}, ${bad % t.shape[1]!}]`;
      throw new ModelFormatError(`${weightsFile}: tensor "${key}" holds ${values[bad]} at ${at}: an adapter's factors must be finite (was it saved after its training diverged? take an earlier checkpoint)`);
    }
    return values;
  };
  const why = config ? `r = ${rank} in adapter_config.json and the base model's dimensions` : `r = ${rank} in adapter_config.json`;
  const depth = config ? `the base model's ${numLayers} layers` : `the ${numLayers} layers the adapter's tensors cover`;
  const { targets, perLayer } = resolveTargets(configFile, peft, numLayers, depth);
  const used = new Set<string>();
  const layers = Array.from({ length: numLayers }, (_, l) => {
    const layer: Partial<Record<LoraModule, LoraFactors>> = {};
    for (const m of perLayer[l]!) {
      const shape = config ? loraModuleShape(config, m) : undefined;
      const [keyA, keyB] = [peftKey(l, m, 'A'), peftKey(l, m, 'B')];
      layer[m] = { a: factor(keyA, [rank, shape?.inFeatures ?? null], why), b: factor(keyB, [shape?.outFeatures ?? null, rank], why) };
      used.add(keyA).add(keyB);
    }
    return layer;
  });
  // A tensor nothing above read means the file and its config disagree (another base model's depth, a module
  // left out of target_modules): loading the rest would silently compute a different adapter.
  const stray = [...tensors.keys()].find((k) => !used.has(k));
  if (stray !== undefined) {
    const layerCount = config ? `the base model's ${numLayers} layers` : `${numLayers} layers`;
    const adapted = perLayer.flatMap((modules, l) => (modules.length > 0 ? [l] : []));
    const where = adapted.length === numLayers ? layerCount : `layers ${adapted.join(', ')}`;
    throw new ModelFormatError(`${weightsFile}: tensor "${stray}" is not part of the adapter adapter_config.json describes (target_modules ${targets.join(', ')}, ${where})`);
  }
  return { rank, alpha, useRslora: peft.use_rslora ?? false, targetModules: [...targets], layers, baseModel: peft.base_model_name_or_path ?? null };
}

export function savePeftAdapter(dir: string, adapter: LoraAdapter, options: { dtype?: StoredDType } = {}): void {
  mkdirSync(dir, { recursive: true });
  const dtype = options.dtype ?? 'F32';
  const tensors: TensorToWrite[] = [];
  adapter.layers.forEach((layer, l) => {
    for (const m of adapter.targetModules) {
      const f = layer[m];
      if (!f) continue;
      if (f.a.length % adapter.rank !== 0 || f.b.length % adapter.rank !== 0) {
        throw new RangeError(`${dir}: layer ${l} ${m}: factors of ${f.a.length} and ${f.b.length} values are not [rank, in] and [out, rank] for rank ${adapter.rank}`);
      }
      const inFeatures = f.a.length / adapter.rank;
      const outFeatures = f.b.length / adapter.rank;
      tensors.push({ name: peftKey(l, m, 'A'), dtype, shape: [adapter.rank, inFeatures], data: f.a });
      tensors.push({ name: peftKey(l, m, 'B'), dtype, shape: [outFeatures, adapter.rank], data: f.b });
    }
  });
  const transformed = adapter.layers.map((layer, l) => (Object.keys(layer).length > 0 ? l : -1)).filter((l) => l >= 0);
  // "These modules, in these layers" when every adapted layer has every target; else each module by its full
  // name, as PEFT (>= 0.14) writes target_modules for "all-linear" and matches it (name equal or ending in it).
  const uniform = transformed.every((l) => adapter.targetModules.every((m) => adapter.layers[l]![m]));
  const targetModules = uniform ? adapter.targetModules : transformed.flatMap((l) => adapter.targetModules.filter((m) => adapter.layers[l]![m]).map((m) => moduleName(l, m)));
  const config = {
    peft_type: 'LORA',
    task_type: 'CAUSAL_LM',
    base_model_name_or_path: adapter.baseModel,
    r: adapter.rank,
    lora_alpha: adapter.alpha,
    lora_dropout: 0,
    target_modules: targetModules,
    bias: 'none',
    fan_in_fan_out: false,
    use_rslora: adapter.useRslora,
    use_dora: false,
    init_lora_weights: true,
    inference_mode: true,
    modules_to_save: null,
    layers_to_transform: !uniform || transformed.length === adapter.layers.length ? null : transformed,
    rank_pattern: {},
    alpha_pattern: {},
    revision: null,
    auto_mapping: null,
  };
  writeSafetensors(join(dir, 'adapter_model.safetensors'), tensors, { format: 'pt' });
  writeJsonAtomically(join(dir, 'adapter_config.json'), config);
}

/** 'peft': A uniform in ±1/√in, B = 0 (the delta starts at zero, as PEFT does); 'gaussian': both random. */
export function randomAdapter(config: LlamaConfig, options: { rank: number; alpha?: number; targets: readonly LoraModule[]; seed: number; init: 'peft' | 'gaussian' }): LoraAdapter {
  const { uniform: rng, normal } = normalStream(`populora-adapter-${options.seed}`);
  const r = options.rank;
  const layers = Array.from({ length: config.numLayers }, () => {
    const layer: Partial<Record<LoraModule, LoraFactors>> = {};
    for (const m of options.targets) {
      const { inFeatures, outFeatures } = loraModuleShape(config, m);
      const a = Float32Array.from({ length: r * inFeatures }, () => (2 * rng() - 1) / Math.sqrt(inFeatures));
      const b = Float32Array.from({ length: outFeatures * r }, () => (options.init === 'gaussian' ? normal() / Math.sqrt(r) : 0));
      layer[m] = { a, b };
    }
    return layer;
  });
  return { rank: r, alpha: options.alpha ?? 2 * r, useRslora: false, targetModules: [...options.targets], layers, baseModel: null };
}

/** scale · B @ A as a dense [out, in] matrix: the reference the multi-LoRA kernels are held against. */
export function denseDelta(config: LlamaConfig, adapter: LoraAdapter, layer: number, module: LoraModule): Float32Array {
  const { inFeatures, outFeatures } = loraModuleShape(config, module);
  const f = adapter.layers[layer]?.[module];
  const out = new Float32Array(outFeatures * inFeatures);
  if (!f) return out;
  const scale = loraScale(adapter);
  const r = adapter.rank;
  for (let o = 0; o < outFeatures; o++)
    for (let i = 0; i < inFeatures; i++) {
      let sum = 0;
      for (let j = 0; j < r; j++) sum += f.b[o * r + j]! * f.a[j * inFeatures + i]!;
      out[o * inFeatures + i] = scale * sum;
    }
  return out;
}
