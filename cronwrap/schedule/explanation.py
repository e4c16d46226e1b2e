"""``cronwrap explain``: the next fire times of a schedule and the warnings a person needs,
worded from the notes of :mod:`cronwrap.schedule.notes` (lint words the same notes)."""

from __future__ import annotations

import calendar
from datetime import datetime, timedelta, timezone
from itertools import islice

from cronwrap.errors import UsageError
from cronwrap.record import TYPE_CHECKING
from cronwrap.schedule.instants import Frozen
from cronwrap.schedule.notes import DayRule, DstNote, HostClock, day_rule, dst_notes, host_clock
from cronwrap.schedule.slots import Schedule

if TYPE_CHECKING:
    from collections.abc import Callable
    from zoneinfo import ZoneInfo


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
    rule = day_rule(schedule)
    clock = host_clock(schedule, system_zone_name, start)
    warnings = [
        *([_day_rule_text(schedule, rule)] if rule else []),
        *_step_warnings(schedule),
        *(dst_text(schedule, note) for note in dst_notes(schedule, start)),
        *([_host_clock_text(schedule, clock)] if clock else []),
    ]
    return Explanation(expr, zone_name, times, warnings, schedule.cron)


def in_words(expr: str, zone: ZoneInfo) -> str:
    """The schedule in English, as cronsim words it ("At minute 5 of every hour"); "" when
    cronsim has no words for it. Times are wall times in the schedule's zone."""
    try:
        return str(Schedule.parse(expr, zone).parsed.explain())
    except (UsageError, ValueError, AttributeError):
        return ""


_DAY_SHIFT = {1: " the next day", -1: " the day before"}


def _host_clock_text(schedule: Schedule, clock: HostClock) -> str:
    return (f"your {clock.first:%H:%M} {schedule.zone_name} runs at {clock.on_host:%H:%M}"
            f"{_DAY_SHIFT.get(clock.day_shift, '')} {clock.host} on this host's clock: the"
            f" crontab line must fire then (or set CRON_TZ={schedule.zone_name} in the"
            " crontab, if your cron supports it)")
_DAY_NAMES = ["Sundays", "Mondays", "Tuesdays", "Wednesdays", "Thursdays", "Fridays", "Saturdays"]


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _and_list(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _dom_text(schedule: Schedule, text: str) -> str:
    days = schedule.parsed.days
    if text.isdigit():
        return f"the {_ordinal(int(text))} of the month"
    return f"days {text} of the month" if all(d > 0 for d in days) else f"day-of-month {text}"


def _dow_text(schedule: Schedule, text: str) -> str:
    weekdays = schedule.parsed.weekdays
    plain = [w for w in weekdays if isinstance(w, int)]
    if len(plain) != len(weekdays):  # 5L, 1#2: the last Friday, the second Monday
        return f"day-of-week {text}"
    return _and_list([_DAY_NAMES[w] for w in sorted({w % 7 for w in plain})])


def _day_rule_text(schedule: Schedule, rule: DayRule) -> str:
    """Debian cron's day rule: OR when both day fields are restricted, AND when one starts
    with '*', which surprises people who read '*/2' as "every other day"."""
    _, _, dom, _, dow = schedule.cron.split()
    dom_text, dow_text = _dom_text(schedule, dom), _dow_text(schedule, dow)
    if rule.either:
        return (f"day-of-month '{dom}' and day-of-week '{dow}' are both restricted, so cron"
                f" runs on {dom_text} OR on {dow_text} (not only when both match)")
    starred = "day-of-month" if rule.starred[0] == 2 else "day-of-week"
    return (f"{starred} '{dom if starred == 'day-of-month' else dow}' starts with '*', so"
            f" Vixie/Debian cron (and cronwrap) run only on {dom_text} that are also {dow_text}"
            " (AND); many other crons and most documentation would say OR")


def _month_name(v: int) -> str:
    return calendar.month_abbr[v]


# (cycle length, how a value reads, unit, what the steps restart with), by field index
_STEP_FIELDS: tuple[tuple[int, Callable[[int], str], str, str], ...] = (
    (60, lambda v: f":{v:02d}", "minute", "hour"),
    (24, lambda v: f"{v:02d}:00", "hour", "day"),
    (31, lambda v: f"the {_ordinal(v)}", "day", "month"),
    (12, _month_name, "month", "year"),
    (7, lambda v: _DAY_NAMES[v][:3], "day", "week"),
)
_STEP_NAMES = ("minutes", "hours", "day-of-month", "months", "day-of-week")


def _field_values(schedule: Schedule, index: int) -> list[int]:
    parsed = schedule.parsed
    raw = (parsed.minutes, parsed.hours, parsed.days, parsed.months, parsed.weekdays)[index]
    values = {v % 7 if index == 4 else v for v in raw if isinstance(v, int) and v >= 0}
    return sorted(values)


def _step_warnings(schedule: Schedule) -> list[str]:
    """Steps restart at each hour/day/month/year/week: '*/7' minutes is not every 7 minutes."""
    warnings = []
    for index, text in enumerate(schedule.cron.split()):
        cycle, show, unit, period = _STEP_FIELDS[index]
        base, _, step = text.partition("/")
        if not step or "," in text or "-" in base or not step.isdigit():
            continue
        values = _field_values(schedule, index)
        wrap = values[0] + cycle - values[-1] if values else 0
        if len(values) > 1 and wrap != int(step):
            where = "at" if index < 2 else "in" if index == 3 else "on"
            warnings.append(
                f"'{text}' in {_STEP_NAMES[index]} fires {where} {show(values[-1])} then"
                f" {show(values[0])} — a {wrap}-{unit} gap, not {step} (steps restart every"
                f" {period})"
            )
    return warnings


def dst_text(schedule: Schedule, note: DstNote) -> str:
    """One DST note, as explain words it."""
    hit, tr = note.hit, note.transition
    shown = [w.strftime("%H:%M") for w in hit[:4]]
    shown += [f"{len(hit) - 4} more"] if len(hit) > 4 else []
    one = len(hit) == 1
    runs = f"the run at {shown[0]}" if one else f"the runs at {_and_list(shown)}"
    day, zone = note.day.isoformat(), schedule.zone_name
    jump_from, jump_to = f"{tr.wall_before:%H:%M}", f"{tr.wall_after:%H:%M}"
    if tr.forward:
        head = (f"{day}: {jump_from}–{jump_to} does not exist in {zone}"
                f" (clocks jump from {jump_from} to {jump_to})")
        if schedule.fixed_time:
            return (f"{head}; {runs} happen{'s' if one else ''} once{'' if one else ' together'},"
                    f" at {jump_to}, right after the jump")
        return (f"{head}; this schedule follows real time, so {runs}"
                f" do{'es' if one else ''} not happen that day")
    head = (f"{day}: {jump_to}–{jump_from} happens twice in {zone}"
            f" (clocks go back from {jump_from} to {jump_to})")
    if schedule.fixed_time:
        offset = timezone(timedelta(seconds=tr.before))
        each = "s once" if one else " once each"
        return f"{head}; {runs} happen{each}, at the first occurrence ({offset})"
    return f"{head}; this schedule follows real time, so {runs} happen{'s' if one else ''} twice"
