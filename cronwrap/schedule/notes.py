"""What a person should know about a schedule, as data: DST changes that touch it, Debian
cron's day rule, the hours it fires at on the host's clock, how close its firings come.

``cronwrap explain`` (:mod:`cronwrap.schedule.explanation`) and ``cronwrap lint``
(:mod:`cronwrap.crontab.lint`) both take their findings from here and only word them.
"""

from __future__ import annotations

from datetime import datetime, timezone

from cronwrap.record import TYPE_CHECKING
from cronwrap.schedule.instants import Frozen, shifted
from cronwrap.schedule.slots import Schedule
from cronwrap.schedule.zones import DAY, Transition, find_zone, transitions

if TYPE_CHECKING:
    from datetime import date
    from zoneinfo import ZoneInfo

UTC = timezone.utc
#: How far ahead explain and lint look for DST changes: a year from their start.
DST_WINDOW_DAYS = 366
_HALF_YEAR = 182 * DAY


class DstNote(Frozen):
    """A DST change that skips or repeats fire times of a schedule (ARCHITECTURE.md §7).

    ``hit``: the schedule's wall times (naive, whole minutes, ascending) that the change
    skips (``transition.forward``) or repeats. By cronie's rules a fixed-time schedule runs
    a skipped time once right after the jump and a repeated one once; any other follows
    real time, so it loses the skipped runs and runs the repeated ones twice."""

    __slots__ = ("transition", "hit")
    transition: Transition
    hit: tuple[datetime, ...]

    @property
    def day(self) -> date:
        """The local date of the touched fire times."""
        return self.hit[0].date()

    @property
    def span(self) -> tuple[datetime, datetime]:
        """The wall times that do not exist, or happen twice: ``[start, end)``."""
        tr = self.transition
        return min(tr.wall_before, tr.wall_after), max(tr.wall_before, tr.wall_after)


def dst_notes(schedule: Schedule, start: datetime,
              days: int = DST_WINDOW_DAYS) -> tuple[DstNote, ...]:
    """The DST changes of the schedule's zone in the ``days`` from ``start``'s UTC date that
    skip or repeat some of its fire times, in time order."""
    if not schedule.fixed_time and len(schedule.parsed.hours) == 24:
        return ()  # a job firing every hour just follows real time: nothing to say
    notes = []
    for tr in transitions(schedule.zone, start.astimezone(UTC).date(), days):
        hit = tuple(w for w in tr.walls() if schedule.matches_wall(w))
        if hit:
            notes.append(DstNote(tr, hit))
    return tuple(notes)


class DayRule(Frozen):
    """Debian/Vixie cron's day rule, for a schedule restricting both day fields (recorded as
    cronsim does): ``either`` when a day matching either field runs (OR, neither field
    starts with '*'); otherwise both must match (AND), and ``starred`` holds the indexes
    (2: day-of-month, 4: day-of-week) of the fields starting with '*', which cause it."""

    __slots__ = ("either", "starred")
    either: bool
    starred: tuple[int, ...]


def day_rule(schedule: Schedule) -> DayRule | None:
    """The day rule that applies, or None when a day field is a plain ``*``."""
    _, _, dom, _, dow = schedule.cron.split()
    if dom == "*" or dow == "*":
        return None
    starred = tuple(index for index, text in ((2, dom), (4, dow)) if text.startswith("*"))
    return DayRule(not starred, starred)


class HostClock(Frozen):
    """A schedule in a zone other than the host's fires at other hours of the host's clock,
    and cron reads the crontab line on the host's clock. ``first``: the schedule's next fire
    time (in its zone) whose hour differs on the host's clock; ``on_host``: the same instant
    in the ``host`` zone."""

    __slots__ = ("first", "on_host", "host")
    first: datetime
    on_host: datetime
    host: str

    @property
    def day_shift(self) -> int:
        """Days from ``first``'s local date to ``on_host``'s (-1: the day before)."""
        return (self.on_host.date() - self.first.date()).days


def host_clock(schedule: Schedule, host_zone: str | None, start: datetime) -> HostClock | None:
    """How the host's clock reads the schedule's fire times after ``start``; None when the
    host's zone is the schedule's, is unknown, or the difference cannot change when the job
    fires (at its next fire time, nor at one half a year later)."""
    if not host_zone or host_zone == schedule.zone_name:
        return None
    host = find_zone(host_zone)
    if host is None:
        return None
    first = next(schedule.slots_after(start), start.astimezone(schedule.zone))
    # A fire time in the other half of the year too: the two zones may change at other dates.
    later = next(schedule.slots_after(shifted(first, _HALF_YEAR)), first)
    shifts = {t: _offset(t, schedule.zone) - _offset(t, host) for t in (first, later)}
    if set(shifts.values()) == {0} or _shift_invariant(schedule, set(shifts.values())):
        return None
    shown = next(t for t, shift in shifts.items() if shift)
    return HostClock(shown, shown.astimezone(host), host_zone)


def _offset(t: datetime, zone: ZoneInfo) -> int:
    offset = t.astimezone(zone).utcoffset()
    return int(offset.total_seconds()) if offset is not None else 0


def _shift_invariant(schedule: Schedule, shifts: set[int]) -> bool:
    """Whether shifting the zone by these offsets cannot change when the job fires: every
    hour of every day, with a minute pattern that maps onto itself."""
    parsed = schedule.parsed
    _, _, dom, month, dow = schedule.cron.split()
    if len(parsed.hours) != 24 or (dom, month, dow) != ("*", "*", "*"):
        return False
    minutes = set(parsed.minutes)
    return all({(m + s // 60) % 60 for m in minutes} == minutes for s in shifts)


def shortest_gap(schedule: Schedule) -> int | None:
    """Minutes between the closest two firings, when that is under an hour."""
    parsed = schedule.parsed
    minutes = sorted(parsed.minutes)
    if len(minutes) < 2:
        return None
    gaps = [b - a for a, b in zip(minutes, minutes[1:])]
    if any((hour + 1) % 24 in parsed.hours for hour in parsed.hours):
        gaps.append(60 - minutes[-1] + minutes[0])  # from the last of one hour to the next
    return min(gaps)
