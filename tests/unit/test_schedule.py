"""Schedules: parsing, zones, DST, slots, run keys, manual slots and explain."""

from __future__ import annotations

import random
import time
from bisect import bisect_right
from datetime import date, datetime, timedelta, timezone
from functools import lru_cache
from zoneinfo import ZoneInfo

import pytest

from cronwrap.errors import UsageError
from cronwrap.schedule import (
    ALIASES,
    Schedule,
    biz_date,
    explain,
    minute_key,
    parse_timestamp,
    resolve_zone,
    run_key,
    system_zone_name,
    validate_key_template,
)
from tests.unit.cron_reference import ZoneMinutes, fire_instants, utc

UTC = timezone.utc
BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
SANTIAGO = ZoneInfo("America/Santiago")
LORD_HOWE = ZoneInfo("Australia/Lord_Howe")
SHANGHAI = ZoneInfo("Asia/Shanghai")


def sched(expr: str, zone: ZoneInfo = ZoneInfo("UTC")) -> Schedule:
    return Schedule.parse(expr, zone, zone.key)


def iso(times) -> list[str]:
    return [t.isoformat() for t in times]


# --- parsing -----------------------------------------------------------------------------


@pytest.mark.parametrize("alias, cron", sorted(ALIASES.items()))
def test_aliases_expand_to_five_fields(alias, cron):
    schedule = sched(alias.upper() if alias == "@daily" else alias)
    assert schedule.cron == cron and len(cron.split()) == 5
    assert schedule.next_after(utc(2026, 1, 1, 0, 30)) > utc(2026, 1, 1, 0, 30)


def test_alias_fire_times():
    start = utc(2026, 3, 1, 0, 30)
    assert sched("@hourly").next_after(start) == utc(2026, 3, 1, 1)
    assert sched("@weekly").next_after(start) == utc(2026, 3, 8)  # a Sunday
    assert sched("@monthly").next_after(start) == utc(2026, 4, 1)
    assert sched("@annually").next_after(start) == utc(2027, 1, 1)


def test_names_and_sunday_seven():
    schedule = sched("0 9 * jan-mar Mon-Fri")
    assert schedule.next_after(utc(2026, 3, 27, 10)) == utc(2026, 3, 30, 9)  # Fri → Mon
    assert sched("0 9 * * 7").next_after(utc(2026, 3, 2)) == utc(2026, 3, 8, 9)


@pytest.mark.parametrize(
    "expr, fixed",
    [("30 2 * * *", True), ("0,30 1-3 * * *", True), ("*/15 2 * * *", False),
     ("0 */2 * * *", False), ("@hourly", False), ("@daily", True)],
)
def test_fixed_time_is_cronies_star_rule(expr, fixed):
    assert sched(expr).fixed_time is fixed


@pytest.mark.parametrize(
    "expr, words",
    [
        ("61 * * * *", "'61 * * * *': bad minute (0-59"),
        ("* 24 * * *", "bad hour (0-23"),
        ("* * 32 * *", "bad day-of-month"),
        ("0 0 30 2 *", "bad day-of-month"),
        ("* * * 13 *", "bad month (1-12 or JAN-DEC"),
        ("* * * * 8", "bad day-of-week (0-7 or SUN-SAT"),
        ("*/0 * * * *", "bad minute"),
        ("0 30 2 * * *", "has 6 fields; cron has 5"),
        ("* * *", "has 3 fields"),
        ("", "has 0 fields"),
        ("@reboot", "keep @reboot in the crontab"),
        ("@fortnightly", "is not a known alias"),
        ("0 0 */3 2 1#5", "never fires"),
    ],
)
def test_bad_expressions_are_one_line_usage_errors(expr, words):
    with pytest.raises(UsageError) as info:
        sched(expr)
    message = str(info.value)
    assert message.startswith("--schedule: ") and "\n" not in message
    assert words in message


def test_six_fields_suggest_dropping_seconds():
    with pytest.raises(UsageError, match=r"Drop the seconds: '30 2 \* \* \*'"):
        sched("0 30 2 * * *")


def test_reboot_message_suggests_the_real_schedule_and_catchup():
    with pytest.raises(UsageError, match=r"give --schedule the job's real schedule.*--catchup latest"):
        sched("@reboot")


