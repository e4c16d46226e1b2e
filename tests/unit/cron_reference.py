"""A brute-force cron reference for the tests, independent of cronsim and of cronwrap.

It knows nothing clever. :class:`ZoneMinutes` walks every real minute of a period (in UTC)
and records which local wall time each one shows, so every wall minute maps to the
instants showing it: none (skipped by a spring-forward), one, or two (repeated by a
fall-back). :func:`fire_instants` then applies the five fields to each local wall minute,
with the rules by the book:

* day rule (Vixie/Debian cron): if the day-of-month or the day-of-week field starts with
  ``*`` both must match (AND), otherwise either (OR);
* fixed-time jobs (neither minute nor hour starts with ``*``, cronie's rule): a skipped
  wall minute fires at the first wall minute after it that exists, once; a repeated wall
  minute fires at its first occurrence only;
* wildcard jobs: every real minute whose wall time matches.

Supported syntax: ``*``, numbers, names (JAN-DEC, SUN-SAT), ranges, lists, ``/`` steps.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

MONTHS = "JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC".split()
WEEKDAYS = "SUN MON TUE WED THU FRI SAT".split()


def _number(text: str, names: list[str], first: int) -> int:
    return names.index(text) + first if text in names else int(text)


def parse_field(text: str, low: int, high: int, names: list[str] = ()) -> set[int]:
    """The values a cron field selects within ``low``..``high``."""
    values: set[int] = set()
    for term in text.upper().split(","):
        base, _, step = term.partition("/")
        if base == "*":
            start, stop = low, high
        elif "-" in base:
            a, b = base.split("-")
            start, stop = _number(a, names, low), _number(b, names, low)
        else:
            start = _number(base, names, low)
            stop = high if step else start  # "5/15" runs to the end of the range
        values.update(range(start, stop + 1, int(step) if step else 1))
    return values


class CronFields:
    """The five fields of a cron expression, matched against a local wall minute."""

    def __init__(self, expr: str) -> None:
        minute, hour, dom, month, dow = expr.split()
        self.minutes = parse_field(minute, 0, 59)
        self.hours = parse_field(hour, 0, 23)
        self.doms = parse_field(dom, 1, 31)
        self.months = parse_field(month, 1, 12, MONTHS)
        self.dows = {d % 7 for d in parse_field(dow, 0, 7, WEEKDAYS)}
        self.day_and = dom.startswith("*") or dow.startswith("*")
        self.fixed = not minute.startswith("*") and not hour.startswith("*")

    def day_matches(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        dom_ok = day.day in self.doms
        dow_ok = day.isoweekday() % 7 in self.dows
        return (dom_ok and dow_ok) if self.day_and else (dom_ok or dow_ok)


class ZoneMinutes:
    """Every real minute from ``start`` to ``end`` (UTC) in ``zone``: wall minute → the
    epoch seconds at which local clocks show it, ascending."""

    def __init__(self, zone: ZoneInfo, start: datetime, end: datetime) -> None:
        self.zone = zone
        self.shown: dict[datetime, list[int]] = defaultdict(list)
        first, last = int(start.timestamp()), int(end.timestamp())
        for epoch in range(first, last, 60):
            wall = datetime.fromtimestamp(epoch, zone).replace(tzinfo=None)
            self.shown[wall].append(epoch)
        self.first_wall = min(self.shown)
        self.last_wall = max(self.shown)

    def days(self) -> list[date]:
        count = (self.last_wall.date() - self.first_wall.date()).days + 1
        return [self.first_wall.date() + timedelta(days=k) for k in range(count)]

    def next_existing(self, wall: datetime) -> int | None:
        """The first instant of the first wall minute after ``wall`` that exists."""
        probe = wall
        while probe <= self.last_wall:
            probe += timedelta(minutes=1)
            if probe in self.shown:
                return self.shown[probe][0]
        return None


def fire_instants(expr: str, minutes: ZoneMinutes) -> list[int]:
    """Epoch seconds of every firing of ``expr`` (5 numeric/named fields) in the period."""
    fields = CronFields(expr)
    fired: set[int] = set()
    for day in minutes.days():
        if not fields.day_matches(day):
            continue
        for hour in fields.hours:
            for minute in fields.minutes:
                wall = datetime(day.year, day.month, day.day, hour, minute)
                fired.update(_wall_firings(fields, minutes, wall))
    return sorted(fired)


def _wall_firings(fields: CronFields, minutes: ZoneMinutes, wall: datetime) -> list[int]:
    if wall < minutes.first_wall or wall > minutes.last_wall:
        return []
    shown = minutes.shown.get(wall, [])
    if not fields.fixed:
        return shown
    if shown:
        return shown[:1]
    after = minutes.next_existing(wall)
    return [] if after is None else [after]


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=timezone.utc)
