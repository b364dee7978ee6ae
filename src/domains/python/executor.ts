// One Python interpreter (Pyodide: CPython compiled to WebAssembly, shipped by the `pyodide` package, offline) with
// the sandbox of sandbox/*.py loaded into it. A verifier worker process (sandbox-process.ts) holds one for its
// lifetime and runs every job in it.
//
// The threat model (docs/sandbox.md): assume the program reaches the real builtins and runs arbitrary Python inside
// its run; the verdict, the gold output and the next job must still be right. So, from this side:
//   - one state per run: right after load the whole WebAssembly memory is copied, and every entry point below puts
//     it back first (`restore`), together with the JavaScript-side state a run could touch (host-calls.ts: clocks,
//     entropy, the standard streams; the file system, sockets, timers and the shell are closed). A validation's two
//     runs, a check's run and the comparison each start from the snapshot: nothing passes from one to the next, and
//     a check runs a program exactly as its validation did;
//   - the judge is here: a run reports the address of each value the program returned, and python-values.ts reads
//     the value out of memory and writes its canonical text; the count of outputs must be the count of inputs; a
//     student's answer and the gold outputs are parsed in a state no program has run in (`canonical`) and compared
//     here, so they never enter a program's interpreter.
// Python's `js` module is an empty object (jsglobals), no host folder is mounted, and the calls that could mount one
// or fetch packages are removed from the Pyodide API object (exits.py removes the FFI modules from Python's reach).

import { createRequire } from 'node:module';
import { dirname, sep } from 'node:path';
import type { PyodideAPI } from 'pyodide';
import { HostCallRefused, loadWithGate, type HostGate } from './host-calls.js';
import { MemoryImage, type EmscriptenMemory } from './memory-image.js';
import { readPackageFile } from './package-files.js';
import { ValueReader, type CRuntime } from './python-values.js';

/** Steps (LINE and JUMP events of the program's own code) one program may take on all its inputs together. */
export const DEFAULT_FUEL = 100_000;

/** The environment of every interpreter, whatever the host and wherever populora is installed. */
const FIXED_ENVIRONMENT = { PYTHONHASHSEED: '0', HOME: '/home/pyodide', USER: 'web_user', LOGNAME: 'web_user', PATH: '/', PWD: '/', LANG: 'C.UTF-8', _: '/populora/python' } as const;

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
  | 'runtime-error'
  | 'tampered'; // the run's report does not hold together: the program changed the sandbox's own code or memory

const RUN_REASONS = new Set<string>(['syntax', 'no-function', 'forbidden-import', 'forbidden-builtin', 'forbidden-attribute', 'forbidden-syntax', 'bad-input', 'fuel', 'recursion', 'memory', 'output-too-large', 'not-literal', 'runtime-error', 'tampered']);

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
 * taking the host's memory (the sandbox's own limit, 64 MiB of Python allocations per run, is far below it). A heap
 * that grew stays grown (WebAssembly memory does not shrink): its resident size is the cost, not its restore, which
 * zeroes only what the last run used (memory-image.ts).
 */
export const HEAP_CAP_BYTES = 512 << 20;

/**
 * Typical jobs, run before the snapshot. Every run starts from the snapshot, so whatever Python warms by running
 * (the specialised bytecode of the sandbox and of the modules it uses, their caches, the allocator's pools) is warm
 * in every run only if it was warm when the snapshot was taken. The same fixed programs in every worker: the
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

/** The interpreter died (a WebAssembly stack overflow, an internal error): the worker holding it must be replaced. */
export class SandboxCrash extends Error {}

/**
 * The program reached for the host and was stopped: by the gate (host-calls.ts) in a way that leaves the interpreter
 * mid-call, or by the process fence (Node's permission model, the namespaces). A verdict (refused), never a retry.
 */
export class HostAccessRefused extends Error {
  constructor(readonly code: string, detail: string) {
    super(`host-access: the program reached the host and was stopped (${code}: ${detail})`);
  }
}

