// The verifier's threat model (docs/sandbox.md): assume the program reaches the real builtins and runs arbitrary
// Python inside its run; every verdict, every gold output and the next job must still be right. The programs here
// go through the test-only door (ExecutorOptions.realBuiltinsForTests: unchecked, unrewritten, the real builtins,
// sys, gc, frames and every module already loaded), so the Python layers above are removed on purpose, and each
// tries a forgery of one kind: rebinding the judge's functions, rewriting the run's report, hooks that outlive its
// return, telling a validation from a check, the JavaScript-side channels (files, the current directory, descriptors,
// the environment, entropy, clocks, the standard streams, the shell, exit). What must hold is the judge in
// JavaScript (python-values.ts), one state per run (memory-image.ts) and the gate (host-calls.ts).

import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { VerifyJob } from '../src/domains/domain.js';
import { CLOCK_EPOCH_MS } from '../src/domains/python/host-calls.js';
import { HostAccessRefused, PythonExecutor } from '../src/domains/python/executor.js';
import { checkAnswer, proposalText, SEED_TASKS, validateProposal, type CodeTask } from '../src/domains/python/tasks.js';
import { PythonVerifierPool } from '../src/domains/python/verifier-pool.js';
import { verifyCode } from '../src/domains/python/verify-jobs.js';
import { parseScenario } from '../src/scenario/scenario.js';
import { runScenario } from '../src/sim/run.js';
import { editDeliveries, resultsOf } from './edit-deliveries.js';

let escaped: PythonExecutor; // every program through the door
let reference: PythonExecutor; // the same, for the verdicts a job gets on a fresh interpreter
beforeAll(async () => {
  escaped = await PythonExecutor.load({ realBuiltinsForTests: true });
  reference = await PythonExecutor.load({ realBuiltinsForTests: true });
});
afterAll(() => {
  escaped?.close();
  reference?.close();
});

const fence = (tag: string, body: string) => `\`\`\`${tag}\n${body}\n\`\`\``;
const digitSum = SEED_TASKS.find((task) => task.type === 'code_f')! as CodeTask; // 7, 42, 305, 9999 → 7, 6, 8, 36

/** Ordinary jobs run after each forgery: their verdicts must be the ones a fresh interpreter gives. */
const PROBES: VerifyJob[] = [
  { kind: 'validate', taskType: 'code_o', text: proposalText('import collections\ndef f(s):\n    return collections.Counter(s).most_common(2), sorted(set(s)), len(s)', ["'banana'"]) },
  { kind: 'validate', taskType: 'code_f', text: proposalText('def f(n):\n    total = 0\n    for i in range(n):\n        total += i * i\n    return total, str(n) * 2', ['3', '10', '0', '7']) },
  { kind: 'check', task: digitSum, answer: fence('python', digitSum.program) },
  { kind: 'check', task: digitSum, answer: fence('python', 'def f(n):\n    return n % 9') },
  { kind: 'check', task: SEED_TASKS[0]!, answer: '[4, 5]' },
];
const probeVerdicts = (executor: PythonExecutor) => PROBES.map((job) => verifyCode(executor, job, 100_000));

/** What the judge's own Python (sandbox/job.py, literals.py) is, to a program holding sys. */
const SANDBOX = "import sys, gc\njob = sys.modules['populora_sandbox.job']\nliterals = sys.modules['populora_sandbox.literals']\n";

