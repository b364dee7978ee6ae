# Layer 3, regular expressions: refused when they can backtrack without bound.
#
# Threat: a pattern whose match takes exponential time in C (`(a+)+`, `(a|ab)*`) or a counted repeat so large that
# compiling or matching it is a bomb. Checked once per pattern, by its parsed form, before re compiles it.

import re
from .limits import MAX_PATTERN_CHARS, MAX_REGEXES_KEPT, MAX_REGEX_REPEAT, _refuse

# ---- regular expressions: refused when they can backtrack without bound --------------------------------------------

_C = re._constants
_REPEATS = (_C.MAX_REPEAT, _C.MIN_REPEAT)
_SAMPLE = ''.join(map(chr, range(128))) + '\u00a0\u00e9\u00df\u0416\u0663\u4e2d\U0001f600'


def _check_regex(pattern, flags=0, checked={}):
    """Refuses patterns that backtrack exponentially (a variable repeat inside an unbounded one, `(a+)+`,
    `(\\d{1,3})*`; alternatives that can start alike inside an unbounded repeat, `(a|ab)*`) or have huge counts.
    Patterns found safe are remembered (as re's own cache does)."""
    if isinstance(pattern, re.Pattern) or not isinstance(pattern, (str, bytes)):
        return
    key = (type(pattern), pattern, flags)
    if key in checked:
        return
    if len(pattern) > MAX_PATTERN_CHARS:
        _refuse('memory', f'a regular expression of {len(pattern)} characters exceeds the limit of {MAX_PATTERN_CHARS}')
    try:
        parsed = re._parser.parse(pattern, flags if isinstance(flags, int) else 0)
    except (re.error, TypeError, ValueError, OverflowError, RecursionError):
        return  # the real call raises the same error
    sample = _SAMPLE + ''.join(chr(c) for c in _literals(parsed.data))
    if isinstance(pattern, bytes):
        sample = ''.join(ch for ch in sample if ord(ch) < 256).encode('latin-1')
    problem = _regex_problem(parsed.data, parsed.state, sample, inside_unbounded=False, count=1)
    if problem:
        _refuse('fuel', f'the regular expression {pattern[:60]!r} {problem}')
    if len(checked) < MAX_REGEXES_KEPT:
        checked[key] = True


def _literals(data):
    stack, found = [data], set()
    while stack:
        for op, av in stack.pop():
            if op in (_C.LITERAL, _C.NOT_LITERAL):
                found.add(av)
            elif op == _C.IN:
                stack.append([item for item in av if item[0] == _C.LITERAL])
            for sub in _subpatterns(op, av):
                stack.append(sub)
    return found


def _subpatterns(op, av):
    if op in _REPEATS or op == _C.POSSESSIVE_REPEAT:
        return [av[2]]
    if op == _C.SUBPATTERN:
        return [av[3]]
    if op == _C.BRANCH:
        return list(av[1])
    if op in (_C.ASSERT, _C.ASSERT_NOT):
        return [av[1]]
    if op == _C.ATOMIC_GROUP:
        return [av]
    if op == _C.GROUPREF_EXISTS:
        return [part for part in av[1:] if part is not None]
    return []


def _regex_problem(data, state, sample, inside_unbounded, count):
    for op, av in data:
        if op in _REPEATS or op == _C.POSSESSIVE_REPEAT:
            low, high, body = av
            bounded = high != _C.MAXREPEAT
            if low > MAX_REGEX_REPEAT or bounded and count * high > MAX_REGEX_REPEAT:
                return f'repeats more than {MAX_REGEX_REPEAT} times'
            variable = high != low
            if op in _REPEATS and variable and inside_unbounded:
                return 'has a variable repeat inside an unbounded one: it can backtrack exponentially'
            unbounded = op in _REPEATS and variable and (not bounded or high > 1)
            if unbounded and _ambiguous_alternatives(body, state, sample):
                return 'has alternatives that can match alike inside an unbounded repeat: it can backtrack exponentially'
            problem = _regex_problem(body, state, sample, inside_unbounded or unbounded, count * (high if bounded else 1))
            if problem:
                return problem
            continue
        for sub in _subpatterns(op, av):
            problem = _regex_problem(sub, state, sample, inside_unbounded, count)
            if problem:
                return problem
    return None


def _ambiguous_alternatives(body, state, sample):
    """Whether a repeated body can match one text in several ways through an alternation: two alternatives that
    can start alike, or an empty alternative where what else the alternation offers can start a new round
    (`(a|aa)*` is parsed as `(a(|a))*`)."""
    body_first, _ = _first_chars(body, state, sample)
    stack = [body]
    while stack:
        for op, av in stack.pop():
            if op == _C.BRANCH:
                starts = [_first_chars(branch, state, sample) for branch in av[1]]
                for i, (first, _nullable) in enumerate(starts):
                    if any(first & other for other, _ in starts[i + 1:]):
                        return True
                if any(nullable for _, nullable in starts) and frozenset().union(*(first for first, _ in starts)) & body_first:
                    return True
            if op not in _REPEATS:  # nested repeats are checked on their own
                stack.extend(_subpatterns(op, av))
    return False


def _first_chars(data, state, sample):
    """The sample characters a match of `data` can start with (a fixed sample plus the pattern's own literals,
    each tested by compiling the single-character element), and whether `data` can match the empty string."""
    chars = set()
    for op, av in data:
        if op in (_C.LITERAL, _C.NOT_LITERAL, _C.ANY, _C.IN, _C.CATEGORY):
            element = re._compiler.compile(re._parser.SubPattern(state, [(op, av)]), state.flags)
            chars.update(ch for ch in (sample[i:i + 1] for i in range(len(sample))) if element.fullmatch(ch) is not None)
            return frozenset(chars), False
        if op in _REPEATS or op == _C.POSSESSIVE_REPEAT:
            first, nullable = _first_chars(av[2], state, sample)
            chars |= first
            if av[0] > 0 and not nullable:
                return frozenset(chars), False
            continue
        if op in (_C.SUBPATTERN, _C.ATOMIC_GROUP):
            first, nullable = _first_chars(av[3] if op == _C.SUBPATTERN else av, state, sample)
            chars |= first
            if not nullable:
                return frozenset(chars), False
            continue
        if op == _C.BRANCH:
            starts = [_first_chars(branch, state, sample) for branch in av[1]]
            chars.update(*(first for first, _ in starts))
            if not any(nullable for _, nullable in starts):
                return frozenset(chars), False
            continue
        if op in (_C.AT, _C.ASSERT, _C.ASSERT_NOT):
            continue
        return frozenset(sample[i:i + 1] for i in range(len(sample))), True  # a back-reference: anything
    return frozenset(chars), True


def _regex_function(real, pattern_position=0):
    def guarded(*args, **kwargs):
        pattern = args[pattern_position] if len(args) > pattern_position else kwargs.get('pattern')
        flags = kwargs.get('flags', args[-1] if real is re.compile and len(args) > 1 else 0)
        _check_regex(pattern, flags if isinstance(flags, int) else 0)
        return real(*args, **kwargs)
    guarded.__name__ = real.__name__
    return guarded


# The names each module exposes (layer 3): functions and classes that take no attribute or code by string and run
