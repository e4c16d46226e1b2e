"""Shared fixtures: a private CRONWRAP_HOME per test, the cronwrap executable, PostgreSQL.

PostgreSQL comes from the libpq ``PG*`` variables (tests/run.sh sets them, starting a throwaway
cluster when none is running). Each test gets a fresh database. With ``CI=true`` a PostgreSQL
test is never skipped: an unreachable server fails it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

REPO = Path(__file__).resolve().parent.parent

# -- hypothesis: the same examples on every CI run -------------------------------------------
# A fresh clone's suite once failed on an example no earlier run had drawn. Under CI=true the
# examples are derandomized: each test's seed is hypothesis' digest of that test's own code,
# so every run (and every machine) draws the same ones, and no example database carries
# examples from one run into the next. No deadline there: a loaded 2-core machine is slow,
# not wrong; for the same reason the one timing-based health check (too_slow) is off.
# `--hypothesis-profile ci` gives the same examples without CI=true.
settings.register_profile(
    "ci", derandomize=True, database=None, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow])
if os.environ.get("CI") == "true":
    settings.load_profile("ci")


def pytest_report_header(config: pytest.Config) -> str:
    """Which examples this run draws; a derandomized run repeats with the same hypothesis."""
    import hypothesis

    head = f"hypothesis {hypothesis.__version__}, profile {settings.get_current_profile_name()!r}"
    if settings.default.derandomize:
        return (f"{head}: derandomized, each test's seed is the digest of its own code "
                "(deadline=None, no example database)")
    return f"{head}: random seeds (CI=true or --hypothesis-profile ci fixes them)"


def cronwrap_argv() -> list[str]:
    """The installed executable when on PATH (as operators run it), else the checkout."""
    exe = shutil.which("cronwrap")
    return [exe] if exe else [sys.executable, "-m", "cronwrap"]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "cwhome"
    monkeypatch.setenv("CRONWRAP_HOME", str(h))
    for var in list(os.environ):
        if var.startswith("CRONWRAP_") and var != "CRONWRAP_HOME":
            monkeypatch.delenv(var)
    return h


class CW:
    """Runs the real cronwrap executable."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.argv = cronwrap_argv()

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CRONWRAP_")}
        env["CRONWRAP_HOME"] = str(self.home)
        env.update(extra or {})
        return env

    def __call__(self, *args: str, env: dict[str, str] | None = None, timeout: float = 60,
                 input: bytes | None = None, check_rc: int | None = None) -> subprocess.CompletedProcess:
        proc = subprocess.run([*self.argv, *args], env=self.env(env), capture_output=True,
                              timeout=timeout, input=input)
        if check_rc is not None:
            assert proc.returncode == check_rc, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
        return proc

    def popen(self, *args: str, env: dict[str, str] | None = None, **kw) -> subprocess.Popen:
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        return subprocess.Popen([*self.argv, *args], env=self.env(env), **kw)

    def json(self, *args: str, env: dict[str, str] | None = None):
        import json

        proc = self(*args, env=env, check_rc=0)
        return json.loads(proc.stdout)


def lock_holder(home: Path, job: str, lock_file: Path | None = None) -> list[int]:
    """WRAPPER_PID WRAPPER_START JOB_PID JOB_START of the holder of ``job``'s lock, from
    cronwrap's own holder record (the lock file itself is never written)."""
    info = os.stat(lock_file or home / "locks" / f"{job}.lock")
    words = (home / "locks" / "holders" / f"{info.st_dev}-{info.st_ino}").read_text().split()
    return [int(x) for x in words[:4]]


@pytest.fixture
def cw(home: Path) -> CW:
    return CW(home)


# -- PostgreSQL ------------------------------------------------------------------------------

def _pg_connect(dbname: str | None = None):
    import psycopg

    kwargs = {"connect_timeout": 5, "autocommit": True}
    if dbname:
        kwargs["dbname"] = dbname
    return psycopg.connect(**kwargs)


@pytest.fixture(scope="session")
def pg_server() -> dict[str, str]:
    """libpq settings of a reachable server; skip (or fail under CI=true) when there is none."""
    try:
        with _pg_connect() as conn:
            conn.execute("SELECT 1")
    except Exception as exc:  # psycopg.OperationalError, or psycopg missing
        message = f"PostgreSQL not reachable through PG* variables: {exc}"
        if os.environ.get("CI") == "true":
            pytest.fail(message + " (CI=true: PostgreSQL tests are never skipped)")
        pytest.skip(message)
    return {k: v for k, v in os.environ.items() if k.startswith("PG")}


@pytest.fixture
def pg_dsn(pg_server: dict[str, str]):
    """A fresh, empty database for one test, as a postgresql:// URL; dropped afterwards."""
    name = f"cwtest_{uuid.uuid4().hex[:12]}"
    with _pg_connect() as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    host = os.environ.get("PGHOST", "127.0.0.1")
    port = os.environ.get("PGPORT", "5432")
    user = os.environ.get("PGUSER", "postgres")
    yield f"postgresql://{user}@{host}:{port}/{name}"
    with _pg_connect() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
