// A worker thread of the CPU backend (cpu-threads.ts): its own instances of the kernels over the shared arena. It
// sleeps until a job is published, claims and runs the job's shares while any is left (the caller and the other
// workers claim them too), and sleeps again; a kernel that throws is reported to the caller through the control
// block (a worker never dies with a share in hand).

import { workerData } from 'node:worker_threads';
import { claimShares, CONTROL, instantiateKernels, readCalls, runCalls } from './cpu-threads.js';

const { memory, control, modules, thread } = workerData as { memory: WebAssembly.Memory; control: Int32Array; modules: Record<string, WebAssembly.Module>; thread: number };

const kernels = instantiateKernels(memory, modules);
for (let seen = 0; ; seen = Atomics.load(control, CONTROL.GENERATION)) {
  claimShares(control, (share) => runCalls(kernels, readCalls(memory, Atomics.load(control, CONTROL.LIST + share))), thread);
  Atomics.wait(control, CONTROL.GENERATION, seen);
}