/** Error codes of a host call stopped by the gate or the process fence. */
const HOST_REFUSAL_CODES = ['POPULORA_HOST_CALL_REFUSED', 'ERR_ACCESS_DENIED', 'ERR_DLOPEN_DISABLED', 'ENETUNREACH', 'ENETDOWN', 'ECONNREFUSED', 'EPERM', 'EACCES'];

/**
 * The sandbox's Python, one file per layer in sandbox/ (each file's header names the threat it answers), loaded in
 * this order as the modules of one package: a file imports only from those before it.
 */
export const SANDBOX_LAYERS = ['limits', 'exits', 'regex_checks', 'guards', 'library_guards', 'world', 'source_checks', 'rewrite', 'seals', 'fuel', 'literals', 'job'] as const;
const SANDBOX_PACKAGE = 'populora_sandbox';

// Makes the package and loads one layer into it: a module registered before its code runs, so that the layers after
// it can import from it. Run in __main__ at load; removed from there before the entry points are taken.
const bootstrap = (realBuiltinsForTests: boolean) => `
import sys, types
_package = types.ModuleType('${SANDBOX_PACKAGE}')
_package.__path__ = []
_package.REAL_BUILTINS_FOR_TESTS = ${realBuiltinsForTests ? 'True' : 'False'}
sys.modules['${SANDBOX_PACKAGE}'] = _package
def _load_layer(name, source):
    module = types.ModuleType(f'${SANDBOX_PACKAGE}.{name}')
    module.__package__ = '${SANDBOX_PACKAGE}'
    module.__file__ = f'sandbox/{name}.py'
    sys.modules[module.__name__] = module
    setattr(_package, name, module)
    exec(compile(source, module.__file__, 'exec'), vars(module))
`;

type PyCallable = ((...args: unknown[]) => string) & { destroy(): void };
const ENTRY_POINTS = ['run', 'check', 'canonical', 'layout_sample'] as const;
type Entry = Record<(typeof ENTRY_POINTS)[number], PyCallable>;

function loadSandbox(pyodide: PyodideAPI, realBuiltinsForTests: boolean): Entry {
  pyodide.runPython(bootstrap(realBuiltinsForTests), { filename: 'sandbox-bootstrap' });
  const load = pyodide.globals.get('_load_layer') as PyCallable;
  try {
    for (const layer of SANDBOX_LAYERS) load(layer, readPackageFile(`sandbox/${layer}.py`));
  } finally {
    load.destroy();
  }
  pyodide.runPython('del _load_layer, _package');
  const entryPoint = (name: string) => pyodide.runPython(`sys.modules['${SANDBOX_PACKAGE}.job'].${name}`) as PyCallable;
  return Object.fromEntries(ENTRY_POINTS.map((name) => [name, entryPoint(name)])) as Entry;
}

const STDERR_CHARS_KEPT = 4_000;

export interface ExecutorOptions {
  /**
   * Tests only: every program runs with the interpreter's real builtins, unchecked and unrewritten, as if it had
   * escaped every Python layer. Given at load from JavaScript; a program cannot open it, and the verifier's
   * processes open it only when their parent says so for a test (sandbox-processes.ts).
   */
  realBuiltinsForTests?: boolean;
}

/** A program's code and metrics as its compile recorded them before any of its code ran (host-calls.ts). */
interface Compiled {
  program: string;
  code: string; // marshal's bytes, as latin-1 text (a string crosses into Python as a copy, never as a JS object)
  metrics: ProgramMetrics;
}

export class PythonExecutor {
  private readonly image: MemoryImage;
  private readonly heap: { refusedGrowths: number };
  private stderr = '';
  private dead: string | null = null;
  private compiled: Compiled | null = null; // the last program compiled: a validation's second run reuses it

  private constructor(
    private readonly pyodide: PyodideAPI,
    private readonly gate: HostGate,
    private readonly entry: Entry,
    private readonly reader: ValueReader,
    heap: { refusedGrowths: number },
  ) {
    this.heap = heap;
    this.image = new MemoryImage(runtimeOf(pyodide));
  }

