// The calls the interpreter makes out of WebAssembly into JavaScript (its imports), gated. Everything a program could
// use to carry state from one run to the next, or to make a run differ between workers, passes here: the file
// system (Emscripten keeps it, the current directory and the descriptor table in JavaScript, outside the memory
// the executor restores), clocks, entropy, the time zone, timers, dynamic loading, sockets and the shell
// (Emscripten's `system()` spawns a real one under Node). So the gate is an allow-list at the boundary itself:
//
//   - clocks, entropy and the time zone are deterministic from the first instruction: a virtual clock that starts
//     at a fixed instant and advances CLOCK_STEP_MS per reading, bytes from a fixed-seed generator, UTC. reset()
//     puts them back before every run, so every run of a job reads the same values, in every worker, and the
//     snapshot itself (taken after load) is the same everywhere;
//   - once locked (after load), every call that would reach the file system, a socket, a timer, a library or a
//     process gets the error a sandbox without them would give (EACCES, EBADF, a null handle), except writes to
//     stdout and stderr (1, 2) and reads of stdin (0, always at its end). A call that cannot fail cleanly (exit,
//     abort, the foreign-function interface) throws HostCallRefused: the interpreter is then left mid-call and the
//     executor reports the job as refused, never as a crash to retry.
//
// The imports are replaced as Pyodide instantiates its WebAssembly module (loadWithGate), the only moment they can
// be: WebAssembly.instantiate is wrapped for the duration of one load, and loads are serialised.

import { loadPyodide, type PyodideAPI } from 'pyodide';

type ImportFunction = ((...args: never[]) => unknown) & { sig?: string };
type Imports = Record<string, ImportFunction>;

/** Where the virtual clocks start: 2025-01-01T00:00:00Z (the realtime clock), 1 s (the monotonic one). */
export const CLOCK_EPOCH_MS = Date.UTC(2025, 0, 1);
const MONOTONIC_START_MS = 1_000;
/** What one reading of a clock advances it by: time moves (a deadline loop ends), the same way in every run. */
export const CLOCK_STEP_MS = 1;
const ENTROPY_SEED = 0x5eed_f00d;

/**
 * The descriptor the sandbox's own harness writes its compile record to (job.py), before any code of the program's
 * runs: the first write of a run is kept here, out of the program's reach (a trusted report: the program's compiled
 * code and metrics). Later writes to it are ignored.
 */
export const RECORD_FD = 1000;

/** A host call the interpreter cannot be given an error for: the job is refused, the interpreter abandoned. */
export class HostCallRefused extends Error {
  readonly code = 'POPULORA_HOST_CALL_REFUSED';
  constructor(readonly call: string) {
    super(`the program reached for the host (${call}), which the sandbox refuses`);
  }
}

// Emscripten's errno values (WASI numbering) and the failures each kind of call reports.
const EACCES = 2;
const EBADF = 8;
const EFAULT = 21;

/** Calls allowed after the lock as they are: the runtime's own machinery, no host resource behind them. */
const STANDARD_OUTPUT = 1;
const STANDARD_ERROR = 2;
const STANDARD_INPUT = 0;

/** How a refused call fails, by import name (the rest of the host-reaching families: by prefix, below). */
const REFUSED_WITH: Record<string, (name: string) => unknown> = {
  _dlopen_js: () => 0,
  _dlsym_js: () => 0,
  getprotobyname: () => 0,
  _emscripten_lookup_name: () => 0,
  getaddrinfo: () => -2, // EAI_NONAME
  getnameinfo: () => -2,
  _emscripten_system: () => -1, // as if there were no shell
  _setitimer_js: () => 0, // accepted, never fires: no timer outlives the run
  _mmap_js: () => -EACCES,
  _munmap_js: () => -EACCES,
  _msync_js: () => -EACCES,
  emscripten_log_impl_js: () => undefined, // logging to the host console: dropped
  _emscripten_log_formatted: () => undefined,
};
const THROWING = ['proc_exit', 'exit', '_abort_js', '_emscripten_dlopen_js', 'emscripten_set_up_async_input_device_js', 'ffi_call_js', 'ffi_closure_alloc_js', 'ffi_closure_free_js', 'ffi_prep_closure_loc_js'];
const ALLOWED_SYSCALLS = new Set(['__syscall_getcwd', '__syscall_getuid32_js']); // the directory cannot change: chdir is refused

