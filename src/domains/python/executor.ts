// One Python interpreter (Pyodide: CPython compiled to WebAssembly, shipped by the `pyodide` package, offline) with
// the sandbox of sandbox/*.py loaded into it. A verifier worker process (sandbox-process.ts) holds one for its
// lifetime and runs every job in it, each job from the same interpreter state: right after the sandbox has loaded,
// the whole WebAssembly memory is copied, and `restore()` copies it back before a job. All of Python's state (its
// modules, classes, caches, allocator, pending finalizers) lives in that memory, so no job can influence another,
// whatever it changed, and a verdict is a function of the job alone.
//
// This file adds the JavaScript side of the sandbox: Python's `js` module is an empty object (jsglobals), no host
// folder is mounted, and the calls that could mount one or fetch packages are removed from the Pyodide API object
// (the sandbox's exits.py also removes the FFI modules from Python's reach before the snapshot).

import { createRequire } from 'node:module';
import { dirname, sep } from 'node:path';
import { loadPyodide, type PyodideAPI } from 'pyodide';
import { readPackageFile } from './package-files.js';

/** Steps (LINE and JUMP events of the program's own code) one program may take on all its inputs together. */
export const DEFAULT_FUEL = 100_000;

/** Why a run did not give outputs. Every reason is a verdict on the program, reached by counting, never by time. */
export type RunReason =
  | 'syntax'
  | 'no-function'
  | 'forbidden-import'
  | 'forbidden-builtin'
  | 'forbidden-attribute'
  | 'forbidden-syntax'
  | 'bad-input'
  | 'fuel'
  | 'recursion'
  | 'memory'
  | 'output-too-large'
  | 'not-literal'
  | 'runtime-error';

export interface ProgramMetrics {
  nodes: number; // AST nodes
  depth: number; // AST depth
  cyclomatic: number; // 1 + branch points (if, loops, comprehension filters, boolean operators, handlers, cases)
  hash: string; // of the normalised AST: two programs that differ only in layout or comments share it
}

export type RunResult =
  | { ok: true; outputs: string[]; outputTypes: string[]; inputTypes: string[]; printed: string; fuel: number; metrics: ProgramMetrics }
  | { ok: false; reason: RunReason; detail: string; fuel: number; metrics?: ProgramMetrics };

export type CheckResult = { ok: true; metrics: ProgramMetrics } | { ok: false; reason: RunReason; detail: string };

/**
 * The most an interpreter's WebAssembly heap may grow to. Above it allocation fails with a MemoryError instead of
 * taking the host's memory (the sandbox's own limit, 64 MiB of Python allocations per run, is far below it).
 */
export const HEAP_CAP_BYTES = 512 << 20;

/**
 * Typical jobs, run before the snapshot. Every job starts from the snapshot, so whatever Python warms by running
 * (the specialised bytecode of the sandbox and of the modules it uses, their caches, the allocator's pools) is warm
 * in every job only if it was warm when the snapshot was taken. The same fixed programs in every worker: the
 * snapshot, and so every verdict, is the same everywhere.
 */
const WARM_UP_PROGRAMS: Array<[string, string[]]> = [
  ['def f(xs, k):\n    return sorted(xs, reverse=True)[:k]', ['[4, 9, 1, 7], 2', '[3], 1']],
  ['def f(s):\n    seen, out = set(), []\n    for ch in s:\n        if ch not in seen:\n            seen.add(ch)\n            out.append(ch)\n    return "".join(out)', ["'mississippi'", "''"]],
  ['from collections import Counter, defaultdict\ndef f(words):\n    groups = defaultdict(list)\n    for w in words:\n        groups[len(w)].append(w)\n    return dict(sorted(groups.items())), Counter(words).most_common(1)', ["['a', 'bb', 'a']"]],
  ['import math, itertools, functools, re, heapq\ndef f(n):\n    pairs = list(itertools.combinations(range(n), 2))\n    total = functools.reduce(lambda a, b: a + b, [math.gcd(x, y) for x, y in pairs], 0)\n    return total, re.findall(r"[0-9]+", str(pairs)[:20]), heapq.nsmallest(2, [5, 1, 3])', ['5']],
  ['def f(matrix):\n    return {i: [row[i] for row in matrix] for i in range(len(matrix[0]))}', ['[[1, 2], [3, 4]]']],
];
const WARM_UP_ROUNDS = 20;

