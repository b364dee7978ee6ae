// Where a benchmark process's memory is, sampled while it works: Node's own counts (process.memoryUsage: the JS
// heap, and `arrayBuffers`, the typed arrays' bytes outside it: the CPU backend's activations), the CPU arena's
// memories (their size, and the bytes their blocks hold: weights, KV caches, row blocks; the rest is the kernels'
// scratch and freed blocks), and the resident bytes by kind of mapping from /proc/self/smaps: malloc's [heap] (where
// glibc puts the main thread's allocations under its mmap threshold), anonymous maps (the arena's memories, larger
// allocations, other threads' malloc arenas) and the rest (files, stacks). bench/scale-step.ts --trace-memory writes these as
// JSON lines, for docs/scale.md's account of a step's peak.

import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { cpuArena } from '../src/backend/cpu-arena.js';

const GIB = 2 ** 30;

export interface MemorySample {
  what: string;
  seconds: number;
  rssGiB: number;
  heapUsedGiB: number;
  arrayBuffersGiB: number;
  arenaGiB: number; // the arena's memories' sizes together
  arenaHeldGiB: number; // the bytes their blocks hold
  residentGiB: { heap: number; anonymous: number; other: number }; // /proc/self/smaps, by mapping
}

/** Resident bytes by kind of mapping (Linux; zeros elsewhere). */
function residentByMapping(): MemorySample['residentGiB'] {
  const out = { heap: 0, anonymous: 0, other: 0 };
  if (!existsSync('/proc/self/smaps')) return out;
  let kind: keyof typeof out = 'other';
  for (const line of readFileSync('/proc/self/smaps', 'utf8').split('\n')) {
    const header = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (header) kind = header[1] === '[heap]' ? 'heap' : header[1] === '' ? 'anonymous' : 'other';
    else if (line.startsWith('Rss:')) out[kind] += (Number(line.split(/\s+/)[1]) * 1024) / GIB;
  }
  return out;
}

export function memorySample(what: string, started: number): MemorySample {
  const usage = process.memoryUsage();
  const arena = cpuArena();
  const memories = Array.from({ length: arena.count }, (_, i) => i);
  return {
    what,
    seconds: (performance.now() - started) / 1000,
    rssGiB: usage.rss / GIB,
    heapUsedGiB: usage.heapUsed / GIB,
    arrayBuffersGiB: usage.arrayBuffers / GIB,
    arenaGiB: memories.reduce((n, i) => n + arena.memory(i).buffer.byteLength, 0) / GIB,
    arenaHeldGiB: memories.reduce((n, i) => n + arena.heldBytes(i), 0) / GIB,
    residentGiB: residentByMapping(),
  };
}

/** Appends samples to a JSON-lines file, at most one every `everyMs` unless forced (a phase's end). */
export class MemoryTrace {
  private readonly started = performance.now();
  private last = -Infinity;

  constructor(private readonly file: string, private readonly everyMs = 2000) {}

  sample(what: string, force = false): void {
    const now = performance.now();
    if (!force && now - this.last < this.everyMs) return;
    this.last = now;
    appendFileSync(this.file, `${JSON.stringify(memorySample(what, this.started))}\n`);
  }
}
