"""What a run's end is recorded as (issue 16 §2, §3), through the installed executable:
--success-exit, --warning-exit and the `warning` status, --on-warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def events(home: Path) -> list[dict]:
    return [json.loads(l) for l in (home / "logs" / "events.jsonl").read_text().splitlines()]


def last_run(cw, name: str) -> dict:
    return cw.json("history", name, "--json")[0]


def health(cw, name: str) -> str:
    return cw.json("status", name, "--json")[0]["health"]


def test_an_exit_status_of_success_exit_is_succeeded_and_healthy(cw):
    proc = cw("run", "-n", "sync", "--success-exit", "0,24", "--", "sh", "-c", "exit 24")
    assert proc.returncode == 24  # cron's view of the line is unchanged
    run = last_run(cw, "sync")
    assert (run["status"], run["exit_code"]) == ("succeeded", 24)
    assert health(cw, "sync") == "ok"
    assert cw("status", "sync", "--check").returncode == 0
    # without it, 24 is a failure
    cw("run", "-n", "plain", "--", "sh", "-c", "exit 24")
    assert last_run(cw, "plain")["status"] == "failed" and health(cw, "plain") == "critical"


def test_a_warning_exit_is_a_warning_that_runs_on_warning_only(cw, tmp_path):
    seen = tmp_path / "hooks"
    proc = cw("run", "-n", "grep", "--schedule", "@daily", "--at", "2026-03-01T00:00",
              "--warning-exit", "1", "--retries", "2", "--retry-on", "1",
              "--on-warning", f"echo warning $CRONWRAP_STATUS $CRONWRAP_EXIT_CODE >> {seen}",
              "--on-failure", f"echo failure >> {seen}", "--on-success", f"echo success >> {seen}",
              "--", "sh", "-c", "echo no match; exit 1")
    assert proc.returncode == 1
    run = last_run(cw, "grep")
    assert (run["status"], run["exit_code"], run["attempt"]) == ("warning", 1, 1)  # no retry
    assert seen.read_text().splitlines() == ["warning warning 1"]
    hook = [e for e in events(cw.home) if e["event"] == "hook"]
    assert [h["hook"] for h in hook] == ["on-warning"]
    assert health(cw, "grep") == "warning"
    check = cw("status", "grep", "--check")
    assert check.returncode == 1 and check.stdout.startswith(b"CRONWRAP WARNING")
    assert b"warning (exit 1)" in check.stdout
    picture = cw("history", "grep").stdout.decode()
    assert "! 1 warning (exit 1)" in picture
    prom = cw("status", "--format", "prometheus").stdout.decode()
    assert 'cronwrap_last_run_status{cronjob="grep",status="warning"} 1' in prom
    assert 'cronwrap_health{cronjob="grep"} 1' in prom
    # the slot is done: the same slot by hand again is a duplicate without --force
    again = cw("run", "-n", "grep", "--schedule", "@daily", "--at", "2026-03-01T00:00",
               "--warning-exit", "1", "--", "sh", "-c", "exit 0")
    assert again.returncode == 0 and b"already ran" in again.stderr
    assert len(cw.json("history", "grep", "--json")) == 1
    forced = cw("run", "-n", "grep", "--schedule", "@daily", "--at", "2026-03-01T00:00",
                "--force", "--", "true")
    assert forced.returncode == 0 and last_run(cw, "grep")["status"] == "succeeded"


def test_a_warning_is_not_retried_nor_caught_up_and_a_range_goes_on(cw):
    proc = cw("run", "-n", "r", "--schedule", "@daily", "--date", "2026-03-01..2026-03-03",
              "--warning-exit", "3", "--", "sh", "-c", "exit 3")
    assert proc.returncode == 3
    runs = cw.json("history", "r", "--json")
    assert [r["status"] for r in runs] == ["warning"] * 3  # a warning does not stop a range


@pytest.mark.parametrize("args, words", [
    (("--warning-exit", "0"), b"0 is also a success"),
    (("--success-exit", "24", "--warning-exit", "20-30"), b"24 is also a success"),
    (("--success-exit", "256"), b"--success-exit: '256' is not an exit status"),
    (("--warning-exit", "3-1"), b"--warning-exit: '3-1' is not an exit status"),
])
def test_exit_sets_are_checked(cw, args, words):
    proc = cw("run", "-n", "x", *args, "--", "true")
    assert proc.returncode == 125 and words in proc.stderr
    assert len(proc.stderr.splitlines()) == 1
    assert not (cw.home / "ledger.db").exists() and not (cw.home / "logs").exists()


# -- §3: a run that ends too fast, a run that is slow -------------------------------------------

def test_a_success_faster_than_min_duration_is_a_too_fast_warning(cw, tmp_path):
    seen = tmp_path / "hook"
    proc = cw("run", "-n", "backup", "--min-duration", "5s",
              "--on-warning", f"echo $CRONWRAP_STATUS $CRONWRAP_REASON > {seen}", "--", "true")
    assert proc.returncode == 0
    run = last_run(cw, "backup")
    assert (run["status"], run["skip_reason"], run["exit_code"]) == ("warning", "too_fast", 0)
    assert seen.read_text().split() == ["warning", "too_fast"]
    finish = [e for e in events(cw.home) if e["event"] == "finish"][-1]
    assert (finish["status"], finish["skip_reason"]) == ("warning", "too_fast")
    note = [e for e in events(cw.home) if e["event"] == "warning"][-1]
    assert "less than --min-duration 5" in note["message"]
    assert health(cw, "backup") == "warning"
    table = cw("status").stdout.decode()
    assert "warning (too_fast)" in table and "last run warning (too_fast)" in table
    check = cw("status", "--check")
    assert check.returncode == 1 and b"backup last run warning (too_fast)" in check.stdout


def test_min_duration_applies_to_success_codes_only(cw):
    cw("run", "-n", "f", "--min-duration", "5s", "--success-exit", "24", "--", "sh", "-c",
       "exit 24")
    assert (last_run(cw, "f")["status"], last_run(cw, "f")["skip_reason"]) == \
        ("warning", "too_fast")  # 24 is a success: too fast applies after --success-exit
    cw("run", "-n", "g", "--min-duration", "5s", "--", "false")
    assert last_run(cw, "g")["status"] == "failed"
    cw("run", "-n", "h", "--min-duration", "5s", "--warning-exit", "3", "--", "sh", "-c", "exit 3")
    assert (last_run(cw, "h")["status"], last_run(cw, "h")["skip_reason"]) == ("warning", None)


def test_a_run_slower_than_slow_factor_times_its_usual_p95_is_flagged_slow(cw):
    def day(n: int, *command: str) -> None:
        cw("run", "-n", "etl", "--schedule", "@daily", "--at", f"2026-04-{n:02d}T00:00",
           "--slow-factor", "3", "--", *command, check_rc=0)

    for n in range(1, 6):
        day(n, "true")
    assert health(cw, "etl") == "ok"
    day(6, "sleep", "0.6")
    assert health(cw, "etl") == "warning"
    check = cw("status", "etl", "--check")
    assert check.returncode == 1 and b"etl slow: took" in check.stdout
    assert b"more than 3x its usual p95" in check.stdout
    day(7, "true")  # the next run is usual again
    assert health(cw, "etl") == "ok"


def test_without_slow_factor_a_slow_run_is_not_flagged(cw):
    for n in range(1, 6):
        cw("run", "-n", "etl", "--schedule", "@daily", "--at", f"2026-04-{n:02d}T00:00", "--",
           "true", check_rc=0)
    cw("run", "-n", "etl", "--schedule", "@daily", "--at", "2026-04-06T00:00", "--",
       "sleep", "0.6", check_rc=0)
    assert health(cw, "etl") == "ok"


@pytest.mark.parametrize("args, words", [
    (("--min-duration", "soon"), b"--min-duration"),
    (("--slow-factor", "0.5"), b"--slow-factor: '0.5' is not a factor of at least 1"),
    (("--slow-factor", "nan"), b"--slow-factor: 'nan' is not a factor"),
])
def test_outcome_values_are_checked(cw, args, words):
    proc = cw("run", "-n", "x", *args, "--", "true")
    assert proc.returncode == 125 and words in proc.stderr and len(proc.stderr.splitlines()) == 1


def test_a_warning_slot_is_done_on_postgresql_too(cw, pg_dsn):
    """cronwrap_claim() (since schema version 4): the server-side claim knows a warning is done."""
    args = ("-n", "w", "--schedule", "@daily", "--at", "2026-05-01T00:00", "--db", pg_dsn)
    assert cw("run", *args, "--warning-exit", "1", "--", "sh", "-c", "exit 1").returncode == 1
    again = cw("run", *args, "--max-attempts", "3", "--", "true")
    assert again.returncode == 0 and b"already ran" in again.stderr
    runs = cw.json("history", "w", "--json", "--db", pg_dsn)
    assert [(r["status"], r["attempt"]) for r in runs] == [("warning", 1)]
    assert cw.json("status", "w", "--json", "--db", pg_dsn)[0]["health"] == "warning"
