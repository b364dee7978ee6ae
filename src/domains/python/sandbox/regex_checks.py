# Layer 3, regular expressions: refused when they can backtrack without bound.
#
# Threat: a pattern whose match takes exponential time in C (`(a+)+`, `(a|ab)*`) or a counted repeat so large that
# compiling or matching it is a bomb: checked once per pattern, by its parsed form, before re compiles it. And a
# match that is polynomial in the text (`a*b` searched in a million a's, `a*a*a*c`): every call pays fuel for the
# most work its pattern can do on its text, before it runs (_charge_match).

import re
from .limits import MAX_PATTERN_CHARS, MAX_REGEXES_KEPT, MAX_REGEX_REPEAT, WALKED_ITEMS_PER_FUEL, _charge, _refuse

# ---- regular expressions: refused when they can backtrack without bound --------------------------------------------

_C = re._constants
_REPEATS = (_C.MAX_REPEAT, _C.MIN_REPEAT)
_SAMPLE = ''.join(map(chr, range(128))) + '\u00a0\u00e9\u00df\u0416\u0663\u4e2d\U0001f600'


def _check_regex(pattern, flags=0, checked={}):
    """Refuses patterns that backtrack exponentially (a variable repeat inside an unbounded one, `(a+)+`,
    `(\\d{1,3})*`; alternatives that can start alike inside an unbounded repeat, `(a|ab)*`) or have huge counts.
    Returns the pattern's cost plan (see _plan), None where the real call raises; plans of checked patterns are
    remembered (as re's own cache does). A pattern checked anew pays fuel by its length."""
    if isinstance(pattern, re.Pattern):
        pattern, flags = pattern.pattern, pattern.flags
    if not isinstance(pattern, (str, bytes)):
        return None
    key = (type(pattern), pattern, flags)
    plan = checked.get(key)
    if plan is not None:
        return plan
    if len(pattern) > MAX_PATTERN_CHARS:
        _refuse('memory', f'a regular expression of {len(pattern)} characters exceeds the limit of {MAX_PATTERN_CHARS}')
    _charge(len(pattern), WALKED_ITEMS_PER_FUEL)
    try:
        parsed = re._parser.parse(pattern, flags if isinstance(flags, int) else 0)
    except (re.error, TypeError, ValueError, OverflowError, RecursionError):
        return None  # the real call raises the same error
    sample = _SAMPLE + ''.join(chr(c) for c in _literals(parsed.data))
    if isinstance(pattern, bytes):
        sample = ''.join(ch for ch in sample if ord(ch) < 256).encode('latin-1')
    problem = _regex_problem(parsed.data, parsed.state, sample, inside_unbounded=False, count=1)
    if problem:
        _refuse('fuel', f'the regular expression {pattern[:60]!r} {problem}')
    open_end, full = _plan(parsed.data, parsed.state.flags, trailing=True), _plan(parsed.data, parsed.state.flags, trailing=False)
    plan = (open_end, full, sum(1 for term in _flatten(full) if term[0] == 'run' and term[1] is not None), sum(1 for _ in _flatten(full)))
    if len(checked) < MAX_REGEXES_KEPT:
        checked[key] = plan
    return plan


# ---- the most work one match can do: what a call pays before it runs ----------------------------------------------
#
# A backtracking matcher tries, at each place a match may start, every way the pattern's variable repeats can split
# the text: a repeat followed by more pattern can give back each character it took. Its work is bounded by the
# product, over the pattern's unbounded repeats that something follows, of (the longest run of text the repeat can
# take + 1), times the bounded repeats' choices and the alternatives, times the places a match may start (every
# character for search, findall, sub, split; one for match, fullmatch). A repeat of one character class takes at
# most the longest run of such characters in the text (found at C speed); any other at most the whole text. Nested
# variable repeats are refused above, so the product's degree is the number of such repeats in a row: polynomial
# patterns pay their polynomial, ordinary ones (`\\d+-\\d+` over text with short runs of digits) a few times the text.

_SINGLE = (_C.LITERAL, _C.NOT_LITERAL, _C.ANY, _C.IN, _C.CATEGORY)
_MAX_WORK = 1 << 62  # beyond any fuel limit: products stop growing here
_MAX_COPIES = 64  # a bounded repeat's copies counted in the product (its count is at most MAX_REGEX_REPEAT)
_SEARCHING = frozenset({'search', 'findall', 'finditer', 'sub', 'subn', 'split', 'scanner'})


def _plan(data, flags, trailing):
    """The terms of `data`'s work product: ('run', element) (the longest run the single-character `element` matches,
    plus one; None: the whole text), ('const', c), ('power', plan, k), ('sum', plans) (alternatives), ('text',) (a
    back-reference compares up to the whole text). `trailing`: nothing follows data, so a last repeat never gives
    back (fullmatch has its end check after it)."""
    terms = []
    for i, (op, av) in enumerate(data):
        last = trailing and i == len(data) - 1
        if op in _REPEATS:
            low, high, body = av
            inner = _plan(body, flags, trailing=False)
            if high == _C.MAXREPEAT:
                if not last:
                    terms.append(('run', _run_element(body, flags)))
                if inner:
                    terms.append(('power', inner, 1))
            else:
                if inner:
                    terms.append(('power', inner, min(high, _MAX_COPIES)))
                if high != low and not last:
                    terms.append(('const', high - low + 1))
        elif op == _C.POSSESSIVE_REPEAT:
            inner = _plan(av[2], flags, trailing=True)
            if inner:
                terms.append(('power', inner, 1 if av[1] == _C.MAXREPEAT else min(av[1], _MAX_COPIES)))
        elif op == _C.SUBPATTERN:
            terms.extend(_plan(av[3], flags, last))
        elif op == _C.ATOMIC_GROUP:
            terms.extend(_plan(av, flags, trailing=True))
        elif op == _C.BRANCH:
            branches = [_plan(branch, flags, last) for branch in av[1]]
            if any(branches):
                terms.append(('sum', branches))
            elif len(branches) > 1:
                terms.append(('const', len(branches)))
        elif op in (_C.ASSERT, _C.ASSERT_NOT):
            terms.extend(_plan(av[1], flags, trailing=True))
        elif op == _C.GROUPREF_EXISTS:
            parts = [_plan(part, flags, last) for part in av[1:] if part is not None]
            if any(parts):
                terms.append(('sum', parts))
        elif op == _C.GROUPREF:
            terms.append(('text',))
    return tuple(terms)


