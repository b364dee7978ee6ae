// The verifier's fresh state per job (executor.ts): the WebAssembly memory snapshot taken after load and warm-up,
// restored before every job. Tested as if every layer of the sandbox had fallen: the poison is planted with the
// interpreter's real state in hand (runPython, the real builtins and sys), each kind the red team used, and the
// job after the restore gives the verdict it gives on a fresh interpreter.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { VerifyJob } from '../src/domains/domain.js';
import { PythonExecutor } from '../src/domains/python/executor.js';
import { checkAnswer, proposalText, SEED_TASKS, validateProposal, type CodeTask, type CodeTaskType } from '../src/domains/python/tasks.js';
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

/** Python run with the interpreter's real state: what a program that escaped every layer of the sandbox could do. */
const asEscapedProgram = (source: string) => (python as unknown as { pyodide: { runPython(code: string): unknown } }).pyodide.runPython(source);

const codeO = SEED_TASKS.find((task) => task.type === 'code_o')! as CodeTask;
const JOBS: Record<string, VerifyJob> = {
  wrongAnswer: { kind: 'check', task: codeO, answer: '[0]' },
  rightAnswer: { kind: 'check', task: codeO, answer: codeO.outputs[0]! },
  longLoop: { kind: 'validate', taskType: 'code_o', text: proposalText('def f():\n    total = 0\n    for i in range(300000):\n        total += i\n    return total', ['']) }, // over the fuel
  integerCheck: { kind: 'validate', taskType: 'code_o', text: proposalText('import numbers\ndef f(x):\n    return [isinstance(x, numbers.Integral), len(x), sorted(x)]', ["'cab'"]) },
  counter: { kind: 'validate', taskType: 'code_o', text: proposalText('import collections\ndef f(s):\n    return collections.Counter(s).most_common(2)', ["'banana'"]) },
};

const POISONS: Array<{ what: string; source: string; victims: Array<keyof typeof JOBS> }> = [
  { what: 'the comparison function judges every answer right', source: "same_value.__code__ = (lambda a, b: 'true').__code__", victims: ['wrongAnswer'] },
  { what: 'the fuel accounting never runs out', source: 'import sys\nfor event in (sys.monitoring.events.LINE, sys.monitoring.events.JUMP):\n    sys.monitoring.register_callback(3, event, None)', victims: ['longLoop'] },
  { what: 'builtins replaced', source: 'import builtins\nbuiltins.len = lambda x: 42\nbuiltins.sorted = lambda x, **k: list(x)', victims: ['integerCheck'] },
  { what: 'an ABC registry', source: 'import numbers\nnumbers.Integral.register(str)', victims: ['integerCheck'] },
  { what: 'a library class patched', source: "import collections\ncollections.Counter.most_common = lambda self, n=None: 'patched'", victims: ['counter'] },
];

/** The job as verifyCode runs it, less the restore it starts with: what the poison does when nothing undoes it. */
function verdictInPlace(executor: PythonExecutor, job: VerifyJob) {
  try {
    if (job.kind === 'check') return { kind: 'check', check: checkAnswer(executor, job.task as CodeTask, job.answer, 100_000) };
    return { kind: 'validate', validation: validateProposal(executor, job.taskType as CodeTaskType, job.text, 100_000) };
  } catch (error) {
    return { broken: (error as Error).message }; // the poison broke the sandbox's own code: poisoned as well
  }
}

describe('every job starts from the snapshot', () => {
  const verdictOn = (executor: PythonExecutor, name: keyof typeof JOBS) => verifyCode(executor, JOBS[name]!, 100_000);

  it.each(POISONS)('undoes a job that poisoned $what', ({ source, victims }) => {
    for (const victim of victims) {
      const expected = verdictOn(fresh, victim);
      python.restore();
      asEscapedProgram(source);
      expect(verdictInPlace(python, JOBS[victim]!), 'the poison changes the verdict when nothing undoes it').not.toEqual(expected);
      python.restore();
      asEscapedProgram(source);
      expect(verdictOn(python, victim)).toEqual(expected); // verifyCode restores before it runs the job
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
});
