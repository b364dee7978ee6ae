// The code domain's pretraining programs: a seeded generator of small Python functions in the style of Absolute Zero
// Reasoner's tasks (ints, lists, strings and dicts; loops, conditionals, comprehensions, slicing, common builtins),
// each with up to eight inputs drawn to suit it. Nothing here predicts an output: the sandbox computes them
// (corpus-pool.ts), so the corpus is right by construction. Programs stay a few lines long, since a teacher's prompt
// shows whole reference tasks and the base model is small.

import type { RandomStream } from '../../runtime/streams.js';
import { FUNCTION_PAIRS } from './tasks.js';

/** What one argument's values look like. */
export type InputSpec =
  | { kind: 'int'; lo: number; hi: number }
  | { kind: 'list'; minLength: number; maxLength: number; lo: number; hi: number }
  | { kind: 'str'; minLength: number; maxLength: number }
  | { kind: 'words'; minWords: number; maxWords: number }
  | { kind: 'dict'; minLength: number; maxLength: number };

/** A generated program and the argument lists it is run on (Python literal text, `[3, 1], 2`). */
export interface GeneratedProgram {
  recipe: string;
  program: string;
  inputs: string[];
}

interface Param {
  name: string;
  input: InputSpec;
}

interface Draft {
  params: Param[];
  body: string[]; // lines of f's body, without the function's own indent
}

const LETTERS = [...'abcdeilmnorst'];
const KEYS = [...'abcdefgh'];

// ---- drawing ---------------------------------------------------------------------------------------------------

const pick = <T>(rng: RandomStream, items: readonly T[]): T => items[rng.int(items.length)]!;
const between = (rng: RandomStream, lo: number, hi: number) => lo + rng.int(hi - lo + 1);
const constant = (rng: RandomStream, lo: number, hi: number) => String(between(rng, lo, hi));
const letters = (rng: RandomStream, length: number) => Array.from({ length }, () => pick(rng, LETTERS)).join('');

/** Python's repr of the value drawn for one argument. */
function drawInput(rng: RandomStream, spec: InputSpec): string {
  switch (spec.kind) {
    case 'int':
      return String(between(rng, spec.lo, spec.hi));
    case 'list':
      return `[${Array.from({ length: between(rng, spec.minLength, spec.maxLength) }, () => between(rng, spec.lo, spec.hi)).join(', ')}]`;
    case 'str':
      return `'${letters(rng, between(rng, spec.minLength, spec.maxLength))}'`;
    case 'words':
      return `'${Array.from({ length: between(rng, spec.minWords, spec.maxWords) }, () => letters(rng, between(rng, 1, 4))).join(' ')}'`;
    case 'dict': {
      const keys = rng.sample(KEYS.length, between(rng, spec.minLength, spec.maxLength)).map((k) => KEYS[k]!);
      return `{${keys.map((key) => `'${key}': ${between(rng, 0, 9)}`).join(', ')}}`;
    }
  }
}

// ---- arguments ---------------------------------------------------------------------------------------------------
// One name per role (n for an int, k for a second one, xs for a list, s for a string, d for a dict; x for a list's
// element, c for a character, i for an index): a program's names follow from its shape, so a small model spends
// its capacity on the shapes and values, not on keeping a signature and a body consistent.

const ARITH = ['+', '-', '*'];
const COMPARE = ['>', '<', '>=', '<=', '==', '!='];
const n = (lo = -9, hi = 20): Param => ({ name: 'n', input: { kind: 'int', lo, hi } });
const k = (lo: number, hi: number): Param => ({ name: 'k', input: { kind: 'int', lo, hi } });
const xs = (minLength = 0, maxLength = 5, lo = 0, hi = 9): Param => ({ name: 'xs', input: { kind: 'list', minLength, maxLength, lo, hi } });
const s = (minLength = 0, maxLength = 5): Param => ({ name: 's', input: { kind: 'str', minLength, maxLength } });
const words: Param = { name: 's', input: { kind: 'words', minWords: 1, maxWords: 3 } };
const d: Param = { name: 'd', input: { kind: 'dict', minLength: 1, maxLength: 4 } };

