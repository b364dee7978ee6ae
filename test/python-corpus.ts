// The code domain sandbox's corpora, as data: HOSTILE programs (each refused with its reason, or, where harmless, run
// to the right answer) and ORDINARY programs (each run to the answer the host's CPython gives). Used by
// python-sandbox.test.ts (one executor, in process) and by the verifier's pool tests (fenced processes).
//
// A HOSTILE entry runs as a validation does: `run(program, inputs)`. `stack: 'production'` marks the entries whose
// data nests deeper than the interpreter survives on a small stack (vitest's thread, about 1 MB): they are
// right only with the verifier processes' stack (60 MB of V8 stack), see sandbox/limits.py.

export interface HostileProgram {
  what: string;
  program: string;
  inputs: string[];
  /** The verdict's reason, or 'ok' for a harmless program, whose outputs are then given. */
  reason: string;
  detail?: RegExp;
  outputs?: string[];
  stack?: 'production';
}

/**
 * A host folder the hostile programs reach for: the test creates it and checks it is untouched afterwards. One per
 * process, since test files run side by side (each in its own process) and each removes its folder at the end.
 */
export const SENTINEL_DIR = `/tmp/populora-sandbox-sentinel-${process.pid}`;

const deepList = (levels: number) => `    x = []\n    for _ in range(${levels}):\n        x = [x]\n`;

