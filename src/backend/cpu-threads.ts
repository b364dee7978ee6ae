// The CPU backend's threads: worker threads that run the same WebAssembly kernels (kernels/cpu/*.wasm) over the same
// shared memory, the CPU arena (cpu-arena.ts), where the weights, KV caches and each op's scratch live. An op cuts
// its work into shares, one per thread, each a list of kernel calls (KernelCall: the function and its arguments,
// addresses in the arena); the calling thread writes the lists into the arena, wakes the workers, runs shares
// itself as they do, and waits until every share is done. Every share owns whole outputs (rows of a product, tokens, whole
// sequences), and a kernel sums each output in one order whatever part of the work it is given, so N threads give
// the bits of one (test/cpu-threads.test.ts holds them equal at 1 to 4 threads).
//
// Control block (a SharedArrayBuffer of i32, apart from the arena):
//   GENERATION     jobs so far: the workers sleep on it (Atomics.wait) and the caller wakes as many as it has shares
//   CLAIM          job · 128 + the next unclaimed share: every thread, the caller included, claims shares with a
//                  compare-exchange until none is left, so a worker the system is slow to schedule holds up nothing
//   SHARES, DONE   the job's shares, and those finished (the last one notifies the caller)
//   [LIST + i]     where share i's call list lies in the arena (bytes, unsigned: past 2 GiB an i32 is negative):
//                  f64 [calls, fn, memory, args..., fn, memory, args...]
//   FAILED         1 when a kernel threw; its message is in the message bytes
// Why Atomics and not a message per call (piscina): a decode step at batch 1 is hundreds of kernel calls of tens to
// hundreds of microseconds each; docs/cpu-backend.md has the measured cost of each way.

import { MessageChannel, type MessagePort, Worker } from 'node:worker_threads';
import { assert } from './backend.js';
import { cpuArena } from './cpu-arena.js';
import { ROW_KERNELS } from './cpu-rows.js';
import { cpuKernelBuild, cpuKernelModule } from './kernel-files.js';
import { compiledWorker } from '../runtime/worker-threads.js';

/**
 * Each kernel function a thread runs: its module (kernels/cpu/<module>.wasm, or `rows`: cpu-rows.ts's loops in
 * TypeScript), its export, and its arity.
 */
const KERNEL_FUNCTIONS = {
  matmul: ['dense', 'matmul', 11],
  matmulBlocks: ['dense', 'matmulBlocks', 11],
  matmulBackward: ['dense', 'matmulBackward', 10],
  matmulBlocksF32: ['dense_f32', 'matmulBlocksF32', 9],
  matmulF32: ['dense_f32', 'matmulF32', 9],
  matmulBackwardF32: ['dense_f32', 'matmulBackwardF32', 9],
  attention: ['attention', 'attention', 12],
  attentionForward: ['train_attention', 'forward', 13],
  attentionBackward: ['train_attention', 'backward', 17],
  logProbs: ['rows', 'logProbs', 6],
  logitsBackward: ['rows', 'logitsBackward', 8],
  swiglu: ['rows', 'swiglu', 4],
  swigluBackward: ['rows', 'swigluBackward', 6],
} as const;
export type KernelFunction = keyof typeof KERNEL_FUNCTIONS;
const FUNCTION_NAMES = Object.keys(KERNEL_FUNCTIONS) as KernelFunction[];
const MODULE_NAMES = [...new Set(Object.values(KERNEL_FUNCTIONS).map(([module]) => module))].filter((name) => name !== 'rows');

/**
 * One call of a kernel function: the memory of the arena it runs on, and its arguments (byte addresses in that
 * memory, sizes, a scale) in the export's order.
 */
export interface KernelCall {
  fn: KernelFunction;
  memory: number;
  args: number[];
}

export type Kernels = Record<KernelFunction, (...args: number[]) => void>;

/** The kernel functions of one thread, instantiated over `memory` (each thread makes its own instances). */
export function instantiateKernels(memory: WebAssembly.Memory, modules: Record<string, WebAssembly.Module>): Kernels {
  const exports = Object.fromEntries(MODULE_NAMES.map((name) => [name, new WebAssembly.Instance(modules[name]!, { env: { memory, exp: Math.exp } }).exports]));
  return Object.fromEntries(FUNCTION_NAMES.map((fn) => {
    const [module, name] = KERNEL_FUNCTIONS[fn];
    if (module === 'rows') return [fn, (...args: number[]) => (ROW_KERNELS[name as keyof typeof ROW_KERNELS] as (m: WebAssembly.Memory, ...a: number[]) => void)(memory, ...args)];
    return [fn, exports[module]![name] as (...args: number[]) => void];
  })) as Kernels;
}

