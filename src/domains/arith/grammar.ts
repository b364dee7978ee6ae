// Grammar-constrained decoding for the toy domain: a format is a sequence of fields (an expression, a signed
// integer, a literal separator); a recognizer steps through text one character at a time. The token mask lets a
// token through only if its text keeps the output a viable prefix that can still be completed within the
// remaining token budget, and lets end-of-sequence through only when the output is complete. So every proposal
// and answer is well-formed, even from a random model, and never cut off mid-expression.

import type { TokenTexts } from '../../model/token-texts.js';
import { LIMITS } from './expr.js';

export { tokenTexts, type TokenTexts } from '../../model/token-texts.js'; // where src/train/pretrain.ts looks for them

export type Field = { kind: 'expr' } | { kind: 'int'; digits: number } | { kind: 'literal'; text: string };
export type Format = readonly Field[];

/** Most open parentheses at once (keeps expressions within the depth limit's reach). */
const MAX_OPEN_PARENS = 4;

interface ExprState {
  expectOperand: boolean;
  numberDigits: number; // digits of the number being read (0: not in a number)
  leadingZero: boolean;
  halfSlash: boolean; // read one "/" of "//"
  open: number;
  length: number;
}

interface IntState {
  negative: boolean;
  digits: number;
  leadingZero: boolean;
}

/** Where a recognizer stands: the field index, and the field's own state (or characters read of a literal). */
export interface RecognizerState {
  field: number;
  expr: ExprState | null;
  int: IntState | null;
  literalRead: number;
}

const isDigit = (c: string) => c >= '0' && c <= '9';

function startField(format: Format, field: number): RecognizerState {
  const f = format[field];
  return {
    field,
    expr: f?.kind === 'expr' ? { expectOperand: true, numberDigits: 0, leadingZero: false, halfSlash: false, open: 0, length: 0 } : null,
    int: f?.kind === 'int' ? { negative: false, digits: 0, leadingZero: false } : null,
    literalRead: 0,
  };
}

function stepExpr(s: ExprState, c: string): ExprState | null {
  if (s.length >= LIMITS.length) return null;
  const next = { ...s, length: s.length + 1 };
  if (s.halfSlash) return c === '/' ? { ...next, halfSlash: false, expectOperand: true } : null;
  if (s.expectOperand) {
    if (isDigit(c)) return { ...next, expectOperand: false, numberDigits: 1, leadingZero: c === '0' };
    if (c === 'x') return { ...next, expectOperand: false, numberDigits: 0 };
    if (c === '(' && s.open < MAX_OPEN_PARENS) return { ...next, open: s.open + 1 };
    return null;
  }
  if (isDigit(c)) return s.numberDigits > 0 && !s.leadingZero && s.numberDigits < LIMITS.numberDigits ? { ...next, numberDigits: s.numberDigits + 1 } : null;
  if (c === '+' || c === '-' || c === '*' || c === '%') return { ...next, expectOperand: true, numberDigits: 0 };
  if (c === '/') return { ...next, halfSlash: true, numberDigits: 0 };
  if (c === ')' && s.open > 0) return { ...next, open: s.open - 1, numberDigits: 0 };
  return null;
}

function stepInt(s: IntState, c: string, maxDigits: number): IntState | null {
  if (c === '-') return s.digits === 0 && !s.negative ? { ...s, negative: true } : null;
  if (!isDigit(c)) return null;
  if (s.digits === 0) return c === '0' && s.negative ? null : { ...s, digits: 1, leadingZero: c === '0' }; // no "-0"
  return !s.leadingZero && s.digits < maxDigits ? { ...s, digits: s.digits + 1 } : null;
}

function fieldComplete(format: Format, s: RecognizerState): boolean {
  const f = format[s.field];
  if (f === undefined) return true;
  if (f.kind === 'expr') return !s.expr!.expectOperand && !s.expr!.halfSlash && s.expr!.open === 0;
  if (f.kind === 'int') return s.int!.digits > 0;
  return s.literalRead === f.text.length;
}

