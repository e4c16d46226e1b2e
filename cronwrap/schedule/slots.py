"""The slot engine: a cron expression in a zone, and its fire times (slots) by cronie's rules.

Instants are whole epoch seconds inside, timezone-aware datetimes in the schedule's zone
outside. Nothing here asks the clock.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

from cronwrap.errors import UsageError
from cronwrap.record import TYPE_CHECKING, Record
from cronwrap.schedule.cron import expand, fire_times_of_day, is_fixed_time, parse_fields
from cronwrap.schedule.zones import (
    DAY,
    EPOCH_ORDINAL,
    first_valid_minute_after,
    local_to_instant,
    offset_at,
    steady_offset,
    wall_of,
)

if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any
    from zoneinfo import ZoneInfo

    from cronsim import CronSim

UTC = timezone.utc

#: How late a firing may be and still belong to the slot before it (cron's start delay, a
#: loaded host, a host clock a little off). Capped by the schedule itself: a firing always
#: belongs to the latest slot at or before it, so it can never reach past the next slot.
DEFAULT_TOLERANCE = timedelta(seconds=90)
#: How early a firing may be and still belong to the slot after it. Cron never fires early by
#: its own clock, so this only absorbs a clock stepped between cron's wake-up and ours; it is
#: kept far below one minute so ``* * * * *`` firings never jump to the next minute.
EARLY_TOLERANCE = timedelta(seconds=5)
# cronsim gives up after 50 years without a match; so do we.
_SEARCH_DAYS = 50 * 366


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

    ``expr`` as given, ``cron`` its 5-field form, ``zone``/``zone_name``, ``fixed_time``
    (cronie's rule, which decides the DST behaviour), and ``parsed``: cronsim's reading of
    the fields (its sets ``minutes``, ``hours``, ``days``, ``months``, ``weekdays``; shared
    between schedules, so never iterate it)."""

    __slots__ = ("expr", "cron", "zone", "zone_name", "fixed_time", "parsed", "_times_of_day")
    expr: str
    cron: str
    zone: ZoneInfo
    zone_name: str
    fixed_time: bool
    parsed: CronSim
    _times_of_day: tuple[int, ...]

    def _identity(self) -> tuple[str, str, str]:
        return (self.cron, self.zone.key, self.zone_name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Schedule) and self._identity() == other._identity()

    # Record sets __hash__ = None because records are mutable; a Schedule is not.
    def __hash__(self) -> int:  # type: ignore[override]
        return hash(self._identity())

    def __repr__(self) -> str:
        return f"Schedule({self.expr!r}, zone={self.zone_name!r}, fixed_time={self.fixed_time})"

    @classmethod
    def parse(cls, expr: str, zone: ZoneInfo, zone_name: str | None = None) -> Schedule:
        """Parse ``expr`` (5 fields or an alias); a one-line UsageError when it is invalid."""
        cron = expand(expr)
        parsed = parse_fields(cron, expr)
        schedule = cls(expr, cron, zone, zone_name or zone.key, is_fixed_time(cron), parsed,
                       fire_times_of_day(parsed))
        if next(schedule._fire_days(date(2000, 1, 1), 1), None) is None:
            raise UsageError(f"--schedule: {expr!r} never fires (its day fields exclude each other)")
        return schedule

    # -- days and walls

    def fires_on(self, day: date) -> bool:
        """Whether the month and day fields (with Debian cron's DOM/DOW rule) match ``day``."""
        return day.month in self.parsed.months and self.parsed.match_day(day)

    def matches_wall(self, wall: datetime) -> bool:
        """Whether the five fields match the wall time ``wall`` (naive, whole minute)."""
        parsed = self.parsed
        return (wall.minute in parsed.minutes and wall.hour in parsed.hours
                and self.fires_on(wall.date()))

    def _fire_days(self, day: date, step: int) -> Iterator[date]:
        """Matching days from ``day`` on, forwards (step 1) or backwards (step -1)."""
        limit = day.toordinal() + step * _SEARCH_DAYS
        try:
            while (day.toordinal() - limit) * step < 0:
                if day.month not in self.parsed.months:
                    day = _month_step(day, step)
                    continue
                if self.parsed.match_day(day):
                    yield day
                day += timedelta(days=step)
        except OverflowError:
            return

    def _day_instants(self, day: date) -> list[int]:
        """Fire instants of local ``day``, unordered on a DST day, by cronie's rules."""
        offset = steady_offset(self.zone, day)
        base = (day.toordinal() - EPOCH_ORDINAL) * DAY
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
        if wall_of(first, self.zone) == wall or wall_of(second, self.zone) == wall:
            # The wall time happens twice: fixed-time jobs run at the first, wildcard at both.
            early, late = sorted((first, second))
            return (early,) if self.fixed_time else (early, late)
        # Skipped by a spring-forward: fixed-time jobs run once right after the jump.
        return (first_valid_minute_after(wall, self.zone),) if self.fixed_time else ()

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
            while steady_offset(self.zone, run[-1]) is None:
                following = run[-1] + timedelta(days=step)
                if not self.fires_on(following) or steady_offset(self.zone, following) is not None:
                    break
                run.append(following)
            done_until = run[-1]
            instants = [i for d in run for i in self._day_instants(d)]
            yield sorted(instants, reverse=step < 0)

    def _instants(self, t: datetime, reverse: bool) -> Iterator[int]:
        """Fire instants strictly after ``t`` ascending, or at/before ``t`` descending."""
        when = _epoch(t)
        step = -1 if reverse else 1
        offsets = [offset_at(when + k * DAY, self.zone) for k in (-1, 0, 1)]
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
        return local_to_instant(datetime(day.year, day.month, day.day), self.zone)

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
