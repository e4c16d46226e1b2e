"""One schedule engine: ``explain`` and ``lint`` take their findings from the same notes, and
nothing outside ``cronwrap.schedule`` reads a cron expression by itself."""

from __future__ import annotations

import ast
import re
from datetime import date, datetime, timedelta, timezone
from functools import lru_cache
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from cronwrap import crontab, schedule
from cronwrap.schedule import Schedule, dst_notes, explain
from tests.imports import modules_of_a_firing
from tests.unit.cron_reference import CronFields, ZoneMinutes

UTC = timezone.utc
NOW = datetime(2024, 1, 15, 12, 0, tzinfo=UTC)  # the window is 2024: every zone's two changes
ZONES = ["Europe/Berlin", "America/New_York", "America/Santiago", "Australia/Lord_Howe"]
EXPRESSIONS = [
    "0 */2 * * *", "30 2 * * *", "0 1 * * *", "*/15 * * * *", "0 0 * * 0",
    "0 0 * * *", "30 23 * * *", "15 2 * * *", "45 1 * * *", "*/15 1 * * *", "0,30 2 * * 0",
    "*/20 0-3 * * *", "* 2 * * *", "30 1 * * 1-5", "@daily", "@hourly",
]
CASES = [(expr, zone) for zone in ZONES for expr in EXPRESSIONS]
PACKAGE = Path(schedule.__file__).parent.parent

_EXPLAIN_DST = re.compile(r"^(\d{4}-\d{2}-\d{2}): \S+ (does not exist|happens twice) in ")
_LINT_DAY = re.compile(r"^on (\d{4}-\d{2}-\d{2}) in ")


def explained_dst(expr: str, zone: str) -> list[tuple[str, bool]]:
    """(date, clocks spring forward) of each DST warning of ``cronwrap explain``."""
    result = explain(expr, ZoneInfo(zone), zone, zone, NOW, 0)
    found = [_EXPLAIN_DST.match(w) for w in result.warnings]
    return [(m[1], m[2] == "does not exist") for m in found if m]


def linted_dst(expr: str, zone: str) -> list[tuple[str, bool]]:
    """(date, clocks spring forward) of each W003/W004 of ``cronwrap lint``."""
    text = f"CRON_TZ={zone}\n{expr} /usr/bin/job >/dev/null\n"
    findings = crontab.lint(text, system_zone=zone, now=NOW)
    days = [(_LINT_DAY.match(f.message), f.code == "W003") for f in findings
            if f.code in ("W003", "W004")]
    assert all(m for m, _ in days), findings
    return [(m[1], forward) for m, forward in days if m]


def reference_dst(expr: str, zone: str) -> list[tuple[str, bool]]:
    """The same from the brute-force reference: local dates on which a wall minute the
    schedule matches does not exist or exists twice. Schedules firing every hour with a '*'
    minute or hour just follow real time, so nothing is said about them (ARCHITECTURE.md §7)."""
    fields = CronFields(schedule.expand(expr))
    if not fields.fixed and len(fields.hours) == 24:
        return []
    found: set[tuple[str, bool]] = set()
    for day in _change_days(ZoneInfo(zone)):
        minutes = _minutes_around(ZoneInfo(zone), day)
        for wall in _walls(day - timedelta(days=1), day + timedelta(days=1)):
            shown = minutes.shown.get(wall, [])
            if len(shown) != 1 and fields.day_matches(wall.date()) and \
                    wall.hour in fields.hours and wall.minute in fields.minutes:
                found.add((wall.date().isoformat(), not shown))
    return sorted(found)


def _change_days(zone: ZoneInfo) -> list[date]:
    noons = [datetime(2024, 1, 15, 12, tzinfo=zone) + timedelta(days=k) for k in range(367)]
    return [b.date() for a, b in zip(noons, noons[1:]) if a.utcoffset() != b.utcoffset()]


@lru_cache(maxsize=None)
def _minutes_around(zone: ZoneInfo, day: date) -> ZoneMinutes:
    start = datetime(day.year, day.month, day.day, tzinfo=zone) - timedelta(days=2)
    return ZoneMinutes(zone, start.astimezone(UTC), start.astimezone(UTC) + timedelta(days=5))