# --- zones -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, env, system, expected",
    [
        ("Asia/Shanghai", {"CRON_TZ": "Europe/Berlin", "TZ": "UTC"}, "UTC", "Asia/Shanghai"),
        (None, {"CRON_TZ": "Europe/Berlin", "TZ": "Asia/Shanghai"}, "UTC", "Europe/Berlin"),
        (None, {"TZ": ":Asia/Shanghai"}, "Europe/Berlin", "Asia/Shanghai"),
        (None, {"TZ": ":/usr/share/zoneinfo/Asia/Tokyo"}, None, "Asia/Tokyo"),
        (None, {"TZ": ":/etc/localtime"}, "Europe/Berlin", "Europe/Berlin"),
        (None, {"CRON_TZ": "", "TZ": " "}, "Europe/Berlin", "Europe/Berlin"),
        (None, {}, "Europe/Berlin", "Europe/Berlin"),
        (None, {}, None, "UTC"),
        (None, {}, "Not/AZone", "UTC"),
    ],
)
def test_resolve_zone_precedence(name, env, system, expected):
    zone, zone_name = resolve_zone(name, env, system)
    assert zone_name == expected and zone == ZoneInfo(expected)


def test_system_zone_name_is_a_usable_name_or_none():
    name = system_zone_name()
    assert name is None or resolve_zone(None, {}, name)[1] in (name, "UTC")


def test_bad_zone_message():
    with pytest.raises(UsageError) as info:
        resolve_zone("Mars/Base", {}, None)
    assert str(info.value) == (
        "--tz: 'Mars/Base' is not a time zone (examples: UTC, Europe/Berlin, Asia/Shanghai)"
    )
    with pytest.raises(UsageError, match="^CRON_TZ: 'Mars/Base' is not a time zone"):
        resolve_zone(None, {"CRON_TZ": "Mars/Base"}, "UTC")
    with pytest.raises(UsageError, match="^TZ: '../etc' is not a time zone"):
        resolve_zone(None, {"TZ": "../etc"}, "UTC")


