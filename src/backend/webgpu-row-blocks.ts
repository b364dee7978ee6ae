// Weights over the device's binding limit, stored in row blocks. A storage binding is capped per device
// (maxStorageBufferBindingSize: 128 MiB on lavapipe), so a real vocabulary's embedding and LM head (Qwen2.5's
// 151,936 x 896 in f16 is 272 MB) cannot be bound whole. Such a weight is uploaded as consecutive blocks of rows,
// each its own buffer, and the ops that read a vocabulary matrix run once per block:
//   embedding:       each block writes the rows of the tokens it holds (kernels/embedding.wgsl's first/total)
//   linear, matmul:  y[:, cols of block i] = x̂ · W_iᵀ, computed per block into [T, V_i], then copied into y
//   matmulBackward:  dx = Σ_i dy[:, cols of block i] · W_i, blocks added in order
// A row's dot products read the same values in the same order as with the whole matrix, so the forward ops give
// the same bits; the backward adds per-block partial sums (deterministic, within rounding of the whole sum).
// Every other op refuses a blocked weight by name.

import { assert, colsOf, describeShape, rowBytes, rowsOf, type Tensor, type WeightStorage } from './backend.js';
import type { GpuContext, GpuTensor } from './webgpu-backward.js';

/** A weight stored as row blocks: `blocks[i]` holds rows firsts[i] .. firsts[i] + rows(blocks[i]) - 1. */
export interface BlockedWeight extends GpuTensor {
  readonly blocks: readonly GpuTensor[];
  readonly firsts: readonly number[];
}

export const isBlocked = (t: Tensor): t is BlockedWeight => (t as Partial<BlockedWeight>).blocks !== undefined;

/** Row counts of the blocks a [rows, cols] weight of this storage splits into under a binding limit in bytes. */
export function rowBlocks(rows: number, cols: number, storage: WeightStorage, limitBytes: number): number[] {
  const perBlock = Math.floor(limitBytes / rowBytes(cols, storage));
  assert(perBlock >= 1, `one row of ${cols} ${storage} values is over the binding limit of ${limitBytes} bytes`);
  const counts: number[] = [];
  for (let first = 0; first < rows; first += perBlock) counts.push(Math.min(perBlock, rows - first));
  return counts;
}

/** Uploads a weight [rows, cols] block by block with `upload` (each block within the binding limit). */
export function uploadBlocked(data: Float32Array, shape: readonly [number, number], storage: WeightStorage, limitBytes: number, upload: (data: Float32Array, shape: readonly [number, number]) => GpuTensor): BlockedWeight {
  const [rows, cols] = shape;
  const blocks: GpuTensor[] = [];
  const firsts: number[] = [];
  let first = 0;
  for (const count of rowBlocks(rows, cols, storage, limitBytes)) {
    blocks.push(upload(data.subarray(first * cols, (first + count) * cols), [count, cols]));
    firsts.push(first);
    first += count;
  }
  const bytes = blocks.reduce((sum, b) => sum + b.bytes, 0);
  return { shape: [rows, cols], dtype: blocks[0]!.dtype, buffer: blocks[0]!.buffer, bytes, blocks, firsts };
}

/** The ops above, on blocked weights, with the backend's allocation and recorder. */
export class RowBlockOps {
  constructor(private readonly g: GpuContext) {}

  /** dst[r, dstFirst + j] = src[r, srcFirst + j] for every row r and j < count. */
  copyColumns(src: GpuTensor, srcFirst: number, dst: GpuTensor, dstFirst: number, count: number): void {
    const rows = rowsOf(src);
    assert(rowsOf(dst) === rows, `copyColumns: ${rows} source rows, ${rowsOf(dst)} destination rows`);
    assert(srcFirst + count <= colsOf(src) && dstFirst + count <= colsOf(dst), `copyColumns: ${count} columns from ${srcFirst} of ${describeShape(src.shape)} to ${dstFirst} of ${describeShape(dst.shape)}`);
    const fields = { rows, count, srcCols: colsOf(src), srcFirst, dstCols: colsOf(dst), dstFirst };
    this.g.recorder.dispatch('copy_columns', {}, fields, [src, dst], Math.ceil((rows * count) / 256));
  }

  /** out: [T, N] with out[:, cols of block i] = product(block i): [T, rows of block i]; N = the weight's rows. */
  byBlock(w: BlockedWeight, T: number, product: (block: GpuTensor) => GpuTensor): GpuTensor {
    const out = this.g.output([T, rowsOf(w)]);
    w.blocks.forEach((block, i) => {
      const part = product(block);
      this.copyColumns(part, 0, out, w.firsts[i]!, rowsOf(block));
      this.g.free(part);
    });
    return out;
  }

  /** dx: [T, K] = Σ_i dy[:, cols of block i] · W_i, for dy: [T, N], w: [N, K]. */
  matmulBackward(dy: Tensor, w: BlockedWeight, blockBackward: (dyBlock: Tensor, block: GpuTensor) => GpuTensor): GpuTensor {
    const source = this.g.f32(dy, 'matmulBackward: dy');
    assert(colsOf(dy) === rowsOf(w), `matmulBackward: dy has ${colsOf(dy)} columns but the weight has ${rowsOf(w)} rows`);
    let sum: GpuTensor | null = null;
    w.blocks.forEach((block, i) => {
      const slice = this.g.output([rowsOf(dy), rowsOf(block)]);
      this.copyColumns(source, w.firsts[i]!, slice, 0, rowsOf(block));
      const part = blockBackward(slice, block);
      this.g.free(slice);
      if (sum === null) sum = part;
      else {
        this.g.recorder.dispatch('add', {}, { n: rowsOf(part) * colsOf(part) }, [sum, part], Math.ceil((rowsOf(part) * colsOf(part)) / 256));
        this.g.free(part);
      }
    });
    return sum!;
  }
}
