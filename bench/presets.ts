// Model shapes the benchmarks run: bench-small (lavapipe finishes it in minutes) and the named tiny configs.
import { TINY_CONFIGS, type LlamaConfig } from '../src/model/config.js';

export const BENCH_SMALL: LlamaConfig = { ...TINY_CONFIGS['qwen2-tiny']!, vocabSize: 4096, hiddenSize: 256, intermediateSize: 704, numLayers: 4, numHeads: 4, numKvHeads: 2, headDim: 64 };
export const PRESETS: Record<string, LlamaConfig> = { 'bench-small': BENCH_SMALL, ...TINY_CONFIGS };

export function presetConfig(name: string): LlamaConfig {
  const config = PRESETS[name];
  if (!config) throw new Error(`--preset: unknown "${name}"; choose one of ${Object.keys(PRESETS).join(', ')}`);
  return config;
}
