"""Upgrades keep every row (issue 12 §3): the ledgers release 0.1.0 wrote, used by this code.

tests/fixtures/release-0.1.0 holds a SQLite ledger and a PostgreSQL dump written by that
release, and what its ``history NAME --json`` printed for each job. Through the installed
executable, on a copy of each: ``status`` and ``history`` show every old run as that release
did, without migrating anything; a ``run`` (or ``db init``) migrates the ledger to the newest
migration and records new runs beside the old ones. A ledger from a newer release is refused
by ``run`` with one line (exit 125), left exactly as it was, and still read by ``status``.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import psycopg
import pytest

from cronwrap import procs
from cronwrap.ledger import sql
from cronwrap.model import Status
from tests.conftest import REPO

FIXTURES = REPO / "tests" / "fixtures" / "release-0.1.0"
JOBS = ("nightly", 'report "q3"', "slow", "hard", "busy", "gone", "hourly", "over")
NEWER = 99  # the schema version of a ledger written by some later release
NIGHTLY = ("-n", "nightly", "--schedule", "30 1 * * *", "--tz", "Europe/Berlin", "--key",
           "%Y-%m-%d", "--date", "2026-10-30", "--", "true")


def newest(dialect: str) -> int:
    """The number of the dialect's last migration: the schema version this code writes."""
    return max(int(name.rpartition("_")[2]) for name in sql.load(dialect)
               if name.startswith("migration_"))


def released(backend: str) -> dict[str, list[dict]]:
    """What release 0.1.0's ``history NAME --json`` printed, by job, newest first."""
    runs = json.loads((FIXTURES / f"{backend}-history.json").read_text(encoding="utf-8"))
    return {job: [r for r in runs if r["job"] == job] for job in JOBS}


def assert_reads_as_released(row: dict, old: dict) -> None:
    """Every field as the release showed it. A row that was running then shows abandoned now
    (its lease has long expired); fields added since are null for it."""
    expected = dict(old, status=Status.ABANDONED if old["status"] == Status.RUNNING else old["status"])
    assert {k: row.get(k, "(missing)") for k in expected} == expected
    assert {k: row[k] for k in set(row) - set(expected)} == dict.fromkeys(set(row) - set(expected))


def check_old_runs(cw, db: str, backend: str) -> dict[str, list[dict]]:
    """history of every job: the old runs unchanged; returns the newer runs, by job."""
    newer = {}
    for job, old in released(backend).items():
        shown = cw.json("history", job, "--json", "--db", db)
        oldest_new = len(shown) - len(old)
        assert [r["run_id"] for r in shown[oldest_new:]] == [r["run_id"] for r in old]
        for row, old_row in zip(shown[oldest_new:], old):
            assert_reads_as_released(row, old_row)
        newer[job] = shown[:oldest_new]
    return newer


def check_status(cw, db: str, backend: str) -> None:
    """status: every job, its last run (skips are not runs) as the release showed it."""
    shown = {s["job"]: s for s in cw.json("status", "--json", "--db", db)}
    assert set(shown) == set(JOBS)
    for job, old in released(backend).items():
        assert_reads_as_released(shown[job]["last_run"],
                                 next(r for r in old if r["status"] != Status.SKIPPED))


def run_new_jobs(cw, db: str) -> None:
    cw("run", "--db", db, *NIGHTLY, check_rc=0)
    cw("run", "--db", db, "-n", "fresh", "--", "true", check_rc=0)


def check_new_runs(cw, db: str, backend: str) -> None:
    """The new runs are recorded beside the old ones, with the columns added since."""
    newer = check_old_runs(cw, db, backend)
    assert {job: len(runs) for job, runs in newer.items()} == dict.fromkeys(JOBS, 0) | {
        "nightly": 1}
    (fresh,) = cw.json("history", "fresh", "--json", "--db", db)
    last_old = max(r["run_id"] for runs in released(backend).values() for r in runs)
    for run, key in ((newer["nightly"][0], "2026-10-30"), (fresh, None)):
        assert run["status"] == Status.SUCCEEDED and run["run_id"] > last_old
        assert key is None or run["run_key"] == key
        assert (run["boot_id"], run["pid_ns"]) == (procs.boot_id() or None,
                                                   procs.pid_namespace() or None)


def assert_refused_as_newer(proc) -> None:
    err = proc.stderr.decode()
    assert proc.returncode == 125, err
    assert len(err.strip().splitlines()) == 1, err
    assert f"schema version {NEWER}, newer than" in err and "upgrade cronwrap" in err, err


# -- SQLite --------------------------------------------------------------------------------

