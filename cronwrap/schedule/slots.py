"""The slot engine: a cron expression in a zone, and its fire times (slots) by cronie's rules.

Instants are whole epoch seconds inside, timezone-aware datetimes in the schedule's zone
outside. Nothing here asks the clock.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta

from cronwrap.errors import UsageError
from cronwrap.record import TYPE_CHECKING
from cronwrap.schedule.cron import expand, fire_times_of_day, is_fixed_time, parse_fields
from cronwrap.schedule.instants import UTC, Slots, epoch, shifted
from cronwrap.schedule.zones import (
    DAY,
    EPOCH_ORDINAL,
    find_zone,
    first_valid_minute_after,
    local_to_instant,
    offset_at,
    steady_offset,
    wall_of,
)

if TYPE_CHECKING:
    from collections.abc import Iterator
    from zoneinfo import ZoneInfo

    from cronsim import CronSim

# cronsim gives up after 50 years without a match; so do we.
_SEARCH_DAYS = 50 * 366


def _month_step(day: date, step: int) -> date:
    """The first day of the next month (step > 0) or the last of the previous one."""
    if step > 0:
        return (day.replace(day=28) + timedelta(days=4)).replace(day=1)
    return day.replace(day=1) - timedelta(days=1)


class Schedule(Slots):
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
        when = epoch(t)
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

    def local(self, t: datetime) -> datetime:
        return t.astimezone(self.zone)

    def elsewhere(self, zone_name: str) -> Schedule | None:
        """The same expression read in the zone ``zone_name``; None when there is none."""
        zone = find_zone(zone_name)
        return None if zone is None else Schedule.parse(self.expr, zone, zone_name)

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
