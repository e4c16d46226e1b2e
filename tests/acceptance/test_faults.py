"""Faults, end to end: the real executable when things go wrong around it.

The wrapper killed at every phase (``CRONWRAP_FAILPOINT`` stops it exactly there), a ledger
that restarts, freezes, never answers, is locked or corrupted, full or read-only file
systems, a wall clock stepped back and forth (libfaketime), and jobs whose output is huge,
binary, or held open by a child. The rule each test checks: the job's exit status comes
back, nothing is lost, nothing runs twice, and what went wrong is said once, in one line.

Tests that mount a tmpfs need root; they are skipped where ``mount`` is refused, except
under ``CI=true``, where they fail instead.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.needs import missing

from tests.acceptance.conftest import alive, same_minute, wait_for
from tests.conftest import job_holder, lock_holder, until_exists
from tests.tcpproxy import FreezableProxy, TcpProxy


# -- helpers ---------------------------------------------------------------------------------

def history(cw, name: str, *args: str) -> list[dict]:
    return cw.json("history", name, "--json", "--limit", "200", *args)


def events(log_dir: Path) -> list[dict]:
    path = log_dir / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def proc_state(pid: int) -> str | None:
    """The one-letter state of /proc/PID/stat ('T' = stopped), None when gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1][0]
    except (FileNotFoundError, ProcessLookupError, IndexError):  # gone before open or read
        return None


