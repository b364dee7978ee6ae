// Chooses a backend. `auto` prefers WebGPU and falls back to the CPU reference, announcing it in one line; on a
// software adapter it says in one line that the CPU backend is often faster there (measured on a 2-core VM: the
// quick start 6.6 s on the CPU backend, 18 s on lavapipe), and keeps WebGPU: with many cores lavapipe may win.

import type { Backend } from './backend.js';
import { CpuBackend } from './cpu.js';
import { createWebGpuBackend } from './webgpu.js';

export type BackendChoice = 'webgpu' | 'cpu' | 'auto';
export const BACKEND_CHOICES: readonly BackendChoice[] = ['webgpu', 'cpu', 'auto'];

export async function openBackend(choice: BackendChoice, announce: (line: string) => void = (l) => console.error(l)): Promise<Backend> {
  if (choice === 'cpu') return new CpuBackend();
  try {
    const backend = await createWebGpuBackend();
    if (choice === 'auto' && backend.softwareAdapter) {
      announce(`populora: WebGPU runs on a software adapter (${backend.deviceDescription}); on few cores the cpu backend is often faster (a scenario's backend: cpu, a command's --backend cpu)`);
    }
    return backend;
  } catch (error) {
    if (choice === 'webgpu') throw error;
    announce(`populora: no WebGPU adapter (${(error as Error).message}); using the cpu backend`);
    return new CpuBackend();
  }
}
