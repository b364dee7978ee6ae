// bench/cpu-threads.ts's piscina worker: the CPU kernels over the shared arena (workerData), a call list a task.
import { workerData } from 'piscina';
import { instantiateKernels, runCalls, type KernelCall } from '../src/backend/cpu-threads.js';

const { memory, modules } = workerData as { memory: WebAssembly.Memory; modules: Record<string, WebAssembly.Module> };
const kernels = instantiateKernels(memory, modules);

export default function run(calls: KernelCall[]): void {
  runCalls(kernels, calls);
}
