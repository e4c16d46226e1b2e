"""GNU ``timeout``/``sleep`` duration syntax: a number, fractions allowed, optional suffix.

``30``, ``1.5m``, ``2h``, ``1d``, ``0`` (none), and exponents as GNU's strtod reads them
(``1e-3``, ``2.34e+5d``, ``1E2m``). Compound forms such as ``1h30m`` are accepted too, since
systemd users write them; each part takes the same suffixes, and every part of a compound
needs one: ``1h30`` is refused with a hint (``1h30m``?) rather than read as 1 h 30 s.
``inf`` and ``infinity`` are read as GNU reads them: a duration too large to keep, like
``1e400``.

A bare number is seconds, as for GNU ``timeout`` and ``sleep``; but where a duration is an
age or a window (how far back to look, how old is too old), ``unit_required`` refuses one:
``--max-age 26`` meant 26 hours, not 26 seconds. ``0`` needs no unit.
"""

from __future__ import annotations

import math

from cronwrap.errors import UsageError

TEN_YEARS = 10 * 365 * 86400.0  # the largest duration cronwrap keeps
SMALLEST = 1e-9  # a positive duration never rounds down to 0, which means "none"
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
# A part is r"((?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)([smhd]?)", read by hand
# (_part): a firing given --timeout or --max-cpu would otherwise import re for it (~1 ms).
# ASCII digits only: str.isdigit, like \d and float(), also takes '٣'; float() also reads
# '1_000', 'nan' and 'inf'.
_DIGITS = frozenset("0123456789")
_INFINITE = ("inf", "infinity")
_EXAMPLES = "examples: 30, 1.5m, 2h, 1d, 1e-3, 0 for none"
_WINDOW_EXAMPLES = "examples: 90m, 12h, 7d, 0 for none"


class DurationTooLarge(UsageError):
    """A duration over ten years, or past what a float holds (``1e400``, ``inf``)."""


def parse_duration(text: str, option: str = "duration", *, unit_required: bool = False) -> float:
    """Return ``text`` in seconds; raise ``UsageError`` naming ``option`` when it is not one
    (or, with ``unit_required``, is a bare number other than 0), and ``DurationTooLarge``
    when it is one of more than ten years."""
    value = text.strip()
    infinite = value.lower() in _INFINITE
    parts = None if infinite else _parts(value)
    if parts is None and not infinite:
        examples = _WINDOW_EXAMPLES if unit_required else _EXAMPLES
        raise UsageError(f"{option}: {text!r} is not a duration ({examples})")
    seconds = math.inf if parts is None else _seconds(parts)
    if seconds > TEN_YEARS:
        raise DurationTooLarge(f"{option}: {text!r} is too large (at most ten years, 3650d)")
    if parts:
        _check_units(parts, text, option, unit_required)
    return seconds


def _parts(value: str) -> list[tuple[str, str]] | None:
    """``1h30m`` -> [("1", "h"), ("30", "m")]; None when ``value`` is no duration."""
    pos, parts = 0, []
    while pos < len(value):
        part = _part(value, pos)
        if part is None:
            return None
        number, unit, pos = part
        parts.append((number, unit))
        if not unit and pos < len(value):
            return None  # a bare number must be the last part: "30 5m" is not a duration
    return parts or None


def _part(value: str, pos: int) -> tuple[str, str, int] | None:
    """The number and unit at ``pos`` and where they end, as the pattern above matches."""
    end = _digits_end(value, pos)
    if end > pos:  # 12 or 12. or 12.5
        if end < len(value) and value[end] == ".":
            end = _digits_end(value, end + 1)
    elif value.startswith(".", pos) and _digits_end(value, pos + 1) > pos + 1:  # .5
        end = _digits_end(value, pos + 1)
    else:
        return None
    if end < len(value) and value[end] in "eE":  # an exponent only when it is whole
        sign = end + 1 + (value[end + 1:end + 2] in ("+", "-"))
        if _digits_end(value, sign) > sign:
            end = _digits_end(value, sign)
    unit = value[end] if end < len(value) and value[end] in "smhd" else ""
    return value[pos:end], unit, end + len(unit)


def _digits_end(value: str, pos: int) -> int:
    while pos < len(value) and value[pos] in _DIGITS:
        pos += 1
    return pos


def _check_units(parts: list[tuple[str, str]], text: str, option: str,
                 unit_required: bool) -> None:
    number, unit = parts[-1]
    if unit:
        return
    if len(parts) > 1:  # "1h30": 1 h 30 s to a parser, 1 h 30 min to the person who wrote it
        smaller = _SMALLER[parts[-2][1]]
        hint = f"did you mean {text.strip()}{smaller}?" if smaller else "e.g. 1m30s"
        raise UsageError(f"{option}: {text!r}: the number after {parts[-2][0]}{parts[-2][1]} "
                         f"has no unit; give each part its own ({hint})")
    if unit_required and _positive(number):
        raise UsageError(f"{option}: {text!r} needs a unit: {number}s, {number}m, {number}h or "
                         f"{number}d (a bare number here would be seconds)")


_SMALLER = {"d": "h", "h": "m", "m": "s", "s": ""}


def _positive(number: str) -> bool:
    mantissa = number.lower().partition("e")[0]
    return mantissa.strip("0.") != ""  # 1e-400 is 0.0 to float()


def _seconds(parts: list[tuple[str, str]]) -> float:
    """Seconds (``math.inf`` past a float's range); a positive duration is never 0."""
    total = sum(float(number) * _UNITS[unit] for number, unit in parts)
    positive = any(_positive(number) for number, _ in parts)
    return max(total, SMALLEST) if positive else total


def format_duration(seconds: float | None) -> str:
    """A short human form: ``850ms``, ``42s``, ``3m05s``, ``2h10m``, ``3d4h``."""
    if seconds is None:
        return "-"
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.1f}s" if seconds < 10 else f"{seconds:.0f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours}h"