/** `n + 3`, `x * 2`, `n // 4`, `x % 5`: an arithmetic step on the name, division and modulo by a positive constant. */
function arithmetic(rng: RandomStream, name: string): string {
  const op = pick(rng, [...ARITH, ...ARITH, '//', '%']);
  return `${name} ${op} ${op === '//' || op === '%' ? constant(rng, 2, 9) : constant(rng, 1, 9)}`;
}

/** A comparison of the name with a small constant. */
const comparison = (rng: RandomStream, name: string, hi = 9) => `${name} ${pick(rng, COMPARE)} ${constant(rng, 0, hi)}`;

// ---- recipes: one small program shape each, by the type of its arguments ---------------------------------------

type Recipe = (rng: RandomStream) => Draft;
const returning = (params: Param[], value: string): Draft => ({ params, body: [`return ${value}`] });

const INT_RECIPES: Record<string, Recipe> = {
  arithmetic: (rng) => returning([n()], arithmetic(rng, 'n')),
  twoSteps: (rng) => returning([n()], `(${arithmetic(rng, 'n')}) ${pick(rng, ARITH)} ${constant(rng, 1, 9)}`),
  branch: (rng) => ({ params: [n()], body: [`if ${comparison(rng, 'n')}:`, `    return ${arithmetic(rng, 'n')}`, `return ${arithmetic(rng, 'n')}`] }),
  conditionalExpression: (rng) => returning([n()], `${constant(rng, 0, 9)} if n % ${constant(rng, 2, 5)} == 0 else ${arithmetic(rng, 'n')}`),
  rangeSum: (rng) => ({ params: [n(0, 12)], body: ['total = 0', 'for i in range(n):', `    total += ${pick(rng, ['i', `i * ${constant(rng, 2, 5)}`, arithmetic(rng, 'i')])}`, 'return total'] }),
  rangeFilter: (rng) => returning([n(0, 15)], `[i for i in range(n) if i % ${constant(rng, 2, 4)} == ${constant(rng, 0, 1)}]`),
  countDown: (rng) => ({ params: [n(0, 60)], body: ['count = 0', `while n > ${constant(rng, 0, 3)}:`, `    n //= ${constant(rng, 2, 3)}`, '    count += 1', 'return count'] }),
  digits: (rng) => returning([n(0, 999)], pick(rng, ['sum(int(c) for c in str(n))', 'len(str(n))', 'str(n)[::-1]', 'int(str(n)[::-1])'])),
  builtin: (rng) => returning([n()], pick(rng, [`abs(n - ${constant(rng, 0, 9)})`, `max(n, ${constant(rng, 0, 9)})`, `min(n, ${constant(rng, 0, 9)})`, `n % ${constant(rng, 2, 9)} == 0`, comparison(rng, 'n')])),
  pair: (rng) => returning([n(-5, 12), k(1, 9)], pick(rng, [`n ${pick(rng, ARITH)} k`, `n * k ${pick(rng, ['+', '-'])} ${constant(rng, 1, 9)}`, 'n // k, n % k', 'max(n, k) - min(n, k)', '[n, k, n + k]'])),
  pairBranch: (rng) => ({ params: [n(-5, 12), k(0, 9)], body: [`if n ${pick(rng, ['>', '<', '>='])} k:`, '    return n - k', `return ${pick(rng, ['k - n', 'n + k', 'n * k'])}`] }),
};

