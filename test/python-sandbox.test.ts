// The code domain's sandbox (src/domains/python/sandbox/), in process against one PythonExecutor: the hostile
// corpus (each program refused with its reason, or run to the right answer, and a health check after each in the
// same interpreter), each layer tested as if the one above it had fallen (an escaped program holding the
// interpreter's real builtins and sys finds no JavaScript, no import, no judge it can reach), ordinary programs
// verified against the host's CPython as an independent oracle, and the parsing of model text.

import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PythonExecutor, type RunResult } from '../src/domains/python/executor.js';
import { CODE_PROMPTS, proposalPrompt, solvePrompt } from '../src/domains/python/prompts.js';
import { checkAnswer, parseInputs, parseProgram, parseValue, SEED_TASKS, validateProposal, type CodeTask } from '../src/domains/python/tasks.js';
import { cpythonOutputs } from './cpython-reference.js';
import { HEALTH_CHECK, HOSTILE, ORDINARY, SENTINEL_DIR, type HostileProgram } from './python-corpus.js';

let python: PythonExecutor;
beforeAll(async () => {
  python = await PythonExecutor.load();
});
afterAll(() => python?.close());

const fence = (tag: string, body: string) => `\`\`\`${tag}\n${body}\n\`\`\``;
const proposal = (program: string, ...inputs: string[]) => [fence('python', program), ...inputs.map((i) => fence('input', i))].join('\n');

/** Python run with the interpreter's real builtins and sys: what a program that escaped every layer above could do. */
const asEscaped = (source: string) => String((python as unknown as { pyodide: { runPython(code: string): unknown } }).pyodide.runPython(source));


function expectVerdict(result: RunResult, entry: HostileProgram): void {
  if (entry.reason === 'ok') {
    expect(result, JSON.stringify(result)).toMatchObject({ ok: true, outputs: entry.outputs });
    return;
  }
  expect(result.ok, JSON.stringify(result)).toBe(false);
  if (result.ok) return;
  expect(result.reason, result.detail).toBe(entry.reason);
  if (entry.detail) expect(result.detail).toMatch(entry.detail);
}

// ---- the hostile corpus ------------------------------------------------------------------------------------------

describe('hostile programs', () => {
  const healthy = cpythonOutputs([HEALTH_CHECK])[0]!;
  mkdirSync(SENTINEL_DIR, { recursive: true });
  writeFileSync(join(SENTINEL_DIR, 'secret.txt'), 'untouched');
  const inProcess = HOSTILE.filter((entry) => entry.stack !== 'production');

  it.each(inProcess)('$what → $reason', (entry) => {
    const started = performance.now();
    expectVerdict(python.run(entry.program, entry.inputs), entry);
    expect(performance.now() - started, 'a hostile program ends by counting, long before any guard on time').toBeLessThan(10_000);
    expect(python.run(HEALTH_CHECK.program, HEALTH_CHECK.inputs), 'the health check after it').toMatchObject({ ok: true, outputs: healthy });
  });

  it('leaves the host untouched by all of them', () => {
    expect(readFileSync(join(SENTINEL_DIR, 'secret.txt'), 'utf8')).toBe('untouched');
    expect(readdirSync(SENTINEL_DIR)).toEqual(['secret.txt']);
  });

  it("ends the ones that need it as their verdicts with the verifier processes' stack (60 MB of V8 stack)", async () => {
    const deep = HOSTILE.filter((entry) => entry.stack === 'production');
    const results = await runWithProductionStack([...deep.flatMap((entry) => [entry, HEALTH_CHECK])]);
    deep.forEach((entry, i) => {
      expectVerdict(results[2 * i]!, entry);
      expect(results[2 * i + 1]).toMatchObject({ ok: true, outputs: healthy });
    });
  });

  it('refuses a program whose output depends on where objects land (id-ordered sets) as nondeterministic', () => {
    const program = 'class A:\n    def __init__(self, v):\n        self.v = v\ndef f(n):\n    return [a.v for a in {A(i) for i in range(n)}]';
    expect(validateProposal(python, 'code_o', proposal(program, '24'))).toEqual({ valid: false, reason: 'nondeterministic: two runs of the program disagree' });
  });

  it("refuses a program whose output is the address of a big object (the C allocator's) as nondeterministic (red team F15)", () => {
    for (const slots of [20, 200, 1000, 5000]) {
      const program = `class Big:\n    __slots__ = tuple('a' + str(i) for i in range(${slots}))\ndef f(n):\n    return [hash(Big()) % 100003 for _ in range(n)]`;
      expect(validateProposal(python, 'code_o', proposal(program, '3'))).toEqual({ valid: false, reason: 'nondeterministic: two runs of the program disagree' });
    }
  });
});