def lock_busy(path: Path) -> bool:
    """Whether some process holds the flock on ``path`` (tried without waiting)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # releases what we may have taken


def cronwrap_lines(stderr: bytes) -> list[str]:
    return [l for l in stderr.decode(errors="replace").splitlines() if l.startswith("cronwrap:")]


def start_time(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b") ", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def kill_job(pid: int, start: int) -> None:
    """KILL a job process we saw, only if that PID is still that process (never a reused PID)."""
    if pid > 1 and start and start_time(pid) == start:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def kill_wrapper(proc: subprocess.Popen) -> None:
    if proc.poll() is None:  # not reaped yet, so its PID cannot have been reused
        proc.kill()
        proc.wait(10)


def stop_when_stopped(proc: subprocess.Popen, phase: str) -> None:
    wait_for(lambda: proc_state(proc.pid) == "T", timeout=15, what=f"the wrapper to stop at {phase}")


# -- SIGKILL of the wrapper at every phase ---------------------------------------------------

PHASES = ["before_claim", "after_claim", "after_spawn", "after_exit"]


@pytest.mark.parametrize("phase", PHASES)
def test_sigkilled_wrapper_at_every_phase_converges(cw, home, tmp_path, phase):
    """No job runs unnoticed, the lock is never held by nobody, the ledger converges."""
    same_minute(10)
    seen, done = tmp_path / "attempts", tmp_path / "done"
    # The job ignores TERM, so it outlives its killed wrapper until its keeper's KILL; after
    # its spawn it lasts until the next firing has been tried (a fixed sleep ended first).
    job = ["sh", "-c", f"trap '' TERM; echo $CRONWRAP_ATTEMPT >> {seen}; {until_exists(done)}"]
    if phase != "after_spawn":
        done.touch()
    lock = home / "locks" / "k.lock"
    wrapper = cw.popen("run", "-n", "k", "--kill-after", "30", "--", *job,
                       env={"CRONWRAP_FAILPOINT": phase})
    job_pid = job_start = 0
    try:
        stop_when_stopped(wrapper, phase)
        wrapper_pid, _, job_pid, job_start = lock_holder(home, "k")
        assert wrapper_pid == wrapper.pid
        assert (job_pid != 0) == (phase in ("after_spawn", "after_exit"))
        os.kill(wrapper.pid, signal.SIGKILL)
        assert wrapper.wait(10) == -signal.SIGKILL
        if phase == "after_spawn":
            # The job outlives its wrapper and keeps the inherited flock: the next firing of
            # the same slot is skipped, not run a second time alongside it.
            assert alive(job_pid) and lock_busy(lock)
            try:
                skipped = cw("run", "-n", "k", "--skip-exit-code", "9", "--", *job)
            finally:
                done.touch()
            assert skipped.returncode == 9, skipped.stderr
            wait_for(lambda: not alive(job_pid), what="the orphaned job to end")
        # Whatever the phase, nobody holds the lock once the wrapper and its job are gone.
        assert not lock_busy(lock), "the lock is held by a dead process"
        proc = cw("run", "-n", "k", "--", *job)
        assert proc.returncode == 0, proc.stderr
    finally:
        kill_wrapper(wrapper)
        kill_job(job_pid, job_start)
    (run,) = history(cw, "k")
    claimed = phase != "before_claim"  # the killed wrapper had claimed the slot
    assert run["status"] == "succeeded"
    assert (run["attempt"], run["fence"]) == ((2, 2) if claimed else (1, 1))
    starts = [e for e in events(home / "logs") if e["event"] == "start"]
    assert starts[-1]["took_over"] is claimed
    attempts = seen.read_text().split()
    expected = {"before_claim": ["1"], "after_claim": ["2"], "after_spawn": ["1", "2"],
                "after_exit": ["1", "2"]}  # after_exit: never recorded, so run again
    assert attempts == expected[phase]


def test_sigkilled_wrapper_mid_run_with_a_pid_lock(cw, home, tmp_path):
    """A PID lock names the job too: it blocks the next firing until the job is gone, and is
    then taken over as stale (and logged)."""
    same_minute(10)
    done = tmp_path / "done"
    # It outlives its wrapper (TERM is ignored) until the next firing has been tried.
    job = ["sh", "-c", f"trap '' TERM; {until_exists(done)}"]
    wrapper = cw.popen("run", "-n", "p", "--lock", "pid", "--kill-after", "30", "--", *job,
                       env={"CRONWRAP_FAILPOINT": "after_spawn"})
    job_pid = job_start = 0
    try:
        stop_when_stopped(wrapper, "after_spawn")
        _, _, job_pid, job_start = lock_holder(home, "p")
        os.kill(wrapper.pid, signal.SIGKILL)
        wrapper.wait(10)
        assert alive(job_pid)
        try:
            proc = cw("run", "-n", "p", "--lock", "pid", "--skip-exit-code", "9", "--", *job)
        finally:
            done.touch()
        assert proc.returncode == 9, proc.stderr
        # gone means reaped: init reaps the orphan (here within a second or two)
        wait_for(lambda: start_time(job_pid) is None, what="the orphaned job to be reaped")
        assert cw("run", "-n", "p", "--lock", "pid", "--", "true").returncode == 0
    finally:
        kill_wrapper(wrapper)
        kill_job(job_pid, job_start)
    (run,) = history(cw, "p")
    assert (run["status"], run["attempt"]) == ("succeeded", 2)
    stale = [e for e in events(home / "logs") if e["event"] == "stale_lock"]
    assert len(stale) == 1 and stale[0]["stale_pid"] == wrapper.pid


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


# A parent that adopts orphans (PR_SET_CHILD_SUBREAPER) and never reaps them, like a container
# whose PID 1 is the application rather than an init: an orphaned job that exits stays a zombie.
NON_REAPING_PARENT = """
import ctypes, subprocess, sys
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)
wrapper = subprocess.Popen(sys.argv[1:])
print(wrapper.pid, flush=True)
wrapper.wait()
sys.stdin.read()
"""


def test_a_zombie_job_does_not_hold_a_pid_lock(cw, home):
    same_minute(10)
    parent = subprocess.Popen(
        [sys.executable, "-c", NON_REAPING_PARENT, *cw.argv, "run", "-n", "z", "--lock", "pid",
         "--", "sleep", "0.3"],
        env=cw.env({"CRONWRAP_FAILPOINT": "after_spawn"}), stdin=subprocess.PIPE,
        stdout=subprocess.PIPE)
    try:
        wrapper_pid = int(parent.stdout.readline())
        wait_for(lambda: proc_state(wrapper_pid) == "T", what="the wrapper to stop")
        _, _, job_pid, _ = lock_holder(home, "z")
        keeper_pid = parent_of(job_pid)  # which would reap the job: killed too
        os.kill(wrapper_pid, signal.SIGKILL)
        os.kill(keeper_pid, signal.SIGKILL)
        wait_for(lambda: proc_state(job_pid) == "Z", what="the job to exit (unreaped)")
        assert proc_state(wrapper_pid) is None  # the wrapper itself was reaped
        proc = cw("run", "-n", "z", "--lock", "pid", "--skip-exit-code", "9", "--", "true")
        assert proc.returncode == 0, "a zombie held the lock: the job was skipped"
        (run,) = history(cw, "z")
        assert (run["status"], run["attempt"]) == ("succeeded", 2)
    finally:
        parent.stdin.close()
        parent.wait(10)


# -- PostgreSQL restarted, frozen, or never answering ------------------------------------------


@pytest.fixture
def proxied(pg_dsn):
    """The test database behind a proxy that can be cut, restored and frozen."""
    url = urlsplit(pg_dsn)
    proxy = FreezableProxy(url.hostname, url.port or 5432)
    dsn = f"postgresql://{url.username}:hunter2-secret@127.0.0.1:{proxy.port}{url.path}"
    yield proxy, dsn
    proxy.frozen.clear()
    proxy.close()


@pytest.mark.postgres
def test_postgres_restarted_during_heartbeats_reconnects_and_records(cw, home, proxied, tmp_path):
    proxy, dsn = proxied
    ready = tmp_path / "ready"
    runner = cw.popen("run", "-n", "hb", "--db", dsn, "--lease", "3", "--", "sh", "-c",
                      f"touch {ready}; sleep 2.5; echo done")
    wait_for(ready.exists, what="job start")
    time.sleep(0.3)
    proxy.cut()  # the server goes away: open connections break, new ones are refused
    time.sleep(0.9)
    proxy.restore()  # ... and comes back before the lease could have run out
    out, err = runner.communicate(timeout=20)
    assert runner.returncode == 0 and out == b"done\n", err
    assert not list(home.glob("outbox/*.json"))
    (run,) = history(cw, "hb", "--db", dsn)
    assert (run["status"], run["attempt"]) == ("succeeded", 1)
    assert not [e for e in events(home / "logs") if e["event"] == "lease_lost"]
    assert b"hunter2-secret" not in out + err


@pytest.mark.postgres
def test_postgres_restarted_before_the_finish_is_recorded_retries_it(cw, home, proxied):
    proxy, dsn = proxied
    wrapper = cw.popen("run", "-n", "fin", "--db", dsn, "--lease", "60", "--", "sh", "-c", "exit 4",
                       env={"CRONWRAP_FAILPOINT": "after_exit"})
    try:
        stop_when_stopped(wrapper, "after_exit")  # the job has exited, its end is not recorded
        proxy.cut()  # the server restarts: the wrapper's connection is gone ...
        proxy.restore()  # ... and the server is back
        os.kill(wrapper.pid, signal.SIGCONT)
        out, err = wrapper.communicate(timeout=20)
    finally:
        kill_wrapper(wrapper)
    assert wrapper.returncode == 4, err
    (run,) = history(cw, "fin", "--db", dsn)
    assert (run["status"], run["exit_code"]) == ("failed", 4)
    assert not list(home.glob("outbox/*.json"))


@pytest.mark.postgres
def test_postgres_restarted_between_connect_and_claim_still_runs_the_job(cw, home, proxied, tmp_path):
    proxy, dsn = proxied
    marker = tmp_path / "ran"
    wrapper = cw.popen("run", "-n", "rc", "--db", dsn, "--", "touch", str(marker),
                       env={"CRONWRAP_FAILPOINT": "before_claim"})
    try:
        stop_when_stopped(wrapper, "before_claim")  # connected, locked, not yet claimed
        proxy.cut()
        proxy.restore()  # the server restarted: reachable again, the old connection is dead
        os.kill(wrapper.pid, signal.SIGCONT)
        out, err = wrapper.communicate(timeout=30)
    finally:
        kill_wrapper(wrapper)
    assert wrapper.returncode == 0, err
    assert marker.exists()
    (run,) = history(cw, "rc", "--db", dsn)
    assert run["status"] == "succeeded"


class CommitCutter(TcpProxy):
    """Once armed, forwards the client's next COMMIT and then drops the connection before the
    server's answer: the claim is committed, but the wrapper never hears so."""

    def __init__(self, host: str, port: int) -> None:
        self.armed = threading.Event()
        self.cut_reply = threading.Event()
        super().__init__(host, port)

    def relay(self, data: bytes, to_server: bool) -> bool:
        if to_server and self.armed.is_set() and b"COMMIT\0" in data:
            self.armed.clear()
            self.cut_reply.set()
        elif not to_server and self.cut_reply.is_set():
            self.cut_reply.clear()
            return False  # the answer to COMMIT never arrives
        return True


