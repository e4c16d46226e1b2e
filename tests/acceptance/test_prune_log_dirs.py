"""``cronwrap prune`` in a job's own ``--log-dir``: the directory its firings recorded in the
ledger, or the one this host configured (CRONWRAP_LOG_DIR, log-dir in the config file).

A shared ledger is written by anyone who can write to it, so a recorded directory is trusted
only as cronwrap trusts a directory it uses itself, and only cronwrap's own file names in it
are ever removed."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from tests.acceptance.conftest import same_minute
from tests.acceptance.test_security import any_db  # noqa: F401 (the fixture: SQLite, PostgreSQL)

OLD = time.time() - 100 * 86400  # past --older-than 90d


def age(*paths: Path) -> None:
    for path in paths:
        os.utime(path, (OLD, OLD), follow_symlinks=False)


def run_twice(cw, name: str, logs: Path) -> tuple[Path, Path]:
    """Two attempts of one slot, each with its captured output: NAME/1.1.log, NAME/1.2.log."""
    same_minute()  # one slot: the second attempt is run 1 again
    for _ in range(2):
        cw("run", "-n", name, "--force", "--log-dir", str(logs), "--", "echo", "out", check_rc=0)
    first, second = logs / name / "1.1.log", logs / name / "1.2.log"
    assert first.exists() and second.exists()
    return first, second


def prune(cw, env: dict[str, str] | None = None) -> bytes:
    return cw("prune", "--older-than", "90d", env=env, check_rc=0).stdout


def test_old_output_in_the_recorded_log_dir_is_pruned_new_output_stays(cw, tmp_path, any_db):
    logs = tmp_path / "applogs"
    old, new = run_twice(cw, "j", logs)
    rotated_old, rotated_new = logs / "events.jsonl.1", logs / "events.jsonl.2"
    rotated_old.write_text("{}\n")
    rotated_new.write_text("{}\n")
    age(old, rotated_old, logs / "events.jsonl")
    assert b"removed 0 runs and 1 log files" in prune(cw)
    assert not old.exists() and not rotated_old.exists()
    assert new.exists() and rotated_new.exists() and (logs / "events.jsonl").exists()


def test_a_pruned_rows_output_in_the_recorded_log_dir_goes_whatever_its_age(cw, home, tmp_path):
    logs = tmp_path / "applogs"
    first, second = run_twice(cw, "j", logs)
    cw("run", "-n", "k", "--log-dir", str(logs), "--", "echo", "other", check_rc=0)
    (other,) = (logs / "k").glob("*.log")
    db = sqlite3.connect(home / "ledger.db")
    with db:  # the run of j is 200 days old in the ledger; its file was just written
        db.execute("UPDATE runs SET created_at = created_at - 17280000, "
                   "finished_at = finished_at - 17280000, started_at = started_at - 17280000, "
                   "scheduled_at = scheduled_at - 17280000 WHERE job = 'j'")
    assert b"removed 1 runs and 1 log files" in prune(cw)
    assert not second.exists()  # the row names the last attempt's output
    assert first.exists() and other.exists()  # no row of theirs was removed


@pytest.mark.parametrize("how", ["CRONWRAP_LOG_DIR", "[jobs.j]", "[defaults]"])
def test_the_log_dir_this_host_configured_is_pruned(cw, home, tmp_path, how):
    """A job whose firings recorded no log dir (an older release) but that this host
    configures one for."""
    logs = tmp_path / "applogs"
    old, new = run_twice(cw, "j", logs)
    db = sqlite3.connect(home / "ledger.db")
    with db:
        db.execute("UPDATE jobs SET settings = NULL")
    age(old)
    assert b"and 0 log files" in prune(cw) and old.exists()
    if how == "CRONWRAP_LOG_DIR":
        env = {how: str(logs)}
    else:
        config = tmp_path / "config.toml"
        config.write_text(f'{how}\nlog-dir = "{logs}"\n')
        os.chmod(config, 0o600)
        env = {"CRONWRAP_CONFIG": str(config)}
    assert b"and 1 log files" in prune(cw, env)
    assert not old.exists() and new.exists()


def _group_writable(logs: Path) -> Path:
    logs.chmod(0o770)
    return logs


def _a_symlink(logs: Path) -> Path:
    real = logs.with_name("real")
    logs.rename(real)
    logs.symlink_to(real)
    return real


def _another_users(logs: Path) -> Path:
    if os.geteuid() != 0:
        pytest.skip("needs root to give a directory away")
    os.chown(logs, 65534, 65534)
    return logs


def _job_dir_group_writable(logs: Path) -> Path:
    (logs / "j").chmod(0o770)
    return logs


def _job_dir_a_symlink(logs: Path) -> Path:
    real = logs.with_name("real")
    real.mkdir(mode=0o700)
    (logs / "j").rename(real / "j")
    (logs / "j").symlink_to(real / "j")
    return real


@pytest.mark.parametrize("tamper", [_group_writable, _a_symlink, _another_users,
                                    _job_dir_group_writable, _job_dir_a_symlink])
def test_an_untrusted_log_dir_is_left_alone(cw, tmp_path, tamper):
    """What the ledger recorded as the job's log dir, or the job's directory in it, is not a
    directory cronwrap would use itself: nothing in it is removed."""
    logs = tmp_path / "applogs"
    run_twice(cw, "j", logs)
    names = [p.relative_to(logs) for p in logs.rglob("*.log")]
    holder = tamper(logs)
    files = [holder / name for name in names]
    age(*files)
    assert b"and 0 log files" in prune(cw)
    assert all(p.exists() for p in files), files


def test_only_cronwrap_s_own_names_of_known_jobs_are_removed(cw, tmp_path):
    logs = tmp_path / "applogs"
    old, _ = run_twice(cw, "j", logs)
    outside = tmp_path / "outside.log"
    outside.write_text("keep")
    kept = [logs / "j" / name for name in ("notes.log", "1.1.log.gz", "x.1.log", "1.x.log",
                                           "1.1.txt", "1.1", ".1.1.log", "1..log", "١.1.log")]
    kept += [logs / "other" / "1.1.log",  # a subdirectory of no job
             logs / "events.jsonl", logs / "events.jsonl.old", logs / "events.jsonl.1.gz",
             logs / "app.log", outside]
    for path in kept:
        path.parent.mkdir(mode=0o700, exist_ok=True)
        path.write_text("keep")
    (logs / "j" / "3.1.log").symlink_to(outside)
    (logs / "events.jsonl.3").symlink_to(outside)
    (logs / "j" / "4.1.log").mkdir()
    age(old, *kept, logs / "j" / "3.1.log", logs / "events.jsonl.3", logs / "j" / "4.1.log")
    assert b"and 1 log files" in prune(cw)
    assert not old.exists()
    assert all(p.exists() for p in kept), [p for p in kept if not p.exists()]
    assert (logs / "j" / "3.1.log").is_symlink() and (logs / "events.jsonl.3").is_symlink()
    assert (logs / "j" / "4.1.log").is_dir()


def test_a_recorded_log_dir_that_is_not_absolute_or_not_json_is_ignored(cw, home, tmp_path):
    logs = tmp_path / "applogs"
    old, _ = run_twice(cw, "j", logs)
    age(old)
    db = sqlite3.connect(home / "ledger.db")
    # (text that is not JSON at all fails the ledger's own prune query: reported separately)
    for settings in [json.dumps({"log_dir": "applogs"}), json.dumps([str(logs)]),
                     json.dumps({"log_dir": [str(logs)]}), json.dumps({"log_dir": f"{logs}\0"})]:
        with db:
            db.execute("UPDATE jobs SET settings = ?", (settings,))
        assert b"and 0 log files" in cw("prune", "--older-than", "90d", check_rc=0).stdout
        assert old.exists()


# ---- --keep-logs after each run: the job's directory is looked through only when due -------


def test_keep_logs_looks_through_a_job_s_files_only_once_its_oldest_is_due(cw, tmp_path):
    """After a firing, NAME/.oldest carries the date of the oldest file it kept; while that is
    within --keep-logs (plus 1%), the next firings read no file of the directory. A file
    planted with an old date waits for the marker; once the marker is due, it goes."""
    logs = tmp_path / "applogs"
    first, second = run_twice(cw, "j", logs)
    mark = logs / "j" / ".oldest"
    assert mark.is_file() and not mark.is_symlink()
    assert abs(mark.stat().st_mtime - first.stat().st_mtime) < 1  # the oldest one kept
    planted = logs / "j" / "7.1.log"
    planted.write_text("old\n")
    age(planted)
    cw("run", "-n", "j", "--force", "--keep-logs", "90d", "--log-dir", str(logs), "--", "true",
       check_rc=0)
    assert planted.exists()  # not looked for: the marker said nothing was due
    os.utime(mark, (OLD + 3600, OLD + 3600))  # as if 7.1.log had been there all along
    cw("run", "-n", "j", "--force", "--keep-logs", "90d", "--log-dir", str(logs), "--", "true",
       check_rc=0)
    assert not planted.exists() and first.exists() and second.exists()
    assert abs(mark.stat().st_mtime - first.stat().st_mtime) < 1


def test_keep_logs_never_dates_a_file_through_a_planted_marker_symlink(cw, tmp_path):
    """A marker that is not a regular file is no marker: it is left alone, and each firing
    looks through the directory as if there were none."""
    logs = tmp_path / "applogs"
    old, new = run_twice(cw, "j", logs)
    target = tmp_path / "precious"
    target.write_text("keep my date\n")
    age(target)
    mark = logs / "j" / ".oldest"
    mark.unlink()
    mark.symlink_to(target)
    age(old)
    cw("run", "-n", "j", "--force", "--keep-logs", "1d", "--log-dir", str(logs), "--", "true",
       check_rc=0)
    assert target.read_text() == "keep my date\n" and abs(target.stat().st_mtime - OLD) < 1
    assert mark.is_symlink() and not old.exists() and new.exists()


def test_keep_logs_removes_nothing_through_a_job_directory_planted_as_a_symlink(cw, tmp_path):
    """The capture refuses a job directory that is a symlink; the tidy-up after the run then
    leaves it alone too: an old file of cronwrap's name in its target stays, no marker."""
    logs = tmp_path / "applogs"
    run_twice(cw, "j", logs)
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    victim = target / "1.1.log"
    victim.write_text("not cronwrap's\n")
    age(victim)
    shutil.rmtree(logs / "j")
    (logs / "j").symlink_to(target)
    cw("run", "-n", "j", "--force", "--keep-logs", "1d", "--log-dir", str(logs), "--", "true")
    assert victim.read_text() == "not cronwrap's\n" and not (target / ".oldest").exists()
