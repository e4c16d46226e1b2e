"""``why``'s pure core (read/why.py): the slot a WHEN names, and the story of that slot from
the ledger's row, attempts and pauses and this host's run-log lines, at a given ``now``. No
ledger, no files: every fact is an argument (the executable's tests are in
tests/acceptance/test_why.py)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from importlib import resources
from zoneinfo import ZoneInfo

import pytest
from jsonschema import Draft202012Validator

from cronwrap.errors import UsageError
from cronwrap.model import Pause, Run, RunAttempt, ledger_job
from cronwrap.read import why
from cronwrap.schedule import Schedule

UTC = timezone.utc
BERLIN = ZoneInfo("Europe/Berlin")
NIGHTLY = Schedule.parse("30 1 * * *", BERLIN, "Europe/Berlin")
NOW = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)  # 10:00 in Berlin
SLOT = datetime(2026, 12, 5, 1, 30, tzinfo=BERLIN)  # last night's
KEY = "2026-12-05T00:30:00Z"


def story(when: str | None, schedule: Schedule = NIGHTLY, now: datetime = NOW,
          **facts) -> why.Story:
    facts.setdefault("job", "settle")
    facts.setdefault("here", "web1")
    return why.tell(why.question(schedule, when, now), why.Facts(schedule=schedule, **facts), now)


def row(status: str = "succeeded", **more) -> Run:
    base = dict(run_id=7, job="settle", run_key=KEY, scheduled_at=SLOT.astimezone(UTC),
                trigger="schedule", status=status, attempt=1, host="web2", pid=4242, fence=3,
                started_at=SLOT.astimezone(UTC) + timedelta(seconds=2),
                finished_at=SLOT.astimezone(UTC) + timedelta(seconds=9), duration_ms=7000,
                exit_code=0)
    base.update(more)
    return Run(**base)


def text(s: why.Story) -> str:
    return "\n".join(s.lines)


def valid(data: object) -> None:
    loaded = json.loads(resources.files("cronwrap").joinpath("schemas", "why.json").read_text())
    Draft202012Validator.check_schema(loaded)
    errors = list(Draft202012Validator(loaded).iter_errors(data))
    assert not errors, [e.message for e in errors[:3]]


# -- which slot ---------------------------------------------------------------------------------

def test_no_when_is_the_next_slot_and_it_has_not_come():
    s = story(None)
    assert s.question.slot == datetime(2026, 12, 6, 1, 30, tzinfo=BERLIN)
    assert s.verdict == "upcoming" and s.status is None
    assert "Its next slot is 2026-12-06 01:30 CET (in 15h30m)." in s.lines
    assert "It has not come yet." in s.lines
    data = s.to_json()
    valid(data)
    assert data["future"] is True and data["asked"] is None and data["run_key"] == \
        "2026-12-06T00:30:00Z"


def test_a_date_names_its_first_slot_and_a_time_on_a_slot_names_it():
    for when in ("2026-12-05", "2026-12-05T01:30", "2026-12-05 01:30", "2026-12-05T00:30Z",
                 "2026-12-05T08:30+08:00"):
        q = why.question(NIGHTLY, when, NOW)
        assert (q.slot, q.matched) == (SLOT, True), when
    assert why.question(NIGHTLY, "2026-12-05", NOW).day is not None


def test_a_time_that_is_no_fire_time_tells_the_slot_before_it_and_names_both_neighbours():
    s = story("2026-12-05T03:00")
    assert s.question.slot == SLOT and not s.question.matched
    assert ("2026-12-05 03:00 CET is not one of its fire times; the nearest are 2026-12-05 01:30 "
            "CET (before) and 2026-12-06 01:30 CET (after). The slot before it, 2026-12-05 01:30 "
            "CET (8h30m ago):") in s.lines
    assert s.to_json()["matched"] is False


def test_a_day_the_schedule_skips_is_said_so_with_its_weekday():
    weekdays = Schedule.parse("30 1 * * 1-5", BERLIN, "Europe/Berlin")
    s = story("2026-12-06", weekdays, now=datetime(2026, 12, 7, 9, 0, tzinfo=UTC))
    assert "It does not fire on 2026-12-06 (a Sunday) in Europe/Berlin" in text(s)
    assert s.question.slot == datetime(2026, 12, 4, 1, 30, tzinfo=BERLIN)  # Friday's


@pytest.mark.parametrize("when, word", [("2026-12-05..2026-12-06", "range"),
                                        ("last night", "not a timestamp"),
                                        ("2026-13-01", "not a date"),
                                        ("1066-10-14T09:00", "year")])
def test_a_bad_when_is_one_line_naming_the_option(when, word):
    with pytest.raises(UsageError) as caught:
        why.question(NIGHTLY, when, NOW)
    assert str(caught.value).startswith("--at: ") and word in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_schedule_that_never_fired_before_the_time_has_no_slot():
    after = datetime(2027, 1, 1, tzinfo=UTC)
    q = why.Question(None, False, datetime(2026, 1, 1, tzinfo=UTC), nearest=(None, after))
    s = why.tell(q, why.Facts(job="settle", schedule=NIGHTLY), NOW)
    assert s.verdict == "no_slot" and s.status is None
    assert "the nearest are 2027-01-01 00:00 UTC (after). It has no slot at or before that " \
        "time." in text(s)
    valid(s.to_json())


# -- DST ----------------------------------------------------------------------------------------

def test_a_wall_time_in_the_spring_gap_is_read_as_cron_reads_it_and_the_jump_is_told():
    at_230 = Schedule.parse("30 2 * * *", BERLIN, "Europe/Berlin")
    s = story("2026-03-29T02:30", at_230, now=datetime(2026, 3, 30, tzinfo=UTC))
    assert s.question.slot == datetime(2026, 3, 29, 3, 0, tzinfo=BERLIN) and s.question.matched
    lines = text(s)
    assert ("2026-03-29 02:30 does not exist in Europe/Berlin (the clocks jump over it); read as "
            "cron reads it: 2026-03-29 03:00 CEST") in lines
    assert "the run at 02:30 happens once, at 03:00, right after the jump" in lines
    assert s.to_json()["dst"] == [line for line in s.lines if line.startswith("2026-03-29: ")]


def test_a_wildcard_schedule_loses_the_gap_s_runs_and_the_story_says_so():
    in_the_gap = Schedule.parse("*/30 2 * * *", BERLIN, "Europe/Berlin")
    s = story("2026-03-29", in_the_gap, now=datetime(2026, 3, 30, tzinfo=UTC))
    assert "It does not fire on 2026-03-29 (a Sunday) in Europe/Berlin" in text(s)
    assert "this schedule follows real time, so the runs at 02:00 and 02:30 do not happen" \
        in text(s)


def test_a_repeated_wall_time_is_its_first_occurrence_and_the_second_is_named():
    at_230 = Schedule.parse("30 2 * * *", BERLIN, "Europe/Berlin")
    s = story("2026-10-25T02:30", at_230, now=datetime(2026, 10, 26, tzinfo=UTC))
    assert s.question.slot.timestamp() == datetime(2026, 10, 25, 0, 30, tzinfo=UTC).timestamp()
    assert "give the offset, 2026-10-25T02:30+01:00, to ask about it" in text(s)
    assert "happens once, at the first occurrence" in text(s)


# -- what happened ------------------------------------------------------------------------------

def test_a_run_that_succeeded_says_where_when_and_how():
    s = story("2026-12-05", row=row(), attempts=[RunAttempt.of_run(row(), NOW)])
    assert (s.verdict, s.status) == ("ran", "succeeded")
    assert ("It ran on web2: cron fired it for its slot, started 2026-12-05 01:30:02 CET; it "
            "ended succeeded after 7.0s (exit 0).") in s.lines
    late = row(trigger="catchup", started_at=SLOT.astimezone(UTC) + timedelta(hours=2))
    assert ("It ran on web2: a later firing caught it up, started 2026-12-05 03:30 CET, 2h00m "
            "after the slot; it ended succeeded after 7.0s (exit 0).") in story("2026-12-05", row=late).lines
    data = s.to_json()
    valid(data)
    assert data["run"]["run_id"] == 7 and "boot_id" not in data["run"]


def test_a_failure_after_a_takeover_lists_its_attempts():
    last = row("failed", attempt=2, exit_code=3, trigger="takeover")
    first = RunAttempt(7, 1, "abandoned", "superseded", "web1", 2, None, None, None, None, None)
    s = story("2026-12-05", row=last, attempts=[first, RunAttempt.of_run(last, NOW)])
    assert "it ended failed after 7.0s (exit 3)" in text(s)
    assert "a firing took it over after its runner had died" in text(s)
    assert "It took 2 attempts: attempt 1 on web1 abandoned, superseded." in s.lines


@pytest.mark.parametrize("status, more, words", [
    ("timeout", dict(exit_code=124, timed_out=True), "timeout after 7.0s: it reached --timeout"),
    ("killed", dict(exit_code=143, signal=15), "ended by SIGTERM (exit 143)"),
    ("killed", dict(skip_reason="lease_lost"), "its lease was lost"),
    ("warning", dict(skip_reason="too_fast"), "faster than --min-duration")])
def test_each_end_is_worded(status, more, words):
    assert words in text(story("2026-12-05", row=row(status, **more)))


def test_a_running_and_an_abandoned_run():
    live = row("running", finished_at=None, duration_ms=None, exit_code=None,
               locked_until=NOW + timedelta(minutes=2))
    s = story("2026-12-05", row=live)
    assert s.verdict == "running" and "still running (pid 4242, lease 2m00s left)" in text(s)
    gone = live.replace(locked_until=NOW - timedelta(minutes=5))
    s = story("2026-12-05", row=gone)
    assert (s.verdict, s.status) == ("abandoned", "abandoned")
    assert "its lease expired 5m00s ago" in text(s) and "next firing takes it over" in text(s)


@pytest.mark.parametrize("reason, words", [
    ("overlap", "another run of the job was still live"),
    ("too_late", "only after --catchup-window had passed"),
    ("paused", "the job was paused when a firing on web2 came for it")])
def test_a_skipped_slot_says_why(reason, words):
    skipped = row("skipped", skip_reason=reason, started_at=None, finished_at=None,
                  duration_ms=None, exit_code=None)
    s = story("2026-12-05", row=skipped)
    assert (s.verdict, s.reason) == ("skipped", reason)
    assert words in text(s)
    valid(s.to_json())


def test_a_slot_skipped_while_paused_names_the_pause_still_in_force():
    skipped = row("skipped", skip_reason="paused", started_at=None, finished_at=None,
                  duration_ms=None, exit_code=None)
    pause = Pause("settle", None, "bank holiday", "ops1", SLOT - timedelta(days=1))
    s = story("2026-12-05", row=skipped, pauses={"settle": pause})
    assert "(settle is paused (bank holiday))" in text(s)
    assert s.to_json()["pause"]["reason"] == "bank holiday"


def test_a_pause_in_force_is_told_for_the_next_slot():
    pause = Pause("settle", None, "month end", "ops1", NOW - timedelta(hours=1))
    s = story(None, pauses={"settle": pause})
    assert "settle is paused (month end): its firing then will be skipped" in text(s)
    ended = Pause("settle", NOW + timedelta(hours=1), None, "ops1", NOW - timedelta(hours=1))
    assert "paused" not in text(story(None, pauses={"settle": ended}))


def test_a_pause_of_every_host_covers_one_host_s_share():
    pause = Pause("settle", None, None, "ops1", NOW - timedelta(hours=1))
    s = story(None, job=ledger_job("settle", "web1"), pauses={"settle": pause})
    assert "settle is paused: its firing then will be skipped" in text(s)
    assert s.lines[0].startswith("settle@web1: schedule")
    assert s.to_json()["scope"] == "host" and s.to_json()["host"] == "web1"


def test_a_slot_recorded_missed_by_a_later_firing():
    missed = row("missed", started_at=None, finished_at=None, duration_ms=None, exit_code=None,
                 host=None, attempt=0)
    s = story("2026-12-05", row=missed)
    assert (s.verdict, s.status) == ("missed", "missed")
    assert "A later firing found it had never run and recorded it missed" in text(s)


def test_a_slot_without_a_row_was_fired_by_no_host():
    s = story("2026-12-05", first_seen=NOW - timedelta(days=30),
              last_slot=(SLOT - timedelta(days=2)).astimezone(UTC))
    assert (s.verdict, s.status) == ("missed", None)
    assert "Missed: no host fired it." in text(s)
    assert "No scheduled firing of settle has reached the ledger since its slot 2026-12-03 " \
           "01:30 CET (2d8h ago)." in s.lines
    later = story("2026-12-05", first_seen=NOW - timedelta(days=30),
                  last_slot=(SLOT + timedelta(days=1)).astimezone(UTC), now=NOW + timedelta(days=1))
    assert "yet none recorded this one missed" in text(later)
    paused = story("2026-12-05", pauses={"settle": Pause("settle", None, "x", "o",
                                                         SLOT - timedelta(hours=1))})
    assert "settle was paused (x) then; a paused firing records its skip, and none did." \
        in paused.lines


def test_before_the_ledger_knew_the_job_and_a_slot_just_due():
    s = story("2026-12-05", first_seen=NOW - timedelta(hours=1))
    assert "This is before the ledger first saw settle" in text(s)
    just = story("2026-12-05", now=SLOT.astimezone(UTC) + timedelta(seconds=40))
    assert "It is due just now" in text(just)


def test_a_key_template_shared_by_several_slots_names_the_slot_that_ran():
    hourly = Schedule.parse("30 * * * *", BERLIN, "Europe/Berlin")
    daily_key = "%Y-%m-%d"
    first = row(run_key="2026-12-05", scheduled_at=datetime(2026, 12, 4, 23, 30, tzinfo=UTC))
    s = story("2026-12-05T01:30", hourly, row=first, key_template=daily_key)
    assert ("Its run key 2026-12-05 is shared with the slot 2026-12-05 00:30 CET (--key): that "
            "slot's run stands for both.") in s.lines
    assert s.to_json()["run_key"] == "2026-12-05"


# -- the run log --------------------------------------------------------------------------------

def event(kind: str, **more) -> dict:
    return {"ts": "2026-12-05T00:30:03.120+00:00", "format": 1, "event": kind, "level": "info",
            "msg": "", "job": "settle", "host": "web1", "pid": 99, "run_key": KEY, **more}


def test_a_duplicate_firing_and_an_off_slot_one_are_told_from_the_run_log():
    dup = event("skip", status="skipped", skip_reason="duplicate", blocking_run_id=7,
                blocking_host="web2", blocking_status="running")
    off = event("warning", skew_s=-7200.0, run_key=None,
                message="this firing at ... is 2h before the nearest fire time ...; using the "
                        "most recent slot, 2026-12-05T01:30:00+01:00")
    s = story("2026-12-05", row=row(skew_ms=7_200_000), events=[dup, off])
    lines = text(s)
    assert "From the run log of this host (web1):" in s.lines
    assert ("A firing on web1 at 2026-12-05 01:30:03 CET (pid 99) was skipped as a duplicate: "
            "run 7 (running on web2) had already claimed the slot.") in s.lines
    assert "was off its slot: this firing at" in lines
    assert "The firing that ran it came 2h00m after the slot, off its schedule" in lines
    data = s.to_json()
    valid(data)
    assert [e["event"] for e in data["events"]] == ["skip", "warning"]
    assert data["events"][0]["blocking_run_id"] == 7 and "msg" not in data["events"][0]


def test_catch_up_s_own_lines_say_which_firing_recorded_or_ran_the_slot():
    lines = text(story("2026-12-05", events=[event("missed"), event("catchup"),
                                             event("skip", skip_reason="too_late")]))
    assert "The firing on web1 at 2026-12-05 01:30:03 CET (pid 99) found it had never run " \
        "and recorded it missed." in lines
    assert "ran it as a catch-up" in lines and "recorded it skipped (too late)" in lines


def test_a_run_the_ledger_never_heard_of_is_told_from_the_run_log():
    s = story("2026-12-05", events=[event("start"), event("spooled", run_id=0)])
    assert "this host's run log says a run of it started here" in text(s)
    assert "it waits in that host's outbox" in text(s)


def test_slot_events_are_the_job_s_the_host_s_and_the_slot_s():
    lines = [event("skip", skip_reason="duplicate"), event("skip", job="other"),
             event("skip", run_key="2026-12-04T00:30:00Z"),
             event("finish", host="web2"),
             event("warning", run_key=None, skew_s=9.0,
                   message="...; using the most recent slot, 2026-12-05T01:30:00+01:00"),
             event("warning", run_key=None, message="a warning about no slot"), "not a dict"]
    fleet = why.slot_events(lines, "settle", None, KEY, SLOT)
    assert [(e["event"], e["host"]) for e in fleet] == \
        [("skip", "web1"), ("finish", "web2"), ("warning", "web1")]
    mine = why.slot_events(lines, "settle", "web1", KEY, SLOT)
    assert [e["event"] for e in mine] == ["skip", "warning"]


def test_the_why_page_escapes_every_word_and_the_time_asked():
    from cronwrap.read import pages

    hostile = "<script>alert(1)</script>"
    s = story("2026-12-05", job=hostile, row=row(job=hostile, host="<b>web2</b>"),
              notes=["<img src=x onerror=alert(2)>"])
    page = pages.why_page(s, '"><script>alert(3)</script>', root="../../")
    assert "<script>" not in page and "<img" not in page and "<b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert 'value="&quot;&gt;&lt;script&gt;alert(3)&lt;/script&gt;"' in page
    assert 'href="../../jobs/%3Cscript%3Ealert%281%29%3C%2Fscript%3E/runs/7"' in page
