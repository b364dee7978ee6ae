// The judge outside the program's reach: a value a program returned, read straight out of the interpreter's
// WebAssembly memory by JavaScript and turned into its canonical text (repr's text) and type name here. No Python
// code runs while it reads, so nothing the program did inside the interpreter (rebinding the sandbox's functions,
// a trace hook, an audit hook, a finalizer, a patched repr) takes part: only exact builtin types are read (their
// type pointer must be one of the literal types'), from the objects' own memory, with the C routines that walk a
// dict and a set (pure reads) and CPython's table of printable characters.
//
// The layouts are CPython 3.14's on wasm32 (4-byte pointers, 30-bit digits). `ValueReader.create` checks them at
// load against values whose repr Python itself gave, and refuses to start if this Pyodide lays objects out
// otherwise. The limits are the sandbox's: MAX_NESTING levels, MAX_RESULT_CHARS characters, 4,300 digits.

export const MAX_NESTING = 100;
export const MAX_RESULT_CHARS = 10_000;
const MAX_INT_DIGITS = 4_300; // CPython's int_max_str_digits default
const DIGIT_BITS = 30;

export type ValueReading =
  | { ok: true; text: string; typeName: string }
  | { ok: false; reason: 'not-literal' | 'recursion' | 'output-too-large' | 'tampered'; detail: string };

/** What the reader needs of Pyodide's Emscripten module. */
export interface CRuntime {
  HEAPU8: Uint8Array;
  _PyDict_Next(dict: number, position: number, key: number, value: number): number;
  __PySet_NextEntry(set: number, position: number, key: number, hash: number): number;
  __PyUnicode_IsPrintable(codePoint: number): number;
  stackSave(): number;
  stackRestore(pointer: number): void;
  stackAlloc(bytes: number): number;
  [symbol: string]: unknown;
}

type Kind = 'int' | 'bool' | 'float' | 'complex' | 'str' | 'bytes' | 'NoneType' | 'list' | 'tuple' | 'dict' | 'set';
const CONTAINERS = new Set<Kind>(['list', 'tuple', 'dict', 'set']);
const TYPE_SYMBOLS: Record<Kind, string> = {
  int: '_PyLong_Type', bool: '_PyBool_Type', float: '_PyFloat_Type', complex: '_PyComplex_Type', str: '_PyUnicode_Type', bytes: '_PyBytes_Type',
  NoneType: '__PyNone_Type', list: '_PyList_Type', tuple: '_PyTuple_Type', dict: '_PyDict_Type', set: '_PySet_Type',
};

// Offsets into objects (wasm32): ob_refcnt 0, ob_type 4, ob_size or the value after.
const OB_TYPE = 4;
const OB_SIZE = 8;
const LONG_TAG = 8; // _PyLongValue.lv_tag: sign in bits 0-1 (0 positive, 1 zero, 2 negative), digit count from bit 3
const LONG_DIGITS = 12;
const FLOAT_VALUE = 8;
const COMPLEX_REAL = 8;
const COMPLEX_IMAG = 16;
const BYTES_DATA = 16; // after ob_shash
const LIST_ITEMS = 12;
const TUPLE_ITEMS = 16; // after ob_hash (3.14 caches a tuple's hash)
const STR_LENGTH = 8;
const STR_STATE = 16; // interned:2, kind:3, compact:1, ascii:1
const STR_ASCII_DATA = 20; // sizeof(PyASCIIObject)
const STR_COMPACT_DATA = 28; // sizeof(PyCompactUnicodeObject)
const STR_DATA_POINTER = 28; // PyUnicodeObject.data, for a string that is not compact
const TYPE_NAME = 12; // PyTypeObject.tp_name

/** A read that left the heap or met a malformed object: the program wrote into the interpreter's memory. */
class Tampered extends Error {}

class Refusal extends Error {
  constructor(readonly reason: 'not-literal' | 'recursion' | 'output-too-large', detail: string) {
    super(detail);
  }
}

export class ValueReader {
  private readonly kinds = new Map<number, Kind>();
  private readonly printable = new Map<number, boolean>();
  private readonly none: number;

