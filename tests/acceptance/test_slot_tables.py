"""The slot tables of scheduled firings (run/tables.py, schedule/table.py), end to end: the
real executable at clock times set from outside (libfaketime), as cron starts it.

A firing that read its slots from the job's table must do exactly what one that loaded the
engine does; a table whose expression, zone settings or zone file changed must not be used;
and a file at the table's name that cronwrap did not write is neither believed nor written
through."""

from __future__ import annotations

import marshal
import os
import shutil
import stat

import pytest

from tests.acceptance.test_schedule import Clocked

BERLIN_DAILY = ["--schedule", "30 2 * * *", "--tz", "Europe/Berlin", "--key", "%Y-%m-%d %Z",
                "--catchup", "latest"]
# On a fall-back night (02:30 happens twice: the first), the days around it, a missed day
# (the 27th, run by the 28th's catch-up), and a day beyond the first table's stretch.
FIRINGS = ["2026-10-24T02:30:03+02:00", "2026-10-25T02:30:04+02:00", "2026-10-26T02:30:02+01:00",
           "2026-10-28T02:30:05+01:00", "2026-11-20T02:30:01+01:00"]
SEEN = ("run_key", "scheduled_at", "biz_date", "trigger")


@pytest.fixture
def clocked(home):
    return Clocked(home)


def job(tmp_path, name="seen"):
    """A job that appends what it saw (its slot) to a file; (argv, reader)."""
    out = tmp_path / f"{name}.txt"
    argv = ["--", "sh", "-c", 'echo "$CRONWRAP_RUN_KEY|$CRONWRAP_SCHEDULED_AT|'
            '$CRONWRAP_BIZ_DATE|$CRONWRAP_TRIGGER" >> "$0"', str(out)]

    def read() -> list[tuple[str, ...]]:
        return [tuple(line.split("|")) for line in out.read_text().splitlines()] \
            if out.exists() else []
    return argv, read


def table_of(home, name="daily"):
    path = home / "slots" / name
    key, sources, data = marshal.loads(path.read_bytes())
    return data


def test_firings_that_read_the_table_see_what_the_engine_gives(clocked, tmp_path):
    """The same firings twice: with the tables kept, and with the table removed before each
    firing (so each one loads the engine). The job sees the same slots either way."""
    argv, read = job(tmp_path, "kept")
    first = None
    for when in FIRINGS:
        proc = clocked.at(when, "run", "-n", "daily", *BERLIN_DAILY, *argv)
        assert proc.returncode == 0, proc.stderr
        first = first or table_of(clocked.home)
    slots = clocked.home / "slots"
    assert stat.S_IMODE(slots.stat().st_mode) == 0o700
    assert stat.S_IMODE((slots / "daily").stat().st_mode) == 0o600
    assert table_of(clocked.home)[4][0] > first[4][-1]  # made anew beyond the first stretch

    fresh = Clocked(tmp_path / "engine-home")
    argv2, read2 = job(tmp_path, "engine")
    for when in FIRINGS:
        shutil.rmtree(fresh.home / "slots", ignore_errors=True)
        assert fresh.at(when, "run", "-n", "daily", *BERLIN_DAILY, *argv2).returncode == 0
    assert read() == read2()
    assert read()[:5] == [
        ("2026-10-24 CEST", "2026-10-24T02:30:00+02:00", "2026-10-24", "schedule"),
        ("2026-10-25 CEST", "2026-10-25T02:30:00+02:00", "2026-10-25", "schedule"),
        ("2026-10-26 CET", "2026-10-26T02:30:00+01:00", "2026-10-26", "schedule"),
        ("2026-10-27 CET", "2026-10-27T02:30:00+01:00", "2026-10-27", "catchup"),
        ("2026-10-28 CET", "2026-10-28T02:30:00+01:00", "2026-10-28", "schedule")]


