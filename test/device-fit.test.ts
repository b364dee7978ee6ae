// Weight matrices against the device's storage binding limit (lavapipe: 128 MiB): a vocabulary matrix over it
// (151,936 x 896) is stored in row blocks and gives the CPU's logits; any other matrix over it gets a named error
// before anything is uploaded, saying which tensor, its bytes, the limit and what to do.
import { describe, expect, it } from 'vitest';
import { CpuBackend } from '../src/backend/cpu.js';
import { randomModel } from '../src/model/checkpoint.js';
import { TINY_CONFIGS, type LlamaConfig } from '../src/model/config.js';
import { checkWeightsFit } from '../src/model/device-fit.js';
import { LlamaModel } from '../src/model/llama.js';
import { maxAbsDiff } from './reference-llama.js';
import { gpu } from './webgpu.js';

const LAVAPIPE_BINDING = 128 * 2 ** 20; // Mesa lavapipe's maxStorageBufferBindingSize
const qwen05 = TINY_CONFIGS['qwen2.5-0.5b-shape']!; // 151,936 x 896, tied embeddings, 24 layers

describe('checkWeightsFit', () => {
  it("passes Qwen2.5-0.5B on lavapipe in f32 and f16: its 519 MiB embedding is stored in row blocks, and every layer matrix fits", () => {
    // The largest layer matrix, gate|up packed: 2 * 4864 rows of 896 f32 = 34,865,152 bytes, under 128 MiB.
    expect(() => checkWeightsFit(qwen05, 'f32', LAVAPIPE_BINDING, 16)).not.toThrow();
    expect(() => checkWeightsFit(qwen05, 'f16', LAVAPIPE_BINDING, 16)).not.toThrow();
    expect(() => checkWeightsFit(qwen05, 'f32', 34_865_152 - 1, 16)).toThrow(/^model\.layers\.\{0\.\.23\}\.mlp\.\{gate,up\}_proj\.weight \(packed\) \[9728, 896\] needs 34865152 bytes \(33 MiB\) as f32, .*; store the weights as f16/);
  });

  it('advises f16 where every matrix then fits, and passes where all fit', () => {
    const wide: LlamaConfig = { ...qwen05, vocabSize: 1024, intermediateSize: 100_000, tieWordEmbeddings: false };
    // gate|up packed: 2 * 100000 rows of 896: 716,800,000 bytes as f32, 358,400,000 as f16.
    const limit = 400 * 2 ** 20;
    expect(() => checkWeightsFit(wide, 'f32', limit, 16)).toThrow(/as f32, .*; store the weights as f16 \(--weights f16, or weights: f16 in the scenario's model\), which fits$/);
    expect(() => checkWeightsFit(wide, 'f16', limit, 16)).not.toThrow();
    expect(() => checkWeightsFit(wide, 'f16', 2 ** 28, 16)).toThrow(/as f16, .*; run on the CPU backend/);
  });

  it('names a packed layer matrix when that is the largest', () => {
    const wide: LlamaConfig = { ...qwen05, vocabSize: 1024, intermediateSize: 100_000, tieWordEmbeddings: false };
    // gate|up packed: 2 * 100000 rows of 896 f32 = 716,800,000 bytes.
    expect(() => checkWeightsFit(wide, 'f32', 2 ** 29, 16)).toThrow(/^model\.layers\.\{0\.\.23\}\.mlp\.\{gate,up\}_proj\.weight \(packed\) \[200000, 896\] needs 716800000 bytes/);
  });
});

// A vocabulary of Qwen's size whose embedding is just over this device's binding limit as f32 (224 columns on
// lavapipe): stored in row blocks, it gives the CPU's logits. Skipped where the limit is large (a real GPU): the
// model would be gigabytes.
const limit = gpu?.maxBindingBytes ?? Infinity;
const columns = Math.ceil((limit + 1) / (151936 * 4) / 16) * 16;
describe.skipIf(!gpu || limit > 256 * 2 ** 20)('LlamaModel.upload on this WebGPU device', () => {
  it('runs an embedding over the binding limit (row blocks) with the CPU reference\'s logits, f32 and f16', async () => {
    const config: LlamaConfig = { ...TINY_CONFIGS['qwen2-tiny']!, vocabSize: 151936, hiddenSize: columns, intermediateSize: 64, numLayers: 1, numHeads: 2, numKvHeads: 1, headDim: 16 };
    const weights = randomModel(config, 1);
    const tokens = [1, 70_000, 151_935];
    for (const storage of ['f32', 'f16'] as const) {
      const device = await LlamaModel.upload(gpu!, config, weights, { storage }).logits(tokens);
      const reference = await LlamaModel.upload(new CpuBackend(), config, weights, { storage }).logits(tokens);
      expect(maxAbsDiff(device, reference)).toBeLessThan(1e-3);
    }
  });
});
