// The code domain's sandbox (src/domains/python): a corpus of hostile programs, each refused with its reason and
// the host untouched; ordinary AZR-style tasks of all three types verified against the host's CPython as an
// independent oracle; the reset between programs; the parsing of model text.

import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PythonExecutor, SandboxCrash } from '../src/domains/python/executor.js';
import { checkAnswer, parseInputs, parseProgram, parseValue, SEED_TASKS, solvePrompt, validateProposal, type CodeTask } from '../src/domains/python/tasks.js';

let python: PythonExecutor;
beforeAll(async () => {
  python = await PythonExecutor.load();
});
afterAll(() => python?.close());

const fence = (tag: string, body: string) => `\`\`\`${tag}\n${body}\n\`\`\``;
const proposal = (program: string, ...inputs: string[]) => [fence('python', program), ...inputs.map((i) => fence('input', i))].join('\n');

// A file on the host that hostile programs go after: it must stay as it is, and nothing may appear beside it.
const hostDir = mkdtempSync(join(tmpdir(), 'populora-sandbox-'));
const sentinel = join(hostDir, 'secret.txt');
writeFileSync(sentinel, 'untouched');

const HOSTILE: Array<{ what: string; program: string; reason: string; detail?: RegExp }> = [
  { what: 'file read through open', program: `def f():\n    return open(${JSON.stringify(sentinel)}).read()`, reason: 'forbidden-builtin', detail: /open/ },
  { what: 'file write through open', program: `def f():\n    open(${JSON.stringify(join(hostDir, 'planted.txt'))}, 'w').write('x')\n    return 1`, reason: 'forbidden-builtin' },
  { what: 'import os', program: `import os\ndef f():\n    return os.listdir(${JSON.stringify(hostDir)})`, reason: 'forbidden-import', detail: /^os /m },
  { what: 'import inside the function', program: 'def f():\n    import subprocess\n    return subprocess.run(["ls"])', reason: 'forbidden-import' },
  { what: 'from-import of a denied module', program: 'from socket import socket\ndef f():\n    return 1', reason: 'forbidden-import' },
  { what: 'the js bridge', program: 'import js\ndef f():\n    return str(js.process)', reason: 'forbidden-import', detail: /js/ },
  { what: 'the pyodide bridge', program: 'import pyodide_js\ndef f():\n    return 1', reason: 'forbidden-import' },
  { what: 'pyodide.ffi', program: 'from pyodide.ffi import to_js\ndef f():\n    return 1', reason: 'forbidden-import' },
  { what: 'ctypes', program: 'import ctypes\ndef f():\n    return 1', reason: 'forbidden-import' },
  { what: 'importlib', program: 'import importlib\ndef f():\n    return importlib.import_module("os")', reason: 'forbidden-import' },
  { what: 'threading', program: 'import threading\ndef f():\n    return 1', reason: 'forbidden-import' },
  { what: '__import__ by name', program: 'def f():\n    return __import__("os").getcwd()', reason: 'forbidden-builtin', detail: /__import__/ },
  { what: 'imports through __builtins__', program: 'def f():\n    return __builtins__["__import__"]("os")', reason: 'forbidden-builtin' },
  { what: 'the subclass walk', program: 'def f():\n    return ().__class__.__base__.__subclasses__()', reason: 'forbidden-attribute' },
  { what: 'a function\'s globals', program: 'def g():\n    pass\ndef f():\n    return g.__globals__', reason: 'forbidden-attribute' },
  { what: 'getattr with a string', program: 'def f():\n    return getattr((), "__cl" + "ass__")', reason: 'forbidden-builtin', detail: /getattr/ },
  { what: 'eval', program: 'def f():\n    return eval("1 + 1")', reason: 'forbidden-builtin' },
  { what: 'exec', program: 'def f():\n    exec("x = 1")\n    return 1', reason: 'forbidden-builtin' },
  { what: 'compile', program: 'def f():\n    return compile("1", "x", "eval")', reason: 'forbidden-builtin' },
  { what: 'input', program: 'def f():\n    return input()', reason: 'forbidden-builtin' },
  { what: 'an aliased denied builtin (refused at call time)', program: 'def f():\n    g = vars\n    return g()', reason: 'forbidden-builtin', detail: /vars/ },
  { what: 'a generator\'s frame', program: 'def f():\n    g = (x for x in [1])\n    return g.gi_frame.f_back', reason: 'forbidden-attribute' },
  { what: 'attrgetter by string', program: 'import operator\ndef f():\n    return operator.attrgetter("__class__")(1)', reason: 'runtime-error', detail: /attrgetter/ },
  { what: 'a module\'s modules', program: 'import typing\ndef f():\n    return typing.sys.modules', reason: 'runtime-error', detail: /sys/ },
  { what: 'an infinite loop', program: 'def f():\n    while True: pass', reason: 'fuel' },
  { what: 'a loop that catches Exception', program: 'def f():\n    while True:\n        try:\n            pass\n        except Exception:\n            pass', reason: 'fuel' },
  { what: 'a loop in a finally', program: 'def f():\n    try:\n        while True: pass\n    finally:\n        while True: pass', reason: 'fuel' },
  { what: 'a bare except', program: 'def f():\n    try:\n        return 1\n    except:\n        return 2', reason: 'forbidden-syntax' },
  { what: 'catching BaseException', program: 'def f():\n    try:\n        return 1\n    except BaseException:\n        return 2', reason: 'forbidden-builtin' },
  { what: 'deep recursion', program: 'def f(n=0):\n    return f(n + 1)', reason: 'recursion' },
  { what: 'a list bomb', program: 'def f():\n    return len([0] * 10 ** 9)', reason: 'memory' },
  { what: 'a string bomb', program: 'def f():\n    s = "x"\n    s *= 10 ** 8\n    return len(s)', reason: 'memory' },
  { what: 'a power bomb', program: 'def f():\n    return 10 ** 10 ** 8', reason: 'memory' },
  { what: 'pow() as a bomb', program: 'def f():\n    return pow(7, 10 ** 9)', reason: 'memory' },
  { what: 'a shift bomb', program: 'def f():\n    return 1 << 10 ** 9', reason: 'memory' },
  { what: 'a loop in C over a huge range', program: 'def f():\n    return sum(range(10 ** 12))', reason: 'fuel', detail: /range/ },
  { what: 'a list built in one C call', program: 'import itertools\ndef f():\n    return len(list(itertools.repeat(0, 10 ** 8)))', reason: 'memory' },
  { what: 'a buffer over the per-run limit', program: 'def f():\n    return len(bytearray(10 ** 8))', reason: 'memory' },
  { what: 'a MemoryError caught by the program', program: 'def f():\n    try:\n        return len(bytes(2 * 10 ** 9))\n    except Exception:\n        return -1', reason: 'memory' },
  { what: 'a huge output', program: 'def f():\n    return list(range(10 ** 5))', reason: 'output-too-large' },
  { what: 'a print flood', program: 'def f():\n    for i in range(1000):\n        print("x" * 100)\n    return 1', reason: 'output-too-large' },
  { what: 'randomness', program: 'import random\ndef f():\n    return random.random()', reason: 'forbidden-import' },
  { what: 'the clock', program: 'import time\ndef f():\n    return time.time()', reason: 'forbidden-import' },
  { what: 'the calendar clock', program: 'from datetime import datetime\ndef f():\n    return str(datetime.now())', reason: 'forbidden-import' },
  { what: 'addresses', program: 'def f():\n    return id(object())', reason: 'forbidden-builtin' },
  { what: 'a value that is not a literal', program: 'def f():\n    return object()', reason: 'not-literal' },
  { what: 'no function f', program: 'def g():\n    return 1', reason: 'no-function' },
  { what: 'a syntax error', program: 'def f(:\n    return 1', reason: 'syntax' },
];

