// bench/cpu-threads.ts's piscina worker: the CPU kernels over the shared arena (workerData), a call list a task.
import { workerData } from 'piscina';
import { runCalls, ThreadKernels, type KernelCall } from '../src/backend/cpu-threads.js';

const { memory, modules } = workerData as { memory: WebAssembly.Memory; modules: Record<string, WebAssembly.Module> };
const kernels = new ThreadKernels(modules, () => memory); // (the bench uses memory 0 alone)

export default function run(calls: KernelCall[]): void {
  runCalls(kernels, calls);
}
