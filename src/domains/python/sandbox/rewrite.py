# Layer 2: the rewrite of the checked program.
#
# Threat: what takes unbounded memory, time or C recursion in one step. `*`, `**`, `<<`, `%`, `//`, `/` (augmented
# too), comparisons, `in` and f-string fields (nesting, walks), calls of str/bytes/bytearray/int/type, range outside
# a `for`, `.format`/`.format_map`, joins and the paddings go through a guard (guards.py); attributes the library
# does not give are read through _guard_attr; attributes are stored only on the program's own objects; the class of
# a `case C(...)` pattern is judged by value before C code reads the subject's attributes; a bare `except:` becomes
# `except Exception:`.

import ast
import copy
import sys
from .guards import _CLASS_DICT, _CLASS_MRO, _guard_attr, _resolutions
from .limits import GUARD_PREFIX, PROGRAM_FILE, PROGRAM_MODULE, REAL_BUILTINS_FOR_TESTS, Refused, _refuse
from .source_checks import GUARDED_METHODS, _Checker, _Survey
from .world import _GUARDS

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

    BINARY = {ast.Mult: 'mul', ast.Pow: 'pow', ast.LShift: 'lshift', ast.Mod: 'mod', ast.FloorDiv: 'floordiv', ast.Div: 'truediv', ast.Add: 'add'}
    CALLS = {'str': 'str', 'bytes': 'bytes', 'bytearray': 'bytearray', 'int': 'int', 'list': 'list', 'tuple': 'tuple', 'set': 'set', 'frozenset': 'frozenset', 'dict': 'dict'}
    WALKING = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.In, ast.NotIn)

    def __init__(self, program_names, guarded_attributes):
        self.calls = {name: guard for name, guard in self.CALLS.items() if name not in program_names}
        self.loop_range = 'range' not in program_names
        self.guarded_attributes = guarded_attributes

    def visit_BinOp(self, node):
        self.generic_visit(node)
        guard = self.BINARY.get(type(node.op))
        if guard is None:
            return node
        return ast.copy_location(_guard_call(guard, node.left, node.right), node)

    # `x op= y`: the real in-place operation runs, after a check of the sizes. A target with calls in it cannot be
    # read twice: refused for the operations that make big values in one step, left unchecked for divisions (whose
    # cost the next steps' fuel bounds) and concatenation (`+=` grows memory, which the limits see).
    AUGMENTED = {ast.Mult: 'mul', ast.Pow: 'pow', ast.LShift: 'lshift', ast.Mod: 'mod', ast.FloorDiv: 'floordiv', ast.Div: 'truediv'}
    UNCHECKABLE_LEFT_ALONE = (ast.FloorDiv, ast.Div)

    def visit_AugAssign(self, node):
        pure = _pure(node.target)
        self.generic_visit(node)
        guard = self.AUGMENTED.get(type(node.op))
        if guard is None or not pure and isinstance(node.op, self.UNCHECKABLE_LEFT_ALONE):
            return node
        target = node.target
        if not pure:
            return ast.copy_location(ast.Expr(_guard_call('refuse_target', ast.Constant(node.lineno))), node)
        current = ast.copy_location(_as_load(target), target)
        node.value = ast.copy_location(_guard_call(f'check_{guard}', current, node.value), node.value)
        return node

    def visit_Compare(self, node):
        self.generic_visit(node)
        if len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)) and not _is_scalar_constant(node.comparators[0]):
            contains = ast.copy_location(_guard_call('contains', node.left, node.comparators[0]), node)
            return contains if isinstance(node.ops[0], ast.In) else ast.copy_location(ast.UnaryOp(ast.Not(), contains), node)
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

    def visit_Subscript(self, node):
        self.generic_visit(node)
        if isinstance(node.ctx, ast.Load) and isinstance(node.slice, ast.Slice):
            return ast.copy_location(_guard_call('slice', node.value, node.slice), node)
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
        if node.attr == '__class__':
            return ast.copy_location(_guard_call('class', node.value), node)
        if node.attr in self.guarded_attributes:
            return ast.copy_location(_guard_call('attr', node.value, ast.Constant(node.attr)), node)
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == 'type':  # one argument: source_checks.py refuses others
            node.func = ast.copy_location(ast.Name(GUARD_PREFIX + 'type', ast.Load()), node.func)
        elif isinstance(node.func, ast.Name) and node.func.id in self.calls:
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

    def visit_MatchClass(self, node):
        """`case C(p, k=q)`: C code reads the subject's attributes by the names C.__match_args__ and the pattern give,
        once isinstance(subject, C) says yes. C becomes `_guard_classes.<'C k'>`: looked up and judged by value at
        match time (_PatternClasses), with the keyword names in the lookup's key."""
        node.patterns = [self.visit(pattern) for pattern in node.patterns]
        node.kwd_patterns = [self.visit(pattern) for pattern in node.kwd_patterns]
        if node.patterns or node.kwd_attrs:
            key = ' '.join([_dotted(node.cls), *node.kwd_attrs])
            node.cls = ast.copy_location(ast.Attribute(ast.Name(GUARD_PREFIX + 'classes', ast.Load()), key, ast.Load()), node.cls)
        return node

    def visit_ExceptHandler(self, node):
        self.generic_visit(node)
        if node.type is None:  # a bare except would catch the sandbox's refusals
            node.type = ast.copy_location(ast.Name('Exception', ast.Load()), node)
        return node


