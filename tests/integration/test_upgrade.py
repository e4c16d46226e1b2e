"""Upgrades keep every row (issue 12 §3): the ledgers release 0.1.0 wrote, used by this code.

tests/fixtures/release-0.1.0 holds a SQLite ledger and a PostgreSQL dump written by that
release, and what its ``history NAME --json`` printed for each job. Through the installed
executable, on a copy of each: ``status`` and ``history`` show every old run as that release
did, without migrating anything; a ``run`` (or ``db init``) migrates the ledger to the newest
migration and records new runs beside the old ones. A ledger from a newer release is refused
by ``run`` with one line (exit 125), left exactly as it was, and still read by ``status``.

Hosts are upgraded one by one: a wrapper of the previous version of the schema's code
(PREVIOUS, built here from this repository's history) claims, renews and finishes on a ledger
this code made or migrated, and this code on one that the previous made (issue 21 §5).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import psycopg
import pytest

from cronwrap.ledger import sql
from cronwrap.model import FORMAT_VERSION, Status
from cronwrap.process import procs
from tests.conftest import CW, REPO
from tests.needs import missing

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
    (its lease has long expired); fields added since are null for it, but for the attempts
    history lists: only the row's own (the release kept no earlier one)."""
    row = dict(row)
    assert row.pop("format", FORMAT_VERSION) == FORMAT_VERSION  # history's runs carry it since
    if "attempts" in row:
        assert [a["attempt"] for a in row.pop("attempts")] == [old["attempt"]][:old["attempt"]]
    assert row.pop("steps", []) == []  # cronwrap step came after
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


def runs_total(cw: CW, db: str) -> dict[tuple[str, str], float]:
    from prometheus_client.parser import text_string_to_metric_families

    text = cw("status", "--format", "prometheus", "--db", db, check_rc=0).stdout.decode()
    return {(s.labels["cronjob"], s.labels["status"]): s.value
            for f in text_string_to_metric_families(text) for s in f.samples
            if s.name == "cronwrap_runs_total" and s.value}


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres",
                                                            marks=pytest.mark.postgres)])
def test_an_old_ledger_counts_from_this_release_s_first_write_never_from_a_read(
        backend, cw, tmp_path, request):
    """Release 0.1.0's runs are not counted (the counters start at 0 when expansion 1 is
    applied), a read applies nothing, and the first run of this release counts (on
    PostgreSQL, once ``db upgrade`` applied the expansion: run never does)."""
    if backend == "sqlite":
        file, db = sqlite_copy(tmp_path)
    else:
        db = request.getfixturevalue("pg_dsn")
        restore(db)
    assert runs_total(cw, db) == {}
    if backend == "sqlite":
        conn = sqlite3.connect(f"file:{file}?mode=ro", uri=True)
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        finally:
            conn.close()
        assert "meta" not in tables and "tallies" not in tables  # the read added nothing
    else:
        cw("db", "upgrade", "--db", db, check_rc=0)
    cw("run", "--db", db, "-n", "counted", "--", "true", check_rc=0)
    assert runs_total(cw, db) == {("counted", "succeeded"): 1}


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
def test_a_postgres_ledger_of_release_0_1_0_is_migrated_by_db_upgrade_never_by_run(cw, pg_dsn,
                                                                                   tmp_path):
    """Issue 22 §4: run never changes a shared ledger's schema (one upgraded host must not
    change it under the rest of the fleet): it refuses, with one line naming `db upgrade`,
    and runs nothing; `db upgrade` migrates, and run works from then on."""
    restore(pg_dsn)
    check_status(cw, pg_dsn, "postgres")
    check_old_runs(cw, pg_dsn, "postgres")
    assert schema_version(pg_dsn) == 1  # the read commands migrate nothing
    marker = tmp_path / "ran"
    proc = cw("run", "--db", pg_dsn, "-n", "fresh", "--", "touch", str(marker))
    assert proc.returncode == 125 and not marker.exists(), proc.stderr
    assert b"run `cronwrap db upgrade` once" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert schema_version(pg_dsn) == 1
    assert cw("db", "upgrade", "--db", pg_dsn, check_rc=0).stdout == b"ledger upgraded\n"
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


