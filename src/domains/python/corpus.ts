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

// ---- names -----------------------------------------------------------------------------------------------------

const INT_NAMES = ['x', 'n', 'a', 'num', 'm'];
const LIST_NAMES = ['xs', 'nums', 'items', 'values', 'arr', 'data'];
const STR_NAMES = ['s', 'text', 'word', 'name', 'line'];
const DICT_NAMES = ['d', 'table', 'scores', 'stock', 'prices'];
const ELEMENT_NAMES = ['x', 'v', 'item', 'e', 'y'];
const TOTAL_NAMES = ['total', 'acc', 'result', 'res'];
const COUNT_NAMES = ['count', 'c', 'hits', 'seen'];
const OUT_NAMES = ['out', 'result', 'res', 'kept'];

/** A name of the list not among `taken`. */
function fresh(rng: RandomStream, names: readonly string[], ...taken: string[]): string {
  const free = names.filter((n) => !taken.includes(n));
  return pick(rng, free);
}

const ARITH = ['+', '-', '*'];
const COMPARE = ['>', '<', '>=', '<=', '==', '!='];
const intParam = (rng: RandomStream, lo = -9, hi = 20): Param => ({ name: pick(rng, INT_NAMES), input: { kind: 'int', lo, hi } });
const listParam = (rng: RandomStream, minLength = 0, maxLength = 6, lo = 0, hi = 9): Param => ({ name: pick(rng, LIST_NAMES), input: { kind: 'list', minLength, maxLength, lo, hi } });
const strParam = (rng: RandomStream, minLength = 0, maxLength = 6): Param => ({ name: pick(rng, STR_NAMES), input: { kind: 'str', minLength, maxLength } });
const dictParam = (rng: RandomStream, minLength = 1, maxLength = 4): Param => ({ name: pick(rng, DICT_NAMES), input: { kind: 'dict', minLength, maxLength } });
/** A second int argument, named apart from the first. */
const secondInt = (rng: RandomStream, first: string, lo: number, hi: number): Param => ({ name: fresh(rng, ['k', 'b', 'y', 'step', 'size'], first), input: { kind: 'int', lo, hi } });

/** `x + 3`, `x * 2`, `x // 4`, `x % 5`: an arithmetic step on the name, division and modulo by a positive constant. */
function arithmetic(rng: RandomStream, name: string): string {
  const op = pick(rng, [...ARITH, ...ARITH, '//', '%']);
  return `${name} ${op} ${op === '//' || op === '%' ? constant(rng, 2, 9) : constant(rng, 1, 9)}`;
}

// ---- recipes: one small program shape each, by the type of its arguments ---------------------------------------

type Recipe = (rng: RandomStream) => Draft;