def _walls(first: date, last: date) -> list[datetime]:
    start = datetime(first.year, first.month, first.day)
    count = ((last - first).days + 1) * 24 * 60
    return [start + timedelta(minutes=k) for k in range(count)]


@pytest.mark.parametrize(("expr", "zone"), CASES, ids=[f"{z}:{e}" for e, z in CASES])
def test_lint_and_explain_report_the_same_dst_dates(expr, zone):
    notes = [(n.day.isoformat(), n.transition.forward)
             for n in dst_notes(Schedule.parse(expr, ZoneInfo(zone)), NOW)]
    assert explained_dst(expr, zone) == notes
    assert linted_dst(expr, zone) == notes
    assert sorted(notes) == reference_dst(expr, zone)


def test_every_other_hour_in_berlin_is_reported_by_both():
    # Before the engine was shared, explain warned about both dates and lint about neither.
    expected = [("2024-03-31", True), ("2024-10-27", False)]
    assert linted_dst("0 */2 * * *", "Europe/Berlin") == expected
    assert explained_dst("0 */2 * * *", "Europe/Berlin") == expected


@pytest.mark.parametrize(("expr", "zone", "reported"), [
    ("0 2 * * *", "Asia/Shanghai", True), ("30 1 * * *", "Europe/Berlin", True),
    ("0 23 * * *", "America/New_York", True), ("*/15 9-17 * * 1-5", "Asia/Kolkata", True),
    ("0 * * * *", "Asia/Kathmandu", True), ("0 * * * *", "Asia/Tokyo", False),
    ("*/5 * * * *", "Asia/Kathmandu", False), ("0 2 * * *", "UTC", False),
    # London is UTC in winter: the difference shows in summer, and never for a January job
    ("0 23 * * *", "Europe/London", True), ("0 23 * 1 *", "Europe/London", False),
])
def test_lint_and_explain_read_the_host_clock_alike(expr, zone, reported):
    text = f"CRON_TZ={zone}\n{expr} /usr/bin/job >/dev/null\n"
    said = [f.message for f in crontab.lint(text, system_zone="UTC", now=NOW) if f.code == "I002"]
    warned = [w for w in explain(expr, ZoneInfo(zone), zone, "UTC", NOW, 1).warnings
              if w.startswith("your ")]
    assert len(said) == len(warned) == int(reported)
    if reported and Schedule.parse(expr, ZoneInfo(zone)).fixed_time:
        first, host = re.findall(r"\d\d:\d\d", warned[0])[:2]
        assert said[0].startswith(f"{first} {zone} is {host} UTC here")


@pytest.mark.parametrize("expr", ["0 0 1 * 1", "0 0 */2 * 1", "0 0 1 * */2", "0 0 */2 * */2",
                                  "0 0 * * 1", "0 0 1-7 * *", "@weekly"])
def test_lint_and_explain_apply_the_same_day_rule(expr):
    findings = crontab.lint(f"{expr} /usr/bin/job >/dev/null\n", system_zone="UTC", now=NOW)
    warnings = explain(expr, ZoneInfo("UTC"), "UTC", "UTC", NOW, 0).warnings
    assert ("W002" in {f.code for f in findings}) == any(" OR on " in w for w in warnings)
    assert ("I001" in {f.code for f in findings}) == any("(AND)" in w for w in warnings)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
             for alias in node.names}
    return names | {node.module or "" for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom)}


def test_only_the_engine_hands_expressions_to_cronsim():
    readers = sorted(str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
                     if any(name.split(".")[0] == "cronsim" for name in _imports(path)))
    assert "schedule/cron.py" in readers
    assert [r for r in readers if not r.startswith("schedule/")] == []


def test_one_alias_table():
    assert crontab.ALIASES is schedule.ALIASES
    assert crontab.parse("@daily /usr/bin/job")[0].expression == schedule.expand("@daily")


def test_run_reads_its_schedule_without_lint_or_explain(tmp_path):
    modules = modules_of_a_firing(tmp_path, ["run", "-n", "imports", "--schedule",
                                             "*/5 * * * *", "--", "true"])
    assert "cronwrap.schedule.slots" in modules  # the firing was mapped to its slot
    unwanted = [m for m in modules if m.startswith("cronwrap.crontab")
                or m in ("cronwrap.schedule.notes", "cronwrap.schedule.explanation")]
    assert unwanted == []