# -- the claim function, and the previous release beside this code -------------------------

# The text of cronwrap_claim() (postgres.sql's claim_function, comments and blanks aside) at
# each schema version that changed it. A ledger at a version keeps the function it was
# migrated with, and the migrator re-creates it only when the version moves: a change of the
# text without a new numbered migration would reach new ledgers only.
CLAIM_FUNCTION_AT = {4: "a61aacf3257956965d2c9db50328732c76b347fc365abed47e4bb3cb3e7019dc"}
# The code issue 21 started from (schema version 4, cronwrap_claim() created by migrations 3
# and 4): what the hosts not upgraded yet run.
PREVIOUS = "b9ec9f47da12b71565100a731b221d5eedf29307"
COMPAT_JOB = ("-n", "compat", "--schedule", "0 3 * * *", "--tz", "UTC", "--key", "%Y-%m-%d",
              "--lease", "3")


def function_text(block: str) -> str:
    return " ".join(re.sub(r"--[^\n]*", "", block).split())


def test_the_claim_function_changes_only_with_a_new_schema_version():
    queries = sql.load("postgres")
    digest = hashlib.sha256(function_text(queries["claim_function"]).encode()).hexdigest()
    known = CLAIM_FUNCTION_AT.get(newest("postgres"), max(CLAIM_FUNCTION_AT.items())[1])
    assert digest == known, (
        f"cronwrap_claim() changed ({digest}) at schema version {newest('postgres')}: add a "
        "numbered migration (it may hold no statement), then its digest to CLAIM_FUNCTION_AT")


@pytest.fixture(scope="session")
def previous(tmp_path_factory) -> dict[str, str]:
    """The environment that makes ``python -m cronwrap`` the PREVIOUS commit's: its source,
    from this repository's history, first on PYTHONPATH, and no working directory before it
    (PYTHONSAFEPATH: the tests run in this checkout). This interpreter's site-packages hold its
    dependencies (pyproject.toml's are the same since), so nothing is installed."""
    what = "the tests against the previous release"
    git = shutil.which("git")
    if git is None:
        missing("git is not installed", what)
    archive = subprocess.run([git, "-C", str(REPO), "archive", "--format=tar", PREVIOUS,
                              "cronwrap"], capture_output=True)
    if archive.returncode != 0:
        missing(f"git archive {PREVIOUS[:7]}: {archive.stderr.decode().strip()} (the "
                "repository's history is needed)", what)
    source = tmp_path_factory.mktemp("previous")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(source, filter="data")
    env = {"PYTHONPATH": str(source), "PYTHONSAFEPATH": "1"}
    found = subprocess.run([sys.executable, "-c", "import cronwrap; print(cronwrap.__file__)"],
                           env={**os.environ, **env}, capture_output=True, text=True)
    assert found.stdout.strip() == str(source / "cronwrap" / "__init__.py"), found
    return env


class Previous(CW):
    """The PREVIOUS commit's cronwrap (``previous``: the environment that makes it so)."""

    def __init__(self, home: Path, previous: dict[str, str]) -> None:
        super().__init__(home)
        self.argv = [sys.executable, "-m", "cronwrap"]
        self.previous = previous

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return super().env({**self.previous, **(extra or {})})


def wrappers(home: Path, previous: dict[str, str]) -> tuple[CW, CW]:
    """This code's cronwrap and the previous one, on one CRONWRAP_HOME."""
    return CW(home), Previous(home, previous)


def ledger_of(db: str):
    if db.startswith("sqlite:///"):
        from cronwrap.ledger.sqlite import SqliteLedger

        return SqliteLedger(Path(db[len("sqlite://"):]), read_only=True)
    from cronwrap.ledger.postgres import PostgresLedger

    return PostgresLedger(db, read_only=True)


def row(db: str, date: str):
    """The ledger's row of the compat job's slot ``date``, read by this code."""
    ledger = ledger_of(db)
    try:
        return next((r for r in ledger.runs("compat", 10) if r.run_key == date), None)
    finally:
        ledger.close()