function warmUp(entry: Record<'run' | 'check' | 'same_value' | 'perturb', PyCallable>): void {
  for (let round = 0; round < WARM_UP_ROUNDS; round++) {
    for (const [program, inputs] of WARM_UP_PROGRAMS) {
      entry.check(program);
      const first = JSON.parse(entry.run(program, JSON.stringify(inputs), DEFAULT_FUEL)) as RunResult;
      if (!first.ok) throw new Error(`the sandbox refused a warm-up program: ${first.reason}: ${first.detail}`);
      entry.perturb(round);
      entry.run(program, JSON.stringify(inputs), DEFAULT_FUEL);
      entry.same_value(first.outputs[0], first.outputs[0]);
    }
  }
}

/** The interpreter died (a WebAssembly stack overflow, an internal error): the worker holding it must be replaced. */
export class SandboxCrash extends Error {}

/**
 * The sandbox's Python, one file per layer in sandbox/ (each file's header names the threat it answers), loaded in
 * this order as the modules of one package: a file imports only from those before it.
 */
export const SANDBOX_LAYERS = ['limits', 'exits', 'guards', 'regex_checks', 'library_guards', 'world', 'source_checks', 'rewrite', 'seals', 'fuel', 'literals', 'job'] as const;
const SANDBOX_PACKAGE = 'populora_sandbox';

// Makes the package and loads one layer into it: a module registered before its code runs, so that the layers after
// it can import from it. Run in __main__ at load; removed from there before the entry points are taken.
const BOOTSTRAP = `
import sys, types
_package = types.ModuleType('${SANDBOX_PACKAGE}')
_package.__path__ = []
sys.modules['${SANDBOX_PACKAGE}'] = _package
def _load_layer(name, source):
    module = types.ModuleType(f'${SANDBOX_PACKAGE}.{name}')
    module.__package__ = '${SANDBOX_PACKAGE}'
    module.__file__ = f'sandbox/{name}.py'
    sys.modules[module.__name__] = module
    setattr(_package, name, module)
    exec(compile(source, module.__file__, 'exec'), vars(module))
`;

function loadSandbox(pyodide: PyodideAPI): Record<'run' | 'check' | 'same_value' | 'perturb', PyCallable> {
  pyodide.runPython(BOOTSTRAP, { filename: 'sandbox-bootstrap' });
  const load = pyodide.globals.get('_load_layer') as PyCallable;
  try {
    for (const layer of SANDBOX_LAYERS) load(layer, readPackageFile(`sandbox/${layer}.py`));
  } finally {
    load.destroy();
  }
  pyodide.runPython('del _load_layer, _package');
  const entryPoint = (name: string) => pyodide.runPython(`sys.modules['${SANDBOX_PACKAGE}.job'].${name}`) as PyCallable;
  return { run: entryPoint('run'), check: entryPoint('check'), same_value: entryPoint('same_value'), perturb: entryPoint('perturb') };
}

type PyCallable = ((...args: unknown[]) => string) & { destroy(): void };

/** Grown past this multiple of the snapshot's size, the heap costs more to wipe at each restore than a new worker. */
const GROWN_HEAP_RECYCLE_FACTOR = 4;

export class PythonExecutor {
  private readonly snapshot: Uint8Array;

  private constructor(
    private readonly pyodide: PyodideAPI,
    private readonly entry: Record<'run' | 'check' | 'same_value' | 'perturb', PyCallable>,
    private readonly stderr: string[],
  ) {
    this.snapshot = heapOf(pyodide).HEAP8.slice() as unknown as Uint8Array;
  }

  static async load(): Promise<PythonExecutor> {
    const stderr: string[] = [];
    const pyodide = await loadPyodide({
      indexURL: dirname(createRequire(import.meta.url).resolve('pyodide')) + sep, // its own guess fails under bundlers (vitest)
      jsglobals: {}, // Python's `js` module: nothing of the host
      env: { PYTHONHASHSEED: '0', HOME: '/home/pyodide' }, // str hashes, so set orders, equal in every worker
      stdout: () => {},
      stderr: (line) => void (stderr.push(line), stderr.splice(0, stderr.length - 40)),
    });
    closeBackDoors(pyodide);
    capHeap(pyodide);
    // The proxies of the entry points exist before the snapshot: a job creates no JavaScript reference into
    // Python's memory (arguments and answers are strings), so the restore cannot leave one dangling.
    const entry = loadSandbox(pyodide);
    warmUp(entry);
    return new PythonExecutor(pyodide, entry, stderr);
  }

  /**
   * Puts the interpreter back into the state it had after loading: the snapshot over the memory, and zeros over any
   * part the heap grew into since (memory is zero where the allocator has not yet been, as it was at load).
   * Called between calls into Python only, when no Python frame is live and the stack pointer is at its base.
   */
  restore(): void {
    const heap = heapOf(this.pyodide).HEAP8 as unknown as Uint8Array;
    heap.set(this.snapshot);
    if (heap.length > this.snapshot.length) heap.fill(0, this.snapshot.length);
  }

