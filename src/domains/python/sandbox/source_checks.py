# Layer 1: the source, by allow-list, before anything runs.
#
# Threat: every way a name becomes an attribute lookup (attributes, `match` keyword patterns, __match_args__,
# from-imports) reaching a frame, code, globals, a class's subclasses or a method that evaluates text; dunder
# methods that library or sandbox code would call by name (__del__, __getattr__, __reduce__…); handlers that
# would catch the sandbox's refusals; imports of anything but the module views. A name read as an attribute must
# be a public name of a builtin type or an exposed library class, or one the program gives its own things.

import ast
import collections
import functools
import json
import re
import sys
import textwrap
import types
from hashlib import sha256 as _sha256
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
GUARDED_METHODS = frozenset({'format', 'format_map', 'ljust', 'rjust', 'center', 'zfill', 'expandtabs', 'replace', 'from_bytes', 'to_bytes', 'sort', 'index', 'count', 'remove'})
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
