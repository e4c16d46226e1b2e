"""Shared fixtures: a private CRONWRAP_HOME per test, the cronwrap executable, PostgreSQL.

PostgreSQL comes from the libpq ``PG*`` variables (tests/run.sh sets them, starting a throwaway
cluster when none is running). Each test gets a fresh database. With ``CI=true`` a PostgreSQL
test is never skipped: an unreachable server fails it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.needs import missing
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

# -- no test signals its own process group -----------------------------------------------------
# os.kill(0) and os.killpg(0) (or 1, or a negative number) signal the caller's own process
# group or every process it may: the whole suite, its workers and their parent, which then
# stop without a word (a holder record read before it named the job gave a JOB_PID of 0, and
# a clean clone's run twice stopped at 79%). The tests' own calls are refused instead.
_kill, _killpg = os.kill, os.killpg


def _kill_one(pid: int, sig: int) -> None:
    if pid <= 1:
        raise AssertionError(f"a test called os.kill({pid}, {sig}): that signals its own "
                             "process group or every process, not one process")
    _kill(pid, sig)


def _kill_group(pgid: int, sig: int) -> None:
    if pgid <= 1:
        raise AssertionError(f"a test called os.killpg({pgid}, {sig}): that signals its own "
                             "process group, not the job's")
    _killpg(pgid, sig)


os.kill, os.killpg = _kill_one, _kill_group

# -- signals as a terminal leaves them -----------------------------------------------------------
# A suite started in the background of a non-interactive shell (`bash tests/run.sh &`)
# inherits SIGINT and SIGQUIT ignored (POSIX: asynchronous lists), one started by nohup SIGHUP
# ignored, and so would every job it starts, since an ignored signal stays ignored across
# exec: `--signal INT` would then never end a job, nor a forwarded Ctrl-C or HUP reach one.
# The tests assume what a terminal or cron gives.
for _signum, _handler in ((signal.SIGINT, signal.default_int_handler),
                          (signal.SIGQUIT, signal.SIG_DFL), (signal.SIGHUP, signal.SIG_DFL)):
    if signal.getsignal(_signum) is signal.SIG_IGN:
        signal.signal(_signum, _handler)


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


def until_exists(path: Path | str) -> str:
    """Shell that waits until ``path`` exists: a job the test releases by creating it, where a
    fixed sleep could end before a loaded machine got the test to its next step."""
    return f"while [ ! -e {path} ]; do sleep 0.05; done"


def lock_holder(home: Path, job: str, lock_file: Path | None = None) -> list[int]:
    """WRAPPER_PID WRAPPER_START JOB_PID JOB_START of the holder of ``job``'s lock, from
    cronwrap's own holder record (the lock file itself is never written)."""
    info = os.stat(lock_file or home / "locks" / f"{job}.lock")
    words = (home / "locks" / "holders" / f"{info.st_dev}-{info.st_ino}").read_text().split()
    return [int(x) for x in words[:4]]


def job_holder(home: Path, job: str, lock_file: Path | None = None,
               timeout: float = 10.0) -> list[int]:
    """``lock_holder`` once the record names the job's process too: the wrapper writes it
    right after the spawn, and the job may be running (and have said so) a moment before.
    (A JOB_PID of 0 given to os.killpg would signal the caller's own process group.)"""
    import time

    deadline = time.monotonic() + timeout
    while True:
        try:
            found = lock_holder(home, job, lock_file)
            if found[2]:
                return found
        except (FileNotFoundError, ValueError):
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"the holder record of {job} never named its job")
        time.sleep(0.01)


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
        missing(f"PostgreSQL not reachable through PG* variables: {exc}", "PostgreSQL tests")
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


# -- PgBouncer -------------------------------------------------------------------------------
# A real PgBouncer in transaction pooling mode, with Debian's defaults otherwise (auth_type md5
# with a userlist, max_client_conn 100, default_pool_size 20), and no ignore_startup_parameters:
# cronwrap must connect through it as operators run it, sending nothing PgBouncer refuses. The
# server trusts 127.0.0.1, so the userlist is what checks a password.

