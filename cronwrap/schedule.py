"""Cron schedules in a time zone: slots, run keys, manual slot selection and ``explain``.

Pure: nothing here asks the clock, and only :func:`system_zone_name` reads a file. Every
time is an argument and every result is a timezone-aware datetime in the schedule's zone.

cronsim parses the expression and decides which *days* match (its day-of-month/day-of-week
rules follow Debian cron). Turning a day's wall-clock fire times into instants is done here,
by cronie's DST rules (DESIGN §2.6), because cronsim's own aware-datetime iteration gets
some edges wrong (measured with cronsim 2.8 against tests/unit/cron_reference.py):

* a fixed-time job asked for its next time from the *second* 02:10 of a fall-back night
  answers the first 02:30, which is earlier than the question;
* a wildcard job (``* 0 8 9 *`` in America/Santiago) fires at a midnight that does not exist;
* wildcard jobs lose real fire times next to a transition: ``0 */2 * * *`` in
  Australia/Lord_Howe skips 02:00+10:30 on the fall-back night, ``*/7 1,2 * * SUN`` in
  America/Santiago skips 01:00-01:56 right after the midnight jump.

The rules, as cronie's ``cron.c`` applies them:

* fixed-time job (neither minute nor hour field starts with ``*``): a wall time skipped by a
  spring-forward fires once, at the first minute after the jump; a wall time that happens
  twice fires once, at its first occurrence;
* wildcard job: fires at every real instant whose wall time matches, so a skipped hour has no
  fire times and a repeated hour has them twice.
"""

from __future__ import annotations

import calendar
import os
from datetime import date, datetime, timedelta, timezone
from functools import lru_cache
from itertools import islice
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from cronwrap.errors import UsageError
from cronwrap.record import TYPE_CHECKING, Record

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from typing import Any

UTC = timezone.utc

ALIASES: dict[str, str] = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}

#: How late a firing may be and still belong to the slot before it (cron's start delay, a
#: loaded host, a host clock a little off). Capped by the schedule itself: a firing always
#: belongs to the latest slot at or before it, so it can never reach past the next slot.
DEFAULT_TOLERANCE = timedelta(seconds=90)
#: How early a firing may be and still belong to the slot after it. Cron never fires early by
#: its own clock, so this only absorbs a clock stepped between cron's wake-up and ours; it is
#: kept far below one minute so ``* * * * *`` firings never jump to the next minute.
EARLY_TOLERANCE = timedelta(seconds=5)

MAX_KEY_LENGTH = 200
_ZONE_EXAMPLES = "examples: UTC, Europe/Berlin, Asia/Shanghai"
_FIELD_NAMES = ("minute", "hour", "day-of-month", "month", "day-of-week")
_FIELD_HINTS = {
    "minute": "0-59, e.g. 30, */15, 0,30, 10-20",
    "hour": "0-23, e.g. 2, */6, 9-17",
    "day-of-month": "1-31 or L, and the day must exist in the months given, e.g. 1, 15, 1-7, L",
    "month": "1-12 or JAN-DEC, e.g. 1, */3, JAN-JUN",
    "day-of-week": "0-7 or SUN-SAT, 0 and 7 are Sunday, e.g. 1-5, MON-FRI, SAT,SUN",
}
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_DAY = 86400
# cronsim gives up after 50 years without a match; so do we.
_SEARCH_DAYS = 50 * 366
_ONE_MINUTE = timedelta(minutes=1)


# --- zones -----------------------------------------------------------------------------


def system_zone_name() -> str | None:
    """The host's zone name, or None when it cannot be told.

    The ``/etc/localtime`` symlink target comes first because that is what libc (and cron)
    read; ``/etc/timezone`` is Debian's older, sometimes stale, copy. This is the only
    function in this module that touches the file system.
    """
    try:
        target = os.readlink("/etc/localtime")
        if "zoneinfo/" in target:
            return target.split("zoneinfo/", 1)[1]
    except OSError:
        pass
    try:
        with open("/etc/timezone", encoding="utf-8") as handle:
            return handle.readline().strip() or None
    except OSError:
        return None


