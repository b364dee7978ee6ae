// Whether a model's weight matrices fit the device before any is uploaded. On WebGPU a matrix is bound whole, and a
// binding holds at most maxStorageBufferBindingSize bytes (128 MiB on Mesa lavapipe). The vocabulary matrices (the
// embedding and the LM head: Qwen2.5-0.5B's 151,936 x 896 is 519 MiB as f32) are the exception: the backend stores
// them in row blocks (src/backend/webgpu-row-blocks.ts), so only one of their rows must fit. For the others the
// error names the tensor and the way out, instead of a Dawn validation error or a crash halfway through the upload.
// The CPU backend keeps every weight as f32 values in WebAssembly memories of 4 GiB at most (src/backend/cpu-arena.ts):
// checkHostMemoryFit refuses a matrix that no such memory holds, or a model larger than the machine's memory, from
// the configuration alone, before a byte is allocated.

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

/** How the CPU backend holds a model's weights: the matrices as f32 values (f16 ones too: rounded, not packed). */
export function cpuWeightBytes(config: LlamaConfig): { total: number; largest: UploadedMatrix & { bytes: number } } {
  const matrices = uploadedMatrices(config, 'f32', 16).map((m) => ({ ...m, bytes: m.shape[0] * rowBytes(m.shape[1], 'f32') }));
  const perLayer = matrices.filter((m) => m.name.includes('layers')).reduce((n, m) => n + m.bytes, 0);
  const vocabulary = matrices.filter((m) => !m.name.includes('layers')).reduce((n, m) => n + m.bytes, 0);
  const norms = (2 * config.numLayers + 1) * config.hiddenSize * 4;
  return { total: vocabulary + config.numLayers * perLayer + norms, largest: matrices.reduce((a, b) => (b.bytes > a.bytes ? b : a)) };
}

const gib = (bytes: number) => `${(bytes / 2 ** 30).toFixed(1)} GiB`;

/** A model's shape in a few words, for errors: its type and size. */
export function describeModel(c: LlamaConfig): string {
  return `${c.modelType} (hidden ${c.hiddenSize}, ${c.numLayers} layers, vocabulary ${c.vocabSize})`;
}

/**
 * Throws a DeviceLimitError when the CPU backend cannot hold the model: a weight matrix larger than one WebAssembly
 * memory (wasm32: 4 GiB), or all the weights larger than the machine's memory. Counted from the configuration alone.
 */
export function checkHostMemoryFit(config: LlamaConfig, storage: WeightStorage, limits: { maxMatrixBytes: number; totalBytes: number }): void {
  const { total, largest } = cpuWeightBytes(config);
  const held = storage === 'f16' ? ' (the CPU backend keeps f16 weights as f32 values)' : '';
  if (largest.bytes > limits.maxMatrixBytes) {
    throw new DeviceLimitError(
      `${describeModel(config)}: ${largest.name} ${describeShape(largest.shape)} needs ${largest.bytes} bytes (${gib(largest.bytes)}) as f32${held}, over the ${gib(limits.maxMatrixBytes)} one WebAssembly memory of the CPU backend holds (wasm32; Node 20 has memory64 only behind a flag); run it on WebGPU (--backend webgpu, backend: webgpu in the scenario), whose row blocks take vocabulary matrices of any size, or use a model with a smaller vocabulary or hidden size`,
    );
  }
  if (total > limits.totalBytes) {
    throw new DeviceLimitError(
      `${describeModel(config)}: its weights need ${total} bytes (${gib(total)}) on the CPU backend as f32${held}, over this machine's ${gib(limits.totalBytes)} of memory; use a smaller model, or WebGPU with f16 weights (--backend webgpu --weights f16), which holds them in 2 bytes each`,
    );
  }
}