  static async load(options: ExecutorOptions = {}): Promise<PythonExecutor> {
    const { pyodide, gate } = await loadWithGate({
      indexURL: dirname(createRequire(import.meta.url).resolve('pyodide')) + sep, // its own guess fails under bundlers (vitest)
      jsglobals: {}, // Python's `js` module: nothing of the host
      // Nothing of the host in the interpreter: Emscripten would put this script's path in sys.executable and the
      // environment (the path's length then moves every allocation, and so the addresses a program can see), and
      // take LANG from the host's locale. PYTHONHASHSEED fixes str hashes, so set orders, in every worker.
      env: { ...FIXED_ENVIRONMENT },
      args: [],
      _sysExecutable: FIXED_ENVIRONMENT._,
      stdout: () => {},
      stderr: () => {},
    } as Parameters<typeof loadWithGate>[0]);
    closeBackDoors(pyodide);
    const heap = capHeap(gate.memory);
    const entry = loadSandbox(pyodide, options.realBuiltinsForTests === true);
    const { address, expected } = JSON.parse(entry.layout_sample()) as { address: number; expected: Array<[string, string]> };
    const reader = ValueReader.create(runtimeOf(pyodide), address, expected);
    warmUp(entry);
    gate.lock();
    const executor = new PythonExecutor(pyodide, gate, entry, reader, heap);
    // The standard streams write here, not through Pyodide's line buffers (JavaScript state that would outlive a
    // run): stdout is dropped, stderr kept per run for a crash's message.
    pyodide.setStdout({ write: (bytes: Uint8Array) => bytes.length });
    pyodide.setStderr({ write: (bytes: Uint8Array) => executor.keepStderr(bytes) });
    return executor;
  }

  private keepStderr(bytes: Uint8Array): number {
    this.stderr = (this.stderr + new TextDecoder().decode(bytes)).slice(-STDERR_CHARS_KEPT);
    return bytes.length;
  }

  private get heapBytesView(): Uint8Array {
    return runtimeOf(this.pyodide).HEAPU8;
  }

  /**
   * Puts the interpreter back into the state it had after loading: the snapshot over the memory, zeros over any
   * part the heap grew into since (memory is zero where the allocator has not yet been, as it was at load), and the
   * JavaScript side of it (host-calls.ts) as it stood. Every entry point below calls it first. Called between calls
   * into Python only, when no Python frame is live and the stack pointer is at its base.
   */
  restore(): void {
    if (this.dead) throw new SandboxCrash(`the Python interpreter is dead: ${this.dead}`);
    this.image.restore();
    this.gate.reset();
    this.stderr = '';
  }

  /** The host calls the gate refused during the last run (tests and diagnostics). */
  get refusedHostCalls(): readonly string[] {
    return [...this.gate.refused];
  }

  /**
   * Runs the program once per input (`'abc', [1, 2]` or `f('abc', [1, 2])`), each in a fresh world, from the
   * snapshot. `perturbSeed` moves the allocator first (a validation's determinism re-run): the only difference
   * between the runs of a validation and of a check.
   */
  run(program: string, inputs: readonly string[], fuel = DEFAULT_FUEL, perturbSeed?: number): RunResult {
    this.restore();
    const refusedBefore = this.heap.refusedGrowths;
    // A validation's second run takes the code its first run compiled, as recorded: different allocations before the
    // program starts are what that run is for. Every other run compiles, as the first did.
    const reuse = perturbSeed !== undefined && this.compiled?.program === program ? this.compiled : null;
    let report: string;
    try {
      report = this.call('run', program, JSON.stringify(inputs), fuel, perturbSeed, reuse?.code);
    } catch (error) {
      // The sandbox's own Python failed while the program's ran: only a program that changed it gets here (a bug
      // of the sandbox shows in every corpus test as this verdict, never silently).
      if ((error as Error).name !== 'PythonError') throw error;
      return { ok: false, reason: 'tampered', detail: `the sandbox's own code failed during the run (${(error as Error).message.trim().split('\n').pop()!.slice(0, 200)})`, fuel: 0 };
    }
    if (!reuse) this.compiled = compiledOf(program, this.gate.takeRecord());
    const result = this.judge(report, inputs.length, reuse?.metrics ?? (this.compiled?.program === program ? this.compiled.metrics : undefined));
    // A program that met the heap cap is refused for it whatever it or the sandbox did with the MemoryError (a
    // failed allocation can surface as anything), so the verdict is the same in every worker: the heap never
    // exceeds the cap, so every run that needs more memory than the cap calls for it.
    if (this.heap.refusedGrowths > refusedBefore) return { ok: false, reason: 'memory', detail: `the program reached the ${HEAP_CAP_BYTES >> 20} MiB heap cap`, fuel: result.fuel, ...(result.metrics ? { metrics: result.metrics } : {}) };
    return result;
  }