@pytest.mark.postgres
def test_a_claim_committed_but_unacknowledged_still_runs_the_job_once(cw, home, pg_dsn, tmp_path):
    url = urlsplit(pg_dsn)
    proxy = CommitCutter(url.hostname, url.port or 5432)
    dsn = f"postgresql://{url.username}@127.0.0.1:{proxy.port}{url.path}"
    ran = tmp_path / "ran"
    wrapper = cw.popen("run", "-n", "ac", "--db", dsn, "--skip-exit-code", "99", "--", "sh", "-c",
                       f"echo x >> {ran}", env={"CRONWRAP_FAILPOINT": "before_claim"})
    try:
        stop_when_stopped(wrapper, "before_claim")
        proxy.armed.set()  # the next COMMIT is the claim's
        os.kill(wrapper.pid, signal.SIGCONT)
        out, err = wrapper.communicate(timeout=30)
    finally:
        kill_wrapper(wrapper)
        proxy.close()
    if wrapper.returncode == 125:  # refusing to guess is acceptable: loudly, in one line
        assert len(err.decode().strip().splitlines()) == 1
        return
    assert wrapper.returncode == 0, (wrapper.returncode, err)
    assert ran.exists() and ran.read_text() == "x\n", "the claimed slot was never run"
    (run,) = history(cw, "ac", "--db", pg_dsn)
    assert run["status"] == "succeeded"


