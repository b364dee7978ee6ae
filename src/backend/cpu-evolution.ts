// CPU twins of the evolution kernels (kernels/evolve_*.wgsl): float64 sums, the same addressing. The SVD
// crossover's Gram and combine run stacked-vectors.ts (a WebAssembly kernel), as the host operator does.

import { assert, type GramOfVectors, type SlotMutation, type Tensor } from './backend.js';
import { f32Of, i32Of } from './cpu-tensor.js';
import { perturbInPlace } from './noise.js';
import { combine, gram, type VectorRef } from './stacked-vectors.js';

/** x, which the operator writes: never an f16 weight (cpu-dense.ts keeps read-only copies of those). */
function writable(x: Tensor, what: string): Float32Array {
  assert(x.dtype !== 'f16', `${what}: f16 tensors are read-only on the CPU backend; evolve f32 ones`);
  return f32Of(x);
}

function slotRegion(x: Tensor, slotSize: number, slot: number, what: string): Float32Array {
  const xs = writable(x, what);
  assert(Number.isInteger(slot) && slot >= 0 && (slot + 1) * slotSize <= xs.length, `${what}: slot ${slot} of ${slotSize} is outside a tensor of ${xs.length}`);
  return xs.subarray(slot * slotSize, (slot + 1) * slotSize);
}

export function mutateSlotInto(x: Tensor, slotSize: number, child: number, parent: number, sums: Tensor, o: SlotMutation): void {
  const scale = o.sigma * Math.sqrt(f32Of(sums)[0]! / slotSize);
  const region = slotRegion(x, slotSize, child, 'mutateSlotInto');
  if (child !== parent) region.set(slotRegion(x, slotSize, parent, 'mutateSlotInto'));
  perturbInPlace(region, scale, o.seed, o.stream, o.fraction);
}

export function mixSlotsInPlace(x: Tensor, slotSize: number, outSlot: number, slot1: number, slot2: number, divisor: number, weights: Tensor, wFrom: number, R: number): void {
  assert(outSlot !== slot1 && outSlot !== slot2, 'mixSlotsInPlace: the child slot must differ from its parents');
  const [out, x1, x2] = [outSlot, slot1, slot2].map((s) => slotRegion(x, slotSize, s, 'mixSlotsInPlace')) as [Float32Array, Float32Array, Float32Array];
  const w = f32Of(weights).subarray(wFrom, wFrom + 2 * R);
  assert(w.length === 2 * R, `mixSlotsInPlace: ${w.length} weights from ${wFrom}, not 2 · ${R}`);
  // k = floor(i / divisor) % R, counted along instead of divided out.
  for (let i = 0, k = 0, left = divisor; i < slotSize; i++) {
    out[i] = w[k]! * x1[i]! + w[R + k]! * x2[i]!;
    if (--left === 0) [left, k] = [divisor, k + 1 === R ? 0 : k + 1];
  }
}

export function gramsInto(out: Tensor, bases: Tensor, grams: readonly GramOfVectors[]): void {
  const [o, allBases] = [f32Of(out), i32Of(bases)];
  for (const { x, first, n, length, stride, outOffset } of grams) {
    const b = allBases.subarray(first, first + n);
    assert(outOffset + n * n <= o.length && b.length === n, `gramsInto: ${n}x${n} at ${outOffset} does not fit ${o.length}, or fewer than ${n} bases from ${first}`);
    const xs = f32Of(x);
    o.set(gram(Array.from(b, (base): VectorRef => [xs, base]), length, stride), outOffset);
  }
}

/** The child's vectors may interleave with the parents' but not share an element with them (checked: the child has its own slot). */
export function combineInPlace(x: Tensor, bases: Tensor, basesFrom: number, mix: Tensor, mixFrom: number, n: number, keep: number, length: number, stride: number): void {
  const xs = writable(x, 'combineInPlace');
  const b = i32Of(bases).subarray(basesFrom, basesFrom + n + keep);
  const m = f32Of(mix).subarray(mixFrom, mixFrom + n * keep);
  assert(b.length === n + keep && m.length === n * keep, `combineInPlace: ${b.length} bases and a ${m.length}-element mix for n ${n}, keep ${keep}`);
  const vectors = Array.from(b, (base): VectorRef => [xs, base]);
  combine(vectors.slice(0, n), m, vectors.slice(n), length, stride);
}
