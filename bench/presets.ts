// Model shapes the benchmarks run: bench-small (lavapipe finishes it in minutes), the named tiny configs and a 7B shape.
import { BenchUsageError } from './args.js';
import { TINY_CONFIGS, type LlamaConfig } from '../src/model/config.js';

export const BENCH_SMALL: LlamaConfig = { ...TINY_CONFIGS['qwen2-tiny']!, vocabSize: 4096, hiddenSize: 256, intermediateSize: 704, numLayers: 4, numHeads: 4, numKvHeads: 2, headDim: 64 };
// Llama-2-7B's shape (the fast-engine issue's "7B-shaped forward"; bench/evolution.ts's 7B adapters).
export const LLAMA_7B_SHAPE: LlamaConfig = { ...TINY_CONFIGS['tiny']!, vocabSize: 32000, hiddenSize: 4096, intermediateSize: 11008, numLayers: 32, numHeads: 32, numKvHeads: 32, headDim: 128, maxPositionEmbeddings: 4096 };
export const PRESETS: Record<string, LlamaConfig> = { 'bench-small': BENCH_SMALL, ...TINY_CONFIGS, 'llama-2-7b-shape': LLAMA_7B_SHAPE };

export function presetConfig(name: string): LlamaConfig {
  const config = PRESETS[name];
  if (!config) throw new BenchUsageError(`--preset: unknown "${name}"; choose one of ${Object.keys(PRESETS).join(', ')}`);
  return config;
}