def poll(found, what: str, proc: subprocess.Popen, timeout: float = 60.0):
    """``found()`` once it is something, while the wrapper ``proc`` runs."""
    deadline = time.monotonic() + timeout
    while (value := found()) is None or value is False:
        if proc.poll() is not None:
            raise AssertionError(f"cronwrap exited {proc.returncode} before {what}: "
                                 f"{proc.stderr.read().decode()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
    return value


def claim_renew_finish(cw: CW, db: str, date: str, tmp_path: Path) -> None:
    """A run of the compat job's slot ``date`` by ``cw``: claimed, kept running until the
    ledger shows its lease renewed, then ended and recorded succeeded."""
    done = tmp_path / f"done-{date}"
    proc = cw.popen("run", "--db", db, *COMPAT_JOB, "--date", date, "--", "sh", "-c",
                    f'while [ ! -e "{done}" ]; do sleep 0.1; done')
    try:
        claimed = poll(lambda: row(db, date), f"the claim of {date}", proc)
        assert claimed.status == Status.RUNNING, claimed
        poll(lambda: row(db, date).locked_until > claimed.locked_until, "a renewal", proc)
    finally:
        done.touch()
        err = proc.communicate(timeout=60)[1]
    assert proc.returncode == 0, err.decode()
    assert row(db, date).status == Status.SUCCEEDED


def take_turns(first: CW, second: CW, db: str, tmp_path: Path) -> None:
    """Each wrapper claims, renews and finishes a slot of one job; then each finds the
    other's slot done (a duplicate: nothing runs). Read back by this code."""
    claim_renew_finish(first, db, "2026-03-01", tmp_path)
    claim_renew_finish(second, db, "2026-03-02", tmp_path)
    for cw, date in ((second, "2026-03-01"), (first, "2026-03-02")):
        cw("run", "--db", db, *COMPAT_JOB, "--date", date, "--", "touch",
           str(tmp_path / "ran"), check_rc=0)
    assert not (tmp_path / "ran").exists()
    ledger = ledger_of(db)
    try:
        runs = {r.run_key: r for r in ledger.runs("compat", 10)}
    finally:
        ledger.close()
    assert {key: (r.status, r.attempt, r.fence) for key, r in runs.items()} == {
        "2026-03-01": (Status.SUCCEEDED, 1, 1), "2026-03-02": (Status.SUCCEEDED, 1, 2)}


@pytest.mark.parametrize("backend", [
    "sqlite", pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("postgres of release 0.1.0", marks=pytest.mark.postgres)])
def test_the_previous_release_claims_renews_and_finishes_on_a_ledger_this_code_made(
        backend, previous, home, tmp_path, request):
    new, old = wrappers(home, previous)
    db = f"sqlite://{tmp_path / 'ledger.db'}"
    if backend != "sqlite":
        db = request.getfixturevalue("pg_dsn")
        if backend.endswith("0.1.0"):
            restore(db)
    new("db", "init", "--db", db, check_rc=0)
    take_turns(old, new, db, tmp_path)


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres",
                                                            marks=pytest.mark.postgres)])
def test_this_code_claims_renews_and_finishes_on_a_ledger_the_previous_release_made(
        backend, previous, home, tmp_path, request):
    new, old = wrappers(home, previous)
    db = request.getfixturevalue("pg_dsn") if backend == "postgres" else \
        f"sqlite://{tmp_path / 'ledger.db'}"
    old("db", "init", "--db", db, check_rc=0)
    new("db", "upgrade", "--db", db, check_rc=0)  # the fleet's upgrade starts with the ledger
    take_turns(new, old, db, tmp_path)


@pytest.mark.postgres
def test_db_init_creates_the_claim_function_again_on_a_current_schema(cw, pg_dsn, tmp_path):
    """A function dropped or replaced by hand is repaired by db init, even when the schema
    version is current (no migration to run)."""
    cw("db", "init", "--db", pg_dsn, check_rc=0)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP FUNCTION cronwrap_claim")
        conn.execute("DROP FUNCTION cronwrap_settings")
    marker = tmp_path / "ran"
    proc = cw("run", "--db", pg_dsn, "-n", "repair", "--", "touch", str(marker))
    assert proc.returncode == 125 and not marker.exists(), proc.stderr
    cw("db", "init", "--db", pg_dsn, check_rc=0)
    cw("run", "--db", pg_dsn, "-n", "repair", "--", "touch", str(marker), check_rc=0)
    assert marker.exists()
    assert cw.json("history", "repair", "--json", "--db", pg_dsn)[0]["status"] == "succeeded"
    cw("prune", "--older-than", "1s", "--db", pg_dsn, check_rc=0)  # cronwrap_settings is back


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres",
                                                            marks=pytest.mark.postgres)])
