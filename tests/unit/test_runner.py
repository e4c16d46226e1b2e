"""The runner's policy in-process (issue 14 §2): retries, retry limits, alert streaks,
catch-up, lost leases and date ranges, against the in-memory SQLite ledger and a fake
supervisor: cronwrap.testing.MemoryWorld; nothing is spawned, nothing sleeps, the clock is an
argument."""

from __future__ import annotations

import json

import pytest

from cronwrap.errors import UsageError
from cronwrap.model import Reason, Status
from cronwrap.testing import T0, MemoryWorld


def events(tmp_path) -> list[dict]:
    lines = (tmp_path / "logs" / "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_a_transient_failure_is_retried_with_backoff_until_it_succeeds(tmp_path):
    fake = MemoryWorld([75, 75, 0])
    assert fake.fire(tmp_path, "--retries", "3", "--retry-delay", "10") == 0
    (run,) = fake.runs()
    assert (run.status, run.attempt, run.exit_code) == (Status.SUCCEEDED, 3, 0)
    assert len(fake.sleeps) == 2 and 0 <= fake.sleeps[0] <= 10 and 0 <= fake.sleeps[1] <= 20
    assert [e["event"] for e in events(tmp_path)].count("retry") == 2


def test_a_status_not_in_retry_on_is_final(tmp_path):
    fake = MemoryWorld([3])
    assert fake.fire(tmp_path, "--retries", "3", "--retry-on", "75") == 3
    assert fake.sleeps == [] and fake.runs()[0].status == Status.FAILED


def test_without_retry_on_any_failure_is_retried_but_not_a_command_that_cannot_run(tmp_path):
    fake = MemoryWorld([1, 3, 0])
    assert fake.fire(tmp_path, "--retries", "3") == 0
    assert fake.runs()[0].attempt == 3 and len(fake.sleeps) == 2
    fake = MemoryWorld([127])
    assert fake.fire(tmp_path / "b", "--retries", "3") == 127
    assert fake.sleeps == [] and fake.runs()[0].attempt == 1


def test_a_retry_that_would_run_past_the_next_slot_is_not_made(tmp_path):
    fake = MemoryWorld([75])
    code = fake.fire(tmp_path, "--schedule", "* * * * *", "--retries", "2", "--retry-delay",
                     "600", "--timeout", "50")
    assert code == 75 and fake.sleeps == []
    skipped = [e for e in events(tmp_path) if e["event"] == "retry_skipped"]
    assert skipped and skipped[0]["reason"] == "would run past the next slot"


def test_alert_after_hooks_fire_from_the_nth_failure_and_once_on_recovery(tmp_path):
    fake = MemoryWorld([1, 1, 1, 0, 0])
    for _ in range(5):
        fake.fire(tmp_path, "--alert-after", "2", "--on-failure", "page", "--on-success", "ok")
        fake.now += 60  # the next minute: the next slot
    assert fake.hooks == [("page", "failing"), ("page", "failing"), ("page", "recovered"),
                          ("ok", None)]


def test_catchup_runs_missed_slots_oldest_first_with_their_own_times(tmp_path):
    fake = MemoryWorld([0, 0, 0, 0])
    fake.now = T0 - 3 * 3600
    fake.fire(tmp_path, "--schedule", "0 * * * *", "--tz", "UTC")
    fake.now = T0
    fake.fire(tmp_path, "--schedule", "0 * * * *", "--tz", "UTC", "--catchup", "all")
    seen = [(e["CRONWRAP_SCHEDULED_AT"], e["CRONWRAP_TRIGGER"]) for e in fake.envs]
    assert seen == [("2026-10-28T07:00:00+00:00", "schedule"),
                    ("2026-10-28T08:00:00+00:00", "catchup"),
                    ("2026-10-28T09:00:00+00:00", "catchup"),
                    ("2026-10-28T10:00:00+00:00", "schedule")]


def test_a_missed_slot_is_recorded_without_catch_up(tmp_path):
    fake = MemoryWorld([0, 0])
    fake.now = T0 - 2 * 3600
    fake.fire(tmp_path, "--schedule", "0 * * * *", "--tz", "UTC")
    fake.now = T0
    fake.fire(tmp_path, "--schedule", "0 * * * *", "--tz", "UTC")
    assert [r.status for r in fake.runs()] == [Status.SUCCEEDED, Status.MISSED, Status.SUCCEEDED]


def test_a_lost_lease_is_recorded_killed(tmp_path):
    fake = MemoryWorld([(143, {"stop_reason": Reason.LEASE_LOST})])
    fake.fire(tmp_path)
    (run,) = fake.runs()
    assert (run.status, run.skip_reason) == (Status.KILLED, Reason.LEASE_LOST)


@pytest.mark.parametrize("keep_going, ran, code", [(False, 2, 4), (True, 3, 4)])
def test_a_date_range_stops_at_a_failure_unless_keep_going(tmp_path, keep_going, ran, code):
    fake = MemoryWorld([0, 4, 0])
    options = ["--schedule", "30 1 * * *", "--tz", "UTC", "--date", "2026-10-01..2026-10-03"]
    assert fake.fire(tmp_path, *options, *(["--keep-going"] if keep_going else [])) == code
    assert len(fake.envs) == ran


def test_a_manual_run_of_an_old_slot_honours_its_retries(tmp_path):
    fake = MemoryWorld([1, 1, 0])
    code = fake.fire(tmp_path, "--schedule", "0 1 * * *", "--tz", "UTC", "--at",
                     "2026-10-01T01:00", "--retries", "2", "--retry-on", "1")
    assert code == 0 and fake.runs()[0].attempt == 3 and len(fake.sleeps) == 2


def test_a_manual_retry_that_cannot_fit_is_logged_with_its_deadline(tmp_path):
    fake = MemoryWorld([1])
    code = fake.fire(tmp_path, "--schedule", "* * * * *", "--tz", "UTC", "--at",
                     "2026-10-01T01:00", "--retries", "2", "--timeout", "90")
    assert code == 1 and fake.sleeps == []
    (skipped,) = [e for e in events(tmp_path) if e["event"] == "retry_skipped"]
    assert skipped["deadline"] == "2026-10-28T10:01:05.000+00:00"  # T0 + one minute
    assert skipped["next_slot"] == "2026-10-01T01:01:00.000+00:00"


def test_a_slot_in_the_future_is_refused_unless_forced(tmp_path):
    fake = MemoryWorld([0])
    with pytest.raises(UsageError, match=r"^--date 2027-10-28: the slot 2027-10-28T01:30:00\+00:00 "
                                         r"is in the future; check the date \(add --force"):
        fake.fire(tmp_path, "--schedule", "30 1 * * *", "--tz", "UTC", "--date", "2027-10-28")
    with pytest.raises(UsageError, match="is in the future"):  # today's slot at 11:00 has not come
        fake.fire(tmp_path, "--schedule", "0 11 * * *", "--tz", "UTC", "--date", "2026-10-28")
    assert fake.runs() == []
    assert fake.fire(tmp_path, "--schedule", "30 1 * * *", "--tz", "UTC", "--date", "2027-10-28",
                     "--force") == 0


def test_a_paused_job_s_catch_up_and_own_slot_are_skipped_paused_no_job_no_hook(tmp_path):
    """Every trigger but a person's is paused: the missed slots catch-up would run, and the
    firing's own; nothing is supervised, no hook runs, and the firing exits 0 even with
    --skip-exit-code. The pause ended, the next firing runs; the skipped slots stay skipped."""
    from datetime import datetime, timezone

    fake = MemoryWorld([0, 0, 0])
    hourly = ("--schedule", "0 * * * *", "--tz", "UTC", "--on-failure", "page",
              "--on-success", "ok", "--skip-exit-code", "75")
    fake.now = T0 - 3 * 3600
    assert fake.fire(tmp_path, *hourly) == 0
    fake.ledger.pause("j", datetime.fromtimestamp(T0 + 60, timezone.utc), "deploy", "ops")
    fake.now = T0
    assert fake.fire(tmp_path, *hourly, "--catchup", "all") == 0
    assert len(fake.envs) == 1 and fake.hooks == [("ok", None)]
    assert [(r.trigger, r.status, r.skip_reason) for r in fake.runs()][:3] == [
        ("schedule", Status.SKIPPED, Reason.PAUSED), ("catchup", Status.SKIPPED, Reason.PAUSED),
        ("catchup", Status.SKIPPED, Reason.PAUSED)]
    skips = [e for e in events(tmp_path) if e["event"] == "skip"]
    assert [e["skip_reason"] for e in skips] == ["paused"] * 3
    assert skips[0]["paused_until"] and skips[0]["pause_reason"] == "deploy"
    fake.now = T0 + 3600  # the pause has ended
    assert fake.fire(tmp_path, *hourly, "--catchup", "all") == 0
    assert len(fake.envs) == 2
    assert sum(r.skip_reason == Reason.PAUSED for r in fake.runs()) == 3
