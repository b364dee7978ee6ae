# The code domain's sandbox: runs a task's program inside CPython compiled to WebAssembly (Pyodide). executor.ts runs
# this file once per interpreter, then copies the whole WebAssembly memory and puts the copy back before every job, so
# nothing a job changes outlives it; within a job the state is shared between its calls (a validation is run,
# perturb, run). executor.ts calls `check`, `run`, `same_value` and `perturb`; every answer is a JSON string.
#
# Layers, each tested as if the one above it had fallen (test/python-sandbox.test.ts):
#   0. no exits, closed at load: nothing that is or makes a JsProxy is left in the heap (the FFI modules emptied and
#      dropped, JsException unbuildable, JsProxy subtypes without attributes), and the import system is closed:
#      `_imp` is gone, so no built-in module (_pyodide_core, _ctypes, _testcapi…) can be created again, and there is
#      no path, finder or stdlib archive to load code from;
#   1. the source, by allow-list: node kinds; names (no dunder but __name__, none of the sandbox's); every name that
#      becomes an attribute lookup (attributes, `match` keyword patterns, __match_args__, from-imports) is a public
#      name of a builtin type or of an exposed library class, or one the program itself gives things; the dunder
#      methods a class may define; no `except BaseException` or its kin;
#   2. the rewrite: what can take unbounded memory, time or C recursion in one step goes through a guard: `*`, `**`,
#      `<<`, `%` (augmented too), comparisons and f-string fields (nesting), calls of str/bytes/bytearray/int, range
#      outside a `for`, `.format`/`.format_map` (no attribute fields) and the paddings; attributes are stored only on
#      the program's own objects; a bare `except:` becomes `except Exception:`;
#   3. the program's world, by allow-list: builtins and module views (fresh per input) whose entries that walk data,
#      iterate in C or make big numbers are wrapped to count nesting or spend fuel; the library entry points that
#      would keep a program's change (ABC registries, Template patterns, Fraction parsing) are sealed while it runs;
#   4. the verdict, by code the program cannot reach: a refusal is sticky (no handler of the program's sees it, and
#      whatever the program swallowed, the verdict is that refusal); its globals go and its garbage is collected while
#      fuel counts; its result becomes canonical text by an iterative walk over exact builtin types, with references
#      captured at load; answers are parsed and compared the same way.
# Limits are counted, never timed (DESIGN.md rule 5): fuel (LINE and JUMP events of the program's own code, plus
# what C code does for it: RANGE_ITEMS_PER_FUEL, MADE_ITEMS_PER_FUEL, one per item of an itertools source); recursion
# (MAX_RECURSION frames above the harness); nesting of data (MAX_NESTING, at every walk the sandbox sees); sizes,
# checked before the C call that would make them; memory (the peak tracemalloc counts, looked at while the program
# runs; executor.ts caps the heap too); characters of the result and of the printed text.
# What Python cannot close is left to the process around it (sandbox-processes.ts): C code recursing through data
# the sandbox never walks (a deep tuple as a dict key, deep data freed as a function returns) needs the processes'
# 60 MB stack (CPython's own C-recursion guard never fires here: it watches the shadow stack, which these recursions
# do not move), and a memory-corrupting bug in CPython would be an escape into the WebAssembly instance.

import abc
import array
import ast
import bisect
import builtins
import cmath
import codecs
import collections
import collections.abc
import copy
import dataclasses
import enum
import fractions
import functools
import gc
import heapq
import itertools
import json
import json.decoder
import json.encoder
import math
import numbers
import opcode
import operator
import os
import re
import re._compiler
import re._constants
import re._parser
import statistics
import string
import sys
import textwrap
import tracemalloc
import types
import typing
import unicodedata
import weakref
import _string
from hashlib import sha256 as _sha256

MAX_RECURSION = 200  # frames of the program's own calls, above the harness's
MAX_NESTING = 100  # levels of nested containers in any data a walk of the sandbox's meets (outputs, inputs, repr…)
MAX_ITEMS = 1_000_000  # elements of a str/list/tuple/bytes built by `*`, a padding or bytes(n)
MAX_INT_BITS = 100_000  # bits of an integer built by `*`, `**`, `<<`, factorial, comb, from_bytes…
MAX_RANGE = 1_000_000  # items of one range: C code (sum, list, sorted…) walks one in a single call
RANGE_ITEMS_PER_FUEL = 16  # items of a range made or walked by C code (sum, sorted, list…) per step of fuel: such a walk
#                             makes an int per item; a range a `for` statement walks is not charged (its loop pays)
MADE_ITEMS_PER_FUEL = 1024  # items (or bits) one C call makes (a `*` sequence, a padding, a big integer) per step
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
PROGRAM_FILE = '<program>'  # the program's code objects carry it: fuel, sticky refusals and stores look for it
PROGRAM_MODULE = 'program'  # the program's `__name__`: classes and functions it makes carry it as __module__


class Refused(BaseException):
    """A limit or a sandbox rule stopped the program. BaseException: `except Exception` cannot swallow it."""

    def __init__(self, reason, detail):
        super().__init__(f'{reason}: {detail}')
        self.reason = reason
        self.detail = detail


class _RunState:
    """The current run's counters. One instance for the file's life, reached by the guards through default arguments
    bound at load, never through a global a program could rebind."""

    __slots__ = ('used', 'limit', 'refusal', 'views', 'parked')

    def __init__(self):
        self.used = 0
        self.limit = 0
        self.refusal = None  # (reason, detail) of the first refusal of the run: sticky
        self.views = []  # the module views of the current input: stores on them are the program's own business
        self.parked = []  # data too deep to free safely (freeing recurses in C); the memory restore drops it


_run = _RunState()


def _refuse(reason, detail, run=_run, Refused=Refused):
    """Records the run's first refusal (the verdict, even if the program swallows what follows) and raises it."""
    if run.refusal is None:
        run.refusal = (reason, detail)
    raise Refused(reason, detail)


def _charge(items, per=MADE_ITEMS_PER_FUEL, run=_run):
    """Fuel for C work that makes or walks `items` items in one call."""
    run.used += items // per
    if run.used > run.limit:
        _refuse('fuel', f'the program took more than {run.limit} steps (lines, jumps and items made in C)')


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


def _too_deep(root, limit=MAX_NESTING, nestable=_nestable, compress=itertools.compress, type=type, id=id, iter=iter, len=len):
    """Whether a path through builtin containers from root is longer than `limit`, or a container holds itself. An
    iterative walk; containers shared by several paths are walked once (their height is kept)."""
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
            frame[1] = children = iter(compress(items, map(nestable.__getitem__, map(type, items))))
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
    Data deeper than that is kept alive (parked): freeing it would recurse in C as deep as it nests."""
    if type(value) in flat or not _too_deep(value):
        return value
    run.parked.append(value)
    _refuse('recursion', f'the data nests more than {MAX_NESTING} levels (or contains itself)')


# ---- layer 0: no exits ---------------------------------------------------------------------------------------------

_JS_MODULE_ROOTS = ('js', 'pyodide_js', 'pyodide', '_pyodide', '_pyodide_core')
# executor.ts (tests, the warm-up) calls pyodide.runPython, which is pyodide.code.eval_code: that module and the
# one it runs on stay, less what reaches JavaScript. Neither is importable or named anywhere a program can look.
_JS_MODULES_KEPT = {'pyodide.code': {'run_js'}, '_pyodide._base': set()}


def _close_javascript():
    """Leaves no object that is or makes a JsProxy: a JsProxy's `.constructor.constructor` is JavaScript's Function,
    and from there `process`."""
    core = sys.modules['_pyodide_core']
    jsproxy = next(kind for kind in type(sys.modules['pyodide_js']).__mro__ if kind.__base__ is object)
    modules = {name: module for name, module in sys.modules.items() if name.split('.')[0] in _JS_MODULE_ROOTS}
    _forget_copies(core)
    for name in modules:
        del sys.modules[name]
    sys.meta_path[:] = [finder for finder in sys.meta_path if type(finder).__module__.split('.')[0] not in _JS_MODULE_ROOTS]
    main = vars(sys.modules['__main__'])
    for key in [key for key, value in main.items() if any(value is module for module in modules.values())]:
        del main[key]  # the bootstrap left `_pyodide_core` there
    for name, module in modules.items():
        if not isinstance(module, types.ModuleType):
            continue  # pyodide_js: a JsProxy; dropped with sys.modules' entry
        if name in _JS_MODULES_KEPT:
            for key in _JS_MODULES_KEPT[name]:
                vars(module).pop(key, None)
        else:
            vars(module).clear()
    for kind in _subclasses(jsproxy) - {jsproxy}:  # the base is an immutable C type; its subtypes are not
        # JsException is the one JsProxy type a program could build (JsException(name, message) makes a JS Error).
        if '__new__' in vars(kind):
            kind.__new__ = staticmethod(_no_javascript)
        # And should a JsProxy of these types turn up after all, it has no attributes: no `.constructor`, no `.new`.
        kind.__getattribute__ = _no_javascript_attribute
    sys.excepthook = sys.__excepthook__  # Pyodide's hook lived in a module emptied above
    del modules, main
    gc.collect()
    left = {kind.__name__ for kind in map(type, gc.get_objects()) if issubclass(kind, jsproxy)}
    left |= {value.__name__ for value in gc.get_objects() if isinstance(value, types.BuiltinFunctionType) and value.__self__ is core}
    if left:
        raise RuntimeError(f'sandbox.py: JavaScript is still reachable from Python through {sorted(left)}')


def _forget_copies(core):
    """A single-phase extension module keeps a copy of its first dict, from which `_imp.create_builtin` would make
    it again: emptied, with the module's own dict."""
    functions = [value for value in vars(core).values() if isinstance(value, types.BuiltinFunctionType)]
    holders = [holder for holder in gc.get_referrers(*functions) if isinstance(holder, dict)]
    for holder in holders:
        holder.clear()


def _no_javascript_attribute(self, name):
    raise AttributeError(f'JavaScript objects have no attributes in the sandbox (.{name})')


def _no_javascript(*_args, **_kwargs):
    raise TypeError('JavaScript objects cannot be made in the sandbox')


def _subclasses(root):
    """Every class below root (type.__subclasses__ walked iteratively)."""
    seen, stack = {root}, [root]
    while stack:
        for kind in type.__subclasses__(stack.pop()):
            if kind not in seen:
                seen.add(kind)
                stack.append(kind)
    return seen


class _ClosedImport:
    """Stands where `_imp` was in the import machinery: every further import fails, cleanly."""

    def __getattr__(self, name):
        def closed(*_args, **_kwargs):
            raise ImportError(f'the import system is closed in the sandbox (_imp.{name})')
        return closed


def _close_imports():
    """After load nothing is imported again: the modules a program may use are views of modules already loaded,
    and C code that imports lazily finds its module in sys.modules. Without `_imp` no built-in module can be
    created (_pyodide_core, _ctypes, _testcapi, _testinternalcapi…) and no file can be loaded."""
    real = sys.modules.pop('_imp')
    functions = {id(value) for value in vars(real).values() if isinstance(value, types.BuiltinFunctionType)}
    closed = _ClosedImport()
    for module in list(sys.modules.values()):
        namespace = getattr(module, '__dict__', None)
        if not isinstance(namespace, dict):
            continue
        for key, value in list(namespace.items()):
            if value is real or id(value) in functions:
                namespace[key] = closed if value is real else getattr(closed, key)
    sys.meta_path.clear()
    sys.path_hooks.clear()
    sys.path.clear()
    sys.path_importer_cache.clear()
    import zipimport
    zipimport._zip_directory_cache.clear()
    for archive in [name for name in os.listdir('/lib') if name.endswith('.zip')]:
        os.remove(f'/lib/{archive}')  # the stdlib and Pyodide's own packages: nothing reads them after load
    gone = weakref.ref(real)
    del real
    gc.collect()
    if gone() is not None:
        raise RuntimeError('sandbox.py: _imp is still alive; built-in modules could be created again')


