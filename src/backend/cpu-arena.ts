// The CPU backend's WebAssembly memories: its weight matrices and KV caches live here, so the SIMD kernels
// (kernels/cpu/*.wasm) read them in place instead of copying megabytes per call; each call's activations are copied
// into a scratch block of the memory that holds the weight it reads. A wasm32 memory holds at most 4 GiB, so the
// arena is several: weights, caches and row blocks fill a memory up to `fillBytes` (3 GiB: the rest is room for the
// scratch), then the next opens; uploaded layer by layer, a model's layers land in groups, one group a memory. Each
// memory is shared (a SharedArrayBuffer): growing it never detaches the buffer, so a Float32Array handed out earlier
// stays valid and every other piece of code reads and writes the weights as plain arrays, and the worker threads
// (cpu-threads.ts) run the same kernels over the same memories. Blocks come from a first-fit free list; a block goes
// back when its array is garbage collected (rowsView's sub-arrays keep their parent alive, see keepParent), or at once
// when its owner releases it (`release`: a KV cache when its micro-batch is done, CpuBackend.free).

import { assert } from './backend.js';

const PAGE_BYTES = 65536;
const MAX_PAGES = 65536; // 4 GiB: a wasm32 memory's limit
export const MAX_MEMORY_BYTES = MAX_PAGES * PAGE_BYTES;
/** Bytes after every block that a kernel may read past its end (the kernels read up to 7 f32 beyond a row). */
const SLACK_BYTES = 32;
/** How full of weights, caches and row blocks a memory gets before the next one opens (the rest: scratch). */
export const DEFAULT_FILL_BYTES = 3 * 2 ** 30;

/** The bytes a block of `requested` bytes takes: with the slack, rounded up to 16. */
const blockBytes = (requested: number) => Math.ceil((requested + SLACK_BYTES) / 16) * 16;

interface Block {
  at: number; // byte offset, 16-byte aligned
  bytes: number;
}

/**
 * A shared memory that may grow to 4 GiB, or to less where the address space for that cannot be reserved (a
 * ulimit -v); none at all where even that fails.
 */
function reserveMemory(): { memory: WebAssembly.Memory; maxPages: number } | undefined {
  for (const maxPages of [MAX_PAGES, MAX_PAGES / 4, MAX_PAGES / 16]) {
    try {
      return { memory: new WebAssembly.Memory({ initial: 1, maximum: maxPages, shared: true }), maxPages };
    } catch {
      // too much address space asked for: ask for less
    }
  }
  return undefined;
}

/** One WebAssembly memory of the arena: its blocks (first fit), and the scratch of the calls that run in it. */
class ArenaMemory {
  private end = 0;
  private free: Block[] = []; // sorted by `at`, never adjacent (merged)
  private scratchBlock: Block | undefined;
  /** Bytes held by blocks other than the scratch. */
  held = 0;

  constructor(readonly memory: WebAssembly.Memory, private readonly maxPages: number) {}

  /** A block of at least `requested` bytes (and the slack), or undefined when the memory cannot hold it. */
  allocate(requested: number): Block | undefined {
    const bytes = blockBytes(requested);
    const index = this.free.findIndex((b) => b.bytes >= bytes);
    if (index >= 0) {
      const hole = this.free[index]!;
      if (hole.bytes === bytes) this.free.splice(index, 1);
      else this.free[index] = { at: hole.at + bytes, bytes: hole.bytes - bytes };
      return { at: hole.at, bytes };
    }
    const at = this.end;
    const missing = at + bytes - this.memory.buffer.byteLength;
    if (missing > 0) {
      const pages = Math.ceil(missing / PAGE_BYTES);
      if (this.memory.buffer.byteLength / PAGE_BYTES + pages > this.maxPages) return undefined;
      try {
        this.memory.grow(pages);
      } catch {
        return undefined; // the system has no memory to commit
      }
    }
    this.end = at + bytes;
    return { at, bytes };
  }

  release(block: Block): void {
    let i = this.free.findIndex((b) => b.at > block.at);
    if (i < 0) i = this.free.length;
    this.free.splice(i, 0, { ...block });
    const merge = (j: number) => {
      const [a, b] = [this.free[j], this.free[j + 1]];
      if (a && b && a.at + a.bytes === b.at) this.free.splice(j, 2, { at: a.at, bytes: a.bytes + b.bytes });
    };
    merge(i);
    merge(i - 1);
    const last = this.free[this.free.length - 1];
    if (last && last.at + last.bytes === this.end) [this.end] = [last.at, this.free.pop()];
    assert(this.end >= 0, 'CPU arena: free list corrupted');
  }

  /** Byte offsets of scratch regions of the given sizes (each 16-byte aligned, with slack), valid until the next call. */
  scratch(bytes: readonly number[]): number[] | undefined {
    const sizes = bytes.map((b) => Math.ceil((b + SLACK_BYTES) / 16) * 16);
    const total = sizes.reduce((a, b) => a + b, 0);
    if (!this.scratchBlock || this.scratchBlock.bytes < total) {
      if (this.scratchBlock) this.release(this.scratchBlock);
      this.scratchBlock = this.allocate(Math.max(total, 2 * (this.scratchBlock?.bytes ?? 0)) - SLACK_BYTES) ?? this.allocate(total - SLACK_BYTES);
      if (!this.scratchBlock) return undefined;
    }
    let at = this.scratchBlock.at;
    return sizes.map((size) => ((at += size), at - size));
  }
}

