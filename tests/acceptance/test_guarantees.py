"""Issue 12 §1-2, through the executable: a timeout is recorded with the exit status cronwrap
returned, and days are re-run by date and by range without restating the schedule, with a
dry run that claims, runs and writes nothing."""

from __future__ import annotations

import json
import signal
import subprocess

import pytest

from tests.acceptance.conftest import wait_for
from tests.conftest import until_exists

SETTLE = ["--schedule", "30 1 * * *", "--tz", "Europe/Berlin", "--key", "%Y-%m-%d"]


def history(cw, name: str, env: dict | None = None) -> list[dict]:
    return cw.json("history", name, "--json", env=env)


def events(cw) -> list[dict]:
    path = cw.home / "logs" / "events.jsonl"
    return [json.loads(l) for l in path.read_text().splitlines()] if path.exists() else []


# -- 1. the exit status on the record --------------------------------------------------------

@pytest.mark.parametrize("args, job, expected", [
    (["--timeout", "0.3"], ["sleep", "5"], 124),
    (["--timeout", "0.3", "--kill-after", "0.3"], ["sh", "-c", "trap '' TERM; sleep 5"], 137),
    (["--timeout", "0.3", "--preserve-status"], ["sh", "-c", "trap 'exit 42' TERM; sleep 5 & wait"], 42),
])
def test_a_timeout_is_recorded_with_the_status_cronwrap_returned(cw, args, job, expected):
    proc = cw("run", "-n", "t", *args, "--", *job)
    assert proc.returncode == expected
    (run,) = history(cw, "t")
    assert (run["status"], run["exit_code"], run["timed_out"]) == ("timeout", expected, True)
    status = cw.json("status", "--json")[0]
    assert status["last_run"]["exit_code"] == expected
    finish = [e for e in events(cw) if e["event"] == "timeout"][-1]
    assert finish["exit_code"] == expected
    table = cw("status", check_rc=0).stdout.decode()
    assert f" timeout {expected} " in " ".join(table.split())  # STATUS and EXIT columns
    picture = cw("status", "t", check_rc=0).stdout.decode()
    assert f"1 timeout (exit {expected})" in picture
    check = cw("status", "--check")
    assert check.returncode == 2 and f"timeout (exit {expected})" in check.stdout.decode()
    metrics = cw("status", "--format", "prometheus", check_rc=0).stdout.decode()
    assert f'cronwrap_last_run_exit_code{{cronjob="t"}} {expected}' in metrics


def test_a_run_ended_by_a_forwarded_signal_records_128_plus_n(cw, tmp_path):
    ready = tmp_path / "ready"
    proc = cw.popen("run", "-n", "s", "--", "sh", "-c", f"touch {ready}; exec sleep 30")
    wait_for(ready.exists, what="the job")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 128 + signal.SIGTERM
    (run,) = history(cw, "s")
    assert (run["status"], run["exit_code"], run["signal"]) == ("killed", 143, signal.SIGTERM)


# -- 2. re-run a day, or a range of days, by date --------------------------------------------

def fired_by_cron(cw, name: str = "settle", *extra: str) -> None:
    """What cron's firing records: the job's schedule, zone and key template."""
    cw("run", "-n", name, *SETTLE, *extra, "--", "true", check_rc=0)


def test_a_day_is_rerun_with_only_its_name_and_date(cw):
    fired_by_cron(cw)
    proc = cw("run", "-n", "settle", "--date", "2026-10-28", "--", "sh", "-c",
              'echo "$CRONWRAP_BIZ_DATE $CRONWRAP_RUN_KEY $CRONWRAP_SCHEDULED_AT $CRONWRAP_TRIGGER"')
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"2026-10-28 2026-10-28 2026-10-28T01:30:00+01:00 manual\n"
    job = cw.json("status", "--json")[0]
    assert (job["schedule"], job["tz"]) == ("30 1 * * *", "Europe/Berlin")  # unchanged by it


