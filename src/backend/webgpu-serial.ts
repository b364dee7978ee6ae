// The CPU thread layout's tiling (`SERIAL` in kernels/linear.wgsl, attention.wgsl and the training kernels:
// matmul_backward, outer_product_sum, lora_shrink, lora_expand and their backwards, attention_backward_*), for
// software adapters such as lavapipe, which run a workgroup's invocations 8 at a time as one SIMD vector and its
// workgroups on the host's cores. A thread computes a register tile of `units` output columns × a tile of rows; the
// choices here decide which thread computes an output, never how its sum is ordered.

import { availableParallelism } from 'node:os';

export const SERIAL_THREADS = 64; // threads a workgroup, at most
export const MAX_SERIAL_TM = 16; // rows a tile when T > 8 (else 8; 1 for a lone row where a kernel has that variant)
export const MAX_LORA_TM = 8; // rows a tile of lora_shrink.wgsl and lora_expand_backward.wgsl (their MAX_TM)
const MAX_SERIAL_COLUMNS = 8; // the kernels' MAX_COLUMNS: a thread's columns
const HOST_CORES = availableParallelism(); // lavapipe runs a thread per core

export interface SerialTiling {
  UNITS: number; // units a thread
  SERIAL_THREADS: number; // threads a workgroup
}

/** A workgroup's threads: no more than its units need at `perThread` each (16 at least: one per tile row). */
const threadsFor = (units: number, perThread: number) => Math.min(SERIAL_THREADS, Math.max(MAX_SERIAL_TM, 2 ** Math.ceil(Math.log2(units / perThread))));

/**
 * Units a thread, and threads a workgroup, for `units` units (columns, or pairs of columns) over `tiles` row tiles:
 * a bigger register tile costs less per unit, up to 8 columns, while the dispatch still gives each core a
 * workgroup and computes few units past the end (a 48-column LoRA shrink: 4 a thread in 16 threads, not 8 in 16,
 * 3x faster on lavapipe at 32 adapters). Measured on lavapipe: 8 units a thread in 32 threads beat 4 in 64 on the
 * same outputs. `fixed` (tests) sets the units a thread instead.
 */
export function serialTiling(units: number, paired: boolean, tiles: number, fixed?: number): SerialTiling {
  const most = MAX_SERIAL_COLUMNS / (paired ? 2 : 1);
  let perThread = fixed !== undefined ? Math.min(fixed, most) : most;
  // A workgroup's units past the end are computed too: no more of them than rounding `units` up to a power of two.
  const wasteful = (n: number) => threadsFor(units, n) * n > Math.max(2 ** Math.ceil(Math.log2(units)), MAX_SERIAL_TM);
  const tooFewGroups = (n: number) => Math.ceil(units / (threadsFor(units, n) * n)) * tiles < HOST_CORES;
  while (fixed === undefined && perThread > 1 && (wasteful(perThread) || tooFewGroups(perThread))) perThread /= 2;
  return { UNITS: perThread, SERIAL_THREADS: threadsFor(units, perThread) };
}

/** Threads a workgroup for `items` independent threads' work (attention: one per token and head), 8 to 64. */
export const serialThreadsFor = (items: number) => Math.min(SERIAL_THREADS, Math.max(8, 2 ** Math.ceil(Math.log2(items / HOST_CORES))));

/**
 * The variant constants and workgroups of a kernel that gives each row a workgroup and a tree in its GPU layout
 * (rmsnorm, rmsnorm_backward, log_softmax; attention and attention_packed, a (token, head) a row) and each row a
 * thread in its CPU layout (SERIAL), in workgroups that give each core one where they can: a software adapter
 * spends more on a tree's barriers than on a short row (a 64-wide row: 100x, measured).
 */
export function rowKernelLayout(serial: boolean, rows: number): { constants: Record<string, number>; groups: number } {
  if (!serial) return { constants: {}, groups: rows };
  const threads = serialThreadsFor(rows);
  return { constants: { SERIAL: 1, SERIAL_THREADS: threads }, groups: Math.ceil(rows / threads) };
}
