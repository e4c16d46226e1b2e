"""Catch-up planning with an injected ``now``: policies, window edges, keys, bounds."""

from __future__ import annotations

import time
from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from cronwrap.errors import UsageError
from cronwrap.model import Mark, SlotRun
from cronwrap.run.catchup import CHUNK, COUNT_LIMIT, MAX_MARKS, plan_firing, plan_manual
from cronwrap.schedule import Schedule, run_key

UTC = timezone.utc
HOURLY = Schedule.parse("0 * * * *", ZoneInfo("UTC"), "UTC")
NOW = datetime(2026, 3, 2, 12, 0, 5, tzinfo=UTC)  # cron fired the 12:00 slot, 5 s late


def at(hour: int, minute: int = 0, day: int = 2) -> datetime:
    return datetime(2026, 3, day, hour, minute, tzinfo=UTC)


def key(t: datetime) -> str:
    return run_key(t)


def plan(schedule=HOURLY, now=NOW, *, last_seen=at(8, 30), known=(), policy="none",
         window=0.0, max_catchup=10, key_template=None, abandoned=None):
    return plan_firing(schedule, now, key_template=key_template, last_seen=last_seen,
                       known_keys=frozenset(known).intersection, policy=policy, window=window,
                       max_catchup=max_catchup, abandoned=abandoned)


def current(slot=at(12)) -> SlotRun:
    return SlotRun(key(slot), slot, "schedule")


def missed(*hours: int) -> list[Mark]:
    return [Mark(key(at(h)), at(h), "missed", None) for h in hours]


def test_first_invocation_never_invents_a_backlog():
    result = plan(last_seen=None, policy="all")
    assert result.runs == [current()] and result.marks == [] and result.warnings == []
    assert result.matched and result.skew_seconds == 5.0


def test_policy_none_records_missed_slots():
    result = plan(policy="none")
    assert result.runs == [current()]
    assert result.marks == missed(9, 10, 11)


def test_policy_latest_runs_only_the_newest_missed_slot_first():
    result = plan(policy="latest")
    assert result.runs == [SlotRun(key(at(11)), at(11), "catchup"), current()]
    assert result.marks == missed(9, 10)


def test_policy_all_runs_oldest_first_up_to_the_cap():
    result = plan(policy="all", max_catchup=2)
    assert [(r.scheduled_at, r.trigger) for r in result.runs] == [
        (at(9), "catchup"), (at(10), "catchup"), (at(12), "schedule")]
    assert result.marks == missed(11)
    assert result.warnings == ["1 missed slot beyond --max-catchup 2 is recorded as missed, not run"]


def test_policy_all_within_the_cap_runs_everything():
    result = plan(policy="all")
    assert [r.scheduled_at for r in result.runs] == [at(9), at(10), at(11), at(12)]
    assert result.marks == [] and result.warnings == []


def test_max_catchup_zero_runs_no_catchup():
    result = plan(policy="all", max_catchup=0)
    assert result.runs == [current()] and result.marks == missed(9, 10, 11)


@pytest.mark.parametrize("policy", ["none", "latest", "all"])
def test_window_edge_exactly_at_the_window_is_inside(policy):
    now = at(12)  # exactly on the slot
    result = plan(now=now, policy=policy, window=2 * 3600)  # 10:00 is exactly 2 h old
    too_late = [m for m in result.marks if m.status == "skipped"]
    assert too_late == [Mark(key(at(9)), at(9), "skipped", "too_late")]
    considered = {m.scheduled_at for m in result.marks if m.status == "missed"} | {r.scheduled_at for r in result.runs}
    assert considered == {at(10), at(11), at(12)}


def test_window_one_second_past_the_edge_is_too_late():
    result = plan(now=at(12) + timedelta(seconds=1), policy="all", window=2 * 3600)
    assert [r.scheduled_at for r in result.runs] == [at(11), at(12)]
    assert [(m.scheduled_at, m.status, m.reason) for m in result.marks] == [
        (at(9), "skipped", "too_late"), (at(10), "skipped", "too_late")]


def test_known_keys_are_not_missed():
    result = plan(policy="none", known=[key(at(10))])
    assert result.marks == missed(9, 11)


def test_last_seen_on_a_slot_excludes_that_slot():
    assert plan(last_seen=at(10)).marks == missed(11)


def test_another_host_already_fired_this_slot():
    result = plan(last_seen=at(12, 0) + timedelta(seconds=2), known=[key(at(12))])
    assert result.runs == [current()] and result.marks == []  # the ledger reports the duplicate


