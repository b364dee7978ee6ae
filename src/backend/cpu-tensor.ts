// The CPU backend's tensors: a typed array and a shape.

import { assert, numel, type Tensor } from './backend.js';

export interface CpuTensor extends Tensor {
  data: Float32Array | Int32Array;
}

export function f32Of(t: Tensor): Float32Array {
  const data = (t as CpuTensor).data;
  assert(data instanceof Float32Array, `expected a float tensor, got ${t.dtype}`);
  return data;
}

export function i32Of(t: Tensor): Int32Array {
  const data = (t as CpuTensor).data;
  assert(data instanceof Int32Array, `expected an i32 tensor, got ${t.dtype}`);
  return data;
}

export function tensor(data: Float32Array | Int32Array, shape: readonly number[], dtype: Tensor['dtype']): CpuTensor {
  assert(data.length === numel(shape), `data length ${data.length} does not match shape [${shape.join(', ')}]`);
  return { data, shape: [...shape], dtype };
}

export { colsOf, rowsOf } from './backend.js';
