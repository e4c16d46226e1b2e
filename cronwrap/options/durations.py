"""GNU ``timeout``/``sleep`` duration syntax: a number, fractions allowed, optional suffix.

``30``, ``1.5m``, ``2h``, ``1d``, ``0`` (none), and exponents as GNU's strtod reads them
(``1e-3``, ``2.34e+5d``, ``1E2m``). Compound forms such as ``1h30m`` are accepted too, since
systemd users write them; each part takes the same suffixes. ``inf`` and ``infinity`` are read
as GNU reads them: a duration too large to keep, like ``1e400``.
"""

from __future__ import annotations

import math
import re

from cronwrap.errors import UsageError

TEN_YEARS = 10 * 365 * 86400.0  # the largest duration cronwrap keeps
SMALLEST = 1e-9  # a positive duration never rounds down to 0, which means "none"
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
# [0-9], not \d: \d and float() also read '٣'; float() also reads '1_000', 'nan' and 'inf'.
_PART = re.compile(r"((?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)([smhd]?)")
_INFINITE = ("inf", "infinity")
_EXAMPLES = "examples: 30, 1.5m, 2h, 1d, 1e-3, 0 for none"


class DurationTooLarge(UsageError):
    """A duration over ten years, or past what a float holds (``1e400``, ``inf``)."""


def parse_duration(text: str, option: str = "duration") -> float:
    """Return ``text`` in seconds; raise ``UsageError`` naming ``option`` when it is not one,
    and ``DurationTooLarge`` when it is one of more than ten years."""
    seconds = _seconds(text.strip())
    if seconds is None:
        raise UsageError(f"{option}: {text!r} is not a duration ({_EXAMPLES})")
    if seconds > TEN_YEARS:
        raise DurationTooLarge(f"{option}: {text!r} is too large (at most ten years, 3650d)")
    return seconds


def _seconds(value: str) -> float | None:
    """Seconds (``math.inf`` past a float's range), or None when ``value`` is no duration."""
    if value.lower() in _INFINITE:
        return math.inf
    pos, total, parts, positive = 0, 0.0, 0, False
    while pos < len(value):
        match = _PART.match(value, pos)
        if match is None:
            return None
        number, unit = match.groups()
        total += float(number) * _UNITS[unit]
        mantissa = number.lower().partition("e")[0]
        positive = positive or mantissa.strip("0.") != ""  # 1e-400 is 0.0 to float()
        pos, parts = match.end(), parts + 1
        if not unit and pos < len(value):
            return None  # a bare number must be the last part: "30 5m" is not a duration
    if parts == 0:
        return None
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