def load_zone(name: str, option: str = "--tz") -> ZoneInfo:
    """The zone called ``name``; a UsageError naming ``option`` when there is none."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise UsageError(f"{option}: {name!r} is not a time zone ({_ZONE_EXAMPLES})") from None


def _zone_key(value: str) -> str | None:
    """A zone key from a TZ-style value; None when it names the system zone's file."""
    key = value.strip().lstrip(":")
    if key.startswith("/"):
        # TZ=:/usr/share/zoneinfo/Europe/Berlin names a zone; TZ=:/etc/localtime the system's.
        return key.split("/zoneinfo/", 1)[1] if "/zoneinfo/" in key else None
    return key


def resolve_zone(
    name: str | None, environ: Mapping[str, str], system_zone: str | None
) -> tuple[ZoneInfo, str]:
    """The schedule's zone and its name: ``--tz``, else ``CRON_TZ``, else ``TZ``, else the
    system zone, else UTC. An empty variable counts as unset; an invalid one is an error
    naming it, because silently falling back would fire the job at the wrong hour.
    """
    if name is not None:
        return load_zone(name.strip(), "--tz"), name.strip()
    for variable in ("CRON_TZ", "TZ"):
        value = environ.get(variable, "").strip()
        key = _zone_key(value) if value else None
        if key:
            return load_zone(key, variable), key
    if system_zone:
        try:
            return ZoneInfo(system_zone), system_zone
        except (ZoneInfoNotFoundError, ValueError, OSError):
            pass  # an unreadable host setting is not the user's mistake: use UTC
    return ZoneInfo("UTC"), "UTC"


# --- parsing ---------------------------------------------------------------------------


def expand(expr: str) -> str:
    """The 5-field form of ``expr`` (aliases expanded, blanks normalised), or a UsageError."""
    text = expr.strip()
    if text.lower() == "@reboot":
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


def _parse_cron(cron: str, expr: str) -> CronSim:
    try:
        return CronSim(cron, datetime(2000, 1, 1))
    except CronSimError as exc:
        message = str(exc)
        name = next((n for n in _FIELD_NAMES if message.lower() == f"bad {n}"), None)
        hint = _FIELD_HINTS[name] if name else message
        raise UsageError(f"--schedule: {expr!r}: bad {name or 'expression'} ({hint})") from None


def _fire_times_of_day(parsed: CronSim) -> tuple[int, ...]:
    """Seconds after local midnight of each fire time on a matching day, ascending."""
    return tuple(h * 3600 + m * 60 for h in sorted(parsed.hours) for m in sorted(parsed.minutes))


# --- the slot engine (instants are whole epoch seconds) ----------------------------------


def _epoch(t: datetime) -> float:
    if t.tzinfo is None or t.utcoffset() is None:
        raise ValueError(f"a timezone-aware datetime is required, got {t!r}")
    return t.timestamp()


def shifted(t: datetime, seconds: float) -> datetime:
    """``t`` moved by real ``seconds``, in UTC. (Arithmetic on an aware datetime moves its
    wall clock, which is wrong across a DST change, so do it in UTC.)"""
    return t.astimezone(UTC) + timedelta(seconds=seconds)


def seconds_between(later: datetime, earlier: datetime) -> float:
    """Real seconds from ``earlier`` to ``later`` (subtraction within one zone ignores DST)."""
    return _epoch(later) - _epoch(earlier)


def _wall_of(epoch: int, zone: ZoneInfo) -> datetime:
    return datetime.fromtimestamp(epoch, zone).replace(tzinfo=None)


def _offset_at(epoch: float, zone: ZoneInfo) -> int:
    return int(datetime.fromtimestamp(epoch, zone).utcoffset().total_seconds())


