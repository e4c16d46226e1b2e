"""Issue 22 §7, end to end: what a person types, and what it means. The installed executable on
the embedded SQLite ledger: retries without --retry-on, a manual run's retries, durations
that say their unit, a slot in the future, and the read commands' one-line refusals."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from tests.acceptance.test_hardening_input import refused


def events(home: Path, kind: str) -> list[dict]:
    path = home / "logs" / "events.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [e for e in map(json.loads, lines) if e["event"] == kind]


def attempts(cw, job: str) -> list[int]:
    return [run["attempt"] for run in cw.json("history", job, "--json")]


def days_ago(days: int) -> str:
    return (datetime.now(timezone.utc) - timedelta(days=days)).strftime("%Y-%m-%d")


# -- --retries without --retry-on ----------------------------------------------------------------

def test_retries_without_retry_on_retry_an_ordinary_failure(cw, home, tmp_path):
    tries = tmp_path / "tries"
    proc = cw("run", "-n", "r", "--retries", "2", "--retry-delay", "0", "--",
              "sh", "-c", f'echo "$CRONWRAP_ATTEMPT" >> {tries}; exit 1')
    assert proc.returncode == 1, proc.stderr
    assert tries.read_text().split() == ["1", "2", "3"]
    assert attempts(cw, "r") == [3]
    assert len(events(home, "retry")) == 2


@pytest.mark.parametrize("expected", [126, 127])
def test_a_command_that_cannot_run_is_not_retried(cw, home, tmp_path, expected):
    command = tmp_path / "not-executable"
    command.write_text("#!/bin/sh\nexit 0\n")  # mode 0644: found, but cannot run (126)
    target = str(command) if expected == 126 else str(tmp_path / "no-such-command")
    proc = cw("run", "-n", "x", "--retries", "3", "--retry-delay", "0", "--", target)
    assert proc.returncode == expected, proc.stderr
    assert attempts(cw, "x") == [1] and events(home, "retry") == []


def test_retry_on_narrows_retries_to_its_statuses(cw, home):
    proc = cw("run", "-n", "n", "--retries", "2", "--retry-on", "75", "--retry-delay", "0", "--",
              "sh", "-c", "exit 1")
    assert proc.returncode == 1 and attempts(cw, "n") == [1]
    proc = cw("run", "-n", "t", "--retries", "1", "--retry-on", "75", "--retry-delay", "0", "--",
              "sh", "-c", "exit 75")
    assert proc.returncode == 75 and attempts(cw, "t") == [2]


def test_help_says_what_retries_retry(cw):
    help_text = " ".join(cw("run", "--help", check_rc=0).stdout.decode().split())
    assert "but exit 126 and 127 (the command cannot run)" in help_text
    assert "Default: every failure and timeout but 126 and 127" in help_text


# -- a manual run honours --retries ------------------------------------------------------------

def test_a_manual_run_retries_within_the_schedules_interval_from_its_start(cw, home, tmp_path):
    tries = tmp_path / "tries"
    proc = cw("run", "-n", "m", "--schedule", "0 1 * * *", "--tz", "UTC",
              "--at", f"{days_ago(30)}T01:00", "--retries", "2", "--retry-on", "1",
              "--retry-delay", "0", "--", "sh", "-c", f'echo "$CRONWRAP_TRIGGER" >> {tries}; exit 1')
    assert proc.returncode == 1, proc.stderr
    assert tries.read_text().split() == ["manual"] * 3
    assert attempts(cw, "m") == [3]
    assert events(home, "retry_skipped") == []


def test_a_manual_run_says_why_it_does_not_retry(cw, home, tmp_path):
    """A minutely schedule leaves a manual run one minute: an attempt of up to --timeout 90
    cannot fit in it."""
    proc = cw("run", "-n", "m", "--schedule", "* * * * *", "--tz", "UTC",
              "--at", f"{days_ago(3)}T01:00", "--retries", "2", "--retry-delay", "0",
              "--timeout", "90", "--", "sh", "-c", "exit 1")
    assert proc.returncode == 1 and attempts(cw, "m") == [1]
    err = proc.stderr.decode()
    assert "m: slot " in err and "failed (attempt 1, exit 1); no retry: it would end more than " \
        "the schedule's interval after this manual run began (by " in err, err
    (skipped,) = events(home, "retry_skipped")
    assert skipped["trigger"] == "manual" and skipped["deadline"]
    assert skipped["reason"] == "would end more than the schedule's interval after this manual run began"


# -- durations ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "hint"), [("1h30", "did you mean 1h30m?"),
                                             ("2d12", "did you mean 2d12h?")])
def test_a_bare_number_after_a_unit_is_refused_with_a_hint(cw, tmp_path, value, hint):
    marker = tmp_path / "ran"
    err = refused(cw("run", "-n", "d", "--timeout", value, "--", "touch", str(marker)), marker)
    assert err == f"cronwrap: --timeout: '{value}': the number after {value[:2]} has no unit; " \
                  f"give each part its own ({hint})\n"


def test_timeout_keeps_gnu_bare_seconds(cw):
    assert cw("run", "-n", "d", "--timeout", "90", "--kill-after", "5", "--", "true").returncode == 0


@pytest.mark.parametrize("option", ["--catchup-window", "--keep-logs"])
def test_run_windows_need_a_unit(cw, tmp_path, option):
    marker = tmp_path / "ran"
    err = refused(cw("run", "-n", "w", option, "26", "--", "touch", str(marker)), marker)
    assert err == f"cronwrap: {option}: '26' needs a unit: 26s, 26m, 26h or 26d (a bare number " \
                  "here would be seconds)\n"
    env = {"CRONWRAP_" + option[2:].upper().replace("-", "_"): "26"}
    assert "needs a unit" in refused(cw("run", "-n", "w", "--", "touch", str(marker), env=env),
                                     marker)
    assert cw("run", "-n", "w", option, "26h", "--", "touch", str(marker)).returncode == 0


def test_a_window_in_the_config_file_needs_a_unit(cw, tmp_path):
    config = tmp_path / "config.toml"
    config.write_text("[defaults]\ncatchup-window = 3600\n")
    config.chmod(0o600)
    marker = tmp_path / "ran"
    err = refused(cw("run", "-n", "w", "--", "touch", str(marker),
                     env={"CRONWRAP_CONFIG": str(config)}), marker)
    assert f"{config}:2: [defaults] catchup-window: '3600' needs a unit" in err


@pytest.mark.parametrize("args", [("status", "--max-age", "26"), ("status", "--since", "7"),
                                  ("status", "--warn-duration", "2"),
                                  ("prune", "--older-than", "90")])
def test_read_windows_need_a_unit(cw, args):
    err = refused(cw(*args))
    assert f"{args[1]}: '{args[2]}' needs a unit: {args[2]}s, {args[2]}m" in err


def test_a_check_with_a_bare_max_age_is_unknown(cw):
    proc = cw("status", "--check", "--max-age", "26")
    assert proc.returncode == 3
    assert proc.stdout.startswith(b"CRONWRAP UNKNOWN - --max-age: '26' needs a unit")


def test_windows_with_units_and_zero_still_work(cw):
    cw("run", "-n", "ok", "--", "true", check_rc=0)
    cw("status", "--since", "30d", "--max-age", "26h", "--warn-duration", "2h", check_rc=0)
    assert cw("status", "--check", "--max-age", "26h").returncode == 0
    cw("prune", "--older-than", "90d", check_rc=0)
    cw("prune", "--older-than", "0", "--keep-last", "5", check_rc=0)


# -- a slot in the future ----------------------------------------------------------------------

def test_a_slot_in_the_future_is_refused_unless_forced(cw, tmp_path):
    marker = tmp_path / "ran"
    future = f"{datetime.now(timezone.utc).year + 1}-01-05"
    line = ("run", "-n", "settle", "--schedule", "30 1 * * *", "--tz", "UTC", "--date", future)
    err = refused(cw(*line, "--", "touch", str(marker)), marker)
    assert err == (f"cronwrap: --date {future}: the slot {future}T01:30:00+00:00 is in the "
                   "future; check the date (add --force to run it now and use it up)\n")
    assert "is in the future" in refused(cw(*line[:-1], f"{days_ago(2)}..{future}", "--",
                                            "touch", str(marker)), marker)
    cw(*line, "--force", "--", "touch", str(marker), check_rc=0)
    assert marker.exists()


def test_an_at_later_than_now_is_refused(cw, tmp_path):
    marker = tmp_path / "ran"
    later = (datetime.now(timezone.utc) + timedelta(hours=2)).strftime("%Y-%m-%dT%H:00")
    err = refused(cw("run", "-n", "h", "--schedule", "0 * * * *", "--tz", "UTC", "--at", later,
                     "--", "touch", str(marker)), marker)
    assert f"--at {later}: the slot " in err and "is in the future" in err


# -- the read commands, --log-dir, --key -------------------------------------------------------

def test_history_of_an_unknown_job_is_one_line_and_125(cw):
    for args in (("history", "nosuchjob"), ("history", "nosuchjob", "--json")):
        assert refused(cw(*args)) == ("cronwrap: nosuchjob: no such job in this ledger (check "
                                      "the name with cronwrap status)\n")
    assert refused(cw("logs", "nosuchjob")).startswith("cronwrap: nosuchjob: ")
    cw("run", "-n", "known", "--", "true", check_rc=0)
    assert len(cw.json("history", "known", "--json")) == 1


def test_status_json_with_format_prometheus_is_a_conflict(cw):
    assert refused(cw("status", "--json", "--format", "prometheus")) == (
        "cronwrap: --json and --format prometheus ask for two formats: give one (--json is "
        "--format json)\n")
    cw("status", "--json", "--format", "json", check_rc=0)


def test_a_relative_log_dir_is_refused_on_the_command_line_and_in_the_environment(cw, tmp_path):
    marker = tmp_path / "ran"
    err = refused(cw("run", "-n", "l", "--log-dir", "logs", "--", "touch", str(marker)), marker)
    assert err == "cronwrap: --log-dir: 'logs' is a relative path; give an absolute one (or ~/…)\n"
    err = refused(cw("run", "-n", "l", "--", "touch", str(marker),
                     env={"CRONWRAP_LOG_DIR": "logs"}), marker)
    assert err.startswith("cronwrap: CRONWRAP_LOG_DIR: 'logs' is a relative path")
    cw("run", "-n", "l", "--log-dir", str(tmp_path / "logs"), "--", "true", check_rc=0)


def test_crontab_escaping_in_key_warns_and_still_runs(cw, tmp_path):
    marker = tmp_path / "ran"
    proc = cw("run", "-n", "k", "--schedule", "* * * * *", "--key", r"\%Y-\%m-\%d", "--",
              "touch", str(marker))
    assert proc.returncode == 0 and marker.exists()
    assert proc.stderr.decode() == (
        r"cronwrap: --key '\%Y-\%m-\%d': '\%' is how a crontab line writes '%'; in a shell or "
        "the config file write '%' (these run keys will hold a backslash)\n")
    (run,) = cw.json("history", "k", "--json")
    assert run["run_key"].startswith("\\")
    quiet = cw("run", "-n", "k2", "--schedule", "* * * * *", "--key", "%Y-%m-%d", "--", "true")
    assert quiet.returncode == 0 and quiet.stderr == b""
