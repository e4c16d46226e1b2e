"""Schedules end to end: the real executable driven across days by libfaketime.

Each firing runs with its clock set from outside (LD_PRELOAD libfaketime, FAKETIME=@…), as
cron would start it at that moment; the job records what it saw.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta

import pytest

from tests.conftest import CW

SHANGHAI = "Asia/Shanghai"
DAILY = ["--schedule", "30 1 * * *", "--tz", SHANGHAI]


def faketime_lib() -> str:
    import libfaketime

    return os.path.join(os.path.dirname(libfaketime.__file__), "vendor", "libfaketime", "src",
                        "libfaketime.so.1")


class Clocked(CW):
    """cronwrap at a given wall-clock time (ISO with offset)."""

    def at(self, when: str, *args: str, env: dict | None = None):
        from datetime import datetime, timezone

        utc = datetime.fromisoformat(when).astimezone(timezone.utc)
        fake = {"LD_PRELOAD": faketime_lib(), "FAKETIME": "@" + utc.strftime("%Y-%m-%d %H:%M:%S"),
                "DONT_FAKE_MONOTONIC": "1", "TZ": "UTC", **(env or {})}
        return self(*args, env=fake)


@pytest.fixture(params=["sqlite", "postgres"])
def clocked(request, home):
    cw = Clocked(home)
    if request.param == "postgres":
        dsn = request.getfixturevalue("pg_dsn")
        base_env = cw.env
        cw.env = lambda extra=None: {**base_env(extra), "CRONWRAP_DB": dsn}
    return cw


@pytest.fixture
def seen(tmp_path):
    """A job that appends what it saw; returns (argv, reader)."""
    out = tmp_path / "seen.jsonl"
    argv = ["--", "python3", "-c",
            "import os, json, sys; open(sys.argv[1], 'a').write(json.dumps({k[9:].lower(): v "
            "for k, v in os.environ.items() if k.startswith('CRONWRAP_') and k != 'CRONWRAP_HOME'}) + '\\n')",
            str(out)]

    def read() -> list[dict]:
        return [json.loads(l) for l in out.read_text().splitlines()] if out.exists() else []
    return argv, read


def history(cw: CW, name: str) -> list[dict]:
    return cw.json("history", name, "--json", "--limit", "100")


def test_catchup_latest_runs_the_missed_day_with_its_own_time(clocked, seen):
    job, read = seen
    assert clocked.at("2026-10-26T01:30:04+08:00", "run", "-n", "settle", *DAILY,
                      "--catchup", "latest", *job).returncode == 0
    # the host was down on the 27th; on the 28th the missed day runs first, then the 28th
    proc = clocked.at("2026-10-28T01:30:02+08:00", "run", "-n", "settle", *DAILY,
                      "--catchup", "latest", *job)
    assert proc.returncode == 0, proc.stderr
    runs = read()
    assert [(r["biz_date"], r["trigger"]) for r in runs] == [
        ("2026-10-26", "schedule"), ("2026-10-27", "catchup"), ("2026-10-28", "schedule")]
    assert runs[1]["scheduled_at"] == "2026-10-27T01:30:00+08:00"
    assert runs[1]["run_key"] == "2026-10-26T17:30:00Z"
    rows = history(clocked, "settle")
    assert sorted(r["trigger"] for r in rows) == ["catchup", "schedule", "schedule"]
    assert all(r["status"] == "succeeded" for r in rows)


def test_catchup_all_runs_oldest_first_up_to_the_cap(clocked, seen):
    job, read = seen
    opts = [*DAILY, "--catchup", "all", "--max-catchup", "2"]
    clocked.at("2026-10-20T01:30:01+08:00", "run", "-n", "agg", *opts, *job)
    assert clocked.at("2026-10-25T01:30:01+08:00", "run", "-n", "agg", *opts, *job).returncode == 0
    days = [(r["biz_date"], r["trigger"]) for r in read()]
    assert days == [("2026-10-20", "schedule"), ("2026-10-21", "catchup"),
                    ("2026-10-22", "catchup"), ("2026-10-25", "schedule")]
    status = {r["run_key"]: r["status"] for r in history(clocked, "agg")}
    assert list(status.values()).count("missed") == 2  # the 23rd and 24th, beyond the cap


def test_a_long_outage_records_every_slot_the_warning_counts(clocked):
    """Two days down, every minute, --catchup all --max-catchup 5 (issue 20 §6): the
    warning's count of slots "recorded as missed" is the ledger's count of missed rows, and
    the slot just after the five run has its row, so status counts it."""
    import re

    opts = ["-n", "m", "--schedule", "* * * * *", "--tz", "UTC", "--catchup", "all",
            "--max-catchup", "5", "--", "true"]
    assert clocked.at("2026-10-20T00:00:02+00:00", "run", *opts).returncode == 0
    proc = clocked.at("2026-10-22T00:00:02+00:00", "run", *opts)
    assert proc.returncode == 0, proc.stderr
    counted = re.search(rb"(\d+) missed slots beyond --max-catchup 5 are recorded as missed",
                        proc.stderr)
    assert counted, proc.stderr
    rows = clocked.json("history", "m", "--json", "--limit", "5000")
    missed = sorted(r["scheduled_at"] for r in rows if r["status"] == "missed")
    run = sorted(r["scheduled_at"] for r in rows if r["trigger"] == "catchup")
    assert len(missed) == int(counted.group(1))
    assert len(run) == 5
    after_last_run = datetime.fromisoformat(run[-1]) + timedelta(minutes=1)
    assert datetime.fromisoformat(missed[0]) == after_last_run, (run[-1], missed[0])
    (job,) = json.loads(clocked.at("2026-10-22T00:00:30+00:00", "status", "--json").stdout)
    assert job["counts"]["missed"] == len(missed)


def test_catchup_none_records_missed_and_status_says_so(clocked, seen):
    job, read = seen
    clocked.at("2026-10-26T01:30:04+08:00", "run", "-n", "n", *DAILY, *job)
    clocked.at("2026-10-29T01:30:04+08:00", "run", "-n", "n", *DAILY, *job)
    assert [r["biz_date"] for r in read()] == ["2026-10-26", "2026-10-29"]
    missed = [r for r in history(clocked, "n") if r["status"] == "missed"]
    assert sorted(r["scheduled_at"][:10] for r in missed) == ["2026-10-26", "2026-10-27"]  # UTC dates
    (job_status,) = json.loads(clocked.at("2026-10-29T02:00:00+08:00", "status", "--json").stdout)
    # counted, but the 29th's run went well: health is the present's (issue 22 §5)
    assert job_status["missed"] == 2 and job_status["health"] == "ok"
    assert job_status["why"] == "last run succeeded (2 missed slots in the window)"
    assert job_status["late"] == 0  # recorded missed: no slot is waiting for a firing
    assert job_status["next_due_at"].startswith("2026-10-30T01:30:00")


def test_slots_older_than_the_window_are_too_late(clocked, seen):
    job, read = seen
    opts = [*DAILY, "--catchup", "all", "--catchup-window", "36h"]
    clocked.at("2026-10-20T01:30:01+08:00", "run", "-n", "w", *opts, *job)
    clocked.at("2026-10-24T01:30:01+08:00", "run", "-n", "w", *opts, *job)
    assert [r["biz_date"] for r in read()] == ["2026-10-20", "2026-10-23", "2026-10-24"]
    reasons = sorted(r["skip_reason"] or "" for r in history(clocked, "w") if r["status"] == "skipped")
    assert reasons == ["too_late", "too_late"]


def test_first_invocation_never_invents_a_backlog(clocked, seen):
    job, read = seen
    clocked.at("2026-10-28T01:30:04+08:00", "run", "-n", "new", *DAILY, "--catchup", "all", *job)
    assert [r["trigger"] for r in read()] == ["schedule"]
    assert len(history(clocked, "new")) == 1


def test_hosts_seconds_apart_share_one_slot_and_a_far_off_host_is_warned(clocked, seen):
    job, read = seen
    assert clocked.at("2026-10-28T01:30:01+08:00", "run", "-n", "s", "--host", "a", *DAILY, *job).returncode == 0
    assert clocked.at("2026-10-28T01:30:40+08:00", "run", "-n", "s", "--host", "b", *DAILY, *job).returncode == 0
    assert len(read()) == 1
    proc = clocked.at("2026-10-28T01:41:00+08:00", "run", "-n", "s", "--host", "c", *DAILY, *job)
    assert b"outside the 1m30s tolerance" in proc.stderr and b"check this host's clock" in proc.stderr
    assert len(read()) == 1  # mapped to the slot already done
    events = [json.loads(l) for l in (clocked.home / "logs" / "events.jsonl").read_text().splitlines()]
    assert any(e["event"] == "warning" and "tolerance" in e["message"] for e in events)
    # a far-off host that does run is named in status
    far = clocked.at("2026-10-29T01:42:30+08:00", "run", "-n", "s", "--host", "c", *DAILY, *job)
    assert far.returncode == 0 and len(read()) == 2
    (job_status,) = json.loads(clocked.at("2026-10-29T01:45:00+08:00", "status", "--json").stdout)
    assert job_status["health"] == "warning" and job_status["last_run"]["skew_ms"] > 600_000
    table = clocked.at("2026-10-29T01:45:00+08:00", "status").stdout.decode()
    assert "host c fired" in table and "check its clock" in table


def test_manual_run_by_date_once_then_force(clocked, seen):
    job, read = seen
    proc = clocked.at("2026-11-02T10:00:00+08:00", "run", "-n", "m", *DAILY, "--date", "2026-10-28", *job)
    assert proc.returncode == 0
    (run,) = read()
    assert (run["trigger"], run["biz_date"], run["scheduled_at"]) == (
        "manual", "2026-10-28", "2026-10-28T01:30:00+08:00")
    again = clocked.at("2026-11-02T10:01:00+08:00", "run", "-n", "m", *DAILY, "--date", "2026-10-28", *job)
    assert again.returncode == 0 and b"already ran" in again.stderr and b"--force" in again.stderr
    assert len(read()) == 1
    forced = clocked.at("2026-11-02T10:02:00+08:00", "run", "-n", "m", *DAILY, "--date", "2026-10-28",
                        "--force", *job)
    assert forced.returncode == 0 and len(read()) == 2 and read()[1]["attempt"] == "2"


def test_manual_run_by_timestamp_and_key_template(clocked, seen):
    job, read = seen
    proc = clocked.at("2026-11-02T10:00:00+08:00", "run", "-n", "k", "--schedule", "0 */6 * * *", "--tz",
                      SHANGHAI, "--key", "%Y-%m-%d", "--at", "2026-10-28T12:00", *job)
    assert proc.returncode == 0, proc.stderr
    (run,) = read()
    assert run["run_key"] == "2026-10-28" and run["scheduled_at"] == "2026-10-28T12:00:00+08:00"
    # a daily key: another slot of the same day is the same run
    again = clocked.at("2026-11-02T10:00:00+08:00", "run", "-n", "k", "--schedule", "0 */6 * * *", "--tz",
                       SHANGHAI, "--key", "%Y-%m-%d", "--at", "2026-10-28T18:00", *job)
    assert again.returncode == 0 and len(read()) == 1


def test_status_shows_a_late_job(clocked, seen):
    job, _ = seen
    clocked.at("2026-10-26T01:30:04+08:00", "run", "-n", "late", *DAILY, *job)
    (job_status,) = json.loads(clocked.at("2026-10-28T09:00:00+08:00", "status", "--json").stdout)
    assert job_status["health"] == "critical" and job_status["missed"] == 2
    assert job_status["late"] == 2  # no firing has recorded them yet
    assert job_status["schedule"] == "30 1 * * *" and job_status["tz"] == SHANGHAI
    table = clocked.at("2026-10-28T09:00:00+08:00", "status").stdout.decode()
    assert "late" in table


@pytest.mark.parametrize("args, words", [
    (["--schedule", "61 * * * *"], "bad minute"),
    (["--schedule", "* * * * * *"], "--schedule"),
    (["--schedule", "@reboot"], "@reboot"),
    (["--schedule", "@daily", "--tz", "Mars/Base"], "is not a time zone"),
    (["--schedule", "@daily", "--key", "constant"], "--key"),
    (["--schedule", "@daily", "--date", "2026-02-30"], "--date"),
    (["--schedule", "@daily", "--at", "yesterday"], "--at"),
    (["--date", "2026-10-28"], "pass --schedule"),  # no schedule recorded for the job yet
    (["--schedule", "@daily", "--catchup", "some"], "--catchup"),
    (["--schedule", "@daily", "--max-catchup", "-1"], "--max-catchup"),
])
def test_bad_schedules_are_125_before_anything_runs(cw, tmp_path, args, words):
    marker = tmp_path / "ran"
    proc = cw("run", "-n", "bad", *args, "--", "touch", str(marker))
    assert proc.returncode == 125, proc.stderr
    lines = proc.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and words in lines[0], lines
    assert not marker.exists()


def test_explain_json_and_warnings(cw):
    out = cw.json("explain", "0 0 1 * 1", "--tz", "UTC", "--from", "2026-01-01T00:00:00+00:00", "--count", "3", "--json")
    assert out["expression"] == "0 0 1 * 1" and out["tz"] == "UTC"
    assert out["next"] == ["2026-01-05T00:00:00+00:00", "2026-01-12T00:00:00+00:00", "2026-01-19T00:00:00+00:00"]
    assert any("OR" in w for w in out["warnings"])
    dst = cw.json("explain", "30 2 * * *", "--tz", "Europe/Berlin", "--from", "2026-03-01", "--json")
    assert any("2026-03-29" in w for w in dst["warnings"])
    assert cw("explain", "0 0 31 2 *").returncode == 125  # February 31st never comes


def test_explain_rejects_bad_input_with_125(cw):
    for args in (["61 * * * *"], ["@daily", "--tz", "Nowhere/City"], ["@daily", "--from", "soon"]):
        proc = cw("explain", *args)
        assert proc.returncode == 125 and len(proc.stderr.decode().strip().splitlines()) == 1, proc.stderr


def test_health_recovers_after_a_good_run_while_the_missed_slots_stay_counted(clocked):
    """Issue 22 §5: one missed minute must not keep a minutely job critical for the whole
    --since window. Late slots (passed with nobody firing) are critical now; slots recorded
    missed, then followed by a good run, are counted in status, --check's perfdata and JSON."""
    every = ["run", "-n", "tick", "--schedule", "* * * * *", "--tz", "UTC", "--", "true"]
    assert clocked.at("2026-11-02T10:00:02+00:00", *every).returncode == 0
    # the host was down from 10:01: at 10:04:30 three slots are late (10:04 has 90 s of grace)
    (late,) = json.loads(clocked.at("2026-11-02T10:04:30+00:00", "status", "--json").stdout)
    assert (late["health"], late["late"]) == ("critical", 3)
    check = clocked.at("2026-11-02T10:04:30+00:00", "status", "--check", "tick")
    assert check.returncode == 2 and b"tick late 3 slots" in check.stdout
    # 10:05's firing records 10:01-10:04 missed and runs its own slot: ok again, 4 counted
    assert clocked.at("2026-11-02T10:05:01+00:00", *every).returncode == 0
    (now,) = json.loads(clocked.at("2026-11-02T10:05:20+00:00", "status", "--json").stdout)
    assert (now["health"], now["missed"], now["late"], now["counts"]["missed"]) == (
        "ok", 4, 0, 4)
    assert now["why"] == "last run succeeded (4 missed slots in the window)"
    check = clocked.at("2026-11-02T10:05:20+00:00", "status", "--check", "tick")
    assert check.returncode == 0 and b"'tick_missed'=4;;;0;" in check.stdout
    # a failing run is critical at once, whatever came before
    failing = [*every[:-1], "false"]
    assert clocked.at("2026-11-02T10:06:01+00:00", *failing).returncode == 1
    (bad,) = json.loads(clocked.at("2026-11-02T10:06:20+00:00", "status", "--json").stdout)
    assert (bad["health"], bad["why"]) == ("critical", "last run failed")