export class Arena {
  private readonly memories: ArenaMemory[] = [];
  /**
   * The buffer object of every array handed out: which memory it is. (A shared memory's `buffer` may give another
   * object on each read once it has grown, so each array's own is kept; its sub-arrays share it.)
   */
  private readonly homes = new WeakMap<ArrayBufferLike, number>();
  private readonly collected = new FinalizationRegistry<{ memory: number; block: Block }>((owned) => this.giveBack(owned));
  /** The block of every array `f32` handed out that is neither collected nor released. */
  private readonly blocks = new WeakMap<Float32Array, { memory: number; block: Block }>();
  private readonly parents = new WeakMap<Float32Array, Float32Array>();
  private readonly newMemoryListeners: Array<(memory: WebAssembly.Memory, index: number) => void> = [];
  /** Set once no memory could be reserved at all: then every array is plain and the backend runs its plain loops. */
  private unavailable = false;

  /** fillBytes: how much of a memory its blocks may hold before the next memory opens (tests give less). */
  constructor(readonly fillBytes = DEFAULT_FILL_BYTES) {
    this.open(); // the first memory (or none: unavailable)
  }

  /** The arena's memories so far (0 where none could be reserved). */
  get count(): number {
    return this.memories.length;
  }

  /** Memory i's WebAssembly.Memory. */
  memory(i: number): WebAssembly.Memory {
    return this.memories[i]!.memory;
  }

  /** Bytes that blocks (weights, caches, row blocks) hold in memory i, the scratch apart. */
  heldBytes(i: number): number {
    return this.memories[i]!.held;
  }

  /** Tells `listener` of every memory opened from now on (the threads give it to their workers). */
  onNewMemory(listener: (memory: WebAssembly.Memory, index: number) => void): void {
    this.newMemoryListeners.push(listener);
  }

  /**
   * A new f32 array of `length` values (holding whatever the block held: the caller fills it) in the first memory
   * whose blocks stay within fillBytes with it, else in a new memory; undefined when no memory can hold it.
   */
  f32(length: number): Float32Array | undefined {
    const bytes = blockBytes(length * 4);
    let index = this.memories.findIndex((m) => m.held + bytes <= this.fillBytes);
    let block = index >= 0 ? this.memories[index]!.allocate(bytes) : undefined;
    if (!block) {
      index = this.open();
      block = index >= 0 ? this.memories[index]!.allocate(bytes) : undefined;
    }
    if (!block) return undefined;
    const home = this.memories[index]!;
    home.held += block.bytes;
    const view = new Float32Array(home.memory.buffer, block.at, length);
    this.homes.set(view.buffer, index);
    this.blocks.set(view, { memory: index, block });
    this.collected.register(view, { memory: index, block }, view);
    return view;
  }

  /**
   * Gives the block of `array` (an array `f32` handed out, not a view of one) back at once, instead of when the array
   * is collected; false for any other array. The array and its views must not be used again: their bytes go to the
   * next block taken there.
   */
  release(array: Float32Array): boolean {
    const owned = this.blocks.get(array);
    if (!owned) return false;
    this.blocks.delete(array);
    this.collected.unregister(array);
    this.giveBack(owned);
    return true;
  }

  private giveBack({ memory, block }: { memory: number; block: Block }): void {
    this.memories[memory]!.held -= block.bytes;
    this.memories[memory]!.release(block);
  }

  /** Which memory holds an array, else undefined (a plain array). */
  memoryOf(data: Float32Array | Int32Array): number | undefined {
    return this.homes.get(data.buffer);
  }

  /** The byte address of an array that lives in memory `memory` of the arena, else undefined. */
  addressOf(data: Float32Array, memory: number): number | undefined {
    return this.homes.get(data.buffer) === memory ? data.byteOffset : undefined;
  }

  /** A sub-array of an arena array keeps the whole block alive. */
  keepParent(sub: Float32Array, parent: Float32Array): void {
    this.parents.set(sub, this.parents.get(parent) ?? parent);
  }

  /** Byte offsets in memory `memory` of scratch regions of the given sizes (16-byte aligned), valid until its next call. */
  scratch(bytes: readonly number[], memory: number): number[] | undefined {
    return this.memories[memory]?.scratch(bytes);
  }

  /** Opens a memory; its index, or -1 where the system gives none. */
  private open(): number {
    if (this.unavailable) return -1;
    const reserved = reserveMemory();
    if (!reserved) {
      this.unavailable = this.memories.length === 0;
      return -1;
    }
    const index = this.memories.length;
    this.memories.push(new ArenaMemory(reserved.memory, reserved.maxPages));
    for (const listener of this.newMemoryListeners) listener(reserved.memory, index);
    return index;
  }
}

let arena: Arena | undefined;

/** The process's arena (`fillBytes` applies to the first call only: tests give a small one to open many memories). */
export const cpuArena = (fillBytes?: number): Arena => (arena ??= new Arena(fillBytes));
