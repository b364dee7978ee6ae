// The arith grammar (grammar.ts) compiled to a token automaton (src/model/token-automaton.ts), so its masks can be
// computed on the device: the recognizer states reachable from a format's start over the vocabulary's token texts,
// with each token's move, whether the output is complete, and the characters that complete it. Built once per
// (format, vocabulary) and cached: the engine asks for it at every generation.
//
// Two passes keep it cheap for a large vocabulary: the character-level states over the format's alphabet first
// (every character a token may hold that the grammar can accept), then tokens as walks over those, from the start
// state outwards, so only states a token sequence reaches become automaton states.

import { checkAutomatonSize, type TokenAutomaton } from '../../model/token-automaton.js';
import type { TokenTexts } from '../../model/token-texts.js';
import { alphabet, charactersToComplete, isComplete, scan, step, type Format, type RecognizerState } from './grammar.js';

/** Character-level states: each state's move on each alphabet character (-1: cannot follow). */
function characterStates(format: Format, chars: string): { states: RecognizerState[]; moves: Int32Array[] } {
  const states = [scan(format, '')!];
  const ids = new Map([[JSON.stringify(states[0]), 0]]);
  const moves: Int32Array[] = [];
  for (let i = 0; i < states.length; i++) {
    const row = new Int32Array(chars.length).fill(-1);
    [...chars].forEach((c, k) => {
      const to = step(format, states[i]!, c);
      if (to === null) return;
      const key = JSON.stringify(to);
      if (!ids.has(key)) (ids.set(key, states.length), states.push(to));
      row[k] = ids.get(key)!;
    });
    moves.push(row);
  }
  return { states, moves };
}

/** The automaton of `format` over `vocab`'s token texts; `name` (the format's, e.g. "proposal/deduce") is for errors. */
export function compileFormat(name: string, format: Format, vocab: TokenTexts): TokenAutomaton {
  const where = `grammar ${name}`;
  const chars = alphabet(format);
  const { states: recognizer, moves } = characterStates(format, chars);
  const V = vocab.texts.length;

  // Tokens the grammar may take somewhere: non-empty texts of alphabet characters only (EOS is handled apart).
  const candidates: number[] = [];
  const spellings: number[][] = [];
  vocab.texts.forEach((text, id) => {
    const spelling = [...text].map((c) => chars.indexOf(c));
    if (id === vocab.eos || spelling.length === 0 || spelling.includes(-1)) return;
    candidates.push(id);
    spellings.push(spelling);
  });
  const K = candidates.length;

  // Token-level states, breadth first from the start: stateOf maps a character-level state to its automaton state.
  const stateOf = new Map<number, number>([[0, 0]]);
  const characterOf = [0];
  const rows: Int32Array[] = [];
  for (let s = 0; s < characterOf.length; s++) {
    checkAutomatonSize(where, characterOf.length, K, V); // (a bound: the columns no state takes are dropped below)
    const row = new Int32Array(K).fill(-1);
    spellings.forEach((spelling, k) => {
      let at = characterOf[s]!;
      for (let i = 0; i < spelling.length && at >= 0; i++) at = moves[at]![spelling[i]!]!;
      if (at < 0) return;
      if (!stateOf.has(at)) (stateOf.set(at, characterOf.length), characterOf.push(at));
      row[k] = stateOf.get(at)!;
    });
    rows.push(row);
  }

  // Columns: the candidates some state takes.
  const S = characterOf.length;
  const kept = candidates.map((_, k) => k).filter((k) => rows.some((row) => row[k]! >= 0));
  const C = kept.length;
  checkAutomatonSize(where, S, C, V);
  const columns = new Int32Array(V).fill(-1);
  kept.forEach((k, c) => (columns[candidates[k]!] = c));
  const next = new Int32Array(S * C);
  rows.forEach((row, s) => kept.forEach((k, c) => (next[s * C + c] = row[k]!)));
  const stateAt = (s: number) => recognizer[characterOf[s]!]!;
  return {
    name: `arith ${name}`,
    vocabSize: V,
    eos: vocab.eos,
    states: S,
    columns,
    width: C,
    next,
    complete: Uint8Array.from({ length: S }, (_, s) => (isComplete(format, stateAt(s)) ? 1 : 0)),
    toComplete: Int32Array.from({ length: S }, (_, s) => charactersToComplete(format, stateAt(s))),
  };
}

const compiled = new WeakMap<TokenTexts, Map<string, TokenAutomaton>>();

/** compileFormat, once per (format, vocabulary): a run's generations share one vocabulary object. */
export function formatAutomaton(name: string, format: Format, vocab: TokenTexts): TokenAutomaton {
  const byFormat = compiled.get(vocab) ?? new Map<string, TokenAutomaton>();
  compiled.set(vocab, byFormat);
  const key = JSON.stringify(format);
  if (!byFormat.has(key)) byFormat.set(key, compileFormat(name, format, vocab));
  return byFormat.get(key)!;
}