def test_a_dead_runners_slot_is_run_again_by_the_next_firing(clocked, seen, tmp_path):
    """Issue 22 §2: kill -9 a wrapper mid-job; its row becomes abandoned once the lease ends,
    status says critical, and the job's next firing re-runs that slot first (trigger
    takeover, its own time, attempt 2), whatever --catchup says, then its own."""
    import signal
    import time

    from tests.acceptance.conftest import same_minute, wait_for
    from tests.conftest import job_holder

    job, read = seen
    every = ["-n", "t", "--schedule", "* * * * *", "--tz", "UTC", "--lease", "2"]
    same_minute(25)
    slot = datetime.fromtimestamp(int(time.time()) // 60 * 60).astimezone()
    ready = tmp_path / "ready"
    first = clocked.popen("run", *every, "--", "sh", "-c", f"touch {ready}; exec sleep 60")
    wait_for(ready.exists, what="the first runner's job")
    # job_holder, not lock_holder: the job says it is ready a moment before its wrapper names
    # it in the holder record, and os.killpg(0) would kill this test's own process group: the
    # whole suite (seen twice as a run that stopped at 79% without a word).
    wrapper, _, job_pid, _ = job_holder(clocked.home, "t")
    os.kill(wrapper, signal.SIGKILL)
    try:
        os.killpg(job_pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # the keeper, seeing its wrapper gone, ended the job first
    first.wait(10)

    def abandoned() -> dict | None:
        (status,) = json.loads(clocked("status", "--json").stdout)
        return status if status["health"] == "critical" else None

    status = wait_for(abandoned, timeout=15, what="the run abandoned")
    assert status["why"].endswith("abandoned (its runner is gone)")
    nxt = (slot + timedelta(minutes=1, seconds=1)).isoformat()
    proc = clocked.at(nxt, "run", *every, *job)
    assert proc.returncode == 0, proc.stderr
    runs = read()
    assert [(r["trigger"], r["attempt"]) for r in runs] == [("takeover", "2"), ("schedule", "1")]
    assert datetime.fromisoformat(runs[0]["scheduled_at"]) == slot
    assert datetime.fromisoformat(runs[1]["scheduled_at"]) == slot + timedelta(minutes=1)
    assert {r["status"] for r in history(clocked, "t")} == {"succeeded"}


def test_a_firing_on_time_in_the_system_zone_names_cron_tz_as_the_likely_cause(home, seen):
    """Debian's cron ignores CRON_TZ and fires the line's times in the system zone: cronwrap
    says so instead of blaming the host's clock."""
    from datetime import datetime
    from zoneinfo import ZoneInfo

    from cronwrap.schedule import system_zone_name

    system = system_zone_name() or "UTC"
    cron_tz = "Pacific/Chatham" if system == "Asia/Kolkata" else "Asia/Kolkata"
    clocked = Clocked(home)
    job, read = seen
    when = datetime(2026, 10, 28, 2, 0, 10, tzinfo=ZoneInfo(system)).isoformat()
    schedule = ["--schedule", "0 2 * * *"]
    proc = clocked.at(when, "run", "-n", "k", *schedule, *job, env={"CRON_TZ": cron_tz})
    assert proc.returncode == 0 and len(read()) == 1  # the most recent slot still runs
    said = proc.stderr.decode()
    assert f"it is on time for '0 2 * * *' in the system zone {system}, so this host's cron " \
           f"most likely ignores CRON_TZ={cron_tz}" in said
    assert f"remove CRON_TZ and give the times in {system}, or pass --tz {system}" in said
    assert "check this host's clock" not in said
    # The same firing with --tz is the clock's or the line's fault, as before.
    other = clocked.at(when, "run", "-n", "t", *schedule, "--tz", cron_tz, *job)
    assert b"check this host's clock" in other.stderr and b"CRON_TZ" not in other.stderr