# --- DST, table-driven -----------------------------------------------------------------
# (zone, expression, window start, window end, expected fire times in the window)
DST_CASES = [
    # Europe/Berlin: 2024-03-31 02:00 CET → 03:00 CEST; 2024-10-27 03:00 CEST → 02:00 CET.
    (BERLIN, "30 2 * * *", (2024, 3, 30, 12), (2024, 4, 1, 12),
     ["2024-03-31T03:00:00+02:00", "2024-04-01T02:30:00+02:00"]),
    (BERLIN, "*/30 2 * * *", (2024, 3, 31, 0), (2024, 3, 31, 4), []),
    (BERLIN, "*/30 * * * *", (2024, 3, 31, 1), (2024, 3, 31, 3, 30),
     ["2024-03-31T01:30:00+01:00", "2024-03-31T03:00:00+02:00", "2024-03-31T03:30:00+02:00"]),
    (BERLIN, "30 2 * * *", (2024, 10, 27, 0), (2024, 10, 27, 4), ["2024-10-27T02:30:00+02:00"]),
    (BERLIN, "*/30 * * * *", (2024, 10, 27, 1, 45), (2024, 10, 27, 3, 15),
     ["2024-10-27T02:00:00+02:00", "2024-10-27T02:30:00+02:00", "2024-10-27T02:00:00+01:00",
      "2024-10-27T02:30:00+01:00", "2024-10-27T03:00:00+01:00"]),
    # America/New_York: 2024-03-10 02:00 EST → 03:00 EDT; 2024-11-03 02:00 EDT → 01:00 EST.
    (NEW_YORK, "30 2 * * *", (2024, 3, 10, 0), (2024, 3, 10, 5), ["2024-03-10T03:00:00-04:00"]),
    (NEW_YORK, "0,30 2 * * *", (2024, 3, 10, 0), (2024, 3, 10, 5), ["2024-03-10T03:00:00-04:00"]),
    (NEW_YORK, "30 1 * * *", (2024, 11, 3, 0), (2024, 11, 3, 5), ["2024-11-03T01:30:00-04:00"]),
    (NEW_YORK, "*/20 1 * * *", (2024, 11, 3, 0), (2024, 11, 3, 5),
     ["2024-11-03T01:00:00-04:00", "2024-11-03T01:20:00-04:00", "2024-11-03T01:40:00-04:00",
      "2024-11-03T01:00:00-05:00", "2024-11-03T01:20:00-05:00", "2024-11-03T01:40:00-05:00"]),
    # America/Santiago changes at midnight: 2024-09-08 00:00 -04 → 01:00 -03;
    # 2024-04-07 00:00 -03 → 2024-04-06 23:00 -04.
    (SANTIAGO, "0 0 * * *", (2024, 9, 7, 12), (2024, 9, 9, 12),
     ["2024-09-08T01:00:00-03:00", "2024-09-09T00:00:00-03:00"]),
    (SANTIAGO, "30 0 * * *", (2024, 9, 7, 12), (2024, 9, 8, 12), ["2024-09-08T01:00:00-03:00"]),
    (SANTIAGO, "*/30 0 * * *", (2024, 9, 7, 12), (2024, 9, 8, 12), []),
    (SANTIAGO, "0 * * * *", (2024, 9, 7, 22), (2024, 9, 8, 2),
     ["2024-09-07T23:00:00-04:00", "2024-09-08T01:00:00-03:00", "2024-09-08T02:00:00-03:00"]),
    (SANTIAGO, "30 23 * * *", (2024, 4, 6, 12), (2024, 4, 7, 12), ["2024-04-06T23:30:00-03:00"]),
    (SANTIAGO, "0 0 * * *", (2024, 4, 6, 12), (2024, 4, 7, 12), ["2024-04-07T00:00:00-04:00"]),
    (SANTIAGO, "*/30 23 * * *", (2024, 4, 6, 12), (2024, 4, 7, 12),
     ["2024-04-06T23:00:00-03:00", "2024-04-06T23:30:00-03:00", "2024-04-06T23:00:00-04:00",
      "2024-04-06T23:30:00-04:00"]),
    # Australia/Lord_Howe shifts 30 minutes: 2024-10-06 02:00 +10:30 → 02:30 +11;
    # 2024-04-07 02:00 +11 → 01:30 +10:30.
    (LORD_HOWE, "15 2 * * *", (2024, 10, 6, 0), (2024, 10, 6, 5), ["2024-10-06T02:30:00+11:00"]),
    (LORD_HOWE, "0,15,30,45 2 * * *", (2024, 10, 6, 0), (2024, 10, 6, 5),
     ["2024-10-06T02:30:00+11:00", "2024-10-06T02:45:00+11:00"]),
    (LORD_HOWE, "*/15 2 * * *", (2024, 10, 6, 0), (2024, 10, 6, 5),
     ["2024-10-06T02:30:00+11:00", "2024-10-06T02:45:00+11:00"]),
    (LORD_HOWE, "45 1 * * *", (2024, 4, 7, 0), (2024, 4, 7, 5), ["2024-04-07T01:45:00+11:00"]),
    (LORD_HOWE, "*/15 1 * * *", (2024, 4, 7, 0), (2024, 4, 7, 5),
     ["2024-04-07T01:00:00+11:00", "2024-04-07T01:15:00+11:00", "2024-04-07T01:30:00+11:00",
      "2024-04-07T01:45:00+11:00", "2024-04-07T01:30:00+10:30", "2024-04-07T01:45:00+10:30"]),
]


@pytest.mark.parametrize("zone, expr, start, end, expected", DST_CASES,
                         ids=[f"{c[0].key}:{c[1]}:{c[2][1]}" for c in DST_CASES])
def test_dst_slots(zone, expr, start, end, expected):
    schedule = sched(expr, zone)
    low, high = datetime(*start, tzinfo=zone), datetime(*end, tzinfo=zone)
    slots = list(schedule.slots_between(low, high))
    assert iso(slots) == expected
    assert iso(schedule.slots_between(low, high, reverse=True)) == expected[::-1]
    assert all(s.tzinfo is zone for s in slots)


def test_next_after_from_the_second_occurrence_of_a_repeated_hour():
    # cronsim 2.8 answers 02:30+02:00 here, which is before the question.
    schedule = sched("30 2 * * *", BERLIN)
    second = datetime(2024, 10, 27, 2, 10, tzinfo=BERLIN, fold=1)
    assert schedule.next_after(second).isoformat() == "2024-10-28T02:30:00+01:00"
    assert schedule.prev_at_or_before(second).isoformat() == "2024-10-27T02:30:00+02:00"