@pytest.mark.postgres
def test_postgres_frozen_mid_run_ends_the_job_within_its_lease(cw, home, proxied, tmp_path):
    """A ledger that stops answering (connection open, no reply, as a hung server or proxy
    looks to the client): the job is ended once its lease must have expired by the wrapper's
    own clock (ARCHITECTURE.md §3 step 5), since another host may already have taken the slot over."""
    proxy, dsn = proxied
    ready = tmp_path / "ready"
    runner = cw.popen("run", "-n", "fz", "--db", dsn, "--lease", "1", "--", "sh", "-c",
                      f"touch {ready}; exec sleep 30")
    job_pid = job_start = 0
    try:
        wait_for(ready.exists, what="job start")
        _, _, job_pid, job_start = job_holder(home, "fz")
        proxy.frozen.set()
        frozen_at = time.monotonic()
        # one lease, plus a heartbeat period and slack
        while alive(job_pid) and time.monotonic() - frozen_at < 1 + 1.5:
            time.sleep(0.05)
        assert not alive(job_pid), "the job kept running past its lease"
        proxy.frozen.clear()  # the server answers again: the wrapper records and leaves
        out, err = runner.communicate(timeout=30)
    finally:
        proxy.frozen.clear()
        kill_job(job_pid, job_start)
        kill_wrapper(runner)
    assert runner.returncode == 128 + signal.SIGTERM, err
    assert b"hunter2-secret" not in out + err
    cw("run", "-n", "other", "--db", dsn, "--", "true")  # delivers an outbox entry, if any
    (run,) = history(cw, "fz", "--db", dsn)
    assert (run["status"], run["skip_reason"]) == ("killed", "lease_lost")


def test_a_postgres_that_never_answers_fails_within_the_connect_timeout(cw, tmp_path):
    """A listener that accepts and never sends a byte: with --db-wait 0 (no waiting for a
    server that does not answer), 125 within libpq's connect timeout (cronwrap's default,
    5 s), one line; with run-unrecorded the job runs."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    hung = f"postgresql://u:hunter2-secret@127.0.0.1:{listener.getsockname()[1]}/db"
    try:
        start = time.monotonic()
        procs = {mode: cw.popen("run", "-n", f"pg-{mode}", "--db", hung, "--on-db-error", mode,
                                "--db-wait", "0", "--", "sh", "-c",
                                f"touch {tmp_path / mode}; exit 3")
                 for mode in ("fail", "run-unrecorded")}
        for mode, proc in procs.items():
            out, err = proc.communicate(timeout=30)
            took = time.monotonic() - start
            lines = err.decode().strip().splitlines()
            assert proc.returncode == (125 if mode == "fail" else 3), err
            # the connect timeout, and a loaded start (importing psycopg took 5 s under load)
            assert 4 <= took < 5 + 15, took
            assert len(lines) == 1 and "cannot connect" in lines[0] and "timeout" in lines[0], lines
            assert b"hunter2-secret" not in out + err
            assert (tmp_path / mode).exists() == (mode != "fail")
    finally:
        listener.close()
        for conn in accepted:
            conn.close()


# Another process's connection holding the ledger's write lock until its stdin closes.
LOCK_HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
print("held", flush=True)
sys.stdin.read()
conn.execute("COMMIT")
"""