/** Each module the threads instantiate, in the build this process runs (dense's multiply-adds fused where it can; dense_f32 has no fused build). */
export const kernelModules = (): Record<string, WebAssembly.Module> => Object.fromEntries(MODULE_NAMES.map((name) => [name, cpuKernelModule(cpuKernelBuild(name))]));

/** One thread's kernels: a set of instances for each memory of the arena, made at its first call there. */
export class ThreadKernels {
  private readonly sets: Kernels[] = [];

  constructor(private readonly modules: Record<string, WebAssembly.Module>, readonly memoryAt: (memory: number) => WebAssembly.Memory) {}

  on(memory: number): Kernels {
    return (this.sets[memory] ??= instantiateKernels(this.memoryAt(memory), this.modules));
  }
}

let mainKernels: ThreadKernels | undefined;
/** This (the main) thread's kernels. */
export const kernels = (): ThreadKernels => (mainKernels ??= new ThreadKernels(kernelModules(), (memory) => cpuArena().memory(memory)));

/** Runs a call list on this thread. */
export function runCalls(k: ThreadKernels, calls: readonly KernelCall[]): void {
  for (const { fn, memory, args } of calls) k.on(memory)[fn](...args);
}

/** The f64 words of a call list: [calls, fn index, memory, args..., ...] (what a worker reads with readCalls). */
function encodeCalls(calls: readonly KernelCall[]): Float64Array {
  const words = new Float64Array(1 + calls.reduce((n, c) => n + 2 + c.args.length, 0));
  words[0] = calls.length;
  let at = 1;
  for (const { fn, memory, args } of calls) {
    assert(args.length === KERNEL_FUNCTIONS[fn][2], `CPU threads: ${fn} takes ${KERNEL_FUNCTIONS[fn][2]} arguments, got ${args.length}`);
    words[at++] = FUNCTION_NAMES.indexOf(fn);
    words[at++] = memory;
    words.set(args, at);
    at += args.length;
  }
  return words;
}

/** The call list encodeCalls wrote at byte `address` of `memory`. */
export function readCalls(memory: WebAssembly.Memory, address: number): KernelCall[] {
  const count = new Float64Array(memory.buffer, address, 1)[0]!;
  const calls: KernelCall[] = [];
  let at = address + 8;
  for (let c = 0; c < count; c++) {
    const [fnIndex, home] = new Float64Array(memory.buffer, at, 2);
    const fn = FUNCTION_NAMES[fnIndex!]!;
    const arity = KERNEL_FUNCTIONS[fn][2];
    calls.push({ fn, memory: home!, args: Array.from(new Float64Array(memory.buffer, at + 16, arity)) });
    at += 8 * (2 + arity);
  }
  return calls;
}

// The control block's layout (i32 indices).
export const CONTROL = { GENERATION: 0, CLAIM: 1, SHARES: 2, DONE: 3, FAILED: 4, LIST_MEMORY: 5, LIST: 16, MESSAGE: 16 + 128 } as const;
const MESSAGE_BYTES = 1024;
const CONTROL_BYTES = CONTROL.MESSAGE * 4 + MESSAGE_BYTES;
/** CLAIM holds job · SHARE_SLOTS + the next share to claim: a claim never lands in another job's shares. */
const SHARE_SLOTS = 128;
/**
 * The least work (multiply-adds) worth a share of its own: waking a worker and waiting for it costs ~10-30 us here,
 * the time the kernels take for about this much (docs/cpu-backend.md, "The threshold").
 */
export const MIN_WORK_PER_SHARE = 65536;
/** The most threads one backend may use (LIMITS.threads in scenario.ts). */
export const MAX_THREADS = 64;

/**
 * Claims the current job's unclaimed shares one at a time and runs each (`run(i)`), until none is left; a kernel
 * that throws marks the job failed (its message kept) and counts as done. Every thread runs this, the caller too:
 * a share goes to whichever thread is free first, so a worker the system has not scheduled yet holds nothing up.
 */