/** Every character `step` may accept in some state of the format (any other character never follows). */
export function alphabet(format: Format): string {
  const chars = new Set('0123456789');
  for (const f of format) [...(f.kind === 'expr' ? 'x()+-*/%' : f.kind === 'int' ? '-' : f.text)].forEach((c) => chars.add(c));
  return [...chars].join('');
}

/** The next state after one character, or null if the character cannot follow. */
export function step(format: Format, s: RecognizerState, c: string): RecognizerState | null {
  const f = format[s.field];
  if (f === undefined) return null; // past the last field: only end-of-sequence
  // A complete field hands over to the next when the character cannot continue it (fields are separated by
  // literals that no expression or integer contains, so this never has two readings).
  const within = f.kind === 'expr' ? stepExpr(s.expr!, c) : f.kind === 'int' ? stepInt(s.int!, c, f.digits) : f.text[s.literalRead] === c ? 1 : null;
  if (within !== null) {
    if (f.kind === 'expr') return { ...s, expr: within as ExprState };
    if (f.kind === 'int') return { ...s, int: within as IntState };
    const literalRead = s.literalRead + 1;
    return literalRead === f.text.length ? startField(format, s.field + 1) : { ...s, literalRead };
  }
  return fieldComplete(format, s) && s.field + 1 < format.length ? step(format, startField(format, s.field + 1), c) : null;
}

/** Scans text from the start; null if it is not a viable prefix of the format. */
export function scan(format: Format, text: string): RecognizerState | null {
  let s: RecognizerState | null = startField(format, 0);
  for (const c of text) {
    s = step(format, s, c);
    if (s === null) return null;
  }
  return s;
}

/** True when the text is a whole sentence of the format. */
export function isComplete(format: Format, s: RecognizerState): boolean {
  return s.field >= format.length || (s.field === format.length - 1 && fieldComplete(format, s));
}

/** Fewest characters that complete the format from this state. */
export function charactersToComplete(format: Format, s: RecognizerState): number {
  const f = format[s.field];
  if (f === undefined) return 0;
  let here = 0;
  if (f.kind === 'expr') {
    const e = s.expr!;
    here = (e.halfSlash ? 2 : e.expectOperand ? 1 : 0) + e.open;
  } else if (f.kind === 'int') {
    here = s.int!.digits > 0 ? 0 : 1;
  } else {
    here = f.text.length - s.literalRead;
  }
  const rest = format.slice(s.field + 1).reduce((n, g) => n + (g.kind === 'literal' ? g.text.length : 1), 0);
  return here + rest;
}

/**
 * The bitmask of tokens that may come next: those whose text keeps the output viable and completable within
 * `remainingTokens` (end-of-sequence included), and end-of-sequence itself once the output is complete.
 */
export function tokenMask(format: Format, vocab: TokenTexts, generatedText: string, remainingTokens: number): Uint32Array {
  const state = scan(format, generatedText);
  if (state === null) throw new Error(`grammar mask: ${JSON.stringify(generatedText)} is not a viable prefix (the mask was bypassed)`);
  const mask = new Uint32Array(Math.ceil(vocab.texts.length / 32));
  const allow = (id: number) => (mask[id >>> 5]! |= 1 << (id & 31));
  if (isComplete(format, state)) allow(vocab.eos);
  vocab.texts.forEach((text, id) => {
    if (text.length === 0 || id === vocab.eos) return;
    let s: RecognizerState | null = state;
    for (const c of text) if (s !== null) s = step(format, s, c);
    // After this token, remainingTokens - 1 are left; completion needs at most one token per character, plus EOS.
    if (s !== null && charactersToComplete(format, s) + 1 <= remainingTokens - 1) allow(id);
  });
  return mask;
}

/** Fewest tokens a whole sentence of the format takes, end-of-sequence included. */
export function minimumTokens(format: Format): number {
  return charactersToComplete(format, startField(format, 0)) + 1;
}
