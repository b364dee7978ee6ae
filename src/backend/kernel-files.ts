// Where the kernel files live: kernels/ beside src/ in the package (src/backend under vitest, dist/src/backend
// when built). kernels/*.wgsl are the WebGPU kernels, kernels/cpu/*.wasm the CPU ones.

import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export function kernelsDirectory(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++, dir = dirname(dir)) {
    if (existsSync(join(dir, 'kernels', 'matmul.wgsl'))) return join(dir, 'kernels');
  }
  throw new Error('populora: cannot find the kernels/ folder (expected at the package root, beside src/)');
}