@lru_cache(maxsize=8192)
def _steady_offset(zone: ZoneInfo, day: date) -> int | None:
    """The zone's UTC offset in seconds all through local ``day``; None if it changes."""
    midnight = datetime(day.year, day.month, day.day, tzinfo=zone)
    points = (midnight, midnight.replace(fold=1), midnight + timedelta(hours=12))
    after = midnight + timedelta(days=1)
    offsets = {p.utcoffset() for p in (*points, after, after.replace(fold=1))}
    return int(offsets.pop().total_seconds()) if len(offsets) == 1 else None


def _first_valid_minute_after(wall: datetime, zone: ZoneInfo) -> int:
    """The instant of the first existing wall minute after ``wall`` (a skipped wall time)."""
    probe = wall.replace(second=0, microsecond=0)
    for _ in range(2 * 24 * 60):
        probe += _ONE_MINUTE
        epoch = int(probe.replace(tzinfo=zone).timestamp())
        if _wall_of(epoch, zone) == probe:
            return epoch
    raise ValueError(f"no valid wall time within two days after {wall} in {zone.key}")


def _local_to_instant(wall: datetime, zone: ZoneInfo) -> datetime:
    """A naive wall time read the way cron reads it: a repeated time means its first
    occurrence, a skipped time means the first minute after the jump."""
    aware = wall.replace(tzinfo=zone, fold=0)
    if aware.astimezone(UTC).astimezone(zone).replace(tzinfo=None) == wall:
        return aware.astimezone(zone)
    return datetime.fromtimestamp(_first_valid_minute_after(wall, zone), zone)


def _month_step(day: date, step: int) -> date:
    """The first day of the next month (step > 0) or the last of the previous one."""
    if step > 0:
        return (day.replace(day=28) + timedelta(days=4)).replace(day=1)
    return day.replace(day=1) - timedelta(days=1)


