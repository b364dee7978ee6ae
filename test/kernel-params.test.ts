// Kernel parameter blocks declared once, in each kernel's WGSL `struct Params` (src/backend/kernel-params.ts):
// the parsed layout against WGSL's uniform layout rules worked by hand, named values laid out by type, and the
// mistakes a positional list used to let through (a missing, extra or misspelt field) refused by name. And the
// loader's #include of shared WGSL (kernel-files.ts).
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { layOut, parseParams, wordOffsets } from '../src/backend/kernel-params.js';
import { kernelsDirectory, kernelSource } from '../src/backend/kernel-files.js';

const source = (kernel: string) => readFileSync(join(kernelsDirectory(), `${kernel}.wgsl`), 'utf8');

describe('struct Params', () => {
  it("lays out linear.wgsl's vec4 members and scalars at the offsets WGSL gives them", () => {
    const layout = parseParams('linear', source('linear'));
    // Five vec4u (16-byte aligned, 4 words each), then 20 scalars of one word: the hand-written table the
    // backend used before the layout was parsed.
    const expected = { colEnd: 0, wStart: 4, biasStart: 8, hAt: 12, bStart: 16, T: 20, K: 21, N: 22, hasBias: 23, eps: 24, rank: 25, slots: 26, hCols: 27, rowsAt: 28, tilesAt: 29, adaptersAt: 30, slotsAt: 31, positionsAt: 32, heads: 33, kvHeads: 34, headDim: 35, tableRows: 36, cacheSlots: 37, maxLen: 38, layerBase: 39 };
    expect(wordOffsets(layout, Object.keys(expected))).toEqual(expected);
    expect(layout.words).toBe(40);
    expect(layout.fields.find((f) => f.name === 'eps')!.type).toBe('f32');
  });

  it('aligns vec2 to 2 words and vec3 to 4, as WGSL does', () => {
    const layout = parseParams('test', 'struct Params { a: u32, b: vec2f, c: f32, d: vec3<i32>, e: u32 }');
    expect(layout.fields.map((f) => [f.name, f.word])).toEqual([['a', 0], ['b', 2], ['c', 4], ['d', 8], ['e', 11]]);
    expect(layout.words).toBe(12);
  });

  it('parses every kernel', () => {
    for (const file of readdirSync(kernelsDirectory()).filter((f) => f.endsWith('.wgsl'))) {
      const layout = parseParams(file.slice(0, -5), source(file.slice(0, -5)));
      expect(layout.fields.length).toBeGreaterThan(0);
    }
  });

  it('writes named values by type, and refuses a missing, unknown or vector field by name', () => {
    const layout = parseParams('rmsnorm', source('rmsnorm')); // { T: u32, D: u32, eps: f32 }
    const words = new Uint32Array(8);
    expect(layOut(layout, { eps: 0.5, D: 7, T: 3 }, words)).toBe(3);
    expect([words[0], words[1], new Float32Array(words.buffer)[2]]).toEqual([3, 7, 0.5]);
    const signed = parseParams('test', 'struct Params { x: i32 }');
    layOut(signed, { x: -2 }, words);
    expect(new Int32Array(words.buffer)[0]).toBe(-2);
    expect(() => layOut(layout, { T: 3, D: 7 }, words)).toThrow('kernels/rmsnorm.wgsl: no value given for Params.eps');
    expect(() => layOut(layout, { T: 3, D: 7, eps: 1, epsilon: 1 }, words)).toThrow('kernels/rmsnorm.wgsl: struct Params has no field epsilon (it has T, D, eps)');
    expect(() => layOut(parseParams('linear', source('linear')), { T: 1 }, words)).toThrow('Params.colEnd is a vector');
    expect(() => wordOffsets(layout, ['T', 'D'])).toThrow('kernels/rmsnorm.wgsl: struct Params has eps unknown to its caller');
    expect(() => parseParams('bad', 'struct Params { a: mat2x2f }')).toThrow('kernels/bad.wgsl: struct Params member "a: mat2x2f" is not');
  });
});

describe('#include', () => {
  it('splices kernels/include/ files in place and maps each line of the result back to its file', () => {
    const raw = source('matmul').split('\n');
    const include = readFileSync(join(kernelsDirectory(), 'include', 'lane_sums.wgsl'), 'utf8').split('\n');
    const at = raw.findIndex((line) => line === '#include "lane_sums.wgsl"');
    expect(at).toBeGreaterThan(0);
    const { code, origin } = kernelSource('matmul');
    const lines = code.split('\n');
    expect(lines).toEqual([...raw.slice(0, at), ...include, ...raw.slice(at + 1)]);
    expect(origin(at)).toBe(`kernels/matmul.wgsl:${at}`);
    expect(origin(at + 1)).toBe('kernels/include/lane_sums.wgsl:1');
    expect(origin(at + include.length + 1)).toBe(`kernels/matmul.wgsl:${at + 2}`);
    expect(lines.filter((line) => line.startsWith('#include'))).toEqual([]);
  });
});