def test_a_sqlite_ledger_locked_past_the_busy_timeout_fails_within_it(cw, home, tmp_path):
    """Another process holds BEGIN EXCLUSIVE for 30 s (released as soon as both have failed),
    longer than the busy timeout (10 s in ledger/sqlite.py): one clear line naming the file,
    125, nothing run; with --on-db-error run-unrecorded the job runs. Both wait at once, to
    keep this ~11 s."""
    assert cw("db", "init").returncode == 0
    db = home / "ledger.db"
    holder = subprocess.Popen([sys.executable, "-c", LOCK_HOLDER, str(db)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def release() -> None:
        try:
            holder.stdin.close()  # the holder commits and exits
        except (OSError, ValueError):
            pass

    timer = threading.Timer(30, release)  # a safety net: a loaded start takes seconds
    try:
        assert holder.stdout.readline() == b"held\n"
        timer.start()
        start = time.monotonic()
        procs = {mode: cw.popen("run", "-n", f"lite-{mode}", "--on-db-error", mode, "--", "sh",
                                "-c", f"touch {tmp_path / mode}; exit 3")
                 for mode in ("fail", "run-unrecorded")}
        for mode, proc in procs.items():
            out, err = proc.communicate(timeout=60)
            took = time.monotonic() - start
            lines = err.decode().strip().splitlines()
            assert proc.returncode == (125 if mode == "fail" else 3), (mode, took, err)
            assert len(lines) == 1 and str(db) in lines[0] and "locked" in lines[0], lines
            assert (tmp_path / mode).exists() == (mode != "fail")
            assert 9 <= took < 10 + 8, (mode, took)
    finally:
        timer.cancel()
        release()
        holder.wait(10)
    assert cw("run", "-n", "lite-fail", "--", "true").returncode == 0  # the lock is gone: fine


# -- SQLite corrupted ----------------------------------------------------------------------

def _corrupt(db: Path, how: str) -> None:
    subprocess.run([sys.executable, "-c", "import sqlite3, sys; sqlite3.connect(sys.argv[1])"
                    ".execute('PRAGMA wal_checkpoint(TRUNCATE)')", str(db)], check=True)
    data = db.read_bytes()
    rng = hashlib.sha256(how.encode()).digest() * (len(data) // 32 + 1)
    if how == "garbage":  # nothing of a database left
        db.write_bytes(rng[:len(data)])
    else:  # a valid header, garbage pages: "database disk image is malformed"
        db.write_bytes(data[:100] + rng[: len(data) - 100])


@pytest.mark.parametrize("how", [
    "garbage",
    "pages",
])
def test_corrupted_sqlite_ledger_is_a_clear_error_every_time(cw, home, tmp_path, how):
    assert cw("run", "-n", "c", "--", "true").returncode == 0
    assert cw("run", "-n", "d", "--", "true").returncode == 0
    db = home / "ledger.db"
    _corrupt(db, how)
    corrupted = db.read_bytes()
    marker = tmp_path / "ran"
    for _ in range(2):  # and the same on the next firing: no crash loop, no half-repair
        proc = cw("run", "-n", "c", "--force", "--", "touch", str(marker),
                  env={"CRONWRAP_DEBUG": "1"})
        assert proc.returncode == 125 and not marker.exists()
        lines = proc.stderr.decode().strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in proc.stderr.decode(), lines
        assert str(db) in lines[0] and ("aside" in lines[0] or "mv " in lines[0]), lines
    status = cw("status")
    assert status.returncode == 125 and len(status.stderr.decode().strip().splitlines()) == 1
    assert db.read_bytes() == corrupted, "cronwrap must not write into a corrupted ledger"


# -- disk full and read-only file systems ----------------------------------------------------

@pytest.fixture
def tmpfs(tmp_path):
    """mount(name, size) -> a fresh tmpfs (0700) at tmp_path/name; unmounted afterwards."""
    mounted: list[Path] = []

    def mount(name: str, size: str = "1m") -> Path:
        path = tmp_path / name
        path.mkdir(mode=0o700)
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs",
                               str(path)], capture_output=True, text=True)
        if proc.returncode != 0:
            missing(f"cannot mount a tmpfs here: {proc.stderr.strip()}", "tmpfs tests")
        mounted.append(path)
        return path

    yield mount
    for path in reversed(mounted):
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill(fs: Path) -> None:
    """Write until the file system is full."""
    block = b"\0" * 65536
    with open(fs / "filler", "wb", buffering=0) as f:
        while True:
            try:
                f.write(block)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
                break
    with open(fs / "filler2", "wb", buffering=0) as f:  # the last partial block, too
        try:
            while f.write(b"\0"):
                pass
        except OSError:
            pass


def read_only(fs: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(fs)], check=True, capture_output=True)


