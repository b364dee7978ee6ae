// A worker thread of the CPU backend (cpu-threads.ts): its own instances of the kernels over the shared arena. It
// sleeps on its wake counter, runs the call list it is handed, says it is done, and sleeps again; a kernel that
// throws is reported to the caller through the control block (a worker never dies with a job in hand).

import { workerData } from 'node:worker_threads';
import { CONTROL, instantiateKernels, readCalls, runCalls } from './cpu-threads.js';

const { memory, control, modules, index } = workerData as { memory: WebAssembly.Memory; control: Int32Array; modules: Record<string, WebAssembly.Module>; index: number };

const kernels = instantiateKernels(memory, modules);
Atomics.store(control, CONTROL.READY + index, 1);
let seen = 0; // jobs handed to this worker so far
for (;;) {
  Atomics.wait(control, CONTROL.WAKE + index, seen);
  seen = Atomics.load(control, CONTROL.WAKE + index);
  try {
    runCalls(kernels, readCalls(memory, Atomics.load(control, CONTROL.LIST + index)));
  } catch (error) {
    if (Atomics.compareExchange(control, CONTROL.FAILED, 0, 1) === 0) {
      const text = new TextEncoder().encode(`thread ${index + 1}: ${error instanceof Error ? error.message : String(error)}`.slice(0, 1000));
      new Uint8Array(control.buffer, CONTROL.MESSAGE * 4, text.length).set(text);
    }
  }
  if (Atomics.sub(control, CONTROL.PENDING, 1) === 1) Atomics.notify(control, CONTROL.PENDING);
}