def test_inputs_in_other_zones():
    schedule = sched("0 2 * * *", SHANGHAI)
    assert schedule.next_after(utc(2026, 3, 1, 17, 59)).isoformat() == "2026-03-02T02:00:00+08:00"
    assert schedule.prev_at_or_before(utc(2026, 3, 1, 18)).isoformat() == "2026-03-02T02:00:00+08:00"
    with pytest.raises(ValueError):
        schedule.next_after(datetime(2026, 3, 1))


# --- against the brute-force reference ----------------------------------------------------

REFERENCE_EXPRESSIONS = [
    "* * * * *", "*/15 * * * *", "30 2 * * *", "0 0 * * *", "30 23 * * SAT",
    "0,15,30,45 1-2 * * 0", "0 */2 * * *", "0 0 1 * MON", "0 0 */2 * 1",
    "*/7 1,2 * 3,4,9,10,11 SUN",
]
REFERENCE_ZONES = [BERLIN, NEW_YORK, SANTIAGO, LORD_HOWE]
YEAR_START, YEAR_END = utc(2024, 1, 1), utc(2025, 1, 1)


@lru_cache(maxsize=None)
def zone_minutes(zone: ZoneInfo) -> ZoneMinutes:
    margin = timedelta(days=2)
    return ZoneMinutes(zone, YEAR_START - margin, YEAR_END + margin)


@lru_cache(maxsize=None)
def reference(expr: str, zone: ZoneInfo) -> tuple[int, ...]:
    low, high = YEAR_START.timestamp(), YEAR_END.timestamp()
    return tuple(i for i in fire_instants(expr, zone_minutes(zone)) if low < i <= high)


@pytest.mark.parametrize("zone", REFERENCE_ZONES, ids=lambda z: z.key)
def test_a_year_of_slots_agrees_with_the_reference(zone):
    for expr in REFERENCE_EXPRESSIONS:
        got = tuple(int(s.timestamp()) for s in sched(expr, zone).slots_between(YEAR_START, YEAR_END))
        assert got == reference(expr, zone), expr


def _transition_days(zone: ZoneInfo) -> list[date]:
    noon = [datetime(2024, 1, 1, 12, tzinfo=zone) + timedelta(days=k) for k in range(367)]
    return [b.date() for a, b in zip(noon, noon[1:]) if a.utcoffset() != b.utcoffset()]


@pytest.mark.parametrize("zone", REFERENCE_ZONES, ids=lambda z: z.key)
def test_next_and_prev_agree_with_the_reference_around_transitions(zone):
    rng = random.Random(zone.key)
    days = _transition_days(zone)
    assert len(days) == 2  # one spring-forward, one fall-back
    anchors = [int(datetime(d.year, d.month, d.day, tzinfo=zone).timestamp()) for d in days]
    anchors += [int(YEAR_START.timestamp()) + 86400 * k for k in range(30, 360, 60)]
    for expr in REFERENCE_EXPRESSIONS[1:]:
        schedule, fires = sched(expr, zone), reference(expr, zone)
        for _ in range(40):
            when = rng.choice(anchors) + rng.randrange(-86400, 2 * 86400, 30)
            t = datetime.fromtimestamp(when, zone)  # fold=1 in the second of a repeated hour
            i = bisect_right(fires, when)  # fires[i - 1] <= when < fires[i]
            if 0 < i < len(fires):
                assert schedule.next_after(t).timestamp() == fires[i], (expr, t)
                assert schedule.prev_at_or_before(t).timestamp() == fires[i - 1], (expr, t)


# --- firing → slot -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fired, slot, skew",
    [
        ((12, 0, 0), (12, 0), 0.0),
        ((12, 0, 3), (12, 0), 3.0),
        ((11, 59, 57), (12, 0), -3.0),
        ((12, 0, 40), (12, 0), 40.0),
        ((12, 0, 56), (12, 1), -4.0),  # the latest slot wins: never reach past the next one
    ],
)
def test_every_minute_firings_map_to_their_own_minute(fired, slot, skew):
    got, got_skew = sched("* * * * *").slot_for_firing(utc(2026, 3, 1, *fired))
    assert got == utc(2026, 3, 1, *slot) and got_skew == skew


