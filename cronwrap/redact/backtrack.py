"""Which regular expressions can take exponential time: those with a repetition whose rounds
can split the same text in more than one way. On a line such a pattern does not match,
Python's backtracking ``re`` tries every way (``(x+x+)+y`` on 40 ``x``: hours), so cronwrap
refuses it as an operator's ``--redact`` pattern (redact.compile_pattern) before anything runs.

The rule, for every repetition that may run more than once (``*``, ``+``, ``{n,m}`` with m ≥ 2)
and is not possessive: refused when, inside it,

1. a repetition of a variable count (not possessive, not in an atomic group) can begin with a
   character that can also begin what follows it in the round, or the next round: ``(a+)+``,
   ``(a*)*``, ``(x+x+)+y``, ``(\\w+\\s?)+``; but ``(\\d+,)*`` and ``([a-z]+\\.)+`` are fine, since
   ``,`` and ``.`` end the inner one;
2. or an alternation has two alternatives made of single characters that can match the same
   text, or one that can match the start of the other while what follows can match the rest:
   ``(a|a)*``, ``(a|.)*``, ``(a|aa)*``; but ``(a|ab)*c`` and ``(foo|far)*`` are fine.

Possessive repetitions (``a++``) and atomic groups (``(?>...)``) never give back what they took,
and are the usual fix. The check reads the pattern as ``re`` itself parses it (``re._parser``,
Python 3.11+), character sets included (ASCII classes: the patterns are bytes). It catches the
common shapes, not every slow pattern (``\\s*\\s*\\s*$`` is polynomial): the deadline of
deadline.py bounds the rest. Pure: no I/O.
"""

from __future__ import annotations

from re import _constants as c  # type: ignore[attr-defined]
from re import _parser  # type: ignore[attr-defined]

from cronwrap.record import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

    Items = list[tuple[Any, Any]]

ALL = (1 << 256) - 1  # a set of bytes, as a bit mask
_DIGIT = sum(1 << b for b in b"0123456789")
_SPACE = sum(1 << b for b in b" \t\n\r\f\v")
_WORD = _DIGIT | (1 << ord("_")) | sum(1 << b for b in range(65, 91)) | \
    sum(1 << b for b in range(97, 123))
_CATEGORIES = {c.CATEGORY_DIGIT: _DIGIT, c.CATEGORY_NOT_DIGIT: ALL ^ _DIGIT,
               c.CATEGORY_SPACE: _SPACE, c.CATEGORY_NOT_SPACE: ALL ^ _SPACE,
               c.CATEGORY_WORD: _WORD, c.CATEGORY_NOT_WORD: ALL ^ _WORD}
_UPPER = sum(1 << b for b in range(65, 91))
_GROWS = (c.MAX_REPEAT, c.MIN_REPEAT)  # repetitions that give back what they took
NESTED = "a repetition inside a repetition can take the same text in more than one way " \
         "(as in (a+)+ or (x+x+)+)"
ALTERNATIVES = "two alternatives inside a repetition can match the same text (as in (a|a)* " \
               "or (a|aa)*)"
FIX = "make the inner repetition possessive (a++) or atomic ((?>...)), or write it so that " \
      "each character can be matched one way only"


def catastrophic(pattern: bytes) -> str | None:
    """Why ``pattern`` (valid ``re`` syntax) can take exponential time, and how to fix it; None
    when the rule of this module finds nothing."""
    tree = _parser.parse(pattern)
    why = _walk(tree.data, tree.state.flags)
    return f"{why}; {FIX}" if why else None


def _walk(items: Items, flags: int) -> str | None:
    """The first repetition of ``items`` (at any depth) whose rounds are ambiguous."""
    for op, av in items:
        if op in _GROWS and av[1] >= 2:
            why = _ambiguous(av[2], _first(av[2], flags)[0], flags)
            if why:
                return why
        for sub, subflags in _children(op, av, flags):
            why = _walk(sub, subflags)
            if why:
                return why
    return None


def _children(op: Any, av: Any, flags: int) -> list[tuple[Items, int]]:
    if op in _GROWS or op is c.POSSESSIVE_REPEAT:
        return [(av[2], flags)]
    if op is c.SUBPATTERN:
        return [(av[3], (flags | av[1]) & ~av[2])]
    if op is c.ATOMIC_GROUP:
        return [(av, flags)]
    if op is c.BRANCH:
        return [(alt, flags) for alt in av[1]]
    if op in (c.ASSERT, c.ASSERT_NOT):
        return [(av[1], flags)]
    if op is c.GROUPREF_EXISTS:
        return [(sub, flags) for sub in av[1:] if sub is not None]
    return []


