# Layer 3, the program's world, by allow-list: the builtins and module views one input's run sees.
#
# Threat: string-driven attribute access (getattr, vars, __import__), code from text (eval, exec, compile), files
# (open), and library entry points that walk, iterate or compute without bound. Every input gets fresh builtins
# and fresh module objects holding the allowed names (the guarded ones replaced by library_guards.py), so nothing
# a program stores on them reaches another input.

# Every module a view exposes is imported here, at load: after load nothing is imported again. _pylong is what
# CPython imports on the fly to divide or print huge integers.
import _pylong  # noqa: F401
import array
import bisect
import builtins
import cmath
import collections
import collections.abc
import copy
import dataclasses
import enum
import fractions
import functools
import heapq
import itertools
import json
import math
import numbers
import operator
import re
import statistics
import string
import sys
import textwrap
import types
import typing
import unicodedata
from .limits import GUARD_PREFIX, MAX_PRINT_CHARS, PROGRAM_MODULE, REAL_BUILTINS_FOR_TESTS, _refuse, _run, _shallow
from .guards import _check_division, _check_lshift, _guard_add, _guard_slice, _check_mod, _check_mul, _check_pow, _guard_attr, _guard_bytearray, _guard_bytes, _guard_class, _guard_contains, _guard_floordiv, _guard_fstring, _guard_int, _guard_loop_range, _guard_lshift, _guard_method, _guard_mod, _guard_mul, _guard_pow, _guard_range, _guard_refuse_target, _guard_str, _guard_target, _guard_truediv, _guard_type
from .regex_checks import _regex_function
from .library_guards import _accumulate, _all, _any, _ascii, _chain, _comb, _compare, _contains, _deepcopy, _divmod, _enumerate, _extreme, _factorial, _filter, _format, _gcd, _hash, _heapify, _ilshift, _imod, _imul, _in_place_division, _ipow, _items_checked, _iter, _itertool, _json_dumps, _json_loads, _lcm, _map, _no_metaclasses, _own_classes_only, _perm, _prod, _reduce, _repr, _reversed, _sorted, _walking_constructor, _starmap, _sum, _sumprod, _update_wrapper, _wraps, _zip

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
    'math': {'gcd': _gcd, 'factorial': _factorial, 'comb': _comb, 'perm': _perm, 'prod': _prod, 'lcm': _lcm, 'sumprod': _sumprod},
    'functools': {'reduce': _reduce, 'wraps': _wraps, 'update_wrapper': _update_wrapper, 'total_ordering': _own_classes_only(functools.total_ordering)},
    'dataclasses': {'dataclass': _own_classes_only(dataclasses.dataclass)},
    'typing': {'final': _own_classes_only(typing.final), 'get_origin': _no_metaclasses(typing.get_origin), 'get_args': _no_metaclasses(typing.get_args)},
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
        'mod': _guard_mod, 'imod': _imod, 'floordiv': _guard_floordiv, 'truediv': _guard_truediv,
        'ifloordiv': _in_place_division(operator.ifloordiv), 'itruediv': _in_place_division(operator.itruediv), 'contains': _contains, 'countOf': _items_checked(operator.countOf, 1),
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

_BUILTINS_ALLOWED = ('abs bin bool bytearray bytes callable chr classmethod complex dict float frozenset '
                     'hasattr hex int isinstance issubclass len list next object oct ord property round set slice '
                     'staticmethod str super tuple type NotImplemented Ellipsis').split()
_BUILTINS_GUARDED = {
    'all': _all, 'any': _any, 'ascii': _ascii, 'divmod': _divmod, 'enumerate': _enumerate, 'filter': _filter, 'format': _format, 'iter': _iter, 'map': _map,
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
    'loop_range': _guard_loop_range, 'attr': _guard_attr, 'class': _guard_class, 'type': _guard_type,
    'floordiv': _guard_floordiv, 'truediv': _guard_truediv, 'check_floordiv': _check_division, 'check_truediv': _check_division,
    'contains': _guard_contains, 'add': _guard_add, 'slice': _guard_slice,
    **{kind.__name__: _walking_constructor(kind) for kind in (list, tuple, set, frozenset, dict)},
}.items()}


def _build_class(function, name, *bases, **keywords):
    """A class statement, judged by the class it made: never a metaclass (a base may become `type` through its
    __mro_entries__, as typing.Type does), which would make classes from a dict of names with hooks the source
    checks refuse in a class statement."""
    made = builtins.__build_class__(function, name, *bases, **keywords)
    if isinstance(made, type) and issubclass(made, type):
        _refuse('forbidden-builtin', f'class {name} is a metaclass (its bases give type): it would make classes from a dict of names')
    return made


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
        safe['__build_class__'] = _build_class  # `class` statements; the name is refused in source
        self.globals = {'__builtins__': safe, '__name__': PROGRAM_MODULE, **_GUARDS}
        if REAL_BUILTINS_FOR_TESTS:
            self.globals = {'__builtins__': builtins, '__name__': PROGRAM_MODULE}

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
