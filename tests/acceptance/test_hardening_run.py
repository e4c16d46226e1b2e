"""Issue 11: what an unlucky operator or an attacker does to `cronwrap run`, through the real
executable: locks on files cronwrap did not create, containers sharing a host name, a ledger
recreated under a running job, full disks, stalled and vanished readers, odd signals, a
SIGKILLed wrapper, FIFOs where files belong, closed stdio, poisoned outbox entries, read-only
ledgers and connections dropped before the claim."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.acceptance.conftest import alive, same_minute, wait_for
from tests.acceptance.test_faults import (cronwrap_lines, events, fill, kill_wrapper, lock_busy,
                                          read_only, tmpfs)  # noqa: F401  (tmpfs: a fixture)
from tests.conftest import job_holder, until_exists


def history(cw, name: str, *args: str, env: dict | None = None) -> list[dict]:
    return cw.json("history", name, "--json", *args, env=env)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def one_line_125(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.decode(errors="replace").strip().splitlines()
    assert proc.returncode == 125 and len(lines) == 1, (proc.returncode, lines)
    return lines[0]


# -- 1. a lock file is only ever locked ------------------------------------------------------

@pytest.mark.parametrize("kind", ["flock", "pid"])
def test_locking_the_jobs_own_script_never_changes_it(cw, tmp_path, kind):
    """The `flock -n "$0"` habit: the script is its own lock file."""
    settle = tmp_path / "settle.sh"
    settle.write_text("#!/bin/sh\necho settled\nexit 0\n")
    settle.chmod(0o700)
    before = sha(settle)
    proc = cw("run", "-n", "s", "--lock", kind, "--lock-file", str(settle), "--", str(settle))
    assert (proc.returncode, proc.stdout) == (0, b"settled\n"), proc.stderr
    assert sha(settle) == before and settle.stat().st_mode & 0o777 == 0o700
    assert cw("run", "-n", "s", "--force", "--lock", kind, "--lock-file", str(settle), "--",
              str(settle)).returncode == 0  # and again: still the same script
    assert sha(settle) == before


@pytest.mark.parametrize("kind", ["flock", "pid"])
def test_locking_the_ledger_file_leaves_the_ledger_intact(cw, home, kind):
    assert cw("run", "-n", "first", "--", "true").returncode == 0
    ledger = home / "ledger.db"
    header = ledger.read_bytes()[:100]
    proc = cw("run", "-n", "j", "--lock", kind, "--lock-file", str(ledger), "--", "true")
    assert proc.returncode == 0, proc.stderr
    assert ledger.read_bytes()[:100] == header  # the file itself, not only what the WAL holds
    jobs = {j["job"]: j["last_run"]["status"] for j in cw.json("status", "--json")}
    assert jobs == {"first": "succeeded", "j": "succeeded"}


def test_a_pid_lock_file_keeps_its_content_while_held_and_after(cw, tmp_path, script):
    lock = tmp_path / "held.lock"
    lock.write_bytes(b"operator's notes\n")
    lock.chmod(0o600)
    ready, done = tmp_path / "ready", tmp_path / "done"
    first = cw.popen("run", "-n", "p", "--lock", "pid", "--lock-file", str(lock), "--",
                     script("p.sh", f"touch {ready}; {until_exists(done)}"))
    wait_for(ready.exists, what="the first run")
    try:
        assert lock.read_bytes() == b"operator's notes\n"
        busy = cw("run", "-n", "p", "--lock", "pid", "--lock-file", str(lock),
                  "--skip-exit-code", "4", "--", "true")
    finally:
        done.touch()  # the first run holds the lock until then, however slow the second is
    assert busy.returncode == 4  # the PID lock still excludes: its record is cronwrap's own
    assert first.wait(10) == 0
    assert lock.read_bytes() == b"operator's notes\n"


def test_a_hard_linked_lock_file_is_refused(cw, tmp_path):
    target = tmp_path / "precious"
    target.write_text("data\n")
    target.chmod(0o600)
    link = tmp_path / "job.lock"
    os.link(target, link)
    marker = tmp_path / "ran"
    line = one_line_125(cw("run", "-n", "j", "--lock-file", str(link), "--", "touch",
                           str(marker)))
    assert "hard link" in line and not marker.exists()
    assert target.read_text() == "data\n"


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_lock_file_that_is_not_a_regular_file_is_refused_without_hanging(cw, tmp_path, kind):
    path = tmp_path / "j.lock"
    os.mkfifo(path, 0o600) if kind == "fifo" else path.mkdir(mode=0o700)
    marker = tmp_path / "ran"
    line = one_line_125(cw("run", "-n", "j", "--lock-file", str(path), "--", "touch",
                           str(marker), timeout=20))
    assert "regular file" in line or "directory" in line.lower()
    assert not marker.exists()


# -- 2. two containers with one host name ----------------------------------------------------

def unshare_available() -> bool:
    return shutil.which("unshare") is not None and subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(not unshare_available(), reason="needs unshare --pid (root)")
@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_same_host_name_in_another_pid_namespace_never_runs_the_slot_twice(
        cw, tmp_path, backend, request):
    """The second container sees a live run by 'its' host name whose PID means nothing in its
    own namespace: it must wait for the lease, not declare the run abandoned."""
    db = (f"sqlite:///{tmp_path}/shared.db" if backend == "sqlite"
          else request.getfixturevalue("pg_dsn"))
    count = tmp_path / "count"
    started = tmp_path / "started"
    job = ["sh", "-c", f"echo run >> {count}; touch {started}; sleep 4"]
    env = {"CRONWRAP_HOST": "web1", "CRONWRAP_DB": db}
    same_minute(20)
    first = cw.popen("run", "-n", "nightly", "--", *job,
                     env={**env, "CRONWRAP_HOME": str(tmp_path / "container-a")})
    wait_for(started.exists, what="the first container's run")
    second = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", *cw.argv, "run", "-n", "nightly",
         "--skip-exit-code", "3", "--", *job],
        env=cw.env({**env, "CRONWRAP_HOME": str(tmp_path / "container-b")}),
        capture_output=True, timeout=60)
    assert second.returncode == 3, second.stderr  # skipped: the slot is held by a live lease
    assert first.wait(20) == 0
    assert count.read_text() == "run\n"
    runs = cw.json("history", "nightly", "--json", env=env)
    assert [(r["status"], r["attempt"]) for r in runs] == [("succeeded", 1)]


# -- 3. a recreated ledger never lets one run overwrite another ------------------------------

@pytest.mark.postgres
def test_a_ledger_recreated_under_a_running_job_keeps_the_new_runs_record(cw, tmp_path, pg_dsn):
    """Job A runs; the database is dropped and recreated; job B gets id 1, fence 1 — A's
    heartbeats and its finish carry id 1, fence 1 too, and must not touch B's row."""
    import psycopg

    name = pg_dsn.rsplit("/", 1)[1]
    env = {"CRONWRAP_DB": pg_dsn}
    started = tmp_path / "a-started"
    a = cw.popen("run", "-n", "a", "--lease", "3", "--", "sh", "-c", f"touch {started}; sleep 3",
                 env=env)
    wait_for(started.exists, what="job a")
    with psycopg.connect(dbname="postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    b = cw("run", "-n", "b", "--lease", "30", "--", "sh", "-c", "sleep 5; exit 5", env=env)
    assert b.returncode == 5, b.stderr  # b ran to its end: not killed by a's updates
    a.wait(30)
    (run,) = cw.json("history", "b", "--json", env=env)
    assert (run["run_id"], run["fence"]) == (1, 1)  # the very id and fence a held
    assert (run["job"], run["status"], run["exit_code"]) == ("b", "failed", 5)
    unknown = cw("history", "a", "--json", env=env)  # a's finish left nothing in the new ledger
    assert unknown.returncode == 125 and b"no such job" in unknown.stderr, unknown.stderr


# -- 4. full disks: passthrough and capture fail alone; an unrecorded end is said ------------

def test_stdout_on_a_full_device_does_not_stop_the_job(cw, tmp_path):
    done = tmp_path / "done"
    with open("/dev/full", "wb") as full:
        proc = subprocess.run([*cw.argv, "run", "-n", "j", "--", "sh", "-c",
                               f"echo first; sleep 0.2; echo second; touch {done}; exit 3"],
                              env=cw.env(), stdout=full, stderr=subprocess.PIPE, timeout=60)
    assert proc.returncode == 3, proc.stderr
    assert done.exists()  # the job ran to its end
    (run,) = history(cw, "j")
    assert (run["status"], run["exit_code"]) == ("failed", 3)
    assert cw("logs", "j").stdout == b"first\nsecond\n"  # the capture kept every byte
    finish = [e for e in events(cw.home / "logs") if e["event"] == "finish"][-1]
    assert "No space left" in finish["passthrough_error"] and finish["output_dropped"] > 0


def test_appending_to_a_log_on_a_full_disk_does_not_stop_the_job(cw, tmp_path, tmpfs):
    fs = tmpfs("varlog", "256k")
    fill(fs)
    done = tmp_path / "done"
    with open(fs / "filler", "ab") as log:  # `>> /var/log/job.log`, on a full disk
        proc = subprocess.run([*cw.argv, "run", "-n", "j", "--", "sh", "-c",
                               f"echo a line; touch {done}; exit 0"],
                              env=cw.env(), stdout=log, stderr=subprocess.PIPE, timeout=60)
    assert proc.returncode == 0 and done.exists(), proc.stderr
    assert history(cw, "j")[0]["status"] == "succeeded"


def test_a_result_neither_recorded_nor_spooled_is_said_on_stderr(cw, tmp_path, tmpfs):
    """Ledger, outbox and logs on one file system that the job fills: the end cannot be
    recorded nor kept; stderr says so, no half-written .tmp is left, the status is the job's."""
    fs = tmpfs("state", "2m")
    env = {"CRONWRAP_HOME": str(fs)}
    assert cw("run", "-n", "warm", "--", "true", env=env).returncode == 0
    proc = cw("run", "-n", "j", "--", "sh", "-c",
              f"head -c 10000000 /dev/zero > {fs}/filler 2>/dev/null; exit 7", env=env)
    assert proc.returncode == 7
    lines = cronwrap_lines(proc.stderr)
    assert any("could not record the end of run" in l and "outbox" in l for l in lines), lines
    assert not list(fs.rglob("*.tmp"))


# -- 5. a stalled reader never defeats the hard timeout --------------------------------------

YES_50MB = ["sh", "-c", "yes | head -c 50000000; sleep 100"]


@pytest.mark.parametrize("reader", ["never reads", "reads late"])
def test_a_stalled_reader_does_not_delay_the_timeout(cw, reader):
    proc = cw.popen("run", "-n", "j", "--timeout", "2", "--kill-after", "1", "--", *YES_50MB,
                    stderr=subprocess.DEVNULL)
    try:
        if reader == "reads late":
            time.sleep(0.5)
            proc.stdout.read(4096)  # took a little, then stalls for good
        assert proc.wait(timeout=30) == 124  # a hung wrapper would hit this timeout instead
    finally:
        kill_wrapper(proc)
        proc.stdout.close()
    finish = [e for e in events(cw.home / "logs") if e["event"] == "timeout"][-1]
    assert finish["output_dropped"] > 0 and finish["output_bytes"] >= finish["output_dropped"]
    (run,) = history(cw, "j")
    assert run["status"] == "timeout"


def test_a_slow_reader_still_gets_every_byte(cw, tmp_path):
    """Back-pressure, not loss: a reader slower than the job gets all of its output."""
    data = tmp_path / "data"
    data.write_bytes(os.urandom(8 << 20))
    proc = cw.popen("run", "-n", "j", "--", "cat", str(data), stderr=subprocess.DEVNULL)
    got = hashlib.sha256()
    time.sleep(1.0)  # the reader starts late; the wrapper buffers and the job waits meanwhile
    while chunk := proc.stdout.read(65536):
        got.update(chunk)
    assert proc.wait(30) == 0
    assert got.hexdigest() == sha(data)
    finish = [e for e in events(cw.home / "logs") if e["event"] == "finish"][-1]
    assert finish["output_dropped"] == 0


# -- 6. a reader that went away is seen by the job -------------------------------------------

def test_a_vanished_reader_gives_the_job_sigpipe_at_once(cw):
    proc = cw.popen("run", "-n", "y", "--timeout", "20", "--", "yes", stderr=subprocess.DEVNULL)
    assert proc.stdout.readline() == b"y\n"
    proc.stdout.close()  # `| head -1`
    assert proc.wait(timeout=15) == 128 + signal.SIGPIPE  # not 124 after 20 s
    (run,) = history(cw, "y")
    assert run["signal"] == signal.SIGPIPE


# -- 7. signals that would kill the wrapper are forwarded to the job -------------------------

ODD_SIGNALS = ["SIGALRM", "SIGXCPU", "SIGPROF", "SIGIO", "SIGPWR", "SIGSYS", "SIGRTMIN"]


@pytest.mark.parametrize("name", ODD_SIGNALS)
def test_terminating_signals_are_forwarded_and_supervision_goes_on(cw, tmp_path, name):
    signum = getattr(signal, name)
    ready = tmp_path / "ready"
    got = tmp_path / "got"
    job = ["sh", "-c", f"trap 'echo got > {got}; exit 9' {signum}; touch {ready}; "
                       "while :; do sleep 0.1; done"]
    proc = cw.popen("run", "-n", "j", "--", *job)
    try:
        wait_for(ready.exists, what="the job")
        proc.send_signal(signum)
        assert proc.wait(timeout=20) == 9  # the wrapper lived on and returned the job's status
    finally:
        kill_wrapper(proc)
    assert got.read_text() == "got\n"
    finish = [e for e in events(cw.home / "logs") if e["event"] == "finish"][-1]
    assert finish["forwarded"] == [signum]


def test_vtalrm_is_the_wrappers_own_and_neither_ends_it_nor_reaches_the_job(cw, tmp_path):
    """VTALRM times cronwrap's own regular expressions (deadline.py); one sent from outside
    is dropped."""
    ready = tmp_path / "ready"
    got = tmp_path / "got"
    job = ["sh", "-c", f"trap 'echo got > {got}; exit 9' VTALRM; touch {ready}; sleep 1; exit 4"]
    proc = cw.popen("run", "-n", "j", "--", *job)
    try:
        wait_for(ready.exists, what="the job")
        proc.send_signal(signal.SIGVTALRM)
        assert proc.wait(timeout=20) == 4
    finally:
        kill_wrapper(proc)
    assert not got.exists()


def test_job_control_signals_do_not_stop_the_wrapper(cw, tmp_path):
    ready = tmp_path / "ready"
    proc = cw.popen("run", "-n", "j", "--timeout", "3", "--", "sh", "-c",
                    f"touch {ready}; sleep 30")
    try:
        wait_for(ready.exists, what="the job")
        for sig in (signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU):
            proc.send_signal(sig)
        assert proc.wait(timeout=20) == 124  # still supervising: the timeout fired
    finally:
        kill_wrapper(proc)


# -- 8. a SIGKILLed wrapper's job gets the timeout signal, then KILL -------------------------

def test_the_job_of_a_killed_wrapper_gets_the_timeout_signal(cw, tmp_path):
    """(Its stdout and stderr have no reader any more: a write there would end it with
    SIGPIPE, so this job, like sh's "Terminated" notice, writes elsewhere.)"""
    ready, got = tmp_path / "ready", tmp_path / "got"
    job = ["sh", "-c", f"exec 2>/dev/null; trap 'echo TERM > {got}; exit 0' TERM; "
                       f"touch {ready}; while :; do sleep 0.1; done"]
    proc = cw.popen("run", "-n", "j", "--timeout", "1h", "--", *job)
    wait_for(ready.exists, what="the job")
    _, _, job_pid, _ = job_holder(cw.home, "j")
    proc.kill()
    proc.wait(10)
    wait_for(lambda: not alive(job_pid), timeout=15, what="the orphaned job to end")
    assert got.read_text() == "TERM\n"


def test_survivors_of_a_killed_wrapper_keep_the_lock_until_kill_after(cw, tmp_path):
    same_minute(20)
    ready = tmp_path / "ready"
    job = ["sh", "-c", f"trap '' TERM; touch {ready}; sleep 60"]  # ignores the timeout signal
    # --kill-after leaves the next firing room to start on a loaded machine (it took seconds)
    proc = cw.popen("run", "-n", "j", "--timeout", "1h", "--kill-after", "8", "--", *job)
    wait_for(ready.exists, what="the job")
    _, _, job_pid, _ = job_holder(cw.home, "j")
    proc.kill()
    proc.wait(10)
    assert alive(job_pid) and lock_busy(cw.home / "locks" / "j.lock")
    skipped = cw("run", "-n", "j", "--skip-exit-code", "9", "--", "true")
    assert skipped.returncode == 9  # the survivor still holds the local lock
    wait_for(lambda: not alive(job_pid), timeout=30, what="KILL after --kill-after")
    # the job's sleep (same session) holds the descriptor a moment longer than sh
    wait_for(lambda: not lock_busy(cw.home / "locks" / "j.lock"), timeout=20,
             what="the last survivor to let the lock go")


# -- 9. FIFOs where files belong -------------------------------------------------------------

@pytest.mark.parametrize("where", ["logs/events.jsonl", "logs/j/1.1.log"])
def test_a_fifo_where_a_log_file_belongs_does_not_hang_the_wrapper(cw, home, tmp_path, where):
    path = home / where
    path.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
    for d in (home, home / "logs", path.parent):
        d.chmod(0o700)
    os.mkfifo(path, 0o600)
    marker = tmp_path / "ran"
    proc = cw("run", "-n", "j", "--", "sh", "-c", f"touch {marker}; exit 4", timeout=30)
    assert proc.returncode == 4 and marker.exists(), proc.stderr
    assert any("regular file" in l for l in cronwrap_lines(proc.stderr))
    later = cw("run", "-n", "j2", "--", "true", timeout=30)  # and every later firing too
    assert later.returncode == 0


# -- 11. closed stdio ------------------------------------------------------------------------

@pytest.mark.parametrize("closed", ["0<&-", "1>&-", "2>&-", "1>&- 2>&-"])
def test_closed_stdio_still_gives_the_jobs_own_status(cw, home, closed):
    command = " ".join([*(f"'{a}'" for a in cw.argv), "run", "-n", "j", "--", "sh", "-c",
                        "'echo out; echo err >&2; exit 3'", closed])
    proc = subprocess.run(["sh", "-c", command], env=cw.env(), capture_output=True, timeout=60)
    assert proc.returncode == 3, proc.stderr
    (run,) = history(cw, "j")  # the ledger was not written over by the job's output
    assert (run["status"], run["exit_code"]) == ("failed", 3)
    assert b"out" not in (home / "locks" / "j.lock").read_bytes()


# -- 15. one bad outbox entry never stops the host's jobs ------------------------------------

@pytest.mark.parametrize("content", [b"{}", b"[]", b"null", b'{"job": "x"', b"\xff\xfe",
                                     b'{"job": "j", "run_id": 1, "fence": 1, "finish": {}}'])
def test_a_bad_outbox_entry_is_quarantined_and_the_job_runs(cw, home, content):
    from cronwrap.run.outbox import ledger_id

    box = home / "outbox"
    box.mkdir(parents=True, mode=0o700)
    home.chmod(0o700)
    entry = box / f"{ledger_id(None)}-1-1.json"
    entry.write_bytes(content)
    entry.chmod(0o600)
    proc = cw("run", "-n", "j", "--", "sh", "-c", "exit 6")
    assert proc.returncode == 6, proc.stderr
    lines = cronwrap_lines(proc.stderr)
    assert len(lines) == 1 and "outbox entry" in lines[0], lines
    assert not entry.exists() and (box / "bad" / entry.name).read_bytes() == content
    again = cw("run", "-n", "k", "--", "true")
    assert again.returncode == 0 and not cronwrap_lines(again.stderr)  # said once


# -- 17. read commands on a read-only or full disk -------------------------------------------

@pytest.mark.parametrize("fault", ["read-only", "full"])
def test_read_commands_work_on_a_read_only_or_full_ledger(cw, tmpfs, fault):
    fs = tmpfs("ledger", "1m")
    db = f"sqlite://{fs}/ledger.db"
    assert cw("run", "-n", "ok", "--db", db, "--", "true").returncode == 0
    assert cw("run", "-n", "bad", "--db", db, "--", "sh", "-c", "exit 2").returncode == 2
    import sqlite3  # closed cleanly, as after a checkpoint: no -wal or -shm file left behind

    conn = sqlite3.connect(fs / "ledger.db")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    assert not (fs / "ledger.db-shm").exists()
    fill(fs) if fault == "full" else read_only(fs)
    jobs = {j["job"]: j["last_run"]["status"] for j in cw.json("status", "--json", "--db", db)}
    assert jobs == {"ok": "succeeded", "bad": "failed"}
    assert [r["status"] for r in cw.json("history", "bad", "--json", "--db", db)] == ["failed"]
    check = cw("status", "--check", "--db", db)
    assert check.returncode == 2 and b"bad" in check.stdout  # CRITICAL, not UNKNOWN
    assert cw("status", "--db", db).returncode == 0


# -- 18. a connection dropped before the claim is retried ------------------------------------

def terminate_backends(dsn: str) -> int:
    import psycopg

    name = dsn.rsplit("/", 1)[1]
    with psycopg.connect(dbname="postgres", autocommit=True) as conn:
        return conn.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                            "WHERE datname = %s AND application_name = 'cronwrap'",
                            (name,)).fetchone()[0]


