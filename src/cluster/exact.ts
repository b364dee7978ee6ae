// Plain data across msgpack, exactly: what a handler or a verifier receives over NATS equals what its sender held,
// value for value, as it does in one process (nact hands the object itself; worker threads a structured clone).
// msgpack (nats.ts) keeps undefined, typed arrays, key order and every double, but writes -0 as 0 and a string with
// a lone surrogate as replacement characters: such values travel beside the data as patches, which the receiver
// puts back. What is not plain data (a Map, a Date, a class instance, a function, an array with holes) is refused,
// naming where it sits, before anything is sent.

type Path = Array<string | number>;

/** A value msgpack would not bring back as itself, at `path` in the data. */
type Patch = { path: Path; negativeZero: true } | { path: Path; codeUnits: Uint16Array };

/** Data as it travels: the value, and the patches that make msgpack's copy of it equal (absent: none needed). */
export interface Exact<T> {
  value: T;
  patches?: Patch[];
}

const TYPED_ARRAYS: ReadonlySet<unknown> = new Set([Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array, Uint32Array, Float32Array, Float64Array, BigInt64Array, BigUint64Array]);
const LONE_SURROGATE = /\p{Cs}/u; // in /u mode a surrogate pair reads as one astral code point, so only lone ones match

/** Wraps `value` for msgpack; `what` names it in the error when it is not plain data. */
export function exact<T>(value: T, what: string): Exact<T> {
  const patches: Patch[] = [];
  collectPatches(value, [], patches, what);
  return patches.length > 0 ? { value, patches } : { value };
}

/** The value as its sender held it, from msgpack's copy (which it changes: the copy is the receiver's own). */
export function unpackExact<T>(data: Exact<T>): T {
  let value = data.value;
  for (const patch of data.patches ?? []) {
    const restored = 'negativeZero' in patch ? -0 : fromCodeUnits(patch.codeUnits);
    if (patch.path.length === 0) {
      value = restored as T;
      continue;
    }
    const parent = patch.path.slice(0, -1).reduce<Record<string | number, unknown>>((node, key) => node[key] as Record<string | number, unknown>, value as Record<string, unknown>);
    parent[patch.path.at(-1)!] = restored;
  }
  return value;
}

/** Notes the values msgpack would change and throws on what is not plain data. `path` is where `value` sits. */
function collectPatches(value: unknown, path: Path, patches: Patch[], what: string): void {
  switch (typeof value) {
    case 'number':
      if (Object.is(value, -0)) patches.push({ path: [...path], negativeZero: true });
      return;
    case 'string':
      if (LONE_SURROGATE.test(value)) patches.push({ path: [...path], codeUnits: Uint16Array.from(value, (_, i) => value.charCodeAt(i)) });
      return;
    case 'undefined':
    case 'boolean':
    case 'bigint':
      return;
    case 'object':
      if (value === null) return;
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) {
          if (!(i in value)) throw new Error(`${what}: ${where(path)} has a hole at index ${i}; fill it (undefined, null): only plain data crosses NATS unchanged`);
          path.push(i);
          collectPatches(value[i], path, patches, what);
          path.pop();
        }
      } else if (ArrayBuffer.isView(value)) {
        if (!TYPED_ARRAYS.has(value.constructor)) throw notPlain(value, path, what);
      } else {
        const prototype = Object.getPrototypeOf(value);
        if (prototype !== Object.prototype && prototype !== null) throw notPlain(value, path, what);
        for (const key in value) {
          if (LONE_SURROGATE.test(key)) throw new Error(`${what}: ${where(path)} has a key with a lone surrogate, which msgpack cannot carry`);
          path.push(key);
          collectPatches((value as Record<string, unknown>)[key], path, patches, what);
          path.pop();
        }
      }
      return;
    default:
      throw notPlain(value, path, what);
  }
}

const where = (path: Path) => (path.length === 0 ? 'the value' : `field ${path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${p}`)).join('').replace(/^\./, '')}`);

function notPlain(value: unknown, path: Path, what: string): Error {
  const kind = typeof value === 'object' ? ((value as object).constructor?.name ?? 'object') : typeof value;
  return new Error(`${what}: ${where(path)} is a ${kind}; only plain data (objects, arrays, numbers, strings, booleans, null, undefined, typed arrays) crosses NATS unchanged`);
}

/** A string from its UTF-16 code units, lone surrogates included (in slices: a spread has an argument limit). */
function fromCodeUnits(units: Uint16Array): string {
  let text = '';
  for (let i = 0; i < units.length; i += 8192) text += String.fromCharCode(...units.subarray(i, i + 8192));
  return text;
}