// Student programs for the digit-sum task that return wrong values and try to be judged right anyway.
const FORGING_STUDENTS: Array<{ what: string; program: string }> = [
  {
    what: "rebinds the judge's functions (canonical forms, the literal parser, the JSON writer)",
    program: `${SANDBOX}literals._canonical.__code__ = (lambda *a, **k: '7').__code__
literals._literal.__code__ = (lambda *a, **k: 7).__code__
job.canonical.__code__ = (lambda texts_json: '["7", "7", "7", "7", "7", "7", "7", "7"]').__code__
def f(n):
    return 0`,
  },
  {
    what: "rewrites the run's report: the gold texts in place of its own",
    program: `${SANDBOX}def forged(value, *rest, real_json=job._json):
    if isinstance(value, dict) and 'outputs' in value:
        value['outputs'] = ['7', '6', '8', '36'][:len(value['outputs'])]
    return real_json(value)
job._json = forged
def f(n):
    return 0`,
  },
  {
    what: "points the report's addresses at objects holding the right answers it knows (the shown pairs)",
    program: `${SANDBOX}def forged(value, *rest, real_json=job._json, answers=[7, 6]):
    if isinstance(value, dict) and 'values' in value and value['ok']:
        value['values'][:2] = [id(a) for a in answers]
        value['outputs'][:2] = [repr(a) for a in answers]
    return real_json(value)
job._json = forged
def f(n):
    return 0`,
  },
  {
    what: 'reports fewer outputs than inputs',
    program: `${SANDBOX}def forged(value, *rest, real_json=job._json):
    if isinstance(value, dict) and value.get('ok'):
        value['values'] = []
        value['outputs'] = []
    return real_json(value)
job._json = forged
def f(n):
    return 0`,
  },
  {
    what: 'leaves hooks that outlive its return (audit, trace, profile, gc callbacks, displayhook, warnings, codecs, copyreg, atexit)',
    program: `import sys, gc, warnings, codecs, copyreg, atexit
sys.addaudithook(lambda event, args: None)
sys.settrace(lambda *a: None)
sys.setprofile(lambda *a: None)
gc.callbacks.append(lambda phase, info: None)
sys.displayhook = sys.excepthook = lambda *a: None
warnings.simplefilter('error')
codecs.register(lambda name: None)
copyreg.dispatch_table[list] = lambda x: (list, ())
atexit.register(lambda: None)
def f(n):
    return 0`,
  },
];

describe('a code_f answer that reaches the real builtins', () => {
  it('is judged on the values its f returned: every forgery of the judge fails', () => {
    expect(checkAnswer(escaped, digitSum, fence('python', digitSum.program))).toEqual({ correct: true, reason: 'correct' }); // through the door, honest code passes
    for (const { what, program } of FORGING_STUDENTS) {
      const check = checkAnswer(escaped, digitSum, fence('python', program));
      expect(check.correct, `${what}: ${check.reason}`).toBe(false);
      expect(probeVerdicts(escaped), `the jobs after one that ${what}`).toEqual(probeVerdicts(reference));
    }
  });

  it('is refused as tampered where its report disagrees with its values, or gives fewer outputs than inputs', () => {
    const [, rewritten, , short] = FORGING_STUDENTS;
    expect(escaped.run(rewritten!.program, digitSum.inputs)).toMatchObject({ ok: false, reason: 'tampered', detail: expect.stringMatching(/output 0 reads 0 in memory, not 7/) });
    expect(escaped.run(short!.program, digitSum.inputs)).toMatchObject({ ok: false, reason: 'tampered', detail: expect.stringMatching(/0 outputs for 4 inputs/) });
  });

  it("is judged right with every hook left behind when its values are right: the judge runs none of the program's code", () => {
    const hooks = FORGING_STUDENTS[4]!.program.replace('def f(n):\n    return 0', `def f(n):\n    return sum(int(d) for d in str(n))`);
    expect(checkAnswer(escaped, digitSum, fence('python', hooks))).toEqual({ correct: true, reason: 'correct' });
  });
});

// Teacher programs: each tries to make a task whose gold output is not what a check of the same input gives.
const TELLTALES: Array<{ what: string; program: string }> = [
  { what: 'the perturbation ballast (the determinism re-run)', program: `${SANDBOX}def f(x):\n    return [x, len(job._ballast)]` },
  { what: 'the number of live objects', program: 'import gc\ndef f(x):\n    return [x, len(gc.get_objects()) % 97]' },
  { what: 'the frames below it', program: 'import sys\ndef f(x):\n    frames, frame = [], sys._getframe()\n    while frame:\n        frames.append(frame.f_code.co_name)\n        frame = frame.f_back\n    return [x, frames]' },
  { what: "the run's arguments (fuel, perturbation, reused code)", program: 'import sys\ndef f(x):\n    frame = sys._getframe()\n    while frame.f_code.co_name != "run":\n        frame = frame.f_back\n    args = frame.f_locals\n    return [x, args["fuel"], args["perturb_seed"], args["compiled"] is None]' },
  { what: 'clocks and entropy', program: 'import os, random, time\ndef f(x):\n    return [x, time.time(), time.monotonic(), time.perf_counter_ns(), random.random(), os.urandom(4)]' },
  { what: 'an address', program: 'def f(x):\n    return [x, id(object()) % 1000]' },
  { what: "a previous run's leftovers in a library module", program: 'import string\ndef f(x):\n    runs = string.__dict__.setdefault("runs", [])\n    runs.append(x)\n    return [x, len(runs)]' },
];

