// One state per run (executor.ts, memory-image.ts): the WebAssembly memory image taken after load and warm-up, put
// back before every run and every comparison. Tested as if every layer of the sandbox had fallen: each poison is
// planted with the interpreter's real state in hand (runPython: the real builtins, sys, the sandbox's own modules),
// each kind a program that escaped could leave (the judge rebound, the fuel hooks removed, builtins, an ABC
// registry, a library class, a trace function, an audit hook that cannot be removed, warnings turned into errors, a
// codec search function, finalizers); with the restore removed on purpose it changes the verdict, and with it the
// job gives the verdict it gives on a fresh interpreter.

import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { VerifyJob } from '../src/domains/domain.js';
import { PythonExecutor } from '../src/domains/python/executor.js';
import { proposalText, SEED_TASKS, type CodeTask } from '../src/domains/python/tasks.js';
import { verifyCode } from '../src/domains/python/verify-jobs.js';

let python: PythonExecutor;
let fresh: PythonExecutor;
beforeAll(async () => {
  [python, fresh] = [await PythonExecutor.load(), await PythonExecutor.load()];
});
afterAll(() => {
  python?.close();
  fresh?.close();
});

/** The compiled executor, as a verifier process loads it. */
const EXECUTOR = fileURLToPath(new URL('../dist/src/domains/python/executor.js', import.meta.url));

/** Python run with the interpreter's real state: what a program that escaped every layer of the sandbox could do. */
const asEscapedProgram = (source: string) => (python as unknown as { pyodide: { runPython(code: string): unknown } }).pyodide.runPython(source);

/** The same executor with its restore removed on purpose: what a poison does when nothing undoes it. */
const withoutRestore = (executor: PythonExecutor) => Object.create(executor, { restore: { value: () => {} } }) as PythonExecutor;

const codeO = SEED_TASKS.find((task) => task.type === 'code_o')! as CodeTask;
const validation = (program: string, input = '') => ({ kind: 'validate', taskType: 'code_o', text: proposalText(program, [input]) }) as VerifyJob;
const JOBS: Record<string, VerifyJob> = {
  wrongAnswer: { kind: 'check', task: codeO, answer: '[0]' },
  rightAnswer: { kind: 'check', task: codeO, answer: codeO.outputs[0]! },
  longLoop: validation('def f():\n    total = 0\n    for i in range(300000):\n        total += i\n    return total'), // over the fuel
  integerCheck: validation('import numbers\ndef f(x):\n    return [isinstance(x, numbers.Integral), len(x), sorted(x)]', "'cab'"),
  counter: validation('import collections\ndef f(s):\n    return collections.Counter(s).most_common(2)', "'banana'"),
  sum: validation('def f(n):\n    total = 0\n    for i in range(n):\n        total += i\n    return total', '100'),
  escape: validation('def f():\n    return len("\\d")'), // an invalid escape: a SyntaxWarning when compiled
  codec: validation("def f():\n    try:\n        return 'x'.encode('populora')\n    except LookupError:\n        return b''"),
};

const POISONS: Array<{ what: string; source: string; victims: Array<keyof typeof JOBS> }> = [
  { what: 'the judge (canonical forms) rebound', source: "import sys\nsys.modules['populora_sandbox.literals']._canonical.__code__ = (lambda *a, **k: 'same').__code__", victims: ['wrongAnswer'] },
  { what: 'the fuel hooks removed', source: 'import sys\nfor event in (sys.monitoring.events.LINE, sys.monitoring.events.JUMP):\n    sys.monitoring.register_callback(3, event, None)', victims: ['longLoop'] },
  { what: 'builtins replaced', source: 'import builtins\nbuiltins.len = lambda x: 42\nbuiltins.sorted = lambda x, **k: list(x)', victims: ['integerCheck'] },
  { what: 'an ABC registry', source: 'import numbers\nnumbers.Integral.register(str)', victims: ['integerCheck'] },
  { what: 'a library class patched', source: "import collections\ncollections.Counter.most_common = lambda self, n=None: 'patched'", victims: ['counter'] },
  { what: 'a trace function that rewrites locals', source: "import sys\ndef tracer(frame, event, arg):\n    if 'total' in frame.f_locals:\n        frame.f_locals['total'] = 0\n    return tracer\nsys.settrace(tracer)", victims: ['sum'] },
  { what: 'an audit hook (which cannot be removed)', source: "import sys\ndef hook(event, args):\n    if event == 'compile':\n        raise RuntimeError('audited')\nsys.addaudithook(hook)", victims: ['sum'] },
  { what: 'warnings turned into errors', source: "import warnings\nwarnings.simplefilter('error')", victims: ['escape'] },
  { what: 'a codec search function', source: "import codecs\ncodecs.register(lambda name: codecs.lookup('utf-8') if name == 'populora' else None)", victims: ['codec'] },
];

