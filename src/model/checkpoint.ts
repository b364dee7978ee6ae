// A model's weights in Hugging Face layout: load (with every key and shape checked), create seeded, save.

import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { normalStream } from './random.js';
import { configToJson, parseConfig, type LlamaConfig } from './config.js';
import { ModelFormatError } from './errors.js';
import { tokenizerConfigFor } from './tokenizer.js';
import { readSafetensorsFolder, writeSafetensors, type HostTensor, type StoredDType, type StoredTensor } from './safetensors.js';

export type { HostTensor } from './safetensors.js';

export interface LayerWeights {
  inputNorm: HostTensor; // [D]
  qProj: HostTensor; // [H·hd, D]
  kProj: HostTensor; // [Hkv·hd, D]
  vProj: HostTensor; // [Hkv·hd, D]
  oProj: HostTensor; // [D, H·hd]
  qBias?: HostTensor; // [H·hd]
  kBias?: HostTensor; // [Hkv·hd]
  vBias?: HostTensor; // [Hkv·hd]
  postAttentionNorm: HostTensor; // [D]
  gateProj: HostTensor; // [F, D]
  upProj: HostTensor; // [F, D]
  downProj: HostTensor; // [D, F]
}

export interface ModelWeights {
  embedTokens: HostTensor; // [V, D]
  layers: LayerWeights[];
  norm: HostTensor; // [D]
  lmHead?: HostTensor; // [V, D]; absent when tied to embedTokens
  storedDType: StoredDType; // dtype of the projection matrices in the file
}

type LayerKey = keyof LayerWeights;
const LAYER_TENSORS: Array<[LayerKey, string]> = [
  ['inputNorm', 'input_layernorm.weight'],
  ['qProj', 'self_attn.q_proj.weight'],
  ['kProj', 'self_attn.k_proj.weight'],
  ['vProj', 'self_attn.v_proj.weight'],
  ['oProj', 'self_attn.o_proj.weight'],
  ['qBias', 'self_attn.q_proj.bias'],
  ['kBias', 'self_attn.k_proj.bias'],
  ['vBias', 'self_attn.v_proj.bias'],
  ['postAttentionNorm', 'post_attention_layernorm.weight'],
  ['gateProj', 'mlp.gate_proj.weight'],
  ['upProj', 'mlp.up_proj.weight'],
  ['downProj', 'mlp.down_proj.weight'],
];

function layerShape(c: LlamaConfig, key: LayerKey): number[] {
  const { hiddenSize: D, intermediateSize: F, numHeads: H, numKvHeads: Hkv, headDim: hd } = c;
  const shapes: Record<LayerKey, number[]> = {
    inputNorm: [D], postAttentionNorm: [D],
    qProj: [H * hd, D], kProj: [Hkv * hd, D], vProj: [Hkv * hd, D], oProj: [D, H * hd],
    qBias: [H * hd], kBias: [Hkv * hd], vBias: [Hkv * hd],
    gateProj: [F, D], upProj: [F, D], downProj: [D, F],
  };
  return shapes[key];
}

const isBias = (key: LayerKey) => key.endsWith('Bias');

/** Every tensor name the model needs, with its shape. */
export function expectedShapes(c: LlamaConfig): Map<string, number[]> {
  const shapes = new Map<string, number[]>([['model.embed_tokens.weight', [c.vocabSize, c.hiddenSize]]]);
  for (let l = 0; l < c.numLayers; l++) {
    for (const [key, suffix] of LAYER_TENSORS) if (!isBias(key) || c.attentionBias) shapes.set(`model.layers.${l}.${suffix}`, layerShape(c, key));
  }
  shapes.set('model.norm.weight', [c.hiddenSize]);
  if (!c.tieWordEmbeddings) shapes.set('lm_head.weight', [c.vocabSize, c.hiddenSize]);
  return shapes;
}

