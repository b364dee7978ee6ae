# Layer 3, the builtins and library functions a program's world holds in place of the real ones.
#
# Threat: C code that walks data or iterators without spending fuel (sum, sorted, max over a huge range or an
# endless iterator; itertools sources), makes big numbers in one call (factorial, comb, prod, lcm), nests iterators
# until iterating recurses too deep in C, or changes a library object for the rest of the job (functools.wraps,
# dataclass applied to a library class). Each wrapper meters, bounds or refuses, then calls the real function.

import copy
import functools
import heapq
import itertools
import json
import math
import operator
import re
import types
from .limits import PROGRAM_FILE, WALKED_ITEMS_PER_FUEL, _meter, MADE_ITEMS_PER_FUEL, MAX_FORMAT_WIDTH, MAX_INT_BITS, MAX_NESTING, RANGE_ITEMS_PER_FUEL, _charge, _refuse, _run, _shallow, _tick
from .guards import _WALKED_TYPES, _check_division, _check_mod, _check_mul, _check_size, _check_spec, _guard_mul, _guard_target, _lshift_bits, _pow_bits

# ---- layer 3: builtins and module views, by allow-list -------------------------------------------------------------

# Iterators the sandbox's wrappers made, with their nesting (a zip of a zip of …): iterating a chain recurses in C.
# Only chains are recorded (an iterator over a list is not), and each is kept until the input's world ends.
class _Chains:
    __slots__ = ('depths',)

    def __init__(self):
        self.depths = {}


_chains = _Chains()


def _walks(iterable, range=range, type=type, sized=_WALKED_TYPES):
    """C code is about to walk `iterable`: a range is charged by its length (it costs nothing to make again), a
    builtin container or string by its items (sum, max, sorted of the same long list, again and again)."""
    if type(iterable) is range:
        _charge(len(iterable), RANGE_ITEMS_PER_FUEL)
    elif type(iterable) in sized:
        _charge(len(iterable), WALKED_ITEMS_PER_FUEL)


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


def _walking_constructor(kind):
    """list(x), tuple(x), set(x), frozenset(x), dict(x) by name: C code walks x (rewrite.py calls these)."""
    def construct(*args, **kwargs):
        if args:
            _walks(args[0])
        return kind(*args, **kwargs)
    construct.__name__ = kind.__name__
    return construct


def _gcd(*integers):
    """math.gcd: Euclid's algorithm on big integers is quadratic in C, paid as a division is."""
    for a, b in zip(integers, integers[1:]):
        _check_division(a, b)
    return math.gcd(*integers)


def _divmod(a, b):
    _check_division(a, b)
    return divmod(a, b)


def _in_place_division(real):
    def divide(a, b):
        _check_division(a, b)
        return real(a, b)
    divide.__name__ = real.__name__
    return divide


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


def _no_metaclasses(real):
    """typing.get_origin/get_args: a metaclass in the answer (get_origin(Type[int]) is type) would make classes from
    a dict of names; refused, as type(a class) is (guards.py)."""
    def checked(*args, **kwargs):
        result = real(*args, **kwargs)
        for part in result if type(result) is tuple else (result,):
            if isinstance(part, type) and issubclass(part, type):
                _refuse('forbidden-builtin', f'{real.__name__}() gives the metaclass {part.__name__}, which makes classes from a dict of names')
        return result
    checked.__name__ = real.__name__
    return checked


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
        made = decorator(_guard_target(cls), **options)
        for value in vars(made).values():  # the methods it wrote (dataclass's __init__, __eq__…) spend fuel too
            if type(value) is types.FunctionType and value.__code__.co_filename != PROGRAM_FILE:
                _meter(value.__code__)
        return made
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


_ITERATOR_TYPES = (zip, map, filter, enumerate, reversed, type(iter([])), type(iter(())), type(iter('')),
                   itertools.chain, itertools.islice, itertools.zip_longest, itertools.accumulate, itertools.starmap,
                   itertools.compress, itertools.dropwhile, itertools.takewhile, itertools.filterfalse,
                   itertools.groupby, itertools.pairwise, itertools.batched, itertools.tee(())[0].__class__,
                   types.GeneratorType)
