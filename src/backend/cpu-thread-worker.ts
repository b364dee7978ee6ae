// A worker thread of the CPU backend (cpu-threads.ts): its own instances of the kernels over the arena's shared
// memories. It sleeps until a job is published, claims and runs the job's shares while any is left (the caller and
// the other workers claim them too), and sleeps again; a kernel that throws is reported to the caller through the
// control block (a worker never dies with a share in hand). A memory the arena opens after the worker started
// comes on its port, read (synchronously: the worker never returns to its event loop) when a call first names it.

import { receiveMessageOnPort, workerData, type MessagePort } from 'node:worker_threads';
import { assert } from './backend.js';
import { claimShares, CONTROL, readCalls, runCalls, ThreadKernels } from './cpu-threads.js';

const { memories, port, control, modules, thread } = workerData as { memories: WebAssembly.Memory[]; port: MessagePort; control: Int32Array; modules: Record<string, WebAssembly.Module>; thread: number };

function memoryAt(index: number): WebAssembly.Memory {
  while (memories.length <= index) {
    const next = receiveMessageOnPort(port);
    assert(next !== undefined, `CPU thread ${thread}: a call names memory ${index} of the arena, which never came`);
    memories.push(next.message as WebAssembly.Memory);
  }
  return memories[index]!;
}

const kernels = new ThreadKernels(modules, memoryAt);
for (let seen = 0; ; seen = Atomics.load(control, CONTROL.GENERATION)) {
  claimShares(control, (share) => runCalls(kernels, readCalls(memoryAt(Atomics.load(control, CONTROL.LIST_MEMORY)), Atomics.load(control, CONTROL.LIST + share) >>> 0)), thread);
  Atomics.wait(control, CONTROL.GENERATION, seen);
}