  private constructor(private readonly c: CRuntime) {
    for (const [kind, symbol] of Object.entries(TYPE_SYMBOLS) as Array<[Kind, string]>) {
      const address = c[symbol];
      if (typeof address !== 'number') throw new Error(`python-values.ts: Pyodide does not export ${symbol}; the value reader must be reviewed for this version`);
      this.kinds.set(address, kind);
    }
    this.none = c.__Py_NoneStruct as number;
  }

  /**
   * A reader for this interpreter, checked against values Python itself printed: `sample` is the address of a list
   * of values, `expected` their reprs and type names (as the sandbox computes them at load).
   */
  static create(c: CRuntime, sample: number, expected: Array<[string, string]>): ValueReader {
    const reader = new ValueReader(c);
    const items = reader.children(sample, 'list');
    if (items.length !== expected.length) throw new Error(`python-values.ts: the layout check read ${items.length} values, not ${expected.length}`);
    items.forEach((address, i) => {
      const reading = reader.read(address);
      const [text, typeName] = expected[i]!;
      if (!reading.ok || reading.text !== text || reading.typeName !== typeName) {
        throw new Error(`python-values.ts: this Pyodide lays out objects otherwise than the reader expects: read ${JSON.stringify(reading)} where Python gives ${text} (${typeName})`);
      }
    });
    return reader;
  }

  /** The canonical text and type name of the value at `address`, or why it is not a literal the judge accepts. */
  read(address: number): ValueReading {
    const stack = this.c.stackSave();
    try {
      const text = this.text(address);
      return { ok: true, text, typeName: this.typeName(address, 0) };
    } catch (error) {
      if (error instanceof Refusal) return { ok: false, reason: error.reason, detail: error.message };
      if (error instanceof Tampered || error instanceof WebAssembly.RuntimeError || error instanceof RangeError) {
        return { ok: false, reason: 'tampered', detail: `the result cannot be read as Python objects (${(error as Error).message}): the program wrote into the interpreter` };
      }
      throw error;
    } finally {
      this.c.stackRestore(stack);
    }
  }

  // ---- memory ----------------------------------------------------------------------------------------------------