def test_daily_key_on_an_hourly_schedule():
    template = "%Y-%m-%d"
    result = plan(last_seen=datetime(2026, 2, 28, 23, 30, tzinfo=UTC), policy="latest",
                  key_template=template)
    # Slots earlier today share today's key with the current slot; yesterday is one slot,
    # stood for by its first fire time.
    assert result.runs == [SlotRun("2026-03-01", at(0, day=1), "catchup"),
                           SlotRun("2026-03-02", at(12), "schedule")]
    assert result.marks == []


def test_daily_key_representative_stays_inside_the_window():
    result = plan(last_seen=datetime(2026, 2, 28, 23, 30, tzinfo=UTC), policy="none",
                  key_template="%Y-%m-%d", window=24 * 3600)
    # 2026-03-01 12:00 is 24 h 5 s old: too late; 13:00 is the first inside the window.
    assert result.marks == [Mark("2026-03-01", at(13, day=1), "missed", None)]


def test_firing_that_maps_to_no_slot_falls_back_to_the_most_recent():
    result = plan(now=at(12, 20), last_seen=at(11, 0, day=2) + timedelta(seconds=3),
                  known=[key(at(11))], policy="none")
    assert result.runs == [SlotRun(key(at(12)), at(12), "catchup")]
    assert not result.matched and result.skew_seconds == 1200.0
    (warning,) = result.warnings
    assert "is 20m00s after the nearest fire time of '0 * * * *' in UTC" in warning
    assert "outside the 1m30s tolerance" in warning and "2026-03-02T12:00:00+00:00" in warning


def test_fallback_slot_older_than_the_window_is_skipped():
    result = plan(now=at(12, 20), last_seen=None, window=600)
    assert result.runs == []
    assert result.marks == [Mark(key(at(12)), at(12), "skipped", "too_late")]
    assert any("older than --catchup-window" in w for w in result.warnings)


def test_zone_mismatch_still_runs_once_a_day():
    # cron on a UTC host fires "0 2 * * *" at 02:00 UTC; the schedule says 02:00 Shanghai.
    shanghai = Schedule.parse("0 2 * * *", ZoneInfo("Asia/Shanghai"), "Asia/Shanghai")
    now = datetime(2026, 3, 2, 2, 0, 1, tzinfo=UTC)
    result = plan(shanghai, now, last_seen=now - timedelta(days=1), policy="none")
    (run,) = result.runs
    assert run.scheduled_at.isoformat() == "2026-03-02T02:00:00+08:00" and run.trigger == "catchup"
    assert result.marks == []


def test_catchup_through_a_fall_back_night_keeps_both_slots():
    new_york = ZoneInfo("America/New_York")
    schedule = Schedule.parse("*/30 1 * * *", new_york, "America/New_York")
    now = datetime(2024, 11, 4, 1, 0, 2, tzinfo=new_york)
    result = plan(schedule, now, last_seen=datetime(2024, 11, 2, 12, tzinfo=UTC), policy="all")
    assert [r.scheduled_at.isoformat() for r in result.runs] == [
        "2024-11-03T01:00:00-04:00", "2024-11-03T01:30:00-04:00",
        "2024-11-03T01:00:00-05:00", "2024-11-03T01:30:00-05:00",
        "2024-11-04T01:00:00-05:00"]
    assert len({r.run_key for r in result.runs}) == 5


def test_long_outage_is_bounded():
    every_minute = Schedule.parse("* * * * *", ZoneInfo("UTC"), "UTC")
    started = time.perf_counter()
    result = plan(every_minute, last_seen=NOW - timedelta(days=730), policy="all")
    elapsed = time.perf_counter() - started
    assert len(result.runs) == 11 and result.runs[-1] == current()
    assert len(result.marks) == MAX_MARKS
    assert all(m.status == "missed" for m in result.marks)
    assert "more than 10000 older slots not listed (neither run nor recorded)" in result.warnings
    # the newest are the ones listed: the slot just before the current one is among them
    assert result.marks[-1].scheduled_at == at(11, 59)
    assert elapsed < 5.0, f"planning took {elapsed:.2f}s"


@pytest.mark.parametrize("policy, max_catchup", [("all", 5), ("all", 0), ("latest", 10),
                                                  ("none", 10)])