/** A small counter-based generator (splitmix32): the same bytes after every reset. */
class Entropy {
  private state = ENTROPY_SEED;

  reset(): void {
    this.state = ENTROPY_SEED;
  }

  fill(bytes: Uint8Array): void {
    for (let i = 0; i < bytes.length; i++) {
      this.state = (this.state + 0x9e3779b9) | 0;
      let z = this.state;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
      bytes[i] = (z ^ (z >>> 16)) & 0xff;
    }
  }
}

export class HostGate {
  /** Import names refused since the last reset (the current run's), for diagnostics and tests. */
  readonly refused: string[] = [];
  private locked = false;
  private readings = 0; // clock readings since instantiation: the clocks are functions of this count
  private readingsAtLock = 0;
  private readonly entropy = new Entropy();
  private attached: WebAssembly.Memory | null = null;
  private malloc: ((bytes: number) => number) | null = null;
  private record: Uint8Array | null = null;

  /** Puts the clocks and the entropy back to where they stood at load, and forgets the refusals: before a run. */
  reset(): void {
    this.readings = this.readingsAtLock;
    this.entropy.reset();
    this.refused.length = 0;
    this.record = null;
  }

  /** The run's record (the first write to RECORD_FD since the last reset), once. */
  takeRecord(): Uint8Array | null {
    const record = this.record;
    this.record = null;
    return record;
  }

  /** From now on the host-reaching calls are refused (load is over: nothing imports or opens files again). */
  lock(): void {
    this.locked = true;
    this.readingsAtLock = this.readings;
    this.entropy.reset();
  }

  private view(): DataView {
    return new DataView(this.memory.buffer);
  }

  private nowMs(base: number): number {
    return base + CLOCK_STEP_MS * this.readings++;
  }