/** Reads and validates a model folder's config.json. */
export function loadConfig(dir: string): LlamaConfig {
  const configFile = join(dir, 'config.json');
  if (!existsSync(configFile)) throw new ModelFormatError(`model folder ${dir} has no config.json (expected Hugging Face layout: config.json, model.safetensors, tokenizer.json)`);
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(configFile, 'utf8'));
  } catch (error) {
    throw new ModelFormatError(`${configFile}: not valid JSON (${(error as Error).message})`);
  }
  return parseConfig(json, configFile);
}

export function loadModel(dir: string): { config: LlamaConfig; weights: ModelWeights; tokenizerFile: string | null } {
  const config = loadConfig(dir);
  const stored = readSafetensorsFolder(dir);
  const single = join(dir, 'model.safetensors');
  const source = existsSync(single) ? single : join(dir, 'model.safetensors.index.json');
  const namingHint = [...stored.keys()].some((k) => k.startsWith('model.layers.'))
    ? ''
    : `; its tensor names do not follow Hugging Face Llama naming (model.layers.N....), e.g. ${[...stored.keys()].slice(0, 3).map((k) => `"${k}"`).join(', ') || 'none at all'}`;
  const take = (name: string, shape: number[]): HostTensor => {
    const t = stored.get(name);
    if (!t) throw new ModelFormatError(`${source}: tensor "${name}" is missing (expected shape [${shape.join(', ')}] from config.json)${namingHint}`);
    if (t.shape.join() !== shape.join()) {
      throw new ModelFormatError(`${t.file}: tensor "${name}" has shape [${t.shape.join(', ')}], expected [${shape.join(', ')}] from config.json`);
    }
    return { data: t.decode(), shape };
  };
  rejectUnsupportedBiases(stored);
  const weights = { ...assembleWeights(config, take), storedDType: stored.get('model.layers.0.self_attn.q_proj.weight')!.dtype }; // after take() found every tensor
  const tokenizerFile = join(dir, 'tokenizer.json');
  return { config, weights, tokenizerFile: existsSync(tokenizerFile) ? tokenizerFile : null };
}

/** Weights by Hugging Face tensor name (e.g. read back from a trainer) as the model's structure. */
export function weightsFromNamed(config: LlamaConfig, named: ReadonlyMap<string, Float32Array>): ModelWeights {
  const take = (name: string, shape: number[]): HostTensor => {
    const data = named.get(name);
    if (!data || data.length !== shape.reduce((a, b) => a * b, 1)) throw new ModelFormatError(`tensor "${name}" is missing or not of shape [${shape.join(', ')}]`);
    return { data, shape };
  };
  return { ...assembleWeights(config, take), storedDType: 'F32' };
}

function assembleWeights(config: LlamaConfig, take: (name: string, shape: number[]) => HostTensor): Omit<ModelWeights, 'storedDType'> {
  const shapes = expectedShapes(config);
  const layers = Array.from({ length: config.numLayers }, (_, l) => {
    const layer: Partial<LayerWeights> = {};
    for (const [key, suffix] of LAYER_TENSORS) {
      const name = `model.layers.${l}.${suffix}`;
      if (shapes.has(name)) layer[key] = take(name, shapes.get(name)!);
    }
    return layer as LayerWeights;
  });
  return {
    embedTokens: take('model.embed_tokens.weight', shapes.get('model.embed_tokens.weight')!),
    layers,
    norm: take('model.norm.weight', [config.hiddenSize]),
    // A tied model that ships lm_head.weight anyway: transformers ties it to the embedding and ignores it; so do we.
    ...(!config.tieWordEmbeddings && { lmHead: take('lm_head.weight', [config.vocabSize, config.hiddenSize]) }),
  };
}

/**
 * Llama with attention_bias also has an o_proj bias, and mlp_bias puts biases on the MLP: the model here has
 * neither. transformers initialises such biases to zero, so all-zero ones are harmless; others would be silently
 * wrong, so they are refused by name.
 */
function rejectUnsupportedBiases(stored: Map<string, StoredTensor>): void {
  for (const [name, t] of stored) {
    if (!/^model\.layers\.\d+\.(self_attn\.o_proj|mlp\.(gate|up|down)_proj)\.bias$/.test(name)) continue;
    if (t.decode().some((v) => v !== 0)) {
      throw new ModelFormatError(`${t.file}: tensor "${name}" is a non-zero bias, which this Llama implementation does not have (only q/k/v projections may carry biases)`);
    }
  }
}