@pytest.mark.parametrize("change", ["--tz", "CRON_TZ", "TZ", "schedule"])
def test_a_table_is_not_used_for_another_zone_or_expression(clocked, tmp_path, change):
    argv, read = job(tmp_path)
    base = ["--schedule", "30 2 * * *", "--key", "%Y-%m-%d %Z"]
    zone = {"--tz": (["--tz", "Europe/Berlin"], {}), "CRON_TZ": ([], {"CRON_TZ": "Europe/Berlin"}),
            "TZ": ([], {"TZ": "Europe/Berlin"}), "schedule": (["--tz", "Europe/Berlin"], {})}
    options, env = zone[change]
    assert clocked.at("2026-10-24T02:30:03+02:00", "run", "-n", "daily", *base, *options, *argv,
                      env=env).returncode == 0
    assert (clocked.home / "slots" / "daily").exists()
    if change == "schedule":
        base, when = ["--schedule", "45 2 * * *", "--key", "%Y-%m-%d %Z"], \
            "2026-10-26T02:45:03+01:00"
        options = ["--tz", "Europe/Berlin"]
    else:
        options, env = ([], {change: "America/New_York"}) if change != "--tz" else \
            (["--tz", "America/New_York"], {})
        when = "2026-10-26T02:30:03-04:00"
    proc = clocked.at(when, "run", "-n", "daily", *base, *options, *argv, env=env)
    assert proc.returncode == 0, proc.stderr
    expected = ("2026-10-26 CET", "2026-10-26T02:45:00+01:00") if change == "schedule" else \
        ("2026-10-26 EDT", "2026-10-26T02:30:00-04:00")
    assert read()[-1][:2] == expected


def test_a_changed_zone_file_is_read_again(clocked, tmp_path):
    """The tz database updated under a kept table (here: PYTHONTZPATH's copy of a zone,
    replaced by another zone's rules) is read again by the next firing."""
    tzdir = tmp_path / "tz"
    (tzdir / "Test").mkdir(parents=True)
    shutil.copy("/usr/share/zoneinfo/Europe/Berlin", tzdir / "Test" / "Zone")
    env = {"PYTHONTZPATH": str(tzdir)}
    argv, read = job(tmp_path)
    daily = ["--schedule", "30 2 * * *", "--tz", "Test/Zone"]
    assert clocked.at("2026-10-24T02:30:03+02:00", "run", "-n", "daily", *daily, *argv,
                      env=env).returncode == 0
    assert (clocked.home / "slots" / "daily").exists()
    replacement = tzdir / "Test" / "Zone.new"
    shutil.copy("/usr/share/zoneinfo/America/New_York", replacement)
    os.replace(replacement, tzdir / "Test" / "Zone")
    proc = clocked.at("2026-10-26T02:30:03-04:00", "run", "-n", "daily", *daily, *argv, env=env)
    assert proc.returncode == 0, proc.stderr
    assert read()[-1][1] == "2026-10-26T02:30:00-04:00"


@pytest.mark.parametrize("planted", ["garbage", "symlink", "fifo", "directory", "foreign"])
def test_a_file_cronwrap_did_not_write_is_not_a_table(clocked, tmp_path, planted):
    argv, read = job(tmp_path)
    slots = clocked.home / "slots"
    slots.mkdir(parents=True, mode=0o700)
    clocked.home.chmod(0o700)
    target = tmp_path / "target"
    target.write_bytes(b"not a table")
    path = slots / "daily"
    if planted == "garbage":
        path.write_bytes(os.urandom(4000))
    elif planted == "symlink":
        path.symlink_to(target)
    elif planted == "fifo":
        os.mkfifo(path, 0o600)
    elif planted == "directory":
        path.mkdir()
    else:  # a valid table, but another user's
        assert clocked.at("2026-10-23T02:30:03+02:00", "run", "-n", "daily", *BERLIN_DAILY,
                          *argv).returncode == 0
        os.chown(path, 65534, 65534)
    proc = clocked.at("2026-10-24T02:30:03+02:00", "run", "-n", "daily", *BERLIN_DAILY, *argv)
    assert proc.returncode == 0, proc.stderr
    assert read()[-1][:2] == ("2026-10-24 CEST", "2026-10-24T02:30:00+02:00")
    assert target.read_bytes() == b"not a table"
    if planted != "directory":  # a directory at the name is left, and no table kept
        info = os.lstat(path)
        assert stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid()
        assert table_of(clocked.home)[0] == "30 2 * * *"


def test_a_manual_run_keeps_no_table(clocked, tmp_path):
    argv, read = job(tmp_path)
    proc = clocked.at("2026-10-24T12:00:00+02:00", "run", "-n", "daily", *BERLIN_DAILY,
                      "--date", "2026-10-23", *argv)
    assert proc.returncode == 0, proc.stderr
    assert read()[-1][:3] == ("2026-10-23 CEST", "2026-10-23T02:30:00+02:00", "2026-10-23")
    assert not (clocked.home / "slots").exists()