def test_daily_firing_tolerance_edges():
    schedule = sched("30 1 * * *", BERLIN)
    slot = datetime(2026, 3, 2, 1, 30, tzinfo=BERLIN)
    assert schedule.slot_for_firing(slot + timedelta(seconds=90)) == (slot, 90.0)
    assert schedule.slot_for_firing(slot - timedelta(seconds=5)) == (slot, -5.0)
    assert schedule.slot_for_firing(slot + timedelta(seconds=91)) == (None, 91.0)
    assert schedule.slot_for_firing(slot - timedelta(seconds=10)) == (None, -10.0)
    assert schedule.slot_for_firing(slot + timedelta(minutes=10), timedelta(minutes=15)) == (slot, 600.0)


def test_hosts_a_few_seconds_apart_claim_one_key():
    schedule = sched("*/5 * * * *", SHANGHAI)
    base = datetime(2026, 3, 2, 2, 5, tzinfo=SHANGHAI)
    keys = {run_key(schedule.slot_for_firing(base + timedelta(seconds=s))[0]) for s in (-2.5, 0.4, 4, 30)}
    assert keys == {"2026-03-01T18:05:00Z"}


def test_firing_far_from_any_slot_reports_skew_to_nearest():
    schedule = sched("0 2 * * *", SHANGHAI)
    # cron on a UTC host fires "0 2 * * *" at 02:00 UTC = 10:00 in Shanghai.
    slot, skew = schedule.slot_for_firing(utc(2026, 3, 2, 2))
    assert slot is None and skew == 8 * 3600.0
    slot, skew = schedule.slot_for_firing(datetime(2026, 3, 2, 1, 0, tzinfo=SHANGHAI))
    assert slot is None and skew == -3600.0


# --- manual slots ----------------------------------------------------------------------------


def test_slot_on_date():
    assert sched("30 1 * * *", BERLIN).slot_on_date(date(2026, 10, 28)).isoformat() == "2026-10-28T01:30:00+01:00"
    assert sched("0 */6 * * *", SHANGHAI).slot_on_date(date(2026, 10, 28)).isoformat() == "2026-10-28T00:00:00+08:00"
    assert sched("0 0 * * *", SANTIAGO).slot_on_date(date(2024, 9, 8)).isoformat() == "2024-09-08T01:00:00-03:00"


def test_slot_on_date_that_never_fires():
    with pytest.raises(UsageError) as info:
        sched("0 0 * * 1", BERLIN).slot_on_date(date(2026, 10, 28))
    message = str(info.value)
    assert message.startswith("--date: '0 0 * * 1' does not fire on 2026-10-28 (a Wednesday) in Europe/Berlin")
    assert "2026-10-26T00:00:00+01:00 (before)" in message and "2026-11-02T00:00:00+01:00 (after)" in message


def test_slot_at():
    schedule = sched("30 1 * * *", BERLIN)
    at = parse_timestamp("2026-10-28 01:30", BERLIN)
    assert schedule.slot_at(at).isoformat() == "2026-10-28T01:30:00+01:00"
    with pytest.raises(UsageError, match=r"^--at: 2026-10-28T01:31:00\+01:00 is not a fire time of '30 1 \* \* \*'"
                                         r" in Europe/Berlin; nearest fire times: 2026-10-28T01:30:00\+01:00"
                                         r" \(before\), 2026-10-29T01:30:00\+01:00 \(after\)$"):
        schedule.slot_at(parse_timestamp("2026-10-28T01:31", BERLIN))


@pytest.mark.parametrize(
    "text, expected",
    [
        ("2026-10-28T01:30", "2026-10-28T01:30:00+01:00"),
        ("2026-10-28 01:30", "2026-10-28T01:30:00+01:00"),
        ("2026-10-28T01:30:00+08:00", "2026-10-27T18:30:00+01:00"),
        ("2026-10-28T00:30Z", "2026-10-28T01:30:00+01:00"),
        ("2024-03-31 02:30", "2024-03-31T03:00:00+02:00"),  # skipped: right after the jump
        ("2024-10-27 02:30", "2024-10-27T02:30:00+02:00"),  # repeated: the first
    ],
)
def test_parse_timestamp(text, expected):
    assert parse_timestamp(text, BERLIN).isoformat() == expected


def test_parse_timestamp_rejects_garbage_naming_the_option():
    with pytest.raises(UsageError, match=r"^--from: 'yesterday' is not a timestamp"):
        parse_timestamp("yesterday", BERLIN, "--from")