export function claimShares(control: Int32Array, run: (share: number) => void, thread: number): void {
  for (;;) {
    const claim = Atomics.load(control, CONTROL.CLAIM);
    if (claim % SHARE_SLOTS >= Atomics.load(control, CONTROL.SHARES)) return;
    if (Atomics.compareExchange(control, CONTROL.CLAIM, claim, claim + 1) !== claim) continue; // another thread took it, or a new job began
    try {
      run(claim % SHARE_SLOTS);
    } catch (error) {
      if (Atomics.compareExchange(control, CONTROL.FAILED, 0, 1) === 0) {
        const text = new TextEncoder().encode(`thread ${thread}: ${error instanceof Error ? error.message : String(error)}`).subarray(0, MESSAGE_BYTES - 1);
        new Uint8Array(control.buffer, CONTROL.MESSAGE * 4, MESSAGE_BYTES).fill(0).set(text);
      }
    }
    if (Atomics.add(control, CONTROL.DONE, 1) + 1 === Atomics.load(control, CONTROL.SHARES)) Atomics.notify(control, CONTROL.DONE);
  }
}

/** The workers of this process, shared by every CPU backend: grown to the most threads one asks for. */
class WorkerPool {
  readonly control = new Int32Array(new SharedArrayBuffer(CONTROL_BYTES));
  private readonly workers: Array<{ worker: Worker; port: MessagePort }> = [];
  private lists: Float32Array | undefined; // the call lists' block in the arena
  private job = 0;
  users = 0;

  /** A memory the arena opens after a worker started reaches it on its port (read when a call first names it). */
  post(memory: WebAssembly.Memory): void {
    for (const { port } of this.workers) port.postMessage(memory);
  }

  grow(count: number): void {
    const modules = kernelModules();
    const arena = cpuArena();
    while (this.workers.length < count) {
      const file = compiledWorker(new URL('./cpu-thread-worker.js', import.meta.url));
      const { port1, port2 } = new MessageChannel();
      const memories = Array.from({ length: arena.count }, (_, i) => arena.memory(i));
      const workerData = { memories, port: port2, control: this.control, modules, thread: this.workers.length + 1 };
      // execArgv: not the parent's (under node -e, the worker would run the parent's script instead of its file)
      const worker = new Worker(file, { workerData, transferList: [port2], execArgv: [] });
      worker.unref(); // an idle worker never keeps Node running
      port1.unref();
      this.workers.push({ worker, port: port1 });
    }
  }

  /** Runs every share, on this thread and on up to shares.length - 1 workers; returns when all are done. */
  run(shares: readonly (readonly KernelCall[])[]): void {
    const c = this.control;
    assert(shares.length < SHARE_SLOTS, `CPU threads: ${shares.length} shares, at most ${SHARE_SLOTS - 1}`);
    const encoded = shares.map(encodeCalls);
    const words = encoded.reduce((n, e) => n + e.length, 0);
    if (!this.lists || this.lists.length < 2 * words) this.lists = cpuArena().f32(Math.max(2 * words, 2 * (this.lists?.length ?? 0)));
    assert(this.lists !== undefined, 'CPU threads: the arena has no room for the call lists');
    const listMemory = cpuArena().memoryOf(this.lists)!;
    let at = this.lists.byteOffset;
    encoded.forEach((list, i) => {
      new Float64Array(cpuArena().memory(listMemory).buffer, at, list.length).set(list);
      Atomics.store(c, CONTROL.LIST + i, at);
      at += list.length * 8;
    });
    Atomics.store(c, CONTROL.LIST_MEMORY, listMemory);
    // The job is published by its claim counter, after its lists, share count and done count.
    Atomics.store(c, CONTROL.SHARES, shares.length);
    Atomics.store(c, CONTROL.DONE, 0);
    this.job = (this.job + 1) % 2 ** 23;
    Atomics.store(c, CONTROL.CLAIM, this.job * SHARE_SLOTS);
    Atomics.add(c, CONTROL.GENERATION, 1);
    Atomics.notify(c, CONTROL.GENERATION, shares.length - 1);
    const k = kernels();
    claimShares(c, (i) => runCalls(k, shares[i]!), 0);
    for (let done = Atomics.load(c, CONTROL.DONE); done < shares.length; done = Atomics.load(c, CONTROL.DONE)) Atomics.wait(c, CONTROL.DONE, done);
    if (Atomics.load(c, CONTROL.FAILED)) {
      const bytes = new Uint8Array(c.buffer, CONTROL.MESSAGE * 4, MESSAGE_BYTES);
      const message = Buffer.from(bytes.subarray(0, bytes.indexOf(0) < 0 ? MESSAGE_BYTES : bytes.indexOf(0))).toString('utf8');
      Atomics.store(c, CONTROL.FAILED, 0);
      throw new Error(`populora: a CPU backend thread failed: ${message}`);
    }
  }