def test_the_previous_release_s_takeover_and_finish_are_kept_among_the_attempts(
        backend, previous, home, tmp_path, request):
    """Issue 22 §3 on an upgraded ledger: the triggers of expansion 2 keep the attempts that a
    wrapper of the previous release (which knows nothing of them) takes over and finishes."""
    from datetime import datetime, timezone

    from cronwrap.model import ClaimRequest, JobInfo

    new, old = wrappers(home, previous)
    db = request.getfixturevalue("pg_dsn") if backend == "postgres" else \
        f"sqlite://{tmp_path / 'ledger.db'}"
    old("db", "init", "--db", db, check_rc=0)
    new("db", "upgrade", "--db", db, check_rc=0)
    hour_ago = lambda: time.time() - 3600  # noqa: E731: a claim whose lease expired long ago
    if backend == "sqlite":
        from cronwrap.ledger.sqlite import SqliteLedger

        dead = SqliteLedger(Path(db[len("sqlite://"):]), clock=hour_ago)
    else:
        from cronwrap.ledger.postgres import PostgresLedger

        dead = PostgresLedger(db, clock=hour_ago)
    try:
        first = dead.claim(ClaimRequest(
            job=JobInfo("compat"), run_key="2026-03-01", trigger="manual", host="gone-host",
            scheduled_at=datetime(2026, 3, 1, 3, tzinfo=timezone.utc), pid=1, pid_start=1,
            lease=3.0)).run
    finally:
        dead.close()
    old("run", "--db", db, *COMPAT_JOB, "--date", "2026-03-01", "--", "true", check_rc=0)
    ledger = ledger_of(db)
    try:
        (run,) = ledger.runs("compat", 10)
        kept = ledger.attempts([run], ledger.now())[run.run_id]
    finally:
        ledger.close()
    assert [(a.attempt, a.status, a.reason, a.host, a.fence) for a in kept] == [
        (1, "abandoned", "superseded", "gone-host", first.fence),
        (2, "succeeded", None, run.host, run.fence)]


@pytest.mark.postgres
def test_the_previous_release_and_this_one_race_on_an_upgraded_ledger_one_run_per_slot(
        previous, tmp_path, pg_dsn):
    """Issue 22 §4, a rolling upgrade: the ledger upgraded by this release's `db upgrade`,
    hosts of both releases (a CRONWRAP_HOME each) fire the same slots at once: every slot
    runs exactly once, whoever wins it, and nothing fails."""
    hosts = [CW(tmp_path / f"new{i}") for i in range(3)] + \
        [Previous(tmp_path / f"old{i}", previous) for i in range(3)]
    hosts[3]("db", "init", "--db", pg_dsn, check_rc=0)  # made by the previous release
    hosts[0]("db", "upgrade", "--db", pg_dsn, check_rc=0)
    ran = tmp_path / "ran"
    dates = [f"2026-03-{day:02d}" for day in range(1, 7)]
    for date in dates:
        racing = [cw.popen("run", "--db", pg_dsn, *COMPAT_JOB, "--date", date, "--", "sh", "-c",
                           f'echo "$CRONWRAP_RUN_KEY" >> {ran}; sleep 0.3') for cw in hosts]
        for proc in racing:
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err.decode()
    assert sorted(ran.read_text().split()) == dates
    ledger = ledger_of(pg_dsn)
    try:
        runs = ledger.runs("compat", 20)
    finally:
        ledger.close()
    assert sorted((r.run_key, r.status, r.attempt) for r in runs) == [
        (date, Status.SUCCEEDED, 1) for date in dates]


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres",
                                                            marks=pytest.mark.postgres)])