/**
 * Seeded random weights. Matrices ~ Normal(0, 1/√in) so activations keep their scale through a tiny model and
 * the logits are far from uniform; norms are 1 + Normal(0, 0.1) so a test notices a norm weight left out.
 * `tile`: draw at most this many values a tensor and repeat them (benchmarks of 7B shapes, whose speed does not
 * depend on the values: drawing each of their 7 billion takes minutes).
 */
export function randomModel(c: LlamaConfig, seed: number, tile = Infinity): ModelWeights {
  const { normal } = normalStream(`populora-model-${seed}`);
  const make = (shape: number[], std: number, mean = 0): HostTensor => {
    const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
    const drawn = Math.min(data.length, Math.max(1, tile));
    for (let i = 0; i < drawn; i++) data[i] = mean + std * normal();
    for (let i = drawn; i < data.length; i += drawn) data.copyWithin(i, 0, Math.min(drawn, data.length - i));
    return { data, shape };
  };
  const tensor = (shape: number[], key: LayerKey | 'norm' | 'matrix') =>
    key === 'inputNorm' || key === 'postAttentionNorm' || key === 'norm' ? make(shape, 0.1, 1) : shape.length === 1 ? make(shape, 0.1) : make(shape, 1 / Math.sqrt(shape[1]!));
  const layers = Array.from({ length: c.numLayers }, () => {
    const layer: Partial<LayerWeights> = {};
    for (const [key] of LAYER_TENSORS) if (!isBias(key) || c.attentionBias) layer[key] = tensor(layerShape(c, key), key);
    return layer as LayerWeights;
  });
  return {
    embedTokens: make([c.vocabSize, c.hiddenSize], 1 / Math.sqrt(c.hiddenSize)),
    layers,
    norm: tensor([c.hiddenSize], 'norm'),
    ...(!c.tieWordEmbeddings && { lmHead: tensor([c.vocabSize, c.hiddenSize], 'matrix') }),
    storedDType: 'F32',
  };
}

/** Writes config.json, model.safetensors (HF names) and, when given, tokenizer.json with its tokenizer_config.json. */
export function saveModel(dir: string, config: LlamaConfig, weights: ModelWeights, options: { dtype?: StoredDType; tokenizerJson?: object } = {}): void {
  const dtype = options.dtype ?? 'F32';
  mkdirSync(dir, { recursive: true });
  const tensors = [{ name: 'model.embed_tokens.weight', t: weights.embedTokens }];
  weights.layers.forEach((layer, l) => {
    for (const [key, suffix] of LAYER_TENSORS) if (layer[key]) tensors.push({ name: `model.layers.${l}.${suffix}`, t: layer[key] });
  });
  tensors.push({ name: 'model.norm.weight', t: weights.norm });
  if (weights.lmHead) tensors.push({ name: 'lm_head.weight', t: weights.lmHead });
  writeSafetensors(join(dir, 'model.safetensors'), tensors.map(({ name, t }) => ({ name, dtype, shape: t.shape, data: t.data })), { format: 'pt' });
  const torchDtype = { F32: 'float32', F16: 'float16', BF16: 'bfloat16' } as const;
  writeJsonAtomically(join(dir, 'config.json'), { ...configToJson(config), torch_dtype: torchDtype[dtype] });
  if (options.tokenizerJson) {
    writeJsonAtomically(join(dir, 'tokenizer.json'), options.tokenizerJson);
    writeJsonAtomically(join(dir, 'tokenizer_config.json'), tokenizerConfigFor(options.tokenizerJson));
  }
}

/** Through a temporary file and a rename, like the weights: a crash leaves the old file or the new one. */
export function writeJsonAtomically(file: string, value: unknown): void {
  writeFileSync(`${file}.partial`, `${JSON.stringify(value, null, 2)}\n`);
  renameSync(`${file}.partial`, file);
}
