# The job runner and the entry points executor.ts calls (`check`, `run`, `same_value`, `perturb`; every answer is a
# JSON string), and the load sequence: warm what imports lazily, then close the exits.
#
# Threat: a program that changes what a later input, run or job sees. Each input runs in a fresh world (world.py)
# with its own globals; its garbage is collected while fuel counts; executor.ts restores the whole WebAssembly
# memory before every job, so nothing a job changes outlives it.
#
# The layers, each tested as if the one above it had fallen (test/python-sandbox.test.ts), in load order:
# limits.py, exits.py (layer 0), regex_checks.py, guards.py, library_guards.py, world.py (layer 3),
# source_checks.py (layer 1), rewrite.py (layer 2), seals.py, fuel.py, literals.py (layer 4), job.py.

import codecs
import gc
import json
import marshal
import os
import sys
import tracemalloc
import types
from .limits import IDLE_LIMIT, MAX_MEMORY_BYTES, MAX_RECURSION, PROGRAM_MODULE, Refused, TOOL_ID, _meter, _nestable, _record, _refuse, _run, _too_deep
from .exits import _close_imports, _close_javascript
from .guards import _resolutions
from .library_guards import _chains
from .world import _World
from .rewrite import _compile
from .seals import _running, _seal_library
from .fuel import _WHILE_RUNNING, _meter_library, _monitor, _silence_hooks, _stack
from .literals import _arguments, _canonical, _literal, _type_name

def _call(code, arguments, run=_run, running=_running):
    """The program's own code: defines f, calls it. Its errors are verdicts; errors of this file are not."""
    world = _World()
    limit = sys.getrecursionlimit()
    value = None
    peak = 0
    sys.setrecursionlimit(_stack() + MAX_RECURSION)
    tracemalloc.start()  # traced only while the program runs: the peak checked below is its own
    gc.enable()
    running.program = True
    _monitor.set_events(TOOL_ID, _WHILE_RUNNING)
    try:
        try:
            exec(code, world.globals)
            function = world.globals.get('f')
            if type(function) is not types.FunctionType:
                _refuse('no-function', 'f is not a function after the program ran')
            value = function(*arguments)
        finally:
            # The program's hooks end here: its globals go, and its garbage (generators' finally blocks) is collected
            # while fuel still counts. Data nested too deep to free safely is kept instead (the restore drops it).
            # (Once a run, bounded by the memory limit: not charged, so big tables of the program's cost no fuel.)
            run.parked.extend(item for item in world.globals.values() if _nestable[type(item)] and _too_deep(item))
            world.globals.clear()
            gc.collect()
    except Refused:
        pass  # recorded in run.refusal
    except RecursionError:
        _record('recursion', f'the program nested more than {MAX_RECURSION} calls')
    except MemoryError:
        _record('memory', f'the program used more than {MAX_MEMORY_BYTES >> 20} MiB')
    except BaseException as error:  # Exception, or a BaseException the program got hold of some other way
        _record('runtime-error', f'{type(error).__name__}: {_exception_text(error)}')
    finally:
        running.program = False
        _silence_hooks()
        gc.disable()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        sys.setrecursionlimit(limit)
        _chains.depths.clear()
        _resolutions.clear()  # its classes are gone with its world
    if run.refusal is not None:
        raise Refused(*run.refusal)
    if run.used > run.limit:
        _refuse('fuel', f'the program took more than {run.limit} steps (lines, jumps and items made in C)')
    if peak > MAX_MEMORY_BYTES:
        _refuse('memory', f'the program used more than {MAX_MEMORY_BYTES >> 20} MiB')
    return value, world.printed


def _exception_text(error):
    """An exception's message, without running code of the program's (its own __str__)."""
    args = BaseException.__getattribute__(error, 'args')
    if type(error).__str__ is not BaseException.__str__ and type(error).__module__ == PROGRAM_MODULE:
        return '(an exception of the program\'s)'
    text = ', '.join(_canonical_or_type(arg) for arg in args[:3]) if len(args) != 1 else _canonical_or_type(args[0], plain=True)
    return text[:200]


def _canonical_or_type(value, plain=False):
    if plain and type(value) is str:
        return value[:200]
    try:
        return _canonical(value, limit=200)
    except Refused:
        return f'<{type(value).__name__}>'


# ---- entry points ---------------------------------------------------------------------------------------------------

_encode = json.encoder.c_make_encoder(None, None, json.encoder.encode_basestring_ascii, None, ': ', ', ', False, False, True)
_decode = json.decoder.JSONDecoder().decode


def _json(value, encode=_encode, join=''.join):
    """JSON text by the C encoder made at load: no class attribute of json's a program could change is involved."""
    return join(encode(value, 0))