class Frozen(Record):
    """A Record (no dataclass code generation at import: this is the ``run`` hot path)
    whose fields cannot be reassigned."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")


class Schedule(Frozen):
    """A cron expression in a zone. Build it with :meth:`parse`.

    ``expr`` as given, ``cron`` its 5-field form, ``zone``/``zone_name``, and ``fixed_time``
    (cronie's rule, which decides the DST behaviour)."""

    __slots__ = ("expr", "cron", "zone", "zone_name", "fixed_time", "_parsed", "_times_of_day")
    expr: str
    cron: str
    zone: ZoneInfo
    zone_name: str
    fixed_time: bool
    _parsed: CronSim
    _times_of_day: tuple[int, ...]

    def _identity(self) -> tuple[str, str, str]:
        return (self.cron, self.zone.key, self.zone_name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Schedule) and self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())

    def __repr__(self) -> str:
        return f"Schedule({self.expr!r}, zone={self.zone_name!r}, fixed_time={self.fixed_time})"

    @classmethod
    def parse(cls, expr: str, zone: ZoneInfo, zone_name: str | None = None) -> Schedule:
        """Parse ``expr`` (5 fields or an alias); a one-line UsageError when it is invalid."""
        cron = expand(expr)
        parsed = _parse_cron(cron, expr)
        minute, hour = cron.split()[:2]
        # cronie's rule: a job is "fixed-time" unless its minute or hour field starts with '*'.
        fixed = not minute.startswith("*") and not hour.startswith("*")
        schedule = cls(expr, cron, zone, zone_name or zone.key, fixed, parsed,
                       _fire_times_of_day(parsed))
        if next(schedule._fire_days(date(2000, 1, 1), 1), None) is None:
            raise UsageError(f"--schedule: {expr!r} never fires (its day fields exclude each other)")
        return schedule

    # -- days and walls

    def fires_on(self, day: date) -> bool:
        """Whether the month and day fields (with Debian cron's DOM/DOW rule) match ``day``."""
        return day.month in self._parsed.months and self._parsed.match_day(day)

    def _matches_wall(self, wall: datetime) -> bool:
        parsed = self._parsed
        return (wall.minute in parsed.minutes and wall.hour in parsed.hours
                and self.fires_on(wall.date()))

    def _fire_days(self, day: date, step: int) -> Iterator[date]:
        """Matching days from ``day`` on, forwards (step 1) or backwards (step -1)."""
        limit = day.toordinal() + step * _SEARCH_DAYS
        try:
            while (day.toordinal() - limit) * step < 0:
                if day.month not in self._parsed.months:
                    day = _month_step(day, step)
                    continue
                if self._parsed.match_day(day):
                    yield day
                day += timedelta(days=step)
        except OverflowError:
            return

    def _day_instants(self, day: date) -> list[int]:
        """Fire instants of local ``day``, unordered on a DST day, by cronie's rules."""
        offset = _steady_offset(self.zone, day)
        base = (day.toordinal() - _EPOCH_ORDINAL) * _DAY
        if offset is not None:
            return [base - offset + t for t in self._times_of_day]
        midnight = datetime(day.year, day.month, day.day)
        result: list[int] = []
        for t in self._times_of_day:
            result.extend(self._wall_instants(midnight + timedelta(seconds=t)))
        return result

    def _wall_instants(self, wall: datetime) -> tuple[int, ...]:
        first = int(wall.replace(tzinfo=self.zone, fold=0).timestamp())
        second = int(wall.replace(tzinfo=self.zone, fold=1).timestamp())
        if first == second:
            return (first,)
        if _wall_of(first, self.zone) == wall or _wall_of(second, self.zone) == wall:
            # The wall time happens twice: fixed-time jobs run at the first, wildcard at both.
            early, late = sorted((first, second))
            return (early,) if self.fixed_time else (early, late)
        # Skipped by a spring-forward: fixed-time jobs run once right after the jump.
        return (_first_valid_minute_after(wall, self.zone),) if self.fixed_time else ()

    def _blocks(self, day: date, step: int) -> Iterator[list[int]]:
        """Fire instants day by day, each block sorted in the walking direction.

        Consecutive DST days form one block: a repeated hour near midnight can interleave
        the instants of two neighbouring days.
        """
        done_until: date | None = None
        for current in self._fire_days(day, step):
            if done_until is not None and (current - done_until).days * step <= 0:
                continue
            run = [current]
            while _steady_offset(self.zone, run[-1]) is None:
                following = run[-1] + timedelta(days=step)
                if not self.fires_on(following) or _steady_offset(self.zone, following) is not None:
                    break
                run.append(following)
            done_until = run[-1]
            instants = [i for d in run for i in self._day_instants(d)]
            yield sorted(instants, reverse=step < 0)

    def _instants(self, t: datetime, reverse: bool) -> Iterator[int]:
        """Fire instants strictly after ``t`` ascending, or at/before ``t`` descending."""
        when = _epoch(t)
        step = -1 if reverse else 1
        offsets = [_offset_at(when + k * _DAY, self.zone) for k in (-1, 0, 1)]
        # A local day that can hold an instant on the right side of t, whatever DST does.
        wall = datetime.fromtimestamp(when + (max(offsets) if reverse else min(offsets)), UTC)
        last = None
        for block in self._blocks(wall.date(), step):
            for instant in block:
                if instant != last and (instant <= when if reverse else instant > when):
                    last = instant
                    yield instant

    def _at(self, instant: int) -> datetime:
        return datetime.fromtimestamp(instant, self.zone)

    def _never(self, t: datetime) -> UsageError:
        return UsageError(f"--schedule: {self.expr!r} does not fire within 50 years of {t.isoformat()}")

    # -- public queries

    def slots_after(self, t: datetime) -> Iterator[datetime]:
        """All fire times strictly after ``t``, ascending, lazily."""
        return (self._at(i) for i in self._instants(t, reverse=False))

    def next_after(self, t: datetime) -> datetime:
        """The first fire time strictly after ``t``."""
        for instant in self._instants(t, reverse=False):
            return self._at(instant)
        raise self._never(t)

    def prev_at_or_before(self, t: datetime) -> datetime:
        """The last fire time at or before ``t``."""
        for instant in self._instants(t, reverse=True):
            return self._at(instant)
        raise self._never(t)

    def slots_between(
        self, start: datetime, end: datetime, *, reverse: bool = False
    ) -> Iterator[datetime]:
        """Fire times ``s`` with ``start < s <= end``, ascending (descending with ``reverse``).

        Lazy: a year of ``* * * * *`` is 525,600 slots, so callers take what they need.
        """
        low, high = _epoch(start), _epoch(end)
        if reverse:
            for instant in self._instants(end, reverse=True):
                if instant <= low:
                    return
                yield self._at(instant)
            return
        for instant in self._instants(start, reverse=False):
            if instant > high:
                return
            yield self._at(instant)

    def slot_for_firing(
        self, t: datetime, tolerance: timedelta = DEFAULT_TOLERANCE
    ) -> tuple[datetime | None, float]:
        """The slot a firing at ``t`` belongs to, and the firing's skew in seconds.

        The rule: the latest slot ``s`` with ``s <= t + min(tolerance, EARLY_TOLERANCE)``,
        provided ``t - s <= tolerance``. So a firing up to ``tolerance`` (default 90 s) late
        or up to 5 s early maps to its slot, and hosts firing the same minute a few seconds
        apart all claim one slot. Because the *latest* such slot wins, the late window is
        in effect capped at the gap to the next slot minus 5 s: a ``* * * * *`` firing at
        12:00:40 is 12:00's, one at 12:00:56 is 12:01's.

        Skew is ``t - slot`` (positive: late). When no slot qualifies the slot is None and
        the skew is measured from the nearest fire time, before or after, for the warning.
        """
        early = min(tolerance, EARLY_TOLERANCE)
        slot = self.prev_at_or_before(shifted(t, early.total_seconds()))
        skew = seconds_between(t, slot)
        if skew <= tolerance.total_seconds():
            return slot, skew
        ahead = seconds_between(t, self.next_after(t))
        return None, ahead if -ahead < skew else skew

    def slots_in(self, start: datetime, end: datetime) -> Iterator[datetime]:
        """Fire times ``s`` with ``start <= s <= end``, ascending (fire times are whole
        minutes, so a second before ``start`` excludes nothing of the range)."""
        return self.slots_between(shifted(start, -1), end)

    def midnight(self, day: date) -> datetime:
        """The first instant of local ``day`` (a midnight skipped by DST: the jump's end)."""
        return _local_to_instant(datetime(day.year, day.month, day.day), self.zone)

    def slot_on_date(self, day: date) -> datetime:
        """The first fire time on local ``day`` (``--date``); an error when there is none."""
        midnight = self.midnight(day)
        slot = self.next_after(shifted(midnight, -1))
        if slot.date() == day:
            return slot
        raise UsageError(
            f"--date: {self.expr!r} does not fire on {day.isoformat()} (a {day:%A}) in"
            f" {self.zone_name}; {self._nearest_text(midnight)}"
        )

    def slot_at(self, t: datetime) -> datetime:
        """``t`` itself when it is a fire time (``--at``); otherwise an error naming the
        fire times on either side."""
        slot = self.prev_at_or_before(t)
        if slot.timestamp() == t.timestamp():
            return slot
        raise UsageError(
            f"--at: {t.astimezone(self.zone).isoformat()} is not a fire time of {self.expr!r}"
            f" in {self.zone_name}; {self._nearest_text(t)}"
        )

    def _nearest_text(self, t: datetime) -> str:
        """"nearest fire times: X (before), Y (after)" around ``t`` (exclusive)."""
        parts = []
        for label, find, point in (("before", self.prev_at_or_before, shifted(t, -1)),
                                   ("after", self.next_after, t)):
            try:
                parts.append(f"{find(point).isoformat()} ({label})")
            except UsageError:
                pass
        return "nearest fire times: " + ", ".join(parts) if parts else "it never fires"


