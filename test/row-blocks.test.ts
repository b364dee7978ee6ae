// Weights over the device's binding limit, in row blocks (src/backend/webgpu-row-blocks.ts). A backend opened with
// a small binding limit stores a small vocabulary matrix in blocks, as lavapipe must store a real one, and is held
// against the same device storing it whole: the forward ops give the same bits (each dot product reads the same
// values in the same order), the input gradient through the LM head the same values within rounding (it adds
// per-block partial sums), and every other op refuses a blocked weight by name.
import seedrandom from 'seedrandom';
import { afterAll, describe, expect, it } from 'vitest';
import { rowBytes } from '../src/backend/backend.js';
import { createWebGpuBackend } from '../src/backend/webgpu.js';
import { rowBlocks } from '../src/backend/webgpu-row-blocks.js';
import { randomModel } from '../src/model/checkpoint.js';
import { TINY_CONFIGS, type LlamaConfig } from '../src/model/config.js';
import { LlamaModel } from '../src/model/llama.js';
import { gpu } from './webgpu.js';

const LIMIT = 20_000; // bytes: a [512, 32] f32 table (64 KiB) splits into 4 blocks, f16 (32 KiB) into 2
const blocked = gpu && (await createWebGpuBackend({ maxBindingBytes: LIMIT }));
afterAll(() => blocked?.destroy());
const random = (n: number, seed: string) => {
  const rng = seedrandom(seed);
  return Float32Array.from({ length: n }, () => rng() * 2 - 1);
};
const bits = (a: Float32Array) => Array.from(new Uint32Array(a.buffer, a.byteOffset, a.length));

describe('row blocks', () => {
  it('partition the rows, each block within the limit and as large as it allows', () => {
    for (const [rows, cols, storage, limit] of [[512, 32, 'f32', LIMIT], [512, 33, 'f16', LIMIT], [151936, 896, 'f16', 128 << 20], [7, 5, 'f32', 20]] as const) {
      const counts = rowBlocks(rows, cols, storage, limit);
      const perRow = rowBytes(cols, storage);
      expect(counts.reduce((a, b) => a + b, 0)).toBe(rows);
      expect(counts.every((c) => c * perRow <= limit)).toBe(true);
      expect(counts.slice(0, -1).every((c) => (c + 1) * perRow > limit)).toBe(true); // no smaller block than needed
    }
    expect(rowBlocks(151936, 896, 'f16', 128 << 20)).toHaveLength(3); // Qwen2.5-0.5B's embedding on lavapipe
  });
});

describe.skipIf(!gpu)('a vocabulary matrix in row blocks', () => {
  const config: LlamaConfig = { ...TINY_CONFIGS.tiny!, vocabSize: 512, hiddenSize: 32, intermediateSize: 64, numHeads: 2, numKvHeads: 1, headDim: 16 };

  for (const storage of ['f32', 'f16'] as const) {
    for (const tied of [false, true]) {
      it(`gives the logits of the whole matrix, bit for bit (${storage}, ${tied ? 'tied' : 'separate'} LM head)`, async () => {
        const c = { ...config, tieWordEmbeddings: tied };
        const weights = randomModel(c, 3);
        const tokens = [5, 200, 511, 0, 330, 161, 159, 480]; // rows of every block, and block edges
        const whole = LlamaModel.upload(gpu!, c, weights, { storage, maxContext: 16 });
        const split = LlamaModel.upload(blocked!, c, weights, { storage, maxContext: 16 });
        try {
          const [wholeBefore, splitBefore] = [gpu!.dispatches(), blocked!.dispatches()];
          const expected = await whole.logits(tokens);
          expect(bits(await split.logits(tokens))).toEqual(bits(expected));
          const blocks = storage === 'f32' ? 4 : 2; // the embedding and the LM head, each a dispatch per block (and a copy per LM head block)
          expect(blocked!.dispatches() - splitBefore - (gpu!.dispatches() - wholeBefore)).toBe(blocks - 1 + 2 * blocks - 1);
          expect(await blocked!.readF32(split.embedTokens)).toEqual(await gpu!.readF32(whole.embedTokens)); // read back whole
        } finally {
          whole.destroy();
          split.destroy();
        }
      });
    }
  }

  it('gives the input gradient through the LM head within rounding of the whole sum', async () => {
    const [T, V, D] = [6, 512, 32];
    const dy = random(T * V, 'dy');
    const w = random(V * D, 'w');
    const expected = await gpu!.readF32(gpu!.matmulBackward(gpu!.upload(dy, [T, V]), gpu!.uploadWeight(w, [V, D], 'f32')));
    const got = await blocked!.readF32(blocked!.matmulBackward(blocked!.upload(dy, [T, V]), blocked!.uploadWeight(w, [V, D], 'f32')));
    for (let i = 0; i < expected.length; i++) expect(Math.abs(got[i]! - expected[i]!)).toBeLessThan(1e-5 * Math.max(1, Math.abs(expected[i]!)) * Math.sqrt(V));
  });

  it('is refused by name by an op that cannot read it', () => {
    const w = blocked!.uploadWeight(random(512 * 32, 'w'), [512, 32], 'f32');
    const x = blocked!.upload(random(2 * 32, 'x'), [2, 32]);
    const adapters = blocked!.uploadI32(Int32Array.of(0, 0), [2]);
    expect(() => blocked!.loraShrink(x, w, adapters, 8)).toThrow(/loraShrink: the A bank: the weight \[512, 32\] needs 65536 bytes, over this device's storage binding limit of 20000 bytes; only a vocabulary matrix/);
  });
});