const EXECUTOR = fileURLToPath(new URL('../dist/src/domains/python/executor.js', import.meta.url));

/** Runs programs in a node process given the stack the verifier's sandbox processes have (sandbox-processes.ts). */
async function runWithProductionStack(cases: ReadonlyArray<{ program: string; inputs: string[] }>): Promise<RunResult[]> {
  expect(existsSync(EXECUTOR), 'the compiled executor (npm run build)').toBe(true);
  const script = `const { PythonExecutor } = await import(${JSON.stringify(EXECUTOR)});
const python = await PythonExecutor.load();
const cases = JSON.parse(process.argv[1]);
process.stdout.write(JSON.stringify(cases.map((c) => python.run(c.program, c.inputs))));`;
  const node = [process.execPath, '--stack-size=60000', '--input-type=module', '-e', script, JSON.stringify(cases)];
  const command = process.platform === 'linux' ? ['prlimit', `--stack=${64 << 20}`, '--', ...node] : node;
  const child = spawn(command[0]!, command.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const status = await new Promise<number | null>((resolve) => child.on('close', resolve));
  expect(status, stderr.slice(-2000)).toBe(0);
  return JSON.parse(stdout) as RunResult[];
}

// ---- each layer as if the one above it had fallen --------------------------------------------------------------

describe('layer 0: no exits, for a program holding the real builtins and sys', () => {
  it('cannot import the JavaScript bridge, the FFI, ctypes or the C test modules, by any route', () => {
    const names = ['js', 'pyodide_js', 'pyodide', 'pyodide.ffi', 'pyodide.code', '_pyodide', '_pyodide._importhook', '_pyodide_core', 'ctypes', '_ctypes', '_testcapi', '_testinternalcapi', '_testlimitedcapi', 'zipimport_new', 'os.nothing'];
    const attempts = `
import sys, builtins, importlib, gc
from importlib.machinery import BuiltinImporter, ModuleSpec
results = {}
for name in ${JSON.stringify(names)}:
    outcomes = []
    sys.modules.pop(name, None)
    for attempt in (
        lambda: builtins.__import__(name),
        lambda: importlib.import_module(name),
        lambda: BuiltinImporter.create_module(ModuleSpec(name, BuiltinImporter, origin='built-in')),
        lambda: importlib._bootstrap._builtin_from_name(name),
        lambda: sys.modules['_frozen_importlib']._imp.create_builtin(ModuleSpec(name, None)),
    ):
        try:
            module = attempt()
            outcomes.append('made ' + repr(module))
        except BaseException as error:
            outcomes.append(type(error).__name__)
    results[name] = outcomes
modules = [m for m in gc.get_objects() if type(m).__name__ == 'module' and getattr(m, '__name__', '') == '_imp']
import json
json.dumps({'results': results, 'imp_modules': len(modules), 'path': sys.path, 'meta_path': [repr(f) for f in sys.meta_path]})`;
    const found = JSON.parse(asEscaped(attempts)) as { results: Record<string, string[]>; imp_modules: number; path: string[]; meta_path: string[] };
    for (const [name, outcomes] of Object.entries(found.results)) {
      for (const outcome of outcomes) expect(outcome, `${name}: ${outcomes.join(', ')}`).not.toMatch(/^made/);
    }
    expect(found.imp_modules).toBe(0);
    expect(found.path).toEqual([]);
    expect(found.meta_path).toEqual([]);
  });

  it('finds no JsProxy, no FFI function and no way to build one anywhere in the heap, so never JavaScript\'s Function', () => {
    const scan = `
import gc, sys, json, types
def js_kind(kind):
    return any(base.__name__.startswith('Js') and base.__module__.startswith(('pyodide', '_pyodide')) for base in kind.__mro__)
seen, stack, found = set(), list(gc.get_objects()), []
while stack:  # everything tracked, and what it refers to one level down (untracked objects: strings, functions of C modules...)
    obj = stack.pop()
    if id(obj) in seen:
        continue
    seen.add(id(obj))
    kind = type(obj)
    if js_kind(kind) and kind.__name__ not in ('JsNull',):
        found.append('instance of ' + kind.__name__)
    if isinstance(obj, types.BuiltinFunctionType) and getattr(obj.__self__, '__name__', None) in ('_pyodide_core', '_imp'):
        found.append('function ' + obj.__name__)
    if isinstance(obj, types.ModuleType) and obj.__name__.split('.')[0] in ('js', 'pyodide_js', 'pyodide', '_pyodide', '_pyodide_core') and any(not k.startswith('__') for k in vars(obj)) and obj.__name__ not in ('pyodide.code', '_pyodide._base'):
        found.append('module ' + obj.__name__)
    if len(seen) < 400000:
        stack.extend(r for r in gc.get_referents(obj) if id(r) not in seen)
built = []
for kind in [k for k in gc.get_objects() if isinstance(k, type) and js_kind(k)]:
    for make in [kind] + [getattr(kind, name) for name in list(vars(kind)) if isinstance(vars(kind)[name], (classmethod, staticmethod))]:
        for args in ((), ('Error', 'message'), (1,), ([1],)):
            try:
                made = make(*args)
            except BaseException:
                continue
            if js_kind(type(made)) and type(made).__name__ != 'JsNull':
                try:
                    made.constructor
                    built.append(kind.__name__ + ' gives a JsProxy with attributes')
                except BaseException:
                    pass
left = [name for name in ('pyodide.code', '_pyodide._base') if name in sys.modules]
json.dumps({'found': found, 'built': built, 'importable': left})`;
    expect(JSON.parse(asEscaped(scan))).toEqual({ found: [], built: [], importable: [] });
  });

  it('has no stdlib archive left to load code from, and pyodide.runPython still works for the host', () => {
    const fs = (python as unknown as { pyodide: { FS: { readdir(path: string): string[] } } }).pyodide.FS; // the host's view, not the program's
    expect(fs.readdir('/lib').filter((name) => name.endsWith('.zip'))).toEqual([]);
    expect(asEscaped('1 + 1')).toBe('2');
  });
});

describe('layer 1: the source, by allow-list', () => {
  const verdict = (program: string, inputs = ['']) => python.run(program, inputs);

  it('allows _ and __ as variable names, and the dunder methods of ordinary classes', () => {
    expect(verdict('def f(n):\n    __ = n * 2\n    _ = __ + 1\n    for __ in range(2):\n        pass\n    return [_, __]', ['3'])).toMatchObject({ ok: true, outputs: ['[7, 1]'] });
    expect(verdict('class A:\n    __slots__ = ("v",)\n    __hash__ = None\n    def __init__(self, v):\n        self.v = v\n    def __eq__(self, o):\n        return self.v == o.v\n    def __len__(self):\n        return self.v\ndef f():\n    return [A(1) == A(1), len(A(3)), type(A(1)).__name__]')).toMatchObject({ ok: true, outputs: ["[True, 3, 'A']"] });
  });

  it('rewrites a bare except to except Exception, and refuses except BaseException with the reason', () => {
    expect(verdict('def f():\n    try:\n        return 1 // 0\n    except:\n        return -1')).toMatchObject({ ok: true, outputs: ['-1'] });
    expect(verdict('def f():\n    try:\n        return 1\n    except BaseException:\n        return 2')).toMatchObject({ ok: false, reason: 'forbidden-syntax', detail: expect.stringMatching(/would swallow the sandbox's limits/) });
  });

  it('reads a trailing comma in an input as one argument, as Python does', () => {
    expect(verdict('def f(*args):\n    return len(args)', ["'x',", "'x', 2,", '', 'f(1,)'])).toMatchObject({ ok: true, outputs: ['1', '2', '0', '1'] });
  });

  it('allows the attributes a program defines or reads from the library, and no other', () => {
    expect(verdict('from collections import namedtuple\nP = namedtuple("P", "left right")\ndef f():\n    p = P(1, 2)\n    return [p.left, p._replace(right=5).right, p._asdict()["left"]]')).toMatchObject({ ok: true, outputs: ['[1, 5, 1]'] });
    expect(verdict('def f(s):\n    return s.upper().center(7, "*")', ["'ab'"])).toMatchObject({ ok: true, outputs: ["'***AB**'"] });
    expect(verdict('def f():\n    return (1).gi_code')).toMatchObject({ ok: false, reason: 'forbidden-attribute' });
  });
});

describe('layer 4: the verdict, by code the program cannot reach', () => {
  it('compares answers as exact-type values: 1 is not 1.0 nor True, and set and dict order does not matter', () => {
    expect(python.sameValue('[1,2]', '[1, 2]')).toBe(true);
    expect(python.sameValue('{2, 1}', '{1, 2}')).toBe(true);
    expect(python.sameValue("{'b': 1, 'a': [2]}", "{'a': [2], 'b': 1}")).toBe(true);
    expect(python.sameValue('1', '1.0')).toBe(false);
    expect(python.sameValue('1', 'True')).toBe(false);
    expect(python.sameValue('(1,)', '[1]')).toBe(false);
    expect(python.sameValue('__import__("os")', '__import__("os")')).toBe(false);
    expect(python.sameValue('[' .repeat(150) + ']'.repeat(150), '[' .repeat(150) + ']'.repeat(150))).toBe(false);
  });

  it('judges the same with repr and sorted poisoned by an escaped program (the judge holds its own references)', () => {
    const program = 'def f(xs):\n    return {x % 3 for x in xs}, {str(x): [x, -x] for x in xs}, (len(xs), 1.5, None)';
    const inputs = ['[4, 1, 7, 3]', '[]', '[10, 20]'];
    const before = python.run(program, inputs);
    expect(before.ok).toBe(true);
    try {
      asEscaped("import builtins\nbuiltins.repr = lambda x: 'X'\nbuiltins.sorted = lambda x, **k: list(x)\n'poisoned'");
      expect(python.run(program, inputs)).toMatchObject({ outputs: before.ok ? before.outputs : [], outputTypes: before.ok ? before.outputTypes : [] });
      expect(python.sameValue('{3, 1, 2}', '{1, 2, 3}')).toBe(true);
      expect(python.sameValue('[1, 2]', '[2, 1]')).toBe(false);
    } finally {
      python.restore();
    }
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

  it('keeps a refusal whatever the program does with it, and gives the same verdict twice', () => {
    const program = 'def f():\n    try:\n        x = [0] * 10 ** 9\n    finally:\n        return "swallowed"';
    const first = python.run(program, ['']);
    expect(first).toMatchObject({ ok: false, reason: 'memory' });
    expect(python.run(program, [''])).toEqual(first);
  });

  it('ends a 1,000,000-deep list as a recursion verdict, not a crash of the interpreter', () => {
    const nested = 'def f():\n    x = []\n    for i in range(1000000):\n        x = [x]\n    return repr(x)';
    expect(python.run(nested, [''], 10_000_000)).toMatchObject({ ok: false, reason: 'recursion' });
    expect(python.run(HEALTH_CHECK.program, HEALTH_CHECK.inputs)).toMatchObject({ ok: true });
  });
});

// ---- ordinary programs: the host's CPython is the oracle ---------------------------------------------------------

describe('ordinary tasks', () => {
  const expected = cpythonOutputs(ORDINARY);

  it.each(ORDINARY.map((c, i) => ({ ...c, i })))('code_o, code_i and code_f of program $i agree with CPython', ({ program, inputs, i }) => {
    const gold = expected[i]!;
    const all = python.run(program, inputs);
    expect(all, JSON.stringify(all)).toMatchObject({ ok: true, outputs: gold });
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
    expect(checkAnswer(python, fn.task, fence('python', `def f(*args):\n    return ${gold[0]}`)).correct).toBe(new Set(gold).size === 1);
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

  it("asks AZR's teachers (and a code_i student) for inputs written as Python literals, as the verifier reads them", () => {
    const azr = { templates: CODE_PROMPTS.styles.azr!, chat: 'none' } as const;
    for (const type of ['code_o', 'code_i', 'code_f'] as const) expect(proposalPrompt(type, [SEED_TASKS[0]!], azr)).toMatch(/Write every argument as a Python literal/);
    expect(solvePrompt(SEED_TASKS[1]!, azr)).toMatch(/Write every argument as a Python literal/);
    expect(validateProposal(python, 'code_o', proposal('def f(s):\n    return s', "'a-b'.split('-')"))).toMatchObject({ valid: false, reason: expect.stringMatching(/^bad-input: .* is not a Python literal/) });
  });

  it('records what cannot be parsed as a format error', () => {
    expect(validateProposal(python, 'code_o', 'just words')).toMatchObject({ valid: false, reason: expect.stringMatching(/^format: no program/) });
    expect(validateProposal(python, 'code_o', fence('python', 'def f(x):\n    return x'))).toMatchObject({ valid: false, reason: expect.stringMatching(/^format: no input/) });
    expect(validateProposal(python, 'code_f', proposal('def f(x):\n    return x', '1', '2', '2'))).toMatchObject({ valid: false, reason: expect.stringMatching(/^format: code_f needs 4 distinct inputs, got 2/) });
    const task: CodeTask = SEED_TASKS[0]!;
    expect(checkAnswer(python, task, fence('output', 'not a literal ['))).toMatchObject({ correct: false });
  });
});

afterAll(() => rmSync(SENTINEL_DIR, { recursive: true, force: true }));