  /**
   * The verdict on a run's report, which the program may have forged: its shape checked, one output per input, and
   * each output's text written again from the value in memory (python-values.ts). Only that text is kept.
   */
  private judge(reportText: string, inputCount: number, recorded: ProgramMetrics | undefined): RunResult {
    const tampered = (detail: string): RunResult => ({ ok: false, reason: 'tampered', detail: `the run's report does not hold together (${detail}): the program changed the sandbox`, fuel: 0 });
    let report: Record<string, unknown>;
    try {
      report = JSON.parse(reportText) as Record<string, unknown>;
    } catch {
      return tampered('not JSON');
    }
    const fuel = Number.isSafeInteger(report.fuel) ? (report.fuel as number) : 0;
    // The metrics recorded before the program ran; a report's own only where none was (a program refused by its
    // compile, which ran none of it).
    const metrics = recorded ?? (isMetrics(report.metrics) ? report.metrics : undefined);
    if (report.ok === false) {
      if (typeof report.reason !== 'string' || !RUN_REASONS.has(report.reason) || typeof report.detail !== 'string') return tampered('a refusal without a known reason');
      return { ok: false, reason: report.reason as RunReason, detail: report.detail, fuel, ...(metrics ? { metrics } : {}) };
    }
    const { values, outputs, inputTypes, printed } = report;
    const counted = (list: unknown, kind: 'number' | 'string') => Array.isArray(list) && list.length === inputCount && list.every((item) => typeof item === kind);
    if (report.ok !== true || !counted(values, 'number') || !counted(outputs, 'string') || !counted(inputTypes, 'string') || typeof printed !== 'string' || !metrics) {
      return tampered(`${Array.isArray(values) ? values.length : 'no'} outputs for ${inputCount} inputs`);
    }
    const texts: string[] = [];
    const outputTypes: string[] = [];
    for (const [i, address] of (values as number[]).entries()) {
      const reading = this.reader.read(address);
      if (!reading.ok) return { ok: false, reason: reading.reason, detail: reading.detail, fuel, metrics };
      if (reading.text !== (outputs as string[])[i]) return tampered(`output ${i} reads ${reading.text.slice(0, 40)} in memory, not ${(outputs as string[])[i]!.slice(0, 40)}`);
      texts.push(reading.text);
      outputTypes.push(reading.typeName);
    }
    return { ok: true, outputs: texts, outputTypes, inputTypes: inputTypes as string[], printed, fuel, metrics };
  }

  /** The static checks alone (syntax, imports, attributes, a function f) and the program's metrics. */
  check(program: string): CheckResult {
    this.restore();
    return JSON.parse(this.call('check', program)) as CheckResult;
  }

  /**
   * Each text parsed as a Python literal, in the form two equal values share ("{2, 1}" and "{1, 2}"; 1, 1.0 and
   * True stay apart), or null for text that is no literal: parsed in a state no program has run in.
   */
  canonical(texts: readonly string[]): Array<string | null> {
    this.restore();
    const forms = JSON.parse(this.call('canonical', JSON.stringify(texts))) as Array<string | null>;
    if (!Array.isArray(forms) || forms.length !== texts.length) throw new Error(`the sandbox gave ${String(forms)} for ${texts.length} texts`);
    return forms;
  }