const verdictOn = (executor: PythonExecutor, name: keyof typeof JOBS) => {
  try {
    return verifyCode(executor, JOBS[name]!, 100_000);
  } catch (error) {
    return { broken: (error as Error).message.split('\n').slice(-2).join(' ') }; // the poison broke the sandbox's own code
  }
};

describe('every run starts from the image', () => {
  it.each(POISONS)('undoes a run that poisoned $what', ({ source, victims }) => {
    for (const victim of victims) {
      const expected = verdictOn(fresh, victim);
      python.restore();
      asEscapedProgram(source);
      expect(verdictOn(withoutRestore(python), victim), 'the poison changes the verdict when nothing undoes it').not.toEqual(expected);
      python.restore();
      asEscapedProgram(source);
      expect(verdictOn(python, victim)).toEqual(expected); // each run and comparison restores first
    }
  });

  it('leaves no garbage whose finalizer could run in the next job', () => {
    const plant = 'import numbers\nclass Bomb:\n    def __del__(self):\n        numbers.Integral.register(str)\nfor _ in range(100):\n    b = Bomb()\n    b.cycle = b\ndel b';
    const collectThenProbe = 'import gc, numbers\ngc.collect()\nstr(issubclass(str, numbers.Integral))';
    python.restore();
    asEscapedProgram(plant);
    expect(asEscapedProgram(collectThenProbe)).toBe('True'); // a collection in the next job would fire them
    python.restore();
    asEscapedProgram(plant);
    python.restore();
    expect(asEscapedProgram(collectThenProbe)).toBe('False');
  });

  it('gives the same verdicts in any order, interleaved with poisoners, as each job alone on a fresh interpreter', () => {
    const names = Object.keys(JOBS) as Array<keyof typeof JOBS>;
    const alone = Object.fromEntries(names.map((name) => [name, verdictOn(fresh, name)]));
    for (let round = 0; round < 3; round++) {
      for (const [i, name] of [...names].reverse().entries()) {
        asEscapedProgram(POISONS[(round + i) % POISONS.length]!.source);
        expect(verdictOn(python, name)).toEqual(alone[name]);
      }
    }
  });

  it('restores the stack a deep run used and the heap it grew, so a run after them is the run after load', () => {
    const probe = 'def f(n):\n    return [str(i) * 3 for i in range(n)]';
    const first = fresh.run(probe, ['50']);
    const deep = 'def f(n):\n    def down(k):\n        return 0 if k == 0 else 1 + down(k - 1)\n    return down(n)';
    expect(python.run(deep, ['150'])).toMatchObject({ ok: true, outputs: ['150'] });
    expect(python.run('def f():\n    return len([bytes(1_000_000) for _ in range(40)])', [''])).toMatchObject({ ok: true, outputs: ['40'] }); // 40 MB: the heap grows
    expect(python.run(probe, ['50'])).toEqual(first);
  });

  it('takes the same image wherever populora is installed, in any process: nothing of the host is in it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'populora-elsewhere-with-a-longer-path-'));
    try {
      const script = join(dir, 'another-script-name.mjs');
      writeFileSync(script, `const { PythonExecutor } = await import(${JSON.stringify(pathToFileURL(EXECUTOR).href)});
const { createHash } = await import('node:crypto');
const python = await PythonExecutor.load();
process.stdout.write(createHash('sha256').update(python.image.image).digest('hex'));`);
      const elsewhere = spawnSync(process.execPath, [script, 'an', 'argument'], { encoding: 'utf8', cwd: dir, env: { ...process.env, LANG: 'de_DE.UTF-8', TZ: 'Asia/Tokyo' } });
      expect(elsewhere.status, elsewhere.stderr.slice(-500)).toBe(0);
      const here = createHash('sha256').update((python as unknown as { image: { image: Buffer } }).image.image).digest('hex');
      expect(elsewhere.stdout).toBe(here);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('leaves the memory byte for byte as the image after a deep, growing run: the image up to its top, zeros above', () => {
    const internals = python as unknown as { image: { image: Buffer }; heapBytes: number; pyodide: { _module: { HEAPU8: Uint8Array } } };
    python.run('def f(n):\n    def down(k):\n        return 0 if k == 0 else 1 + down(k - 1)\n    x = [bytes(1_000_000) for _ in range(30)]\n    return down(n)', ['190']);
    python.restore();
    const memory = Buffer.from(internals.pyodide._module.HEAPU8);
    const image = internals.image.image;
    expect(memory.length).toBeGreaterThan(image.length); // the run grew the heap
    expect(memory.subarray(0, image.length).equals(image)).toBe(true);
    expect(memory.subarray(image.length).every((byte) => byte === 0)).toBe(true);
  });
});
