# Layer 1: the source, by allow-list, before anything runs.
#
# Threat: every way a name becomes an attribute lookup (attributes, `match` keyword patterns, __match_args__,
# from-imports) reaching a frame, code, globals, a class's subclasses or a method that evaluates text; dunder
# methods that library or sandbox code would call by name (__del__, __getattr__, __reduce__…); handlers that
# would catch the sandbox's refusals; imports of anything but the module views; `type` anywhere but as the callee
# of a one-argument call or the class tested by isinstance/issubclass (an alias of it would make classes from a
# dict of names). A name read as an attribute is a public name of a builtin type or an exposed library class, or
# else it goes through a guard that reads it from the program's own objects only (guards.py's _guard_attr): no
# string of the program's, and nothing it names, widens what it may read from the library.

import ast
import collections
import functools
import json
import re
import sys
import textwrap
import types
from hashlib import sha256 as _sha256
from .guards import WALKING_METHODS
from .regex_checks import PATTERN_METHODS
from .limits import GUARD_PREFIX
from .world import _BUILTINS, _MODULE_VIEWS

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
GUARDED_METHODS = frozenset({'format', 'format_map', 'ljust', 'rjust', 'center', 'zfill', 'expandtabs', 'replace', 'join', 'from_bytes', 'to_bytes', 'sort'}) | WALKING_METHODS | PATTERN_METHODS
# Names in `except` clauses that would catch the sandbox's refusals.
UNCATCHABLE = frozenset({'BaseException', 'BaseExceptionGroup', 'SystemExit', 'KeyboardInterrupt', 'GeneratorExit'})

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
# The names a node binds: none may be a dunder or one of the sandbox's.
_BOUND_NAMES = {
    ast.arg: lambda node: (node.arg,), ast.keyword: lambda node: (node.arg,), ast.Global: lambda node: node.names,
    ast.Nonlocal: lambda node: node.names, ast.alias: lambda node: (node.asname or node.name.split('.')[0],),
    ast.ExceptHandler: lambda node: (node.name,), ast.MatchAs: lambda node: (node.name,),
    ast.MatchStar: lambda node: (node.name,), ast.MatchMapping: lambda node: (node.rest,),
}
# The nodes that bind a name in a scope (a keyword argument does not).
_BINDERS = {**{kind: names for kind, names in _BOUND_NAMES.items() if kind is not ast.keyword}, ast.FunctionDef: lambda node: (node.name,), ast.ClassDef: lambda node: (node.name,)}


def _is_dunder(name):
    return len(name) > 4 and name.startswith('__') and name.endswith('__')


_BRANCHING = frozenset({ast.If, ast.For, ast.While, ast.IfExp, ast.ExceptHandler, ast.comprehension, ast.match_case, ast.Assert})


class _Survey:
    """One walk over the tree: its nodes, the names the program binds (definitions, assignments, parameters), the
    attribute names it stores; the nodes that make a class's namespace; and the program's metrics. Nothing is read
    out of its strings."""

    def __init__(self, tree):
        self.nodes = []  # in source order: the first rule broken is the first in the text
        self.names = set()
        self.stored_attributes = set()  # names the program stores as attributes, or binds in a class body
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
            if kind is ast.ClassDef:
                self.class_level.update(map(id, node.body))
                for statement in node.body:
                    targets = statement.targets if type(statement) is ast.Assign else [statement.target] if type(statement) is ast.AnnAssign else []
                    self.class_level.update(id(target) for target in targets if type(target) is ast.Name)
                    self.stored_attributes.update(target.id for target in targets if type(target) is ast.Name)
                    if type(statement) is ast.FunctionDef:
                        self.stored_attributes.add(statement.name)
            elif kind is ast.Attribute:
                if type(node.ctx) is not ast.Load:
                    self.stored_attributes.add(node.attr)
            binder = _BINDERS.get(kind)
            if binder is not None or kind is ast.Name and type(node.ctx) is not ast.Load:
                self.names.update(name for name in (binder(node) if binder else (node.id,)) if name)
            stack.extend((child, level + 1) for child in reversed(list(ast.iter_child_nodes(node))))  # in source order
        normal = ast.dump(tree, annotate_fields=False)  # formatting and comments do not make a program distinct
        self.metrics = {'nodes': len(self.nodes), 'depth': depth, 'cyclomatic': 1 + branches, 'hash': _sha256(normal.encode()).hexdigest()[:16]}


