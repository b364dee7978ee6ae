// A vocabulary larger than the device's storage binding (151,936 x 896 on lavapipe's 128 MiB): a named error
// before anything is uploaded, saying which tensor, its bytes, the limit and what to do; and on lavapipe itself,
// the advice followed (f16 weights) gives the CPU's logits.
import { describe, expect, it } from 'vitest';
import { CpuBackend } from '../src/backend/cpu.js';
import { randomModel } from '../src/model/checkpoint.js';
import { TINY_CONFIGS, type LlamaConfig } from '../src/model/config.js';
import { checkWeightsFit, DeviceLimitError } from '../src/model/device-fit.js';
import { LlamaModel } from '../src/model/llama.js';
import { maxAbsDiff } from './reference-llama.js';
import { gpu } from './webgpu.js';

const LAVAPIPE_BINDING = 128 * 2 ** 20; // Mesa lavapipe's maxStorageBufferBindingSize
const qwen05 = TINY_CONFIGS['qwen2.5-0.5b-shape']!; // 151,936 x 896, tied embeddings, 24 layers

describe('checkWeightsFit', () => {
  it('names Qwen2.5-0.5B\'s embedding on lavapipe: 519 MiB as f32, 260 MiB as f16, so the CPU backend', () => {
    // 151936 * 896 * 4 bytes as f32; f16 stores two halves a 4-byte word: 151936 * 448 * 4.
    expect(() => checkWeightsFit(qwen05, 'f32', LAVAPIPE_BINDING, 16)).toThrow(DeviceLimitError);
    expect(() => checkWeightsFit(qwen05, 'f32', LAVAPIPE_BINDING, 16)).toThrow(
      "model.embed_tokens.weight [151936, 896] needs 544538624 bytes (519 MiB) as f32, over this device's maxStorageBufferBindingSize of 134217728 bytes (128 MiB); run on the CPU backend (--backend cpu, or backend: cpu in the scenario); even f16 weights would not fit",
    );
    expect(() => checkWeightsFit(qwen05, 'f16', LAVAPIPE_BINDING, 16)).toThrow(/^model\.embed_tokens\.weight \[151936, 896\] needs 272269312 bytes \(260 MiB\) as f16, .*; run on the CPU backend/);
  });

  it('advises f16 where every matrix then fits, and passes where all fit', () => {
    const limit = 300 * 2 ** 20; // between the f16 (260 MiB) and f32 (519 MiB) embedding
    expect(() => checkWeightsFit(qwen05, 'f32', limit, 16)).toThrow(/as f32, .*; store the weights as f16 \(--weights f16, or weights: f16 in the scenario's model\), which fits$/);
    expect(() => checkWeightsFit(qwen05, 'f16', limit, 16)).not.toThrow();
    expect(() => checkWeightsFit(qwen05, 'f32', 2 ** 30, 16)).not.toThrow();
  });

  it('names a packed layer matrix when that is the largest', () => {
    const wide: LlamaConfig = { ...qwen05, vocabSize: 1024, intermediateSize: 100_000, tieWordEmbeddings: false };
    // gate|up packed: 2 * 100000 rows of 896 f32 = 716,800,000 bytes.
    expect(() => checkWeightsFit(wide, 'f32', 2 ** 29, 16)).toThrow(/^model\.layers\.\{0\.\.23\}\.mlp\.\{gate,up\}_proj\.weight \(packed\) \[200000, 896\] needs 716800000 bytes/);
  });
});

// A vocabulary of Qwen's size whose embedding is just over this device's binding limit as f32 (224 columns on
// lavapipe), but not as f16. Skipped where the limit is large (a real GPU): the model would be gigabytes.
const limit = gpu?.maxBindingBytes ?? Infinity;
const columns = Math.ceil((limit + 1) / (151936 * 4) / 16) * 16;
describe.skipIf(!gpu || limit > 256 * 2 ** 20)('LlamaModel.upload on this WebGPU device', () => {
  it('refuses the f32 upload by name and, as advised, runs with f16 weights', async () => {
    const config: LlamaConfig = { ...TINY_CONFIGS['qwen2-tiny']!, vocabSize: 151936, hiddenSize: columns, intermediateSize: 64, numLayers: 1, numHeads: 2, numKvHeads: 1, headDim: 16 };
    const weights = randomModel(config, 1);
    expect(() => LlamaModel.upload(gpu!, config, weights, { storage: 'f32' })).toThrow(DeviceLimitError);
    expect(() => LlamaModel.upload(gpu!, config, weights, { storage: 'f32' })).toThrow(new RegExp(`^model\\.embed_tokens\\.weight \\[151936, ${columns}\\] needs ${151936 * columns * 4} bytes .* of ${limit} bytes .*--weights f16`));
    const tokens = [1, 2, 3];
    const device = await LlamaModel.upload(gpu!, config, weights, { storage: 'f16' }).logits(tokens);
    const reference = await LlamaModel.upload(new CpuBackend(), config, weights, { storage: 'f16' }).logits(tokens);
    expect(maxAbsDiff(device, reference)).toBeLessThan(1e-3);
  });
});
