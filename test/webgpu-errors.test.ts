// A WebGPU error surfaces as a clear Error at the next read, instead of wrong numbers. In a file of its own:
// the error leaves that backend unusable.
import { describe, expect, it } from 'vitest';
import { gpu } from './webgpu.js';

describe.skipIf(!gpu)('WebGPU errors', () => {
  it('reports a validation error from Dawn with its message', async () => {
    const t = gpu!.upload(Float32Array.of(1, 2, 3), [3]);
    gpu!.addInPlace(t, t); // one buffer bound as read-write and read: WebGPU forbids the aliasing
    await expect(gpu!.readF32(t)).rejects.toThrow(/^WebGPU (validation )?error: .*(usage|alias|writable)/is);
  });
});
