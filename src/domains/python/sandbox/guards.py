# Layer 3, the guards the rewritten program calls (rewrite.py puts the calls in).
#
# Threat: one operation that takes unbounded memory, time or C recursion: `*`, `**`, `<<` and `%` on big values,
# paddings and format widths, `.format` with attribute fields (a getattr by string), `range` walked in C, attribute
# stores on library objects (a change that would outlive the input). Each guard checks the size before the C call
# and charges fuel for the items made.

import _string
import array
import collections
import fractions
import itertools
import math
import operator
import re
import sys
import types
from .regex_checks import PATTERN_METHODS, _pattern_method
from .limits import MADE_ITEMS_PER_FUEL, CHECKED_ITEMS_PER_FUEL, WALKED_ITEMS_PER_FUEL, MAX_FORMAT_WIDTH, MAX_INT_BITS, MAX_ITEMS, MAX_MODPOW_COST, MAX_RANGE, PROGRAM_FILE, PROGRAM_MODULE, RANGE_ITEMS_PER_FUEL, _charge, _refuse, _run, _shallow

# ---- layer 3: the guards the rewritten program calls --------------------------------------------------------------

_SEQUENCES = (str, bytes, bytearray, list, tuple, array.array, collections.deque, collections.UserList, collections.UserString)


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
            if b < 0:  # a modular inverse first: an extended Euclid, a step (a division) per bit of the modulus
                _check_division(a, modulo)
                _charge(modulo.bit_length() * (modulo.bit_length() // DIGIT_BITS + 1))
        return
    if not isinstance(a, (int, fractions.Fraction)) or not isinstance(b, (int, fractions.Fraction)):
        return
    if isinstance(b, fractions.Fraction):
        if b.denominator != 1:
            return  # a fraction to a fractional power is a float
        b = b.numerator
    if isinstance(a, int):
        if b > 0 and abs(a) > 1:  # (a negative power of an int is a float)
            _check_size('bits', int(b * math.log2(abs(a))) + 1)
    elif b != 0:  # a Fraction's numerator and denominator are both raised, whatever its size and b's sign
        _check_size('bits', int(abs(b) * sum(math.log2(abs(part)) for part in (a.numerator, a.denominator) if part)) + 1)


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


# Division of big integers takes time in C by the product of the operands' sizes (schoolbook long division), one
# step of fuel for so many digit operations; below SMALL_DIVISION_BITS it is too cheap to count.
SMALL_DIVISION_BITS = 2048
DIGIT_BITS = 30  # CPython's integer digits on wasm32


def _check_division(a, b, int=int, type=type):
    """Fuel for dividing big integers (//, %, /, divmod): digits of a times digits of b."""
    if type(a) is int and type(b) is int and (a.bit_length() > SMALL_DIVISION_BITS or b.bit_length() > SMALL_DIVISION_BITS):
        _charge((a.bit_length() // DIGIT_BITS + 1) * (b.bit_length() // DIGIT_BITS + 1))
    return b


def _guard_mod(a, b, type=type, int=int, float=float, small=SMALL_DIVISION_BITS):
    if type(a) is float or type(a) is int and a.bit_length() <= small:
        return a % b
    if isinstance(a, (str, bytes, bytearray)):
        _check_printf(a, b)
    else:
        _check_division(a, b)
    return a % b


def _check_mod(a, b):
    """`a %= b`: the check alone (the assignment does the operation); returns b."""
    if isinstance(a, (str, bytes, bytearray)):
        _check_printf(a, b)
    return _check_division(a, b)


def _guard_floordiv(a, b, type=type, int=int, float=float, small=SMALL_DIVISION_BITS):
    if type(a) is float or type(a) is int and a.bit_length() <= small:
        return a // b
    _check_division(a, b)
    return a // b


def _guard_truediv(a, b, type=type, int=int, float=float, small=SMALL_DIVISION_BITS):
    if type(a) is float or type(a) is int and a.bit_length() <= small:
        return a / b
    _check_division(a, b)
    return a / b


def _guard_slice(value, key, type=type, len=len, sized=frozenset({str, bytes, bytearray, list, tuple}), short=MADE_ITEMS_PER_FUEL):
    """value[a:b]: a copy of the items, made in C; a long one costs fuel by its items (a slice of a long list taken
    again and again is counted)."""
    part = value[key]
    if type(part) in sized and len(part) > short:
        _charge(len(part))
    return part


def _guard_add(a, b, type=type, len=len, sized=frozenset({str, bytes, bytearray, list, tuple}), short=MADE_ITEMS_PER_FUEL):
    """a + b: a concatenation copies both in C; a long one costs fuel by its items."""
    total = a + b
    if type(total) in sized and len(total) > short:
        _charge(len(total))
    return total


def _guard_contains(item, container, type=type, sized=frozenset({list, tuple, str, bytes, bytearray, collections.deque})):
    """`item in container`: C code compares item with each element of a sequence (a walk fuel counts; a set or dict
    looks it up by hash), and the comparison nests as deep as item does."""
    _shallow(item)
    if type(container) in sized:
        _charge(len(container), WALKED_ITEMS_PER_FUEL)
    return item in container


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


def _checked_unbound_format_map(method):
    def format_map(template, mapping):
        _check_format_string(template, (), mapping if isinstance(mapping, dict) else {})
        return method(template, mapping)
    return format_map


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


def _checked_join(method, separator):
    """str.join and bytes.join: the size of the result is known before it is made (the items' true lengths, not a
    __len__ of the program's), so a join too big is refused before C code builds it."""
    true_len = str.__len__ if isinstance(separator, str) else len

    def join(iterable):
        items = iterable if type(iterable) is list or type(iterable) is tuple else list(iterable)
        _charge(len(items), CHECKED_ITEMS_PER_FUEL)  # before the sizes are summed, which costs more than the join itself
        try:
            size = sum(map(true_len, items)) + len(separator) * max(len(items) - 1, 0)
        except TypeError:
            return method(items)  # an item of another type: join raises the same error
        if size > MAX_ITEMS:
            _refuse('memory', f'a join of {size} items exceeds the limit of {MAX_ITEMS}')
        _charge(size)
        return method(items)
    return join


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


# Methods that walk their object in C (a search, a count, a copy, a case change, a split): each costs fuel by the
# object's items once it is long, so calling one again and again on a long string or list is counted.
_WALKED_TYPES = frozenset({str, bytes, bytearray, list, tuple, dict, set, frozenset, collections.deque})
WALKING_METHODS = frozenset({
    'count', 'index', 'remove', 'find', 'rfind', 'rindex', 'split', 'rsplit', 'splitlines', 'strip', 'lstrip', 'rstrip',
    'upper', 'lower', 'casefold', 'swapcase', 'title', 'capitalize', 'translate', 'encode', 'decode', 'partition',
    'rpartition', 'isdigit', 'isalpha', 'isalnum', 'isspace', 'islower', 'isupper', 'isdecimal', 'isnumeric', 'copy',
    'reverse', 'insert', 'pop', 'hex', 'replace', 'expandtabs', 'sort', 'fromkeys',
})
SHORT_ITEMS = 64  # up to this many items, a walking method is too cheap to count
_LIST_ONLY = frozenset({'pop', 'insert'})  # they move a list's items (a dict's pop, a deque's, do not walk)


def _checked_fromkeys(method, walked=_WALKED_TYPES):
    def fromkeys(iterable, *value):
        if type(iterable) in walked:
            _charge(len(iterable), WALKED_ITEMS_PER_FUEL)
        return method(iterable, *value)
    return fromkeys

def _guard_method(value, name, getattr=getattr, type=type, walked=_WALKED_TYPES, walking=WALKING_METHODS, len=len):
    """Layer 2: `value.name` for the names of GUARDED_METHODS; the check applies where the name is the builtin one."""
    method = getattr(value, name)
    if name in walking and type(value) in walked and len(value) > SHORT_ITEMS and (name not in _LIST_ONLY or type(value) is list):
        _charge(len(value), WALKED_ITEMS_PER_FUEL)
    if name == 'fromkeys' and isinstance(value, type):
        return _checked_fromkeys(method)
    if name in PATTERN_METHODS and (isinstance(value, re.Pattern) or value is re.Pattern):
        return _pattern_method(value, name, method)
    if name in ('format', 'format_map'):
        if isinstance(value, str):
            return _checked_format(method, value) if name == 'format' else _checked_format_map(method, value)
        if isinstance(value, type) and issubclass(value, str):  # str.format, or a subclass's, unbound
            return _checked_unbound_format(method) if name == 'format' else _checked_unbound_format_map(method)
        return method
    text_like = isinstance(value, (str, bytes, bytearray))
    if name in ('ljust', 'rjust', 'center', 'zfill') and text_like:
        return _checked_padding(method)
    if name == 'expandtabs' and text_like:
        return _checked_expandtabs(method, len(value))
    if name == 'replace' and text_like:
        return _checked_replace(method, len(value))
    if name == 'join' and text_like:
        return _checked_join(method, value)
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


_CLASS_DICT = type.__dict__['__dict__'].__get__  # a class's own namespace, by type's C slot: no hook of the class runs
_CLASS_MRO = type.__dict__['__mro__'].__get__
_ATTRIBUTE_HOOKS = ('__getattr__', '__getattribute__')


class _Resolutions(dict):
    """(class, name, read from the class itself) → whether the name may be read: it resolves in a class of the
    program's, or in none where the class is the program's (the instance's own dict, else an AttributeError), and
    no library class on the way answers for it (a method of the library's, a __getattr__). Kept for one run."""

    def __missing__(self, key, module=PROGRAM_MODULE):
        owner, name, from_class = key
        self[key] = allowed = self.resolve(owner, name, from_class, module)
        return allowed

    @staticmethod
    def resolve(owner, name, from_class, module):
        mro = _CLASS_MRO(owner)
        for base in mro:
            namespace = _CLASS_DICT(base)
            if name in namespace:
                return namespace.get('__module__') == module
        if _CLASS_DICT(owner).get('__module__') != module:
            return False
        if from_class and type(owner) is not type:
            return False  # a metaclass of the library's (EnumType, ABCMeta) would answer next
        return not any(hook in _CLASS_DICT(base) for base in mro if base is not object for hook in _ATTRIBUTE_HOOKS)


_resolutions = _Resolutions()


def _guard_attr(value, name, type=type, run=_run, resolutions=_resolutions, getattr=getattr):
    """Layer 2: `value.name` for a name the library may not give (source_checks.py): read from the program's own
    objects only, judged by the value, whatever the program's text says. A module view gives what it holds (its
    allowed names, and what the program stored there); a function of the program's, its own attributes."""
    kind = type(value)
    if kind is type or isinstance(value, type):
        if resolutions[value, name, True]:
            return getattr(value, name)
    elif kind is types.ModuleType:
        if name in value.__dict__ and any(value is view for view in run.views):
            return value.__dict__[name]
        _refuse('forbidden-attribute', f'{getattr(value, "__name__", "a module")}.{name} is not among the names the sandbox exposes')
    elif kind is types.FunctionType:
        if value.__code__.co_filename == PROGRAM_FILE:
            return getattr(value, name)
    elif resolutions[kind, name, False]:
        return getattr(value, name)
    _refuse('forbidden-attribute', f'.{name} of a {kind.__name__} is out of the sandbox\'s reach (only the program\'s own objects give names the library does not)')


def _not_metaclass(kind):
    if issubclass(kind, type):
        _refuse('forbidden-builtin', f'the class of a class ({kind.__name__}) makes classes from a dict of names; use a class statement')
    return kind


def _guard_type(value, type=type):
    """type(value), one argument (source_checks.py refuses the others): never a metaclass, which would make classes
    from a dict of names (a three-argument call of an alias of type)."""
    return _not_metaclass(type(value))


def _guard_class(value, type=type):
    """value.__class__: as type(value), for the objects a program can make (none defines __class__)."""
    return _not_metaclass(type(value))


def _range_items(items):
    return max(0, (items.stop - items.start + items.step - (1 if items.step > 0 else -1)) // items.step)  # len() overflows on wasm32


def _guard_loop_range(*args):
    """range() as the iterable of a `for` statement or clause: any size, since the loop pays fuel per item (a search
    that breaks early, `for i in range(10 ** 9): if …: return i`, is ordinary code)."""
    return _check_hashes(range(*args))


_HASH_MODULUS = sys.hash_info.modulus  # 2**31 - 1 on wasm32: an int's hash is the int modulo it


def _check_hashes(items):
    """A range stepping by a multiple of the hash modulus holds integers that all share one hash: a set or a dict of
    them takes time quadratic in its size in C (every insertion probes every earlier one). No fuel sees that."""
    if items.step % _HASH_MODULUS == 0 and _range_items(items) > 64:
        _refuse('fuel', f'a range stepping by {items.step}, a multiple of {_HASH_MODULUS}, holds integers that all share one hash (quadratic work in C in any set or dict)')
    return items


def _guard_range(*args):
    """range() anywhere else (also the builtin, so an alias of it): C code may walk it, so it is bounded and charged."""
    items = _check_hashes(range(*args))
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