def check(source):
    """Static checks only: the refusal of layer 1, or the program's metrics."""
    try:
        return _json({'ok': True, 'metrics': _compile(source)[1]})
    except Refused as refusal:
        return _json({'ok': False, 'reason': refusal.reason, 'detail': refusal.detail})


_kept = []  # the values the current run returned, alive until executor.ts has read them (the next restore drops them)


RECORD_FD = 1000  # host-calls.ts keeps the first write of a run to it, out of the program's reach


def run(source, inputs_json, fuel, perturb_seed=None, compiled=None, run_state=_run, kept=_kept):
    """Runs the program once per input (each in a fresh world) within `fuel` steps in all. The report gives each
    output's canonical text and the address of the value itself: executor.ts reads the value out of memory and
    writes its text again (python-values.ts), and that text is the verdict's; this one only has to agree with it.

    Compiled here, the program's code and metrics go to RECORD_FD before any of its code runs (executor.ts keeps
    them: a trusted record). `compiled` is such code given back (marshal's bytes as latin-1 text), for a
    validation's second run, which `perturb_seed` makes move the allocator first."""
    kept.clear()
    if perturb_seed is not None:
        _perturb(perturb_seed)
    answer = {'ok': True, 'outputs': [], 'values': [], 'printed': '', 'fuel': 0}
    run_state.used, run_state.units, run_state.limit, run_state.refusal = 0, 0, IDLE_LIMIT, None
    try:
        if compiled is None:
            code, metrics = _compile(source)
            os.write(RECORD_FD, _json(metrics).encode() + b'\n' + marshal.dumps(code))
        else:
            code, metrics = marshal.loads(compiled.encode('latin-1')), {}
        answer.update(metrics=metrics, inputTypes=[])
        _meter(code)
        run_state.used, run_state.units, run_state.limit = 0, 0, fuel  # the program's steps, from here on
        # Every input parsed before any program code runs, and the texts dropped: a program sees the values, never
        # their spelling, so a code_i check of an answer that spells the teacher's input otherwise runs the same.
        pending = [_arguments(text) for text in _decode(inputs_json)]
        del inputs_json
        answer['inputTypes'] = [', '.join(_type_name(a) for a in arguments) for arguments in pending]
        while pending:
            arguments = pending.pop(0)
            value, printed = _call(code, arguments)
            answer['outputs'].append(_canonical(value))
            kept.append(value)
            answer['values'].append(id(value))
            answer['printed'] += ''.join(printed)
    except Refused as refusal:
        reason, detail = run_state.refusal or (refusal.reason, refusal.detail)
        answer = {'ok': False, 'reason': reason, 'detail': detail, 'fuel': 0, **({'metrics': answer['metrics']} if 'metrics' in answer else {})}
    answer['fuel'] = run_state.used
    run_state.limit = IDLE_LIMIT
    return _json(answer)


def canonical(texts_json):
    """Each text parsed as a literal and written in the form two equal values share (set items and dict entries in
    sorted order: "{2, 1}" and "{1, 2}" share it; 1, 1.0 and True do not), or None where a text is no literal.
    executor.ts calls it in a state no program has run in, and compares the forms itself."""
    forms = []
    for text in _decode(texts_json):
        try:
            forms.append(_canonical(_literal(text, 'output'), sort=True))
        except Refused:
            forms.append(None)
    return _json(forms)


_ballast = []


def _perturb(seed):
    """Shifts where the run's objects land, so that id()-dependent results differ between validation runs: Python's
    small-object pools keep one pool per size class, so the ballast takes blocks of every size class (16 to 512
    bytes), and the C allocator's blocks above them, in amounts the seed decides."""
    _ballast.clear()
    _ballast.extend([object() for _ in range(17 + seed % 101)] + [[0] * (seed % 13 + 1) for _ in range(7)])
    for size in range(0, 480, 16):  # a bytes object of `size` bytes takes a block of the size class above 33 + size
        _ballast.extend(bytes(size) for _ in range(1 + (seed + size) % 3))
    size = 500 + seed % 97
    while size < 100_000:  # the C allocator hands out the best-fitting free block: take one of every size, 5% apart
        _ballast.append(bytes(size))
        size += size // 20


