// The CPU backend's tensors: a typed array and a shape.

import { assert, colsOf, numel, rowsOf, type Tensor } from './backend.js';

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

export { colsOf, rowsOf };

/** [T, ΣN_i]: the tensors [T, N_i] side by side. */
export function concatColumns(parts: readonly Tensor[]): Tensor {
  const T = rowsOf(parts[0]!);
  const widths = parts.map(colsOf);
  const N = widths.reduce((a, b) => a + b, 0);
  const out = new Float32Array(T * N);
  let first = 0;
  parts.forEach((part, i) => {
    const xs = f32Of(part);
    for (let t = 0; t < T; t++) out.set(xs.subarray(t * widths[i]!, (t + 1) * widths[i]!), t * N + first);
    first += widths[i]!;
  });
  return tensor(out, [T, N], 'f32');
}
