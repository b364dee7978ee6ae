// The sampling rule shared by both backends; kernels/sample.wgsl implements the same steps.
//
// Replay (DESIGN.md rule 2): the uniform draw for a token is a pure function of (seed, requestId, position),
// so a sequence's tokens never depend on which other sequences share its batch.

import type { SampleRow } from './backend.js';

/** Words per row of a packed SampleRow (kernels/sample.wgsl's RowParams). */
export const SAMPLE_ROW_WORDS = 8;
/** Where a row's token automaton (automaton-mask.ts) sits in its packed row; sample.wgsl does not read them. */
export const ROW_STATE_WORD = 5;
export const ROW_REMAINING_WORD = 6;
export const ROW_TABLE_WORD = 7;
export const NO_AUTOMATON = 0xffffffff; // in the table word: the row is not masked

/**
 * Rows as sample.wgsl's RowParams: temperature, topP (f32 bits), seed, requestId, position, then the row's
 * automaton: state, tokens left at step 0, its table's word offset (NO_AUTOMATON without one).
 */
export function packSampleRows(rows: readonly SampleRow[]): Uint32Array {
  const words = new Uint32Array(rows.length * SAMPLE_ROW_WORDS);
  const floats = new Float32Array(words.buffer);
  rows.forEach((r, m) => {
    const at = m * SAMPLE_ROW_WORDS;
    floats[at] = r.temperature;
    floats[at + 1] = r.topP;
    words[at + 2] = r.seed >>> 0;
    words[at + 3] = r.requestId >>> 0;
    words[at + 4] = r.position >>> 0;
    words[at + ROW_STATE_WORD] = (r.automaton?.state ?? 0) >>> 0;
    words[at + ROW_REMAINING_WORD] = (r.automaton?.remaining ?? 0) >>> 0;
    words[at + ROW_TABLE_WORD] = r.automaton ? r.automaton.at >>> 0 : NO_AUTOMATON;
  });
  return words;
}

/** lowbias32 (Chris Wellons): a full-avalanche 32-bit integer mixer. */
export function mix32(x: number): number {
  x ^= x >>> 16;
  x = Math.imul(x, 0x7feb352d);
  x ^= x >>> 15;
  x = Math.imul(x, 0x846ca68b);
  x ^= x >>> 16;
  return x >>> 0;
}

export function hashU32(seed: number, requestId: number, position: number): number {
  return mix32((hashPrefix(seed, requestId) ^ position) >>> 0);
}

/** The part of hashU32 that does not depend on the position (hoisted out of loops over positions). */
export function hashPrefix(seed: number, requestId: number): number {
  return mix32((mix32((seed ^ 0x9e3779b9) >>> 0) ^ requestId) >>> 0);
}

/** Uniform in [0, 1) with 24 bits: exact in f32 on both backends. */
export function uniform01(seed: number, requestId: number, position: number): number {
  return (hashU32(seed, requestId, position) >>> 8) / 16777216;
}

/** Bisection steps that locate the top-p probability threshold. */
export const TOP_P_BISECTION_STEPS = 24;

/**
 * One token from one row of logits.
 * - greedy (temperature <= 0): argmax over allowed tokens, lowest index on ties.
 * - else p_v = exp((logit_v - max) / temperature) over allowed tokens (unnormalised, max 1); top-p keeps the
 *   tokens with p_v >= threshold, where threshold is the largest value (found by bisection on [0, 1]) whose
 *   kept mass is >= topP of the total; the token is the first v whose cumulative kept mass exceeds u * kept mass.
 */
export function sampleRow(logits: Float32Array, row: SampleRow, allowed?: (v: number) => boolean): number {
  const V = logits.length;
  const ok = allowed ?? (() => true);
  let best = -1;
  let max = -Infinity;
  for (let v = 0; v < V; v++) {
    if (ok(v) && (best < 0 || logits[v]! > max)) {
      best = v;
      max = logits[v]!;
    }
  }
  if (best < 0) throw new Error('populora: sampling: the token mask allows no token in this row');
  if (row.temperature <= 0) return best;

  const p = new Float32Array(V);
  let total = 0;
  for (let v = 0; v < V; v++) {
    p[v] = ok(v) ? Math.exp((logits[v]! - max) / row.temperature) : 0;
    total += p[v]!;
  }
  let threshold = 0;
  if (row.topP < 1) {
    const target = row.topP * total;
    let lo = 0;
    let hi = 1;
    for (let i = 0; i < TOP_P_BISECTION_STEPS; i++) {
      const mid = (lo + hi) / 2;
      let mass = 0;
      for (let v = 0; v < V; v++) if (p[v]! >= mid) mass += p[v]!;
      if (mass >= target) lo = mid;
      else hi = mid;
    }
    threshold = lo;
  }
  let kept = 0;
  let last = best;
  for (let v = 0; v < V; v++) {
    if (p[v]! > 0 && p[v]! >= threshold) {
      kept += p[v]!;
      last = v;
    }
  }
  const r = uniform01(row.seed, row.requestId, row.position) * kept;
  let cumulative = 0;
  for (let v = 0; v < V; v++) {
    if (p[v]! > 0 && p[v]! >= threshold) {
      cumulative += p[v]!;
      if (cumulative > r) return v;
    }
  }
  return last;
}
