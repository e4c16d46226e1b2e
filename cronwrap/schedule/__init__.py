"""Cron schedules in a time zone: the one engine for everything that reads a cron expression
(``run``, catch-up, ``explain``, ``lint``, ``wrap``, ``status``).

Pure: nothing here asks the clock, and only :func:`system_zone_name` reads a file. Every
time is an argument and every result is a timezone-aware datetime in the schedule's zone.

cronsim parses the expression and decides which *days* match (its day-of-month/day-of-week
rules follow Debian cron). Turning a day's wall-clock fire times into instants is done here,
by cronie's DST rules (ARCHITECTURE.md §7), because cronsim's own aware-datetime iteration gets
some edges wrong (measured with cronsim 2.8 against tests/unit/cron_reference.py):

* a fixed-time job asked for its next time from the *second* 02:10 of a fall-back night
  answers the first 02:30, which is earlier than the question;
* a wildcard job (``* 0 8 9 *`` in America/Santiago) fires at a midnight that does not exist;
* wildcard jobs lose real fire times next to a transition: ``0 */2 * * *`` in
  Australia/Lord_Howe skips 02:00+10:30 on the fall-back night, ``*/7 1,2 * * SUN`` in
  America/Santiago skips 01:00-01:56 right after the midnight jump.

So nothing outside this package hands an expression to cronsim. The rules, as cronie's
``cron.c`` applies them:

* fixed-time job (neither minute nor hour field starts with ``*``): a wall time skipped by a
  spring-forward fires once, at the first minute after the jump; a wall time that happens
  twice fires once, at its first occurrence;
* wildcard job: fires at every real instant whose wall time matches, so a skipped hour has no
  fire times and a repeated hour has them twice.

Modules: ``cron`` (syntax, aliases, cronsim), ``zones`` (which zone, offsets, transitions),
``instants`` (what a firing asks of a schedule: :class:`Slots`), ``slots`` (:class:`Schedule`:
fire times), ``table`` (:class:`SlotTable`: a stretch of them, kept for the next firings),
``keys`` (run keys, ``--at``/``--date``),
``notes`` (DST notes, day rule, host clock: the findings explain and lint share),
``explanation`` (``cronwrap explain``).
"""

from __future__ import annotations

import sys

from cronwrap.record import TYPE_CHECKING
from cronwrap.schedule.instants import (
    DEFAULT_TOLERANCE,
    EARLY_TOLERANCE,
    Frozen,
    Slots,
    seconds_between,
    shifted,
)
from cronwrap.schedule.keys import (
    MAX_KEY_LENGTH,
    biz_date,
    minute_key,
    parse_date,
    parse_timestamp,
    run_key,
    validate_key_template,
)
from cronwrap.schedule.zones import (
    Transition,
    choose_zone,
    find_zone,
    load_zone,
    resolve_zone,
    system_zone_name,
    transitions,
    zone_key,
    zone_setting,
)

if TYPE_CHECKING:
    from cronwrap.schedule.cron import (
        ALIASES,
        FIELD_NAMES,
        REBOOT,
        expand,
        field_accepted,
        syntax_error,
    )
    from cronwrap.schedule.explanation import Explanation, explain
    from cronwrap.schedule.notes import (
        DST_WINDOW_DAYS,
        DayRule,
        DstNote,
        HostClock,
        day_rule,
        dst_notes,
        host_clock,
        shortest_gap,
    )
    from cronwrap.schedule.slots import Schedule
    from cronwrap.schedule.table import SlotTable, tabulate

# What loads cronsim (the cron fields and the engine), and what only explain and lint use, is
# imported when first asked for: a firing that reads its slots from its table does without.
_LAZY = {
    **dict.fromkeys(("ALIASES", "FIELD_NAMES", "REBOOT", "expand", "field_accepted",
                     "syntax_error"), "cron"),
    "Schedule": "slots", "SlotTable": "table", "tabulate": "table",
    "Explanation": "explanation", "explain": "explanation",
    **dict.fromkeys(("DST_WINDOW_DAYS", "DayRule", "DstNote", "HostClock", "day_rule",
                     "dst_notes", "host_clock", "shortest_gap"), "notes"),
}


def __getattr__(name: str) -> object:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = f"{__name__}.{_LAZY[name]}"
    __import__(module)  # not importlib.import_module: importlib is not loaded on a firing
    value = getattr(sys.modules[module], name)
    globals()[name] = value
    return value


__all__ = [
    "ALIASES",
    "DEFAULT_TOLERANCE",
    "DST_WINDOW_DAYS",
    "DayRule",
    "DstNote",
    "EARLY_TOLERANCE",
    "Explanation",
    "FIELD_NAMES",
    "Frozen",
    "HostClock",
    "MAX_KEY_LENGTH",
    "REBOOT",
    "Schedule",
    "SlotTable",
    "Slots",
    "Transition",
    "biz_date",
    "choose_zone",
    "day_rule",
    "dst_notes",
    "expand",
    "explain",
    "field_accepted",
    "find_zone",
    "host_clock",
    "load_zone",
    "minute_key",
    "parse_date",
    "parse_timestamp",
    "resolve_zone",
    "run_key",
    "seconds_between",
    "shifted",
    "shortest_gap",
    "syntax_error",
    "system_zone_name",
    "tabulate",
    "transitions",
    "validate_key_template",
    "zone_key",
    "zone_setting",
]