  /** The heap grew so far that wiping it at every restore costs more than starting a new interpreter. */
  get heapOverGrown(): boolean {
    return this.heapBytes > GROWN_HEAP_RECYCLE_FACTOR * this.snapshot.length;
  }

  /** Runs the program once per input (`'abc', [1, 2]` or `f('abc', [1, 2])`), each in a fresh world. */
  run(program: string, inputs: readonly string[], fuel = DEFAULT_FUEL): RunResult {
    const heap = cappedHeaps.get(heapOf(this.pyodide))!;
    const refusedBefore = heap.refusedGrowths;
    const result = JSON.parse(this.call('run', program, JSON.stringify(inputs), fuel)) as RunResult;
    // Whether the heap could still grow depends on what earlier programs left: a program that met the cap is
    // refused whatever it did with the MemoryError, so the verdict is the same in every worker.
    if (result.ok && heap.refusedGrowths > refusedBefore) return { ok: false, reason: 'memory', detail: `the program reached the ${HEAP_CAP_BYTES >> 20} MiB heap cap`, fuel: result.fuel, metrics: result.metrics };
    return result;
  }

  /** The static checks alone (syntax, imports, attributes, a function f) and the program's metrics. */
  check(program: string): CheckResult {
    return JSON.parse(this.call('check', program)) as CheckResult;
  }

  /** Whether two texts are Python literals of equal value. */
  sameValue(a: string, b: string): boolean {
    return JSON.parse(this.call('same_value', a, b)) as boolean;
  }

  /** Moves the allocator before a determinism re-run, so id()-ordered results would differ. */
  perturb(seed: number): void {
    this.call('perturb', seed);
  }

  private call(name: keyof PythonExecutor['entry'], ...args: unknown[]): string {
    try {
      return this.entry[name](...args);
    } catch (error) {
      const fatal = (error as { pyodide_fatal_error?: boolean }).pyodide_fatal_error === true || error instanceof RangeError;
      if (fatal) throw new SandboxCrash(`the Python interpreter died in ${name}: ${(error as Error).message.split('\n')[0]} ${this.stderr.slice(-3).join(' | ')}`);
      throw error; // a bug of the sandbox itself: never a verdict
    }
  }

  close(): void {
    Object.values(this.entry).forEach((f) => f.destroy());
    cappedHeaps.delete(heapOf(this.pyodide));
  }

  get heapBytes(): number {
    return heapOf(this.pyodide).HEAP8.length;
  }
}

type EmscriptenHeap = { HEAP8: Int8Array };
const heapOf = (pyodide: PyodideAPI) => (pyodide as unknown as { _module: EmscriptenHeap })._module;

// Pyodide does not hand out its WebAssembly.Memory, so the cap goes on Memory.prototype.grow, once per thread: a
// memory is recognised by its buffer being the one a capped interpreter's heap views. Emscripten turns the thrown
// error into a failed allocation (a MemoryError in Python).
const cappedHeaps = new Map<EmscriptenHeap, { refusedGrowths: number }>();
let growPatched = false;

function capHeap(pyodide: PyodideAPI): void {
  cappedHeaps.set(heapOf(pyodide), { refusedGrowths: 0 });
  if (growPatched) return;
  growPatched = true;
  const grow = WebAssembly.Memory.prototype.grow;
  WebAssembly.Memory.prototype.grow = function (this: WebAssembly.Memory, pages: number): number {
    const capped = [...cappedHeaps].find(([heap]) => heap.HEAP8.buffer === this.buffer)?.[1];
    if (capped && this.buffer.byteLength + pages * 65536 > HEAP_CAP_BYTES) {
      capped.refusedGrowths++;
      throw new RangeError(`the Python heap is capped at ${HEAP_CAP_BYTES >> 20} MiB`);
    }
    return grow.call(this, pages);
  };
}

/** Removes what would reach the host file system or the network from the Pyodide API object. */
function closeBackDoors(pyodide: PyodideAPI): void {
  const fs = pyodide.FS as { filesystems: Record<string, unknown> };
  for (const name of Object.keys(fs.filesystems)) if (name !== 'MEMFS') delete fs.filesystems[name];
  const api = pyodide as unknown as Record<string, unknown>;
  for (const name of ['mountNodeFS', 'mountNativeFS', 'loadPackage', 'loadPackagesFromImports', 'unpackArchive', 'registerJsModule']) {
    api[name] = () => {
      throw new Error(`${name} is closed in the verifier's sandbox`);
    };
  }
}