# ---- layer 1: the source, by allow-list ---------------------------------------------------------------------------

# Dunder methods a program's class may define; the rest (__del__, __getattr__, __getattribute__, __setattr__,
# __delattr__, __set_name__, __init_subclass__, __class_getitem__, __reduce__, __reduce_ex__, __replace__,
# __deepcopy__, __copy__, __getstate__, __setstate__, __get__, __set__, __instancecheck__, __format__ of
# descriptors…) are hooks that library or sandbox code would call by name.
DEFINABLE_DUNDERS = frozenset({
    '__init__', '__new__', '__post_init__', '__repr__', '__str__', '__eq__', '__ne__', '__lt__', '__le__', '__gt__',
    '__ge__', '__hash__', '__bool__', '__len__', '__iter__', '__next__', '__reversed__', '__contains__',
    '__getitem__', '__setitem__', '__delitem__', '__missing__', '__call__', '__enter__', '__exit__', '__index__',
    '__int__', '__float__', '__complex__', '__round__', '__trunc__', '__floor__', '__ceil__', '__neg__', '__pos__',
    '__abs__', '__invert__', '__add__', '__radd__', '__iadd__', '__sub__', '__rsub__', '__isub__', '__mul__',
    '__rmul__', '__imul__', '__matmul__', '__rmatmul__', '__imatmul__', '__truediv__', '__rtruediv__',
    '__itruediv__', '__floordiv__', '__rfloordiv__', '__ifloordiv__', '__mod__', '__rmod__', '__imod__',
    '__divmod__', '__rdivmod__', '__pow__', '__rpow__', '__ipow__', '__lshift__', '__rlshift__', '__ilshift__',
    '__rshift__', '__rrshift__', '__irshift__', '__and__', '__rand__', '__iand__', '__or__', '__ror__', '__ior__',
    '__xor__', '__rxor__', '__ixor__', '__slots__', '__match_args__',
})
# Dunder attributes a program may read: names, its own methods through super(). None leads to a frame, code,
# globals, a class's subclasses, or a string-driven attribute lookup (__dict__, __getattribute__).
READABLE_DUNDERS = frozenset({'__name__', '__qualname__', '__doc__', '__class__', '__init__', '__new__', '__post_init__', '__repr__', '__str__', '__eq__', '__ne__', '__lt__', '__le__', '__gt__', '__ge__', '__hash__', '__len__', '__iter__', '__next__', '__contains__', '__getitem__', '__setitem__', '__delitem__', '__bool__', '__enter__', '__exit__', '__missing__'})
# namedtuple's public API is spelled with one underscore.
READABLE_PRIVATE = frozenset({'_asdict', '_replace', '_fields', '_field_defaults', '_make'})
# Attribute loads that go through a guard (rewritten, layer 2): string formatting and paddings, int.from_bytes and
# to_bytes, list methods that compare elements.
GUARDED_METHODS = frozenset({'format', 'format_map', 'ljust', 'rjust', 'center', 'zfill', 'expandtabs', 'replace', 'from_bytes', 'to_bytes', 'sort', 'index', 'count', 'remove'})
# Names in `except` clauses that would catch the sandbox's refusals.
UNCATCHABLE = frozenset({'BaseException', 'BaseExceptionGroup', 'SystemExit', 'KeyboardInterrupt', 'GeneratorExit'})
GUARD_PREFIX = '_guard_'

# Node kinds a program may use: statements and expressions of ordinary code. Not async code, t-strings, or
# `type X = …` aliases (nothing in the allowed modules needs them).
_ALLOWED_NODES = frozenset({
    ast.Module, ast.Expr, ast.FunctionDef, ast.ClassDef, ast.Return, ast.Delete, ast.Assign, ast.AugAssign,
    ast.AnnAssign, ast.For, ast.While, ast.If, ast.With, ast.Match, ast.Raise, ast.Try, ast.TryStar, ast.Assert,
    ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.Pass, ast.Break, ast.Continue, ast.BoolOp,
    ast.NamedExpr, ast.BinOp, ast.UnaryOp, ast.Lambda, ast.IfExp, ast.Dict, ast.Set, ast.ListComp, ast.SetComp,
    ast.DictComp, ast.GeneratorExp, ast.Yield, ast.YieldFrom, ast.Compare, ast.Call, ast.FormattedValue,
    ast.JoinedStr, ast.Constant, ast.Attribute, ast.Subscript, ast.Starred, ast.Name, ast.List, ast.Tuple,
    ast.Slice, ast.Load, ast.Store, ast.Del, ast.And, ast.Or, ast.Add, ast.Sub, ast.Mult, ast.MatMult, ast.Div,
    ast.Mod, ast.Pow, ast.LShift, ast.RShift, ast.BitOr, ast.BitXor, ast.BitAnd, ast.FloorDiv, ast.Invert, ast.Not,
    ast.UAdd, ast.USub, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Is, ast.IsNot, ast.In, ast.NotIn,
    ast.comprehension, ast.ExceptHandler, ast.arguments, ast.arg, ast.keyword, ast.alias, ast.withitem,
    ast.match_case, ast.MatchValue, ast.MatchSingleton, ast.MatchSequence, ast.MatchMapping, ast.MatchClass,
    ast.MatchStar, ast.MatchAs, ast.MatchOr,
})
_IDENTIFIER = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')
# The names a node binds: none may be a dunder or one of the sandbox's.
_BOUND_NAMES = {
    ast.arg: lambda node: (node.arg,), ast.keyword: lambda node: (node.arg,), ast.Global: lambda node: node.names,
    ast.Nonlocal: lambda node: node.names, ast.alias: lambda node: (node.asname or node.name.split('.')[0],),
    ast.ExceptHandler: lambda node: (node.name,), ast.MatchAs: lambda node: (node.name,),
    ast.MatchStar: lambda node: (node.name,), ast.MatchMapping: lambda node: (node.rest,),
}


def _is_dunder(name):
    return len(name) > 4 and name.startswith('__') and name.endswith('__')


_BRANCHING = frozenset({ast.If, ast.For, ast.While, ast.IfExp, ast.ExceptHandler, ast.comprehension, ast.match_case, ast.Assert})


class _Survey:
    """One walk over the tree: its nodes, the names the program gives things (its definitions, the attributes it
    stores, keyword and parameter names, words in its strings: namedtuple and Enum fields), which may be read back
    as attributes; the nodes that make a class's namespace; and the program's metrics."""

    def __init__(self, tree):
        self.nodes = []  # in source order: the first rule broken is the first in the text
        self.names = set()
        self.class_level = set()
        depth = branches = 0
        stack = [(tree, 1)]
        while stack:
            node, level = stack.pop()
            self.nodes.append(node)
            depth = max(depth, level)
            kind = type(node)
            if kind in _BRANCHING:
                branches += 1 + (len(node.ifs) if kind is ast.comprehension else 0)
            elif kind is ast.BoolOp:
                branches += len(node.values) - 1
            elif kind is ast.FunctionDef:
                self.names.add(node.name)
            elif kind is ast.ClassDef:
                self.names.add(node.name)
                self.class_level.update(map(id, node.body))
                for statement in node.body:
                    targets = statement.targets if type(statement) is ast.Assign else [statement.target] if type(statement) is ast.AnnAssign else []
                    self.class_level.update(id(target) for target in targets if type(target) is ast.Name)
            elif kind is ast.Name:
                if type(node.ctx) is ast.Store:
                    self.names.add(node.id)
            elif kind is ast.Attribute:
                if type(node.ctx) is not ast.Load:
                    self.names.add(node.attr)
            elif kind is ast.arg:
                self.names.add(node.arg)
            elif kind is ast.keyword:
                if node.arg:
                    self.names.add(node.arg)
            elif kind is ast.Constant:
                if type(node.value) is str and len(node.value) <= 1000:
                    self.names.update(_IDENTIFIER.findall(node.value))
            stack.extend((child, level + 1) for child in reversed(list(ast.iter_child_nodes(node))))  # in source order
        normal = ast.dump(tree, annotate_fields=False)  # formatting and comments do not make a program distinct
        self.metrics = {'nodes': len(self.nodes), 'depth': depth, 'cyclomatic': 1 + branches, 'hash': _sha256(normal.encode()).hexdigest()[:16]}


class _Checker:
    """Layer 1: every node of the survey against the rules of its kind; the first rule broken is the refusal."""

    def __init__(self, survey):
        self.survey = survey
        self.program_names = survey.names - _DANGEROUS_ATTRIBUTES
        self.dangerous = survey.names & _DANGEROUS_ATTRIBUTES
        self.rules = {
            ast.Attribute: self.attribute_refusal, ast.MatchClass: self.pattern_refusal, ast.Name: self.name_node_refusal,
            ast.FunctionDef: self.definition_refusal, ast.ClassDef: self.definition_refusal, ast.Assign: self.class_assign_refusal,
            ast.ExceptHandler: self.handler_refusal, ast.Import: self.import_refusal, ast.ImportFrom: self.import_refusal,
            ast.Call: self.call_refusal,
        }

    def check(self):
        if self.dangerous:
            name = sorted(self.dangerous)[0]
            return 'forbidden-attribute', f'the program names an attribute .{name}, which the sandbox keeps out of reach'
        allowed, rules, bound = _ALLOWED_NODES, self.rules, _BOUND_NAMES
        for node in self.survey.nodes:
            kind = type(node)
            if kind not in allowed:
                return 'forbidden-syntax', f'{kind.__name__} (line {getattr(node, "lineno", "?")}) is not allowed in the sandbox'
            rule = rules.get(kind)
            refusal = rule(node) if rule else None
            if refusal:
                return refusal
            names = bound.get(kind)
            for name in names(node) if names else ():
                if name and (_is_dunder(name) or name.startswith(GUARD_PREFIX)):
                    return 'forbidden-syntax', f'the name {name} (line {getattr(node, "lineno", "?")}) is reserved'
        return None

    def attribute_allowed(self, name):
        if _is_dunder(name):
            return name in READABLE_DUNDERS
        if name.startswith('_'):
            return name in READABLE_PRIVATE or (name in self.program_names and name not in _LIBRARY_PRIVATE)
        return name in _SAFE_ATTRIBUTES or name in self.program_names or name in GUARDED_METHODS

    def attribute_refusal(self, node):
        if not self.attribute_allowed(node.attr):
            return 'forbidden-attribute', f".{node.attr} (line {node.lineno}) is out of the sandbox's reach"
        return None

    def pattern_refusal(self, node):
        for name in node.kwd_attrs:
            if not self.attribute_allowed(name):
                return 'forbidden-attribute', f"the pattern attribute {name}= (line {node.lineno}) is out of the sandbox's reach"
        return None

    def name_node_refusal(self, node):
        return self.name_refusal(node.id, node.lineno, type(node.ctx) is ast.Load, id(node) in self.survey.class_level)

    def definition_refusal(self, node):
        if _is_dunder(node.name) and not (id(node) in self.survey.class_level and node.name in DEFINABLE_DUNDERS):
            return 'forbidden-syntax', f'defining {node.name} (line {node.lineno}) is not allowed: the sandbox allows ordinary dunder methods only'
        return None

    def class_assign_refusal(self, node):
        if id(node) in self.survey.class_level:
            for target in node.targets:
                if type(target) is ast.Name and target.id == '__match_args__':
                    return self.match_args_refusal(node.value, node.lineno)
        return None

    def handler_refusal(self, node):
        for part in ast.walk(node.type) if node.type is not None else ():
            if type(part) is ast.Name and part.id in UNCATCHABLE:
                return 'forbidden-syntax', f"except {part.id} (line {node.lineno}) would swallow the sandbox's limits; catch Exception"
        return None

    def call_refusal(self, node):
        if type(node.func) is ast.Name and node.func.id == 'type' and len(node.args) != 1:
            return 'forbidden-builtin', f'type() with three arguments (line {node.lineno}) makes a class from a dict of names; use a class statement'
        return None

    def name_refusal(self, name, line, load, in_class_body):
        if name.startswith(GUARD_PREFIX):
            return 'forbidden-builtin', f'{name} (line {line}) is the sandbox\'s own'
        if _is_dunder(name):
            if load and name == '__name__':
                return None
            if in_class_body and not load and name in DEFINABLE_DUNDERS:
                return None
            return 'forbidden-builtin', f'{name} (line {line}) is not available in the sandbox'
        return None

    def match_args_refusal(self, value, line):
        if isinstance(value, ast.Tuple) and all(isinstance(item, ast.Constant) and isinstance(item.value, str) and self.attribute_allowed(item.value) for item in value.elts):
            return None
        return 'forbidden-attribute', f'__match_args__ (line {line}) must be a tuple of the class\'s own attribute names'

    def import_refusal(self, node):
        line = node.lineno
        if isinstance(node, ast.ImportFrom):
            module = ('.' * node.level) + (node.module or '')
            if module not in _MODULE_VIEWS:
                return 'forbidden-import', f'{module} (line {line}) is not importable; allowed: {", ".join(sorted(_MODULE_VIEWS))}'
            for alias in node.names:
                if alias.name != '*' and alias.name not in _MODULE_VIEWS[module] and f'{module}.{alias.name}' not in _MODULE_VIEWS:
                    return 'forbidden-import', f'{module}.{alias.name} (line {line}) is not among the names the sandbox exposes'
                if alias.name == '*':
                    return 'forbidden-syntax', f'from {module} import * (line {line}): import the names you use'
            return None
        for alias in node.names:
            if alias.name not in _MODULE_VIEWS:
                return 'forbidden-import', f'{alias.name} (line {line}) is not importable; allowed: {", ".join(sorted(_MODULE_VIEWS))}'
        return None