# --- run keys ---------------------------------------------------------------------------------


def test_default_run_key_is_the_utc_instant():
    slot = datetime(2026, 3, 2, 2, 0, tzinfo=SHANGHAI)
    assert run_key(slot) == "2026-03-01T18:00:00Z"
    assert run_key(slot, None) == run_key(slot.astimezone(UTC))


def test_repeated_wall_time_slots_get_distinct_default_keys():
    slots = list(sched("*/30 1 * * *", NEW_YORK).slots_between(
        datetime(2024, 11, 3, tzinfo=NEW_YORK), datetime(2024, 11, 3, 3, tzinfo=NEW_YORK)))
    assert [run_key(s) for s in slots] == ["2024-11-03T05:00:00Z", "2024-11-03T05:30:00Z",
                                           "2024-11-03T06:00:00Z", "2024-11-03T06:30:00Z"]


def test_template_key_is_in_the_schedule_zone():
    slot = sched("30 0 * * *", SHANGHAI).next_after(utc(2026, 10, 27, 12))
    assert run_key(slot, "%Y-%m-%d") == "2026-10-28"  # 2026-10-27 in UTC
    assert biz_date(slot) == "2026-10-28"
    assert biz_date(slot.astimezone(UTC), SHANGHAI) == "2026-10-28"
    assert run_key(slot.astimezone(UTC), "%Y-%m-%d", SHANGHAI) == "2026-10-28"


def test_minute_key():
    assert minute_key(datetime(2026, 3, 2, 2, 0, 59, 999, tzinfo=SHANGHAI)) == "2026-03-01T18:00:00Z"


@pytest.mark.parametrize(
    "template, words",
    [
        ("", "is empty"),
        ("daily", "has no % directive, so every slot would share one key"),
        ("100%%", "has no % directive"),
        ("%Y\n%m", "NUL or line break"),
        ("a\0%Y", "NUL or line break"),
        ("%Y-%m-%d" * 30, "longer than 200"),
        ("%m-%d", "same key a year apart"),
    ],
)
def test_bad_key_templates(template, words):
    with pytest.raises(UsageError) as info:
        validate_key_template(template)
    assert str(info.value).startswith("--key: ") and words in str(info.value)
    with pytest.raises(UsageError):
        run_key(utc(2026, 1, 1), template)


# --- explain ----------------------------------------------------------------------------------


def explained(expr, zone=ZoneInfo("UTC"), system="UTC", start=utc(2026, 1, 1), count=5):
    return explain(expr, zone, zone.key, system, start, count)


def test_explain_json_shape():
    result = explained("30 1 * * *", BERLIN, "Europe/Berlin", start=utc(2026, 1, 1, 0, 30), count=3)
    data = result.to_json()
    assert set(data) >= {"expression", "tz", "next", "warnings"}
    assert data["expression"] == "30 1 * * *" and data["tz"] == "Europe/Berlin"
    # 00:30 UTC is 01:30 in Berlin: strictly after, so the first is the next day's
    assert data["next"] == ["2026-01-02T01:30:00+01:00", "2026-01-03T01:30:00+01:00",
                            "2026-01-04T01:30:00+01:00"]
    assert all(isinstance(w, str) for w in data["warnings"])


def test_explain_without_surprises_has_no_warnings():
    assert explained("30 1 * * *").warnings == []
    assert explained("*/15 * * * *", BERLIN, "Europe/Berlin").warnings == []


def test_explain_dom_dow_or_rule():
    (warning,) = explained("0 0 1 * 1").warnings
    assert "runs on the 1st of the month OR on Mondays" in warning


def test_explain_star_prefix_and_quirk():
    (warning,) = explained("0 0 */2 * 1").warnings[:1]
    assert "starts with '*'" in warning and "Vixie/Debian cron" in warning and "(AND)" in warning
    assert "that are also Mondays" in warning


def test_explain_dst_skip_and_repeat_for_fixed_times():
    warnings = explained("30 2 * * *", BERLIN, "Europe/Berlin").warnings
    assert warnings == [
        "2026-03-29: 02:00–03:00 does not exist in Europe/Berlin (clocks jump from 02:00 to"
        " 03:00); the run at 02:30 happens once, at 03:00, right after the jump",
        "2026-10-25: 02:00–03:00 happens twice in Europe/Berlin (clocks go back from 03:00 to"
        " 02:00); the run at 02:30 happens once, at the first occurrence (UTC+02:00)",
    ]