  /** Whether two texts are Python literals of equal value. */
  sameValue(a: string, b: string): boolean {
    const [x, y] = this.canonical([a, b]);
    return x !== null && x === y;
  }

  private call(name: keyof Entry, ...args: unknown[]): string {
    try {
      return this.entry[name](...args);
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      const fatal = (error as { pyodide_fatal_error?: boolean }).pyodide_fatal_error === true || error instanceof RangeError || error instanceof WebAssembly.RuntimeError;
      if (fatal || error instanceof HostCallRefused) this.dead = (error as Error).message.split('\n')[0]!;
      if (error instanceof HostCallRefused || (typeof code === 'string' && HOST_REFUSAL_CODES.includes(code))) throw new HostAccessRefused(String(code), (error as Error).message.split('\n')[0]!);
      if (fatal) throw new SandboxCrash(`the Python interpreter died in ${name}: ${this.dead} ${this.stderr.split('\n').slice(-4).join(' | ')}`);
      throw error; // a bug of the sandbox itself: never a verdict
    }
  }

  close(): void {
    Object.values(this.entry).forEach((f) => f.destroy());
  }

  get heapBytes(): number {
    return this.heapBytesView.length;
  }
}

/** A compile record (metrics JSON, a newline, marshal's bytes), or null for a run whose compile refused it. */
function compiledOf(program: string, record: Uint8Array | null): Compiled | null {
  if (record === null) return null;
  const newline = record.indexOf(10);
  const metrics = JSON.parse(Buffer.from(record.subarray(0, newline)).toString('utf8')) as unknown;
  if (!isMetrics(metrics)) throw new Error(`the sandbox recorded no metrics for a compiled program: ${String(metrics)}`);
  return { program, code: Buffer.from(record.subarray(newline + 1)).toString('latin1'), metrics };
}

function isMetrics(value: unknown): value is ProgramMetrics {
  const m = value as ProgramMetrics | null;
  return typeof m === 'object' && m !== null && [m.nodes, m.depth, m.cyclomatic].every(Number.isSafeInteger) && typeof m.hash === 'string';
}

function warmUp(entry: Entry): void {
  for (let round = 0; round < WARM_UP_ROUNDS; round++) {
    for (const [program, inputs] of WARM_UP_PROGRAMS) {
      entry.check(program);
      const first = JSON.parse(entry.run(program, JSON.stringify(inputs), DEFAULT_FUEL)) as { ok: boolean; outputs: string[]; reason?: string; detail?: string };
      if (!first.ok) throw new Error(`the sandbox refused a warm-up program: ${first.reason}: ${first.detail}`);
      entry.run(program, JSON.stringify(inputs), DEFAULT_FUEL, round);
      entry.canonical(JSON.stringify([first.outputs[0], first.outputs[0]]));
    }
  }
}

const runtimeOf = (pyodide: PyodideAPI) => (pyodide as unknown as { _module: CRuntime & EmscriptenMemory })._module;

/**
 * Caps the interpreter's memory: Emscripten grows it through `memory.grow`, here refused above HEAP_CAP_BYTES with
 * an error Emscripten turns into a failed allocation (a MemoryError in Python). Counts the refusals.
 */
function capHeap(memory: WebAssembly.Memory): { refusedGrowths: number } {
  const heap = { refusedGrowths: 0 };
  const grow = WebAssembly.Memory.prototype.grow;
  memory.grow = (pages: number): number => {
    if (memory.buffer.byteLength + pages * 65536 > HEAP_CAP_BYTES) {
      heap.refusedGrowths++;
      throw new RangeError(`the Python heap is capped at ${HEAP_CAP_BYTES >> 20} MiB`);
    }
    return grow.call(memory, pages);
  };
  return heap;
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
