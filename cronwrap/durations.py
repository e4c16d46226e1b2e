"""GNU ``timeout``/``sleep`` duration syntax: a number, fractions allowed, optional suffix.

``30``, ``1.5m``, ``2h``, ``1d``, ``0`` (none). Compound forms such as ``1h30m`` are accepted
too, since systemd users write them; each part takes the same suffixes.
"""

from __future__ import annotations

import math
import re

from cronwrap.errors import UsageError

_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)([smhd]?)")
_EXAMPLES = "examples: 30, 1.5m, 2h, 1d, 0 for none"


def parse_duration(text: str, option: str = "duration") -> float:
    """Return ``text`` in seconds; raise ``UsageError`` naming ``option`` when it is not one."""
    value = text.strip()
    pos, total, parts = 0, 0.0, 0
    while pos < len(value):
        match = _PART.match(value, pos)
        if match is None:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos, parts = match.end(), parts + 1
        if not match.group(2) and pos < len(value):
            parts = 0  # a bare number must be the last part: "30 5m" is not a duration
            break
    if parts == 0 or pos != len(value) or not math.isfinite(total) or total > 10 * 365 * 86400:
        raise UsageError(f"{option}: {text!r} is not a duration ({_EXAMPLES})")
    return total


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