# ---- layer 2: the rewrite ------------------------------------------------------------------------------------------


def _guard_call(name, *args):
    return ast.Call(ast.Name(GUARD_PREFIX + name, ast.Load()), list(args), [])


def _is_scalar_constant(node):
    return isinstance(node, ast.Constant) and type(node.value) in (int, float, complex, str, bytes, bool, type(None))


def _pure(node):
    """An expression that can be evaluated twice without side effects (a target of an augmented assignment)."""
    return all(isinstance(part, (ast.Name, ast.Constant, ast.Attribute, ast.Subscript, ast.Slice, ast.Tuple, ast.BinOp, ast.UnaryOp, ast.expr_context, ast.operator, ast.unaryop)) for part in ast.walk(node))


class _Rewrite(ast.NodeTransformer):
    """Layer 2: the operations that can take unbounded memory, time or C recursion in one step go through guards.
    Calls of a builtin are rewritten unless the program binds that name itself (then they are its own)."""

    BINARY = {ast.Mult: 'mul', ast.Pow: 'pow', ast.LShift: 'lshift', ast.Mod: 'mod'}
    CALLS = {'str': 'str', 'bytes': 'bytes', 'bytearray': 'bytearray', 'int': 'int'}
    WALKING = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.In, ast.NotIn)

    def __init__(self, program_names):
        self.calls = {name: guard for name, guard in self.CALLS.items() if name not in program_names}
        self.loop_range = 'range' not in program_names

    def visit_BinOp(self, node):
        self.generic_visit(node)
        guard = self.BINARY.get(type(node.op))
        if guard is None:
            return node
        return ast.copy_location(_guard_call(guard, node.left, node.right), node)

    def visit_AugAssign(self, node):
        pure = _pure(node.target)
        self.generic_visit(node)
        guard = self.BINARY.get(type(node.op))
        if guard is None:
            return node
        target = node.target
        if not pure:
            return ast.copy_location(ast.Expr(_guard_call('refuse_target', ast.Constant(node.lineno))), node)
        current = ast.copy_location(_as_load(target), target)
        # The real in-place operation still runs (a list `*=` keeps its identity); the guard only checks sizes.
        node.value = ast.copy_location(_guard_call(f'check_{guard}', current, node.value), node.value)
        return node

    def visit_Compare(self, node):
        self.generic_visit(node)
        operands = [node.left, *node.comparators]
        for i, op in enumerate(node.ops):
            if not isinstance(op, self.WALKING):
                continue
            left, right = operands[i], operands[i + 1]
            if _is_scalar_constant(left) or _is_scalar_constant(right):
                continue
            # A walk of two containers nests no deeper than the left one: checking it bounds == < in …
            operands[i] = ast.copy_location(_guard_call('shallow', left), left)
        node.left, node.comparators = operands[0], operands[1:]
        return node

    def visit_FormattedValue(self, node):
        self.generic_visit(node)
        spec = node.format_spec if node.format_spec is not None else ast.Constant('')
        call = _guard_call('fstring', node.value, ast.Constant(node.conversion), spec)
        return ast.copy_location(ast.FormattedValue(ast.copy_location(call, node), -1, None), node)

    def visit_Attribute(self, node):
        self.generic_visit(node)
        if not isinstance(node.ctx, ast.Load):
            node.value = ast.copy_location(_guard_call('target', node.value), node.value)
            return node
        if node.attr in GUARDED_METHODS:
            return ast.copy_location(_guard_call('method', node.value, ast.Constant(node.attr)), node)
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in self.calls:
            node.func = ast.copy_location(ast.Name(GUARD_PREFIX + self.calls[node.func.id], ast.Load()), node.func)
        return node

    def visit_For(self, node):
        self.generic_visit(node)
        self.loop_iterable(node)
        return node

    def visit_comprehension(self, node):
        self.generic_visit(node)
        self.loop_iterable(node)
        return node

    def loop_iterable(self, loop):
        """range() walked by a `for`: the loop pays per item, so the range is not charged."""
        iterable = loop.iter
        if self.loop_range and isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) and iterable.func.id == 'range':
            iterable.func = ast.copy_location(ast.Name(GUARD_PREFIX + 'loop_range', ast.Load()), iterable.func)

    def visit_ExceptHandler(self, node):
        self.generic_visit(node)
        if node.type is None:  # a bare except would catch the sandbox's refusals
            node.type = ast.copy_location(ast.Name('Exception', ast.Load()), node)
        return node


def _as_load(node):
    """The same expression, to be read (an augmented assignment's target, evaluated once more for its check)."""
    copied = copy.deepcopy(node)
    for part in ast.walk(copied):
        if hasattr(part, 'ctx'):
            part.ctx = ast.Load()
    return copied


COMPILED_KEPT = 16  # programs whose checked, rewritten code is kept: a validation runs its program twice


def _compile(source, kept={}):
    """The program checked and rewritten (layers 1 and 2), and its metrics; a refusal is raised. The last few
    programs' results are kept (code objects are immutable; each run makes its own functions from them)."""
    result = kept.get(source)
    if result is None:
        result = _compile_anew(source)
        kept[source] = result
        while len(kept) > COMPILED_KEPT:
            del kept[next(iter(kept))]
    if isinstance(result, Refused):
        raise Refused(result.reason, result.detail)
    return result


def _compile_anew(source):
    try:
        tree = ast.parse(source, PROGRAM_FILE)
    except SyntaxError as error:
        return Refused('syntax', f'{error.msg} (line {error.lineno})')
    except (ValueError, RecursionError, MemoryError) as error:  # null bytes, nesting the parser refuses
        return Refused('syntax', f'the source cannot be parsed ({type(error).__name__})')
    survey = _Survey(tree)
    refusal = _Checker(survey).check()
    if refusal:
        return Refused(*refusal)
    if not any(isinstance(node, ast.FunctionDef) and node.name == 'f' for node in tree.body):
        return Refused('no-function', 'the program must define a top-level function f')
    code = compile(ast.fix_missing_locations(_Rewrite(survey.names).visit(tree)), PROGRAM_FILE, 'exec')
    return code, survey.metrics


# ---- layer 3: the guards the rewritten program calls --------------------------------------------------------------

_SEQUENCES = (str, bytes, bytearray, list, tuple, array.array, collections.deque)


def _size_of_product(a, b, index=operator.index):
    """Items of `a * b` when one side is a sequence, bits when both are integers or fractions; None otherwise."""
    for seq, n in ((a, b), (b, a)):
        if isinstance(seq, _SEQUENCES) and not isinstance(n, _SEQUENCES):
            try:
                n = index(n)
            except TypeError:
                return None, None
            return 'items', len(seq) * max(n, 0)
    bits_a, bits_b = _bits(a), _bits(b)
    if bits_a is not None and bits_b is not None:
        return 'bits', bits_a + bits_b
    return None, None


def _bits(value, Fraction=fractions.Fraction):
    if isinstance(value, int):
        return value.bit_length()
    if isinstance(value, Fraction):
        return value.numerator.bit_length() + value.denominator.bit_length()
    return None


def _check_size(kind, size):
    if kind == 'items':
        if size > MAX_ITEMS:
            _refuse('memory', f'a sequence of {size} items exceeds the limit of {MAX_ITEMS}')
        _charge(size)
    elif kind == 'bits':
        if size > MAX_INT_BITS:
            _refuse('memory', f'a number of about {size} bits exceeds the limit of {MAX_INT_BITS}')
        _charge(size)


def _guard_mul(a, b, int=int, type=type):
    if type(a) is int and type(b) is int and a.bit_length() + b.bit_length() <= 64:
        return a * b
    _check_size(*_size_of_product(a, b))
    return a * b


def _check_mul(a, b):
    """`a *= b`: the check alone (the assignment does the in-place multiplication); returns b."""
    _check_size(*_size_of_product(a, b))
    return b