describe('the Python sandbox refuses hostile programs', () => {
  it.each(HOSTILE)('$what → $reason', ({ program, reason, detail }) => {
    const result = python.run(program, ['']);
    expect(result.ok, JSON.stringify(result)).toBe(false);
    if (result.ok) return;
    expect(result.reason, result.detail).toBe(reason);
    if (detail) expect(result.detail).toMatch(detail);
  });

  it('leaves the host untouched by all of them', () => {
    expect(readFileSync(sentinel, 'utf8')).toBe('untouched');
    expect(readdirSync(hostDir)).toEqual(['secret.txt']);
  });

  it('rejects a program whose output depends on where objects land (id-ordered sets) as nondeterministic', () => {
    const program = 'class A:\n    def __init__(self, v):\n        self.v = v\ndef f(n):\n    return [a.v for a in {A(i) for i in range(n)}]';
    expect(validateProposal(python, 'code_o', proposal(program, '24'))).toEqual({ valid: false, reason: 'nondeterministic: two runs of the program disagree' });
  });

  it('puts back what a program changed on a shared library class before the next one runs', () => {
    const patch = python.run('import collections\ndef f():\n    collections.Counter.most_common = lambda self, n=None: "patched"\n    collections.Counter.extra = 1\n    return collections.Counter("aab").most_common()', ['']);
    expect(patch).toMatchObject({ ok: true, outputs: ["'patched'"] });
    const after = python.run('import collections\ndef f():\n    c = collections.Counter("aab")\n    return [c.most_common(), hasattr(collections.Counter, "extra")]', ['']);
    expect(after).toMatchObject({ ok: true, outputs: ["[[('a', 2), ('b', 1)], False]"] });
  });

  it('counts fuel exactly: a loop of n iterations costs a fixed amount per iteration', () => {
    const program = 'def f(n):\n    total = 0\n    for i in range(n):\n        total += i\n    return total';
    const fuelOf = (n: number) => {
      const result = python.run(program, [String(n)]);
      if (!result.ok) throw new Error(result.detail);
      return result.fuel;
    };
    const perIteration = fuelOf(11) - fuelOf(10);
    expect(perIteration).toBeGreaterThan(0);
    expect(fuelOf(110) - fuelOf(10)).toBe(100 * perIteration);
    expect(python.run(program, ['1000'], fuelOf(1000) - 1)).toMatchObject({ ok: false, reason: 'fuel' });
    expect(python.run(program, ['1000'], fuelOf(1000))).toMatchObject({ ok: true });
  });

  it('dies on a C-stack overflow as a SandboxCrash (the pool replaces the worker), not as a verdict', async () => {
    const crashing = await PythonExecutor.load();
    try {
      const nested = 'def f():\n    x = []\n    for i in range(1000000):\n        x = [x]\n    return repr(x)';
      expect(() => crashing.run(nested, [''], 10_000_000)).toThrow(SandboxCrash);
    } finally {
      crashing.close();
    }
  });
});

