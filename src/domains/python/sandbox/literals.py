# Layer 4: values as text. Inputs and answers are parsed as literals (never evaluated), and values become canonical
# text, by code that walks exact builtin types iteratively.
#
# Threat: an input or answer that is code, or data nested so deep that parsing or printing it recurses in C; a
# value whose own methods (__repr__, __eq__, __iter__) would judge it.

import ast
import itertools
from .limits import MAX_INPUT_CHARS, MAX_INT_BITS, MAX_NESTING, MAX_RESULT_CHARS, Refused, _run

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