def _pow_bits(a, b, modulo=None):
    if modulo is not None:
        if isinstance(a, int) and isinstance(b, int) and isinstance(modulo, int):
            cost = b.bit_length() * (modulo.bit_length() // 30 + 1) ** 2
            if cost > MAX_MODPOW_COST:
                _refuse('memory', f'pow() with a {b.bit_length()}-bit exponent and a {modulo.bit_length()}-bit modulus is too much work')
        return
    if not isinstance(a, (int, fractions.Fraction)) or not isinstance(b, (int, fractions.Fraction)):
        return
    if isinstance(b, fractions.Fraction):
        if b.denominator != 1:
            return  # a fraction to a fractional power is a float
        b = b.numerator
    if b > 0 and abs(a) > 1:
        parts = (a,) if isinstance(a, int) else (a.numerator, a.denominator)
        _check_size('bits', int(b * sum(math.log2(abs(part)) for part in parts if part)) + 1)


def _guard_pow(a, b, modulo=None):
    _pow_bits(a, b, modulo)
    return pow(a, b) if modulo is None else pow(a, b, modulo)


def _check_pow(a, b):
    _pow_bits(a, b)
    return b


def _lshift_bits(a, b):
    if isinstance(a, int) and isinstance(b, int) and a != 0 and b > 0:
        _check_size('bits', a.bit_length() + b)


def _guard_lshift(a, b):
    _lshift_bits(a, b)
    return a << b


def _check_lshift(a, b):
    _lshift_bits(a, b)
    return b


# printf-style conversions: %(key)flags width .precision length type
_PRINTF = re.compile(rb'%(\([^)]*\))?[#0 +\-]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?(.)', re.DOTALL)


def _check_printf(template, args):
    """`template % args`: widths and precisions (also `*` ones taken from args), and the args' nesting."""
    text = template.encode('utf-8', 'surrogatepass') if isinstance(template, str) else bytes(template)
    values = args if isinstance(args, tuple) else (args,)
    position = 0
    for match in _PRINTF.finditer(text):
        if match.group(4) == b'%':
            continue
        for part in (match.group(2), match.group(3)):
            if part == b'*':
                width = values[position] if position < len(values) else 0
                position += 1
            else:
                width = int(part) if part else 0
            if isinstance(width, int) and abs(width) > MAX_FORMAT_WIDTH:
                _refuse('memory', f'a format width of {width} exceeds the limit of {MAX_FORMAT_WIDTH}')
        position += match.group(1) is None
    for value in values:
        _shallow(value)


def _guard_mod(a, b, type=type, int=int, float=float):
    if type(a) is int or type(a) is float:
        return a % b
    if isinstance(a, (str, bytes, bytearray)):
        _check_printf(a, b)
    return a % b


def _check_mod(a, b):
    if isinstance(a, (str, bytes, bytearray)):
        _check_printf(a, b)
    return b


def _guard_refuse_target(line):
    _refuse('forbidden-syntax', f'an augmented assignment (line {line}) to a target with calls in it cannot be checked; assign to a name first')


# [[fill]align][sign][z][#][0][width][grouping][.precision][type]
_FORMAT_SPEC = re.compile(r'(?:.?[<>=^])?[+\- ]?z?#?0?(\d*)[,_]?(?:\.(\d*))?[a-zA-Z%]?\Z', re.DOTALL)


def _check_spec(spec):
    if not isinstance(spec, str) or not spec:
        return
    match = _FORMAT_SPEC.match(spec)
    if match is None:
        digits = re.findall(r'\d+', spec)  # not a standard spec (a class of the program's): its numbers still count
        numbers_ = [int(d) for d in digits if len(d) < 12] + [10**12 for d in digits if len(d) >= 12]
    else:
        numbers_ = [int(d) if len(d) < 12 else 10**12 for d in match.groups() if d]
    for number in numbers_:
        if number > MAX_FORMAT_WIDTH:
            _refuse('memory', f'a format width or precision of {number} exceeds the limit of {MAX_FORMAT_WIDTH}')


def _guard_fstring(value, conversion, spec):
    _shallow(value)
    if conversion == 115:
        value = str(value)
    elif conversion == 114:
        value = repr(value)
    elif conversion == 97:
        value = ascii(value)
    _check_spec(spec)
    return format(value, spec)


def _check_format_string(template, args, kwargs):
    """str.format: a field indexes positionally or by key only (an attribute field, '{0.__class__}', is a getattr by
    string); widths and precisions are bounded, also those a nested field gives ('{:>{}}'); the values' nesting."""
    if not isinstance(template, str):
        return
    auto = itertools.count()  # '{}' fields take the next argument, nested ones after their own field
    try:
        for _literal, field, spec, _conversion in _string.formatter_parser(template):
            if field is None:
                continue
            _format_field(field, args, kwargs, auto)
            if spec and '{' in spec:
                resolved = []
                for literal, nested, nested_spec, _ in _string.formatter_parser(spec):
                    resolved.append(literal)
                    if nested is not None:
                        resolved.append(format(_format_field(nested, args, kwargs, auto), nested_spec or ''))
                spec = ''.join(resolved)
            _check_spec(spec)
    except (ValueError, IndexError, KeyError, TypeError):
        return  # a malformed template or a missing argument: the real call raises the same error
    for value in args:
        _shallow(value)
    for value in kwargs.values():
        _shallow(value)


def _format_field(field, args, kwargs, auto):
    """The value a format field names; an attribute in it is refused."""
    first, rest = _string.formatter_field_name_split(field)
    keys = list(rest)
    if any(is_attribute for is_attribute, _key in keys):
        _refuse('forbidden-attribute', f'the format field {{{field}}} looks up an attribute by name')
    value = args[next(auto) if first == '' else first] if first == '' or isinstance(first, int) else kwargs[first]
    for _is_attribute, key in keys:
        value = value[key]
    return value


def _checked_format(method, template):
    def format_(*args, **kwargs):
        _check_format_string(template, args, kwargs)
        return method(*args, **kwargs)
    return format_


def _checked_format_map(method, template):
    def format_map(mapping):
        _check_format_string(template, (), mapping if isinstance(mapping, dict) else {})
        return method(mapping)
    return format_map


def _checked_unbound_format(method):
    def format_(template, *args, **kwargs):
        _check_format_string(template, args, kwargs)
        return method(template, *args, **kwargs)
    return format_


def _checked_padding(method):
    def pad(width, *args):
        try:
            size = operator.index(width)
        except TypeError:
            return method(width, *args)
        if size > MAX_ITEMS:
            _refuse('memory', f'a padding to {size} items exceeds the limit of {MAX_ITEMS}')
        _charge(size)
        return method(width, *args)
    return pad


def _checked_expandtabs(method, length):
    def expandtabs(tabsize=8):
        try:
            size = max(operator.index(tabsize), 1) * length
        except TypeError:
            return method(tabsize)
        if size > MAX_ITEMS:
            _refuse('memory', f'expanding tabs to up to {size} characters exceeds the limit of {MAX_ITEMS}')
        return method(tabsize)
    return expandtabs


def _checked_replace(method, length):
    def replace(old, new, count=-1):
        if isinstance(old, (str, bytes, bytearray)) and isinstance(new, (str, bytes, bytearray)) and len(new) > len(old):
            size = length + (length // max(len(old), 1) + 1) * (len(new) - len(old))
            if size > MAX_ITEMS:
                _refuse('memory', f'a replace() that could make {size} items exceeds the limit of {MAX_ITEMS}')
        return method(old, new, count)
    return replace


def _checked_from_bytes(method):
    def from_bytes(data, *args, **kwargs):
        if isinstance(data, (bytes, bytearray)) and len(data) * 8 > MAX_INT_BITS:
            _refuse('memory', f'an integer of {len(data) * 8} bits exceeds the limit of {MAX_INT_BITS}')
        return method(data, *args, **kwargs)
    return from_bytes


def _checked_sort(method, sequence):
    def sort(*args, **kwargs):
        _shallow(sequence)
        return method(*args, **kwargs)
    return sort


def _checked_item(method):
    def compare_item(item, *args):
        _shallow(item)
        return method(item, *args)
    return compare_item


def _guard_method(value, name, getattr=getattr, type=type):
    """Layer 2: `value.name` for the names of GUARDED_METHODS; the check applies where the name is the builtin one."""
    method = getattr(value, name)
    if name in ('format', 'format_map'):
        if isinstance(value, str):
            return _checked_format(method, value) if name == 'format' else _checked_format_map(method, value)
        if value is str and name == 'format':
            return _checked_unbound_format(method)
        return method
    text_like = isinstance(value, (str, bytes, bytearray))
    if name in ('ljust', 'rjust', 'center', 'zfill') and text_like:
        return _checked_padding(method)
    if name == 'expandtabs' and text_like:
        return _checked_expandtabs(method, len(value))
    if name == 'replace' and text_like:
        return _checked_replace(method, len(value))
    if name == 'from_bytes' and isinstance(value, type) and issubclass(value, int):
        return _checked_from_bytes(method)
    if name == 'to_bytes' and isinstance(value, int):
        return _checked_padding(method)
    if name == 'sort' and isinstance(value, list):
        return _checked_sort(method, value)
    if name in ('index', 'count', 'remove') and isinstance(value, (list, tuple, collections.deque)):
        return _checked_item(method)
    return method


def _guard_target(value, type=type, run=_run, module=PROGRAM_MODULE):
    """Layer 2: the object of an attribute store or delete. Only the program's own classes, their instances, its
    functions and its module views take attributes: a library class, function or singleton changed here would be
    changed for the rest of the job (and a later check of the same job would see it)."""
    kind = type(value)
    if kind.__dict__.get('__module__') == module or isinstance(value, type) and value.__dict__.get('__module__') == module:
        return value
    if kind is types.FunctionType and value.__module__ == module and value.__code__.co_filename == PROGRAM_FILE:
        return value
    if kind is types.ModuleType and any(value is view for view in run.views):
        return value
    _refuse('forbidden-attribute', f'setting an attribute on {kind.__name__} {getattr(value, "__name__", "")!s} would change a library object')


def _range_items(items):
    return max(0, (items.stop - items.start + items.step - (1 if items.step > 0 else -1)) // items.step)  # len() overflows on wasm32


def _guard_loop_range(*args):
    """range() as the iterable of a `for` statement or clause: any size, since the loop pays fuel per item (a search
    that breaks early, `for i in range(10 ** 9): if …: return i`, is ordinary code)."""
    return range(*args)


def _guard_range(*args):
    """range() anywhere else (also the builtin, so an alias of it): C code may walk it, so it is bounded and charged."""
    items = range(*args)
    count = _range_items(items)
    if count > MAX_RANGE:
        _refuse('fuel', f'a range of {count} items exceeds the limit of {MAX_RANGE} (code in C would walk it without spending fuel)')
    _charge(count, RANGE_ITEMS_PER_FUEL)
    return items


def _guard_str(*args, **kwargs):
    if len(args) == 1 and not kwargs:
        _shallow(args[0])
    return str(*args, **kwargs)


def _check_buffer(args):
    if args and isinstance(args[0], int):
        if args[0] > MAX_ITEMS:
            _refuse('memory', f'a buffer of {args[0]} bytes exceeds the limit of {MAX_ITEMS}')
        _charge(args[0])


def _guard_bytes(*args, **kwargs):
    _check_buffer(args)
    return bytes(*args, **kwargs)


def _guard_bytearray(*args, **kwargs):
    _check_buffer(args)
    return bytearray(*args, **kwargs)


def _guard_int(*args, **kwargs):
    if len(args) == 2 and isinstance(args[0], (str, bytes, bytearray)) and isinstance(args[1], int) and args[1] >= 2:
        bits = len(args[0]) * max(args[1] - 1, 1).bit_length()
        if bits > MAX_INT_BITS:
            _refuse('memory', f'an integer of up to {bits} bits exceeds the limit of {MAX_INT_BITS}')
    return int(*args, **kwargs)


# ---- layer 3: builtins and module views, by allow-list -------------------------------------------------------------

# Iterators the sandbox's wrappers made, with their nesting (a zip of a zip of …): iterating a chain recurses in C.
# Only chains are recorded (an iterator over a list is not), and each is kept until the input's world ends.
class _Chains:
    __slots__ = ('depths',)

    def __init__(self):
        self.depths = {}


_chains = _Chains()


def _walks(iterable, range=range, type=type):
    """C code is about to walk `iterable`: a range is charged by its length (it costs nothing to make again)."""
    if type(iterable) is range:
        _charge(len(iterable), RANGE_ITEMS_PER_FUEL)


def _chained(result, sources, chains=_chains, run=_run):
    depth = 0
    depths = chains.depths
    for source in sources:
        _walks(source)
        known = depths.get(id(source))
        if known is not None and known[0] is source and known[1] > depth:
            depth = known[1]
    if depth:
        if depth + 1 > MAX_NESTING:
            run.parked.append(result)
            _refuse('recursion', f'iterators nested more than {MAX_NESTING} deep (a zip of a map of …)')
        depths[id(result)] = (result, depth + 1)
    elif any(isinstance(source, _ITERATOR_TYPES) for source in sources):
        depths[id(result)] = (result, 1)
    return result


def _metered(iterable):
    """Spends a step of fuel per item: the sources that C code could walk forever (count, cycle, repeat, iter(f, x))
    or that make items combinatorially (product, permutations…)."""
    return map(_tick, iterable)


def _metered_wide(iterable, tick=_tick, charge=_charge, len=len):
    """As _metered, and an item of n elements costs n / MADE_ITEMS_PER_FUEL more (product(..., repeat=10**6))."""
    for item in iterable:
        tick(item)
        if len(item) >= MADE_ITEMS_PER_FUEL:
            charge(len(item))
        yield item


def _zip(*iterables, strict=False):
    return _chained(zip(*iterables, strict=strict), iterables)


def _map(function, *iterables):
    return _chained(map(function, *iterables), iterables)


def _filter(function, iterable):
    return _chained(filter(function, iterable), (iterable,))


def _enumerate(iterable, start=0):
    return _chained(enumerate(iterable, start), (iterable,))


def _reversed(sequence):
    return _chained(reversed(sequence), (sequence,))


def _iter(source, *sentinel):
    if sentinel:
        return _metered(iter(source, *sentinel))
    return _chained(iter(source), (source,))


def _sorted(iterable, /, *, key=None, reverse=False):
    _walks(iterable)
    if type(iterable) is range:
        return sorted(iterable, key=key, reverse=reverse)
    items = list(iterable)
    _shallow(items)
    return sorted(items, key=key, reverse=reverse)


def _extreme(real):
    def extreme(*args, **kwargs):
        if len(args) != 1:
            _shallow(args)
            return real(*args, **kwargs)
        _walks(args[0])
        if type(args[0]) is range:
            return real(args[0], **kwargs)
        items = list(args[0])
        _shallow(items)
        return real(items, **kwargs)
    extreme.__name__ = real.__name__
    return extreme


def _sum(iterable, /, start=0):
    _walks(iterable)
    if isinstance(start, (list, tuple)):
        # sum(lists, []) copies the growing prefix at every item: quadratic in C. One pass instead, same result.
        items = list(iterable)
        if all(type(item) is type(start) for item in items):
            return start + type(start)(itertools.chain.from_iterable(items))
        return sum(items, start)
    return sum(iterable, start)


def _any(iterable):
    _walks(iterable)
    return any(iterable)


def _all(iterable):
    _walks(iterable)
    return all(iterable)


def _repr(value):
    return repr(_shallow(value))


def _hash(value):
    return hash(_shallow(value))


def _deepcopy(value, memo=None):
    return copy.deepcopy(_shallow(value), memo)


def _ascii(value):
    return ascii(_shallow(value))


def _format(value, spec=''):
    _shallow(value)
    _check_spec(spec)
    return format(value, spec)


def _reduce(function, iterable, *initial):
    return functools.reduce(function, _metered(iterable), *initial)


def _chain(*iterables):
    return _chained(itertools.chain(*iterables), iterables)


_chain.from_iterable = lambda iterables: _chained(itertools.chain.from_iterable(iterables), (iterables,))


def _itertool(real, metered=False, wide=False):
    """An itertools constructor whose iterator counts in chains of iterators, and spends fuel per item where it is a
    source C code could walk without end (metered) or with items of any size (wide)."""
    def tool(*args, **kwargs):
        result = real(*args, **kwargs)
        if wide:
            result = _metered_wide(result)
        elif metered:
            result = _metered(result)
        return _chained(result, args)
    tool.__name__ = real.__name__
    return tool


def _accumulate(iterable, func=None, *, initial=None):
    return _chained(itertools.accumulate(_metered(iterable), func, initial=initial), (iterable,))


def _starmap(function, iterable):
    return _chained(itertools.starmap(function, _metered(iterable)), (iterable,))


def _factorial(n):
    n = operator.index(n)
    if n > 20:
        bits = int(math.lgamma(n + 1) / math.log(2)) + 1 if n < 10**7 else MAX_INT_BITS + 1
        _check_size('bits', bits)
    return math.factorial(n)


def _choose_bits(n, k, perm):
    if not (isinstance(n, int) and isinstance(k, int)) or n < 0 or k < 0 or k > n:
        return 0
    small = k if perm else min(k, n - k)
    bound = small * n.bit_length()
    if bound <= MAX_INT_BITS:
        return bound
    if n > 10**300:
        return bound
    log = math.lgamma(n + 1) - math.lgamma(n - k + 1) - (0 if perm else math.lgamma(k + 1))
    return int(log / math.log(2)) + 1


def _comb(n, k):
    _check_size('bits', _choose_bits(operator.index(n), operator.index(k), perm=False))
    return math.comb(n, k)


def _perm(n, k=None):
    n = operator.index(n)
    _check_size('bits', _choose_bits(n, n if k is None else operator.index(k), perm=True))
    return math.perm(n, k)


def _prod(iterable, /, *, start=1):
    total = start
    for item in _metered(iterable):
        total = _guard_mul(total, item)
    return total


def _lcm(*integers):
    total = 1
    for value in integers:
        total = math.lcm(total, value)
        _check_size('bits', total.bit_length())
    return total


def _sumprod(p, q):
    total = 0
    for a, b in zip(_metered(p), q, strict=True):
        total += _guard_mul(a, b)
    return total


def _imul(a, b):
    _check_mul(a, b)
    a *= b
    return a


def _ipow(a, b):
    _pow_bits(a, b)
    a **= b
    return a


def _ilshift(a, b):
    _lshift_bits(a, b)
    a <<= b
    return a


def _imod(a, b):
    _check_mod(a, b)
    a %= b
    return a


def _compare(real):
    def compare(a, b):
        return real(_shallow(a), b)
    compare.__name__ = real.__name__
    return compare


def _contains(a, b):
    return operator.contains(a, _shallow(b))


def _items_checked(real, position):
    def checked(*args, **kwargs):
        if len(args) > position:
            _shallow(args[position])
        return real(*args, **kwargs)
    checked.__name__ = real.__name__
    return checked


def _heapify(heap):
    _shallow(heap)
    return heapq.heapify(heap)


def _update_wrapper(wrapper, wrapped):
    """functools.update_wrapper with its fixed names only (`assigned=`/`updated=` would copy any attribute by name),
    onto the program's own functions only (it sets attributes on the wrapper)."""
    return functools.update_wrapper(_guard_target(wrapper), wrapped)


def _wraps(wrapped):
    return functools.partial(_update_wrapper, wrapped=wrapped)


def _own_classes_only(decorator):
    """A library decorator that sets attributes on the class it is given (dataclass, total_ordering, final): for the
    program's own classes only, or a library class would be changed for the rest of the job."""
    def guarded(cls=None, /, **options):
        if cls is None:  # @dataclass(order=True): the options first, the class next
            return functools.partial(guarded, **options)
        return decorator(_guard_target(cls), **options)
    guarded.__name__ = decorator.__name__
    return guarded


def _json_dumps(obj, *, skipkeys=False, ensure_ascii=True, check_circular=True, allow_nan=True, cls=None, indent=None, separators=None, default=None, sort_keys=False):
    _shallow(obj)
    if isinstance(indent, int) and indent > MAX_FORMAT_WIDTH or isinstance(indent, str) and len(indent) > MAX_FORMAT_WIDTH:
        _refuse('memory', f'a JSON indent wider than {MAX_FORMAT_WIDTH} is a memory bomb')
    if separators is not None and any(len(part) > 100 for part in separators):
        _refuse('memory', 'JSON separators longer than 100 characters are a memory bomb')
    if cls is not None:
        _refuse('forbidden-builtin', 'json.dumps(cls=...) is not available in the sandbox')
    return json.dumps(obj, skipkeys=skipkeys, ensure_ascii=ensure_ascii, check_circular=check_circular, allow_nan=allow_nan, indent=indent, separators=separators, default=default, sort_keys=sort_keys)


_JSON_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)


def _json_loads(text, *, cls=None, object_hook=None, parse_float=None, parse_int=None, parse_constant=None, object_pairs_hook=None):
    if cls is not None:
        _refuse('forbidden-builtin', 'json.loads(cls=...) is not available in the sandbox')
    if isinstance(text, (bytes, bytearray)):
        text = text.decode('utf-8', 'replace')
    if isinstance(text, str):
        # The decoder recurses in C once per bracket: count the nesting first (outside strings), at C speed.
        brackets = _JSON_STRINGS.sub('', text)
        levels = itertools.accumulate(map(_JSON_NESTING.get, brackets, itertools.repeat(0)))
        if max(levels, default=0) > MAX_NESTING:
            _refuse('recursion', f'the JSON text nests more than {MAX_NESTING} levels')
    return json.loads(text, object_hook=object_hook, parse_float=parse_float, parse_int=parse_int, parse_constant=parse_constant, object_pairs_hook=object_pairs_hook)


_JSON_NESTING = {'[': 1, '{': 1, ']': -1, '}': -1}


# ---- regular expressions: refused when they can backtrack without bound --------------------------------------------

_C = re._constants
_REPEATS = (_C.MAX_REPEAT, _C.MIN_REPEAT)
_SAMPLE = ''.join(map(chr, range(128))) + '\u00a0\u00e9\u00df\u0416\u0663\u4e2d\U0001f600'


def _check_regex(pattern, flags=0, checked={}):
    """Refuses patterns that backtrack exponentially (a variable repeat inside an unbounded one, `(a+)+`,
    `(\\d{1,3})*`; alternatives that can start alike inside an unbounded repeat, `(a|ab)*`) or have huge counts.
    Patterns found safe are remembered (as re's own cache does)."""
    if isinstance(pattern, re.Pattern) or not isinstance(pattern, (str, bytes)):
        return
    key = (type(pattern), pattern, flags)
    if key in checked:
        return
    if len(pattern) > MAX_PATTERN_CHARS:
        _refuse('memory', f'a regular expression of {len(pattern)} characters exceeds the limit of {MAX_PATTERN_CHARS}')
    try:
        parsed = re._parser.parse(pattern, flags if isinstance(flags, int) else 0)
    except (re.error, TypeError, ValueError, OverflowError, RecursionError):
        return  # the real call raises the same error
    sample = _SAMPLE + ''.join(chr(c) for c in _literals(parsed.data))
    if isinstance(pattern, bytes):
        sample = ''.join(ch for ch in sample if ord(ch) < 256).encode('latin-1')
    problem = _regex_problem(parsed.data, parsed.state, sample, inside_unbounded=False, count=1)
    if problem:
        _refuse('fuel', f'the regular expression {pattern[:60]!r} {problem}')
    if len(checked) < MAX_REGEXES_KEPT:
        checked[key] = True


def _literals(data):
    stack, found = [data], set()
    while stack:
        for op, av in stack.pop():
            if op in (_C.LITERAL, _C.NOT_LITERAL):
                found.add(av)
            elif op == _C.IN:
                stack.append([item for item in av if item[0] == _C.LITERAL])
            for sub in _subpatterns(op, av):
                stack.append(sub)
    return found


def _subpatterns(op, av):
    if op in _REPEATS or op == _C.POSSESSIVE_REPEAT:
        return [av[2]]
    if op == _C.SUBPATTERN:
        return [av[3]]
    if op == _C.BRANCH:
        return list(av[1])
    if op in (_C.ASSERT, _C.ASSERT_NOT):
        return [av[1]]
    if op == _C.ATOMIC_GROUP:
        return [av]
    if op == _C.GROUPREF_EXISTS:
        return [part for part in av[1:] if part is not None]
    return []


def _regex_problem(data, state, sample, inside_unbounded, count):
    for op, av in data:
        if op in _REPEATS or op == _C.POSSESSIVE_REPEAT:
            low, high, body = av
            bounded = high != _C.MAXREPEAT
            if low > MAX_REGEX_REPEAT or bounded and count * high > MAX_REGEX_REPEAT:
                return f'repeats more than {MAX_REGEX_REPEAT} times'
            variable = high != low
            if op in _REPEATS and variable and inside_unbounded:
                return 'has a variable repeat inside an unbounded one: it can backtrack exponentially'
            unbounded = op in _REPEATS and variable and (not bounded or high > 1)
            if unbounded and _ambiguous_alternatives(body, state, sample):
                return 'has alternatives that can match alike inside an unbounded repeat: it can backtrack exponentially'
            problem = _regex_problem(body, state, sample, inside_unbounded or unbounded, count * (high if bounded else 1))
            if problem:
                return problem
            continue
        for sub in _subpatterns(op, av):
            problem = _regex_problem(sub, state, sample, inside_unbounded, count)
            if problem:
                return problem
    return None


def _ambiguous_alternatives(body, state, sample):
    """Whether a repeated body can match one text in several ways through an alternation: two alternatives that
    can start alike, or an empty alternative where what else the alternation offers can start a new round
    (`(a|aa)*` is parsed as `(a(|a))*`)."""
    body_first, _ = _first_chars(body, state, sample)
    stack = [body]
    while stack:
        for op, av in stack.pop():
            if op == _C.BRANCH:
                starts = [_first_chars(branch, state, sample) for branch in av[1]]
                for i, (first, _nullable) in enumerate(starts):
                    if any(first & other for other, _ in starts[i + 1:]):
                        return True
                if any(nullable for _, nullable in starts) and frozenset().union(*(first for first, _ in starts)) & body_first:
                    return True
            if op not in _REPEATS:  # nested repeats are checked on their own
                stack.extend(_subpatterns(op, av))
    return False


def _first_chars(data, state, sample):
    """The sample characters a match of `data` can start with (a fixed sample plus the pattern's own literals,
    each tested by compiling the single-character element), and whether `data` can match the empty string."""
    chars = set()
    for op, av in data:
        if op in (_C.LITERAL, _C.NOT_LITERAL, _C.ANY, _C.IN, _C.CATEGORY):
            element = re._compiler.compile(re._parser.SubPattern(state, [(op, av)]), state.flags)
            chars.update(ch for ch in (sample[i:i + 1] for i in range(len(sample))) if element.fullmatch(ch) is not None)
            return frozenset(chars), False
        if op in _REPEATS or op == _C.POSSESSIVE_REPEAT:
            first, nullable = _first_chars(av[2], state, sample)
            chars |= first
            if av[0] > 0 and not nullable:
                return frozenset(chars), False
            continue
        if op in (_C.SUBPATTERN, _C.ATOMIC_GROUP):
            first, nullable = _first_chars(av[3] if op == _C.SUBPATTERN else av, state, sample)
            chars |= first
            if not nullable:
                return frozenset(chars), False
            continue
        if op == _C.BRANCH:
            starts = [_first_chars(branch, state, sample) for branch in av[1]]
            chars.update(*(first for first, _ in starts))
            if not any(nullable for _, nullable in starts):
                return frozenset(chars), False
            continue
        if op in (_C.AT, _C.ASSERT, _C.ASSERT_NOT):
            continue
        return frozenset(sample[i:i + 1] for i in range(len(sample))), True  # a back-reference: anything
    return frozenset(chars), True


def _regex_function(real, pattern_position=0):
    def guarded(*args, **kwargs):
        pattern = args[pattern_position] if len(args) > pattern_position else kwargs.get('pattern')
        flags = kwargs.get('flags', args[-1] if real is re.compile and len(args) > 1 else 0)
        _check_regex(pattern, flags if isinstance(flags, int) else 0)
        return real(*args, **kwargs)
    guarded.__name__ = real.__name__
    return guarded


# The names each module exposes (layer 3): functions and classes that take no attribute or code by string and run
# no annotation; the ones that make big numbers, walk data or iterate in C are replaced by the guards above.
_MODULE_NAMES = {
    'math': 'acos acosh asin asinh atan atan2 atanh cbrt ceil comb copysign cos cosh degrees dist e erf erfc exp exp2 expm1 fabs factorial floor fma fmod frexp fsum gamma gcd hypot inf isclose isfinite isinf isnan isqrt lcm ldexp lgamma log log10 log1p log2 modf nan nextafter perm pi pow prod radians remainder sin sinh sqrt sumprod tan tanh tau trunc ulp',
    'cmath': 'acos acosh asin asinh atan atanh cos cosh e exp inf infj isclose isfinite isinf isnan log log10 nan nanj phase pi polar rect sin sinh sqrt tan tanh tau',
    'itertools': 'accumulate batched chain combinations combinations_with_replacement compress count cycle dropwhile filterfalse groupby islice pairwise permutations product repeat starmap takewhile tee zip_longest',
    'functools': 'cache cached_property cmp_to_key lru_cache partial partialmethod reduce total_ordering update_wrapper wraps',
    'collections': 'ChainMap Counter OrderedDict UserDict UserList UserString defaultdict deque namedtuple',
    'collections.abc': 'AsyncGenerator AsyncIterable AsyncIterator Awaitable Buffer Callable Collection Container Coroutine Generator Hashable ItemsView Iterable Iterator KeysView Mapping MappingView MutableMapping MutableSequence MutableSet Reversible Sequence Set Sized ValuesView',
    'heapq': 'heapify heapify_max heappop heappop_max heappush heappush_max heappushpop heappushpop_max heapreplace heapreplace_max merge nlargest nsmallest',
    'bisect': 'bisect bisect_left bisect_right insort insort_left insort_right',
    'string': 'Template ascii_letters ascii_lowercase ascii_uppercase capwords digits hexdigits octdigits printable punctuation whitespace',
    're': 'A ASCII DOTALL I IGNORECASE M MULTILINE Match NOFLAG Pattern PatternError RegexFlag S U UNICODE VERBOSE X compile error escape findall finditer fullmatch match purge search split sub subn',
    'operator': 'abs add and_ call concat contains countOf delitem eq floordiv ge getitem gt iadd iand iconcat ifloordiv ilshift imatmul imod imul index indexOf inv invert ior ipow irshift is_ is_none is_not is_not_none isub itemgetter itruediv ixor le length_hint lshift lt matmul mod mul ne neg not_ or_ pos pow rshift setitem sub truediv truth xor',
    'typing': 'AbstractSet Annotated Any Callable ClassVar Collection Container Counter DefaultDict Deque Dict Final FrozenSet Generator Generic Hashable ItemsView Iterable Iterator KeysView List Literal Mapping MutableMapping MutableSequence MutableSet NamedTuple Never NoReturn Optional OrderedDict Protocol Reversible Self Sequence Set Sized SupportsAbs SupportsFloat SupportsIndex SupportsInt SupportsRound TYPE_CHECKING Tuple Type TypeAlias TypeVar TypedDict Union ValuesView cast final get_args get_origin overload',
    'dataclasses': 'FrozenInstanceError InitVar KW_ONLY MISSING asdict astuple dataclass field fields is_dataclass replace',
    'fractions': 'Fraction',
    'statistics': 'NormalDist StatisticsError correlation covariance fmean geometric_mean harmonic_mean linear_regression mean median median_grouped median_high median_low mode multimode pstdev pvariance quantiles stdev variance',
    'copy': 'Error copy deepcopy replace',
    'enum': 'Enum Flag IntEnum IntFlag ReprEnum StrEnum auto member nonmember unique verify',
    'array': 'array typecodes',
    'numbers': 'Complex Integral Number Rational Real',
    'json': 'JSONDecodeError dumps loads',
    'textwrap': 'TextWrapper dedent fill indent shorten wrap',
    'unicodedata': 'bidirectional category combining decimal decomposition digit east_asian_width is_normalized lookup mirrored name normalize numeric unidata_version',
}
_MODULE_GUARDS = {
    'math': {'factorial': _factorial, 'comb': _comb, 'perm': _perm, 'prod': _prod, 'lcm': _lcm, 'sumprod': _sumprod},
    'functools': {'reduce': _reduce, 'wraps': _wraps, 'update_wrapper': _update_wrapper, 'total_ordering': _own_classes_only(functools.total_ordering)},
    'dataclasses': {'dataclass': _own_classes_only(dataclasses.dataclass)},
    'typing': {'final': _own_classes_only(typing.final)},
    'copy': {'deepcopy': _deepcopy},
    'itertools': {
        'count': _itertool(itertools.count, metered=True), 'cycle': _itertool(itertools.cycle, metered=True),
        'repeat': _itertool(itertools.repeat, metered=True), 'product': _itertool(itertools.product, wide=True),
        'permutations': _itertool(itertools.permutations, wide=True), 'combinations': _itertool(itertools.combinations, wide=True),
        'combinations_with_replacement': _itertool(itertools.combinations_with_replacement, wide=True),
        'accumulate': _accumulate, 'starmap': _starmap, 'chain': _chain,
        **{name: _itertool(getattr(itertools, name)) for name in ('batched', 'compress', 'dropwhile', 'filterfalse', 'groupby', 'islice', 'pairwise', 'takewhile', 'tee', 'zip_longest')},
    },
    'operator': {
        'mul': _guard_mul, 'imul': _imul, 'pow': _guard_pow, 'ipow': _ipow, 'lshift': _guard_lshift, 'ilshift': _ilshift,
        'mod': _guard_mod, 'imod': _imod, 'contains': _contains, 'countOf': _items_checked(operator.countOf, 1),
        'indexOf': _items_checked(operator.indexOf, 1),
        **{name: _compare(getattr(operator, name)) for name in ('eq', 'ne', 'lt', 'le', 'gt', 'ge')},
    },
    'heapq': {
        'heapify': _heapify, 'heapify_max': _items_checked(heapq.heapify_max, 0), 'heappush': _items_checked(heapq.heappush, 1),
        'heappush_max': _items_checked(heapq.heappush_max, 1), 'heappushpop': _items_checked(heapq.heappushpop, 1),
        'heappushpop_max': _items_checked(heapq.heappushpop_max, 1), 'heapreplace': _items_checked(heapq.heapreplace, 1),
        'heapreplace_max': _items_checked(heapq.heapreplace_max, 1), 'nlargest': _items_checked(heapq.nlargest, 1),
        'nsmallest': _items_checked(heapq.nsmallest, 1),
    },
    'bisect': {name: _items_checked(getattr(bisect, name), 1) for name in _MODULE_NAMES['bisect'].split()},
    're': {name: _regex_function(getattr(re, name)) for name in ('compile', 'search', 'match', 'fullmatch', 'findall', 'finditer', 'sub', 'subn', 'split')},
    'json': {'dumps': _json_dumps, 'loads': _json_loads},
}


def _library_views():
    """name → the attributes of its view, built once; each input gets fresh module objects holding them."""
    views = {}
    for name, names in _MODULE_NAMES.items():
        module = sys.modules[name]
        guards = _MODULE_GUARDS.get(name, {})
        views[name] = {key: guards.get(key, getattr(module, key)) for key in names.split()}
    return views


_MODULE_VIEWS = _library_views()

_BUILTINS_ALLOWED = ('abs bin bool bytearray bytes callable chr classmethod complex dict divmod float frozenset '
                     'hasattr hex int isinstance issubclass len list next object oct ord property round set slice '
                     'staticmethod str super tuple type NotImplemented Ellipsis').split()
_BUILTINS_GUARDED = {
    'all': _all, 'any': _any, 'ascii': _ascii, 'enumerate': _enumerate, 'filter': _filter, 'format': _format, 'iter': _iter, 'map': _map,
    'max': _extreme(max), 'min': _extreme(min), 'pow': _guard_pow, 'repr': _repr, 'reversed': _reversed,
    'range': _guard_range,  # a function, not the type: an alias of it (r = range) must not make unchecked ranges
    'sorted': _sorted, 'sum': _sum, 'zip': _zip, 'hash': _hash,
}
# Refused when called, with the reason: a program that names one by accident gets a verdict that says why.
_BUILTINS_DENIED = ('open exec eval compile input breakpoint help exit quit globals locals vars dir getattr setattr '
                    'delattr memoryview id aiter anext copyright credits license __import__ '
                    'BaseException BaseExceptionGroup SystemExit KeyboardInterrupt GeneratorExit').split()


def _denied_builtin(name, run=_run):
    def stub(*args, **kwargs):
        run.parked.append(args)  # what the program handed over may be data too deep to free safely
        _refuse('forbidden-builtin', f'{name} is not available in the sandbox')
    stub.__name__ = name
    return stub


def _builtins_template():
    safe = {name: getattr(builtins, name) for name in _BUILTINS_ALLOWED}
    safe.update((name, value) for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, Exception))
    safe.update(_BUILTINS_GUARDED)
    safe.update((name, _denied_builtin(name)) for name in _BUILTINS_DENIED)
    safe['__name__'] = 'builtins'
    return safe


_BUILTINS = _builtins_template()
_GUARDS = {GUARD_PREFIX + name: value for name, value in {
    'mul': _guard_mul, 'pow': _guard_pow, 'lshift': _guard_lshift, 'mod': _guard_mod, 'check_mul': _check_mul,
    'check_pow': _check_pow, 'check_lshift': _check_lshift, 'check_mod': _check_mod, 'refuse_target': _guard_refuse_target,
    'shallow': _shallow, 'fstring': _guard_fstring, 'method': _guard_method, 'target': _guard_target,
    'str': _guard_str, 'bytes': _guard_bytes, 'bytearray': _guard_bytearray, 'int': _guard_int,
    'loop_range': _guard_loop_range,
}.items()}
_ITERATOR_TYPES = (zip, map, filter, enumerate, reversed, type(iter([])), type(iter(())), type(iter('')),
                   itertools.chain, itertools.islice, itertools.zip_longest, itertools.accumulate, itertools.starmap,
                   itertools.compress, itertools.dropwhile, itertools.takewhile, itertools.filterfalse,
                   itertools.groupby, itertools.pairwise, itertools.batched, itertools.tee(())[0].__class__,
                   types.GeneratorType)


class _World:
    """One input's world: fresh builtins and module views, its printed text."""

    def __init__(self, run=_run):
        self.printed = []
        self.printed_chars = 0
        self.views = {}
        run.views = []
        safe = dict(_BUILTINS)
        safe['__import__'] = self.import_
        safe['print'] = self.print_
        safe['__build_class__'] = builtins.__build_class__  # `class` statements; the name is refused in source
        self.globals = {'__builtins__': safe, '__name__': PROGRAM_MODULE, **_GUARDS}

    def view(self, name, run=_run):
        view = self.views.get(name)
        if view is None:
            view = types.ModuleType(name)
            vars(view).update(_MODULE_VIEWS[name])
            for child in [key for key in _MODULE_VIEWS if key.startswith(name + '.')]:
                setattr(view, child[len(name) + 1:], self.view(child))
            self.views[name] = view
            run.views.append(view)
        return view

    def import_(self, name, globals=None, locals=None, fromlist=(), level=0):
        if level != 0 or name not in _MODULE_VIEWS:
            _refuse('forbidden-import', f'{"." * level}{name} is not importable')
        if fromlist:
            return self.view(name)
        top = name.split('.')[0]
        return self.view(top if top in _MODULE_VIEWS else name)

    def print_(self, *args, sep=' ', end='\n', file=None, flush=False):
        if file is not None:
            _refuse('forbidden-builtin', 'print(file=...) is not available in the sandbox')
        if sep is None:
            sep = ' '
        if end is None:
            end = '\n'
        if not isinstance(sep, str) or not isinstance(end, str):
            raise TypeError('sep and end must be None or a string')
        text = sep.join(_guard_str(a) for a in args) + end
        self.printed_chars += len(text)
        if self.printed_chars > MAX_PRINT_CHARS:
            _refuse('output-too-large', f'the program printed more than {MAX_PRINT_CHARS} characters')
        self.printed.append(text)


# ---- the attribute names layer 1 allows -----------------------------------------------------------------------------


def _attribute_sets():
    """The public attribute names of the builtin value types and of every class the module views expose (less
    those holding mutable library state, e.g. TextWrapper.unicode_whitespace_trans); the names that reach a frame,
    code or a class's structure; the private names of library classes."""
    sources = [str, bytes, bytearray, int, float, complex, bool, list, tuple, dict, set, frozenset, range, slice,
               type({}.keys()), type({}.values()), type({}.items()), types.GeneratorType, property, functools.partial]
    sources += [value for value in _BUILTINS.values() if isinstance(value, type)]
    for module, names in _MODULE_VIEWS.items():  # the classes behind the guards too (itertools.chain.from_iterable)
        sources += [getattr(sys.modules[module], name) for name in names if isinstance(getattr(sys.modules[module], name), type)]
    sources += [type(re.compile('')), type(re.match('', '')), type(textwrap.TextWrapper()), type(json.JSONDecodeError('', '', 0))]
    instance_names = set(vars(textwrap.TextWrapper())) | set(vars(json.JSONDecodeError('', '', 0)))
    safe, private = set(instance_names), set()
    for kind in sources:
        for name in dir(kind):
            if name.startswith('_'):
                private.add(name)
                continue
            try:
                value = next(vars(base)[name] for base in kind.__mro__ if name in vars(base))
            except StopIteration:
                value = None
            if not isinstance(value, (dict, list, set, bytearray, collections.deque)):
                safe.add(name)
    for names in _MODULE_VIEWS.values():
        safe.update(names)
    safe.update(name.split('.')[-1] for name in _MODULE_VIEWS)
    reaching = set()
    for kind in (types.FrameType, types.CodeType, types.TracebackType, types.CellType, types.FunctionType, types.MethodType, types.ModuleType, type):
        reaching.update(name for name in dir(kind) if not name.startswith('_'))
    for kind in (types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType):
        reaching.update(name for name in dir(kind) if name[:3] in ('gi_', 'cr_', 'ag_'))
    dangerous = (reaching - safe) | {'mro', 'gi_frame', 'gi_code', 'gi_yieldfrom', 'tb_frame', 'f_back', 'f_globals', 'f_locals', 'f_builtins', 'f_code'}
    return frozenset(safe - dangerous), frozenset(dangerous), frozenset(private - READABLE_PRIVATE)


_SAFE_ATTRIBUTES, _DANGEROUS_ATTRIBUTES, _LIBRARY_PRIVATE = _attribute_sets()


# ---- the library, sealed where a program could change it for the rest of the job ---------------------------------


class _Running:
    __slots__ = ('program',)

    def __init__(self):
        self.program = False  # True while a program's code runs: the seals refuse only then


_running = _Running()


def _seal_library():
    """Library entry points that would keep a program's change or do unbounded work for it: ABC registration is
    refused while a program runs (outside a run, e.g. in executor.ts's tests, it works as it always did), a
    string.Template subclass's pattern is checked as re's functions check theirs, Fraction's parser is bounded."""
    register = abc.ABCMeta.register

    def guarded_register(cls, subclass, running=_running):
        if running.program and cls.__dict__.get('__module__') != PROGRAM_MODULE:
            _refuse('forbidden-attribute', f'registering a virtual subclass of {cls.__name__} would change a library class for the rest of the job')
        return register(cls, subclass)

    abc.ABCMeta.register = guarded_register

    init_subclass = string.Template.__dict__['__init_subclass__'].__func__

    def guarded_init_subclass(cls):
        init_subclass(cls)
        _check_regex(cls.pattern.pattern, cls.pattern.flags)

    string.Template.__init_subclass__ = classmethod(guarded_init_subclass)

    # Fraction('1e999999999') computes 10 ** 999999999 in Python; its parser takes exponents of four digits at most
    # (the rest of a Fraction's text is bounded by int()'s own limit of 4300 digits).
    rational = fractions._RATIONAL_FORMAT
    bounded = rational.pattern.replace(r'(?P<exp>[-+]?\d+(_\d+)*)', r'(?P<exp>[-+]?\d{1,4})')
    if bounded == rational.pattern:
        raise RuntimeError("sandbox.py: fractions' parser has changed; its exponents are unbounded")
    fractions._RATIONAL_FORMAT = re.compile(bounded, rational.flags)


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
    for value in frame_of(1).f_locals.values():
        if nestable[type(value)] and _too_deep(value):
            run.parked.append(value)


_monitor.use_tool_id(TOOL_ID, 'populora-fuel')
_monitor.register_callback(TOOL_ID, _monitor.events.LINE, _burn)
_monitor.register_callback(TOOL_ID, _monitor.events.JUMP, _burn)
_monitor.register_callback(TOOL_ID, _monitor.events.EXCEPTION_HANDLED, _caught)
_monitor.register_callback(TOOL_ID, _monitor.events.PY_UNWIND, _unwound)
_WHILE_RUNNING = _monitor.events.EXCEPTION_HANDLED | _monitor.events.PY_UNWIND  # global events, only while a program runs


def _meter(code):
    """Fuel is spent by this code object and every function nested in it: the program's own code only."""
    stack = [code]
    while stack:
        code = stack.pop()
        _monitor.set_local_events(TOOL_ID, code, _monitor.events.LINE | _monitor.events.JUMP)
        stack.extend(const for const in code.co_consts if isinstance(const, types.CodeType))


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
    if run.refusal is not None:
        raise Refused(*run.refusal)
    if run.used > run.limit:
        _refuse('fuel', f'the program took more than {run.limit} steps (lines, jumps and items made in C)')
    if peak > MAX_MEMORY_BYTES:
        _refuse('memory', f'the program used more than {MAX_MEMORY_BYTES >> 20} MiB')
    return value, world.printed


def _record(reason, detail, run=_run):
    if run.refusal is None:
        run.refusal = (reason, detail)


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


# ---- layer 4: the verdict, by code the program cannot reach -------------------------------------------------------

_INF = float('inf')


def _scalar_text(value, kind, int_repr=int.__repr__, float_repr=float.__repr__, complex_repr=complex.__repr__, str_repr=str.__repr__, bytes_repr=bytes.__repr__, inf=_INF):
    if kind is str:
        return str_repr(value)
    if kind is int:
        if value.bit_length() > 3.33 * MAX_RESULT_CHARS:
            raise Refused('output-too-large', f'an integer of {value.bit_length()} bits has more digits than the limit of {MAX_RESULT_CHARS}')
        try:
            return int_repr(value)
        except ValueError:  # more than sys.get_int_max_str_digits() digits
            raise Refused('output-too-large', 'an integer of more than 4300 digits') from None
    if kind is bool:
        return 'True' if value else 'False'
    if kind is float:
        if value != value or value == inf or value == -inf:
            raise Refused('not-literal', f'{float_repr(value)} is not a Python literal')
        return float_repr(value)
    if kind is type(None):
        return 'None'
    if kind is bytes:
        return bytes_repr(value)
    if kind is complex:
        if any(part != part or part in (inf, -inf) for part in (value.real, value.imag)):
            raise Refused('not-literal', f'{complex_repr(value)} is not a Python literal')
        return complex_repr(value)
    return None


_SCALAR_KINDS = frozenset({str, int, bool, float, type(None), bytes, complex})
_CONTAINER_KINDS = frozenset({list, tuple, dict, set})


def _canonical(root, sort=False, limit=MAX_RESULT_CHARS, type=type, id=id, len=len, iter=iter, sorted=sorted, chain=itertools.chain.from_iterable, scalars=_SCALAR_KINDS, containers=_CONTAINER_KINDS, run=_run):
    """The text of a value made of exact builtin types only (no subclass, nothing of the program's), walked
    iteratively: repr's text, or with sort=True the form two equal values share (set items and dict entries in
    sorted order). Refused: other types, a container holding itself, more than MAX_NESTING levels, more than
    `limit` characters."""
    kind = type(root)
    if kind in scalars:
        text = _scalar_text(root, kind)
        if len(text) > limit:
            raise Refused('output-too-large', f'the result has {len(text)} characters; the limit is {limit}')
        return text
    if kind not in containers:
        raise Refused('not-literal', f'the result holds a {kind.__name__}, which is not a Python literal')
    chars = 0
    on_path = {id(root)}
    stack = [(root, kind, iter(chain(root.items())) if kind is dict else iter(root), [])]
    while True:
        value, kind, items, parts = stack[-1]
        for item in items:
            item_kind = type(item)
            if item_kind in scalars:
                text = _scalar_text(item, item_kind)
                chars += len(text) + 2
                if chars > limit:
                    raise Refused('output-too-large', f'the result has more than {limit} characters')
                parts.append(text)
                continue
            if item_kind not in containers:
                raise Refused('not-literal', f'the result holds a {item_kind.__name__}, which is not a Python literal')
            if id(item) in on_path:
                raise Refused('not-literal', 'the result contains itself')
            if len(stack) >= MAX_NESTING:
                run.parked.append(root)  # freeing it would recurse in C as deep as it nests
                raise Refused('recursion', f'the result nests more than {MAX_NESTING} levels')
            chars += 2
            on_path.add(id(item))
            stack.append((item, item_kind, iter(chain(item.items())) if item_kind is dict else iter(item), []))
            break
        else:
            stack.pop()
            on_path.discard(id(value))
            if kind is dict:
                entries = [f'{parts[i]}: {parts[i + 1]}' for i in range(0, len(parts), 2)]
                text = '{' + ', '.join(sorted(entries) if sort else entries) + '}'
            elif kind is list:
                text = '[' + ', '.join(parts) + ']'
            elif kind is tuple:
                text = '(' + parts[0] + ',)' if len(parts) == 1 else '(' + ', '.join(parts) + ')'
            else:
                text = '{' + ', '.join(sorted(parts) if sort else parts) + '}' if parts else 'set()'
            if not stack:
                return text
            stack[-1][3].append(text)


def _type_name(value, depth=0, type=type, sorted=sorted):
    """A literal's type with its element types two levels deep: list[int], dict[str,list[int]], tuple[int|str]."""
    name = type(value).__name__
    if depth >= 2 or type(value) not in _CONTAINER_KINDS or not value:
        return name
    if type(value) is dict:
        keys = '|'.join(sorted({_type_name(k, depth + 1) for k in value}))
        return f'dict[{keys},{"|".join(sorted({_type_name(v, depth + 1) for v in value.values()}))}]'
    return f'{name}[{"|".join(sorted({_type_name(item, depth + 1) for item in value}))}]'


_LITERAL_CONSTANTS = frozenset({int, float, complex, str, bytes, bool, type(None)})


def _literal(text, what, compile=compile, only_ast=ast.PyCF_ONLY_AST, type=type):
    """A Python literal's value, parsed outside the program's reach: the parser, then an iterative walk that accepts
    what ast.literal_eval accepts (constants, list, tuple, set, dict, set(), signed numbers, complex sums)."""
    if len(text) > MAX_INPUT_CHARS:
        raise Refused(f'bad-{what}', f'the {what} has {len(text)} characters; the limit is {MAX_INPUT_CHARS}')
    try:
        tree = compile(text, '<literal>', 'eval', only_ast)
    except SyntaxError as error:
        if 'too many nested parentheses' in str(error.msg):
            raise Refused('recursion', f'the {what} nests more than the parser allows') from None
        raise Refused(f'bad-{what}', f'{text[:80]!r} is not a Python literal ({error.msg})') from None
    except (ValueError, MemoryError, RecursionError, OverflowError) as error:
        raise Refused(f'bad-{what}', f'{text[:80]!r} is not a Python literal ({type(error).__name__})') from None
    return _literal_value(tree.body, text, what)


def _literal_value(root, text, what):
    results = []
    stack = [(root, False, 0)]
    while stack:
        node, ready, depth = stack.pop()
        kind = type(node)
        if kind is ast.Constant:
            if type(node.value) not in _LITERAL_CONSTANTS:
                raise Refused(f'bad-{what}', f'{text[:80]!r} is not a Python literal')
            if type(node.value) is int and node.value.bit_length() > MAX_INT_BITS:
                raise Refused(f'bad-{what}', f'an integer of more than {MAX_INT_BITS} bits')
            results.append(node.value)
            continue
        if depth > MAX_NESTING:
            raise Refused('recursion', f'the {what} nests more than {MAX_NESTING} levels')
        if kind in (ast.List, ast.Tuple, ast.Set):
            parts = node.elts
        elif kind is ast.Dict:
            if any(key is None for key in node.keys):
                raise Refused(f'bad-{what}', f'{text[:80]!r} is not a Python literal (a ** in a dict)')
            parts = [part for pair in zip(node.keys, node.values) for part in pair]
        elif kind is ast.UnaryOp and type(node.op) in (ast.USub, ast.UAdd) and type(node.operand) is ast.Constant and type(node.operand.value) in (int, float, complex):
            value = node.operand.value
            results.append(-value if type(node.op) is ast.USub else +value)
            continue
        elif kind is ast.BinOp and type(node.op) in (ast.Add, ast.Sub) and type(node.right) is ast.Constant and type(node.right.value) is complex:
            parts = [node.left, node.right]
        elif kind is ast.Call and type(node.func) is ast.Name and node.func.id == 'set' and not node.args and not node.keywords:
            results.append(set())
            continue
        else:
            raise Refused(f'bad-{what}', f'{text[:80]!r} is not a Python literal')
        if not ready:
            stack.append((node, True, depth))
            stack.extend((part, False, depth + 1) for part in reversed(parts))
            continue
        values = results[len(results) - len(parts):] if parts else []
        del results[len(results) - len(parts):]
        try:
            if kind is ast.List:
                results.append(values)
            elif kind is ast.Tuple:
                results.append(tuple(values))
            elif kind is ast.Set:
                results.append(set(values))
            elif kind is ast.Dict:
                results.append(dict(zip(values[::2], values[1::2])))
            else:
                left, right = values
                if type(left) not in (int, float) or type(left) is bool:
                    raise TypeError
                results.append(left + right if type(node.op) is ast.Add else left - right)
        except TypeError:  # an unhashable key or item, a sum that is not a complex literal
            raise Refused(f'bad-{what}', f'{text[:80]!r} is not a Python literal') from None
    return results[0]


def _arguments(text):
    """An input's arguments: `'ab', 3` or `f('ab', 3)`, read as the argument list of a call (a trailing comma is
    one argument, as in Python)."""
    text = text.strip()
    if text.startswith('f(') and text.endswith(')'):
        text = text[2:-1]
    try:
        tree = compile(f'f({text}\n)', '<input>', 'eval', ast.PyCF_ONLY_AST) if len(text) <= MAX_INPUT_CHARS else None
    except SyntaxError as error:
        if 'too many nested parentheses' in str(error.msg):
            raise Refused('recursion', 'the input nests more than the parser allows') from None
        raise Refused('bad-input', f'{text[:80]!r} is not a list of Python literals ({error.msg})') from None
    except (ValueError, MemoryError, RecursionError, OverflowError) as error:
        raise Refused('bad-input', f'{text[:80]!r} is not a list of Python literals ({type(error).__name__})') from None
    call = tree.body if tree is not None else None
    if type(call) is not ast.Call or type(call.func) is not ast.Name or call.func.id != 'f' or call.keywords or any(type(arg) is ast.Starred for arg in call.args):
        raise Refused('bad-input', f'{text[:80]!r} is not a list of Python literals')
    return tuple(_literal_value(arg, text, 'input') for arg in call.args)


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


def run(source, inputs_json, fuel, run_state=_run):
    """Runs the program once per input (each in a fresh world) within `fuel` steps in all."""
    answer = {'ok': True, 'outputs': [], 'printed': '', 'fuel': 0}
    run_state.used, run_state.limit, run_state.refusal = 0, fuel, None
    try:
        code, metrics = _compile(source)
        answer.update(metrics=metrics, inputTypes=[], outputTypes=[])
        _meter(code)
        for text in _decode(inputs_json):
            arguments = _arguments(text)
            answer['inputTypes'].append(', '.join(_type_name(a) for a in arguments))
            value, printed = _call(code, arguments)
            answer['outputs'].append(_canonical(value))
            answer['outputTypes'].append(_type_name(value))
            answer['printed'] += ''.join(printed)
    except Refused as refusal:
        reason, detail = run_state.refusal or (refusal.reason, refusal.detail)
        answer = {'ok': False, 'reason': reason, 'detail': detail, 'fuel': 0, **({'metrics': answer['metrics']} if 'metrics' in answer else {})}
    answer['fuel'] = run_state.used
    return _json(answer)


def same_value(a, b):
    """Two texts name the same Python value: both parsed as literals, compared as canonical texts of exact types
    ("[1, 2]" is "[1,2]", "{2, 1}" is "{1, 2}"; 1 is not 1.0 nor True)."""
    try:
        return _json(_canonical(_literal(a, 'output'), sort=True) == _canonical(_literal(b, 'output'), sort=True))
    except Refused:
        return _json(False)


_ballast = []


def perturb(seed):
    """Shifts where the next run's objects land, so that id()-dependent orders differ between validation runs."""
    _ballast.clear()
    _ballast.extend([object() for _ in range(17 + seed % 101)] + [[0] * (seed % 13 + 1) for _ in range(7)])


# ---- load: warm what imports lazily, then close the exits ---------------------------------------------------------

_CODECS = ('utf-8', 'utf-8-sig', 'ascii', 'latin-1', 'utf-16', 'utf-16-le', 'utf-16-be', 'utf-32', 'utf-32-le',
           'utf-32-be', 'cp1252', 'cp437', 'unicode_escape', 'raw_unicode_escape', 'idna', 'punycode', 'rot13',
           'hex', 'base64', 'utf-7')
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
    for name in _CODECS:
        codecs.lookup(name)
    answer = json.loads(run(_SELF_TEST, '["\'abc de\'"]', 1_000_000))
    if not answer['ok']:
        raise RuntimeError(f'sandbox.py: its self-test was refused: {answer["reason"]}: {answer["detail"]}')


_seal_library()
_warm_up()
_close_javascript()
_close_imports()
gc.collect()
gc.freeze()  # what load made is never collected: a collection after each run walks only what that run made
gc.disable()  # collections happen while a program runs, where fuel counts whatever finalizers they run