const INT_RECIPES: Record<string, Recipe> = {
  arithmetic: (rng) => {
    const x = intParam(rng);
    return { params: [x], body: [`return ${arithmetic(rng, x.name)}`] };
  },
  twoSteps: (rng) => {
    const x = intParam(rng);
    return { params: [x], body: [`return (${arithmetic(rng, x.name)}) ${pick(rng, ARITH)} ${constant(rng, 1, 9)}`] };
  },
  branch: (rng) => {
    const x = intParam(rng);
    return { params: [x], body: [`if ${x.name} ${pick(rng, COMPARE)} ${constant(rng, 0, 9)}:`, `    return ${arithmetic(rng, x.name)}`, `return ${arithmetic(rng, x.name)}`] };
  },
  conditionalExpression: (rng) => {
    const x = intParam(rng);
    return { params: [x], body: [`return ${constant(rng, 0, 9)} if ${x.name} % ${constant(rng, 2, 5)} == 0 else ${arithmetic(rng, x.name)}`] };
  },
  rangeSum: (rng) => {
    const x = intParam(rng, 0, 12);
    const [i, total] = [fresh(rng, ['i', 'j', 'k'], x.name), pick(rng, TOTAL_NAMES)];
    const step = pick(rng, [`${total} += ${i}`, `${total} += ${i} * ${constant(rng, 2, 5)}`, `${total} += ${arithmetic(rng, i)}`]);
    return { params: [x], body: [`${total} = 0`, `for ${i} in range(${x.name}):`, `    ${step}`, `return ${total}`] };
  },
  rangeFilter: (rng) => {
    const x = intParam(rng, 0, 15);
    const i = fresh(rng, ['i', 'j', 'k'], x.name);
    return { params: [x], body: [`return [${i} for ${i} in range(${x.name}) if ${i} % ${constant(rng, 2, 4)} == ${constant(rng, 0, 1)}]`] };
  },
  countDown: (rng) => {
    const x = intParam(rng, 0, 60);
    const count = pick(rng, COUNT_NAMES);
    return { params: [x], body: [`${count} = 0`, `while ${x.name} > ${constant(rng, 0, 3)}:`, `    ${x.name} //= ${constant(rng, 2, 3)}`, `    ${count} += 1`, `return ${count}`] };
  },
  digits: (rng) => {
    const x = intParam(rng, 0, 999);
    return { params: [x], body: [pick(rng, [`return sum(int(d) for d in str(${x.name}))`, `return len(str(${x.name}))`, `return str(${x.name})[::-1]`, `return int(str(${x.name})[::-1])`])] };
  },
  builtin: (rng) => {
    const x = intParam(rng);
    return { params: [x], body: [pick(rng, [`return abs(${x.name} - ${constant(rng, 0, 9)})`, `return max(${x.name}, ${constant(rng, 0, 9)})`, `return min(${x.name}, ${constant(rng, 0, 9)})`, `return ${x.name} % ${constant(rng, 2, 9)} == 0`, `return ${x.name} ${pick(rng, COMPARE)} ${constant(rng, 0, 9)}`])] };
  },
  pair: (rng) => {
    const a = intParam(rng, -5, 12);
    const b = secondInt(rng, a.name, 1, 9);
    const body = pick(rng, [
      `return ${a.name} ${pick(rng, ARITH)} ${b.name}`,
      `return ${a.name} * ${b.name} ${pick(rng, ['+', '-'])} ${constant(rng, 1, 9)}`,
      `return ${a.name} // ${b.name}, ${a.name} % ${b.name}`,
      `return max(${a.name}, ${b.name}) - min(${a.name}, ${b.name})`,
      `return [${a.name}, ${b.name}, ${a.name} + ${b.name}]`,
    ]);
    return { params: [a, b], body: [body] };
  },
  pairBranch: (rng) => {
    const a = intParam(rng, -5, 12);
    const b = secondInt(rng, a.name, 0, 9);
    return { params: [a, b], body: [`if ${a.name} ${pick(rng, ['>', '<', '>='])} ${b.name}:`, `    return ${a.name} - ${b.name}`, `return ${pick(rng, [`${b.name} - ${a.name}`, `${a.name} + ${b.name}`, `${a.name} * ${b.name}`])}`] };
  },
};

