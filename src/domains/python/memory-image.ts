// The interpreter's state as one image of its WebAssembly memory: taken once after load, put back before every run
// (executor.ts). All of Python's state lives in that memory (modules, classes, caches, the allocator, the sandbox's
// own functions and counters, garbage whose finalizers have not run), so whatever a run changed, the next one cannot
// see it.
//
// Emscripten lays the memory out as [static data][stack, growing down][heap, up to the sbrk top][never allocated].
// Putting it back costs memory bandwidth, so only what can matter is copied:
//   - the static data and the heap up to the image's sbrk top, from the image;
//   - the stack below the stack pointer is dead between calls (the pointer is where it was when the image was taken),
//     so the image holds zeros there and a restore zeroes what the run wrote: from the pointer down to where 64 zero
//     pages in a row show the run went no deeper;
//   - above the image's sbrk top the memory was never allocated, so zero: the restore zeroes up to where the run's
//     allocator reached (Emscripten's allocator never gives memory back, so its top only rises during a run).

const PAGE_BYTES = 4096;
const ZERO_PAGES_BELOW_STACK_USE = 64; // a run's stack use ends where this many zero pages follow in a row
const ZERO_PAGE = Buffer.alloc(PAGE_BYTES);

export interface EmscriptenMemory {
  HEAPU8: Uint8Array;
  _emscripten_stack_get_base(): number;
  _emscripten_stack_get_end(): number;
  _emscripten_get_sbrk_ptr(): number;
  stackSave(): number;
}

export class MemoryImage {
  private readonly image: Buffer;
  private readonly stackPointer: number; // between calls: what lies above it (Pyodide's own frame) is live
  private readonly stackLow: number;
  private readonly top: number;

  /** The image of the memory as it is now, between two calls into Python. */
  constructor(private readonly memory: EmscriptenMemory) {
    const stackHigh = memory._emscripten_stack_get_base();
    this.stackLow = memory._emscripten_stack_get_end();
    this.stackPointer = memory.stackSave();
    this.top = this.sbrkTop();
    if (!(this.stackLow < this.stackPointer && this.stackPointer <= stackHigh && stackHigh <= this.top && this.top <= memory.HEAPU8.length)) {
      throw new Error(`memory-image.ts: unexpected memory layout (stack ${this.stackLow}..${this.stackPointer}..${stackHigh}, heap top ${this.top}, memory ${memory.HEAPU8.length})`);
    }
    memory.HEAPU8.fill(0, this.stackLow, this.stackPointer); // dead: the image holds zeros, so a run's use shows
    this.image = Buffer.from(memory.HEAPU8.slice(0, this.top));
  }

  /** Bytes the image holds (the static data, the stack and the heap up to its top). */
  get bytes(): number {
    return this.image.length;
  }

  /** Puts the memory back as the image has it. Between two calls into Python only. */
  restore(): void {
    this.assertBetweenCalls();
    const reached = this.sbrkTop(); // read before the static data (where the sbrk pointer lives) is put back
    const heap = this.memory.HEAPU8;
    heap.set(this.image.subarray(0, this.stackLow), 0);
    heap.fill(0, this.deepestStackUse(heap), this.stackPointer);
    heap.set(this.image.subarray(this.stackPointer), this.stackPointer);
    if (reached > this.top) heap.fill(0, this.top, Math.min(reached, heap.length));
  }

  /** The lowest address the stack was written at since the last restore (the image's stack is all zeros). */
  private deepestStackUse(heap: Uint8Array): number {
    const bytes = Buffer.from(heap.buffer, heap.byteOffset, heap.byteLength);
    let deepest = this.stackPointer;
    let zeroRun = 0;
    for (let page = this.stackPointer - PAGE_BYTES; page >= this.stackLow && zeroRun < ZERO_PAGES_BELOW_STACK_USE; page -= PAGE_BYTES) {
      if (bytes.compare(ZERO_PAGE, 0, PAGE_BYTES, page, page + PAGE_BYTES) === 0) {
        zeroRun++;
      } else {
        zeroRun = 0;
        deepest = page;
      }
    }
    return deepest;
  }

  private sbrkTop(): number {
    const pointer = this.memory._emscripten_get_sbrk_ptr();
    return new DataView(this.memory.HEAPU8.buffer).getUint32(pointer, true);
  }

  private assertBetweenCalls(): void {
    const sp = this.memory.stackSave();
    if (sp !== this.stackPointer) throw new Error(`memory-image.ts: the stack pointer is at ${sp}, not at ${this.stackPointer} as between calls: a call into Python is still live`);
  }
}