describe('a task a teacher wrote with the real builtins', () => {
  it.each(TELLTALES)('cannot tell a check from its validation by $what', ({ program }) => {
    for (const type of ['code_o', 'code_i'] as const) {
      const validation = validateProposal(escaped, type, proposalText(program, ['5']));
      if (!validation.valid) {
        expect(validation.reason).toMatch(/^nondeterministic/); // refused for differing between its two runs
        continue;
      }
      const task = validation.task as CodeTask;
      expect(checkAnswer(escaped, task, type === 'code_i' ? fence('input', '5') : fence('output', task.outputs[0]!)), `${type}: gold ${task.outputs[0]}`).toEqual({ correct: true, reason: 'correct' });
    }
  });

  it("has the gold output its values read in memory, also when it points the report elsewhere, and a check agrees", () => {
    const redirect = `${SANDBOX}def forged(value, *rest, real_json=job._json, other=['not', 'what', 'f', 'returned']):
    if isinstance(value, dict) and value.get('ok'):
        value['values'][0] = id(other)
        value['outputs'][0] = repr(other)
    return real_json(value)
job._json = forged
def f(x):
    return x * 2`;
    const validation = validateProposal(escaped, 'code_i', proposalText(redirect, ['21']));
    expect(validation).toMatchObject({ valid: true, task: { outputs: ["['not', 'what', 'f', 'returned']"] } });
    if (!validation.valid) return;
    expect(checkAnswer(escaped, validation.task as CodeTask, fence('input', '21'))).toEqual({ correct: true, reason: 'correct' });
    const lying = `${SANDBOX}literals._canonical.__code__ = (lambda *a, **k: '42').__code__\ndef f(x):\n    return x`;
    expect(validateProposal(escaped, 'code_o', proposalText(lying, ['7']))).toMatchObject({ valid: false, reason: expect.stringMatching(/^tampered: .*output 0 reads 7 in memory, not 42/) });
  });

  it("sees its input's value, never its spelling: a code_i answer spelt otherwise runs as the validation did (red team F7)", () => {
    // It looks through every frame below it for text holding its input: the harness's JSON of the inputs, an input's
    // own text. Were either there, the gold of 'zq7' would differ from the run of the answer "zq7".
    const reader = `import sys
def f(x):
    found, frame = [], sys._getframe(1)
    while frame is not None:
        found += [v for v in frame.f_locals.values() if type(v) is str and x in v and v != x]
        frame = frame.f_back
    return [x, found]`;
    const validation = validateProposal(escaped, 'code_i', proposalText(reader, ["'zq7'"]));
    expect(validation).toMatchObject({ valid: true, task: { outputs: ["['zq7', []]"] } });
    if (!validation.valid) return;
    expect(checkAnswer(escaped, validation.task as CodeTask, fence('input', '"zq7"'))).toEqual({ correct: true, reason: 'correct' });
  });

  it('never has the gold output in its interpreter when a check runs it: gold is compared where no program ran', () => {
    // It counts the strings holding its own output before making it: were the gold placed in its interpreter for the
    // check, it would see one, give another output and fail the check of its own task.
    const spy = `import gc, sys
def f(x):
    secret = ''.join(['SEC', 'RET'])
    seen = 0
    # Strings are not tracked by the collector: they are found in the containers that are, and in every module.
    for o in gc.get_objects() + [vars(module) for module in list(sys.modules.values())]:
        items = o.values() if type(o) is dict else o if type(o) in (list, tuple) else ()
        seen += sum(1 for v in items if type(v) is str and secret in v and v is not secret)
    return [x, min(seen, 1), secret]`;
    const task: CodeTask = { type: 'code_i', program: spy, inputs: ['1'], outputs: ["[1, 0, 'SECRET']"], inputTypes: ['int'], outputTypes: ['list[int|str]'] };
    expect(checkAnswer(escaped, task, fence('input', '1'), 10 ** 8)).toEqual({ correct: true, reason: 'correct' });
    const asHost = (source: string) => (escaped as unknown as { pyodide: { runPython(code: string): unknown } }).pyodide.runPython(source);
    asHost("planted = \"[1, 0, 'SECRET']\""); // as if the gold were in the interpreter: the spy sees it
    expect(Object.create(escaped, { restore: { value: () => {} } }).run(spy, ['1'], 10 ** 8)).toMatchObject({ ok: true, outputs: ["[1, 1, 'SECRET']"] });
  });
});