const LIST_RECIPES: Record<string, Recipe> = {
  aggregate: (rng) => {
    const xs = listParam(rng, 1);
    return { params: [xs], body: [`return ${pick(rng, ['sum', 'max', 'min', 'len', 'sorted'])}(${xs.name})`] };
  },
  index: (rng) => {
    const xs = listParam(rng, 3);
    return { params: [xs], body: [`return ${xs.name}[${pick(rng, ['0', '1', '2', '-1', '-2'])}]`] };
  },
  slice: (rng) => {
    const xs = listParam(rng);
    const slice = pick(rng, ['::-1', '::2', '1::2', '1:', ':-1', `:${constant(rng, 1, 3)}`, `${constant(rng, 1, 3)}:`, `${constant(rng, 0, 1)}:${constant(rng, 2, 4)}`]);
    return { params: [xs], body: [`return ${xs.name}[${slice}]`] };
  },
  sorting: (rng) => {
    const xs = listParam(rng);
    return { params: [xs], body: [`return ${pick(rng, [`sorted(${xs.name}, reverse=True)`, `sorted(${xs.name})[:${constant(rng, 1, 3)}]`, `sorted(${xs.name})[-${constant(rng, 1, 3)}:]`, `sorted(set(${xs.name}))`, `len(set(${xs.name}))`])}`] };
  },
  map: (rng) => {
    const xs = listParam(rng, 0, 5, -5, 9);
    const x = fresh(rng, ELEMENT_NAMES, xs.name);
    return { params: [xs], body: [`return [${pick(rng, [arithmetic(rng, x), `${x} * ${x}`, `abs(${x})`])} for ${x} in ${xs.name}]`] };
  },
  filter: (rng) => {
    const xs = listParam(rng, 0, 6, -5, 9);
    const x = fresh(rng, ELEMENT_NAMES, xs.name);
    return { params: [xs], body: [`return [${x} for ${x} in ${xs.name} if ${pick(rng, [`${x} ${pick(rng, COMPARE)} ${constant(rng, 0, 5)}`, `${x} % 2 == ${constant(rng, 0, 1)}`])}]`] };
  },
  countLoop: (rng) => {
    const xs = listParam(rng);
    const [x, count] = [fresh(rng, ELEMENT_NAMES, xs.name), pick(rng, COUNT_NAMES)];
    return { params: [xs], body: [`${count} = 0`, `for ${x} in ${xs.name}:`, `    if ${x} ${pick(rng, COMPARE)} ${constant(rng, 0, 9)}:`, `        ${count} += 1`, `return ${count}`] };
  },
  sumLoop: (rng) => {
    const xs = listParam(rng);
    const [x, total] = [fresh(rng, ELEMENT_NAMES, xs.name), pick(rng, TOTAL_NAMES)];
    const [start, step] = pick(rng, [['0', `${total} += ${arithmetic(rng, x)}`], ['1', `${total} *= ${x}`], ['0', `${total} = ${total} * 10 + ${x}`]]);
    return { params: [xs], body: [`${total} = ${start}`, `for ${x} in ${xs.name}:`, `    ${step}`, `return ${total}`] };
  },
  runningSum: (rng) => {
    const xs = listParam(rng);
    const [x, out, total] = [fresh(rng, ELEMENT_NAMES, xs.name), pick(rng, OUT_NAMES), pick(rng, ['total', 'acc', 'running'])];
    return { params: [xs], body: [`${out} = []`, `${total} = 0`, `for ${x} in ${xs.name}:`, `    ${total} += ${x}`, `    ${out}.append(${total})`, `return ${out}`] };
  },
  appendIf: (rng) => {
    const xs = listParam(rng);
    const [x, out] = [fresh(rng, ELEMENT_NAMES, xs.name), pick(rng, OUT_NAMES)];
    return { params: [xs], body: [`${out} = []`, `for ${x} in ${xs.name}:`, `    if ${x} not in ${out}:`, `        ${out}.append(${x})`, `return ${out}`] };
  },
  enumerate: (rng) => {
    const xs = listParam(rng);
    const x = fresh(rng, ELEMENT_NAMES, xs.name, 'i');
    return { params: [xs], body: [pick(rng, [`return [i * ${x} for i, ${x} in enumerate(${xs.name})]`, `return [${x} for i, ${x} in enumerate(${xs.name}) if i % 2 == ${constant(rng, 0, 1)}]`, `return [i for i, ${x} in enumerate(${xs.name}) if ${x} ${pick(rng, COMPARE)} ${constant(rng, 0, 9)}]`])] };
  },
  neighbours: (rng) => {
    const xs = listParam(rng, 1);
    return { params: [xs], body: [`return [${pick(rng, ['a + b', 'b - a', 'a * b', 'max(a, b)'])} for a, b in zip(${xs.name}, ${xs.name}[1:])]`] };
  },
  search: (rng) => {
    const xs = listParam(rng, 1);
    return { params: [xs], body: [`return ${pick(rng, [`${xs.name}.index(max(${xs.name}))`, `${xs.name}.index(min(${xs.name}))`, `${xs.name}.count(${constant(rng, 0, 9)})`, `${constant(rng, 0, 9)} in ${xs.name}`, `sum(${xs.name}) / len(${xs.name})`])}`] };
  },
  withInt: (rng) => {
    const xs = listParam(rng);
    const k = secondInt(rng, xs.name, 0, 5);
    const x = fresh(rng, ELEMENT_NAMES, xs.name, k.name);
    return { params: [xs, k], body: [`return ${pick(rng, [`[${x} + ${k.name} for ${x} in ${xs.name}]`, `[${x} * ${k.name} for ${x} in ${xs.name}]`, `${xs.name}[:${k.name}]`, `${xs.name}[${k.name}:]`, `[${x} for ${x} in ${xs.name} if ${x} > ${k.name}]`, `sum(${xs.name}) * ${k.name}`, `${xs.name} * ${k.name}`])}`] };
  },
  toDict: (rng) => {
    const xs = listParam(rng, 0, 5);
    const x = fresh(rng, ELEMENT_NAMES, xs.name, 'i');
    return { params: [xs], body: [`return ${pick(rng, [`{${x}: ${x} * ${x} for ${x} in ${xs.name}}`, `{i: ${x} for i, ${x} in enumerate(${xs.name})}`, `{${x}: ${xs.name}.count(${x}) for ${x} in ${xs.name}}`])}`] };
  },
};

