# Layer 3, the library sealed where a program could change it for the rest of the job, or make it work unbounded.
#
# Threat: library entry points that keep a program's change (ABC registries, string.Template patterns) or that
# do unbounded work on its behalf (Fraction's parser).

import abc
import collections
import enum
import fractions
import re
import string
import sys
from .guards import _bits, _check_division, _check_size, _pow_bits
from .library_guards import _metered
from .limits import MAX_INT_BITS, PROGRAM_MODULE, _refuse
from .regex_checks import _check_regex

# ---- the library, sealed where a program could change it for the rest of the job ---------------------------------


class _Running:
    __slots__ = ('program',)

    def __init__(self):
        self.program = False  # True while a program's code runs: the seals refuse only then


_running = _Running()


def _seal_library():
    """Library entry points that would keep a program's change or do unbounded work for it: ABC registration is
    refused while a program runs (outside a run, e.g. in executor.ts's tests, it works as it always did), a
    string.Template subclass's pattern is checked as re's functions check theirs, Fraction's parser is bounded, and
    Enum's functional API makes no member of a reserved name (Enum('E', [('__del__', f)]) would give a class a hook
    the source checks refuse in a class statement)."""
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
        raise RuntimeError("sandbox/seals.py: fractions' parser has changed; its exponents are unbounded")
    fractions._RATIONAL_FORMAT = re.compile(bounded, rational.flags)

    create = enum.EnumType._create_

    def guarded_create(cls, class_name, names, **options):
        names = list(names.items()) if isinstance(names, dict) else names.replace(',', ' ').split() if isinstance(names, str) else list(names)
        for item in names:
            name = item if isinstance(item, str) else item[0] if isinstance(item, (tuple, list)) and item else None
            if not isinstance(name, str) or name.startswith('_'):
                _refuse('forbidden-attribute', f'an Enum member named {name!r}: members of the functional API take public names')
        if options.get('module') is None:  # as _create_ would find it, had this frame not come between
            options['module'] = sys._getframemodulename(2)
        return create(cls, class_name, names, **options)

    enum.EnumType._create_ = guarded_create
    _bound_fractions()
    _meter_counter_elements()


_FRACTION_OPERATORS = ('add', 'sub', 'mul', 'truediv', 'floordiv', 'mod', 'divmod')


def _bound_fractions():
    """Fraction arithmetic runs in fractions.py on big integers whatever the operator's spelling (operator.add, sum,
    statistics): each operation checks its operands' size first (numerators and denominators multiply) and pays
    fuel by it, and a power checks the size it makes; so does a division of the big integers it ends with."""
    Fraction = fractions.Fraction

    def bounded(real, power=False):
        def operation(a, b, *rest):
            if power:
                _pow_bits(a, b)
            else:
                size = (_bits(a) or 0) + (_bits(b) or 0)
                if size > MAX_INT_BITS:
                    _refuse('memory', f'a Fraction operation on {size} bits of numerators and denominators exceeds the limit of {MAX_INT_BITS}')
                _check_size('bits', size)
            return real(a, b, *rest)
        operation.__name__ = real.__name__
        return operation

    for name in _FRACTION_OPERATORS:
        for dunder in (f'__{name}__', f'__r{name}__'):
            setattr(Fraction, dunder, bounded(vars(Fraction)[dunder]))
    for dunder in ('__pow__', '__rpow__'):
        real = vars(Fraction)[dunder]
        setattr(Fraction, dunder, bounded(real, power=True) if dunder == '__pow__' else _bounded_rpow(real))
    limit = vars(Fraction)['limit_denominator']

    def limit_denominator(self, max_denominator=1000000):
        _check_division(self.numerator, self.denominator)
        return limit(self, max_denominator)

    Fraction.limit_denominator = limit_denominator


def _bounded_rpow(real):
    def rpow(b, a, *rest):  # a ** b where b is the Fraction
        _pow_bits(a, b)
        return real(b, a, *rest)
    return rpow


def _meter_counter_elements():
    """Counter.elements repeats each key as many times as its count says, in C (a count of 10**18 is one line of
    the program's): the repetition is metered, an item a step."""
    elements = collections.Counter.elements

    def metered_elements(self):
        return _metered(elements(self))

    collections.Counter.elements = metered_elements
