# Limits and refusals: the counters every other layer charges, and the one way a program is stopped.
#
# Threat: a program that takes unbounded time or memory in one step (C code that does a lot for one line), nests
# data so deep that C code walking it overflows the stack, or swallows the exception that stops it. Limits are
# counted, never timed (DESIGN.md rule 5): fuel (LINE and JUMP events of the program's own code, plus what C code
# does for it, charged here), nesting of data (MAX_NESTING, at every walk the sandbox sees), sizes (checked before
# the C call that would make them), memory (the peak tracemalloc counts; executor.ts caps the heap too). A refusal
# is sticky: the first one of a run is recorded here and is the verdict whatever the program does afterwards.

import collections
import itertools
import sys
import tracemalloc

MAX_RECURSION = 200  # frames of the program's own calls, above the harness's
MAX_NESTING = 100  # levels of nested containers in any data a walk of the sandbox's meets (outputs, inputs, repr…)
MAX_ITEMS = 1_000_000  # elements of a str/list/tuple/bytes built by `*`, a padding or bytes(n)
MAX_INT_BITS = 100_000  # bits of an integer built by `*`, `**`, `<<`, factorial, comb, from_bytes…
MAX_RANGE = 1_000_000  # items of one range: C code (sum, list, sorted…) walks one in a single call
RANGE_ITEMS_PER_FUEL = 16  # items of a range made or walked by C code (sum, sorted, list…) per step of fuel: such a walk
#                             makes an int per item; a range a `for` statement walks is not charged (its loop pays)
MADE_ITEMS_PER_FUEL = 1024  # items (or bits) one C call makes (a `*` sequence, a padding, a big integer) per step
WALKED_ITEMS_PER_FUEL = 16  # items C code walks for the program (in, count, find, sum, a slice) per step: as dear as a line
CHECKED_ITEMS_PER_FUEL = 4  # items the sandbox's own checks look at (a nesting walk, a join's sizes): dearer than C's walks
MAX_FORMAT_WIDTH = 10_000  # width or precision in a format spec ('%*d', f'{x:>{w}}', '{:.{p}f}')
MAX_MODPOW_COST = 10**9  # pow(a, b, m): bits of b times (limbs of m) squared
MAX_REGEX_REPEAT = 10_000  # a counted repeat in a regular expression, nested counts multiplied
MAX_PATTERN_CHARS = 2_000  # length of a regular expression's source
MAX_REGEXES_KEPT = 512  # patterns remembered as checked
MAX_MEMORY_BYTES = 64 << 20  # peak of the Python allocations of one run (the heap cap is far above it)
MEMORY_CHECK_STEPS = 64  # steps of fuel between two looks at the traced memory (a loop of big allocations ends early)
MEMORY_CHECK_ITEMS = 8  # items C code iterates for the program between two looks (one item can be a big allocation)
MAX_RESULT_CHARS = 10_000  # canonical text of the returned value
MAX_PRINT_CHARS = 10_000  # text printed by the program (kept only for the determinism check)
MAX_INPUT_CHARS = 100_000  # one input's text
TOOL_ID = 3  # sys.monitoring tool slot for fuel (0-2 and 5 are reserved for debuggers, coverage, profilers)
IDLE_LIMIT = 1 << 62  # the fuel limit between runs: library code the sandbox itself runs is metered, never refused
PROGRAM_FILE = '<program>'  # the program's code objects carry it: fuel, sticky refusals and stores look for it
PROGRAM_MODULE = 'program'  # the program's `__name__`: classes and functions it makes carry it as __module__
# Tests only (executor.ts sets it at load, from JavaScript): programs run unchecked, unrewritten, with the real
# builtins, as if they had escaped every layer here; what must still hold then is the judge's and the restore's.
REAL_BUILTINS_FOR_TESTS = getattr(sys.modules[__package__], 'REAL_BUILTINS_FOR_TESTS', False) is True
GUARD_PREFIX = '_guard_'  # the rewritten program's calls of the guards: a name the program may not use


class Refused(BaseException):
    """A limit or a sandbox rule stopped the program. BaseException: `except Exception` cannot swallow it."""

    def __init__(self, reason, detail):
        super().__init__(f'{reason}: {detail}')
        self.reason = reason
        self.detail = detail


class _RunState:
    """The current run's counters. One instance for the file's life, reached by the guards through default arguments
    bound at load, never through a global a program could rebind."""

    __slots__ = ('used', 'units', 'limit', 'refusal', 'views', 'parked')

    def __init__(self):
        self.used = 0
        self.units = 0  # a step of fuel in the making: 1024ths of a step charged for items C code makes or walks
        self.limit = IDLE_LIMIT
        self.refusal = None  # (reason, detail) of the first refusal of the run: sticky
        self.views = []  # the module views of the current input: stores on them are the program's own business
        self.parked = []  # data too deep to free safely (freeing recurses in C); the memory restore drops it


_run = _RunState()


def _refuse(reason, detail, run=_run, Refused=Refused):
    """Records the run's first refusal (the verdict, even if the program swallows what follows) and raises it."""
    if run.refusal is None:
        run.refusal = (reason, detail)
    raise Refused(reason, detail)