# --- keys, dates and timestamps ----------------------------------------------------------

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
    if len(key) > MAX_KEY_LENGTH or any(ch in key for ch in "\0\n\r"):
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
    without an offset is in ``zone``, read as cron reads it (see ``_local_to_instant``)."""
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(
            f"{option}: {text!r} is not a timestamp (examples: 2026-10-28T01:30,"
            " '2026-10-28 01:30', 2026-10-28T01:30+08:00)"
        ) from None
    _check_year(value.year, option, text)
    if value.tzinfo is None:
        return _local_to_instant(value, zone)
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


# --- explain ---------------------------------------------------------------------------


class Explanation(Frozen):
    """What ``cronwrap explain`` reports; ``to_json`` is the machine-readable contract."""

    __slots__ = ("expression", "tz", "next", "warnings", "cron")
    _defaults = {"cron": ""}
    expression: str
    tz: str
    next: list[datetime]
    warnings: list[str]
    cron: str

    def to_json(self) -> dict[str, object]:
        """``{"expression", "tz", "next": [ISO 8601 with offset], "warnings", "cron"}``."""
        return {
            "expression": self.expression,
            "tz": self.tz,
            "next": [t.isoformat() for t in self.next],
            "warnings": list(self.warnings),
            "cron": self.cron,
        }


def explain(
    expr: str,
    zone: ZoneInfo,
    zone_name: str,
    system_zone_name: str | None,
    start: datetime,
    count: int,
) -> Explanation:
    """The next ``count`` fire times strictly after ``start`` and the warnings a person needs."""
    if count < 0:
        raise UsageError(f"--count: {count} is negative (example: --count 10)")
    schedule = Schedule.parse(expr, zone, zone_name)
    times = list(islice(schedule.slots_after(start), count))
    warnings = [
        *_day_rule_warnings(schedule),
        *_step_warnings(schedule),
        *_dst_warnings(schedule, start),
        *_zone_warnings(schedule, system_zone_name, times or [start.astimezone(zone)]),
    ]
    return Explanation(expr, zone_name, times, warnings, schedule.cron)


_DAY_NAMES = ["Sundays", "Mondays", "Tuesdays", "Wednesdays", "Thursdays", "Fridays", "Saturdays"]


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _and_list(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _dom_text(schedule: Schedule, text: str) -> str:
    days = schedule._parsed.days
    if text.isdigit():
        return f"the {_ordinal(int(text))} of the month"
    return f"days {text} of the month" if all(d > 0 for d in days) else f"day-of-month {text}"


def _dow_text(schedule: Schedule, text: str) -> str:
    weekdays = schedule._parsed.weekdays
    if not all(isinstance(w, int) for w in weekdays):
        return f"day-of-week {text}"
    return _and_list([_DAY_NAMES[w] for w in sorted({int(w) % 7 for w in weekdays})])


def _day_rule_warnings(schedule: Schedule) -> list[str]:
    """Debian/Vixie cron's day rule, recorded as cronsim does: when both day fields are
    restricted a day matching either runs (OR); when one starts with '*' both must match
    (AND), which surprises people who read '*/2' as "every other day"."""
    _, _, dom, _, dow = schedule.cron.split()
    if dom == "*" or dow == "*":
        return []
    dom_text, dow_text = _dom_text(schedule, dom), _dow_text(schedule, dow)
    if not dom.startswith("*") and not dow.startswith("*"):
        return [
            f"day-of-month '{dom}' and day-of-week '{dow}' are both restricted, so cron runs"
            f" on {dom_text} OR on {dow_text} (not only when both match)"
        ]
    starred = "day-of-month" if dom.startswith("*") else "day-of-week"
    return [
        f"{starred} '{dom if starred == 'day-of-month' else dow}' starts with '*', so"
        f" Vixie/Debian cron (and cronwrap) run only on {dom_text} that are also {dow_text}"
        " (AND); many other crons and most documentation would say OR"
    ]


# (field index, cycle length, how a value reads, unit, what the steps restart with)
_STEP_FIELDS = (
    (0, 60, lambda v: f":{v:02d}", "minute", "hour"),
    (1, 24, lambda v: f"{v:02d}:00", "hour", "day"),
    (2, 31, lambda v: f"the {_ordinal(v)}", "day", "month"),
    (3, 12, lambda v: calendar.month_abbr[v], "month", "year"),
    (4, 7, lambda v: _DAY_NAMES[v][:3], "day", "week"),
)


def _field_values(schedule: Schedule, index: int) -> list[int]:
    parsed = schedule._parsed
    raw = (parsed.minutes, parsed.hours, parsed.days, parsed.months, parsed.weekdays)[index]
    values = {v % 7 if index == 4 else v for v in raw if isinstance(v, int) and v >= 0}
    return sorted(values)


def _step_warnings(schedule: Schedule) -> list[str]:
    """Steps restart at each hour/day/month/year/week: '*/7' minutes is not every 7 minutes."""
    warnings = []
    names = ("minutes", "hours", "day-of-month", "months", "day-of-week")
    for (index, cycle, show, unit, period), text in zip(_STEP_FIELDS, schedule.cron.split()):
        base, _, step = text.partition("/")
        if not step or "," in text or "-" in base or not step.isdigit():
            continue
        values = _field_values(schedule, index)
        wrap = values[0] + cycle - values[-1] if values else 0
        if len(values) > 1 and wrap != int(step):
            warnings.append(
                f"'{text}' in {names[index]} fires {'at' if index < 2 else 'in' if index == 3 else 'on'}"
                f" {show(values[-1])} then"
                f" {show(values[0])} — a {wrap}-{unit} gap, not {step} (steps restart every {period})"
            )
    return warnings


class _Transition(Frozen):
    __slots__ = ("at", "before", "after")
    at: int  # epoch seconds of the first instant with the new offset
    before: int  # offset in seconds
    after: int


@lru_cache(maxsize=512)
def _transitions(zone: ZoneInfo, first: date, days: int) -> tuple[_Transition, ...]:
    """The zone's offset changes in the ``days`` after ``first``. Stepping a day at a time
    and bisecting where the offset differs keeps a year's scan to ~400 offset look-ups."""
    start = (first.toordinal() - _EPOCH_ORDINAL) * _DAY
    found = []
    previous = _offset_at(start, zone)
    for k in range(1, days + 1):
        current = _offset_at(start + k * _DAY, zone)
        if current != previous:
            low, high = start + (k - 1) * _DAY, start + k * _DAY
            while high - low > 1:
                middle = (low + high) // 2
                low, high = (middle, high) if _offset_at(middle, zone) == previous else (low, middle)
            found.append(_Transition(high, previous, current))
        previous = current
    return tuple(found)