describe('the JavaScript side of a run, for a program with the real builtins', () => {
  const run = (executor: PythonExecutor, program: string) => executor.run(program, ['']);

  it('finds no file system it can write, no directory to change, no descriptor to open or close', () => {
    const attempts = `import os, socket
def f():
    out = []
    for attempt in (lambda: open('/tmp/planted', 'w'), lambda: os.listdir('/'), lambda: os.chdir('/tmp'), lambda: os.open('/home', 0),
                    lambda: os.dup(1), lambda: os.close(2), lambda: os.stat('/'), lambda: os.mkdir('/tmp/d'), lambda: socket.socket()):
        try:
            out.append(repr(attempt()))
        except OSError as error:
            out.append(type(error).__name__)
    return out, os.getcwd()`;
    expect(run(escaped, attempts)).toMatchObject({ ok: true, outputs: ["(['PermissionError', 'PermissionError', 'PermissionError', 'PermissionError', 'PermissionError', 'OSError', 'PermissionError', 'PermissionError', 'PermissionError'], '/home/pyodide')"] });
    expect(escaped.refusedHostCalls).toEqual(expect.arrayContaining(['__syscall_openat', '__syscall_chdir', '__syscall_socket', 'fd_close']));
  });

  it('leaves nothing for the next job in files, the directory, descriptors or the environment; without the gate it would', () => {
    const writer = "import os\ndef f():\n    for attempt in (lambda: open('/home/pyodide/planted', 'w').write('x'), lambda: os.chdir('/tmp'), lambda: os.open('/home/pyodide/planted', os.O_RDONLY)):\n        try:\n            attempt()\n        except OSError:\n            pass\n    os.environ['PLANTED'] = '1'\n    os.putenv('PLANTED', '1')\n    return 0";
    const reader = "import os\ndef f():\n    found = []\n    try:\n        found.append(open('/home/pyodide/planted').read())\n    except OSError as error:\n        found.append(type(error).__name__)\n    return found, os.getcwd(), os.environ.get('PLANTED'), os.getenv('PLANTED')";
    const alone = run(reference, reader);
    run(escaped, writer);
    expect(run(escaped, reader)).toEqual(alone);
    const gate = (escaped as unknown as { gate: { locked: boolean } }).gate;
    gate.locked = false; // the gate removed on purpose: Emscripten's file system lives in JavaScript, outside the image
    try {
      run(escaped, writer);
      expect(run(escaped, reader)).not.toEqual(alone);
    } finally {
      gate.locked = true;
    }
  });

  it('reads clocks, entropy and the time zone as functions of the run: the same in every run and every interpreter', () => {
    const reads = 'import os, random, time\ndef f():\n    return [time.time(), time.monotonic(), time.perf_counter(), time.localtime()[:6], time.timezone, time.tzname, os.urandom(8), random.random(), random.getrandbits(64)]';
    const first = run(escaped, reads);
    expect(first.ok).toBe(true);
    expect(run(escaped, reads)).toEqual(first);
    expect(run(reference, reads)).toEqual(first);
    if (!first.ok) return;
    const [now] = first.outputs[0]!.slice(1).split(',');
    expect(Math.abs(Number(now) * 1000 - CLOCK_EPOCH_MS)).toBeLessThan(60_000); // the virtual clock, not the host's
    expect(first.outputs[0]).toContain("(2025, 1, 1, 0, 0, 0), 0, ('UTC', 'UTC')");
  });

  it("starts each run's standard error afresh, and runs no shell", () => {
    const dir = mkdtempSync(join(tmpdir(), 'populora-shell-'));
    try {
      const noisy = `import os, sys\ndef f():\n    sys.stderr.write('LEFTOVER' * 10)\n    sys.stderr.flush()\n    return os.system('touch ${dir}/by-the-shell')`;
      expect(run(escaped, noisy)).toMatchObject({ ok: true, outputs: ['-1'] });
      expect(escaped.refusedHostCalls).toContain('_emscripten_system');
      expect(existsSync(join(dir, 'by-the-shell'))).toBe(false);
      run(escaped, 'def f():\n    return 1');
      expect((escaped as unknown as { stderr: string }).stderr).not.toContain('LEFTOVER');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('judges a run that met the heap cap as memory, whatever it did with the MemoryError', () => {
    const swallowing = 'def f():\n    try:\n        x = bytearray(600 * 2 ** 20)\n    except MemoryError:\n        return 1\n    return 0';
    expect(run(escaped, swallowing)).toMatchObject({ ok: false, reason: 'memory', detail: expect.stringMatching(/heap cap/) });
    expect(run(escaped, 'def f():\n    return 2')).toMatchObject({ ok: true, outputs: ['2'] }); // the heap stays grown, the next run is whole
  });

  it('answers a date past JavaScript\'s range as C does, without ending the interpreter (red team F17)', () => {
    const far = 'import time\ndef f():\n    return time.mktime((100000000, 1, 1, 0, 0, 0, 0, 1, 0))';
    expect(run(escaped, far)).toMatchObject({ ok: false, reason: 'runtime-error', detail: 'OverflowError: mktime argument out of range' });
    expect(run(escaped, 'import time\ndef f():\n    return time.mktime((2000, 1, 1, 0, 0, 0, 0, 1, 0))')).toMatchObject({ ok: true, outputs: ['946684800.0'] });
  });

  it('refuses an exit or an abort as a verdict on the program, which ends the interpreter', async () => {
    for (const ending of ['os._exit(3)', 'os.abort()']) {
      const doomed = await PythonExecutor.load({ realBuiltinsForTests: true });
      expect(() => doomed.run(`import os\ndef f():\n    ${ending}`, [''])).toThrow(HostAccessRefused);
      expect(() => doomed.run('def f():\n    return 1', [''])).toThrow(/dead/);
      doomed.close();
    }
  });
});

describe('through the fenced sandbox processes', () => {
  it('answers an exit as refused, without a retry or a fault, and the next job is healthy', async () => {
    const pool = new PythonVerifierPool(1, { realBuiltinsForTests: true });
    try {
      const job = (program: string): VerifyJob => ({ kind: 'validate', taskType: 'code_o', text: proposalText(program, ['']) });
      const [exited, next] = await pool.verify([job('import os\ndef f():\n    os._exit(3)'), job('def f():\n    return 41 + 1')]);
      expect(exited).toMatchObject({ kind: 'validate', validation: { valid: false, reason: expect.stringMatching(/^host-access: .*proc_exit/) } });
      expect(next).toMatchObject({ kind: 'validate', validation: { valid: true, task: { outputs: ['42'] } } });
      expect(pool.faults).toBe(0); // no guard waited out: that would be a fault, not this refusal
    } finally {
      await pool.close();
    }
  }, 120_000);
});

describe('a program that turns its own meters off', () => {
  it('is bounded by what it cannot reach: the guard ends it as a fault, and the next job is judged normally (red team F6)', async () => {
    const pool = new PythonVerifierPool(1, { realBuiltinsForTests: true, wallClockGuardMs: 3_000 });
    try {
      const job = (program: string): VerifyJob => ({ kind: 'validate', taskType: 'code_o', text: proposalText(program, ['']) });
      const unmetered = `${SANDBOX}import tracemalloc
limits = sys.modules['populora_sandbox.limits']
def f():
    limits._run.limit = 10 ** 15  # its fuel, the memory tracer and the recursion limit are Python state it holds
    tracemalloc.stop()
    sys.setrecursionlimit(10 ** 6)
    while True:
        pass`;
      const [endless, next] = await pool.verify([job(unmetered), job('def f():\n    return 41 + 1')]);
      expect(endless).toMatchObject({ kind: 'fault', detail: expect.stringMatching(/wall-clock guard/) });
      expect(next).toMatchObject({ kind: 'validate', validation: { valid: true, task: { outputs: ['42'] } } });
      expect(pool.faults).toBe(1);
    } finally {
      await pool.close();
    }
  }, 300_000);
});

describe('a worker that dies under a job', () => {
  it('retries the job on a fresh process within what is left of its guard, and answers (red team F17)', async () => {
    const pool = new PythonVerifierPool(1, { realBuiltinsForTests: true, wallClockGuardMs: 150_000 }); // a loaded machine is slow
    try {
      await pool.ready();
      const slow = 'def f():\n    return sum(range(2 * 10 ** 7)) % 7'; // through the door: C work, no fuel, a second or more
      const job: VerifyJob = { kind: 'validate', taskType: 'code_o', text: proposalText(slow, ['']) };
      const processes = (pool as unknown as { processes: Array<{ child: { kill(signal: string): boolean } }> }).processes;
      const killed = sleep(300).then(() => processes[0]!.child.kill('SIGKILL')); // mid-job: a death, not a refusal
      const [outcome] = await pool.verify([job]);
      await killed;
      expect(outcome).toMatchObject({ kind: 'validate', validation: { valid: true, task: { outputs: ['1'] } } }); // (2e7 · (2e7 - 1) / 2) mod 7
      expect(pool.faults).toBe(0);
      expect(pool.jobTimes[0]).toBeGreaterThan(300); // the try, the restart and the retry
    } finally {
      await pool.close();
    }
  }, 400_000);
});

// A self-play run whose teachers propose programs that use randomness (scripted: a random tiny model writes no
// Python), verified through the door with 1, 2 and 4 sandbox processes: the run hash must not move.
const scenario = parseScenario(
  `
name: randomness
seed: 11
steps: 2
backend: cpu
model: { preset: tiny, seed: 1 }
domain: python
population: { subpopulations: 2, teachers: 1, students: 1, lora: { rank: 2 } }
tasks: { perTeacher: 2, references: 1 }
matchmaking: { policy: cross, studentsPerTask: 1 }
sampling: { answersPerStudent: 1, maxTokens: 56 }
`,
  'randomness.yaml',
);
const RANDOM_PROGRAMS = [
  'import random\ndef f(x):\n    return [round(random.random(), 6) for _ in range(x % 4)]',
  'import os\ndef f(x):\n    return os.urandom(x % 5)',
  'import time, random\ndef f(x):\n    random.seed(time.time())\n    return random.randrange(x * 1000 + 1)',
  'import random\ndef f(x):\n    return random.SystemRandom().randrange(10 ** (x % 6 + 1))',
  'def f(x):\n    return id(object()) % (x + 7)', // address-dependent: refused as nondeterministic, the same everywhere
];
const randomProposals = editDeliveries('engine', (deliveries) => {
  for (const d of deliveries) {
    if (d.message.type !== 'generated' || !d.to.startsWith('teacher')) continue;
    for (const result of resultsOf<{ requestId: number; text: string }>(d)) {
      const program = RANDOM_PROGRAMS[result.requestId % RANDOM_PROGRAMS.length]!;
      result.text = [fence('python', program), ...[1, 2, 3, 4].map((x) => fence('input', String(x + result.requestId)))].join('\n');
    }
  }
});

async function runHashWith(workers: number): Promise<string> {
  const pool = new PythonVerifierPool(workers, { realBuiltinsForTests: true });
  try {
    const result = await runScenario(scenario, { outDir: mkdtempSync(join(tmpdir(), 'populora-random-')), wrapService: randomProposals, verifierPool: pool });
    return result.hash;
  } finally {
    await pool.close();
  }
}

describe('replay across worker counts, for programs that use randomness', () => {
  it('gives one run hash with 1, 2 and 4 verifier processes', async () => {
    const one = await runHashWith(1);
    expect(await runHashWith(2)).toBe(one);
    expect(await runHashWith(4)).toBe(one);
  }, 600_000);
});