PGBOUNCER_USER, PGBOUNCER_PASSWORD = "postgres", "bouncer-pw"


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class PgBouncer:
    """One pgbouncer process with its ini, userlist, socket and log in a directory of its own.

    It refuses to run as root: as root it drops to the postgres user (``-u``), which must be
    able to read the directory, so that is under /tmp, not pytest's private tmp_path. It runs
    as a daemon (``-d``), not as a child of the test process: in-process Supervisor tests
    treat every child of the process they run in as the job's, and would end it."""

    def __init__(self, **settings: str | int) -> None:
        import tempfile

        self.dir = Path(tempfile.mkdtemp(prefix="cronwrap-pgbouncer."))
        self.settings = {"pool_mode": "transaction", **settings}
        self.port = 0
        self.pid: int | None = None

    def url(self, dbname: str, password: str = PGBOUNCER_PASSWORD) -> str:
        return f"postgresql://{PGBOUNCER_USER}:{password}@127.0.0.1:{self.port}/{dbname}"

    def start(self, exe: str) -> None:
        for _ in range(3):  # the free port may be taken before pgbouncer binds it
            self.port = _free_port()
            self._write_config()
            argv = [exe, "-d", str(self.dir / "pgbouncer.ini")]
            if os.geteuid() == 0:
                argv[1:1] = ["-u", self._owner()]
            subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=30)
            if self._wait_ready():
                return
        raise RuntimeError(f"pgbouncer did not start: {self.log_tail()}")

    def _owner(self) -> str:
        import pwd

        for name in ("postgres", "nobody"):
            try:
                entry = pwd.getpwnam(name)
            except KeyError:
                continue
            os.chown(self.dir, entry.pw_uid, entry.pw_gid)
            return name
        raise RuntimeError("no postgres or nobody user for pgbouncer to run as")

    def _write_config(self) -> None:
        host = os.environ.get("PGHOST", "127.0.0.1")
        port = os.environ.get("PGPORT", "5432")
        options = {"listen_addr": "127.0.0.1", "listen_port": self.port,
                   "unix_socket_dir": self.dir, "logfile": self.dir / "pgbouncer.log",
                   "pidfile": self.dir / "pgbouncer.pid",
                   "auth_type": "md5", "auth_file": self.dir / "userlist.txt", **self.settings}
        self.dir.chmod(0o755)
        (self.dir / "pgbouncer.ini").write_text(
            f"[databases]\n* = host={host} port={port}\n\n[pgbouncer]\n"
            + "".join(f"{k} = {v}\n" for k, v in options.items()))
        (self.dir / "userlist.txt").write_text(f'"{PGBOUNCER_USER}" "{PGBOUNCER_PASSWORD}"\n')

    def _wait_ready(self, timeout: float = 15) -> bool:
        """True once a query goes through it to the server; False when it exited."""
        import time

        import psycopg

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.pid = self._daemon_pid()
            if self.pid is None and time.monotonic() > deadline - timeout + 2:
                return False  # it exited (the port was taken, say)
            try:
                with psycopg.connect(self.url("postgres"), connect_timeout=2,
                                     prepare_threshold=None, autocommit=True) as conn:
                    conn.execute("SELECT 1")
                return True
            except psycopg.OperationalError:
                time.sleep(0.05)
        message = f"pgbouncer on port {self.port} not ready in {timeout}s: {self.log_tail()}"
        self.stop()
        raise RuntimeError(message)

    def log_tail(self, lines: int = 3) -> str:
        try:
            text = (self.dir / "pgbouncer.log").read_text(errors="replace")
        except OSError:
            return "(no log)"
        return " | ".join(text.strip().splitlines()[-lines:])

    def _daemon_pid(self) -> int | None:
        """The daemon's PID from its pidfile, while that process lives."""
        try:
            pid = int((self.dir / "pgbouncer.pid").read_text().split()[0])
            os.kill(pid, 0)
            return pid
        except (OSError, ValueError, IndexError):
            return None

    def stop(self) -> None:
        import signal
        import time

        pid = self._daemon_pid()
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            while self._daemon_pid() is not None and time.monotonic() < deadline:
                time.sleep(0.05)
            if self._daemon_pid() is not None:
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.dir, ignore_errors=True)


