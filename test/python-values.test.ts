// The judge's reader (src/domains/python/python-values.ts): values read out of the interpreter's memory by
// JavaScript and written as CPython writes them. The host's CPython is the oracle for float and complex repr (the
// same algorithm in every CPython 3); the interpreter's own repr is the oracle for strings, bytes, integers and
// containers (a run's report carries Python's text, and executor.ts refuses a run whose texts differ: 'tampered').

import { spawnSync } from 'node:child_process';
import seedrandom from 'seedrandom';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PythonExecutor } from '../src/domains/python/executor.js';
import { complexRepr, formatDouble, type ValueReader } from '../src/domains/python/python-values.js';

let python: PythonExecutor;
beforeAll(async () => {
  python = await PythonExecutor.load();
});
afterAll(() => python?.close());

/** The host's CPython: repr of each double given by its 64 bits (hex), or of each complex (two doubles). */
function cpythonReprs(bits: string[], complex: boolean): string[] {
  const script = `
import json, struct, sys
bits = json.load(sys.stdin)
values = [struct.unpack('<d', bytes.fromhex(b))[0] for b in bits]
out = [repr(complex(values[i], values[i + 1])) for i in range(0, len(values), 2)] if ${complex ? 'True' : 'False'} else [repr(v) for v in values]
print(json.dumps(out))`;
  const run = spawnSync('python3', ['-c', script], { input: JSON.stringify(bits), encoding: 'utf8', maxBuffer: 64 << 20 });
  expect(run.status, `python3 is needed as the reference: ${run.stderr}`).toBe(0);
  return JSON.parse(run.stdout) as string[];
}

const hexOf = (x: number) => Buffer.from(new Float64Array([x]).buffer).toString('hex');
const EDGES = [0, -0, 1, -1, 0.1, 0.5, 1.5, 1e16, 1e15, 9999999999999998, 1e-4, 1e-5, 123456789.125, 5e-324, Number.MAX_VALUE, Number.MIN_VALUE, 2 ** 53, 2 ** 53 + 2, 1e21, 1e22, 1e-7, 0.3, 2 / 3, -2.5e-300, 1.7976931348623157e308, 4.35, 100, 1e100];

describe('float and complex repr, against the host CPython', () => {
  it('writes 20,000 doubles (random bit patterns and the edges of the notation) as CPython does', () => {
    const random = seedrandom('python-values floats');
    const doubles = [...EDGES];
    const words = new Uint32Array(2);
    while (doubles.length < 20_000) {
      words[0] = Math.floor(random() * 2 ** 32);
      words[1] = Math.floor(random() * 2 ** 32);
      const value = new Float64Array(words.buffer)[0]!;
      if (Number.isFinite(value)) doubles.push(value);
    }
    const reference = cpythonReprs(doubles.map(hexOf), false);
    const differing = doubles.map((x, i) => [formatDouble(x, true, false), reference[i]] as const).filter(([ours, theirs]) => ours !== theirs);
    expect(differing.slice(0, 5)).toEqual([]);
  });

  it('writes complex numbers as CPython does: signs, zeros, integral parts without .0', () => {
    const parts = [0, -0, 1, -1, 2.5, 1e16, 1e-5, 3e-320, 12345.678];
    const pairs = parts.flatMap((real) => parts.flatMap((imag) => [real, imag]));
    const reference = cpythonReprs(pairs.map(hexOf), true);
    const ours = Array.from({ length: pairs.length / 2 }, (_, i) => complexRepr(pairs[2 * i]!, pairs[2 * i + 1]!));
    expect(ours).toEqual(reference);
  });
});

describe("values read out of memory agree with the interpreter's own repr", () => {
  const agrees = (program: string, inputs: string[]) => {
    const result = python.run(program, inputs);
    expect(result.ok, JSON.stringify(result).slice(0, 300)).toBe(true); // 'tampered' would say the texts differ
  };

  it('for strings over every plane of Unicode (printable or escaped, quotes, surrogates)', () => {
    const chunk = 900; // the longest escape, \\U0010ffff, keeps a chunk under the 10,000-character limit
    const starts: number[] = [];
    for (let start = 0; start < 0x10000; start += chunk) starts.push(start);
    for (let start = 0x10000; start < 0x110000; start += 16 * chunk) starts.push(start);
    agrees('def f(a, b):\n    return "".join(map(chr, range(a, min(b, 0x110000))))', starts.map((start) => `${start}, ${start + chunk}`));
    agrees('def f(s):\n    return [s, s + "\'", s + \'"\', "\'" + s + \'"\']', ["'plain'", "''", "'tab\\tnl\\n'"]);
  });

  it('for bytes, integers of every size and sign, floats, complex numbers, None and booleans', () => {
    agrees('def f(n):\n    return bytes(range(n)), bytes([39]), bytes([34, 39])', ['256']);
    agrees('def f(k):\n    return [0, -1, 2 ** 30 - 1, 2 ** 30, -(2 ** 60), 7 ** k, -(3 ** k), 10 ** 4299, True, False, None]', ['40', '400', '1500']);
    agrees('def f(x):\n    return [x, -x, x / 3, x * 1e290, x * 1e-300, complex(x, -x), complex(0, x), 1j * x]', ['1.5', '0.1', '-2.0', '1e16']);
  });

  it('for nested containers, with type names two levels deep', () => {
    const result = python.run('def f():\n    return [{1: (2, [3.5, None]), "k": {4, 5}}, (), [[[]]], set(), {(): b""}]', ['']);
    expect(result).toMatchObject({ ok: true, outputs: ["[{1: (2, [3.5, None]), 'k': {4, 5}}, (), [[[]]], set(), {(): b''}]"], outputTypes: ['list[dict[int|str,set|tuple]|dict[tuple,bytes]|list[list]|set|tuple]'] }); // worked out by hand
  });

  it('refuses what is no literal: a subclass, a value holding itself, too deep, too long, too many digits', () => {
    const refusal = (program: string) => {
      const result = python.run(program, ['']);
      return result.ok ? result : { reason: result.reason, detail: result.detail };
    };
    expect(refusal('class I(int):\n    pass\ndef f():\n    return [I(1)]')).toEqual({ reason: 'not-literal', detail: 'the result holds a I, which is not a Python literal' });
    expect(refusal('def f():\n    x = []\n    x.append(x)\n    return x')).toEqual({ reason: 'not-literal', detail: 'the result contains itself' });
    expect(refusal('def f():\n    x = []\n    for _ in range(101):\n        x = [x]\n    return x')).toMatchObject({ reason: 'recursion' });
    expect(refusal("def f():\n    return ['x' * 100] * 101")).toMatchObject({ reason: 'output-too-large' });
    expect(refusal('def f():\n    return 10 ** 4300')).toEqual({ reason: 'output-too-large', detail: 'an integer of more than 4300 digits' });
    expect(refusal("def f():\n    return float('inf')")).toEqual({ reason: 'not-literal', detail: 'inf is not a Python literal' });
  });

  it('reads an address that holds no literal object as tampered, never as a value', () => {
    const reader = (python as unknown as { reader: ValueReader }).reader;
    for (const address of [0, 2, 4 * 1024 * 1024 * 1024 - 8]) expect(reader.read(address)).toMatchObject({ ok: false });
    expect(reader.read(0)).toMatchObject({ reason: 'tampered' });
  });
});
