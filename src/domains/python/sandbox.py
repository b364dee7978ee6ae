# The code domain's sandbox: runs a task's program inside CPython compiled to WebAssembly (Pyodide), one
# interpreter per verifier worker, reused across programs and reset between them. Loaded once per worker by
# executor.ts, which calls `check`, `run`, `same_value` and `reset`; every answer is a JSON string.
#
# Layers, each enough on its own for the common escapes, together for the rest:
#   1. the source is parsed and refused before it runs: no attribute that starts with "_" (the road to
#      __globals__, __subclasses__, __builtins__), no frame or code attribute, no dunder name, no import outside
#      ALLOWED_MODULES, no bare `except:` or `except BaseException` (they would swallow the limits below);
#   2. it runs with a fresh globals dict whose builtins are a copy without open/exec/eval/compile/getattr/…: each
#      of those is a stub that refuses at call time; imports go through a guard that admits only the modules of
#      ALLOWED_MODULES, each as a fresh public view (no private names, no module-valued attributes);
#   3. the interpreter itself reaches nothing: no host folder is mounted, `js` is an empty object (executor.ts
#      loads Pyodide with empty jsglobals and removes the file-system back doors on the JavaScript side).
# Limits are counted, never timed (DESIGN.md rule 5): fuel is the number of LINE and JUMP events of the program's
# own code (sys.monitoring, so library code costs nothing and a one-line `while True: pass` still burns fuel),
# recursion is capped by the interpreter's recursion limit, sequences built by `*`, integers by `**`/`<<` and
# ranges are capped before they are made, memory by the peak that tracemalloc counts (executor.ts caps the heap, and
# counts a refused growth as this limit even if the program caught the MemoryError), the result's repr and the
# printed text are capped in characters.

import ast
import builtins
import hashlib
import json
import sys
import tracemalloc
import types

MAX_RECURSION = 200  # frames of the program's own calls, above the harness's
MAX_ITEMS = 1_000_000  # elements of a str/list/tuple/bytes built by `*`
MAX_INT_BITS = 100_000  # bits of an integer built by `**` or `<<`
MAX_RANGE = 10_000_000  # items of a range: C code (sum, list, sorted) walks it without spending fuel
MAX_MEMORY_BYTES = 64 << 20  # peak of the Python allocations of one run (the heap cap is far above it)
MAX_RESULT_CHARS = 10_000  # repr of the returned value
MAX_PRINT_CHARS = 10_000  # text printed by the program (kept only for the determinism check)

ALLOWED_MODULES = {
    'math', 'cmath', 'itertools', 'functools', 'collections', 'collections.abc', 'heapq', 'bisect', 'string',
    're', 'operator', 'typing', 'dataclasses', 'fractions', 'statistics', 'copy', 'enum', 'array', 'numbers',
    'json', 'textwrap', 'unicodedata',
}
# Public names that still lead out: attribute lookup by string, and string.Formatter's get_field (which walks
# "0.__class__.__base__…" with getattr).
DENIED_MODULE_NAMES = {'operator': {'attrgetter', 'methodcaller'}, 'string': {'Formatter'}}
DENIED_BUILTINS = {
    'open', 'exec', 'eval', 'compile', 'input', 'breakpoint', 'help', 'exit', 'quit', 'globals', 'locals', 'vars',
    'getattr', 'setattr', 'delattr', 'memoryview', 'id', 'hash', '__import__', '__build_class__', 'copyright',
    'credits', 'license', 'BaseException', 'BaseExceptionGroup', 'SystemExit', 'KeyboardInterrupt',
    'GeneratorExit',
}
FRAME_ATTRIBUTES = {
    'gi_frame', 'gi_code', 'gi_yieldfrom', 'gi_suspended', 'cr_frame', 'cr_code', 'cr_await', 'ag_frame', 'ag_code',
    'ag_await', 'f_back', 'f_globals', 'f_locals', 'f_builtins', 'f_code', 'f_trace', 'tb_frame', 'tb_next',
    'co_code', 'co_consts', 'co_names', 'func_globals', 'mro',
}
SAFE_DUNDER_ATTRIBUTES = {'__init__', '__name__'}
# Refused in the source too: naming them in an `except` clause would catch the sandbox's own refusals.
UNCATCHABLE = {'BaseException', 'BaseExceptionGroup', 'SystemExit', 'KeyboardInterrupt', 'GeneratorExit'}
TOOL_ID = 3  # sys.monitoring tool slot for fuel (0-2 and 5 are reserved for debuggers, coverage, profilers)