@pytest.mark.postgres
def test_a_connection_ended_before_the_catchup_read_is_retried(cw, pg_dsn, tmp_path):
    from tests.acceptance.test_faults import stop_when_stopped

    marker = tmp_path / "ran"
    proc = cw.popen("run", "-n", "j", "--schedule", "* * * * *", "--", "touch", str(marker),
                    env={"CRONWRAP_DB": pg_dsn, "CRONWRAP_FAILPOINT": "after_connect"})
    try:
        stop_when_stopped(proc, "after_connect")
        assert terminate_backends(pg_dsn) == 1
        proc.send_signal(signal.SIGCONT)
        assert proc.wait(30) == 0, proc.stderr.read()
    finally:
        kill_wrapper(proc)
    assert marker.exists()
    assert history(cw, "j", env={"CRONWRAP_DB": pg_dsn})[0]["status"] == "succeeded"


@pytest.mark.postgres
def test_jitter_holds_no_connection_that_the_server_could_end(cw, pg_dsn, tmp_path):
    import psycopg

    name = pg_dsn.rsplit("/", 1)[1]
    cw("run", "-n", "warm", "--", "true", env={"CRONWRAP_DB": pg_dsn}, check_rc=0)
    with psycopg.connect(dbname="postgres", autocommit=True) as conn:
        conn.execute(f"ALTER DATABASE \"{name}\" SET idle_session_timeout = '200ms'")
    marker = tmp_path / "ran"
    proc = cw("run", "-n", "j", "--jitter", "3", "--schedule", "* * * * *", "--", "touch",
              str(marker), env={"CRONWRAP_DB": pg_dsn})
    assert proc.returncode == 0, proc.stderr
    assert marker.exists()