JOB_7 = ["--", "sh", "-c", "echo out; echo err >&2; exit 7"]


@pytest.mark.parametrize("fault", ["full", "read-only"])
def test_log_dir_full_or_read_only_keeps_the_exit_status_and_says_so_once(cw, tmpfs, fault):
    logs = tmpfs("logs")
    if fault == "full":
        fill(logs)
    else:  # a log dir that was in use, then went read-only
        assert cw("run", "-n", "x", "--log-dir", str(logs), "--", "true").returncode == 0
        read_only(logs)
    proc = cw("run", "-n", "j", "--log-dir", str(logs), *JOB_7)
    assert proc.returncode == 7 and proc.stdout == b"out\n"
    lines = cronwrap_lines(proc.stderr)
    reason = "No space left on device" if fault == "full" else "Read-only file system"
    assert len(lines) == 1 and reason in lines[0] and str(logs) in lines[0], lines
    assert b"err\n" in proc.stderr
    (run,) = history(cw, "j")  # the ledger lives elsewhere: the run is recorded
    assert (run["status"], run["exit_code"]) == ("failed", 7)


def test_log_dir_filling_up_during_the_run_is_reported_once(cw, tmpfs):
    logs = tmpfs("logs")
    proc = cw("run", "-n", "j", "--log-dir", str(logs), "--output", "quiet", "--", "sh", "-c",
              "head -c 3000000 /dev/zero; exit 7")
    assert proc.returncode == 7
    lines = cronwrap_lines(proc.stderr)
    about_capture = [l for l in lines if "capture" in l and "No space left" in l]
    assert len(about_capture) == 1, lines


def test_ledger_filling_up_during_the_run_spools_the_result_and_delivers_it(cw, home, tmpfs):
    fs = tmpfs("ledger")
    db = f"sqlite://{fs}/ledger.db"
    assert cw("run", "-n", "x", "--db", db, "--", "true").returncode == 0
    proc = cw("run", "-n", "j", "--db", db, "--", "sh", "-c",
              f"head -c 100000000 /dev/zero > {fs}/filler 2>/dev/null; exit 7")
    assert proc.returncode == 7
    lines = cronwrap_lines(proc.stderr)
    assert len(lines) == 1 and "outbox" in lines[0] and "full" in lines[0], lines
    assert len(list((home / "outbox").glob("*.json"))) == 1
    (fs / "filler").unlink()
    assert cw("run", "-n", "x", "--db", db, "--force", "--", "true").returncode == 0
    assert not list((home / "outbox").glob("*.json"))
    (run,) = history(cw, "j", "--db", db)
    assert (run["status"], run["exit_code"]) == ("failed", 7)


@pytest.mark.parametrize("fault", ["full", "read-only"])
def test_unwritable_ledger_fails_with_125_and_one_line(cw, tmpfs, tmp_path, fault):
    fs = tmpfs("ledger")
    db = f"sqlite://{fs}/ledger.db"
    assert cw("run", "-n", "x", "--db", db, "--", "true").returncode == 0
    fill(fs) if fault == "full" else read_only(fs)
    marker = tmp_path / "ran"
    proc = cw("run", "-n", "j", "--db", db, "--", "touch", str(marker))
    assert proc.returncode == 125 and not marker.exists()
    lines = proc.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and f"{fs}/ledger.db" in lines[0], lines
    assert ("full" if fault == "full" else "Read-only") in lines[0]


