"""Cron expression syntax: aliases, the five fields, and cronsim's reading of them.

The only module of cronwrap that hands an expression to cronsim. cronsim parses the fields
and decides which *days* match (its day-of-month/day-of-week rules follow Debian cron); it
is never iterated (see the package docstring for why).
"""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache

from cronsim import CronSim, CronSimError

from cronwrap.errors import UsageError

# cron's own aliases (cronie entry.c); cronsim has none. @reboot has no schedule.
ALIASES: dict[str, str] = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}
REBOOT = "@reboot"
FIELD_NAMES = ("minute", "hour", "day-of-month", "month", "day-of-week")
_FIELD_HINTS = {
    "minute": "0-59, e.g. 30, */15, 0,30, 10-20",
    "hour": "0-23, e.g. 2, */6, 9-17",
    "day-of-month": "1-31 or L, and the day must exist in the months given, e.g. 1, 15, 1-7, L",
    "month": "1-12 or JAN-DEC, e.g. 1, */3, JAN-JUN",
    "day-of-week": "0-7 or SUN-SAT, 0 and 7 are Sunday, e.g. 1-5, MON-FRI, SAT,SUN",
}
_ANY_DAY = datetime(2000, 1, 1)  # cronsim wants a start; only its field sets are used


class _Refused(Exception):
    def __init__(self, what: str, message: str) -> None:
        super().__init__(message)
        self.what = what  # the field cronsim blamed, or "expression"


@lru_cache(maxsize=4096)
def read_fields(cron: str) -> CronSim:
    """cronsim's reading of the 5-field ``cron`` (cached: shared, so never iterate it)."""
    try:
        return CronSim(cron, _ANY_DAY)
    except (CronSimError, ValueError) as exc:  # ValueError: older cronsims, on odd digits
        message = str(exc)
        field = next((n for n in FIELD_NAMES if message.lower() == f"bad {n}"), "expression")
        raise _Refused(field, message) from None


def syntax_error(cron: str) -> str | None:
    """What cronsim rejects in the 5-field ``cron``: a field name from FIELD_NAMES, or
    ``"expression"`` (the day fields exclude every month given); None when it reads it."""
    try:
        read_fields(cron)
    except _Refused as exc:
        return exc.what
    return None


def field_accepted(index: int, text: str) -> bool:
    """Whether ``text`` is a valid field ``index`` (0: minute … 4: day-of-week) on its own."""
    probe = ["*"] * 5
    probe[index] = text
    return syntax_error(" ".join(probe)) is None


def expand(expr: str) -> str:
    """The 5-field form of ``expr`` (aliases expanded, blanks normalised), or a UsageError."""
    text = expr.strip()
    if text.lower() == REBOOT:
        raise UsageError(
            "--schedule: '@reboot' is not a schedule: keep @reboot in the crontab and give"
            " --schedule the job's real schedule (e.g. --schedule '30 1 * * *'): on boot,"
            " cronwrap then runs the most recent slot if it never ran (add --catchup latest"
            " or all for older missed slots too)"
        )
    if text.startswith("@"):
        if text.lower() not in ALIASES:
            known = ", ".join(ALIASES)
            raise UsageError(f"--schedule: {expr!r} is not a known alias (known: {known})")
        return ALIASES[text.lower()]
    fields = text.split()
    if len(fields) == 6:
        raise UsageError(
            f"--schedule: {expr!r} has 6 fields; cron has 5 (minute hour day-of-month month"
            " day-of-week) and a 6th would be read as seconds first. Drop the seconds:"
            f" {' '.join(fields[1:])!r}"
        )
    if len(fields) != 5:
        raise UsageError(
            f"--schedule: {expr!r} has {len(fields)} fields; cron has 5: minute hour"
            " day-of-month month day-of-week (e.g. '30 1 * * *'), or an alias such as @daily"
        )
    return " ".join(fields)


def parse_fields(cron: str, expr: str) -> CronSim:
    """cronsim's reading of ``cron``; a one-line UsageError about ``expr`` when it fails."""
    try:
        return read_fields(cron)
    except _Refused as exc:
        hint = _FIELD_HINTS.get(exc.what, str(exc))
        raise UsageError(f"--schedule: {expr!r}: bad {exc.what} ({hint})") from None


def is_fixed_time(cron: str) -> bool:
    """cronie's rule, which decides the DST behaviour: a job is "fixed-time" unless its
    minute or hour field starts with ``*``."""
    minute, hour = cron.split()[:2]
    return not minute.startswith("*") and not hour.startswith("*")


def fire_times_of_day(parsed: CronSim) -> tuple[int, ...]:
    """Seconds after local midnight of each fire time on a matching day, ascending."""
    return tuple(h * 3600 + m * 60 for h in sorted(parsed.hours) for m in sorted(parsed.minutes))
