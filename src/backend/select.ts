// Chooses a backend. `auto` prefers WebGPU and falls back to the CPU reference, announcing it in one line.

import type { Backend } from './backend.js';
import { CpuBackend } from './cpu.js';
import { createWebGpuBackend } from './webgpu.js';

export type BackendChoice = 'webgpu' | 'cpu' | 'auto';
export const BACKEND_CHOICES: readonly BackendChoice[] = ['webgpu', 'cpu', 'auto'];

export async function openBackend(choice: BackendChoice, announce: (line: string) => void = (l) => console.error(l)): Promise<Backend> {
  if (choice === 'cpu') return new CpuBackend();
  try {
    return await createWebGpuBackend();
  } catch (error) {
    if (choice === 'webgpu') throw error;
    announce(`populora: no WebGPU adapter (${(error as Error).message}); using the cpu backend`);
    return new CpuBackend();
  }
}