def _dotted(node):
    """The dotted name a class pattern gives its class by (a Name, or attributes of one)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return '.'.join([node.id, *reversed(parts)])


class _PatternClasses:
    """The classes of class patterns, looked up by name in the matching frame and judged by value: the class of a
    program's own must decide isinstance as type does (no metaclass of the library's, ABCMeta or a Protocol's, that
    says yes to any object), and every name C code will read from the subject (its __match_args__, the pattern's
    keywords) must be one the library gives, or resolve in a class of the program's."""

    def __getattr__(self, key, frame_of=sys._getframe):
        path, *keywords = key.split(' ')
        first, *attributes = path.split('.')
        frame = frame_of(1)
        scopes = (frame.f_locals, frame.f_globals, frame.f_builtins)
        scope = next((scope for scope in scopes if first in scope), None)
        if scope is None:
            raise NameError(f"name '{first}' is not defined")
        value = scope[first]
        for attribute in attributes:
            value = getattr(value, attribute) if _Checker.attribute_access(attribute) == 'direct' else _guard_attr(value, attribute)
        if isinstance(value, type):
            _check_pattern_class(value, keywords)
        return value


def _check_pattern_class(cls, keywords, module=PROGRAM_MODULE):
    if _CLASS_DICT(cls).get('__module__') == module:
        hooks = [base for base in _CLASS_MRO(type(cls)) if base is not type and base is not object and '__instancecheck__' in _CLASS_DICT(base)]
        if hooks:
            _refuse('forbidden-attribute', f'a class pattern on {cls.__name__}, whose metaclass {type(cls).__name__} decides isinstance itself')
    match_args = next((_CLASS_DICT(base)['__match_args__'] for base in _CLASS_MRO(cls) if '__match_args__' in _CLASS_DICT(base)), ())
    if type(match_args) is not tuple or not all(type(name) is str for name in match_args):
        _refuse('forbidden-attribute', f'{cls.__name__}.__match_args__ must be a tuple of names')
    for name in (*match_args, *keywords):
        access = _Checker.attribute_access(name)
        if access is None or access == 'guarded' and not _resolutions[cls, name, False]:
            _refuse('forbidden-attribute', f'a class pattern on {cls.__name__} would read .{name}, which is out of the sandbox\'s reach')


_GUARDS[GUARD_PREFIX + 'classes'] = _PatternClasses()


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
    if REAL_BUILTINS_FOR_TESTS:
        return compile(tree, PROGRAM_FILE, 'exec'), survey.metrics
    checker = _Checker(survey)
    refusal = checker.check()
    if refusal:
        return Refused(*refusal)
    if not any(isinstance(node, ast.FunctionDef) and node.name == 'f' for node in tree.body):
        return Refused('no-function', 'the program must define a top-level function f')
    code = compile(ast.fix_missing_locations(_Rewrite(survey.names, checker.guarded_attributes).visit(tree)), PROGRAM_FILE, 'exec')
    return code, survey.metrics