@pytest.mark.parametrize("fault", [
    "full",
    "read-only",
])
def test_unwritable_ledger_with_run_unrecorded_still_runs_the_job(cw, tmpfs, fault):
    fs = tmpfs("ledger")
    db = f"sqlite://{fs}/ledger.db"
    assert cw("run", "-n", "x", "--db", db, "--", "true").returncode == 0
    fill(fs) if fault == "full" else read_only(fs)
    proc = cw("run", "-n", "j", "--db", db, "--on-db-error", "run-unrecorded", *JOB_7)
    assert proc.returncode == 7 and proc.stdout == b"out\n", proc.stderr
    lines = cronwrap_lines(proc.stderr)
    assert len(lines) == 1 and "unrecorded" in lines[0], lines


@pytest.mark.parametrize("on_db_error", ["fail", "run-unrecorded"])
def test_full_state_dir_is_a_clear_error_or_runs_unrecorded(cw, tmpfs, tmp_path, on_db_error):
    fs = tmpfs("state")
    cw.home = fs / "home"  # ledger, locks and logs all on the full file system
    assert cw("run", "-n", "x", "--", "true").returncode == 0
    fill(fs)
    proc = cw("run", "-n", "new-job", "--on-db-error", on_db_error, *JOB_7)
    assert "internal error" not in proc.stderr.decode(), proc.stderr
    if on_db_error == "fail":
        assert proc.returncode == 125 and proc.stdout == b""
        assert len(proc.stderr.decode().strip().splitlines()) == 1
    else:
        assert proc.returncode == 7 and proc.stdout == b"out\n"


# -- the wall clock stepped between firings --------------------------------------------------

def faketime_lib() -> str:
    import libfaketime

    return os.path.join(os.path.dirname(libfaketime.__file__), "vendor", "libfaketime", "src",
                        "libfaketime.so.1")


def at(cw, when: str, *args: str):
    """cronwrap with its wall clock set to ``when`` (UTC, HH:MM:SS on 2026-03-10)."""
    return cw(*args, env={"LD_PRELOAD": faketime_lib(), "FAKETIME": f"@2026-03-10 {when}",
                          "DONT_FAKE_MONOTONIC": "1", "TZ": "UTC"})


EVERY_5 = ["--schedule", "*/5 * * * *", "--tz", "UTC", "--catchup", "all", "--max-catchup", "3"]


def test_clock_stepped_forward_and_back_never_runs_a_slot_twice_nor_floods(cw, tmp_path):
    seen = tmp_path / "seen"
    job = ["--", "sh", "-c", f"echo $CRONWRAP_RUN_KEY $CRONWRAP_TRIGGER >> {seen}"]
    firings = [
        ("10:00:02", 1, False),   # first firing: no backlog invented
        ("10:05:01", 1, False),
        ("10:20:01", 3, False),   # +10 min: 10:10 and 10:15 caught up, then 10:20
        ("13:20:01", 4, True),    # +3 h: 35 missed, 3 caught up (the cap), a warning
        ("13:10:01", 1, False),   # -10 min: 13:10 was only recorded missed: it runs now
        ("10:05:02", 0, False),   # -3 h: 10:05 already ran: nothing runs
        ("13:25:01", 1, False),   # forward again: only the new slot
        ("13:25:40", 0, False),   # the same slot again
    ]
    for when, runs, warned in firings:
        before = len(seen.read_text().splitlines()) if seen.exists() else 0
        proc = at(cw, when, "run", "-n", "c", *EVERY_5, *job)
        assert proc.returncode == 0, (when, proc.stderr)
        after = len(seen.read_text().splitlines())
        assert after - before == runs, (when, seen.read_text())
        assert (b"beyond --max-catchup 3" in proc.stderr) == warned, (when, proc.stderr)
    keys = [line.split()[0] for line in seen.read_text().splitlines()]
    assert len(keys) == len(set(keys)), Counter(keys).most_common(3)  # no slot twice
    rows = at(cw, "13:40:00", "history", "c", "--json", "--limit", "500")
    by_key = Counter(r["run_key"] for r in json.loads(rows.stdout))
    assert max(by_key.values()) == 1  # one row per slot
    ran = {r["run_key"]: r for r in json.loads(rows.stdout) if r["status"] == "succeeded"}
    assert set(ran) == set(keys) and all(r["attempt"] == 1 for r in ran.values())
    catchups = [line for line in seen.read_text().splitlines() if line.endswith("catchup")]
    assert [c.split()[0][11:16] for c in catchups] == ["10:10", "10:15", "10:25", "10:30", "10:35"]