def _ambiguous(items: Items, follow: int, flags: int) -> str | None:
    """Inside one round of a repetition: ``follow`` holds the bytes that can come after
    ``items`` (what follows in the round, or the next round)."""
    for i, (op, av) in enumerate(items):
        after, nullable = _first(items[i + 1:], flags)
        then = after | (follow if nullable else 0)
        if op in _GROWS:
            head = _first(av[2], flags)[0]
            if av[0] < av[1] and head & then:
                return NESTED
            why = _ambiguous(av[2], head | then, flags)
        elif op is c.SUBPATTERN:
            why = _ambiguous(av[3], then, (flags | av[1]) & ~av[2])
        elif op is c.BRANCH:
            why = ALTERNATIVES if _overlap(av[1], then, flags) else None
            for alt in av[1]:
                why = why or _ambiguous(alt, then, flags)
        else:  # possessive, atomic (never give back), assertions (take nothing), single bytes
            why = None
        if why:
            return why
    return None


def _overlap(alternatives: list[Items], then: int, flags: int) -> bool:
    """Whether two alternatives made of single characters can match the same text, or one
    the start of another while ``then`` can match the next character of the rest."""
    shapes = [s for s in (_chars(alt, flags) for alt in alternatives) if s is not None]
    for i, one in enumerate(shapes):
        for other in shapes[i + 1:]:
            short, long = sorted((one, other), key=len)
            if all(a & b for a, b in zip(short, long)) and \
                    (len(short) == len(long) or long[len(short)] & then):
                return True
    return False


def _chars(items: Items, flags: int) -> list[int] | None:
    """The bytes each character of ``items`` can be, when it is made of single characters."""
    out = []
    for op, av in items:
        if op not in (c.LITERAL, c.NOT_LITERAL, c.ANY, c.IN):
            return None
        out.append(_first_item(op, av, flags)[0])
    return out


def _first(items: Items, flags: int) -> tuple[int, bool]:
    """The bytes ``items`` can begin with, and whether they can match nothing at all."""
    mask = 0
    for op, av in items:
        head, nullable = _first_item(op, av, flags)
        mask |= head
        if not nullable:
            return mask, False
    return mask, True


def _first_item(op: Any, av: Any, flags: int) -> tuple[int, bool]:
    fold = flags & c.SRE_FLAG_IGNORECASE
    if op is c.LITERAL:
        return _folded(1 << av, fold), False
    if op is c.NOT_LITERAL:
        return ALL ^ (1 << av), False
    if op is c.ANY:
        return ALL if flags & c.SRE_FLAG_DOTALL else ALL ^ (1 << 10), False
    if op is c.IN:
        return _set(av, fold), False
    if op in _GROWS or op is c.POSSESSIVE_REPEAT:
        head, nullable = _first(av[2], flags)
        return head, nullable or av[0] == 0
    if op is c.SUBPATTERN:
        return _first(av[3], (flags | av[1]) & ~av[2])
    if op is c.ATOMIC_GROUP:
        return _first(av, flags)
    if op is c.BRANCH:
        firsts = [_first(alt, flags) for alt in av[1]]
        return _union(m for m, _ in firsts), any(n for _, n in firsts)
    if op in (c.AT, c.ASSERT, c.ASSERT_NOT):
        return 0, True
    return ALL, True  # a back reference, a conditional group: anything


def _set(items: Items, fold: int) -> int:
    mask, negate = 0, False
    for op, av in items:
        if op is c.NEGATE:
            negate = True
        elif op is c.LITERAL:
            mask |= 1 << av
        elif op is c.RANGE:
            mask |= ((1 << (min(av[1], 255) + 1)) - 1) & ~((1 << av[0]) - 1)
        else:
            mask |= _CATEGORIES.get(av, ALL)
    mask = _folded(mask, fold)
    return ALL ^ mask if negate else mask


def _folded(mask: int, fold: int) -> int:
    """Under IGNORECASE an ASCII letter is either case."""
    if not fold:
        return mask
    return mask | ((mask & _UPPER) << 32) | ((mask >> 32) & _UPPER)


def _union(masks: Any) -> int:
    out = 0
    for mask in masks:
        out |= mask
    return out
