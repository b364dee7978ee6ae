// The CPU backend's WebAssembly memory: its weight matrices and KV caches live here, so the SIMD kernels
// (kernels/cpu/dense.wasm, attention.wasm) read them in place instead of copying megabytes per call; each call's
// activations are copied into a scratch block. The memory is shared (a SharedArrayBuffer): growing it
// never detaches the buffer, so a Float32Array handed out earlier stays valid and every other piece of code reads
// and writes the weights as plain arrays. Blocks come from a first-fit free list; a block goes back when its array
// is garbage collected (rowsView's sub-arrays keep their parent alive, see keepParent). One arena per thread.

import { assert } from './backend.js';

const PAGE_BYTES = 65536;
const MAX_PAGES = 65536; // 4 GiB: wasm32's limit
/** Bytes after every block that a kernel may read past its end (the kernels read up to 7 f32 beyond a row). */
const SLACK_BYTES = 32;

interface Block {
  at: number; // byte offset, 16-byte aligned
  bytes: number;
}

/**
 * A shared memory that may grow to 4 GiB, or to less where the address space for that cannot be reserved (a
 * ulimit -v); none at all where even that fails: then every array is plain and the backend runs its plain loops.
 */
function reserveMemory(): { memory?: WebAssembly.Memory; maxPages: number } {
  for (const maxPages of [MAX_PAGES, MAX_PAGES / 4, MAX_PAGES / 16]) {
    try {
      return { memory: new WebAssembly.Memory({ initial: 1, maximum: maxPages, shared: true }), maxPages };
    } catch {
      // too much address space asked for: ask for less
    }
  }
  return { maxPages: 0 };
}

class Arena {
  private readonly reserved = reserveMemory();
  /** Undefined when none could be reserved: the arena then holds nothing. */
  readonly memory = this.reserved.memory;
  private end = 0;
  private free: Block[] = []; // sorted by `at`, never adjacent (merged)
  private buffers = new WeakSet<ArrayBufferLike>(this.memory ? [this.memory.buffer] : []);
  private scratchBlock: Block | undefined;
  private readonly collected = new FinalizationRegistry<Block>((block) => this.release(block));
  private readonly parents = new WeakMap<Float32Array, Float32Array>();

  /** A new f32 array of `length` values in the arena (holding whatever the block held: the caller fills it), or undefined when the arena cannot hold it. */
  f32(length: number): Float32Array | undefined {
    const block = this.allocate(length * 4);
    if (!block || !this.memory) return undefined;
    const view = new Float32Array(this.memory.buffer, block.at, length);
    this.collected.register(view, block);
    return view;
  }

  /** The byte address of an array that lives in the arena, else undefined. */
  addressOf(data: Float32Array): number | undefined {
    return this.buffers.has(data.buffer) ? data.byteOffset : undefined;
  }

  /** A sub-array of an arena array keeps the whole block alive. */
  keepParent(sub: Float32Array, parent: Float32Array): void {
    this.parents.set(sub, this.parents.get(parent) ?? parent);
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

  private allocate(requested: number): Block | undefined {
    if (!this.memory) return undefined;
    const bytes = Math.ceil((requested + SLACK_BYTES) / 16) * 16;
    const index = this.free.findIndex((b) => b.bytes >= bytes);
    if (index >= 0) {
      const hole = this.free[index]!;
      const block = { at: hole.at, bytes };
      if (hole.bytes === bytes) this.free.splice(index, 1);
      else this.free[index] = { at: hole.at + bytes, bytes: hole.bytes - bytes };
      return block;
    }
    const at = this.end;
    const missing = at + bytes - this.memory.buffer.byteLength;
    if (missing > 0) {
      const pages = Math.ceil(missing / PAGE_BYTES);
      if (this.memory.buffer.byteLength / PAGE_BYTES + pages > this.reserved.maxPages) return undefined;
      try {
        this.memory.grow(pages);
      } catch {
        return undefined; // the system has no memory to commit: the caller keeps a plain array
      }
      this.buffers.add(this.memory.buffer);
    }
    this.end = at + bytes;
    return { at, bytes };
  }

  private release(block: Block): void {
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
}

let arena: Arena | undefined;

export const cpuArena = (): Arena => (arena ??= new Arena());