  /** Replaces the imports of Pyodide's module in place (before instantiation). */
  install(imports: Imports): void {
    const original = { ...imports };
    const replace = (name: string, replacement: ImportFunction) => {
      if (!(name in imports)) throw new Error(`host-calls.ts: Pyodide no longer imports ${name}; the sandbox's gate must be reviewed for this version`);
      replacement.sig = original[name]!.sig;
      imports[name] = replacement;
    };
    const realtimeMs = () => this.nowMs(CLOCK_EPOCH_MS);
    const monotonicMs = () => this.nowMs(MONOTONIC_START_MS);
    replace('emscripten_date_now', realtimeMs);
    replace('emscripten_get_now', monotonicMs);
    replace('clock_time_get', ((clock: number, _precision: bigint, time: number) => {
      if (clock < 0 || clock > 3) return 28; // EINVAL, as Emscripten answers
      this.view().setBigUint64(time >>> 0, BigInt(Math.round((clock === 0 ? realtimeMs() : monotonicMs()) * 1e6)), true);
      return 0;
    }) as ImportFunction);
    replace('random_get', ((buffer: number, size: number) => {
      this.entropy.fill(new Uint8Array(this.memory.buffer, buffer >>> 0, size >>> 0));
      return 0;
    }) as ImportFunction);
    // UTC everywhere: no host time zone reaches time.localtime, time.timezone or mktime.
    replace('_tzset_js', ((timezone: number, daylight: number, standardName: number, daylightName: number) => {
      const view = this.view();
      view.setUint32(timezone >>> 0, 0, true);
      view.setInt32(daylight >>> 0, 0, true);
      for (const at of [standardName >>> 0, daylightName >>> 0]) new Uint8Array(this.memory.buffer, at, 4).set([85, 84, 67, 0]); // "UTC"
    }) as ImportFunction);
    const utc = (tm: number) => {
      const view = this.view();
      view.setInt32((tm >>> 0) + 32, 0, true); // tm_isdst
      view.setInt32((tm >>> 0) + 36, 0, true); // tm_gmtoff
    };
    replace('_localtime_js', ((time: bigint, tm: number) => {
      (original._gmtime_js as (t: bigint, p: number) => void)(time, tm);
      utc(tm);
    }) as ImportFunction);
    // What Emscripten reports of the JavaScript runtime (sys._emscripten_info.runtime): the host's Node version, whose
    // length would move every allocation after it. One text everywhere.
    replace('_Py_emscripten_runtime', (() => {
      const text = new TextEncoder().encode('Node.js\0');
      const at = this.malloc!(text.length);
      new Uint8Array(this.memory.buffer, at, text.length).set(text);
      return at;
    }) as ImportFunction);
    // mktime as timegm. Emscripten's timegm throws (BigInt(NaN)) for a date past JavaScript's range, which would end
    // the interpreter: it answers -1 with the weekday untouched instead, as C's mktime does (Python: OverflowError).
    replace('_mktime_js', ((tm: number) => {
      const view = this.view();
      const weekday = view.getInt32((tm >>> 0) + 24, true);
      const yearDay = view.getInt32((tm >>> 0) + 28, true);
      try {
        const time = (original._timegm_js as (p: number) => bigint)(tm);
        utc(tm);
        return time;
      } catch {
        view.setInt32((tm >>> 0) + 24, weekday, true);
        view.setInt32((tm >>> 0) + 28, yearDay, true);
        return -1n;
      }
    }) as ImportFunction);

    // File times are Emscripten's (the host's clock when a file was made at start-up): stat answers the clock's epoch
    // instead, before the lock (Python's import caches keep directories' mtimes) and never after (refused below).
    const STAT_BUFFER_ARGUMENT: Record<string, number> = { __syscall_stat64: 1, __syscall_lstat64: 1, __syscall_fstat64: 1, __syscall_newfstatat: 2 };
    for (const [name, position] of Object.entries(STAT_BUFFER_ARGUMENT)) {
      const stat = original[name]! as ((...args: number[]) => number) & { sig?: string };
      original[name] = Object.assign((...args: number[]) => {
        const answer = stat(...args);
        if (answer === 0) for (const at of [40, 56, 72]) this.stampTime((args[position]! >>> 0) + at); // st_atim, st_mtim, st_ctim
        return answer;
      }, { sig: stat.sig });
      imports[name] = original[name]!;
    }

    // Once locked: the standard streams only, no file, socket, library, timer, shell or exit.
    const gated = (name: string, refusal: (name: string) => unknown) => {
      const real = original[name]! as (...args: unknown[]) => unknown;
      replace(name, ((...args: unknown[]) => {
        if (!this.locked) return real(...args);
        this.refused.push(name);
        return refusal(name);
      }) as ImportFunction);
    };
    const fail = (code: number) => () => code;
    for (const name of Object.keys(imports)) {
      if (name.startsWith('__syscall_') && !ALLOWED_SYSCALLS.has(name)) gated(name, name === '__syscall_umask_js' ? fail(0o022) : fail(-EACCES));
      else if (/^_try_/.test(name)) gated(name, fail(0)); // "not handled here": the syscall behind it is refused
      else if (/^_maybe_/.test(name)) gated(name, () => null); // likewise
      else if (name in REFUSED_WITH) gated(name, REFUSED_WITH[name]!);
      else if (THROWING.includes(name)) {
        gated(name, (call) => {
          throw new HostCallRefused(call);
        });
      }
    }
    for (const name of ['fd_close', 'fd_seek', 'fd_sync', 'fd_pread', 'fd_pwrite', 'fd_fdstat_get']) gated(name, fail(EBADF));
    const write = original.fd_write! as (fd: number, ...rest: unknown[]) => unknown;
    replace('fd_write', ((fd: number, ...rest: unknown[]) => {
      if (fd === RECORD_FD) return this.keepRecord(...(rest as [number, number, number]));
      if (!this.locked || fd === STANDARD_OUTPUT || fd === STANDARD_ERROR) return write(fd, ...rest);
      this.refused.push('fd_write');
      return EBADF;
    }) as ImportFunction);
    const read = original.fd_read! as (fd: number, iov: number, iovcnt: number, pnum: number) => unknown;
    replace('fd_read', ((fd: number, iov: number, iovcnt: number, pnum: number) => {
      if (!this.locked) return read(fd, iov, iovcnt, pnum);
      if (fd !== STANDARD_INPUT) {
        this.refused.push('fd_read');
        return EBADF;
      }
      this.view().setUint32(pnum >>> 0, 0, true); // at the end of input, always
      return 0;
    }) as ImportFunction);
  }