@pytest.mark.parametrize("earlier", ["13:10:01", "10:20:01"])  # back 10 minutes, 3 hours
def test_clock_stepped_back_is_warned_about(cw, earlier):
    assert at(cw, "13:20:01", "run", "-n", "b", *EVERY_5, "--", "true").returncode == 0
    proc = at(cw, earlier, "run", "-n", "b", *EVERY_5, "--", "true")
    assert proc.returncode == 0
    assert b"clock" in proc.stderr, proc.stderr
    warnings = [e for e in events(cw.home / "logs") if e["event"] == "warning"]
    assert warnings and "clock" in warnings[-1]["message"]


# -- output: huge, binary, held open ---------------------------------------------------------

def test_five_gib_of_output_is_bounded_in_the_capture(cw, home):
    start = time.monotonic()
    proc = cw("run", "-n", "huge", "--output", "quiet", "--", "head", "-c", "5G", "/dev/zero",
              timeout=120)
    assert proc.returncode == 0 and proc.stdout == b"", proc.stderr
    assert time.monotonic() - start < 90
    (run,) = history(cw, "huge")
    size = os.path.getsize(run["log_path"])
    assert 9 << 20 <= size < 10 << 20  # the first 8 MiB, a marker, the last 1 MiB
    finish = [e for e in events(home / "logs") if e["event"] == "finish"][-1]
    assert finish["output_bytes"] == 5 << 30
    assert finish["wrapper_maxrss_kb"] < 100_000


def test_binary_output_without_newlines_passes_through_and_is_captured_exactly(cw, home):
    size = 12 << 20
    job = ("import os, sys, random\nr = random.Random(7)\nout = sys.stdout.buffer\nleft = %d\n"
           "while left:\n n = min(left, r.randrange(1, 200000))\n"
           " out.write(r.randbytes(n).replace(b'\\n', b'\\0'))\n left -= n\n" % size)
    proc = cw.popen("run", "-n", "bin", "--", "python3", "-c", job)
    data, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert len(data) == size and b"\n" not in data
    (run,) = history(cw, "bin")
    captured = Path(run["log_path"]).read_bytes()
    head, tail = 8 << 20, 1 << 20
    assert captured[:head] == data[:head] and captured.endswith(data[-tail:])
    assert b"bytes omitted" in captured[head:-tail]
    assert run["error_tail"]  # the last bytes, decoded with replacement, not a crash
    assert cw("logs", "bin", "--last").stdout == captured


@pytest.mark.parametrize("child, extra", [
    ("sleep 30", []),
    ("setsid sleep 30", []),
    ("sh -c 'trap \"\" TERM; exec sleep 30'", ["--kill-after", "0.5"]),
])
def test_job_exiting_while_a_child_holds_its_output_returns_promptly(cw, home, tmp_path, child, extra):
    pidfile = tmp_path / "child.pid"
    start = time.monotonic()
    proc = cw("run", "-n", "held", *extra, "--", "sh", "-c",
              f"{child} & echo $! > {pidfile}; echo main; exit 3", timeout=30)
    took = time.monotonic() - start
    pid = int(pidfile.read_text())
    start = start_time(pid) or 0
    try:
        assert proc.returncode == 3 and proc.stdout == b"main\n", proc.stderr
        assert took < 15, took  # not the child's 30 s (a loaded start takes seconds)
        assert not alive(pid), "the child holding the output pipe was left running"
    finally:
        kill_job(pid, start)
    finish = [e for e in events(home / "logs") if e["event"] == "finish"][-1]
    assert finish["orphans"] >= 1


def test_leave_orphans_with_a_child_holding_the_output_still_returns_promptly(cw, tmp_path):
    pidfile = tmp_path / "child.pid"
    start = time.monotonic()
    proc = cw("run", "-n", "held", "--leave-orphans", "--", "sh", "-c",
              f"sleep 30 & echo $! > {pidfile}; exit 3", timeout=30)
    took = time.monotonic() - start
    pid = int(pidfile.read_text())
    child_start = start_time(pid) or 0
    try:
        assert proc.returncode == 3 and took < 15, (proc.returncode, took)  # not 30 s
        assert alive(pid)  # left alone, as asked
    finally:
        kill_job(pid, child_start)