class Refused(BaseException):
    """A limit or a sandbox rule stopped the program. BaseException: `except Exception` cannot swallow it."""

    def __init__(self, reason, detail):
        super().__init__(f'{reason}: {detail}')
        self.reason = reason
        self.detail = detail


# ---- layer 1: the source -------------------------------------------------------------------------------------


def _refuse_node(node):
    if isinstance(node, ast.Attribute):
        name = node.attr
        if (name.startswith('_') and name not in SAFE_DUNDER_ATTRIBUTES) or name in FRAME_ATTRIBUTES:
            return 'forbidden-attribute', f'.{name} (line {node.lineno}) is out of the sandbox\'s reach'
    if isinstance(node, ast.Name) and (node.id.startswith(('__', '_guard_')) or node.id in UNCATCHABLE):
        return 'forbidden-builtin', f'{node.id} (line {node.lineno}) is not available in the sandbox'
    if isinstance(node, ast.ExceptHandler) and node.type is None:
        return 'forbidden-syntax', f'a bare "except:" (line {node.lineno}) would swallow the sandbox\'s limits; catch Exception'
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        for name in _imported_modules(node):
            if name not in ALLOWED_MODULES:
                return 'forbidden-import', f'{name} (line {node.lineno}) is not importable; allowed: {", ".join(sorted(ALLOWED_MODULES))}'
    return None


def _imported_modules(node):
    if isinstance(node, ast.ImportFrom):
        return [('.' * node.level) + (node.module or '')]
    return [alias.name for alias in node.names]


class _Guarded(ast.NodeTransformer):
    """Routes `a * b`, `a ** b`, `a << b` and `range(...)` through size checks: a memory bomb, or a loop in C over
    a huge range, is one call that spends no fuel."""

    GUARDS = {ast.Mult: '_guard_mul', ast.Pow: '_guard_pow', ast.LShift: '_guard_lshift'}

    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == 'range':
            node.func = ast.copy_location(ast.Name('_guard_range', ast.Load()), node.func)
        return node

    def visit_BinOp(self, node):
        self.generic_visit(node)
        guard = self.GUARDS.get(type(node.op))
        if guard is None:
            return node
        return ast.copy_location(ast.Call(ast.Name(guard, ast.Load()), [node.left, node.right], []), node)

    def visit_AugAssign(self, node):
        self.generic_visit(node)
        guard = self.GUARDS.get(type(node.op))
        if guard is None:
            return node
        target = node.target
        load = ast.Name(target.id, ast.Load()) if isinstance(target, ast.Name) else None
        if load is None:  # x[i] *= k, x.a *= k: evaluate the target twice only when it is a plain name
            return node
        call = ast.Call(ast.Name(guard, ast.Load()), [load, node.value], [])
        return ast.copy_location(ast.Assign([target], call), node)