def test_the_previous_release_ignores_a_pause_this_one_keeps(backend, previous, home, tmp_path,
                                                            request):
    """Expansion 3 on a ledger both releases use: this release's firing of a paused job is
    recorded skipped/paused and runs nothing; the previous release's (which calls
    cronwrap_claim(), and knows no pause) claims the slot and runs it, renewing and finishing
    as before. README, "Upgrading a fleet", says so."""
    new, old = wrappers(home, previous)
    db = request.getfixturevalue("pg_dsn") if backend == "postgres" else \
        f"sqlite://{tmp_path / 'ledger.db'}"
    old("db", "init", "--db", db, check_rc=0)
    new("db", "upgrade", "--db", db, check_rc=0)
    new("pause", "compat", "--reason", "upgrade", "--db", db, check_rc=0)
    every_minute = ("-n", "compat", "--schedule", "* * * * *", "--tz", "UTC")
    ran = tmp_path / "ran"
    new("run", "--db", db, *every_minute, "--", "touch", str(ran), check_rc=0)
    assert not ran.exists()
    old("run", "--db", db, *every_minute, "--", "touch", str(ran), check_rc=0)
    assert ran.exists()  # the minute's slot, skipped by this release, or the next one
    ledger = ledger_of(db)
    try:
        runs = ledger.runs("compat", 10)
        assert set(ledger.pauses()) == {"compat"}
    finally:
        ledger.close()
    assert [r.status for r in runs] == [Status.SUCCEEDED] or \
        sorted((r.status, r.skip_reason) for r in runs) == [
            (Status.SKIPPED, "paused"), (Status.SUCCEEDED, None)]
    claim_renew_finish(old, db, "2026-03-01", tmp_path)  # a lease renewed, beside the pause


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_job_the_previous_release_runs_can_use_cronwrap_step(tmp_path, previous, backend,
                                                              request):
    """Issue 26 §1 in a fleet being upgraded: the previous release exports no CRONWRAP_LEDGER,
    so its job's `cronwrap step` (this release's) finds the run in CRONWRAP_DB; the step it
    did is skipped when this release runs the slot again."""
    db = (request.getfixturevalue("pg_dsn") if backend == "postgres"
          else f"sqlite:///{tmp_path / 'l.db'}")
    new, old = wrappers(tmp_path / "home", previous)
    new("db", "init", env={"CRONWRAP_DB": db}, check_rc=0)  # expansion 5 (PostgreSQL: db upgrade)
    done = tmp_path / "done"
    step = f"env -u PYTHONPATH -u PYTHONSAFEPATH {shlex.join(new.argv)} step"
    job = ["sh", "-c", f"{step} a -- sh -c 'echo a >> {done}' && [ -e {tmp_path}/fixed ]"]
    slot = ("-n", "stepcompat", "--schedule", "0 3 * * *", "--tz", "UTC", "--date", "2026-10-28")
    first = old("run", *slot, "--", *job, env={"CRONWRAP_DB": db})
    assert first.returncode == 1, first.stderr
    (tmp_path / "fixed").touch()
    second = new("run", *slot, "--", *job, env={"CRONWRAP_DB": db})
    assert second.returncode == 0, second.stderr
    assert done.read_text() == "a\n" and b"already succeeded in this slot" in second.stderr
    (run,) = new.json("history", "stepcompat", "--json", env={"CRONWRAP_DB": db})
    assert [(s["step"], s["attempt"]) for s in run["steps"]] == [("a", 1)]


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres",
                                                            marks=pytest.mark.postgres)])
