// A grammar compiled to the token level (XGrammar-style): a table of the states a recognizer reaches over the
// vocabulary's token texts, so a token mask is a lookup instead of a scan of the text so far. generate() uploads
// the tables once and the device computes each step's masks from them (kernels/token_mask.wgsl), which lets masked
// generation take the device-resident decode loop. A domain compiles its grammar into one
// (src/domains/arith/grammar-automaton.ts); the rule is the host mask's (src/domains/arith/grammar.ts tokenMask):
// with R tokens left, token t is allowed in state s iff t is end-of-sequence and complete[s], or
// n = next[s, t] >= 0 and toComplete[n] + 1 <= R - 1.

import { AUTOMATON_HEADER_WORDS, advanceState, stateMask } from '../backend/automaton-mask.js';
import type { GenerationRequest, TokenMaskFn } from './generate.js';

/** Built once and never changed (its packed table is cached). */
export interface TokenAutomaton {
  readonly name: string; // what it recognises, for errors: "arith proposal/deduce"
  readonly vocabSize: number; // V
  readonly eos: number;
  readonly states: number; // S; state 0 is the start
  readonly columns: Int32Array; // [V] token → its column of next; -1: never allowed (no text, EOS, no state takes it)
  readonly width: number; // C, the columns
  readonly next: Int32Array; // [S, C] the state after the column's token text, -1 where it cannot follow
  readonly complete: Uint8Array; // [S] 1 where the output is whole (end-of-sequence allowed)
  readonly toComplete: Int32Array; // [S] tokens, end-of-sequence not counted, that complete the output from here
}

/** Most table entries (S × C + V + 2S words) of one automaton: 64 MiB, well within a device's storage binding. */
export const MAX_AUTOMATON_WORDS = 16 * 2 ** 20;

/** Throws, naming the automaton, when its table is past MAX_AUTOMATON_WORDS. */
export function checkAutomatonSize(name: string, states: number, width: number, vocabSize: number): void {
  const words = AUTOMATON_HEADER_WORDS + vocabSize + 2 * states + states * width;
  if (words > MAX_AUTOMATON_WORDS) {
    throw new RangeError(`${name}: its token automaton has ${states} states x ${width} token columns (${words} table words), over the limit of ${MAX_AUTOMATON_WORDS}; decode this format with a function mask (mask: TokenMaskFn, the host loop) or simplify its grammar`);
  }
}

const packedTables = new WeakMap<TokenAutomaton, Int32Array>();

/** The table as the device reads it (src/backend/automaton-mask.ts's layout); packed once per automaton. */
export function packAutomaton(a: TokenAutomaton): Int32Array {
  if (!packedTables.has(a)) packedTables.set(a, pack(a));
  return packedTables.get(a)!;
}

function pack(a: TokenAutomaton): Int32Array {
  const { states: S, width: C, vocabSize: V } = a;
  const packed = new Int32Array(AUTOMATON_HEADER_WORDS + V + 2 * S + S * C);
  packed.set([S, C, V, a.eos]);
  let at = AUTOMATON_HEADER_WORDS;
  for (const section of [a.columns, Int32Array.from(a.complete), a.toComplete, a.next]) {
    packed.set(section, at);
    at += section.length;
  }
  return packed;
}

/** Packed tables of several automata end to end, and the word offset of each. */
export function packAutomata(automata: readonly TokenAutomaton[]): { words: Int32Array; offsets: Map<TokenAutomaton, number> } {
  const tables = automata.map(packAutomaton);
  const words = new Int32Array(tables.reduce((n, t) => n + t.length, 0));
  const offsets = new Map<TokenAutomaton, number>();
  let at = 0;
  automata.forEach((a, i) => {
    offsets.set(a, at);
    words.set(tables[i]!, at);
    at += tables[i]!.length;
  });
  return { words, offsets };
}

/** The state after `tokens` from the start (-1 once a token was not allowed; end-of-sequence leaves the state). */
export function stateAfter(packed: Int32Array, tokens: readonly number[], at = 0): number {
  return tokens.reduce((state, token) => advanceState(packed, at, state, token), 0);
}

/**
 * The host-loop form of automaton masks (generate()'s `loop: 'host'`): request i's mask from automata[i] after the
 * tokens so far (null: free text). The same table and rule the device uses.
 */
export function automatonMaskFn(requests: readonly GenerationRequest[], automata: ReadonlyArray<TokenAutomaton | null>): TokenMaskFn {
  const byRequest = new Map(requests.map((r, i) => [r, automata[i] ? packAutomaton(automata[i]!) : null]));
  return (request, generated) => {
    const table = byRequest.get(request) ?? null;
    if (table === null) return null;
    const words = new Uint32Array(Math.ceil(table[2]! / 32));
    stateMask(table, 0, stateAfter(table, generated), request.maxTokens - generated.length, words);
    return words;
  };
}
