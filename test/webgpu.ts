// The WebGPU backend for tests. Without an adapter, WebGPU tests skip on a developer's machine; with
// POPULORA_REQUIRE_WEBGPU=1 (set by .ci/run) a missing adapter fails the run instead.
import { afterAll } from 'vitest';
import type { Backend } from '../src/backend/backend.js';
import { createWebGpuBackend } from '../src/backend/webgpu.js';

const required = process.env.POPULORA_REQUIRE_WEBGPU === '1';

export const gpu: Backend | undefined = await createWebGpuBackend().catch((error: unknown) => {
  if (required) throw error;
  console.warn(`WebGPU tests skipped: ${(error as Error).message}`);
  return undefined;
});
if (!gpu && required) throw new Error('POPULORA_REQUIRE_WEBGPU=1 but no WebGPU adapter was found');

afterAll(() => gpu?.destroy());