def test_a_long_outage_records_every_slot_it_counts_and_leaves_no_gap(policy, max_catchup):
    """Two days down, every minute (issue 20 §6): the warning's count is what is recorded,
    and the slots run and recorded are one unbroken stretch up to the firing's own slot: the
    slot just after the last catch-up run has its row (status counts it)."""
    every_minute = Schedule.parse("* * * * *", ZoneInfo("UTC"), "UTC")
    result = plan(every_minute, last_seen=NOW - timedelta(days=2), policy=policy,
                  max_catchup=max_catchup)
    counted = [w for w in result.warnings if "recorded as missed" in w]
    if counted:
        assert counted[0].startswith(f"{len(result.marks)} missed slots beyond"), counted
    assert len(result.marks) == MAX_MARKS
    covered = sorted([r.scheduled_at for r in result.runs[:-1]] +
                     [m.scheduled_at for m in result.marks])
    assert covered == [covered[0] + timedelta(minutes=i) for i in range(len(covered))]
    assert covered[-1] == at(11, 59)
    assert any("older slots not listed" in w for w in result.warnings)


def test_long_outage_with_a_window_marks_too_late_slots_newest_first():
    every_minute = Schedule.parse("* * * * *", ZoneInfo("UTC"), "UTC")
    result = plan(every_minute, last_seen=NOW - timedelta(days=730), policy="none",
                  window=6 * 3600)
    statuses = [m.status for m in result.marks]
    assert len(result.marks) == MAX_MARKS
    assert statuses.count("missed") == 6 * 60 - 1  # 06:01 … 11:59; 06:00 is 6 h 5 s old
    assert set(statuses[: MAX_MARKS - 359]) == {"skipped"}
    assert any("older slots not listed" in w for w in result.warnings)


def test_the_ledger_is_asked_only_about_the_slots_looked_at():
    """Which run keys the ledger has is asked for the missed slots only, CHUNK at a time: a
    firing on time asks nothing, a firing after ten missed hours of a minutely job asks
    about their 599 slots, and a two-year outage stops asking once it has counted what it
    reports (a firing used to read every run key of the job's window)."""
    every_minute = Schedule.parse("* * * * *", ZoneInfo("UTC"), "UTC")
    asked: list[int] = []

    def known(keys: set[str]) -> set[str]:
        asked.append(len(keys))
        return {k for k in keys if k.endswith(":30:00Z")}

    on_time = plan_firing(every_minute, NOW, key_template=None, last_seen=at(11, 59),
                          known_keys=known, policy="latest", window=0.0, max_catchup=10)
    assert asked == [] and on_time.marks == [] and len(on_time.runs) == 1
    late = plan_firing(every_minute, NOW, key_template=None, last_seen=at(2), known_keys=known,
                       policy="none", window=0.0, max_catchup=10)
    assert asked == [CHUNK, CHUNK, 599 - 2 * CHUNK]
    assert len(late.marks) == 599 - 10  # the :30 of each hour has a row
    asked.clear()
    plan_firing(every_minute, NOW, key_template=None, last_seen=NOW - timedelta(days=730),
                known_keys=known, policy="all", window=0.0, max_catchup=10)
    assert sum(asked) <= MAX_MARKS + 10 + COUNT_LIMIT + 2 * CHUNK, sum(asked)


def test_counted_unlisted_slots():
    every_minute = Schedule.parse("* * * * *", ZoneInfo("UTC"), "UTC")
    result = plan(every_minute, last_seen=NOW - timedelta(minutes=1100), policy="none")
    assert len(result.marks) == MAX_MARKS
    assert "99 older slots not listed (neither run nor recorded)" in result.warnings


@pytest.mark.parametrize(
    "kwargs, words",
    [({"policy": "sometimes"}, "--catchup: 'sometimes' is not a policy"),
     ({"window": -1}, "--catchup-window"),
     ({"max_catchup": -1}, "--max-catchup")],
)
def test_bad_arguments(kwargs, words):
    with pytest.raises(UsageError, match=words):
        plan(**kwargs)


# --- manual runs ----------------------------------------------------------------------------

BERLIN = ZoneInfo("Europe/Berlin")
SETTLE = Schedule.parse("30 1 * * *", BERLIN, "Europe/Berlin")


def test_manual_by_date():
    (run,) = plan_manual(SETTLE, date=date(2026, 10, 28), key_template=None)
    assert run == SlotRun("2026-10-28T00:30:00Z", datetime(2026, 10, 28, 1, 30, tzinfo=BERLIN),
                          "manual")
    assert plan_manual(SETTLE, date="2026-10-28", key_template="%Y-%m-%d")[0].run_key == "2026-10-28"