def _metrics(tree):
    nodes = 0
    branches = 0
    depth = 0
    stack = [(tree, 1)]
    while stack:
        node, level = stack.pop()
        nodes += 1
        depth = max(depth, level)
        if isinstance(node, (ast.If, ast.For, ast.While, ast.IfExp, ast.ExceptHandler, ast.comprehension, ast.match_case, ast.Assert)):
            branches += 1 + (len(node.ifs) if isinstance(node, ast.comprehension) else 0)
        elif isinstance(node, ast.BoolOp):
            branches += len(node.values) - 1
        stack.extend((child, level + 1) for child in ast.iter_child_nodes(node))
    normal = ast.dump(tree, annotate_fields=False)  # formatting and comments do not make a program distinct
    return {'nodes': nodes, 'depth': depth, 'cyclomatic': 1 + branches, 'hash': hashlib.sha256(normal.encode()).hexdigest()[:16]}


def _compile(source):
    try:
        tree = ast.parse(source, '<program>')
    except SyntaxError as error:
        raise Refused('syntax', f'{error.msg} (line {error.lineno})') from None
    for node in ast.walk(tree):
        refusal = _refuse_node(node)
        if refusal:
            raise Refused(*refusal)
    if not any(isinstance(node, ast.FunctionDef) and node.name == 'f' for node in tree.body):
        raise Refused('no-function', 'the program must define a top-level function f')
    metrics = _metrics(tree)
    code = compile(ast.fix_missing_locations(_Guarded().visit(tree)), '<program>', 'exec')
    return code, metrics


# ---- layer 2: the program's world ----------------------------------------------------------------------------


def _guard_mul(a, b):
    for seq, n in ((a, b), (b, a)):
        if isinstance(seq, (str, bytes, bytearray, list, tuple)) and isinstance(n, int) and len(seq) * n > MAX_ITEMS:
            raise Refused('memory', f'a sequence of {len(seq) * n} items exceeds the limit of {MAX_ITEMS}')
    return a * b


def _guard_pow(a, b, modulo=None):
    if modulo is None and isinstance(a, int) and isinstance(b, int) and b > 0 and abs(a) > 1 and a.bit_length() * b > MAX_INT_BITS:
        raise Refused('memory', f'an integer of about {a.bit_length() * b} bits exceeds the limit of {MAX_INT_BITS}')
    return pow(a, b) if modulo is None else pow(a, b, modulo)


def _guard_lshift(a, b):
    if isinstance(a, int) and isinstance(b, int) and a != 0 and a.bit_length() + b > MAX_INT_BITS:
        raise Refused('memory', f'an integer of about {a.bit_length() + b} bits exceeds the limit of {MAX_INT_BITS}')
    return a << b