// AZR-style programs; the host's CPython computes each output independently.
const ORDINARY: Array<{ program: string; inputs: string[] }> = [
  { program: 'def f(numbers, k):\n    return sorted(numbers)[-k:]', inputs: ['[5, 1, 4, 2], 2', '[3, 3, 1], 1', '[9, -2, 7, 0, 4], 3', '[1], 1'] },
  { program: 'def f(s):\n    out = []\n    for i, ch in enumerate(s):\n        out.append(ch.upper() if i % 2 == 0 else ch)\n    return "".join(out)', inputs: ["'banana'", "'abc'", "''", "'Python'"] },
  { program: 'from collections import Counter\ndef f(words):\n    counts = Counter(words)\n    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))', inputs: ["['a', 'b', 'a', 'c', 'b', 'a']", "['x']", "['q', 'p', 'q', 'p']", '[]'] },
  { program: 'def f(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a', inputs: ['0', '1', '10', '30'] },
  { program: 'import math\ndef f(a, b):\n    return (math.gcd(a, b), a * b // math.gcd(a, b))', inputs: ['12, 18', '7, 5', '100, 75', '9, 9'] },
  { program: 'def f(grid):\n    return [list(row) for row in zip(*grid)]', inputs: ['[[1, 2], [3, 4]]', '[[1, 2, 3]]', '[[5], [6], [7]]', '[[0, 1], [1, 0]]'] },
  { program: 'def f(d, key):\n    return {k: v * 2 for k, v in d.items() if k != key}', inputs: ["{'a': 1, 'b': 2}, 'a'", "{'x': 3}, 'y'", "{}, 'z'", "{'m': -1, 'n': 0}, 'n'"] },
  { program: 'import heapq\ndef f(xs):\n    h = list(xs)\n    heapq.heapify(h)\n    return [heapq.heappop(h) for _ in range(min(3, len(h)))]', inputs: ['[5, 3, 8, 1]', '[2]', '[9, 9, 1, 0, 4]', '[7, 6]'] },
  { program: 'def f(text, width):\n    words, line, lines = text.split(), "", []\n    for w in words:\n        if len(line) + len(w) + (1 if line else 0) > width:\n            lines.append(line)\n            line = w\n        else:\n            line = f"{line} {w}" if line else w\n    return lines + ([line] if line else [])', inputs: ["'the quick brown fox', 10", "'a b c', 1", "'hello', 3", "'', 5"] },
  { program: 'from functools import reduce\ndef f(xs):\n    return reduce(lambda acc, x: acc * 10 + x, xs, 0)', inputs: ['[1, 2, 3]', '[]', '[0, 7]', '[9, 9, 9, 9]'] },
];