def test_without_a_recorded_schedule_the_date_is_refused(cw, tmp_path):
    marker = tmp_path / "ran"
    proc = cw("run", "-n", "never", "--date", "2026-10-28", "--", "touch", str(marker))
    lines = proc.stderr.decode().strip().splitlines()
    assert proc.returncode == 125 and len(lines) == 1 and "--schedule" in lines[0], lines
    assert not marker.exists()


def test_a_three_day_range_runs_in_order_each_slot_its_own_run(cw, tmp_path):
    fired_by_cron(cw)
    log = tmp_path / "log"
    proc = cw("run", "-n", "settle", "--date", "2026-10-26..2026-10-28", "--", "sh", "-c",
              f'echo "$CRONWRAP_BIZ_DATE $CRONWRAP_RUN_KEY $CRONWRAP_RUN_ID" >> {log}')
    assert proc.returncode == 0, proc.stderr
    lines = [l.split() for l in log.read_text().splitlines()]
    assert [l[:2] for l in lines] == [["2026-10-26", "2026-10-26"], ["2026-10-27", "2026-10-27"],
                                      ["2026-10-28", "2026-10-28"]]
    assert len({l[2] for l in lines}) == 3  # three runs, three rows
    runs = {r["run_key"]: r for r in history(cw, "settle")}
    assert all(runs[d]["status"] == "succeeded" and runs[d]["trigger"] == "manual"
               for d in ("2026-10-26", "2026-10-27", "2026-10-28"))


def test_a_range_skips_a_day_that_already_succeeded_and_lists_it(cw, tmp_path):
    fired_by_cron(cw)
    cw("run", "-n", "settle", "--date", "2026-10-27", "--", "true", check_rc=0)
    log = tmp_path / "log"
    proc = cw("run", "-n", "settle", "--date", "2026-10-26..2026-10-28", "--", "sh", "-c",
              f'echo "$CRONWRAP_BIZ_DATE" >> {log}')
    assert proc.returncode == 0
    assert log.read_text().split() == ["2026-10-26", "2026-10-28"]
    assert "slot 2026-10-27 already ran" in proc.stderr.decode()
    forced = cw("run", "-n", "settle", "--date", "2026-10-27..2026-10-27", "--force", "--",
                "sh", "-c", f'echo "$CRONWRAP_BIZ_DATE" >> {log}')
    assert forced.returncode == 0 and log.read_text().split()[-1] == "2026-10-27"


def test_a_range_stops_at_the_first_day_that_fails(cw, tmp_path):
    fired_by_cron(cw)
    log = tmp_path / "log"
    job = ["sh", "-c", f'echo "$CRONWRAP_BIZ_DATE" >> {log}; [ "$CRONWRAP_BIZ_DATE" != 2026-10-27 ] || exit 3']
    proc = cw("run", "-n", "settle", "--date", "2026-10-26..2026-10-28", "--", *job)
    assert proc.returncode == 3
    assert log.read_text().split() == ["2026-10-26", "2026-10-27"]  # the 28th was not run
    assert "2026-10-28" not in {r["run_key"] for r in history(cw, "settle")}
    log.unlink()
    going = cw("run", "-n", "settle", "--date", "2026-10-26..2026-10-28", "--keep-going", "--", *job)
    assert going.returncode == 3  # the first failure's status, after running the rest
    assert log.read_text().split() == ["2026-10-27", "2026-10-28"]  # the 26th had succeeded


def test_a_range_longer_than_max_slots_is_refused_before_anything_runs(cw, tmp_path):
    fired_by_cron(cw)
    marker = tmp_path / "ran"
    proc = cw("run", "-n", "settle", "--date", "2016-01-01..2026-01-01", "--", "touch", str(marker))
    lines = proc.stderr.decode().strip().splitlines()
    assert proc.returncode == 125 and len(lines) == 1 and "--max-slots" in lines[0], lines
    assert not marker.exists()
    proc = cw("run", "-n", "settle", "--date", "2026-01-01..2026-01-05", "--max-slots", "5",
              "--", "true")
    assert proc.returncode == 0


