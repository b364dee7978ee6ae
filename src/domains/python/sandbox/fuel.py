# Fuel and refusals that stick: sys.monitoring callbacks counting the program's steps.
#
# Threat: a program that runs forever, directly or through library code working for it (statistics over a long
# list, Counter arithmetic, deepcopy, Fraction's methods), or that swallows the refusal that stops it (`finally:
# return`, an __exit__ returning True, a generator's finally). LINE and JUMP events of the program's code and of the
# standard library's Python code spend fuel; EXCEPTION_HANDLED re-raises a refusal before any handler of the
# program's sees it; PY_UNWIND keeps data too deep to free safely.

import collections
import gc
import opcode
import os
import sys
import types
import tracemalloc
from .limits import _charge_quietly, _meter, MAX_MEMORY_BYTES, MAX_RECURSION, MEMORY_CHECK_STEPS, PROGRAM_FILE, Refused, TOOL_ID, _nestable, _refuse, _run, _too_deep

# ---- fuel, and refusals that stick --------------------------------------------------------------------------------

_monitor = sys.monitoring


def _burn(*_, run=_run, traced=tracemalloc.get_traced_memory, every=MEMORY_CHECK_STEPS - 1):
    used = run.used = run.used + 1
    if used > run.limit:
        _refuse('fuel', f'the program took more than {run.limit} steps (lines, jumps and items made in C)')
    if not used & every and traced()[1] > MAX_MEMORY_BYTES:
        _refuse('memory', f'the program used more than {MAX_MEMORY_BYTES >> 20} MiB')


_HANDLER_START = opcode.opmap['PUSH_EXC_INFO']  # where except, finally and with handlers begin


def _caught(code, offset, exception, run=_run, program=PROGRAM_FILE, start=_HANDLER_START, Refused=Refused, RecursionError=RecursionError, MemoryError=MemoryError, isinstance=isinstance):
    """EXCEPTION_HANDLED, global while a program runs: a handler of the program's (except, finally, a `with` whose
    __exit__ may swallow) is about to see a refusal or the interpreter's own limit. The refusal goes on instead: the
    program's handler never runs, so `finally: return` and `__exit__` returning True swallow nothing. (Cleanup
    handlers, which only re-raise, are left alone: raising there would land in the same handler again.)"""
    if code.co_filename != program or code.co_code[offset] != start:
        return
    if isinstance(exception, Refused):
        raise exception
    if isinstance(exception, RecursionError):
        _refuse('recursion', f'the program nested more than {MAX_RECURSION} calls')
    if isinstance(exception, MemoryError):
        _refuse('memory', f'the program ran out of memory (limit {MAX_MEMORY_BYTES >> 20} MiB)')


def _unwound(code, _offset, _exception, program=PROGRAM_FILE, frame_of=sys._getframe, nestable=_nestable, run=_run):
    """PY_UNWIND, global while a program runs: a frame of the program's ends by an exception (a refusal, most
    often). Its locals are freed next; those nested too deep to free safely (freeing recurses in C as deep as the
    data nests) are kept instead."""
    if code.co_filename != program:
        return
    values = [value for value in frame_of(1).f_locals.values() if nestable[type(value)]]
    if run.used > run.limit:  # the fuel is spent: each frame of an unwinding would walk its data again, unpaid
        run.parked.extend(values)
        return
    run.parked.extend(value for value in values if _too_deep(value, _charge_quietly))


_monitor.use_tool_id(TOOL_ID, 'populora-fuel')
_monitor.register_callback(TOOL_ID, _monitor.events.LINE, _burn)
_monitor.register_callback(TOOL_ID, _monitor.events.JUMP, _burn)
_monitor.register_callback(TOOL_ID, _monitor.events.EXCEPTION_HANDLED, _caught)
_monitor.register_callback(TOOL_ID, _monitor.events.PY_UNWIND, _unwound)
_WHILE_RUNNING = _monitor.events.EXCEPTION_HANDLED | _monitor.events.PY_UNWIND  # global events, only while a program runs


# The standard library's Python code the sandbox itself works with, unmetered: the parser (compiling a program), JSON
# (the runner's own messages: metered, a refusal re-raised in them kept a `finally: return` loop running forever; a
# program's json.dumps pays by the nesting walk before it), re's pattern compiler (bounded by the pattern checks) and
# what imports or reports.
_UNMETERED_LIBRARY = frozenset({'ast.py', 'json', 're', 'importlib', 'pyodide', '_pyodide', 'tracemalloc.py', 'linecache.py', 'tokenize.py', 'traceback.py', 'codeop.py', 'dis.py', 'opcode.py'})


def _meter_library(gc=gc, FunctionType=types.FunctionType):
    """Every function of the standard library's Python code spends fuel as the program's does, once loaded: library
    code runs only for a program (between runs the limit is IDLE_LIMIT, so the sandbox's own calls never run out)."""
    root = os.path.dirname(os.path.dirname(collections.__file__)) + '/'
    for function in gc.get_objects():
        if type(function) is FunctionType:
            filename = function.__code__.co_filename
            if filename.startswith(root) and filename[len(root):].split('/')[0] not in _UNMETERED_LIBRARY:
                _meter(function.__code__)


def _silence_hooks(monitor=_monitor, settrace=sys.settrace, setprofile=sys.setprofile):
    """No hook but the sandbox's may fire while it judges (a trace or monitoring hook set by an escaped program)."""
    settrace(None)
    setprofile(None)
    for tool in range(6):
        if tool != TOOL_ID and monitor.get_tool(tool) is not None:
            monitor.clear_tool_id(tool)
            monitor.free_tool_id(tool)
    monitor.set_events(TOOL_ID, 0)


def _stack():
    frame, frames = sys._getframe(), 0
    while frame is not None:
        frames += 1
        frame = frame.f_back
    return frames
