// Token masks from token automata, as the device computes them (kernels/token_mask.wgsl; this is its CPU twin): a
// decode loop under a grammar keeps each row's automaton state on the device and derives the row's mask from a
// table uploaded once, so no mask is computed on the host between readbacks. src/model/token-automaton.ts builds
// and packs the tables; the rule is the host mask's (grammar.ts tokenMask).
//
// A packed table (i32 words, at a word offset `at` in a tensor holding several end to end):
//   header [8]: S (states), C (token columns), V (vocabulary), eos, 4 words of 0
//   column [V]: token v's column in next, -1 for a token never allowed (no text, outside the grammar, EOS)
//   complete [S]: 1 where end-of-sequence may come
//   toComplete [S]: tokens (EOS not counted) that complete the output from the state
//   next [S, C]: the state after token column c's text, -1 where the text cannot follow
// Token v is allowed in state s with R tokens left (v included) iff v = eos and complete[s], or
// n = next[s, column[v]] >= 0 and toComplete[n] + 1 <= R - 1 (after v, R - 1 tokens must hold the rest and EOS).
//
// A row's automaton lives in its sample row (sampling.ts packSampleRows, SampleRow.automaton): its state (-1: a
// token the automaton did not allow was taken; nothing is allowed then), its tokens left at the run's step 0, and
// its table's offset (NO_AUTOMATON: the row is not masked).

import { NO_AUTOMATON, ROW_REMAINING_WORD, ROW_STATE_WORD, ROW_TABLE_WORD, SAMPLE_ROW_WORDS } from './sampling.js';

export const AUTOMATON_HEADER_WORDS = 8;

/** Where the sections of the table at `at` start, and its sizes. */
export function tableSections(tables: Int32Array, at: number) {
  const [S, C, V, eos] = [tables[at]!, tables[at + 1]!, tables[at + 2]!, tables[at + 3]!];
  const column = at + AUTOMATON_HEADER_WORDS;
  const complete = column + V;
  const toComplete = complete + S;
  const next = toComplete + S;
  return { S, C, V, eos, column, complete, toComplete, next, end: next + S * C };
}

/** The state after token v (EOS leaves it; -1 once the token was not allowed). */
export function advanceState(tables: Int32Array, at: number, state: number, v: number): number {
  const t = tableSections(tables, at);
  if (state < 0 || v < 0 || v >= t.V) return -1;
  if (v === t.eos) return state;
  const c = tables[t.column + v]!;
  return c < 0 ? -1 : tables[t.next + state * t.C + c]!;
}

/** Writes the mask of state `state` with `remaining` tokens left into words [ceil(V / 32)] (cleared first). */
export function stateMask(tables: Int32Array, at: number, state: number, remaining: number, words: Uint32Array): void {
  const t = tableSections(tables, at);
  words.fill(0);
  if (state < 0) return;
  for (let v = 0; v < t.V; v++) {
    const c = tables[t.column + v]!;
    const n = c < 0 ? -1 : tables[t.next + state * t.C + c]!;
    const ok = v === t.eos ? tables[t.complete + state] === 1 : n >= 0 && tables[t.toComplete + n]! + 2 <= remaining;
    if (ok) words[v >>> 5] = words[v >>> 5]! | (1 << (v & 31));
  }
}

/**
 * kernels/token_mask.wgsl on the CPU: each masked row of `rows` (packed sample rows, [M, 8] words) advances its
 * state by its previous token (`tokens[m]`, at step > 0) and gets its mask; an unmasked row allows every token.
 * Returns the masks [M, ceil(V / 32)].
 */
export function automatonMasks(tables: Int32Array, rows: Int32Array, M: number, V: number, step: number, tokens: Int32Array): Int32Array {
  const words = Math.ceil(V / 32);
  const masks = new Int32Array(M * words).fill(-1);
  const bits = new Uint32Array(masks.buffer);
  for (let m = 0; m < M; m++) {
    const at = rows[m * SAMPLE_ROW_WORDS + ROW_TABLE_WORD]! >>> 0;
    if (at === NO_AUTOMATON) continue;
    let state = rows[m * SAMPLE_ROW_WORDS + ROW_STATE_WORD]!;
    if (step > 0) state = rows[m * SAMPLE_ROW_WORDS + ROW_STATE_WORD] = advanceState(tables, at, state, tokens[m]!);
    stateMask(tables, at, state, rows[m * SAMPLE_ROW_WORDS + ROW_REMAINING_WORD]! - step, bits.subarray(m * words, (m + 1) * words));
  }
  return masks;
}