def _clock(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%H:%M")


def _dst_warnings(schedule: Schedule, start: datetime) -> list[str]:
    """Fire times that a DST change in the next year skips or repeats, and what happens."""
    warnings = []
    every_hour = len(schedule._parsed.hours) == 24
    for tr in _transitions(schedule.zone, start.astimezone(UTC).date(), 366):
        jump_from, jump_to = tr.at + tr.before, tr.at + tr.after  # wall clock, as epoch
        low, high = sorted((jump_from, jump_to))
        walls = [_wall_of(w, UTC) for w in range(low - low % 60 + (60 if low % 60 else 0), high, 60)]
        hit = [w for w in walls if schedule._matches_wall(w)]
        if not hit or (not schedule.fixed_time and every_hour):
            continue  # a job firing every hour just follows real time: nothing to say
        warnings.append(_dst_message(schedule, tr, hit, jump_from, jump_to))
    return warnings


def _dst_message(schedule: Schedule, tr: _Transition, hit: list[datetime],
                 jump_from: int, jump_to: int) -> str:
    shown = [w.strftime("%H:%M") for w in hit[:4]] + ([f"{len(hit) - 4} more"] if len(hit) > 4 else [])
    runs = f"the run at {shown[0]}" if len(hit) == 1 else f"the runs at {_and_list(shown)}"
    day, zone = hit[0].date().isoformat(), schedule.zone_name
    if tr.after > tr.before:
        head = (f"{day}: {_clock(jump_from)}–{_clock(jump_to)} does not exist in {zone}"
                f" (clocks jump from {_clock(jump_from)} to {_clock(jump_to)})")
        if schedule.fixed_time:
            together = "" if len(hit) == 1 else " together"
            return f"{head}; {runs} happen{'s' * (len(hit) == 1)} once{together}, at" \
                   f" {_clock(jump_to)}, right after the jump"
        return f"{head}; this schedule follows real time, so {runs} do not happen that day"
    head = (f"{day}: {_clock(jump_to)}–{_clock(jump_from)} happens twice in {zone}"
            f" (clocks go back from {_clock(jump_from)} to {_clock(jump_to)})")
    if schedule.fixed_time:
        offset = timezone(timedelta(seconds=tr.before))
        each = "s once" if len(hit) == 1 else " once each"
        return f"{head}; {runs} happen{each}, at the first occurrence ({offset})"
    return f"{head}; this schedule follows real time, so {runs} happen twice"


def _zone_warnings(schedule: Schedule, system_zone: str | None, times: list[datetime]) -> list[str]:
    """A schedule in a zone other than the host's fires at other hours of the host's clock,
    and cron reads the crontab line in the host's zone."""
    if not system_zone or system_zone == schedule.zone_name:
        return []
    try:
        host = ZoneInfo(system_zone)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return []
    first = times[0]
    later = shifted(first, 182 * _DAY)
    shifts = {(t.astimezone(schedule.zone).utcoffset() - t.astimezone(host).utcoffset())
              for t in (first, later)}
    if shifts == {timedelta(0)} or _shift_invariant(schedule, shifts):
        return []
    on_host = first.astimezone(host)
    day = {1: " the next day", -1: " the day before"}.get((on_host.date() - first.date()).days, "")
    return [
        f"your {first:%H:%M} {schedule.zone_name} runs at {on_host:%H:%M}{day} {system_zone}"
        " on this host's clock: the crontab line must fire then (or set"
        f" CRON_TZ={schedule.zone_name} in the crontab, if your cron supports it)"
    ]


def _shift_invariant(schedule: Schedule, shifts: set[timedelta]) -> bool:
    """Whether shifting the zone by these offsets cannot change when the job fires: every
    hour of every day, with a minute pattern that maps onto itself."""
    parsed = schedule._parsed
    _, _, dom, month, dow = schedule.cron.split()
    if len(parsed.hours) != 24 or (dom, month, dow) != ("*", "*", "*"):
        return False
    minutes = set(parsed.minutes)
    return all({(m + int(s.total_seconds()) // 60) % 60 for m in minutes} == minutes for s in shifts)


__all__ = [
    "ALIASES",
    "DEFAULT_TOLERANCE",
    "EARLY_TOLERANCE",
    "Explanation",
    "Frozen",
    "Schedule",
    "biz_date",
    "explain",
    "expand",
    "load_zone",
    "minute_key",
    "parse_date",
    "parse_timestamp",
    "resolve_zone",
    "run_key",
    "seconds_between",
    "shifted",
    "system_zone_name",
    "validate_key_template",
]