def test_manual_at():
    (run,) = plan_manual(SETTLE, at="2026-10-28 01:30", key_template=None)
    assert run.scheduled_at.isoformat() == "2026-10-28T01:30:00+01:00" and run.trigger == "manual"
    with pytest.raises(UsageError, match="^--at: .* is not a fire time"):
        plan_manual(SETTLE, at="2026-10-28 02:30", key_template=None)


@pytest.mark.parametrize(
    "kwargs, words",
    [({}, "give exactly one"),
     ({"date": "2026-10-28", "at": "2026-10-28 01:30"}, "give exactly one"),
     ({"date": "28.10.2026"}, "^--date: '28.10.2026' is not a date"),
     ({"at": "soon"}, "^--at: 'soon' is not a timestamp")],
)
def test_manual_errors(kwargs, words):
    with pytest.raises(UsageError, match=words):
        plan_manual(SETTLE, key_template=None, **kwargs)


def test_a_date_range_runs_every_slot_oldest_first():
    runs = plan_manual(SETTLE, date="2026-10-24..2026-10-26", key_template="%Y-%m-%d")
    assert [r.run_key for r in runs] == ["2026-10-24", "2026-10-25", "2026-10-26"]
    assert {r.trigger for r in runs} == {"manual"}
    assert runs[1].scheduled_at.isoformat() == "2026-10-25T01:30:00+02:00"  # fall-back day, before 03:00


def test_a_range_counts_slots_sharing_a_key_once():
    hourly = Schedule.parse("0 * * * *", BERLIN, "Europe/Berlin")
    per_day = plan_manual(hourly, date="2026-10-27..2026-10-28", key_template="%Y-%m-%d")
    assert [(r.run_key, r.scheduled_at.hour) for r in per_day] == [("2026-10-27", 0), ("2026-10-28", 0)]
    every = plan_manual(hourly, at="2026-10-28 10:00..2026-10-28 12:00", key_template=None)
    assert [r.scheduled_at.hour for r in every] == [10, 11, 12]  # both ends inclusive


def test_a_range_over_the_cap_is_refused_before_anything_runs():
    with pytest.raises(UsageError, match="more than 100 slots .* raise --max-slots"):
        plan_manual(SETTLE, date="2016-01-01..2026-01-01", key_template=None)
    assert len(plan_manual(SETTLE, date="2026-01-01..2026-12-31", key_template=None,
                           max_slots=365)) == 365


@pytest.mark.parametrize("text, words", [("2026-10-28..2026-10-27", "ends before it begins"),
                                          ("2026-10-28..soon", "is not a date")])
def test_bad_ranges(text, words):
    with pytest.raises(UsageError, match=words):
        plan_manual(SETTLE, date=text, key_template=None)


def test_a_range_without_a_slot_says_so():
    mondays = Schedule.parse("0 3 * * 1", BERLIN, "Europe/Berlin")
    with pytest.raises(UsageError, match="has no slot in that range"):
        plan_manual(mondays, date="2026-10-27..2026-10-28", key_template=None)  # Tue, Wed


# -- takeover: a slot whose runner died is run again by the next firing (issue 22 §2) ----------

@pytest.mark.parametrize("policy", ["none", "latest", "all"])
def test_an_abandoned_slot_is_taken_over_whatever_the_policy(policy):
    ran = [key(at(h)) for h in (9, 10, 11)]
    result = plan(policy=policy, known=ran, last_seen=at(11), abandoned={key(at(10)): at(10)})
    assert result.runs == [SlotRun(key(at(10)), at(10), "takeover"), current()]
    assert result.marks == []


def test_takeovers_and_catchups_run_oldest_first():
    result = plan(policy="all", known=[key(at(9))], last_seen=at(9),
                  abandoned={key(at(9)): at(9)})
    assert [(r.scheduled_at, r.trigger) for r in result.runs] == [
        (at(9), "takeover"), (at(10), "catchup"), (at(11), "catchup"), (at(12), "schedule")]


def test_an_abandoned_slot_outside_the_window_or_not_before_this_slot_is_left():
    abandoned = {key(at(3)): at(3), key(at(12)): at(12), key(at(13)): at(13)}
    result = plan(known=list(abandoned), last_seen=at(12), window=6 * 3600, abandoned=abandoned)
    assert result.runs == [current()]  # 03:00 is 9 h old; 12:00 is its own claim's; 13:00 later
