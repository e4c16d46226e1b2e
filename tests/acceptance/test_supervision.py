"""Supervision is never hostage (issue 20): whatever the job's output, its signals, the
process cronwrap runs as (a container's PID 1) or the death of the wrapper, the timeout, the
KILL, the lease and the job's signal dispositions hold. Through the installed executable."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.acceptance.conftest import alive, same_minute, wait_for
from tests.acceptance.test_faults import kill_wrapper
from tests.conftest import job_holder
from tests.needs import missing


def history(cw, name: str, env: dict | None = None) -> list[dict]:
    return cw.json("history", name, "--json", env=env)


# -- output that is slow to redact -----------------------------------------------------------
# Each built-in pattern fed a mebibyte of what makes a naive pattern slow (a long run of
# candidate starts that never complete: one line of 'eyJ'*87000 took 74 s of wrapper CPU), and
# an operator's catastrophic pattern fed the lines it backtracks on: the timeout still fires
# on time and the lease is renewed all along.

ADVERSARIAL = r"""
import sys, time
out = sys.stdout.buffer
mib = 1 << 20
for shape in (b"eyJ", b"://u:", b"passw", b"bearer ", b"AKIA", b"xoxb-",
              b"-----BEGIN RSA PRIVATE KEY-----\n"):
    line = shape * (mib // 2 // len(shape))
    out.write(line + b"\n" + line + b"\n")
out.write((b"x" * 40 + b"\n") * (mib // 41))
out.flush()
time.sleep(float(sys.argv[1]))
"""
# Polynomial on a line of x: no nested repetition or overlapping alternatives for
# --redact's check to refuse, so only its CPU deadline bounds it.
HOSTILE = "x*x*x*x*y"


def adversarial_job(sleep: float) -> list[str]:
    return ["--redact", HOSTILE, "--", sys.executable, "-c", ADVERSARIAL, str(sleep)]


def test_output_that_is_slow_to_redact_never_delays_the_timeout(cw):
    started = time.monotonic()
    proc = cw("run", "-n", "adv", "--timeout", "2", "--kill-after", "1", "--output", "quiet",
              *adversarial_job(60), timeout=120)
    took = time.monotonic() - started
    assert proc.returncode == 124, proc.stderr[-2000:]
    assert took < 30  # the job writes for 60 s: a supervisor held by the redaction waits for it
    (run,) = history(cw, "adv")
    assert (run["status"], run["exit_code"]) == ("timeout", 124)


@pytest.mark.postgres
def test_output_that_is_slow_to_redact_never_lets_the_lease_lapse(cw, pg_dsn):
    """With a 3 s lease, a job that runs 8 s while its output is being redacted keeps its
    slot: another host that fires the same minute is refused all along, and the run ends
    succeeded, never lease_lost."""
    same_minute(25)
    env = {"CRONWRAP_DB": pg_dsn}
    first = cw.popen("run", "-n", "adv", "--host", "a", "--lease", "3s", "--output", "quiet",
                     *adversarial_job(8), env=env)
    try:
        # a has claimed the slot and spawned its job (its start took seconds under load)
        job_holder(cw.home, "adv", timeout=60)
        for _ in range(3):
            time.sleep(2.5)
            other = cw("run", "-n", "adv", "--host", "b", "--skip-exit-code", "3", "--",
                       "true", env=env)
            assert other.returncode == 3, other.stderr  # the slot's lease is live: skipped
        assert first.wait(timeout=60) == 0, first.stderr.read()[-2000:]
    finally:
        kill_wrapper(first)
    runs = history(cw, "adv", env=env)
    assert [(r["status"], r["host"], r["attempt"]) for r in runs if r["status"] != "skipped"] \
        == [("succeeded", "a", 1)]


# -- PID 1 of a container -------------------------------------------------------------------
# Both ways a container is started: with a /proc of its own (what Docker and Kubernetes give
# an entrypoint), and with the host's /proc, whose PIDs are not the container's.

PID1 = {"own-proc": ["unshare", "--kill-child", "--pid", "--fork", "--mount-proc"],
        "host-proc": ["unshare", "--kill-child", "--pid", "--fork"]}


@pytest.fixture(params=sorted(PID1))
def as_pid1(request) -> list[str]:
    prefix = PID1[request.param]
    probe = subprocess.run([*prefix, "sh", "-c", "test $$ = 1"], capture_output=True)
    if probe.returncode != 0:
        missing(f"cannot start a PID namespace ({probe.stderr.decode().strip()})",
                "PID 1 tests (they need root and unshare)")
    return prefix


def run_as_pid1(cw, prefix: list[str], *args: str) -> tuple[int, float, bytes]:
    started = time.monotonic()
    proc = subprocess.run([*prefix, *cw.argv, "run", *args], env=cw.env(),
                          capture_output=True, timeout=30)
    return proc.returncode, time.monotonic() - started, proc.stderr


def test_as_pid1_a_job_that_ends_at_once_ends_the_wrapper_at_once(cw, as_pid1):
    """It used to wait forever (host /proc) or 5 s (own /proc): its own helper process,
    re-parented to it, was taken for a leftover of the job."""
    rc, took, err = run_as_pid1(cw, as_pid1, "-n", "p", "--", "true")
    assert rc == 0, err
    assert took < 4.5  # not the 5 s (or the forever) of a helper taken for a leftover
    assert [r["status"] for r in history(cw, "p")] == ["succeeded"]
    finish = [e for e in events(cw) if e["event"] == "finish"][-1]
    assert not finish.get("orphans"), finish  # nothing of cronwrap's own was counted as the job's


def test_as_pid1_a_timeout_is_124(cw, as_pid1):
    rc, took, err = run_as_pid1(cw, as_pid1, "-n", "p", "--timeout", ".1", "--", "sleep", "10")
    assert rc == 124, err
    assert took < 8.0  # not the job's 10 s
    (run,) = history(cw, "p")
    assert (run["status"], run["exit_code"]) == ("timeout", 124)


def test_as_pid1_leftovers_are_still_ended_and_counted(cw, as_pid1, tmp_path):
    """As PID 1 with either /proc, the job's tree is still found: an orphan that left the
    session and ignores TERM is KILLed and counted, never taken for cronwrap's own."""
    rc, took, err = run_as_pid1(
        cw, as_pid1, "-n", "p", "--kill-after", "0.5", "--", "sh", "-c",
        "setsid sh -c 'trap \"\" TERM; sleep 30' & sleep 0.3; exit 3")
    assert rc == 3, err
    assert took < 10.0
    finish = [e for e in events(cw) if e["event"] == "finish"][-1]
    assert finish["orphans"] >= 1


def events(cw) -> list[dict]:
    from cronwrap.run.runlog import read_events

    return read_events(cw.home / "logs")


# -- signal dispositions ---------------------------------------------------------------------

def test_a_signal_ignored_at_start_stays_ignored_for_the_wrapper_and_the_job(cw, tmp_path):
    """`nohup cronwrap run … &` over SSH, then the session hangs up: GNU timeout keeps the
    ignored disposition (coreutils tests/timeout/timeout-group), and so does cronwrap."""
    ready = tmp_path / "ready"
    done = tmp_path / "done"
    proc = subprocess.Popen(
        ["nohup", *cw.argv, "run", "-n", "h", "--", "sh", "-c",
         f"touch {ready}; sleep 1; echo done > {done}"],
        env=cw.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        wait_for(ready.exists, what="the job")
        os.killpg(proc.pid, signal.SIGHUP)
        assert proc.wait(timeout=20) == 0
    finally:
        kill_wrapper(proc)
    assert done.read_text() == "done\n"
    (run,) = history(cw, "h")
    assert run["status"] == "succeeded"


def test_a_signal_not_ignored_at_start_is_still_forwarded(cw, tmp_path):
    ready = tmp_path / "ready"
    proc = cw.popen("run", "-n", "h", "--", "sh", "-c", f"touch {ready}; sleep 30")
    try:
        wait_for(ready.exists, what="the job")
        proc.send_signal(signal.SIGHUP)
        assert proc.wait(timeout=20) == 128 + signal.SIGHUP
    finally:
        kill_wrapper(proc)


# -- process groups and sessions ------------------------------------------------------------
# Under cron (no controlling terminal) the keeper and the job each lead a process group of
# their own in the wrapper's session: setsid(2) would cost each ~3.4 ms where the scheduler's
# autogroups are on. Run by hand in a terminal, the keeper leaves the terminal's session.

IDS = ("import os; k = os.getppid(); "
       "print(os.getpid(), os.getpgid(0), os.getsid(0), k, os.getpgid(k), os.getsid(k))")


def test_without_a_terminal_the_keeper_and_the_job_lead_groups_of_their_own(cw):
    wrapper = cw.popen("run", "-n", "ids", "--", sys.executable, "-c", IDS,
                       start_new_session=True)  # no terminal; the wrapper leads its session
    out, err = wrapper.communicate(timeout=60)
    assert wrapper.returncode == 0, err
    job, job_group, job_session, keeper, keeper_group, keeper_session = map(int, out.split())
    assert (job_group, keeper_group) == (job, keeper)  # a KILL of the wrapper's group misses both
    assert job_session == keeper_session == wrapper.pid  # and no setsid was paid for


def test_run_by_hand_in_a_terminal_the_job_reads_it_and_gets_ctrl_c_once_forwarded(cw):
    """The keeper leaves the terminal's session, so the job, though not in the foreground
    process group, is not stopped for reading the terminal (SIGTTIN), and the terminal's
    Ctrl-C reaches it once, through the wrapper."""
    import pty
    import select

    job = ("import os, signal, sys, time; k = os.getppid()\n"
           "print(f'keeper leads its session: {os.getsid(k) == k}', flush=True)\n"
           "print(f'read: {sys.stdin.readline().strip()}', flush=True)\n"
           "got = []\n"
           "signal.signal(signal.SIGINT, lambda *a: got.append(1))\n"
           "print('waiting', flush=True)\n"
           "while not got: time.sleep(0.01)\n"
           "time.sleep(0.5)\n"  # a second INT, had there been one, comes in this time
           "print(f'interrupts: {len(got)}', flush=True)\n"
           "sys.exit(7)\n")
    pid, master = pty.fork()  # the child leads a session whose terminal is the pty
    if pid == 0:
        try:
            os.execve(cw.argv[0], [*cw.argv, "run", "-n", "tty", "--", sys.executable, "-c",
                                   job], cw.env())
        finally:
            os._exit(127)
    out = b""

    def seen(text: bytes) -> bool:
        nonlocal out
        try:
            if select.select([master], [], [], 0.1)[0]:
                out += os.read(master, 65536)
        except OSError:  # EIO: the terminal's last holder closed it
            pass
        return text in out

    try:
        wait_for(lambda: seen(b"session: ") and b"\n" in out.split(b"session: ")[1],
                 timeout=30, what="the job")
        os.write(master, b"typed\n")
        wait_for(lambda: seen(b"waiting\r\n"), timeout=30, what="the job to read the terminal")
        os.write(master, b"\x03")  # Ctrl-C: SIGINT to the terminal's foreground group
        _, status = os.waitpid(pid, 0)
        seen(b"")  # what is left in the pty's buffer
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.close(master)
    assert b"keeper leads its session: True\r\n" in out and b"read: typed\r\n" in out, out
    assert b"interrupts: 1\r\n" in out, out
    assert os.waitstatus_to_exitcode(status) == 7


# -- the wrapper SIGKILLed -------------------------------------------------------------------

@pytest.mark.parametrize("victim", ["wrapper", "its process group"])
def test_a_term_ignoring_descendant_that_left_the_session_is_killed_after_the_wrapper_dies(
        cw, tmp_path, victim):
    """The keeper KILLs, after the grace, every process it sent TERM to, even one that left
    the job's session and whose parent has died (it is then nobody's descendant it can find),
    so the flock it inherited is released and the next firing runs."""
    pid_file = tmp_path / "pid"
    job = (f"setsid sh -c 'trap \"\" TERM HUP; echo $$ > {pid_file}; exec sleep 40' & wait")
    wrapper = cw.popen("run", "-n", "g", "--kill-after", "1", "--", "sh", "-c", job,
                       start_new_session=True)
    try:
        descendant = int(wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(),
                                  what="the descendant"))
        if victim == "its process group":  # a service manager's stop, an outer timeout -s KILL
            os.killpg(wrapper.pid, signal.SIGKILL)
    finally:
        kill_wrapper(wrapper)
    wait_for(lambda: not alive(descendant), timeout=15, what="the descendant's end")
    assert cw("run", "-n", "g", "--", "true").returncode == 0
    assert [r["status"] for r in history(cw, "g")][0] == "succeeded"  # ran: the lock was free