function cpythonOutputs(cases: typeof ORDINARY): string[][] {
  const script = `
import json, sys, ast
out = []
for case in json.load(sys.stdin):
    g = {}
    exec(case['program'], g)
    out.append([repr(g['f'](*ast.literal_eval('(' + i + ',)'))) for i in case['inputs']])
print(json.dumps(out))`;
  const run = spawnSync('python3', ['-c', script], { input: JSON.stringify(cases), encoding: 'utf8', env: { ...process.env, PYTHONHASHSEED: '0' } });
  expect(run.status, `python3 is needed as the reference: ${run.stderr}`).toBe(0);
  return JSON.parse(run.stdout) as string[][];
}

describe('ordinary tasks', () => {
  const expected = cpythonOutputs(ORDINARY);

  it.each(ORDINARY.map((c, i) => ({ ...c, i })))('code_o, code_i and code_f of program $i agree with CPython', ({ program, inputs, i }) => {
    const gold = expected[i]!;
    const o = validateProposal(python, 'code_o', proposal(program, inputs[0]!));
    expect(o.valid, JSON.stringify(o)).toBe(true);
    if (!o.valid) return;
    expect(o.task.outputs).toEqual([gold[0]]);
    expect(checkAnswer(python, o.task, fence('output', gold[0]!))).toEqual({ correct: true, reason: 'correct' });
    expect(checkAnswer(python, o.task, gold[0]! + ' ').correct).toBe(true); // a bare answer is read too
    expect(checkAnswer(python, o.task, fence('output', '"not it"')).correct).toBe(false);

    // code_i: any input with the gold output is right; an input with another output is not.
    const target = inputs.findIndex((_, k) => k > 0 && gold[k] !== gold[0]);
    const i0 = validateProposal(python, 'code_i', `def f is below\n${fence('python', program)}\nf(${inputs[0]})`);
    expect(i0.valid, JSON.stringify(i0)).toBe(true);
    if (!i0.valid) return;
    expect(checkAnswer(python, i0.task, fence('input', inputs[0]!)).correct).toBe(true);
    expect(checkAnswer(python, i0.task, `f(${inputs[0]})`).correct).toBe(true);
    if (target > 0) expect(checkAnswer(python, i0.task, fence('input', inputs[target]!))).toMatchObject({ correct: false });

    // code_f: the program itself, rewritten, matches every pair; a constant function does not.
    const fn = validateProposal(python, 'code_f', proposal(program, ...inputs));
    expect(fn.valid, JSON.stringify(fn)).toBe(true);
    if (!fn.valid) return;
    expect(fn.task.outputs).toEqual(gold);
    expect(checkAnswer(python, fn.task, fence('python', `# same function, other layout\n${program.replace(/\n/g, '\n\n')}`)).correct).toBe(true);
    expect(checkAnswer(python, fn.task, fence('python', `def f(*args):\n    return ${gold[0]}`)).correct).toBe(false);
  });

  it('the seed tasks hold the outputs worked out by hand, and their metrics describe them', () => {
    for (const task of SEED_TASKS) {
      const result = python.run(task.program, task.inputs);
      expect(result).toMatchObject({ ok: true, outputs: task.outputs, inputTypes: task.inputTypes, outputTypes: task.outputTypes });
    }
    const loop = validateProposal(python, 'code_f', proposal(SEED_TASKS[2]!.program, ...SEED_TASKS[2]!.inputs));
    expect(loop).toMatchObject({ valid: true, metrics: { cyclomatic: 2, operators: ['in:int', 'out:int'], signature: 'code_f:in:int,out:int:branching' } });
  });

  it('gives layout-only variants one program hash, and a changed program another', () => {
    const hash = (program: string) => {
      const r = python.check(program);
      if (!r.ok) throw new Error(r.detail);
      return r.metrics.hash;
    };
    expect(hash('def f(x):\n    return x + 1')).toBe(hash('def f(x):  # add one\n\n    return (x + 1)'));
    expect(hash('def f(x):\n    return x + 1')).not.toBe(hash('def f(x):\n    return x + 2'));
  });

  it('names what a code_f answer got wrong: a shown pair or a held-out one', () => {
    const fn = validateProposal(python, 'code_f', proposal('def f(n):\n    return n * n', '1', '2', '3', '4'));
    if (!fn.valid) throw new Error(fn.reason);
    expect(checkAnswer(python, fn.task, fence('python', 'def f(n):\n    return [1, 4, 9, 0][n - 1]'))).toMatchObject({ correct: false, reason: expect.stringMatching(/^held-out pair f\(4\) gives 0, not 16$/) });
    expect(checkAnswer(python, fn.task, fence('python', 'def f(n):\n    return n'))).toMatchObject({ correct: false, reason: expect.stringMatching(/^shown pair f\(2\)/) });
    expect(solvePrompt(fn.task)).toContain('f(2) == 4');
    expect(solvePrompt(fn.task)).not.toContain('f(3)');
  });
});