  private get heap(): DataView {
    const bytes = this.c.HEAPU8;
    return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  private u32(address: number): number {
    if (address < 0 || address % 4 !== 0 || address + 4 > this.c.HEAPU8.length) throw new Tampered(`address ${address}`);
    return this.heap.getUint32(address, true);
  }

  private f64(address: number): number {
    if (address < 0 || address + 8 > this.c.HEAPU8.length) throw new Tampered(`address ${address}`);
    return this.heap.getFloat64(address, true);
  }

  private bytes(address: number, length: number): Uint8Array {
    if (address < 0 || length < 0 || address + length > this.c.HEAPU8.length) throw new Tampered(`${length} bytes at ${address}`);
    return this.c.HEAPU8.subarray(address, address + length);
  }

  /** The literal kind of the object at `address`, or a refusal naming its type. */
  private kind(address: number): Kind {
    if (address === 0) throw new Tampered('a null object');
    const type = this.u32(address + OB_TYPE);
    const kind = this.kinds.get(type);
    if (kind === undefined) throw new Refusal('not-literal', `the result holds a ${this.typeNameOf(type)}, which is not a Python literal`);
    return kind;
  }

  /** `type.__name__` of a type the reader does not accept: tp_name after its last dot. */
  private typeNameOf(type: number): string {
    const name = this.u32(type + TYPE_NAME);
    const chars = this.bytes(name, Math.min(200, this.c.HEAPU8.length - name));
    const end = chars.indexOf(0);
    const full = new TextDecoder('utf-8', { fatal: false }).decode(chars.subarray(0, end < 0 ? chars.length : end));
    return full.slice(full.lastIndexOf('.') + 1);
  }

  /** The addresses of a container's items (a dict's keys and values alternate), in iteration order. */
  private children(address: number, kind: Kind): number[] {
    if (kind === 'list' || kind === 'tuple') {
      const size = this.u32(address + OB_SIZE);
      const items = kind === 'list' ? this.u32(address + LIST_ITEMS) : address + TUPLE_ITEMS;
      if (size > this.c.HEAPU8.length / 4) throw new Tampered(`a ${kind} of ${size} items`);
      return Array.from({ length: size }, (_, i) => this.u32(items + 4 * i));
    }
    const out = this.c.stackAlloc(12);
    const [position, first, second] = [out, out + 4, out + 8];
    this.heap.setUint32(position, 0, true);
    const next = kind === 'dict' ? this.c._PyDict_Next : this.c.__PySet_NextEntry;
    const found: number[] = [];
    while (next(address, position, first, second)) {
      found.push(this.u32(first));
      if (kind === 'dict') found.push(this.u32(second));
      if (found.length > MAX_RESULT_CHARS) break; // more items than characters allowed: the caller refuses
    }
    return found;
  }

  // ---- canonical text, as sandbox/literals.py's _canonical writes it -----------------------------------------

  private text(root: number): string {
    const kind = this.kind(root);
    if (!CONTAINERS.has(kind)) {
      const text = this.scalarText(root, kind);
      if (text.length > MAX_RESULT_CHARS) throw new Refusal('output-too-large', `the result has ${text.length} characters; the limit is ${MAX_RESULT_CHARS}`);
      return text;
    }
    let chars = 0;
    const onPath = new Set([root]);
    const stack: Array<{ address: number; kind: Kind; items: number[]; next: number; parts: string[] }> = [{ address: root, kind, items: this.children(root, kind), next: 0, parts: [] }];
    for (;;) {
      const frame = stack[stack.length - 1]!;
      if (frame.next < frame.items.length) {
        const item = frame.items[frame.next++]!;
        const itemKind = this.kind(item);
        if (!CONTAINERS.has(itemKind)) {
          const text = this.scalarText(item, itemKind);
          chars += text.length + 2;
          if (chars > MAX_RESULT_CHARS) throw new Refusal('output-too-large', `the result has more than ${MAX_RESULT_CHARS} characters`);
          frame.parts.push(text);
          continue;
        }
        if (onPath.has(item)) throw new Refusal('not-literal', 'the result contains itself');
        if (stack.length >= MAX_NESTING) throw new Refusal('recursion', `the result nests more than ${MAX_NESTING} levels`);
        chars += 2;
        onPath.add(item);
        stack.push({ address: item, kind: itemKind, items: this.children(item, itemKind), next: 0, parts: [] });
        continue;
      }
      stack.pop();
      onPath.delete(frame.address);
      const text = containerText(frame.kind, frame.parts);
      if (stack.length === 0) return text;
      stack[stack.length - 1]!.parts.push(text);
    }
  }

  private scalarText(address: number, kind: Kind): string {
    switch (kind) {
      case 'NoneType':
        if (address !== this.none) throw new Tampered('a second None');
        return 'None';
      case 'bool':
        return this.integer(address) === 0n ? 'False' : 'True';
      case 'int':
        return this.intText(address);
      case 'float': {
        const value = this.f64(address + FLOAT_VALUE);
        if (!Number.isFinite(value)) throw new Refusal('not-literal', `${formatDouble(value, true, false)} is not a Python literal`);
        return formatDouble(value, true, false);
      }
      case 'complex':
        return this.complexText(this.f64(address + COMPLEX_REAL), this.f64(address + COMPLEX_IMAG));
      case 'str':
        return stringRepr(this.codePoints(address), (c) => this.isPrintable(c));
      case 'bytes': {
        const size = this.u32(address + OB_SIZE);
        return bytesRepr(this.bytes(address + BYTES_DATA, size));
      }
      default:
        throw new Tampered(`a ${kind} where a scalar was expected`);
    }
  }

  private integer(address: number): bigint {
    const tag = this.u32(address + LONG_TAG);
    const sign = tag & 3;
    const digits = tag >>> 3;
    if (sign === 1) return 0n;
    if (sign === 3 || digits > this.c.HEAPU8.length / 4) throw new Tampered(`an integer tag ${tag}`);
    let value = 0n;
    for (let i = digits - 1; i >= 0; i--) value = (value << BigInt(DIGIT_BITS)) | BigInt(this.u32(address + LONG_DIGITS + 4 * i));
    return sign === 2 ? -value : value;
  }

  private intText(address: number): string {
    const value = this.integer(address);
    const bits = (value < 0n ? -value : value).toString(2).length - (value === 0n ? 1 : 0);
    if (bits > 3.33 * MAX_RESULT_CHARS) throw new Refusal('output-too-large', `an integer of ${bits} bits has more digits than the limit of ${MAX_RESULT_CHARS}`);
    const text = value.toString();
    if (text.replace('-', '').length > MAX_INT_DIGITS) throw new Refusal('output-too-large', `an integer of more than ${MAX_INT_DIGITS} digits`);
    return text;
  }

  private complexText(real: number, imag: number): string {
    const text = complexRepr(real, imag);
    if (![real, imag].every(Number.isFinite)) throw new Refusal('not-literal', `${text} is not a Python literal`);
    return text;
  }

  private codePoints(address: number): Uint8Array | Uint16Array | Uint32Array {
    const length = this.u32(address + STR_LENGTH);
    const state = this.u32(address + STR_STATE);
    const width = (state >>> 2) & 7;
    const compact = (state >>> 5) & 1;
    const ascii = (state >>> 6) & 1;
    if (width !== 1 && width !== 2 && width !== 4) throw new Tampered(`a string of kind ${width}`);
    const data = compact ? address + (ascii ? STR_ASCII_DATA : STR_COMPACT_DATA) : this.u32(address + STR_DATA_POINTER);
    const raw = this.bytes(data, length * width);
    const copy = raw.slice(); // aligned, and out of the heap's way
    return width === 1 ? copy : width === 2 ? new Uint16Array(copy.buffer) : new Uint32Array(copy.buffer);
  }

  private isPrintable(codePoint: number): boolean {
    let known = this.printable.get(codePoint);
    if (known === undefined) this.printable.set(codePoint, (known = this.c.__PyUnicode_IsPrintable(codePoint) !== 0));
    return known;
  }

  // ---- type names, as sandbox/literals.py's _type_name writes them: two levels of element types ---------------

  private typeName(address: number, depth: number): string {
    const kind = this.kind(address);
    if (depth >= 2 || !CONTAINERS.has(kind)) return kind;
    const items = this.children(address, kind);
    if (items.length === 0) return kind;
    const names = (addresses: number[]) => [...new Set(addresses.map((item) => this.typeName(item, depth + 1)))].sort(byCodePoint).join('|');
    if (kind === 'dict') return `dict[${names(items.filter((_, i) => i % 2 === 0))},${names(items.filter((_, i) => i % 2 === 1))}]`;
    return `${kind}[${names(items)}]`;
  }
}

/** Python's ordering of str: by code point (JavaScript's default sort compares UTF-16 units). */
export function byCodePoint(a: string, b: string): number {
  const [x, y] = [Array.from(a), Array.from(b)];
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = x[i]!.codePointAt(0)! - y[i]!.codePointAt(0)!;
    if (d !== 0) return d;
  }
  return x.length - y.length;
}