# Values whose repr and type name Python gives here, at load: executor.ts reads them out of memory with its own
# reader (python-values.ts) and refuses to start unless it writes the same texts (the objects' layout is checked).
_LAYOUT_SAMPLE = [
    0, 1, -1, 7, 2**30 - 1, 2**30, -2**30, 2**62 + 12345, -(10**40), 10**4299, True, False, None,
    0.0, -0.0, 1.5, 0.1, 1e16, 1e-05, 0.0001, 123456789.125, 5e-324, 1.7976931348623157e308, 2.5e-300,
    1j, -1.5j, complex(1, -0.0), complex(-0.0, 2), complex(0.0, -0.0), complex(1e20, 1e-7),
    '', 'abc', "it's", 'say "hi"', 'both \' and "', 'tab\tnew\nline\r\\', '\x00\x1f\x7f', '\xe9', '\xa0\xad', '\u4e2d\u6587',
    '\u200b', '\U0001f600', '\ud800', '\U000e0001', '\u0378', b'', b"a'b", b'\x00\xff"\'\\',
    (), (1,), (1, 'a'), [], [[]], [1, [2, [3]]], {}, {'a': 1, 2: [3]}, {1: {2: {3: 4}}}, set(), {3, 1, 2},
    {(1, 2), 'x'}, ([{}, set()],), [1.5, None, b'x', 2j, True],
]


def layout_sample():
    """The sample's address, and each value's canonical text and type name as this file writes them."""
    return _json({'address': id(_LAYOUT_SAMPLE), 'expected': [[_canonical(value), _type_name(value)] for value in _LAYOUT_SAMPLE]})


# ---- load: warm what imports lazily, then close the exits ---------------------------------------------------------

def _load_codecs():
    """Every codec Pyodide ships (each module of the encodings package, under each of its aliases), looked up now:
    after load nothing is imported, and a codec missing then would raise LookupError where CPython encodes."""
    import encodings.aliases
    import pkgutil
    names = {module.name for module in pkgutil.iter_modules(encodings.__path__)} - {'aliases'}
    names |= set(encodings.aliases.aliases) | set(encodings.aliases.aliases.values())
    found = 0
    for name in sorted(names):
        try:
            codecs.lookup(name)
            found += 1
        except (LookupError, ImportError):  # a Windows-only codec (mbcs, oem), an alias of one
            pass
    if found < 100:
        raise RuntimeError(f'sandbox/job.py: only {found} codecs found in Pyodide\'s encodings package')


# Exercises every module view and guard once, so that whatever they import lazily is imported before the import
# system closes (and before executor.ts takes its snapshot).
_SELF_TEST = '''
import collections, collections.abc, copy, dataclasses, enum, fractions, functools, heapq, bisect, itertools, json, math, cmath, numbers, operator, re, statistics, string, textwrap, typing, unicodedata, array
from typing import NamedTuple, List, Optional
@dataclasses.dataclass(order=True, frozen=True)
class P:
    x: int
    y: List[int] = dataclasses.field(default_factory=list)
class Color(enum.Enum):
    RED = 1
class T(NamedTuple):
    a: int
    b: Optional[str] = None
N = collections.namedtuple('N', 'u v')
def f(s):
    p = P(1, [2])
    c = collections.Counter(s).most_common(2)
    d = copy.deepcopy({'a': [p.y]})
    m = re.findall(r'[a-z]+', s) + re.sub(r'(\\w)', r'\\1', s).split()
    t = textwrap.fill(s, 5) + textwrap.shorten(s, 10) + string.capwords(s) + string.Template('$a').substitute(a=1)
    j = json.loads(json.dumps({'k': [1.5, None]}))
    st = statistics.mean([1, 2]) + statistics.median([3, 1]) + statistics.stdev([1.0, 2.0]) + float(fractions.Fraction('3/4'))
    e = s.encode('idna') + s.encode('utf-16') + s.encode('latin-1') + 'x'.encode('ascii')
    g = list(itertools.permutations([1, 2])) + list(itertools.product('ab', repeat=2)) + list(itertools.islice(itertools.count(), 3))
    h = heapq.nlargest(2, [3, 1, 2]) + [bisect.bisect([1, 2], 1), functools.reduce(operator.add, [1, 2]), math.comb(5, 2)]
    u = unicodedata.name('a') + unicodedata.normalize('NFC', s) + f'{s!r:>5}' + '{0:>3}'.format(1) + '%5d' % 3
    return repr([p, c, d, m, t, j, st, e, g, h, u, Color.RED, T(1), N(1, 2), p == P(1, [2]), str(typing.List[int]), array.array('i', [1]), cmath.sqrt(-1)])
'''


def _warm_up():
    _load_codecs()
    answer = json.loads(run(_SELF_TEST, '["\'abc de\'"]', 1_000_000))
    if not answer['ok']:
        raise RuntimeError(f'sandbox/job.py: its self-test was refused: {answer["reason"]}: {answer["detail"]}')


_seal_library()
_meter_library()
_warm_up()
_close_javascript()
_close_imports()
gc.collect()
gc.freeze()  # what load made is never collected: a collection after each run walks only what that run made
gc.disable()  # collections happen while a program runs, where fuel counts whatever finalizers they run