def _run_element(body, flags):
    """`element+` compiled, for a repeat of one character element; None otherwise (the repeat may take the whole text)."""
    if len(body) != 1 or body[0][0] not in _SINGLE:
        return None
    state = re._parser.State()
    state.flags = flags
    repeat = re._parser.SubPattern(state, [(_C.MAX_REPEAT, (1, _C.MAXREPEAT, re._parser.SubPattern(state, [body[0]])))])
    return re._compiler.compile(repeat, flags)


def _work(plan, text, length, runs):
    work = 1
    for term in plan:
        kind = term[0]
        if kind == 'run':
            element = term[1]
            if element is None:
                work *= length + 1
            else:
                longest = runs.get(id(element))
                if longest is None:
                    try:
                        longest = max(map(len, element.findall(text)), default=0)
                    except (TypeError, ValueError):
                        longest = length  # a text of the other kind: the real call raises
                    runs[id(element)] = longest
                work *= longest + 1
        elif kind == 'const':
            work *= term[1]
        elif kind == 'power':
            work *= min(_work(term[1], text, length, runs), _MAX_WORK) ** term[2]
        elif kind == 'sum':
            work *= sum(_work(branch, text, length, runs) for branch in term[1])
        else:
            work *= length + 1
        if work >= _MAX_WORK:
            return _MAX_WORK
    return work


def _charge_match(plan, text, searching, full):
    """Fuel for the most work a match of the plan's pattern can do on `text` (one comparison a unit, as == pays),
    before the call runs. Runs of characters are measured at C speed, each paid as a walk of the text."""
    if plan is None:
        return
    if isinstance(text, str):
        length = str.__len__(text)  # the characters the matcher sees, whatever a subclass's __len__ says
    else:
        try:
            length = memoryview(text).nbytes
        except TypeError:
            return  # the real call raises the same error
    open_end, whole, runs, size = plan
    terms = whole if full else open_end
    if not terms:
        _charge((length + 1) if searching else 1, WALKED_ITEMS_PER_FUEL)
        return
    _charge(runs * length + size, WALKED_ITEMS_PER_FUEL)  # measuring the runs walks the text once each
    work = _work(terms, text, length, {})
    _charge(min(work * (length + 1 if searching else 1), _MAX_WORK), WALKED_ITEMS_PER_FUEL)


def _flatten(plan):
    for term in plan:
        yield term
        if term[0] == 'power':
            yield from _flatten(term[1])
        elif term[0] == 'sum':
            for branch in term[1]:
                yield from _flatten(branch)


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


_TEXT_POSITION = {'sub': 2, 'subn': 2}  # of the module functions (the pattern first); 1 for the others


def _regex_function(real):
    """re.<name>(pattern, …): the pattern checked, and for a matching function its text's work paid, first."""
    name = real.__name__
    position = _TEXT_POSITION.get(name, 1)

    def guarded(*args, **kwargs):
        pattern = args[0] if args else kwargs.get('pattern')
        flags = kwargs.get('flags', args[-1] if real is re.compile and len(args) > 1 else 0)
        plan = _check_regex(pattern, flags if isinstance(flags, int) else 0)
        if name not in ('compile', 'purge', 'escape'):
            text = args[position] if len(args) > position else kwargs.get('string')
            _charge_match(plan, text, name in _SEARCHING, name == 'fullmatch')
        return real(*args, **kwargs)
    guarded.__name__ = name
    return guarded


PATTERN_METHODS = frozenset({'search', 'match', 'fullmatch', 'findall', 'finditer', 'sub', 'subn', 'split', 'scanner'})
# scanner(text) makes an object whose search() and match() go on through the text: paid as a findall of it


def _pattern_method(value, name, method):
    """`pattern.name` (bound) or `re.Pattern.name` (unbound): the text's work paid before the call."""
    position = 1 if name in ('sub', 'subn') else 0
    searching, full = name in _SEARCHING, name == 'fullmatch'

    if isinstance(value, re.Pattern):
        plan = _check_regex(value)

        def bound(*args, **kwargs):
            _charge_match(plan, args[position] if len(args) > position else kwargs.get('string'), searching, full)
            return method(*args, **kwargs)
        return bound

    def unbound(pattern, *args, **kwargs):
        if isinstance(pattern, re.Pattern):
            _charge_match(_check_regex(pattern), args[position] if len(args) > position else kwargs.get('string'), searching, full)
        return method(pattern, *args, **kwargs)
    return unbound


# The names each module exposes (layer 3): functions and classes that take no attribute or code by string and run