def sqlite_copy(tmp_path: Path) -> tuple[Path, str]:
    file = tmp_path / "ledger.db"
    shutil.copyfile(FIXTURES / "ledger.db", file)
    file.chmod(0o600)
    return file, f"sqlite://{file}"


def user_version(file: Path) -> int:
    conn = sqlite3.connect(f"file:{file}?mode=ro", uri=True)
    try:
        return conn.execute("PRAGMA user_version").fetchone()[0]
    finally:
        conn.close()


def test_a_sqlite_ledger_of_release_0_1_0_reads_as_it_was_and_migrates_on_run(cw, tmp_path):
    file, db = sqlite_copy(tmp_path)
    check_status(cw, db, "sqlite")
    check_old_runs(cw, db, "sqlite")
    assert user_version(file) == 1  # the read commands open it read-only: no migration
    run_new_jobs(cw, db)
    assert user_version(file) == newest("sqlite")
    check_new_runs(cw, db, "sqlite")


def test_a_sqlite_ledger_of_a_newer_release_is_refused_and_left_as_it_was(cw, tmp_path):
    file, db = sqlite_copy(tmp_path)
    conn = sqlite3.connect(file)
    conn.execute(f"PRAGMA user_version = {NEWER}")
    conn.close()
    before = file.read_bytes()
    marker = tmp_path / "ran"
    assert_refused_as_newer(cw("run", "--db", db, "-n", "nightly", "--", "touch", str(marker)))
    assert not marker.exists() and file.read_bytes() == before
    wal = Path(f"{file}-wal")
    assert not wal.exists() or wal.stat().st_size == 0
    check_status(cw, db, "sqlite")  # read as it is
    check_old_runs(cw, db, "sqlite")
    assert file.read_bytes() == before


# -- PostgreSQL ----------------------------------------------------------------------------

def restore(dsn: str) -> None:
    """Load release 0.1.0's pg_dump into the (empty) database ``dsn``."""
    psql = shutil.which("psql")
    if psql is None:
        if os.environ.get("CI") == "true":
            pytest.fail("psql is missing, and CI=true never skips a PostgreSQL test")
        pytest.skip("psql is not installed")
    proc = subprocess.run([psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", dsn,
                           "-f", str(FIXTURES / "ledger.pgdump.sql")], capture_output=True)
    assert proc.returncode == 0, proc.stderr.decode()


def schema_version(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        return int(conn.execute("SELECT value FROM cronwrap_meta "
                                "WHERE key = 'schema_version'").fetchone()[0])


def snapshot(dsn: str) -> dict[str, list]:
    """The columns of cronwrap's tables and every row, to tell that nothing changed."""
    with psycopg.connect(dsn) as conn:
        found = {"columns": conn.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_name LIKE 'cronwrap%' ORDER BY 1, 2").fetchall()}
        for table in ("cronwrap_meta", "cronwrap_jobs", "cronwrap_runs"):
            found[table] = conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
    return found


@pytest.mark.postgres
def test_a_postgres_ledger_of_release_0_1_0_reads_as_it_was_and_migrates_on_run(cw, pg_dsn):
    restore(pg_dsn)
    check_status(cw, pg_dsn, "postgres")
    check_old_runs(cw, pg_dsn, "postgres")
    assert schema_version(pg_dsn) == 1  # the read commands migrate nothing
    run_new_jobs(cw, pg_dsn)
    assert schema_version(pg_dsn) == newest("postgres")
    check_new_runs(cw, pg_dsn, "postgres")


@pytest.mark.postgres
def test_db_init_migrates_a_postgres_ledger_of_release_0_1_0(cw, pg_dsn):
    restore(pg_dsn)
    proc = cw("db", "init", "--db", pg_dsn, check_rc=0)
    assert proc.stdout.decode().strip() == "ledger ready"
    assert schema_version(pg_dsn) == newest("postgres")
    check_status(cw, pg_dsn, "postgres")
    check_old_runs(cw, pg_dsn, "postgres")


@pytest.mark.postgres
def test_a_postgres_ledger_of_a_newer_release_is_refused_and_left_as_it_was(cw, pg_dsn,
                                                                             tmp_path):
    restore(pg_dsn)
    with psycopg.connect(pg_dsn) as conn:
        conn.execute("UPDATE cronwrap_meta SET value = %s WHERE key = 'schema_version'",
                     (str(NEWER),))
    before = snapshot(pg_dsn)
    marker = tmp_path / "ran"
    assert_refused_as_newer(cw("run", "--db", pg_dsn, "-n", "nightly", "--", "touch",
                               str(marker)))
    assert not marker.exists() and snapshot(pg_dsn) == before
    check_status(cw, pg_dsn, "postgres")  # read as it is
    assert snapshot(pg_dsn) == before