const STR_RECIPES: Record<string, Recipe> = {
  transform: (rng) => {
    const s = strParam(rng);
    return { params: [s], body: [`return ${pick(rng, [`${s.name}[::-1]`, `${s.name}.upper()`, `${s.name} + ${s.name}`, `${s.name} * ${constant(rng, 2, 3)}`, `len(${s.name})`, `''.join(sorted(${s.name}))`, `sorted(set(${s.name}))`, `${s.name}[::2]`, `${s.name}[1:] + ${s.name}[:1]`])}`] };
  },
  index: (rng) => {
    const s = strParam(rng, 3);
    return { params: [s], body: [`return ${s.name}[${pick(rng, ['0', '1', '-1', '1:3', ':2', '-2:'])}]`] };
  },
  letter: (rng) => {
    const s = strParam(rng);
    const [ch, other] = [pick(rng, LETTERS), pick(rng, LETTERS)];
    return { params: [s], body: [`return ${pick(rng, [`${s.name}.count('${ch}')`, `${s.name}.replace('${ch}', '${other}')`, `${s.name}.find('${ch}')`, `'${ch}' in ${s.name}`, `${s.name}.startswith('${ch}')`])}`] };
  },
  vowels: (rng) => {
    const s = strParam(rng);
    const [ch, count] = [fresh(rng, ['ch', 'c', 'letter'], s.name), fresh(rng, COUNT_NAMES, 'c')];
    return { params: [s], body: [`${count} = 0`, `for ${ch} in ${s.name}:`, `    if ${ch} in '${pick(rng, ['aeiou', 'aei', 'rst', 'lmn'])}':`, `        ${count} += 1`, `return ${count}`] };
  },
  comprehension: (rng) => {
    const s = strParam(rng);
    const ch = fresh(rng, ['ch', 'c', 'letter'], s.name);
    return { params: [s], body: [`return ${pick(rng, [`[${ch} for ${ch} in ${s.name} if ${ch} != '${pick(rng, LETTERS)}']`, `''.join(${ch}.upper() if i % 2 == 0 else ${ch} for i, ${ch} in enumerate(${s.name}))`, `[ord(${ch}) - ord('a') for ${ch} in ${s.name}]`, `''.join(${ch} * 2 for ${ch} in ${s.name})`])}`] };
  },
  counts: (rng) => {
    const s = strParam(rng, 1); // max() of an empty count refuses
    const [ch, counts] = [fresh(rng, ['ch', 'c', 'letter'], s.name), pick(rng, ['counts', 'freq', 'seen'])];
    return { params: [s], body: [`${counts} = {}`, `for ${ch} in ${s.name}:`, `    ${counts}[${ch}] = ${counts}.get(${ch}, 0) + 1`, `return ${pick(rng, [counts, `max(${counts}, key=${counts}.get)`, `len(${counts})`, `sorted(${counts}.items())`])}`] };
  },
  words: (rng) => {
    const s: Param = { name: pick(rng, STR_NAMES), input: { kind: 'words', minWords: 1, maxWords: 3 } };
    const w = fresh(rng, ['w', 'word', 'part'], s.name);
    return { params: [s], body: [`return ${pick(rng, [`${s.name}.split()`, `len(${s.name}.split())`, `' '.join(${w}[::-1] for ${w} in ${s.name}.split())`, `[len(${w}) for ${w} in ${s.name}.split()]`, `' '.join(sorted(${s.name}.split()))`, `max(${s.name}.split(), key=len)`])}`] };
  },
  withInt: (rng) => {
    const s = strParam(rng, 1);
    const k = secondInt(rng, s.name, 0, 4);
    return { params: [s, k], body: [`return ${pick(rng, [`${s.name}[:${k.name}]`, `${s.name}[${k.name}:]`, `${s.name} * ${k.name}`, `${s.name}[${k.name} % len(${s.name})]`, `${s.name}[${k.name}:] + ${s.name}[:${k.name}]`])}`] };
  },
};