def test_a_range_leaves_a_slot_running_elsewhere_alone(cw, tmp_path):
    """Another host (its own home, the same ledger) is running the 27th: the range skips it."""
    fired_by_cron(cw)
    db = {"CRONWRAP_DB": f"sqlite:///{cw.home}/ledger.db"}
    started = tmp_path / "started"
    other = cw.popen("run", "-n", "settle", "--date", "2026-10-27", "--", "sh", "-c",
                     f"touch {started}; sleep 3",
                     env={**db, "CRONWRAP_HOME": str(tmp_path / "host-b"), "CRONWRAP_HOST": "b"})
    try:
        wait_for(started.exists, what="host b's run")
        log = tmp_path / "log"
        proc = cw("run", "-n", "settle", "--date", "2026-10-26..2026-10-28",
                  "--overlap", "allow", "--", "sh", "-c", f'echo "$CRONWRAP_BIZ_DATE" >> {log}')
        assert proc.returncode == 0, proc.stderr
        assert log.read_text().split() == ["2026-10-26", "2026-10-28"]
    finally:
        assert other.wait(20) == 0
    runs = {r["run_key"]: r for r in history(cw, "settle")}
    assert runs["2026-10-27"]["host"] == "b" and runs["2026-10-27"]["attempt"] == 1


def test_dry_run_prints_the_plan_and_claims_runs_and_writes_nothing(cw, tmp_path):
    fired_by_cron(cw)
    cw("run", "-n", "settle", "--date", "2026-10-27", "--", "true", check_rc=0)
    cw("run", "-n", "settle", "--date", "2026-10-28", "--", "false")
    before = (history(cw, "settle"), (cw.home / "logs" / "events.jsonl").read_bytes())
    marker = tmp_path / "ran"
    proc = cw("run", "-n", "settle", "--date", "2026-10-26..2026-10-29", "--dry-run", "--",
              "touch", str(marker))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode().splitlines()
    assert "nothing is claimed, run or written" in out[0]
    plan = {line.split()[1]: line for line in out[1:]}
    assert "run (attempt 1)" in plan["2026-10-26"]
    assert "already ran" in plan["2026-10-27"] and "--force" in plan["2026-10-27"]
    assert "run again (attempt 2" in plan["2026-10-28"]
    assert "run (attempt 1)" in plan["2026-10-29"]
    assert not marker.exists()
    assert (history(cw, "settle"), (cw.home / "logs" / "events.jsonl").read_bytes()) == before


def test_dry_run_of_a_scheduled_firing_shows_what_catch_up_would_record(cw, tmp_path):
    fired_by_cron(cw, "hourly")  # creates the job; its slot is now
    import sqlite3
    db = sqlite3.connect(cw.home / "ledger.db")  # as if cron last fired it three days ago
    db.execute("UPDATE jobs SET last_slot = last_slot - 3 * 86400 WHERE name = 'hourly'")
    db.commit()
    db.close()
    proc = cw("run", "-n", "hourly", *SETTLE, "--catchup", "latest", "--dry-run", "--", "true")
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout.decode()
    assert "record missed" in text and "catchup" in text
    assert history(cw, "hourly")[0]["status"] == "succeeded" and len(history(cw, "hourly")) == 1


def test_dry_run_says_when_the_local_lock_would_make_the_firing_skip(cw, tmp_path):
    started, done = tmp_path / "started", tmp_path / "done"
    # The job holds the lock until the dry run has looked (a fixed sleep could end first).
    holder = cw.popen("run", "-n", "busy", "--", "sh", "-c",
                      f"touch {started}; {until_exists(done)}")
    try:
        wait_for(started.exists, what="the running job")
        proc = cw("run", "-n", "busy", "--dry-run", "--", "true")
    finally:
        done.touch()
        assert holder.wait(20) == 0
    assert proc.returncode == 0, proc.stderr
    assert f"the local lock is held by pid {holder.pid}" in proc.stdout.decode()
    assert "would skip (overlap)" in proc.stdout.decode()
    assert "lock" not in cw("run", "-n", "busy", "--dry-run", "--", "true").stdout.decode()