def test_explain_dst_at_midnight_and_for_wildcard_hours():
    santiago = explained("0 0 * * *", SANTIAGO, "America/Santiago").warnings
    assert any("does not exist in America/Santiago" in w and "at 01:00" in w for w in santiago)
    lord_howe = explained("*/15 1 * * *", LORD_HOWE, "Australia/Lord_Howe").warnings
    assert any("01:30–02:00 happens twice" in w and "runs at 01:30 and 01:45 happen twice" in w
               for w in lord_howe)
    new_york = explained("0,30 2 * * 0", NEW_YORK, "America/New_York").warnings
    assert any("the runs at 02:00 and 02:30 happen once together, at 03:00" in w for w in new_york)
    every_other_hour = explained("0 */2 * * *", BERLIN, "Europe/Berlin").warnings
    assert [w.split("; ")[1] for w in every_other_hour] == [
        "this schedule follows real time, so the run at 02:00 does not happen that day",
        "this schedule follows real time, so the run at 02:00 happens twice",
    ]


def test_explain_zone_differs_from_the_system():
    (warning,) = explained("0 2 * * *", SHANGHAI, "UTC").warnings
    assert warning.startswith("your 02:00 Asia/Shanghai runs at 18:00 the day before UTC on this host's clock")
    kathmandu = ZoneInfo("Asia/Kathmandu")  # +05:45
    assert explained("*/5 * * * *", kathmandu, "UTC").warnings == []
    assert explained("0 * * * *", ZoneInfo("Asia/Tokyo"), "UTC").warnings == []
    assert explained("0 * * * *", kathmandu, "UTC").warnings[0].startswith("your 06:00 Asia/Kathmandu runs at 00:15 UTC")


def test_explain_zone_shift_is_shown_at_a_fire_time_it_moves():
    london = ZoneInfo("Europe/London")  # UTC in winter, UTC+1 in summer
    (warning,) = explained("0 23 * * *", london, "UTC", start=utc(2026, 1, 15)).warnings
    assert warning.startswith("your 23:00 Europe/London runs at 22:00 UTC on this host's clock")
    assert explained("0 23 * 1 *", london, "UTC", start=utc(2026, 1, 15)).warnings == []


def test_explain_uneven_steps():
    warnings = explained("*/7 * * * *").warnings
    assert warnings == ["'*/7' in minutes fires at :56 then :00 — a 4-minute gap, not 7"
                        " (steps restart every hour)"]
    assert explained("*/5 * * * *").warnings == []
    assert any("20:00 then 00:00 — a 4-hour gap" in w for w in explained("0 */5 * * *").warnings)


def test_explain_count_and_bad_input():
    assert len(explained("@hourly", count=0).next) == 0
    with pytest.raises(UsageError, match="^--count"):
        explained("@hourly", count=-1)
    with pytest.raises(UsageError, match="^--schedule"):
        explained("every day")


def _varied_expressions(n: int) -> list[tuple[str, ZoneInfo]]:
    rng = random.Random(4)
    minutes = ["*", "0", "30", "*/5", "*/7", "0,30", "15-45/10"]
    hours = ["*", "2", "0", "1-3", "*/4", "9-17", "23"]
    doms = ["*", "1", "15", "*/2", "L", "1-7"]
    months = ["*", "3", "10", "JAN-JUN", "*/3"]
    dows = ["*", "1", "MON-FRI", "0", "SAT,SUN", "5L"]
    zones = [BERLIN, NEW_YORK, SANTIAGO, LORD_HOWE, SHANGHAI, ZoneInfo("UTC")]
    return [(" ".join(rng.choice(f) for f in (minutes, hours, doms, months, dows)), rng.choice(zones))
            for _ in range(n)]


def test_explain_a_thousand_expressions_is_fast():
    cases = _varied_expressions(1000)
    started = time.perf_counter()
    for expr, zone in cases:
        explain(expr, zone, zone.key, "UTC", utc(2026, 5, 1, 12, 34, 56), 5)
    elapsed = time.perf_counter() - started
    # The capability is "within a second"; CI machines vary, so assert generously.
    assert elapsed < 3.0, f"explain of 1,000 expressions took {elapsed:.2f}s"