def _guard_range(*args):
    items = range(*args)
    count = max(0, (items.stop - items.start + items.step - (1 if items.step > 0 else -1)) // items.step)  # len() overflows on wasm32
    if count > MAX_RANGE:
        raise Refused('fuel', f'a range of {count} items exceeds the limit of {MAX_RANGE} (code in C would walk it without spending fuel)')
    return items


def _denied_builtin(name):
    def stub(*args, **kwargs):
        raise Refused('forbidden-builtin', f'{name} is not available in the sandbox')
    return stub


def _module_view(name, real):
    """A fresh module holding the public, non-module attributes of `real` (allowed submodules as views too)."""
    view = types.ModuleType(name)
    denied = DENIED_MODULE_NAMES.get(name, set())
    for key, value in vars(real).items():
        if key.startswith('_') or key in denied:
            continue
        if isinstance(value, types.ModuleType):
            child = f'{name}.{key}'
            if child in ALLOWED_MODULES:
                setattr(view, key, _module_view(child, value))
            continue
        setattr(view, key, value)
    return view


class _Program:
    """One run's world: its builtins, its module views, its printed text."""

    def __init__(self):
        self.printed = []
        self.printed_chars = 0
        self.views = {}
        safe = {k: v for k, v in vars(builtins).items() if not k.startswith('_') or k in ('__build_class__', '__name__')}
        for name in DENIED_BUILTINS:
            safe[name] = _denied_builtin(name)
        safe['__build_class__'] = builtins.__build_class__  # `class` statements need it; the name is refused in source
        safe['__import__'] = self.import_
        safe['print'] = self.print_
        safe['pow'] = _guard_pow
        self.globals = {'__builtins__': safe, '__name__': 'program', '_guard_mul': _guard_mul, '_guard_pow': _guard_pow, '_guard_lshift': _guard_lshift, '_guard_range': _guard_range}

    def import_(self, name, globals=None, locals=None, fromlist=(), level=0):
        if level != 0 or name not in ALLOWED_MODULES:
            raise Refused('forbidden-import', f'{"." * level}{name} is not importable')
        top = name.split('.')[0] if not fromlist else name
        if top not in self.views:
            __import__(top)
            self.views[top] = _module_view(top, sys.modules[top])
        return self.views[top]

    def print_(self, *args, sep=' ', end='\n', **_):
        text = sep.join(str(a) for a in args) + end
        self.printed_chars += len(text)
        if self.printed_chars > MAX_PRINT_CHARS:
            raise Refused('output-too-large', f'the program printed more than {MAX_PRINT_CHARS} characters')
        self.printed.append(text)


# ---- fuel ------------------------------------------------------------------------------------------------------

_fuel = {'used': 0, 'limit': 0}


def _burn(*_):
    _fuel['used'] += 1
    if _fuel['used'] > _fuel['limit']:
        raise Refused('fuel', f'the program took more than {_fuel["limit"]} steps (lines and jumps)')


_monitor = sys.monitoring
_monitor.use_tool_id(TOOL_ID, 'populora-fuel')
_monitor.register_callback(TOOL_ID, _monitor.events.LINE, _burn)
_monitor.register_callback(TOOL_ID, _monitor.events.JUMP, _burn)


def _meter(code):
    """Fuel is spent by this code object and every function nested in it: the program's own code only."""
    _monitor.set_local_events(TOOL_ID, code, _monitor.events.LINE | _monitor.events.JUMP)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _meter(const)


# ---- shared state: what a program could change that outlives it ------------------------------------------------


def _shared_objects():
    """Classes and functions of the allowed modules: a program can set attributes on them through a view."""
    for name in sorted(ALLOWED_MODULES):
        __import__(name)
        for key, value in sorted(vars(sys.modules[name]).items()):
            if not key.startswith('_') and isinstance(value, (type, types.FunctionType)) and hasattr(value, '__dict__'):
                yield value


_SNAPSHOT = [(obj, dict(vars(obj))) for obj in _shared_objects()]


def reset():
    """Puts back every class and function attribute a program added, changed or removed."""
    restored = 0
    for obj, saved in _SNAPSHOT:
        current = vars(obj)
        if len(current) == len(saved) and all(current.get(k, saved) is v for k, v in saved.items()):
            continue
        restored += 1
        for key in [k for k in current if k not in saved]:
            delattr(obj, key) if isinstance(obj, type) else current.pop(key)
        for key, value in saved.items():
            if current.get(key, saved) is not value:
                setattr(obj, key, value) if isinstance(obj, type) else current.__setitem__(key, value)
    return restored


# ---- entry points ------------------------------------------------------------------------------------------------


def _literal(text, what):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as error:
        raise Refused('bad-' + what, f'{text[:80]!r} is not a Python literal ({type(error).__name__})') from None


def _arguments(text):
    text = text.strip()
    if text.startswith('f(') and text.endswith(')'):
        text = text[2:-1]
    if not text:
        return ()
    return _literal(f'({text},)', 'input')


def _result(value):
    try:
        text = repr(value)
    except RecursionError:
        raise Refused('output-too-large', 'the result is nested too deeply to print') from None
    except Exception as error:  # a __repr__ of the program's
        raise Refused('not-literal', f'the result cannot be printed ({type(error).__name__})') from None
    if len(text) > MAX_RESULT_CHARS:
        raise Refused('output-too-large', f'the result\'s repr has {len(text)} characters; the limit is {MAX_RESULT_CHARS}')
    try:
        same = ast.literal_eval(text) == value
    except Exception:  # not a literal, or an __eq__ of the program's that fails
        same = False
    if not same:
        raise Refused('not-literal', f'the result {text[:80]} is not a Python literal that compares equal to itself')
    return text


def _type_name(value, depth=0):
    """A literal's type with its element types two levels deep: list[int], dict[str,list[int]], tuple[int|str]."""
    name = type(value).__name__
    if depth >= 2 or not isinstance(value, (list, tuple, set, frozenset, dict)) or not value:
        return name
    if isinstance(value, dict):
        keys = '|'.join(sorted({_type_name(k, depth + 1) for k in value}))
        return f'dict[{keys},{"|".join(sorted({_type_name(v, depth + 1) for v in value.values()}))}]'
    return f'{name}[{"|".join(sorted({_type_name(item, depth + 1) for item in value}))}]'


def check(source):
    """Static checks only: the refusal of layer 1, or the program's metrics."""
    try:
        return json.dumps({'ok': True, 'metrics': _compile(source)[1]})
    except Refused as refusal:
        return json.dumps({'ok': False, 'reason': refusal.reason, 'detail': refusal.detail})


def run(source, inputs_json, fuel):
    """Runs the program once per input (each in a fresh world) within `fuel` steps in all."""
    answer = {'ok': True, 'outputs': [], 'printed': '', 'fuel': 0}
    limit = sys.getrecursionlimit()
    _fuel.update(used=0, limit=fuel)
    try:
        code, metrics = _compile(source)
        answer.update(metrics=metrics, inputTypes=[], outputTypes=[])
        _meter(code)
        sys.setrecursionlimit(len(_stack()) + MAX_RECURSION)
        for text in json.loads(inputs_json):
            arguments = _arguments(text)
            answer['inputTypes'].append(', '.join(_type_name(a) for a in arguments))
            program = _Program()
            value = _call(code, program, arguments)
            answer['outputs'].append(_result(value))
            answer['outputTypes'].append(_type_name(value))
            answer['printed'] += ''.join(program.printed)
    except Refused as refusal:
        answer.update(ok=False, reason=refusal.reason, detail=refusal.detail)
    finally:
        sys.setrecursionlimit(limit)
        answer['fuel'] = _fuel['used']
        answer['restored'] = reset()
    return json.dumps(answer)


def _call(code, program, arguments):
    """The program's own code: defines f, calls it. Its errors are verdicts; errors of this file are not."""
    tracemalloc.start()  # traced only while the program runs: the peak checked below is its own
    try:
        exec(code, program.globals)
        function = program.globals.get('f')
        if not callable(function):
            raise Refused('no-function', 'f is not a function after the program ran')
        value = function(*arguments)
    except Refused:
        raise
    except RecursionError:
        raise Refused('recursion', f'the program nested more than {MAX_RECURSION} calls') from None
    except MemoryError:
        raise Refused('memory', f'the program used more than {MAX_MEMORY_BYTES >> 20} MiB') from None
    except Exception as error:
        raise Refused('runtime-error', f'{type(error).__name__}: {str(error)[:200]}') from None
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    if peak > MAX_MEMORY_BYTES:
        raise Refused('memory', f'the program used more than {MAX_MEMORY_BYTES >> 20} MiB')
    return value


def _stack():
    frame, frames = sys._getframe(), []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    return frames


def same_value(a, b):
    """Two texts name the same Python value (AZR compares outputs as values: "[1, 2]" equals "[1,2]")."""
    try:
        return json.dumps(ast.literal_eval(a) == ast.literal_eval(b))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return json.dumps(False)


_ballast = []


def perturb(seed):
    """Shifts where the next run's objects land, so that id()-dependent orders differ between validation runs."""
    _ballast.clear()
    _ballast.extend([object() for _ in range(17 + seed % 101)] + [[0] * (seed % 13 + 1) for _ in range(7)])
