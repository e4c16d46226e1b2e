"""The sentinel: a job must not outlive a wrapper that can no longer enforce its timeout.

GNU ``timeout`` asks the kernel to send the timeout signal to its child when it dies
(PR_SET_PDEATHSIG). That reaches only the direct child, and nobody sends KILL afterwards. The
sentinel does both for the job's whole session: a tiny process forked (twice, so that it is
neither the wrapper's child nor part of the job's tree) before the job starts, holding no
descriptor but the read end of a pipe whose write end only the wrapper has. The wrapper tells
it the job's PID once spawned, and "done" once the job's tree is gone. If the pipe reaches end
of file without "done", the wrapper died (SIGKILL, OOM killer, a crash): the sentinel sends
the timeout signal (and CONT) to every process of the job's session, then KILL to whatever is
left after the grace (kill-after), and exits.

What survives of the tree until then keeps the inherited flock descriptor, so the local
overlap lock holds while it lives. A descendant that left the job's session (setsid) is out
of the sentinel's reach; while the wrapper lives it is ended with the rest.
"""

from __future__ import annotations

import os
import signal
import time

POLL = 0.05
_IGNORED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
            signal.SIGUSR2, signal.SIGALRM, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU)


class Sentinel:
    """The wrapper's end: ``job(pid)`` once spawned, ``done()`` when the tree is gone."""

    def __init__(self, signum: int, grace: float) -> None:
        read_end, self._write_end = os.pipe2(os.O_CLOEXEC)
        try:
            middle = os.fork()
        except OSError:
            os.close(read_end)
            os.close(self._write_end)
            raise
        if middle == 0:  # the middle process: fork the sentinel and leave at once
            try:
                if os.fork() == 0:
                    _watch(read_end, self._write_end, signum, grace)
            finally:
                os._exit(0)
        os.close(read_end)
        os.waitpid(middle, 0)

    def job(self, pid: int) -> None:
        self._send(f"{pid}\n".encode())

    def done(self) -> None:
        """The job's tree is gone (or left running on purpose): the sentinel leaves."""
        self._send(b"done\n")
        self.close()

    def close(self) -> None:
        if self._write_end >= 0:
            os.close(self._write_end)
            self._write_end = -1

    def _send(self, data: bytes) -> None:
        if self._write_end >= 0:
            try:
                os.write(self._write_end, data)
            except OSError:
                pass  # the sentinel is gone: the job runs on as it would under GNU timeout


def _watch(read_end: int, write_end: int, signum: int, grace: float) -> None:
    """The sentinel process. Never returns."""
    try:
        _detach(read_end, write_end)
        job, done = _listen(read_end)
        if job and not done:
            _end_session(job, signum, grace)
    finally:
        os._exit(0)


def _detach(read_end: int, write_end: int) -> None:
    os.setsid()  # out of the wrapper's process group and terminal: their signals are not ours
    for signum in _IGNORED:
        signal.signal(signum, signal.SIG_IGN)
    os.close(write_end)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    # Everything else (the lock descriptor, the ledger's socket, output pipes) is the wrapper's.
    os.closerange(3, read_end)
    os.closerange(read_end + 1, os.sysconf("SC_OPEN_MAX"))


def _listen(read_end: int) -> tuple[int, bool]:
    """(job PID or 0, whether "done" came) once the pipe ends."""
    data = b""
    while chunk := os.read(read_end, 64):
        data += chunk
    words = data.split()
    job = int(words[0]) if words and words[0].isdigit() else 0
    return job, b"done" in words


def _end_session(sid: int, signum: int, grace: float) -> None:
    """The timeout signal to the job's session, then KILL after ``grace`` to what is left;
    gives up one more ``grace`` after KILL (a process in uninterruptible sleep)."""
    first = [signum] + ([signal.SIGCONT] if signum not in (signal.SIGKILL, signal.SIGCONT) else [])
    for sig in first:
        _signal_session(sid, sig)
    if not _wait_gone(sid, grace):
        _signal_session(sid, signal.SIGKILL)
        _wait_gone(sid, grace)


def _wait_gone(sid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _session(sid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL)
    return True


def _signal_session(sid: int, signum: int) -> None:
    for pid in _session(sid):
        try:
            os.kill(pid, signum)
        except OSError:
            pass


def _session(sid: int) -> list[int]:
    """Live processes of session ``sid`` (the job started a session of its own)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # fields[0] is the state, [3] the session id (stat fields 3 and 6)
        if fields[0] not in (b"Z", b"X") and int(fields[3]) == sid:
            found.append(int(name))
    return found