def _pgbouncer_exe() -> str:
    """Debian's pgbouncer is in /usr/sbin, which a user's PATH may lack; skip without it,
    except under CI=true (tests/run.sh installs it there, so missing it is a failure)."""
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin"])
    exe = shutil.which("pgbouncer", path=path)
    if exe is None:
        missing("pgbouncer not installed (tests/run.sh installs Debian's package)",
                "PgBouncer tests")
    return exe


@pytest.fixture(scope="session")
def pgbouncer_exe(pg_server: dict[str, str]) -> str:
    return _pgbouncer_exe()


@pytest.fixture
def start_pgbouncer(pgbouncer_exe: str):
    """Start a PgBouncer of the test's own, ``start_pgbouncer(default_pool_size=1)``; each is
    stopped after the test."""
    started: list[PgBouncer] = []

    def start(**settings: str | int) -> PgBouncer:
        bouncer = PgBouncer(**settings)
        started.append(bouncer)
        bouncer.start(pgbouncer_exe)
        return bouncer

    yield start
    for bouncer in started:
        bouncer.stop()


@pytest.fixture(scope="session")
def pgbouncer(pgbouncer_exe: str):
    """The session's PgBouncer (transaction pooling, Debian's defaults otherwise)."""
    bouncer = PgBouncer()
    try:
        bouncer.start(pgbouncer_exe)
        yield bouncer
    finally:
        bouncer.stop()


@pytest.fixture
def pgbouncer_dsn(pgbouncer: PgBouncer, pg_dsn: str) -> str:
    """A fresh database (pg_dsn's, made on the server) addressed through PgBouncer's port."""
    from urllib.parse import urlsplit

    return pgbouncer.url(urlsplit(pg_dsn).path.lstrip("/"))


# -- A role with few connections ---------------------------------------------------------------

class LimitedRole(NamedTuple):
    name: str
    dsn: str  # postgresql:// URL of the role's own database, as that role
    limit: int


@pytest.fixture
def limited_role(pg_server: dict[str, str]):
    """A LOGIN role with CONNECTION LIMIT 4 owning a fresh database of its name; both dropped
    afterwards (its sessions ended first)."""
    name = f"cwlimit_{uuid.uuid4().hex[:12]}"
    with _pg_connect() as conn:
        conn.execute(f'CREATE ROLE "{name}" LOGIN CONNECTION LIMIT 4')
        conn.execute(f'CREATE DATABASE "{name}" OWNER "{name}"')
    host = os.environ.get("PGHOST", "127.0.0.1")
    port = os.environ.get("PGPORT", "5432")
    yield LimitedRole(name, f"postgresql://{name}@{host}:{port}/{name}", 4)
    with _pg_connect() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                     (name,))
        conn.execute(f'DROP ROLE IF EXISTS "{name}"')


class ConnectionSampler:
    """Counts a role's server connections (pg_stat_activity) from a background thread, every
    ``interval`` seconds, until the ``with`` block ends: ``peak`` is the most seen at once,
    ``last`` the latest count."""

    def __init__(self, role: str, interval: float = 0.01) -> None:
        import threading

        self.role, self.interval = role, interval
        self.peak = self.last = self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._conn = _pg_connect()  # a superuser's: not counted against the role

    def _sample(self) -> None:
        while not self._stop.is_set():
            (count,) = self._conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE usename = %s", (self.role,)).fetchone()
            self.last, self.peak, self.samples = count, max(self.peak, count), self.samples + 1
            self._stop.wait(self.interval)

    def __enter__(self) -> "ConnectionSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)
        self._conn.close()
