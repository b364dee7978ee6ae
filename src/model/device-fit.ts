// Whether a model's weight matrices fit the device before any is uploaded. On WebGPU a matrix is bound whole, and a
// binding holds at most maxStorageBufferBindingSize bytes (128 MiB on Mesa lavapipe). The vocabulary matrices (the
// embedding and the LM head: Qwen2.5-0.5B's 151,936 x 896 is 519 MiB as f32) are the exception: the backend stores
// them in row blocks (src/backend/webgpu-row-blocks.ts), so only one of their rows must fit. For the others the
// error names the tensor and the way out, instead of a Dawn validation error or a crash halfway through the upload.

import { alignedStarts, describeShape, rowBytes, type WeightStorage } from '../backend/backend.js';
import type { LlamaConfig } from './config.js';

export class DeviceLimitError extends Error {
  override name = 'DeviceLimitError';
}

interface UploadedMatrix {
  name: string;
  shape: [number, number];
  vocabulary?: boolean; // stored in row blocks where it is over the limit
}

/** The weight matrices as LlamaModel.upload lays them out (q|k|v and gate|up packed, each part aligned). */
function uploadedMatrices(c: LlamaConfig, storage: WeightStorage, alignment: number): UploadedMatrix[] {
  const packedRows = (counts: number[], cols: number) => alignedStarts(counts, rowBytes(cols, storage), alignment).rows;
  const attention = c.numHeads * c.headDim;
  const layers = c.numLayers === 1 ? 'model.layers.0' : `model.layers.{0..${c.numLayers - 1}}`;
  const kv = c.numKvHeads * c.headDim;
  return [
    { name: 'model.embed_tokens.weight', shape: [c.vocabSize, c.hiddenSize], vocabulary: true },
    ...(c.tieWordEmbeddings ? [] : [{ name: 'lm_head.weight', shape: [c.vocabSize, c.hiddenSize] as [number, number], vocabulary: true }]),
    { name: `${layers}.self_attn.{q,k,v}_proj.weight (packed)`, shape: [packedRows([attention, kv, kv], c.hiddenSize), c.hiddenSize] },
    { name: `${layers}.self_attn.o_proj.weight`, shape: [c.hiddenSize, attention] },
    { name: `${layers}.mlp.{gate,up}_proj.weight (packed)`, shape: [packedRows([c.intermediateSize, c.intermediateSize], c.hiddenSize), c.hiddenSize] },
    { name: `${layers}.mlp.down_proj.weight`, shape: [c.hiddenSize, c.intermediateSize] },
  ];
}

/** The bytes that must fit one binding: the whole matrix, or one row of a vocabulary matrix (a layer matrix is larger). */
const matrixBytes = (m: UploadedMatrix, storage: WeightStorage) => (m.vocabulary ? 1 : m.shape[0]) * rowBytes(m.shape[1], storage);

/**
 * Throws a DeviceLimitError naming the largest weight matrix over `maxBindingBytes` (its bytes, the limit) and
 * what to do: store the weights as f16 if every matrix then fits, else run on the CPU backend.
 */
export function checkWeightsFit(config: LlamaConfig, storage: WeightStorage, maxBindingBytes: number, alignment: number): void {
  const over = uploadedMatrices(config, storage, alignment).filter((m) => matrixBytes(m, storage) > maxBindingBytes);
  if (over.length === 0) return;
  const largest = over.reduce((a, b) => (matrixBytes(b, storage) > matrixBytes(a, storage) ? b : a));
  const f16Fits = uploadedMatrices(config, 'f16', alignment).every((m) => matrixBytes(m, 'f16') <= maxBindingBytes);
  const advice =
    storage === 'f32' && f16Fits
      ? 'store the weights as f16 (--weights f16, or weights: f16 in the scenario\'s model), which fits'
      : `run on the CPU backend (--backend cpu, or backend: cpu in the scenario)${storage === 'f32' ? '; even f16 weights would not fit' : ''}`;
  const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MiB`;
  const bytes = matrixBytes(largest, storage);
  throw new DeviceLimitError(
    `${largest.name} ${describeShape(largest.shape)} needs ${bytes} bytes (${mib(bytes)}) as ${storage}, over this device's maxStorageBufferBindingSize of ${maxBindingBytes} bytes (${mib(maxBindingBytes)}); ${advice}`,
  );
}