function containerText(kind: Kind, parts: string[]): string {
  if (kind === 'dict') {
    const entries: string[] = [];
    for (let i = 0; i < parts.length; i += 2) entries.push(`${parts[i]}: ${parts[i + 1]}`);
    return `{${entries.join(', ')}}`;
  }
  if (kind === 'list') return `[${parts.join(', ')}]`;
  if (kind === 'tuple') return parts.length === 1 ? `(${parts[0]},)` : `(${parts.join(', ')})`;
  return parts.length > 0 ? `{${parts.join(', ')}}` : 'set()';
}

// ---- repr of scalars, as CPython writes them --------------------------------------------------------------------

const hex = (value: number, width: number) => value.toString(16).padStart(width, '0');

/** The quote repr() of a str or bytes uses, as CPython picks it: double only when the text has ' and no ". */
function reprQuote(units: ArrayLike<number>): number {
  let hasSingle = false;
  let hasDouble = false;
  for (let i = 0; i < units.length; i++) {
    if (units[i] === 0x27) hasSingle = true;
    else if (units[i] === 0x22) hasDouble = true;
  }
  return hasSingle && !hasDouble ? 0x22 : 0x27;
}

/** repr() of a str given its code points; `printable` is CPython's Py_UNICODE_ISPRINTABLE. */
export function stringRepr(codePoints: ArrayLike<number>, printable: (codePoint: number) => boolean): string {
  const quote = reprQuote(codePoints);
  const out: string[] = [String.fromCharCode(quote)];
  for (let i = 0; i < codePoints.length; i++) {
    const c = codePoints[i]!;
    if (c === quote || c === 0x5c) out.push('\\', String.fromCharCode(c));
    else if (c === 0x09) out.push('\\t');
    else if (c === 0x0a) out.push('\\n');
    else if (c === 0x0d) out.push('\\r');
    else if (c < 0x20 || c === 0x7f) out.push(`\\x${hex(c, 2)}`);
    else if (c < 0x7f) out.push(String.fromCharCode(c));
    else if (printable(c)) out.push(String.fromCodePoint(c));
    else if (c <= 0xff) out.push(`\\x${hex(c, 2)}`);
    else if (c <= 0xffff) out.push(`\\u${hex(c, 4)}`);
    else out.push(`\\U${hex(c, 8)}`);
  }
  out.push(String.fromCharCode(quote));
  return out.join('');
}