  /** Ends every worker (when no backend uses them any more). */
  close(): void {
    for (const { worker, port } of this.workers.splice(0)) {
      port.close();
      void worker.terminate();
    }
    this.lists = undefined;
  }
}

let pool: WorkerPool | undefined;
let listening = false; // for the arena's new memories (once a process)

/** A backend's threads: `count` of them, the caller's included; the pool's workers run the others. */
export class CpuThreads {
  private closed = false;

  private constructor(readonly count: number, private readonly workers: WorkerPool | undefined, private readonly minWorkPerShare: number) {}

  /**
   * `count` threads (1: this one alone, no workers); one where the arena has no shared memory. A share gets at
   * least `minWorkPerShare` of an op's work (tests give 1, to cut small shapes).
   */
  static open(count: number, minWorkPerShare = MIN_WORK_PER_SHARE): CpuThreads {
    assert(Number.isInteger(count) && count >= 1 && count <= MAX_THREADS, `CPU threads: ${count} is not a whole number from 1 to ${MAX_THREADS}`);
    if (count === 1 || cpuArena().count === 0) return new CpuThreads(1, undefined, minWorkPerShare);
    if (!pool) {
      pool = new WorkerPool();
      if (!listening) cpuArena().onNewMemory((memory) => pool?.post(memory));
      listening = true;
    }
    pool.grow(count - 1);
    pool.users++;
    return new CpuThreads(count, pool, minWorkPerShare);
  }

  /** The number of shares to cut `work` (multiply-adds, or other inner steps) into. */
  sharesFor(work: number): number {
    return Math.max(1, Math.min(this.count, Math.floor(work / this.minWorkPerShare)));
  }

  /**
   * Runs `calls(first, end)` for [0, end) cut into ranges of whole `align`s, one a thread, as many as `work` (the
   * multiply-adds, or other inner steps, of the whole) pays for: small work stays on this thread.
   */
  runRanges(end: number, align: number, work: number, calls: (first: number, end: number) => KernelCall[]): void {
    this.run(splitRange(0, end, this.sharesFor(work), align).map(([a, b]) => calls(a, b)));
  }

  /** Runs each share's calls, on this thread and the workers (whichever is free first); returns when all are done. */
  run(shares: readonly (readonly KernelCall[])[]): void {
    assert(!this.closed, 'CPU threads: used after the backend was destroyed');
    assert(shares.length <= this.count, `CPU threads: ${shares.length} shares for ${this.count} threads`);
    const busy = shares.filter((s) => s.length > 0);
    if (busy.length > 1 && this.workers) return this.workers.run(busy);
    for (const share of busy) runCalls(kernels(), share);
  }

  /** Gives the threads back; the workers end when no backend holds any. */
  close(): void {
    if (this.closed || !this.workers) return;
    this.closed = true;
    if (--this.workers.users === 0) {
      this.workers.close();
      pool = undefined;
    }
  }
}

/** The calling thread alone. */
export const ONE_THREAD = CpuThreads.open(1);

/**
 * [first, end) cut into at most `parts` contiguous ranges of nearly equal length, each boundary a multiple of
 * `align` (counted from 0): the ranges' ends, in order.
 */
export function splitRange(first: number, end: number, parts: number, align = 1): Array<[number, number]> {
  const units = Math.ceil((end - first) / align);
  const n = Math.max(1, Math.min(parts, units));
  return Array.from({ length: n }, (_, i) => [first + Math.floor((units * i) / n) * align, Math.min(end, first + Math.floor((units * (i + 1)) / n) * align)] as [number, number]).filter(([a, b]) => b > a);
}