describe('parsing model text', () => {
  it('finds the program in a python block, an untagged block, or bare text from "def f"', () => {
    expect(parseProgram('blah\n```python\ndef f(x):\n    return x\n```\n')).toBe('def f(x):\n    return x');
    expect(parseProgram('```\ndef f(x):\n    return 2\n```')).toBe('def f(x):\n    return 2');
    expect(parseProgram('Here:\ndef f(x):\n    return 3\n```input\n1\n```')).toBe('def f(x):\n    return 3');
    expect(parseProgram('no program here')).toBeNull();
  });

  it('reads inputs from input blocks or f(...) lines, and single values from their blocks or the bare text', () => {
    expect(parseInputs('```input\n1, [2]\n```\n```input\nf(3, [4])\n```')).toEqual(['1, [2]', '3, [4]']);
    expect(parseInputs('def f(a): ...\nf(1)\nf("x")\n')).toEqual(['1', '"x"']);
    expect(parseValue('The answer:\n```output\n[1, 2]\n```', 'output')).toBe('[1, 2]');
    expect(parseValue(' 42 ', 'output')).toBe('42');
    expect(parseValue('f(3)', 'input')).toBe('3');
  });

  it('records what cannot be parsed as a format error', () => {
    expect(validateProposal(python, 'code_o', 'just words')).toMatchObject({ valid: false, reason: expect.stringMatching(/^format: no program/) });
    expect(validateProposal(python, 'code_o', fence('python', 'def f(x):\n    return x'))).toMatchObject({ valid: false, reason: expect.stringMatching(/^format: no input/) });
    expect(validateProposal(python, 'code_f', proposal('def f(x):\n    return x', '1', '2', '2'))).toMatchObject({ valid: false, reason: expect.stringMatching(/^format: code_f needs 4 distinct inputs, got 2/) });
    const task: CodeTask = SEED_TASKS[0]!;
    expect(checkAnswer(python, task, fence('output', 'not a literal ['))).toMatchObject({ correct: false });
  });
});