const LIST_RECIPES: Record<string, Recipe> = {
  aggregate: (rng) => returning([xs(1)], `${pick(rng, ['sum', 'max', 'min', 'len', 'sorted'])}(xs)`),
  index: (rng) => returning([xs(3)], `xs[${pick(rng, ['0', '1', '2', '-1', '-2'])}]`),
  slice: (rng) => returning([xs()], `xs[${pick(rng, ['::-1', '::2', '1::2', '1:', ':-1', `:${constant(rng, 1, 3)}`, `${constant(rng, 1, 3)}:`, `${constant(rng, 0, 1)}:${constant(rng, 2, 4)}`])}]`),
  sorting: (rng) => returning([xs()], pick(rng, ['sorted(xs, reverse=True)', `sorted(xs)[:${constant(rng, 1, 3)}]`, `sorted(xs)[-${constant(rng, 1, 3)}:]`, 'sorted(set(xs))', 'len(set(xs))'])),
  map: (rng) => returning([xs(0, 5, -5, 9)], `[${pick(rng, [arithmetic(rng, 'x'), 'x * x', 'abs(x)'])} for x in xs]`),
  filter: (rng) => returning([xs(0, 5, -5, 9)], `[x for x in xs if ${pick(rng, [comparison(rng, 'x', 5), `x % 2 == ${constant(rng, 0, 1)}`])}]`),
  countLoop: (rng) => ({ params: [xs()], body: ['count = 0', 'for x in xs:', `    if ${comparison(rng, 'x')}:`, '        count += 1', 'return count'] }),
  sumLoop: (rng) => {
    const [start, step] = pick(rng, [['0', `total += ${arithmetic(rng, 'x')}`], ['1', 'total *= x'], ['0', 'total = total * 10 + x']]);
    return { params: [xs()], body: [`total = ${start}`, 'for x in xs:', `    ${step}`, 'return total'] };
  },
  runningSum: () => ({ params: [xs()], body: ['out = []', 'total = 0', 'for x in xs:', '    total += x', '    out.append(total)', 'return out'] }),
  appendIf: (rng) => ({ params: [xs()], body: ['out = []', 'for x in xs:', `    if ${pick(rng, ['x not in out', comparison(rng, 'x')])}:`, '        out.append(x)', 'return out'] }),
  enumerate: (rng) => returning([xs()], pick(rng, ['[i * x for i, x in enumerate(xs)]', `[x for i, x in enumerate(xs) if i % 2 == ${constant(rng, 0, 1)}]`, `[i for i, x in enumerate(xs) if ${comparison(rng, 'x')}]`])),
  neighbours: (rng) => returning([xs(1)], `[${pick(rng, ['a + b', 'b - a', 'a * b', 'max(a, b)'])} for a, b in zip(xs, xs[1:])]`),
  search: (rng) => returning([xs(1)], pick(rng, ['xs.index(max(xs))', 'xs.index(min(xs))', `xs.count(${constant(rng, 0, 9)})`, `${constant(rng, 0, 9)} in xs`, 'sum(xs) / len(xs)'])),
  withInt: (rng) => returning([xs(), k(0, 5)], pick(rng, ['[x + k for x in xs]', '[x * k for x in xs]', 'xs[:k]', 'xs[k:]', '[x for x in xs if x > k]', 'sum(xs) * k', 'xs * k'])),
  toDict: (rng) => returning([xs()], pick(rng, ['{x: x * x for x in xs}', '{i: x for i, x in enumerate(xs)}', '{x: xs.count(x) for x in xs}'])),
};

const STR_RECIPES: Record<string, Recipe> = {
  transform: (rng) => returning([s()], pick(rng, ['s[::-1]', 's.upper()', 's + s', `s * ${constant(rng, 2, 3)}`, 'len(s)', "''.join(sorted(s))", 'sorted(set(s))', 's[::2]', 's[1:] + s[:1]'])),
  index: (rng) => returning([s(3)], `s[${pick(rng, ['0', '1', '-1', '1:3', ':2', '-2:'])}]`),
  letter: (rng) => {
    const [c, other] = [pick(rng, LETTERS), pick(rng, LETTERS)];
    return returning([s()], pick(rng, [`s.count('${c}')`, `s.replace('${c}', '${other}')`, `s.find('${c}')`, `'${c}' in s`, `s.startswith('${c}')`]));
  },
  vowels: (rng) => ({ params: [s()], body: ['count = 0', 'for c in s:', `    if c in '${pick(rng, ['aeiou', 'aei', 'rst', 'lmn'])}':`, '        count += 1', 'return count'] }),
  comprehension: (rng) => returning([s()], pick(rng, [`[c for c in s if c != '${pick(rng, LETTERS)}']`, "''.join(c.upper() if i % 2 == 0 else c for i, c in enumerate(s))", "[ord(c) - ord('a') for c in s]", "''.join(c * 2 for c in s)"])),
  // s is never empty here: max() of an empty count refuses
  counts: (rng) => ({ params: [s(1)], body: ['counts = {}', 'for c in s:', '    counts[c] = counts.get(c, 0) + 1', `return ${pick(rng, ['counts', 'max(counts, key=counts.get)', 'len(counts)', 'sorted(counts.items())'])}`] }),
  words: (rng) => returning([words], pick(rng, ['s.split()', 'len(s.split())', "' '.join(w[::-1] for w in s.split())", '[len(w) for w in s.split()]', "' '.join(sorted(s.split()))", 'max(s.split(), key=len)'])),
  withInt: (rng) => returning([s(1), k(0, 4)], pick(rng, ['s[:k]', 's[k:]', 's * k', 's[k % len(s)]', 's[k:] + s[:k]'])),
};