const DICT_RECIPES: Record<string, Recipe> = {
  read: (rng) => {
    const d = dictParam(rng);
    return { params: [d], body: [`return ${pick(rng, [`sorted(${d.name})`, `sum(${d.name}.values())`, `max(${d.name}, key=${d.name}.get)`, `${d.name}.get('${pick(rng, KEYS)}', ${constant(rng, 0, 9)})`, `len(${d.name})`, `sorted(${d.name}.values())`])}`] };
  },
  transform: (rng) => {
    const d = dictParam(rng);
    return { params: [d], body: [`return ${pick(rng, [`{k: v * ${constant(rng, 2, 5)} for k, v in ${d.name}.items()}`, `{k: v for k, v in ${d.name}.items() if v ${pick(rng, COMPARE)} ${constant(rng, 0, 9)}}`, `[k for k, v in sorted(${d.name}.items()) if v % 2 == ${constant(rng, 0, 1)}]`, `{v: k for k, v in ${d.name}.items()}`])}`] };
  },
  loop: (rng) => {
    const d = dictParam(rng);
    const [key, total] = [pick(rng, ['key', 'k', 'name']), pick(rng, TOTAL_NAMES)];
    return { params: [d], body: [`${total} = 0`, `for ${key} in ${d.name}:`, `    if ${d.name}[${key}] ${pick(rng, COMPARE)} ${constant(rng, 0, 9)}:`, `        ${total} += ${d.name}[${key}]`, `return ${total}`] };
  },
};

/** Recipe families, drawn evenly, so that each argument type keeps its share however many shapes it has. */
const FAMILIES: Array<[string, Record<string, Recipe>]> = [
  ['int', INT_RECIPES],
  ['list', LIST_RECIPES],
  ['str', STR_RECIPES],
  ['dict', DICT_RECIPES],
];
const FAMILY_WEIGHTS = [3, 4, 3, 1]; // dicts have fewer shapes; ints, lists and strings carry most of AZR's tasks

/** One program and up to FUNCTION_PAIRS.max distinct inputs (at least FUNCTION_PAIRS.min, else redrawn). */
export function randomProgram(rng: RandomStream): GeneratedProgram {
  for (;;) {
    let r = rng.int(FAMILY_WEIGHTS.reduce((a, b) => a + b, 0));
    const family = FAMILIES.findIndex((_, i) => (r -= FAMILY_WEIGHTS[i]!) < 0);
    const [familyName, recipes] = FAMILIES[family]!;
    const recipeName = pick(rng, Object.keys(recipes));
    const draft = recipes[recipeName]!(rng);
    const inputs = new Set<string>();
    for (let attempt = 0; attempt < 4 * FUNCTION_PAIRS.max && inputs.size < FUNCTION_PAIRS.max; attempt++) {
      inputs.add(draft.params.map((p) => drawInput(rng, p.input)).join(', '));
    }
    if (inputs.size < FUNCTION_PAIRS.min) continue;
    const program = [`def f(${draft.params.map((p) => p.name).join(', ')}):`, ...draft.body.map((line) => `    ${line}`)].join('\n');
    return { recipe: `${familyName}/${recipeName}`, program, inputs: [...inputs] };
  }
}