export const HOSTILE: HostileProgram[] = [
  // ---- the host: files, commands, modules that reach them
  { what: 'a file read through open', program: `def f():\n    h = open('${SENTINEL_DIR}/secret.txt')\n    return 1`, inputs: [''], reason: 'forbidden-builtin', detail: /open/ },
  { what: 'a file written through open', program: `def f():\n    h = open('${SENTINEL_DIR}/planted.txt', 'w')\n    return 1`, inputs: [''], reason: 'forbidden-builtin', detail: /open/ },
  // .read is not a name the library gives: read from the program's own objects only, so open is refused first
  { what: 'a file method on what open gave', program: `def f():\n    return open('${SENTINEL_DIR}/secret.txt').read()`, inputs: [''], reason: 'forbidden-builtin', detail: /open/ },
  { what: 'import os', program: `import os\ndef f():\n    return os.listdir('${SENTINEL_DIR}')`, inputs: [''], reason: 'forbidden-import', detail: /\bos \(line 1\) is not importable/ },
  { what: 'os.system inside the function', program: 'def f():\n    import os\n    return os.system("touch /tmp/x")', inputs: [''], reason: 'forbidden-import' },
  { what: 'subprocess', program: 'def f():\n    import subprocess\n    return subprocess.run(["ls"])', inputs: [''], reason: 'forbidden-import' },
  { what: 'shutil from-import', program: 'from shutil import rmtree\ndef f():\n    return 1', inputs: [''], reason: 'forbidden-import' },
  { what: 'pathlib', program: `import pathlib\ndef f():\n    return pathlib.Path('${SENTINEL_DIR}').exists()`, inputs: [''], reason: 'forbidden-import' },
  { what: 'io.open', program: 'import io\ndef f():\n    return 1', inputs: [''], reason: 'forbidden-import' },
  { what: 'a relative import', program: 'from . import os\ndef f():\n    return 1', inputs: [''], reason: 'forbidden-import' },
  { what: '__import__ by name', program: 'def f():\n    return __import__("os")', inputs: [''], reason: 'forbidden-builtin', detail: /__import__/ },
  { what: 'imports through __builtins__', program: 'def f():\n    return __builtins__["__import__"]("os")', inputs: [''], reason: 'forbidden-builtin' },
  { what: 'a module of an allowed module (typing.sys)', program: 'import typing\ndef f():\n    return typing.sys.modules', inputs: [''], reason: 'forbidden-attribute', detail: /\.(sys|modules)/ },
  { what: 'a name an allowed module does not expose', program: 'from dataclasses import sys\ndef f():\n    return 1', inputs: [''], reason: 'forbidden-import' },
  { what: 'ctypes', program: 'import ctypes\ndef f():\n    return 1', inputs: [''], reason: 'forbidden-import' },
  { what: 'importlib', program: 'import importlib\ndef f():\n    return importlib.import_module("os")', inputs: [''], reason: 'forbidden-import' },
  // ---- the JavaScript bridge
  { what: 'the js module', program: 'import js\ndef f():\n    return str(js.process)', inputs: [''], reason: 'forbidden-import', detail: /js/ },
  { what: 'the pyodide_js module', program: 'import pyodide_js\ndef f():\n    return 1', inputs: [''], reason: 'forbidden-import' },
  { what: 'pyodide.ffi', program: 'from pyodide.ffi import to_js\ndef f():\n    return 1', inputs: [''], reason: 'forbidden-import' },
  { what: '_pyodide_core', program: 'import _pyodide_core\ndef f():\n    return 1', inputs: [''], reason: 'forbidden-import' },
  // ---- string-driven attribute access, frames, code, globals
  { what: 'the subclass walk', program: 'def f():\n    return ().__class__.__base__.__subclasses__()', inputs: [''], reason: 'forbidden-attribute' },
  { what: "a function's globals", program: 'def g():\n    pass\ndef f():\n    return g.__globals__', inputs: [''], reason: 'forbidden-attribute' },
  { what: "a builtin's module (print.__self__)", program: 'def f():\n    return print.__self__', inputs: [''], reason: 'forbidden-attribute' },
  { what: 'getattr with a string', program: 'def f():\n    return getattr((), "__cl" + "ass__")', inputs: [''], reason: 'forbidden-builtin', detail: /getattr/ },
  { what: 'an aliased denied builtin (refused when called)', program: 'def f():\n    g = vars\n    return g()', inputs: [''], reason: 'forbidden-builtin', detail: /vars/ },
  { what: 'eval', program: 'def f():\n    return eval("1 + 1")', inputs: [''], reason: 'forbidden-builtin' },
  { what: 'exec', program: 'def f():\n    exec("x = 1")\n    return 1', inputs: [''], reason: 'forbidden-builtin' },
  { what: 'compile', program: 'def f():\n    return compile("1", "x", "eval")', inputs: [''], reason: 'forbidden-builtin' },
  { what: "a generator's frame", program: 'def f():\n    g = (x for x in [1])\n    return g.gi_frame.f_back', inputs: [''], reason: 'forbidden-attribute' },
  { what: "a traceback's frame", program: 'def f():\n    try:\n        1 / 0\n    except ZeroDivisionError as e:\n        return e.__traceback__.tb_frame', inputs: [''], reason: 'forbidden-attribute' },
  { what: "a code object's constants", program: 'def f():\n    return (lambda: 0).__code__.co_consts', inputs: [''], reason: 'forbidden-attribute' },
  { what: 'a frame through a match keyword pattern', program: 'def f():\n    g = (x for x in [1])\n    match g:\n        case object(gi_frame=frame):\n            return frame.f_globals\n    return 0', inputs: [''], reason: 'forbidden-attribute', detail: /gi_frame/ },
  { what: 'a frame through __match_args__', program: "class P:\n    __match_args__ = ('gi_frame',)\ndef f():\n    return 0", inputs: [''], reason: 'forbidden-attribute' },
  { what: 'a dunder through a match keyword pattern', program: 'def f():\n    match f:\n        case object(__globals__=g):\n            return g\n    return 0', inputs: [''], reason: 'forbidden-attribute' },
  { what: 'a frame through a format field', program: "def f():\n    g = (x for x in [1])\n    return '{0.gi_frame}'.format(g)", inputs: [''], reason: 'forbidden-attribute', detail: /gi_frame/ },
  { what: 'a frame through a format field built at run time', program: "def f():\n    g = (x for x in [1])\n    return ('{0.gi_' + 'frame}').format(g)", inputs: [''], reason: 'forbidden-attribute', detail: /format field/ },
  { what: 'globals through a format field', program: "def f():\n    return '{0.__globals__[__builtins__]}'.format(f)", inputs: [''], reason: 'forbidden-attribute', detail: /format field/ },
  { what: 'a format field through str.format unbound', program: "def f():\n    return str.format('{0.__class__}', 1)", inputs: [''], reason: 'forbidden-attribute', detail: /format field/ },
  { what: 'a format field through format_map', program: "def f():\n    return '{x.__class__}'.format_map({'x': 1})", inputs: [''], reason: 'forbidden-attribute', detail: /format field/ },
  { what: 'a program naming a frame attribute for its own', program: 'class A:\n    def __init__(self):\n        self.f_back = 1\ndef f():\n    return A().f_back', inputs: [''], reason: 'forbidden-attribute', detail: /f_back/ },
  { what: 'a private attribute of a library class', program: 'from fractions import Fraction\nclass A:\n    _numerator = 0\ndef f():\n    return Fraction(1, 2)._numerator', inputs: [''], reason: 'forbidden-attribute' },
  { what: 'functools.update_wrapper with its assigned names', program: "import functools\ndef f():\n    def w():\n        pass\n    functools.update_wrapper(w, f, assigned=('__globals__',))\n    return 1", inputs: [''], reason: 'runtime-error', detail: /assigned/ },
  { what: 'functools.WRAPPER_ASSIGNMENTS', program: 'from functools import WRAPPER_ASSIGNMENTS\ndef f():\n    return 1', inputs: [''], reason: 'forbidden-import' },
  { what: 'typing.get_type_hints', program: "import typing\ndef g(x: '__import__(\"os\")'):\n    pass\ndef f():\n    return typing.get_type_hints(g)", inputs: [''], reason: 'forbidden-attribute', detail: /get_type_hints/ },
  { what: 'a string annotation (stored, never evaluated)', program: "from typing import NamedTuple\nclass P(NamedTuple):\n    x: '__import__(\"os\").system(\"ls\")'\ndef f():\n    return P(1).x", inputs: [''], reason: 'ok', outputs: ['1'] },
  { what: 'operator.attrgetter', program: 'import operator\ndef f():\n    return operator.attrgetter("__class__")(1)', inputs: [''], reason: 'forbidden-attribute', detail: /attrgetter/ },
  { what: 'string.Formatter', program: 'import string\ndef f():\n    return string.Formatter().format("{0.__class__}", 1)', inputs: [''], reason: 'forbidden-attribute', detail: /Formatter/ },
  { what: 'dataclasses.make_dataclass', program: "import dataclasses\ndef f():\n    return dataclasses.make_dataclass('X', ['a'])", inputs: [''], reason: 'forbidden-attribute' },
  { what: 'type() with three arguments', program: "def f():\n    X = type('X', (), {'__del__': lambda self: 0})\n    return 1", inputs: [''], reason: 'forbidden-builtin', detail: /three arguments/ },
  // ---- an allow-list the program cannot extend: strings and its own names open nothing of the library's; calls
  // are checked by the callee's value
  { what: 'a string naming a method that evaluates text (ForwardRef.evaluate)', program: "import typing\ndef f():\n    name = 'evaluate'\n    ref = typing.get_args(typing.List['__import__(\"os\")'])[0]\n    return ref.evaluate(globals={})", inputs: [''], reason: 'forbidden-attribute', detail: /\.evaluate of a ForwardRef/ },
  { what: 'a method of its own named like a library one', program: "import typing\nclass A:\n    def evaluate(self):\n        return 0\ndef f():\n    ref = typing.get_args(typing.List['x'])[0]\n    return [A().evaluate(), ref.evaluate(globals={'x': 1})]", inputs: [''], reason: 'forbidden-attribute', detail: /\.evaluate of a ForwardRef/ },
  { what: 'a private name of the library in a string', program: "from fractions import Fraction\ndef f():\n    keys = {'_numerator': 1}\n    return Fraction(1, 2)._numerator", inputs: [''], reason: 'forbidden-attribute', detail: /_numerator/ },
  { what: "library state read through a class of its own", program: "import textwrap\nclass W(textwrap.TextWrapper):\n    pass\ndef f():\n    W().unicode_whitespace_trans[32] = 'X'\n    return 1", inputs: [''], reason: 'forbidden-attribute', detail: /\.unicode_whitespace_trans of a W/ },
  { what: 'an alias of type, called with three arguments', program: "def f():\n    t = type\n    return t('X', (), {'__del__': lambda self: 0})", inputs: [''], reason: 'forbidden-builtin', detail: /an alias of it/ },
  { what: 'type handed to map', program: "def f():\n    return list(map(type, ['X'], [()], [{}]))", inputs: [''], reason: 'forbidden-builtin', detail: /an alias of it/ },
  { what: 'the class of a class (type(int))', program: "def f():\n    return type(int)('X', (), {'__del__': lambda self: 0})", inputs: [''], reason: 'forbidden-builtin', detail: /the class of a class/ },
  { what: 'the class of a class (.__class__)', program: "def f():\n    return (1).__class__.__class__('X', (), {})", inputs: [''], reason: 'forbidden-builtin', detail: /the class of a class/ },
  { what: 'a metaclass of the library (type(an Enum))', program: "import enum\nclass C(enum.Enum):\n    A = 1\ndef f():\n    return type(C)('D', (enum.Enum,), {})", inputs: [''], reason: 'forbidden-builtin', detail: /the class of a class/ },
  { what: 'typing.get_origin(Type[int])', program: "import typing\ndef f():\n    return typing.get_origin(typing.Type[int])('X', (), {})", inputs: [''], reason: 'forbidden-builtin', detail: /metaclass type/ },
  { what: 'the name type rebound', program: 'def f(type):\n    return type', inputs: ['1'], reason: 'forbidden-syntax', detail: /the name type .*is reserved/ },
  { what: "a member named like a hook through Enum's functional API", program: "import enum\ndef f():\n    E = enum.Enum('E', [('__del__', 1)])\n    return 1", inputs: [''], reason: 'forbidden-attribute', detail: /Enum member named '__del__'/ },
  { what: 'a pattern attribute read from a library class', program: "import typing\ndef f():\n    match typing.get_args(typing.List['x'])[0]:\n        case typing.Any(evaluate=e):\n            return 1\n    return 0", inputs: [''], reason: 'forbidden-attribute', detail: /class pattern on Any would read \.evaluate/ },
  { what: "a pattern attribute read from a rebound class name", program: "class P:\n    evaluate = 1\ndef f():\n    P = int\n    match 1:\n        case P(evaluate=e):\n            return e\n    return 0", inputs: [''], reason: 'forbidden-attribute', detail: /class pattern on int would read \.evaluate/ },
  // the red team's findings against 5159e0f (/work/coord/attacks/findings.md), each refused
  { what: 'F1: a parameter named like a library method', program: "import typing\ndef f(evaluate=0):\n    return typing.get_args(typing.List['__import__(\"sys\").platform'])[0].evaluate()", inputs: [''], reason: 'forbidden-attribute', detail: /\.evaluate of a ForwardRef/ },
  { what: 'F1: a local named like a library method', program: "import typing\ndef f():\n    evaluate = 0\n    return typing.get_args(typing.List['__import__(\"sys\").platform'])[0].evaluate()", inputs: [''], reason: 'forbidden-attribute', detail: /\.evaluate of a ForwardRef/ },
  { what: 'F1: the name inside the forward reference itself', program: "import typing\ndef f():\n    return typing.get_args(typing.List['__import__(\"sys\").version if 1 else evaluate'])[0].evaluate()", inputs: [''], reason: 'forbidden-attribute', detail: /\.evaluate of a ForwardRef/ },
  { what: "F5: Enum._convert_ reads any module's dict", program: "import enum\ndef f():\n    s = '_convert_ _value_'\n    E = enum.Enum._convert_('E', 'builtins', lambda n: n == 'getattr')\n    return E['getattr']._value_", inputs: [''], reason: 'forbidden-attribute', detail: /_convert_/ },
  { what: 'F3: a runtime Protocol with __match_args__ by annotation, in a class pattern', program: "import typing\ndef attr(obj, name):\n    class A(typing.Protocol):\n        _is_runtime_protocol = True\n        __match_args__: tuple = (name,)\n    match obj:\n        case A(v):\n            return v\ndef f():\n    try:\n        1 / 0\n    except ZeroDivisionError as e:\n        return attr(e, '__trace' + 'back__')", inputs: [''], reason: 'forbidden-attribute', detail: /decides isinstance itself/ },
  { what: 'F3: __match_args__ by annotation naming a dunder, on a plain class', program: "class A:\n    __match_args__: tuple = ('__trace' + 'back__',)\ndef f():\n    a = A()\n    match a:\n        case A(v):\n            return v\n    return 0", inputs: [''], reason: 'forbidden-attribute', detail: /would read \.__traceback__/ },
  { what: 'F3: an ABC subclass of its own in a class pattern', program: "import collections.abc\nclass S(collections.abc.Sized):\n    __match_args__ = ('x',)\n    def __init__(self):\n        self.x = 0\n    def __len__(self):\n        return 0\ndef f():\n    match [1]:\n        case S(v):\n            return v\n    return 0", inputs: [''], reason: 'forbidden-attribute', detail: /decides isinstance itself/ },
  { what: 'F4: str.format unbound through a str subclass', program: "class S(str):\n    pass\ndef f():\n    try:\n        1 / 0\n    except ZeroDivisionError as e:\n        return S.format('{0.__traceback__.tb_' + 'frame.f_' + 'back.f_code}', e)", inputs: [''], reason: 'forbidden-attribute', detail: /format field/ },
  { what: 'F4: str.format_map unbound', program: "def f():\n    return str.format_map('{x.__class__}', {'x': 1})", inputs: [''], reason: 'forbidden-attribute', detail: /format field/ },
  { what: 'F14: a runtime Protocol of its own in a keyword class pattern', program: "import typing\nclass P(typing.Protocol):\n    _is_runtime_protocol = True\ndef f():\n    fr = typing.get_args(typing.List['__import__(\"sys\").platform'])[0]\n    match fr:\n        case P(evaluate=ev):\n            return ev()\n    return 0", inputs: [''], reason: 'forbidden-attribute', detail: /decides isinstance itself/ },
  { what: 'F14: a runtime Protocol with __match_args__ of a stored attribute', program: "import typing\nclass P(typing.Protocol):\n    _is_runtime_protocol = True\n    evaluate = None\n    __match_args__ = ('evaluate',)\ndef f():\n    fr = typing.get_args(typing.List['__import__(\"sys\").platform'])[0]\n    match fr:\n        case P(ev):\n            return ev()\n    return 0", inputs: [''], reason: 'forbidden-attribute', detail: /decides isinstance itself/ },
  { what: 'F14: a dataclass Protocol whose __match_args__ names gi_frame', program: 'import dataclasses, typing\n@dataclasses.dataclass\nclass P(typing.Protocol):\n    _is_runtime_protocol = True\n    gi_frame: int\ndef f():\n    g = (x for x in [1])\n    match g:\n        case P(frame):\n            return type(frame).__name__\n    return 0', inputs: [''], reason: 'forbidden-attribute' },
  { what: 'F16: typing.Type as a base makes a metaclass', program: "import typing\nclass M(typing.Type):\n    pass\ndef f():\n    X = M('X', (), {'__getattr__': lambda self, n: 'hooked'})\n    return [hasattr(X(), 'zz'), M.__name__]", inputs: [''], reason: 'forbidden-builtin', detail: /metaclass/ },
  { what: 'F16: typing.Type[int] as a base, inside f', program: "import typing\ndef f():\n    class M(typing.Type[int]):\n        pass\n    MM = M('MM', (M,), {'__instancecheck__': lambda c, o: True})\n    return 1", inputs: [''], reason: 'forbidden-builtin', detail: /metaclass/ },
  { what: 'F4: format_map unbound on a str subclass', program: "class S(str):\n    pass\ndef f():\n    return S.format_map('{x.__class__.__base__.__name__}', {'x': True})", inputs: [''], reason: 'forbidden-attribute', detail: /format field/ },
  { what: 'class patterns of its own classes (namedtuple, dataclass, plain), by position and keyword', program: "from collections import namedtuple\nfrom dataclasses import dataclass\nP = namedtuple('P', 'x y')\n@dataclass\nclass D:\n    a: int\n    b: int\nclass C:\n    __match_args__ = ('u',)\n    def __init__(self, u):\n        self.u = u\ndef f():\n    out = []\n    for v in (P(1, 2), D(3, 4), C(5), 7):\n        match v:\n            case P(x, y=y):\n                out.append(x + y)\n            case D(a, b=b):\n                out.append(a * b)\n            case C(u):\n                out.append(-u)\n            case int(n):\n                out.append(n)\n    return out", inputs: [''], reason: 'ok', outputs: ['[3, 12, -5, 7]'] },
  { what: 'namedtuple and Enum fields given as strings, read back', program: "from collections import namedtuple\nfrom enum import Enum\nP = namedtuple('P', 'left right')\nE = Enum('E', 'RED BLUE')\ndef f():\n    p = P(1, 2)\n    return [p.left + p.right, E.BLUE.value, E.RED.name]", inputs: [''], reason: 'ok', outputs: ["[3, 2, 'RED']"] },
  // ---- hooks the program may not define
  { what: 'a finalizer (__del__)', program: 'class A:\n    def __del__(self):\n        pass\ndef f():\n    return 1', inputs: [''], reason: 'forbidden-syntax', detail: /__del__/ },
  { what: '__getattr__', program: 'class A:\n    def __getattr__(self, name):\n        return 1\ndef f():\n    return 1', inputs: [''], reason: 'forbidden-syntax' },
  { what: '__set_name__', program: 'class D:\n    def __set_name__(self, owner, name):\n        pass\ndef f():\n    return 1', inputs: [''], reason: 'forbidden-syntax' },
  { what: '__init_subclass__', program: 'class A:\n    def __init_subclass__(cls):\n        pass\ndef f():\n    return 1', inputs: [''], reason: 'forbidden-syntax' },
  { what: '__reduce_ex__', program: 'class A:\n    def __reduce_ex__(self, p):\n        return (print, ())\ndef f():\n    return 1', inputs: [''], reason: 'forbidden-syntax' },
  { what: 'a dunder global of its own', program: '__builtins__ = {}\ndef f():\n    return 1', inputs: [''], reason: 'forbidden-builtin' },
  // ---- refusals the program tries to swallow
  { what: 'an infinite loop', program: 'def f():\n    while True: pass', inputs: [''], reason: 'fuel' },
  { what: 'a loop that catches Exception', program: 'def f():\n    while True:\n        try:\n            pass\n        except Exception:\n            pass', inputs: [''], reason: 'fuel' },
  { what: 'a loop in a finally', program: 'def f():\n    try:\n        while True: pass\n    finally:\n        while True: pass', inputs: [''], reason: 'fuel' },
  { what: 'a refusal swallowed by finally: return', program: 'def f():\n    try:\n        while True:\n            pass\n    finally:\n        return 1', inputs: [''], reason: 'fuel' },
  { what: 'a refusal swallowed by __exit__', program: 'class Quiet:\n    def __enter__(self):\n        return self\n    def __exit__(self, *exc):\n        return True\ndef f():\n    with Quiet():\n        x = [0] * 10 ** 9\n    return 1', inputs: [''], reason: 'memory' },
  { what: 'a refusal swallowed by a bare except', program: 'def f():\n    try:\n        x = "x" * 10 ** 9\n    except:\n        return 0\n    return 1', inputs: [''], reason: 'memory' },
  { what: 'a refusal swallowed by a generator', program: 'def g():\n    try:\n        yield 1\n        while True:\n            pass\n    finally:\n        return\ndef f():\n    return sum(g())', inputs: [''], reason: 'fuel' },
  { what: 'a RecursionError caught', program: 'def g(n):\n    return g(n + 1)\ndef f():\n    try:\n        return g(0)\n    except RecursionError:\n        return -1', inputs: [''], reason: 'recursion' },
  { what: 'a MemoryError caught', program: 'def f():\n    try:\n        return len(bytes(2 * 10 ** 9))\n    except Exception:\n        return -1', inputs: [''], reason: 'memory' },
  { what: 'catching BaseException', program: 'def f():\n    try:\n        return 1\n    except BaseException:\n        return 2', inputs: [''], reason: 'forbidden-syntax', detail: /swallow the sandbox's limits/ },
  { what: 'catching GeneratorExit in a tuple', program: 'def f():\n    try:\n        return 1\n    except (ValueError, GeneratorExit):\n        return 2', inputs: [''], reason: 'forbidden-syntax', detail: /swallow/ },
  { what: 'a finalizer-like generator left suspended', program: 'def g():\n    try:\n        yield 1\n    finally:\n        while True:\n            pass\ndef f():\n    it = g()\n    next(it)\n    return 1', inputs: [''], reason: 'fuel' },
  // ---- poisoning within a job (refused, or the program's own business)
  { what: 'the ABC registry (numbers.Integral.register)', program: 'import numbers\ndef f():\n    numbers.Integral.register(str)\n    return 1', inputs: [''], reason: 'forbidden-attribute', detail: /register/ },
  { what: 'a library class patched', program: "import collections\ndef f():\n    collections.Counter.most_common = lambda self, n=None: 'patched'\n    return 1", inputs: [''], reason: 'forbidden-attribute' },
  { what: 'a library class attribute added', program: 'import string\ndef f():\n    string.Template.delimiter = "#"\n    return 1', inputs: [''], reason: 'forbidden-attribute' },
  { what: 'a dict held as a library class attribute', program: "import textwrap\ndef f():\n    textwrap.TextWrapper.unicode_whitespace_trans[32] = 'X'\n    return 1", inputs: [''], reason: 'forbidden-attribute', detail: /unicode_whitespace_trans/ },
  { what: "copy's dispatch table", program: 'import copy\ndef f():\n    copy.dispatch_table[list] = None\n    return 1', inputs: [''], reason: 'forbidden-attribute' },
  { what: 'an attribute of a shared singleton', program: 'import dataclasses\ndef f():\n    dataclasses.MISSING.x = 1\n    return 1', inputs: [''], reason: 'forbidden-attribute' },
  { what: 'a library function given an attribute', program: 'import math\ndef f():\n    math.sqrt.cache = {}\n    return 1', inputs: [''], reason: 'forbidden-attribute' },
  { what: "a library function's defaults", program: 'import textwrap\ndef f():\n    textwrap.fill.__defaults__ = (1,)\n    return 1', inputs: [''], reason: 'forbidden-attribute' },
  { what: 'dataclass applied to a library class', program: 'import dataclasses, string\ndef f():\n    dataclasses.dataclass(string.Template)\n    return 1', inputs: [''], reason: 'forbidden-attribute' },
  { what: 'total_ordering applied to a library class', program: 'import functools, fractions\ndef f():\n    functools.total_ordering(fractions.Fraction)\n    return 1', inputs: [''], reason: 'forbidden-attribute' },
  { what: 'functools.wraps onto a library function', program: 'import functools, textwrap\ndef g():\n    pass\ndef f():\n    functools.wraps(g)(textwrap.fill)\n    return textwrap.fill.__name__', inputs: [''], reason: 'forbidden-attribute' },
  { what: 'a class-level dataclass of its own, decorated with options', program: 'import dataclasses, functools\n@functools.total_ordering\n@dataclasses.dataclass(frozen=True)\nclass P:\n    x: int\n    def __lt__(self, other):\n        return self.x < other.x\ndef f():\n    return [P(1) < P(2), P(3) >= P(2), P(1) == P(1)]', inputs: [''], reason: 'ok', outputs: ['[True, True, True]'] },
  { what: 'the comparison function', program: "def f():\n    same_value.__code__ = (lambda a, b: 'true').__code__\n    return 1", inputs: [''], reason: 'forbidden-attribute' },
  { what: 'the fuel counter', program: 'def f():\n    _fuel = 0\n    return _run', inputs: [''], reason: 'runtime-error', detail: /NameError/ },
  { what: 'builtins rebound for its own use', program: 'def f(s):\n    len = lambda x: 42\n    sorted = list\n    return [len(s), sorted(s)]', inputs: ["'cab'"], reason: 'ok', outputs: ["[42, ['c', 'a', 'b']]"] },
  { what: "a module view's attribute rebound", program: 'import math\ndef f():\n    math.pi = 3\n    return math.pi', inputs: [''], reason: 'ok', outputs: ['3'] },
  { what: 'a class attribute of its own changed', program: 'class A:\n    n = 0\ndef f(k):\n    A.n += k\n    a = A()\n    a.m = 2\n    return [A.n, a.m]', inputs: ['5'], reason: 'ok', outputs: ['[5, 2]'] },
  // ---- hangs: work that one C call does without spending fuel
  { what: 'integer * bomb', program: 'def f():\n    x = 3\n    while True:\n        x = x * x', inputs: [''], reason: 'memory', detail: /bits/ },
  { what: 'integer *= bomb', program: 'def f():\n    x = 7\n    for _ in range(100):\n        x *= x\n    return 1', inputs: [''], reason: 'memory', detail: /bits/ },
  { what: 'a list *= bomb on a subscript', program: 'def f():\n    a = [[0]]\n    for _ in range(40):\n        a[0] *= 2\n    return len(a[0])', inputs: [''], reason: 'memory' },
  { what: 'a list bomb', program: 'def f():\n    return len([0] * 10 ** 9)', inputs: [''], reason: 'memory' },
  { what: 'a string bomb', program: 'def f():\n    s = "x"\n    s *= 10 ** 8\n    return len(s)', inputs: [''], reason: 'memory' },
  { what: 'a power bomb', program: 'def f():\n    return 10 ** 10 ** 8', inputs: [''], reason: 'memory' },
  { what: 'pow() as a bomb', program: 'def f():\n    return pow(7, 10 ** 9)', inputs: [''], reason: 'memory' },
  { what: 'a modular pow too long', program: 'def f():\n    return pow(3, 2 ** 90000, 2 ** 90000 + 1)', inputs: [''], reason: 'memory' },
  { what: 'a shift bomb', program: 'def f():\n    return 1 << 10 ** 9', inputs: [''], reason: 'memory' },
  { what: 'a Fraction power bomb', program: 'from fractions import Fraction\ndef f():\n    return float(Fraction(3, 2) ** 10 ** 7)', inputs: [''], reason: 'memory' },
  // ---- work no fuel saw before: library arithmetic and iteration, the sandbox's own walks, one-call amplifiers
  { what: 'Fraction divisions growing step by step', program: 'from fractions import Fraction\ndef f():\n    x, y = Fraction(3, 7), Fraction(11, 13)\n    for _ in range(3000):\n        x = x / y + 1\n    return x > 0', inputs: [''], reason: 'fuel' },
  { what: 'a power of a Fraction below one', program: 'from fractions import Fraction\ndef f():\n    return Fraction(2, 3) ** 10 ** 6 > 0', inputs: [''], reason: 'memory', detail: /bits/ },
  { what: 'a negative power of a Fraction', program: 'from fractions import Fraction\ndef f():\n    return Fraction(3, 2) ** -(10 ** 6) > 0', inputs: [''], reason: 'memory', detail: /bits/ },
  { what: 'Counter.elements walked in C', program: 'import collections\ndef f():\n    collections.deque(collections.Counter({"a": 10 ** 9}).elements(), maxlen=0)\n    return 1', inputs: [''], reason: 'fuel' },
  { what: 'statistics over a long list, again and again', program: 'import statistics\ndef f():\n    xs = list(range(20000))\n    return sum(statistics.mean(xs) for _ in range(2000))', inputs: [''], reason: 'fuel' },
  { what: 'divisions of big integers', program: 'def f():\n    a, b, t = 7 ** 30000, 3 ** 15000, 0\n    for _ in range(3000):\n        t += a // b % 7 + divmod(a, b)[1] % 7\n    return t', inputs: [''], reason: 'fuel' },
  { what: '`in` over a long list, again and again', program: 'def f():\n    xs = list(range(200000))\n    return sum(-1 in xs for _ in range(20000))', inputs: [''], reason: 'fuel' },
  { what: '== of long lists, again and again', program: 'def f():\n    xs, ys = list(range(200000)), list(range(200000))\n    return sum(xs == ys for _ in range(20000))', inputs: [''], reason: 'fuel' },
  { what: 'a join bigger than the limit', program: "def f():\n    s = 'x' * 1000000\n    return len(''.join([s] * 200))", inputs: [''], reason: 'memory', detail: /join/ },
  { what: 'a UserList multiplied', program: 'import collections\ndef f():\n    return len(collections.UserList([0]) * 10 ** 9)', inputs: [''], reason: 'memory' },
  { what: 'a UserString multiplied', program: "import collections\ndef f():\n    return len(collections.UserString('ab') * 10 ** 9)", inputs: [''], reason: 'memory' },
  { what: 'integers that all share one hash, in a set', program: 'def f():\n    m = 2 ** 31 - 1\n    return len(set(range(0, 200000 * m, m)))', inputs: [''], reason: 'fuel', detail: /share one hash/ },
  { what: 'a string doubled again and again', program: "def f():\n    s = 'x'\n    for _ in range(40):\n        s = s + s\n    return len(s)", inputs: [''], reason: 'fuel' },
  { what: 'F10: list.count over a long list, tuned to the guard', program: 'def f(n):\n    lst = [0] * 1000000\n    t = 0\n    for _ in range(n):\n        t += lst.count(1)\n    return t', inputs: ['70'], reason: 'fuel' },
  { what: 'F8: a regex search that backtracks quadratically (a*b in a million a)', program: "import re\ndef f(n):\n    return re.search('a*b', 'a' * n) is None", inputs: ['1000000'], reason: 'fuel' },
  { what: 'F8: a regex with repeats in a row (a*a*a*a*c), polynomial', program: "import re\ndef f(n):\n    return re.match('a*a*a*a*c', 'a' * n) is None", inputs: ['3000'], reason: 'fuel' },
  { what: 'F8: a compiled pattern searched again and again', program: "import re\ndef f(n):\n    p, s = re.compile(r'.*x'), 'y' * 3000\n    return sum(p.search(s) is None for _ in range(n))", inputs: ['1000'], reason: 'fuel' },
  { what: 'F8: an unbound Pattern.findall', program: "import re\ndef f(n):\n    p = re.compile(r'\\d+\\s')\n    return len(re.Pattern.findall(p, '1' * n))", inputs: ['100000'], reason: 'fuel' },
  { what: "F8: a pattern's scanner", program: "import re\ndef f(n):\n    return re.compile('a*b').scanner('a' * n).search()", inputs: ['100000'], reason: 'fuel' },
  { what: 'F8: == of a million-item list of lists, again and again', program: 'def f(n):\n    big = [[0]] * 1000000\n    t = 0\n    for _ in range(n):\n        t += big == big\n    return t', inputs: ['20'], reason: 'fuel' },
  { what: "F8: json.dumps with indent (the library's Python encoder)", program: 'import json\ndef f(n):\n    data = [0] * 1000000\n    return sum(len(json.dumps(data, indent=1)) for _ in range(n))', inputs: ['40'], reason: 'fuel' },
  { what: 'F8: math.gcd of 100k-bit integers, again and again', program: 'import math\ndef f(n):\n    a = 2 ** 99000 - 1\n    b = 3 ** 62000 + 7\n    t = 0\n    for _ in range(n):\n        t += math.gcd(a, b)\n    return t', inputs: ['5000'], reason: 'fuel' },
  { what: 'F8: a modular inverse of 100k-bit integers, again and again', program: 'def f(n):\n    a = 3 ** 60000 + 2\n    m = 2 ** 99000 - 1\n    t = 0\n    for _ in range(n):\n        t += pow(a, -1, m) % 7\n    return t', inputs: ['3000'], reason: 'fuel' },
  { what: "F8: an exception unwinding 150 frames that hold a million-item list", program: 'def g(big, d):\n    if d == 0:\n        raise ValueError\n    return g(big, d - 1)\ndef f(n):\n    big = [[0]] * 1000000\n    try:\n        g(big, n)\n    except ValueError:\n        return 1', inputs: ['150'], reason: 'fuel' },
  { what: 'F8: sum, set, dict.fromkeys, any of a long list, again and again', program: 'def f(n):\n    lst = [0] * 1000000\n    t = 0\n    for _ in range(n):\n        t += sum(lst) + len(set(lst)) + len(dict.fromkeys(lst)) + any(lst) + lst.count(1)\n    return t', inputs: ['5000'], reason: 'fuel' },
  { what: 'F8: a join of a million short strings, again and again', program: "def f(n):\n    words = ['a'] * 1000000\n    t = 0\n    for _ in range(n):\n        t += len(''.join(words))\n    return t", inputs: ['60'], reason: 'fuel' },
  { what: 'F8: insert(0) and pop(0) on a million-item list', program: 'def f(n):\n    lst = [0] * 1000000\n    for _ in range(n):\n        lst.insert(0, 1)\n        lst.pop(0)\n    return len(lst)', inputs: ['20000'], reason: 'fuel' },
  { what: 'str.find over a long string, again and again', program: "def f():\n    s = 'ab' * 500000\n    return sum(s.find('c') for _ in range(100000))", inputs: [''], reason: 'fuel' },
  { what: 'slices of a long list, again and again', program: 'def f():\n    s = list(range(1000000))\n    return sum(len(s[1:]) for _ in range(100000))', inputs: [''], reason: 'fuel' },
  { what: 'max of a long list, again and again', program: 'def f():\n    s = list(range(1000000))\n    return sum(max(s) for _ in range(100000))', inputs: [''], reason: 'fuel' },
  { what: 'deepcopy of a big list, again and again', program: 'import copy\ndef f():\n    xs = [[i] for i in range(5000)]\n    return sum(len(copy.deepcopy(xs)) for _ in range(500))', inputs: [''], reason: 'fuel' },
  { what: 'a Fraction exponent bomb', program: "from fractions import Fraction\ndef f():\n    return Fraction('1e999999999') > 0", inputs: [''], reason: 'runtime-error', detail: /Invalid literal for Fraction/ },
  { what: 'math.factorial', program: 'import math\ndef f():\n    return math.factorial(10 ** 6) % 7', inputs: [''], reason: 'memory' },
  { what: 'math.comb', program: 'import math\ndef f():\n    return math.comb(10 ** 6, 5 * 10 ** 5) % 7', inputs: [''], reason: 'memory' },
  { what: 'math.perm', program: 'import math\ndef f():\n    return math.perm(10 ** 6) % 7', inputs: [''], reason: 'memory' },
  { what: 'math.prod', program: 'import math\ndef f():\n    return math.prod([2 ** 60000, 3 ** 40000]) % 7', inputs: [''], reason: 'memory' },
  { what: 'math.prod, a product growing step by step', program: 'import math\ndef f():\n    return math.prod(range(1, 10 ** 5)) % 7', inputs: [''], reason: 'fuel' },
  { what: 'math.lcm', program: 'import math\ndef f():\n    return math.lcm(2 ** 60000 + 1, 3 ** 40000 + 2) % 7', inputs: [''], reason: 'memory' },
  { what: 'operator.mul', program: 'import operator\ndef f():\n    x = 3\n    while True:\n        x = operator.mul(x, x)', inputs: [''], reason: 'memory' },
  { what: 'operator.pow', program: 'import operator\ndef f():\n    return operator.pow(2, 10 ** 8) % 7', inputs: [''], reason: 'memory' },
  { what: 'operator.lshift', program: 'import operator\ndef f():\n    return operator.lshift(1, 10 ** 9) % 7', inputs: [''], reason: 'memory' },
  { what: 'operator.imul on a list', program: 'import operator\ndef f():\n    return len(operator.imul([0], 10 ** 9))', inputs: [''], reason: 'memory' },
  { what: 'functools.reduce of operator.mul', program: 'import functools, operator\ndef f():\n    return functools.reduce(operator.mul, [2 ** 5000] * 100) % 7', inputs: [''], reason: 'memory' },
  { what: 'int() from a huge binary string', program: "def f():\n    return int('1' * 900000, 2) % 7", inputs: [''], reason: 'memory' },
  { what: 'int.from_bytes of a big buffer', program: "def f():\n    return int.from_bytes(b'\\xff' * 900000, 'big') % 7", inputs: [''], reason: 'memory' },
  { what: 'a printf width', program: "def f():\n    return len('%1000000000d' % 1)", inputs: [''], reason: 'memory', detail: /width/ },
  { what: 'a printf * width', program: "def f(w):\n    return len('%*d' % (w, 1))", inputs: ['1000000000'], reason: 'memory', detail: /width/ },
  { what: 'an f-string width', program: "def f(w):\n    return len(f'{1:>{w}}')", inputs: ['1000000000'], reason: 'memory' },
  { what: 'an f-string precision', program: "def f(w):\n    return len(f'{1.5:.{w}f}')", inputs: ['100000000'], reason: 'memory' },
  { what: 'a str.format width', program: "def f():\n    return len('{:>1000000000}'.format(1))", inputs: [''], reason: 'memory' },
  { what: 'a str.format width from a nested field', program: "def f(w):\n    return len('{:>{}}'.format(1, w))", inputs: ['1000000000'], reason: 'memory' },
  { what: 'format() width', program: "def f():\n    return len(format(1, '>1000000000'))", inputs: [''], reason: 'memory' },
  { what: 'str.ljust', program: "def f():\n    return len('x'.ljust(10 ** 9))", inputs: [''], reason: 'memory' },
  { what: 'str.center aliased', program: "def f():\n    c = 'x'.center\n    return len(c(10 ** 9))", inputs: [''], reason: 'memory' },
  { what: 'str.zfill', program: "def f():\n    return len('1'.zfill(10 ** 9))", inputs: [''], reason: 'memory' },
  { what: 'str.expandtabs', program: "def f():\n    return len(('\\t' * 1000).expandtabs(10 ** 6))", inputs: [''], reason: 'memory' },
  { what: 'str.replace growth', program: "def f():\n    return len(('a' * 10 ** 5).replace('', 'b' * 10 ** 4))", inputs: [''], reason: 'memory' },
  { what: 'int.to_bytes', program: "def f():\n    return len((1).to_bytes(10 ** 9, 'big'))", inputs: [''], reason: 'memory' },
  { what: 'functools.reduce of list concatenations', program: 'import functools, operator\ndef f():\n    return len(functools.reduce(operator.add, [[0] * 10 ** 6] * 100))', inputs: [''], reason: 'memory' },
  { what: 'bytes(n)', program: 'def f():\n    return len(bytes(10 ** 9))', inputs: [''], reason: 'memory' },
  { what: 'bytearray(n)', program: 'def f():\n    return len(bytearray(10 ** 8))', inputs: [''], reason: 'memory' },
  { what: 'bytes(n) aliased, in a loop', program: 'def f():\n    b = bytes\n    for _ in range(1000):\n        x = b(4 * 10 ** 7)\n    return 1', inputs: [''], reason: 'memory' },
  { what: 'json.dumps indent', program: 'import json\ndef f():\n    return len(json.dumps([[1]], indent=10 ** 9))', inputs: [''], reason: 'memory' },
  { what: 'a loop in C over a huge range', program: 'def f():\n    return sum(range(10 ** 12))', inputs: [''], reason: 'fuel', detail: /range/ },
  { what: 'a huge range aliased', program: 'def f():\n    r = range\n    return sum(r(10 ** 12))', inputs: [''], reason: 'fuel', detail: /range/ },
  { what: 'big ranges in C, one after another', program: 'def f():\n    r = range(10 ** 6)\n    t = 0\n    for _ in range(1000):\n        t += sum(r) + max(r) + len(sorted(r))\n    return t', inputs: [''], reason: 'fuel' },
  { what: 'a range over the limit', program: 'def f():\n    return len(range(10 ** 6 + 1))', inputs: [''], reason: 'fuel', detail: /range/ },
  { what: 'sum of itertools.count()', program: 'import itertools\ndef f():\n    return sum(itertools.count())', inputs: [''], reason: 'fuel' },
  { what: 'any(iter(int, 1))', program: 'def f():\n    return any(iter(int, 1))', inputs: [''], reason: 'fuel' },
  { what: 'itertools.cycle walked in C', program: 'import itertools\ndef f():\n    return max(itertools.cycle([1, 2]))', inputs: [''], reason: 'fuel' },
  { what: 'itertools.repeat walked in C', program: 'import itertools\ndef f():\n    return len(list(itertools.repeat(0, 10 ** 8)))', inputs: [''], reason: 'fuel' },
  { what: 'a huge itertools.product', program: 'import itertools\ndef f():\n    return sum(1 for _ in itertools.product(range(10), repeat=12))', inputs: [''], reason: 'fuel' },
  { what: 'huge itertools.permutations in C', program: 'import itertools\ndef f():\n    return len(list(itertools.permutations(range(15))))', inputs: [''], reason: 'fuel' },
  { what: 'itertools.product with a huge repeat', program: 'import itertools\ndef f():\n    return sum(map(len, itertools.product([0, 1], repeat=10 ** 6)))', inputs: [''], reason: 'fuel' },
  { what: 'functools.reduce(zip, ...)', program: 'import functools\ndef f():\n    return len(list(functools.reduce(zip, [[1]] * 100000)))', inputs: [''], reason: 'recursion' },
  { what: 'sum(lists, [])', program: 'def f():\n    return len(sum([[1]] * 200000, []))', inputs: [''], reason: 'ok', outputs: ['200000'] },
  { what: 'regex backtracking (a+)+', program: "import re\ndef f(n):\n    return bool(re.match(r'(a+)+$', 'a' * n + 'b'))", inputs: ['40'], reason: 'fuel', detail: /backtrack/ },
  { what: 'regex backtracking (a|aa)*', program: "import re\ndef f(n):\n    return bool(re.fullmatch(r'(a|aa)*c', 'a' * n))", inputs: ['40'], reason: 'fuel', detail: /backtrack/ },
  { what: 'regex backtracking (\\d{1,3})*', program: "import re\ndef f(n):\n    return re.search(r'^(\\d{1,3})*x', '1' * n) is None", inputs: ['60'], reason: 'fuel', detail: /backtrack/ },
  { what: 'regex compiled, then matched', program: "import re\ndef f(n):\n    p = re.compile(r'(x*)*y')\n    return bool(p.match('x' * n))", inputs: ['40'], reason: 'fuel', detail: /backtrack/ },
  { what: 'regex through a Template subclass', program: "import string\nclass T(string.Template):\n    pattern = r'(?P<escaped>(a+)+$)|(?P<named>b)|(?P<braced>c)|(?P<invalid>d)'\ndef f():\n    return T('a' * 40 + '!').safe_substitute()", inputs: [''], reason: 'fuel', detail: /backtrack/ },
  { what: 'a regex with a huge repeat count', program: "import re\ndef f():\n    return bool(re.match(r'(a{1,1000}){1,1000}', 'a'))", inputs: [''], reason: 'fuel', detail: /repeats/ },
  { what: 'a print flood', program: 'def f():\n    for i in range(1000):\n        print("x" * 100)\n    return 1', inputs: [''], reason: 'output-too-large' },
  { what: 'a huge output', program: 'def f():\n    return list(range(10 ** 5))', inputs: [''], reason: 'output-too-large' },
  { what: 'a buffer over the per-run limit', program: 'def f():\n    return len(bytearray(900000) * 100)', inputs: [''], reason: 'memory' },
  // ---- overflows: data nested deeper than C code can walk
  { what: 'repr of a 30,000-deep list', program: `def f():\n${deepList(30000)}    return len(repr(x))`, inputs: [''], reason: 'recursion', detail: /nests/ },
  { what: '== of two 15,000-deep lists', program: `def f():\n${deepList(15000)}    y = []\n    for _ in range(15000):\n        y = [y]\n    return x == y`, inputs: [''], reason: 'recursion' },
  { what: 'str() of a deep list', program: `def f():\n${deepList(30000)}    return len(str(x))`, inputs: [''], reason: 'recursion' },
  { what: 'print of a deep list', program: `def f():\n${deepList(30000)}    print(x)\n    return 1`, inputs: [''], reason: 'recursion' },
  { what: 'an f-string of a deep list', program: `def f():\n${deepList(30000)}    return len(f'{x}')`, inputs: [''], reason: 'recursion' },
  { what: 'a deep list in a membership test', program: `def f():\n${deepList(30000)}    return x in [x[0], 1]`, inputs: [''], reason: 'recursion' },
  { what: 'sorted() of deep lists', program: `def f():\n${deepList(30000)}    return len(sorted([x, [x]]))`, inputs: [''], reason: 'recursion' },
  { what: 'hash of a deep tuple', program: 'def f():\n    t = ()\n    for _ in range(30000):\n        t = (t,)\n    return hash(t)', inputs: [''], reason: 'recursion' },
  { what: 'a deep list returned', program: `def f():\n${deepList(30000)}    return x`, inputs: [''], reason: 'recursion' },
  { what: 'a list holding itself returned', program: 'def f():\n    x = []\n    x.append(x)\n    return x', inputs: [''], reason: 'not-literal', detail: /itself/ },
  { what: 'json.loads of deep brackets', program: "import json\ndef f():\n    return json.loads('[' * 100000 + ']' * 100000)", inputs: [''], reason: 'recursion' },
  { what: 'json.dumps of a deep list', program: `import json\ndef f():\n${deepList(30000)}    return len(json.dumps(x))`, inputs: [''], reason: 'recursion' },
  { what: 'copy.deepcopy of a deep list', program: `import copy\ndef f():\n${deepList(30000)}    return len(copy.deepcopy(x))`, inputs: [''], reason: 'recursion' },
  { what: 'nested zip', program: 'def f():\n    z = [1]\n    for _ in range(30000):\n        z = zip(z)\n    return len(list(z))', inputs: [''], reason: 'recursion' },
  { what: 'nested map', program: 'def f():\n    z = [1]\n    for _ in range(30000):\n        z = map(abs, z)\n    return len(list(z))', inputs: [''], reason: 'recursion' },
  { what: 'a deep deque repr', program: 'import collections\ndef f():\n    q = collections.deque()\n    for _ in range(30000):\n        q = collections.deque([q])\n    return len(repr(q))', inputs: [''], reason: 'recursion' },
  { what: 'recursion through __repr__', program: 'class A:\n    def __repr__(self):\n        return repr(A())\ndef f():\n    return len(repr(A()))', inputs: [''], reason: 'recursion' },
  { what: 'recursion through __eq__', program: 'class A:\n    def __eq__(self, other):\n        return A() == A()\ndef f():\n    return A() == A()', inputs: [''], reason: 'recursion' },
  { what: 'recursion through map', program: 'def g(n):\n    return sum(map(g, [n + 1]))\ndef f():\n    return g(0)', inputs: [''], reason: 'recursion' },
  { what: 'deep recursion', program: 'def f(n=0):\n    return f(n + 1)', inputs: [''], reason: 'recursion' },
  { what: 'an input nested deeper than the parser allows', program: 'def f(x):\n    return 1', inputs: ['[' .repeat(300) + ']'.repeat(300)], reason: 'recursion' },
  { what: 'an input nested 150 deep', program: 'def f(x):\n    return 1', inputs: ['['.repeat(150) + ']'.repeat(150)], reason: 'recursion' },
  { what: 'a deep tuple as a set item', program: 'def f():\n    t = ()\n    for _ in range(30000):\n        t = (t,)\n    return len({t})', inputs: [''], reason: 'ok', outputs: ['1'], stack: 'production' },
  { what: 'a deep list dropped on return', program: `def f():\n${deepList(30000)}    return 0`, inputs: [''], reason: 'ok', outputs: ['0'], stack: 'production' },
  // ---- determinism and literals
  { what: 'randomness', program: 'import random\ndef f():\n    return random.random()', inputs: [''], reason: 'forbidden-import' },
  { what: 'the clock', program: 'import time\ndef f():\n    return time.time()', inputs: [''], reason: 'forbidden-import' },
  { what: 'addresses', program: 'def f():\n    return id(object())', inputs: [''], reason: 'forbidden-builtin' },
  { what: 'a value that is not a literal', program: 'def f():\n    return object()', inputs: [''], reason: 'not-literal' },
  { what: 'a subclass of int returned', program: 'class I(int):\n    def __repr__(self):\n        return "5"\ndef f():\n    return I(3)', inputs: [''], reason: 'not-literal', detail: /\bI\b/ },
  { what: 'a list subclass with its own __eq__ returned', program: 'class L(list):\n    def __eq__(self, other):\n        return True\ndef f():\n    return L([1])', inputs: [''], reason: 'not-literal' },
  { what: 'nan returned', program: "def f():\n    return float('nan')", inputs: [''], reason: 'not-literal' },
  { what: 'a frozenset returned', program: 'def f():\n    return frozenset([1])', inputs: [''], reason: 'not-literal' },
  { what: 'an integer of more than 4300 digits returned', program: 'def f():\n    return 10 ** 5000', inputs: [''], reason: 'output-too-large' },
  { what: 'an input that is not a literal', program: 'def f(x):\n    return x', inputs: ['__import__("os")'], reason: 'bad-input' },
  { what: 'an input that closes the call', program: 'def f(x):\n    return x', inputs: ['1), print(2'], reason: 'bad-input' },
  { what: 'no function f', program: 'def g():\n    return 1', inputs: [''], reason: 'no-function' },
  { what: 'f rebound to a non-function', program: 'def f():\n    return 1\nf = 3', inputs: [''], reason: 'no-function' },
  { what: 'a syntax error', program: 'def f(:\n    return 1', inputs: [''], reason: 'syntax' },
  { what: 'async code', program: 'async def f():\n    return 1', inputs: [''], reason: 'forbidden-syntax' },
];

/**
 * A program that reads the state the HOSTILE programs try to poison (library classes, ABC registries, module
 * attributes, builtins, the fuel counter, the comparison): run after each, it must still give CPython's answer.
 */
export const HEALTH_CHECK = {
  program: `import collections, numbers, math, textwrap, json, string, dataclasses, functools, re, copy
def f(s):
    c = collections.Counter(s).most_common(2)
    total = 0
    for i in range(200):
        total += i % 7
    return [c, isinstance(s, numbers.Integral), isinstance(3, numbers.Integral), round(math.pi, 5),
            textwrap.fill(s + ' x y', 4), json.dumps({'a': [1, 2]}), string.Template('$x!').substitute(x=s),
            len(s), sorted(s), dataclasses.MISSING is dataclasses.MISSING, total, re.findall('a', s),
            copy.deepcopy([s]), math.sqrt(16)]`,
  inputs: ["'banana'"],
};

/**
 * Programs written for the sandbox's tests (not taken from a benchmark), in the styles a teacher writes: each has
 * four inputs, and the sandbox must give the outputs the host's CPython gives.
 */
export const ORDINARY: Array<{ program: string; inputs: string[] }> = [
  { program: 'def f(n):\n    for i in range(10 ** 9):\n        if i * i > n:\n            return i', inputs: ['10', '0', '99', '1000'] },
  { program: 'def f(numbers, k):\n    return sorted(numbers)[-k:]', inputs: ['[5, 1, 4, 2], 2', '[3, 3, 1], 1', '[9, -2, 7, 0, 4], 3', '[1], 1'] },
  { program: 'def f(s):\n    out = []\n    for i, ch in enumerate(s):\n        out.append(ch.upper() if i % 2 == 0 else ch)\n    return "".join(out)', inputs: ["'banana'", "'abc'", "''", "'Python'"] },
  { program: 'from collections import Counter\ndef f(words):\n    counts = Counter(words)\n    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))', inputs: ["['a', 'b', 'a', 'c', 'b', 'a']", "['x']", "['q', 'p', 'q', 'p']", '[]'] },
  { program: 'def f(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a', inputs: ['0', '1', '10', '30'] },
  { program: 'import math\ndef f(a, b):\n    return (math.gcd(a, b), a * b // math.gcd(a, b))', inputs: ['12, 18', '7, 5', '100, 75', '9, 9'] },
  { program: 'def f(grid):\n    return [list(row) for row in zip(*grid)]', inputs: ['[[1, 2], [3, 4]]', '[[1, 2, 3]]', '[[5], [6], [7]]', '[[0, 1], [1, 0]]'] },
  { program: 'def f(d, key):\n    return {k: v * 2 for k, v in d.items() if k != key}', inputs: ["{'a': 1, 'b': 2}, 'a'", "{'x': 3}, 'y'", "{}, 'z'", "{'m': -1, 'n': 0}, 'n'"] },
  { program: 'import heapq\ndef f(xs):\n    h = list(xs)\n    heapq.heapify(h)\n    return [heapq.heappop(h) for _ in range(min(3, len(h)))]', inputs: ['[5, 3, 8, 1]', '[2]', '[9, 9, 1, 0, 4]', '[7, 6]'] },
  { program: 'def f(text, width):\n    words, line, lines = text.split(), "", []\n    for w in words:\n        if len(line) + len(w) + (1 if line else 0) > width:\n            lines.append(line)\n            line = w\n        else:\n            line = f"{line} {w}" if line else w\n    return lines + ([line] if line else [])', inputs: ["'the quick brown fox', 10", "'a b c', 1", "'hello', 3", "'', 5"] },
  { program: 'from functools import reduce\ndef f(xs):\n    return reduce(lambda acc, x: acc * 10 + x, xs, 0)', inputs: ['[1, 2, 3]', '[]', '[0, 7]', '[9, 9, 9, 9]'] },
  {
    program: 'class Vec:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n    def __add__(self, other):\n        return Vec(self.x + other.x, self.y + other.y)\n    def __mul__(self, k):\n        return Vec(self.x * k, self.y * k)\n    def __eq__(self, other):\n        return (self.x, self.y) == (other.x, other.y)\n    def __repr__(self):\n        return f"Vec({self.x}, {self.y})"\ndef f(a, b, k):\n    v = (Vec(*a) + Vec(*b)) * k\n    return [repr(v), v == Vec(*a), v.x * v.y]',
    inputs: ['(1, 2), (3, 4), 2', '(0, 0), (0, 0), 5', '(1, -1), (2, 2), 3', '(5, 1), (-5, -1), 7'],
  },
  {
    program: 'from functools import total_ordering\n@total_ordering\nclass Card:\n    ORDER = "23456789TJQKA"\n    def __init__(self, text):\n        self.rank, self.suit = text[0], text[1]\n    def __lt__(self, other):\n        return self.ORDER.index(self.rank) < self.ORDER.index(other.rank)\n    def __eq__(self, other):\n        return self.rank == other.rank\n    def __hash__(self):\n        return hash(self.rank)\n    def __str__(self):\n        return self.rank + self.suit\ndef f(hand):\n    cards = sorted(Card(c) for c in hand.split())\n    return [str(c) for c in cards], str(max(cards)), len(set(c.rank for c in cards))',
    inputs: ["'5h Kd 2c'", "'Ah As'", "'9c'", "'Td 3s Qh 3c'"],
  },
  {
    program: 'from dataclasses import dataclass, field, asdict, replace\n@dataclass(order=True)\nclass Item:\n    price: float\n    name: str = ""\n    tags: list = field(default_factory=list)\ndef f(rows):\n    items = sorted(Item(p, n) for n, p in rows)\n    cheapest = replace(items[0], tags=["cheap"]) if items else None\n    return [asdict(i) for i in items[:2]], (asdict(cheapest) if cheapest else None)',
    inputs: ["[('pen', 1.5), ('ink', 0.5)]", "[('a', 2.0)]", '[]', "[('x', 3.0), ('y', 3.0), ('z', 1.0)]"],
  },
  {
    program: 'from collections import namedtuple\nPoint = namedtuple("Point", "x y")\ndef f(pairs):\n    pts = [Point(*p) for p in pairs]\n    far = max(pts, key=lambda p: p.x ** 2 + p.y ** 2, default=Point(0, 0))\n    moved = far._replace(x=far.x + 1)\n    return tuple(far), moved._asdict(), Point._fields',
    inputs: ['[(1, 2), (3, 4)]', '[]', '[(-5, 0), (1, 1)]', '[(2, 2)]'],
  },
  {
    program: 'from enum import Enum, auto\nclass Color(Enum):\n    RED = auto()\n    GREEN = auto()\n    BLUE = auto()\ndef f(names):\n    out = []\n    for n in names:\n        try:\n            c = Color[n.upper()]\n            out.append((c.name, c.value))\n        except KeyError:\n            out.append(None)\n    return out',
    inputs: ["['red', 'blue']", "['purple']", '[]', "['GREEN', 'green', 'x']"],
  },
  { program: 'def f(n):\n    evens = [i for i in range(n) if i % 2 == 0]\n    squares = {i: i * i for i in evens}\n    pairs = [(a, b) for a in range(3) for b in range(a, 3) if a + b == n % 4]\n    return evens, squares, pairs', inputs: ['5', '0', '8', '3'] },
  {
    program: 'def chunks(xs, size):\n    for i in range(0, len(xs), size):\n        yield xs[i:i + size]\ndef running(xs):\n    total = 0\n    for x in xs:\n        total += x\n        yield total\ndef f(xs, size):\n    return [sum(c) for c in chunks(xs, size)], list(running(xs)), next((x for x in xs if x > 2), -1)',
    inputs: ['[1, 2, 3, 4, 5], 2', '[], 3', '[7], 1', '[3, 1, 4, 1, 5, 9], 4'],
  },
  { program: 'def f(words):\n    by_len = sorted(words, key=len)\n    by_last = sorted(words, key=lambda w: (w[-1], w), reverse=True)\n    return by_len, by_last, list(map(lambda w: w[::-1], filter(lambda w: len(w) > 2, words)))', inputs: ["['pear', 'fig', 'apple']", "['ab']", "['kiwi', 'date', 'plum', 'lime']", "['a', 'bb', 'ccc']"] },
  { program: 'def f(s, i, j):\n    return s[i:j], s[::2], s[-1:-len(s) - 1:-1], s[i:], s[:j:3]', inputs: ["'abcdefgh', 2, 5", "'x', 0, 1", "'hello world', -5, -1", "'sandbox', 1, 100"] },
  {
    program: 'def f(text):\n    t = text.strip().lower()\n    words = t.replace(",", " ").split()\n    return [t.title(), t.count("a"), t.find("b"), "-".join(words), t.startswith("the"), t.center(20, "*"), t.zfill(12), t.partition(" "), t.isalpha()]',
    inputs: ["'  The cat, the bat  '", "'abc'", "''", "'Banana,split'"],
  },
  {
    program: 'def f(name, score, items):\n    a = "{} scored {}".format(name, score)\n    b = "{1}/{0}".format(name, score)\n    c = "{0[0]} and {0[1]}".format(items)\n    d = "{:>8.2f}|{:<5}|{:^7}".format(score / 3, name[:5], "mid")\n    e = "%s has %d items (%.1f%%)" % (name, len(items), score)\n    return [a, b, c, d, e]',
    inputs: ["'ann', 90, ['x', 'y']", "'bob', 7, [1, 2, 3]", "'c', 0, ['p', 'q']", "'dora', 100, [[1], [2]]"],
  },
  { program: 'def f(x, xs):\n    return [f"{x:05d}", f"{x:,}", f"{x!r:>6}", f"{x / 7:.3f}", f"{xs}", f"{len(xs)=}", f"{x:#x}", f"{x:b}"]', inputs: ['42, [1]', '1000000, []', '-7, [1, 2]', '0, [[]]'] },
  {
    program: 'def f(value):\n    match value:\n        case int(n) if n < 0:\n            return "negative int"\n        case int() | float():\n            return "number"\n        case str(s):\n            return "text of " + str(len(s))\n        case [first, *rest]:\n            return ("list", first, len(rest))\n        case {"kind": kind, **others}:\n            return ("dict", kind, sorted(others))\n        case (a, b):\n            return ("pair", a + b)\n        case _:\n            return "other"',
    inputs: ['-3', "'hey'", '[1, 2, 3]', "{'kind': 'k', 'z': 1, 'a': 2}"],
  },
  {
    program: 'def f(a, b):\n    try:\n        q = a // b\n    except ZeroDivisionError:\n        return "div by zero"\n    except TypeError as e:\n        return "type: " + type(e).__name__\n    else:\n        return q\n    finally:\n        pass',
    inputs: ['7, 2', '1, 0', "'x', 2", '-9, 4'],
  },
  {
    program: 'def f(n):\n    def moves(k, src, dst, via):\n        if k == 0:\n            return []\n        return moves(k - 1, src, via, dst) + [(src, dst)] + moves(k - 1, via, dst, src)\n    def perms(xs):\n        if len(xs) <= 1:\n            return [xs]\n        return [[x] + p for i, x in enumerate(xs) for p in perms(xs[:i] + xs[i + 1:])]\n    return len(moves(n, "A", "C", "B")), moves(min(n, 2), "A", "C", "B"), len(perms(list(range(min(n, 5)))))',
    inputs: ['1', '3', '0', '6'],
  },
  {
    program: 'import re\ndef f(text):\n    emails = re.findall(r"[\\w.]+@[\\w]+\\.com", text)\n    numbers = [int(n) for n in re.findall(r"\\d+", text)]\n    cleaned = re.sub(r"\\s+", " ", text).strip()\n    m = re.search(r"(\\w+)=(\\d+)", text)\n    return emails, numbers, cleaned, (m.group(1), m.group(2)) if m else None, re.split(r"[;,]", text)[:3]',
    inputs: ["'mail a.b@x.com or c@y.com; id=42'", "'nothing here'", "'x=1,y=2 , z'", "'  lots   of   space 7 '"],
  },
  {
    program: 'from collections import defaultdict, deque, OrderedDict\ndef f(edges, start):\n    graph = defaultdict(list)\n    for a, b in edges:\n        graph[a].append(b)\n        graph[b].append(a)\n    seen, order, queue = {start}, [], deque([start])\n    while queue:\n        node = queue.popleft()\n        order.append(node)\n        for nxt in sorted(graph[node]):\n            if nxt not in seen:\n                seen.add(nxt)\n                queue.append(nxt)\n    od = OrderedDict((n, i) for i, n in enumerate(order))\n    od.move_to_end(start)\n    return order, list(od.items())',
    inputs: ['[(1, 2), (1, 3), (2, 4)], 1', '[], 5', '[(0, 1), (1, 2), (2, 0)], 2', '[(1, 2), (3, 4)], 3'],
  },
  {
    program: 'import itertools\ndef f(xs, r):\n    combos = list(itertools.combinations(xs, r))\n    perms = len(list(itertools.permutations(xs, r)))\n    groups = [(k, len(list(g))) for k, g in itertools.groupby(sorted(xs))]\n    acc = list(itertools.accumulate(xs))\n    pairs = list(zip(xs, itertools.islice(itertools.count(10), len(xs))))\n    chained = list(itertools.chain.from_iterable([[x, x] for x in xs[:2]]))\n    return combos[:3], perms, groups, acc, pairs, chained, list(itertools.product("ab", repeat=2))[:3]',
    inputs: ['[1, 2, 2, 3], 2', '[5], 1', '[], 0', '[3, 1, 3], 3'],
  },
  {
    program: 'import functools\n@functools.lru_cache(maxsize=None)\ndef ways(n):\n    return 1 if n <= 1 else ways(n - 1) + ways(n - 2)\ndef f(n, xs):\n    add = functools.partial(lambda a, b: a + b, 100)\n    key = functools.cmp_to_key(lambda a, b: (a % 3) - (b % 3) or a - b)\n    return ways(n), add(n), sorted(xs, key=key), functools.reduce(max, xs, 0)',
    inputs: ['10, [5, 3, 9, 1]', '1, []', '30, [2, 2]', '0, [7, 4, 1]'],
  },
  { program: 'import bisect\ndef f(xs, queries):\n    xs = sorted(xs)\n    ranks = [bisect.bisect_left(xs, q) for q in queries]\n    for q in queries:\n        bisect.insort(xs, q)\n    return ranks, xs, bisect.bisect_right(xs, 3)', inputs: ['[1, 3, 5], [0, 3, 6]', '[], [1]', '[2, 2, 2], [2]', '[10, 20], [15, 5, 25]'] },
  { program: 'import math\ndef f(x, n):\n    return [round(math.sqrt(x), 6), math.isqrt(n), math.factorial(n % 15), math.comb(n, 2), math.floor(-x), math.ceil(x), round(math.hypot(3, x), 4), math.prod([1, 2, n]), math.log2(n + 1) if n else 0.0]', inputs: ['2.0, 10', '9.0, 0', '0.5, 100', '16.0, 7'] },
  { program: 'def f(n):\n    if n < 2:\n        return []\n    sieve = [True] * (n + 1)\n    sieve[0] = sieve[1] = False\n    for i in range(2, int(n ** 0.5) + 1):\n        if sieve[i]:\n            sieve[i * i::i] = [False] * len(sieve[i * i::i])\n    return [i for i, p in enumerate(sieve) if p]', inputs: ['10', '1', '30', '2'] },
  {
    program: 'class Stack:\n    def __init__(self):\n        self._items = []\n    def push(self, x):\n        self._items.append(x)\n        return self\n    def pop(self):\n        return self._items.pop()\n    def __len__(self):\n        return len(self._items)\n    def __bool__(self):\n        return bool(self._items)\ndef f(expr):\n    pairs, st = {")": "(", "]": "["}, Stack()\n    for ch in expr:\n        if ch in "([":\n            st.push(ch)\n        elif ch in pairs:\n            if not st or st.pop() != pairs[ch]:\n                return False\n    return not st',
    inputs: ["'([])'", "'(]'", "''", "'(('"],
  },
  {
    program: 'from typing import List, Optional, Dict\ndef f(rows: List[List[int]], target: int) -> Optional[Dict[str, int]]:\n    for i, row in enumerate(rows):\n        for j, v in enumerate(row):\n            if v == target:\n                return {"row": i, "col": j}\n    return None',
    inputs: ['[[1, 2], [3, 4]], 4', '[], 1', '[[5, 5]], 5', '[[0]], 9'],
  },
  { program: 'def f(xs):\n    stats = {"min": min(xs, default=None), "max": max(xs, default=None), "sum": sum(xs), "all": all(x > 0 for x in xs), "any": any(x > 3 for x in xs)}\n    return stats, list(reversed(xs)), sorted(set(xs)), divmod(sum(xs), 3), abs(-len(xs))', inputs: ['[3, 1, 4, 1, 5]', '[]', '[-2, 7]', '[0]'] },
  { program: 'def f(a, b):\n    common = sorted(set(a) & set(b))\n    only_a = sorted(set(a) - set(b))\n    union = sorted(set(a) | set(b))\n    sym = sorted(set(a) ^ set(b))\n    return common, only_a, union, sym, frozenset(a) <= frozenset(b)', inputs: ['[1, 2, 3], [2, 3, 4]', '[], [1]', '[5, 5], [5]', '[1, 9], []'] },
  { program: 'import statistics\nfrom fractions import Fraction\ndef f(xs):\n    if not xs:\n        return None\n    return [statistics.mean(xs), statistics.median(xs), statistics.mode(xs), str(Fraction(sum(xs), len(xs))), round(statistics.pstdev(xs), 4)]', inputs: ['[1, 2, 3, 4]', '[5]', '[]', '[2, 2, 3, 9]'] },
  { program: 'import string\ndef f(s, shift):\n    lower = string.ascii_lowercase\n    table = str.maketrans(lower, lower[shift:] + lower[:shift])\n    return s.translate(table), string.capwords(s), [c for c in s if c in string.digits]', inputs: ["'hello world 42', 3", "'abc', 0", "'', 1", "'zebra 9', 25"] },
  { program: 'def f(n):\n    table = [[i * j for j in range(1, n + 1)] for i in range(1, n + 1)]\n    diag = [table[i][i] for i in range(n)]\n    flat = [x for row in table for x in row if x % 2]\n    return diag, sum(flat), table[-1] if table else []', inputs: ['3', '0', '5', '1'] },
  { program: 'import json\ndef f(text):\n    data = json.loads(text)\n    data["count"] = len(data.get("items", []))\n    return json.dumps(data, sort_keys=True), sorted(data)', inputs: ['\'{"items": [1, 2], "name": "x"}\'', "'{}'", '\'{"items": []}\'', '\'{"b": null, "a": true}\''] },
  { program: 'def f(s):\n    seen, dup = set(), []\n    for ch in s:\n        if ch in seen and ch not in dup:\n            dup.append(ch)\n        seen.add(ch)\n    return dup, len(seen), s.swapcase(), s.isdigit(), [ord(c) - ord("a") for c in s[:3]]', inputs: ["'banana'", "'abc'", "'123'", "''"] },
  {
    program: "def f(s):\n    out = []\n    for codec in ('cp1251', 'shift_jis', 'euc_kr', 'koi8_r', 'mac_roman', 'gb2312', 'big5', 'cp037', 'iso8859_5', 'utf_16_be', 'cp850', 'euc_jp'):\n        try:\n            data = s.encode(codec)\n            out.append((data, data.decode(codec) == s))\n        except UnicodeEncodeError:\n            out.append(None)\n    return out",
    inputs: ["'abc'", "'\\u041f\\u0440\\u0438\\u0432\\u0435\\u0442'", "'\\u65e5\\u672c\\u8a9e'", "'caf\\u00e9 \\u00fc'"], // Cyrillic, Japanese, Latin accents: every codec Pyodide ships
  },
  { program: "import re\ndef f(n):\n    text = ('word%d, other-%d; ' % (n, n)) * 300\n    return len(re.findall(r'\\w+', text)), len(re.sub(r'\\s+', ' ', text)), re.split(r'[,;]\\s*', text)[:3], len(re.findall(r'(\\w+)-(\\d+)', text)), bool(re.compile(r'(\\d+);').search(text))", inputs: ['1', '22', '333', '4444'] }, // regular expressions over a few thousand characters pay little
  { program: 'def f(k):\n    return (10 ** 10000 // (10 ** 3000 + k)) % 1000, divmod(7 ** 3000, 3 ** 1000 + k)[1] % 97', inputs: ['7', '0', '123', '-1'] }, // CPython's _pylong divides these
  { program: 'import textwrap\ndef f(text, width):\n    return textwrap.wrap(text, width), textwrap.shorten(text, width=max(width, 5) * 2, placeholder="..."), textwrap.dedent("  a\\n  b")', inputs: ["'one two three four five', 8", "'short', 10", "'', 3", "'a very long sentence indeed', 9"] },
];