def _charge(items, per=MADE_ITEMS_PER_FUEL, run=_run, units_per_step=MADE_ITEMS_PER_FUEL):
    """Fuel for C work that makes or walks `items` items in one call, `per` items a step (a divisor of 1024): the
    fractions add up, so a thousand walks of a thousand items cost what one walk of a million does."""
    units = run.units + items * (units_per_step // per)
    run.used += units // units_per_step
    run.units = units % units_per_step
    if run.used > run.limit:
        _refuse('fuel', f'the program took more than {run.limit} steps (lines, jumps and items made in C)')


def _charge_quietly(items, per=MADE_ITEMS_PER_FUEL, run=_run, units_per_step=MADE_ITEMS_PER_FUEL):
    """As _charge, where raising is not allowed (a monitoring callback): the next step of fuel refuses."""
    units = run.units + items * (units_per_step // per)
    run.used += units // units_per_step
    run.units = units % units_per_step


def _tick(item, run=_run, traced=tracemalloc.get_traced_memory, every=MEMORY_CHECK_ITEMS - 1):
    """One step of fuel per item that C code iterates for the program (reduce, itertools sources), with a look at
    the memory now and then (a reduce of list concatenations grows it in C); returns the item, for map."""
    used = run.used = run.used + 1
    if used > run.limit:
        _refuse('fuel', f'the program took more than {run.limit} steps (lines, jumps and items made in C)')
    if not used & every and traced()[1] > MAX_MEMORY_BYTES:
        _refuse('memory', f'the program used more than {MAX_MEMORY_BYTES >> 20} MiB')
    return item


# ---- nesting: every walk of data the sandbox sees is counted -----------------------------------------------------

_FLAT_TYPES = frozenset({int, float, complex, str, bytes, bool, type(None), range})
_NESTABLE = (list, tuple, dict, set, frozenset, collections.deque, slice, BaseException)


class _NestableTypes(dict):
    """type → whether C code walks into its instances (repr, ==, hash): a cache so that the check runs at C speed."""

    def __missing__(self, kind):
        self[kind] = nestable = issubclass(kind, _NESTABLE)
        return nestable


_nestable = _NestableTypes()


_ITERABLE_BASES = (list, tuple, set, frozenset, collections.deque)


def _children(value, dict=dict, chain=itertools.chain):
    """What C code walks into: by the base type's own C iteration, so no __iter__ of a program's subclass runs."""
    if type(value) is list or type(value) is tuple:
        return value
    if isinstance(value, dict):
        return chain(dict.keys(value), dict.values(value))
    if isinstance(value, slice):
        return (value.start, value.stop, value.step)
    if isinstance(value, BaseException):
        return BaseException.__getattribute__(value, 'args')
    for base in _ITERABLE_BASES:
        if isinstance(value, base):
            return base.__iter__(value)
    return ()


def _too_deep(root, charge=None, limit=MAX_NESTING, nestable=_nestable, compress=itertools.compress, type=type, id=id, iter=iter, len=len, run=_run):
    """Whether a path through builtin containers from root is longer than `limit`, or a container holds itself. An
    iterative walk at C speed over each container's items; a child shared by several parents or met again is walked
    once (its height is kept). `charge` (_charge, or _charge_quietly where raising is not allowed) makes the items
    looked at cost fuel as each container is met: the walk is done for the program's sake, and once the fuel is
    spent it stops, answering True (the value is kept, never freed by a walk of unknown depth)."""
    if not nestable[type(root)]:
        return False
    heights = {}
    on_path = {id(root)}
    stack = [[root, None, 0]]
    while stack:
        frame = stack[-1]
        node, children = frame[0], frame[1]
        if children is None:
            items = _children(node)
            if not isinstance(items, (list, tuple)):
                items = list(items)
            if charge is not None:
                charge(len(items), CHECKED_ITEMS_PER_FUEL)
                if run.used > run.limit:
                    return True
            nested = list(compress(items, map(nestable.__getitem__, map(type, items))))
            frame[1] = children = iter(dict(zip(map(id, nested), nested)).values())  # each distinct child once
        for child in children:
            key = id(child)
            if key in on_path:
                return True
            known = heights.get(key)
            if known is not None:
                if len(stack) + known > limit:
                    return True
                frame[2] = max(frame[2], known)
                continue
            if len(stack) >= limit:
                return True
            on_path.add(key)
            stack.append([child, None, 0])
            break
        else:
            stack.pop()
            on_path.discard(id(node))
            heights[id(node)] = frame[2] + 1
            if stack:
                stack[-1][2] = max(stack[-1][2], frame[2] + 1)
    return False


def _shallow(value, flat=_FLAT_TYPES, type=type, run=_run):
    """`value`, once it is known that C code walking it (repr, ==, <, hash, sort) nests at most MAX_NESTING deep.
    Data deeper than that is kept alive (parked): freeing it would recurse in C as deep as it nests. The walk costs
    fuel by the items it meets, as the C walk that follows would."""
    if type(value) in flat or not _too_deep(value, _charge):
        return value
    run.parked.append(value)
    _refuse('recursion', f'the data nests more than {MAX_NESTING} levels (or contains itself)')


def _meter(code, monitor=sys.monitoring):
    """Fuel is spent by this code object and every function nested in it."""
    stack = [code]
    while stack:
        code = stack.pop()
        monitor.set_local_events(TOOL_ID, code, monitor.events.LINE | monitor.events.JUMP)
        stack.extend(const for const in code.co_consts if type(const) is type(code))


def _record(reason, detail, run=_run):
    if run.refusal is None:
        run.refusal = (reason, detail)
