// Chooses a backend. `auto` prefers WebGPU and falls back to the CPU reference, announcing it in one line; on a
// software adapter it says in one line that the CPU backend is often faster there (measured on a 2-core VM: the
// quick start 6.6 s on the CPU backend, 18 s on lavapipe), and keeps WebGPU: with many cores lavapipe may win.
// The CPU backend runs on `threads` threads (default: one per core): a machine setting, the bits do not depend on it.
// Its `sums` (what the dense products sum in, backend.ts's DenseSums) do change the bits: a setting of the run.

import { availableParallelism } from 'node:os';
import type { Backend, DenseSums } from './backend.js';
import { CpuBackend } from './cpu.js';
import { MAX_THREADS } from './cpu-threads.js';
import { createWebGpuBackend } from './webgpu.js';

export type BackendChoice = 'webgpu' | 'cpu' | 'auto';
export const BACKEND_CHOICES: readonly BackendChoice[] = ['webgpu', 'cpu', 'auto'];

/** A backend as a scenario names it: its choice alone, or with the CPU backend's threads and sums. */
export type BackendSetting = BackendChoice | { name: BackendChoice; threads?: number; sums?: DenseSums };

/** What a setting's CPU backend sums its dense products in (f64 unless it says f32). */
export const settingSums = (setting: BackendSetting): DenseSums => (typeof setting === 'string' ? undefined : setting.sums) ?? 'f64';

/** The CPU backend's threads by default: one per core (at most MAX_THREADS). */
export const defaultCpuThreads = (): number => Math.min(availableParallelism(), MAX_THREADS);

/** `threads` (e.g. a command's --threads) overrides the setting's. */
export async function openBackend(setting: BackendSetting, announce: (line: string) => void = (l) => console.error(l), threads?: number): Promise<Backend> {
  const choice = typeof setting === 'string' ? setting : setting.name;
  const cpu = () => new CpuBackend({ threads: threads ?? (typeof setting === 'string' ? undefined : setting.threads) ?? defaultCpuThreads(), sums: settingSums(setting) });
  if (choice === 'cpu') return cpu();
  try {
    const backend = await createWebGpuBackend();
    if (choice === 'auto' && backend.softwareAdapter) {
      announce(`populora: WebGPU runs on a software adapter (${backend.deviceDescription}); on few cores the cpu backend is often faster (a scenario's backend: cpu, a command's --backend cpu)`);
    }
    return backend;
  } catch (error) {
    if (choice === 'webgpu') throw error;
    announce(`populora: no WebGPU adapter (${(error as Error).message}); using the cpu backend`);
    return cpu();
  }
}