class _Checker:
    """Layer 1: every node of the survey against the rules of its kind; the first rule broken is the refusal."""

    def __init__(self, survey):
        self.survey = survey
        self.guarded_attributes = set()  # names read through _guard_attr (rewrite.py): the program's own objects only
        self.type_positions = set()  # ids of the Name nodes where `type` may stand: see call_refusal
        self.rules = {
            ast.Attribute: self.attribute_refusal, ast.MatchClass: self.pattern_refusal, ast.Name: self.name_node_refusal,
            ast.FunctionDef: self.definition_refusal, ast.ClassDef: self.definition_refusal, ast.Assign: self.class_assign_refusal,
            ast.ExceptHandler: self.handler_refusal, ast.Import: self.import_refusal, ast.ImportFrom: self.import_refusal,
            ast.Call: self.call_refusal,
        }

    def check(self):
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
                if name and (_is_dunder(name) or name.startswith(GUARD_PREFIX) or name == 'type' and kind is not ast.keyword):
                    return 'forbidden-syntax', f'the name {name} (line {getattr(node, "lineno", "?")}) is reserved: give yours another name'
        return None

    @staticmethod
    def attribute_access(name):
        """How a name may be read as an attribute: 'direct' (a public name of the builtin types and the exposed
        library, or a dunder of READABLE_DUNDERS), 'guarded' (read from the program's own objects only), or None."""
        if _is_dunder(name):
            return 'direct' if name in READABLE_DUNDERS else None
        if name in _DANGEROUS_ATTRIBUTES or name in _LIBRARY_PRIVATE:
            return None
        if name in _SAFE_ATTRIBUTES or name in GUARDED_METHODS or name in READABLE_PRIVATE:
            return 'direct'
        return 'guarded'

    def attribute_refusal(self, node):
        access = self.attribute_access(node.attr)
        if access is None or type(node.ctx) is not ast.Load and _is_dunder(node.attr):
            return 'forbidden-attribute', f".{node.attr} (line {node.lineno}) is out of the sandbox's reach"
        if access == 'guarded' and type(node.ctx) is ast.Load:
            self.guarded_attributes.add(node.attr)
        return None

    def pattern_refusal(self, node):
        """`case C(name=…)` reads `name` in C code: never a name out of reach; a name the library does not give is
        judged with C's value at match time (rewrite.py's _PatternClasses)."""
        for name in node.kwd_attrs:
            if self.attribute_access(name) is None:
                return 'forbidden-attribute', f"the pattern attribute {name}= (line {node.lineno}) is out of the sandbox's reach"
        return None

    def name_node_refusal(self, node):
        if node.id == 'type' and id(node) not in self.type_positions:
            if type(node.ctx) is not ast.Load:
                return 'forbidden-syntax', f'the name type (line {node.lineno}) is the builtin\'s: give your variable another name'
            return 'forbidden-builtin', f'type (line {node.lineno}) may only be called with one argument or given to isinstance/issubclass: an alias of it makes classes from a dict of names'
        return self.name_refusal(node.id, node.lineno, type(node.ctx) is ast.Load, id(node) in self.survey.class_level)

    def definition_refusal(self, node):
        if node.name == 'type':
            return 'forbidden-syntax', f'the name type (line {node.lineno}) is the builtin\'s: give your function or class another name'
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
        """Where `type` may stand (the survey visits a call before its callee and arguments): as the callee of a
        call with one positional argument (rewrite.py checks its result by value: never a metaclass), and as the
        class, or one of the tuple of classes, given to isinstance or issubclass. Nowhere else: no alias."""
        func = node.func
        if type(func) is ast.Name and func.id == 'type':
            if len(node.args) != 1 or node.keywords or type(node.args[0]) is ast.Starred:
                return 'forbidden-builtin', f'type() with three arguments (line {node.lineno}) makes a class from a dict of names; use a class statement'
            self.type_positions.add(id(func))
        elif type(func) is ast.Name and func.id in ('isinstance', 'issubclass') and len(node.args) == 2:
            tested = node.args[1]
            for part in tested.elts if type(tested) is ast.Tuple else (tested,):
                if type(part) is ast.Name and part.id == 'type':
                    self.type_positions.add(id(part))
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
        """A positional class pattern reads these names in C code: each must be one the library may give, or one the
        program stores on its own objects (never a private name of the library's)."""
        def allowed(item):
            if not (isinstance(item, ast.Constant) and isinstance(item.value, str)):
                return False
            access = self.attribute_access(item.value)
            return access == 'direct' or access == 'guarded' and item.value in self.survey.stored_attributes
        if isinstance(value, ast.Tuple) and all(allowed(item) for item in value.elts):
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