const DICT_RECIPES: Record<string, Recipe> = {
  read: (rng) => returning([d], pick(rng, ['sorted(d)', 'sum(d.values())', 'max(d, key=d.get)', `d.get('${pick(rng, KEYS)}', ${constant(rng, 0, 9)})`, 'len(d)', 'sorted(d.values())'])),
  transform: (rng) => returning([d], pick(rng, [`{key: v * ${constant(rng, 2, 5)} for key, v in d.items()}`, `{key: v for key, v in d.items() if ${comparison(rng, 'v')}}`, `[key for key, v in sorted(d.items()) if v % 2 == ${constant(rng, 0, 1)}]`, '{v: key for key, v in d.items()}'])),
  loop: (rng) => ({ params: [d], body: ['total = 0', 'for key in d:', `    if ${comparison(rng, 'd[key]')}:`, '        total += d[key]', 'return total'] }),
};

/** Recipe families, drawn evenly, so that each argument type keeps its share however many shapes it has. */
const FAMILIES: Array<[string, Record<string, Recipe>]> = [
  ['int', INT_RECIPES],
  ['list', LIST_RECIPES],
  ['str', STR_RECIPES],
  ['dict', DICT_RECIPES],
];
const FAMILY_WEIGHTS = [3, 4, 3, 1]; // dicts have fewer shapes; ints, lists and strings carry most of AZR's tasks

/** A recipe's name ("list/slice"): a family by FAMILY_WEIGHTS, then one of its recipes evenly. */
export function drawRecipe(rng: RandomStream): string {
  let r = rng.int(FAMILY_WEIGHTS.reduce((a, b) => a + b, 0));
  const [family, recipes] = FAMILIES[FAMILIES.findIndex((_, i) => (r -= FAMILY_WEIGHTS[i]!) < 0)]!;
  return `${family}/${pick(rng, Object.keys(recipes))}`;
}

const RECIPES = new Map<string, Recipe>(FAMILIES.flatMap(([family, recipes]) => Object.entries(recipes).map(([name, recipe]) => [`${family}/${name}`, recipe] as const)));

/** One program and up to FUNCTION_PAIRS.max distinct inputs (at least FUNCTION_PAIRS.min, else redrawn). */
export function randomProgram(rng: RandomStream): GeneratedProgram {
  for (;;) {
    const recipe = drawRecipe(rng);
    const draft = RECIPES.get(recipe)!(rng);
    const inputs = new Set<string>();
    for (let attempt = 0; attempt < 4 * FUNCTION_PAIRS.max && inputs.size < FUNCTION_PAIRS.max; attempt++) {
      inputs.add(draft.params.map((p) => drawInput(rng, p.input)).join(', '));
    }
    if (inputs.size < FUNCTION_PAIRS.min) continue;
    const program = [`def f(${draft.params.map((p) => p.name).join(', ')}):`, ...draft.body.map((line) => `    ${line}`)].join('\n');
    return { recipe, program, inputs: [...inputs] };
  }
}