/** repr() of a bytes object. */
export function bytesRepr(bytes: ArrayLike<number>): string {
  const quote = reprQuote(bytes);
  const out: string[] = ['b', String.fromCharCode(quote)];
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i]!;
    if (c === quote || c === 0x5c) out.push('\\', String.fromCharCode(c));
    else if (c === 0x09) out.push('\\t');
    else if (c === 0x0a) out.push('\\n');
    else if (c === 0x0d) out.push('\\r');
    else if (c < 0x20 || c >= 0x7f) out.push(`\\x${hex(c, 2)}`);
    else out.push(String.fromCharCode(c));
  }
  out.push(String.fromCharCode(quote));
  return out.join('');
}

/**
 * CPython's PyOS_double_to_string(x, 'r', 0, flags): the shortest digits that read back as x (JavaScript's
 * shortest round-trip digits are the same digits), written as Python writes them: fixed notation for decimal
 * exponents -4 up to 15, else d.ddde±XX; `addDot0` (float repr) writes 1.0 where complex repr writes 1.
 */
export function formatDouble(x: number, addDot0: boolean, sign: boolean): string {
  const signText = x < 0 || Object.is(x, -0) ? '-' : sign ? '+' : '';
  if (Number.isNaN(x)) return `${sign ? '+' : ''}nan`;
  if (!Number.isFinite(x)) return `${signText}inf`;
  if (x === 0) return `${signText}0${addDot0 ? '.0' : ''}`;
  const [mantissa, exponent] = Math.abs(x).toExponential().split('e') as [string, string];
  const digits = mantissa.replace('.', '');
  const point = Number(exponent) + 1; // the value is 0.<digits> × 10^point
  if (point <= -4 || point > 16) {
    const e = point - 1;
    return `${signText}${digits[0]}${digits.length > 1 ? '.' + digits.slice(1) : ''}e${e < 0 ? '-' : '+'}${String(Math.abs(e)).padStart(2, '0')}`;
  }
  if (point <= 0) return `${signText}0.${'0'.repeat(-point)}${digits}`;
  if (point >= digits.length) return `${signText}${digits}${'0'.repeat(point - digits.length)}${addDot0 ? '.0' : ''}`;
  return `${signText}${digits.slice(0, point)}.${digits.slice(point)}`;
}

/** repr() of a complex number (CPython's complex_repr). */
export function complexRepr(real: number, imag: number): string {
  if (real === 0 && !Object.is(real, -0)) return `${formatDouble(imag, false, false)}j`;
  return `(${formatDouble(real, false, false)}${formatDouble(imag, false, true)}j)`;
}