  /** A struct timespec at `at`: the clock's epoch, to the second. */
  private stampTime(at: number): void {
    const view = this.view();
    view.setBigInt64(at, BigInt(CLOCK_EPOCH_MS / 1000), true);
    view.setUint32(at + 8, 0, true);
  }

  /** fd_write(RECORD_FD, iov, iovcnt, pnum): keeps the bytes of the first write of a run; says all were written. */
  private keepRecord(iov: number, count: number, written: number): number {
    try {
      return this.keepRecordAt(iov, count, written);
    } catch {
      return EFAULT; // an address outside memory (a write only an escaped program could make)
    }
  }

  private keepRecordAt(iov: number, count: number, written: number): number {
    const view = this.view();
    const parts: Uint8Array[] = [];
    for (let i = 0; i < count; i++) {
      const base = view.getUint32((iov >>> 0) + 8 * i, true);
      const length = view.getUint32((iov >>> 0) + 8 * i + 4, true);
      parts.push(new Uint8Array(this.memory.buffer, base, length).slice());
    }
    const total = parts.reduce((sum, part) => sum + part.length, 0);
    if (this.record === null) this.record = Buffer.concat(parts);
    view.setUint32(written >>> 0, total, true);
    return 0;
  }

  attach(memory: WebAssembly.Memory, malloc: (bytes: number) => number): void {
    this.attached = memory;
    this.malloc = malloc;
  }

  /** The interpreter's memory (its heap), once instantiated. */
  get memory(): WebAssembly.Memory {
    if (!this.attached) throw new Error('host-calls.ts: the interpreter has no memory yet');
    return this.attached;
  }
}

let loads: Promise<unknown> = Promise.resolve();

/**
 * loadPyodide with the gate installed in the module's imports. Loads in one process are serialised, so the wrapper
 * of WebAssembly.instantiate meets only the load it was put there for.
 */
export function loadWithGate(options: Parameters<typeof loadPyodide>[0]): Promise<{ pyodide: PyodideAPI; gate: HostGate }> {
  const load = loads.then(() => loadGated(options));
  loads = load.catch(() => {});
  return load;
}

async function loadGated(options: Parameters<typeof loadPyodide>[0]): Promise<{ pyodide: PyodideAPI; gate: HostGate }> {
  const gate = new HostGate();
  const instantiate = WebAssembly.instantiate;
  let installed = false;
  const wrapped = async function (source: unknown, imports?: WebAssembly.Imports) {
    const env = imports?.env as Imports | undefined;
    const ours = !installed && env !== undefined && 'clock_time_get' in env && '__syscall_openat' in env;
    if (ours) {
      gate.install(env);
      installed = true;
    }
    const result = await (instantiate as (s: unknown, i?: WebAssembly.Imports) => Promise<WebAssembly.WebAssemblyInstantiatedSource | WebAssembly.Instance>)(source, imports);
    if (ours) {
      const exports = ('instance' in result ? result.instance : result).exports;
      gate.attach(exports.memory as WebAssembly.Memory, exports.malloc as (bytes: number) => number);
    }
    return result;
  };
  WebAssembly.instantiate = wrapped as typeof WebAssembly.instantiate;
  try {
    const pyodide = await loadPyodide(options);
    if (!installed) throw new Error('host-calls.ts: Pyodide was instantiated without passing through the gate (WebAssembly.instantiate was not used); the sandbox must be reviewed for this version');
    return { pyodide, gate };
  } finally {
    WebAssembly.instantiate = instantiate;
  }
}
