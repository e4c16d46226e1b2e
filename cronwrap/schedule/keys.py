"""Run keys, business dates, and the timestamps and dates of ``--at``, ``--date``, ``--from``."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from functools import lru_cache

from cronwrap.errors import UsageError
from cronwrap.record import TYPE_CHECKING
from cronwrap.schedule.zones import local_to_instant

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo

UTC = timezone.utc
MAX_KEY_LENGTH = 200


def _has_directive(template: str) -> bool:
    """Whether ``template`` holds a strftime directive (``%%`` is a literal percent)."""
    parts = template.replace("%%", "").split("%")
    return any(part[:1].isalpha() for part in parts[1:])


@lru_cache(maxsize=64)
def validate_key_template(template: str) -> str:
    """``template`` when it can serve as ``--key``; otherwise a UsageError saying why."""
    if not template:
        raise UsageError("--key: the template is empty (examples: %Y-%m-%d for once per day)")
    if any(ch in template for ch in "\0\n\r"):
        raise UsageError(f"--key: {template!r} contains a NUL or line break")
    if not _has_directive(template):
        raise UsageError(
            f"--key: {template!r} has no % directive, so every slot would share one key and"
            " the job would run once ever (examples: %Y-%m-%d once per day, %Y-%m-%dT%H once"
            " per hour)"
        )
    sample = datetime(2026, 12, 31, 23, 59, tzinfo=UTC)
    try:
        formatted = sample.strftime(template)
    except (UnicodeError, ValueError):
        raise UsageError(f"--key: {template!r} is not a usable strftime template (UTF-8 text "
                         "with % directives, e.g. %Y-%m-%d)") from None
    if len(formatted) > MAX_KEY_LENGTH:
        raise UsageError(f"--key: {template!r} gives keys longer than {MAX_KEY_LENGTH} characters")
    if formatted == (sample - timedelta(days=365)).strftime(template):
        raise UsageError(
            f"--key: {template!r} gives the same key a year apart, so the job would stop"
            " running after one year; include the year (%Y)"
        )
    return template


def run_key(slot: datetime, template: str | None = None, zone: ZoneInfo | None = None) -> str:
    """The slot's run key: its instant in UTC (``2026-10-28T01:30:00Z``) by default, or
    ``slot.strftime(template)`` in the schedule's zone (``%Y-%m-%d`` = once per local day).
    Slots from Schedule are in its zone already; pass ``zone`` for a slot that is not."""
    if template is None:
        return slot.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    local = slot.astimezone(zone) if zone else slot
    key = local.strftime(validate_key_template(template))
    # Empty: strftime gives up on a result it cannot hold (%f's digits read as a field width
    # by a preceding %0: '%0%%%f' on a time with microseconds asks for thousands of columns).
    if not key or len(key) > MAX_KEY_LENGTH or any(ch in key for ch in "\0\n\r"):
        raise UsageError(f"--key: {template!r} gives an unusable key {key[:40]!r}…")
    return key


def minute_key(t: datetime) -> str:
    """The run key of a firing without a schedule: the UTC minute it fired in."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:00Z")


def biz_date(slot: datetime, zone: ZoneInfo | None = None) -> str:
    """The slot's date in the schedule's zone (``CRONWRAP_BIZ_DATE``)."""
    return (slot.astimezone(zone) if zone else slot).strftime("%Y-%m-%d")


def parse_timestamp(text: str, zone: ZoneInfo, option: str = "--at") -> datetime:
    """ISO 8601 (``2026-10-28T01:30``, ``…+08:00``, ``…Z``) or ``2026-10-28 01:30``. A time
    without an offset is in ``zone``, read as cron reads it (see ``local_to_instant``)."""
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(
            f"{option}: {text!r} is not a timestamp (examples: 2026-10-28T01:30,"
            " '2026-10-28 01:30', 2026-10-28T01:30+08:00)"
        ) from None
    _check_year(value.year, option, text)
    if value.tzinfo is None:
        return local_to_instant(value, zone)
    return value.astimezone(zone)


def _check_year(year: int, option: str, text: str) -> None:
    # Slots are searched days around a date: the ends of the calendar (year 1, 9999) overflow.
    if not 1900 <= year <= 2999:
        raise UsageError(f"{option}: {text!r}: the year must be between 1900 and 2999")


def parse_date(text: str, option: str = "--date") -> date:
    """A ``YYYY-MM-DD`` date, or a UsageError naming ``option``."""
    try:
        day = date.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(f"{option}: {text!r} is not a date (example: 2026-10-28)") from None
    _check_year(day.year, option, text)
    return day