def test_what_a_tree_used_is_kept_per_attempt_beside_the_previous_release(
        backend, previous, home, tmp_path, request):
    """Expansion 6 (issue 26 §2) on a ledger both releases use: this release's attempt keeps
    its CPU and memory; the previous release's retry of the slot (which knows nothing of them)
    leaves the run with none, never the earlier attempt's; both releases read the ledger, and
    a deleted run (prune) takes its figures with it."""
    new, old = wrappers(home, previous)
    db = request.getfixturevalue("pg_dsn") if backend == "postgres" else \
        f"sqlite://{tmp_path / 'ledger.db'}"
    old("db", "init", "--db", db, check_rc=0)
    new("db", "upgrade", "--db", db, check_rc=0)
    new("run", "--db", db, *COMPAT_JOB, "--date", "2026-03-01", "--", "sh", "-c", "exit 3")
    first = new.json("history", "compat", "--json", "--db", db)[0]
    assert first["status"] == "failed" and first["max_rss_kb"] > 0 \
        and first["cpu_user_ms"] is not None, first
    old("run", "--db", db, *COMPAT_JOB, "--date", "2026-03-01", "--", "true", check_rc=0)
    (run,) = new.json("history", "compat", "--json", "--db", db)
    assert (run["status"], run["attempt"], run["max_rss_kb"]) == ("succeeded", 2, None), run
    assert [(a["attempt"], a["max_rss_kb"]) for a in run["attempts"]] == [
        (1, first["max_rss_kb"]), (2, None)]
    assert old.json("history", "compat", "--json", "--db", db)[0]["attempt"] == 2
    new("run", "--db", db, *COMPAT_JOB, "--date", "2026-03-02", "--", "true", check_rc=0)
    assert new.json("history", "compat", "--json", "--db", db)[0]["max_rss_kb"] > 0
    # prune deletes runs rows: their figures go with them (a trigger; PostgreSQL's foreign key)
    if backend == "sqlite":
        import sqlite3

        with sqlite3.connect(db[len("sqlite://"):]) as conn:
            conn.execute("DELETE FROM runs")
        left = sqlite3.connect(db[len("sqlite://"):]).execute(
            "SELECT count(*) FROM usage").fetchone()[0]
    else:
        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute("DELETE FROM cronwrap_runs")
            left = conn.execute("SELECT count(*) FROM cronwrap_usage").fetchone()[0]
    assert left == 0


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres",
                                                            marks=pytest.mark.postgres)])
def test_the_window_s_counts_stay_exact_beside_the_previous_release(
        backend, previous, home, tmp_path, request):
    """Issue 24 §3 on an upgraded ledger: the runs the previous release wrote before the
    upgrade are counted by expansion 7 itself, and what it writes after (a run, a failure, a
    retry by hand that rewrites a failed slot, its prune's deletes) moves the counts by the
    triggers, beside this release's own runs: the kept counts equal the rows, and so do
    status's counts."""
    from datetime import datetime, timedelta, timezone

    from tests.integration.test_status_counts import Direct

    new, old = wrappers(home, previous)
    db = request.getfixturevalue("pg_dsn") if backend == "postgres" else \
        f"sqlite://{tmp_path / 'ledger.db'}"
    old("db", "init", "--db", db, check_rc=0)
    old("run", "--db", db, "-n", "before", "--", "true", check_rc=0)
    old("run", "--db", db, *COMPAT_JOB, "--date", "2026-03-01", "--", "false", check_rc=1)
    new("db", "upgrade", "--db", db, check_rc=0)
    old("run", "--db", db, *COMPAT_JOB, "--date", "2026-03-02", "--", "false", check_rc=1)
    old("run", "--db", db, *COMPAT_JOB, "--date", "2026-03-01", "--", "true", check_rc=0)
    new("run", "--db", db, *COMPAT_JOB, "--date", "2026-03-02", "--", "true", check_rc=0)
    new("run", "--db", db, "-n", "before", "--force", "--", "false", check_rc=1)
    for cw, date in ((old, "2026-03-01"), (new, "2026-03-02"), (old, "2026-03-03")):
        cw("run", "--db", db, "-n", "pruned", *COMPAT_JOB[2:], "--date", date, "--", "true",
           check_rc=0)
    time.sleep(1.1)
    old("prune", "--older-than", "1s", "--keep-last", "1", "--db", db, check_rc=0)
    direct = Direct(backend, db if backend == "postgres" else tmp_path / "ledger.db")
    ledger = ledger_of(db)
    try:
        assert direct.kept() == direct.by_day() and direct.kept()
        since = datetime.now(timezone.utc) - timedelta(days=7)
        assert {s.job: s.counts for s in ledger.summaries(since) if s.counts} == \
            direct.window(since.timestamp())
        assert len(ledger.runs("pruned")) == 1  # the previous release's prune deleted two
        assert {(job, status) for (_, job, status, _) in direct.kept()} == {
            ("before", "failed"), ("compat", "succeeded"), ("pruned", "succeeded")}
    finally:
        ledger.close()
        direct.close()
