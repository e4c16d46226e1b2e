"""The sentinel: a job must not outlive a wrapper that can no longer enforce its timeout.

GNU ``timeout`` asks the kernel to send the timeout signal to its child when it dies
(PR_SET_PDEATHSIG). That reaches only the direct child, and nobody sends KILL afterwards. The
sentinel does both for the job's whole session: a tiny process forked (twice, so that it is
neither the wrapper's child nor part of the job's tree) before the job starts, holding no
descriptor but the read end of a pipe whose write end only the wrapper has. The wrapper tells
it the job's PID and start time once spawned, and "done" once the job's tree is gone. If the
pipe reaches end of file without "done", the wrapper died (SIGKILL, OOM killer, a crash): the
sentinel ends the job's tree as a timeout would (procs.Tree.end: the timeout signal and CONT,
KILL after the grace, kill-after) and exits.

What survives of the tree until then keeps the inherited flock descriptor, so the local
overlap lock holds while it lives. The sentinel finds the job's session and the descendants of
its members; a descendant that left the session (setsid) and whose parent has exited is out of
its reach (while the wrapper lives, it is ended with the rest).
"""

from __future__ import annotations

import os
import signal

from cronwrap import procs

_IGNORED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
            signal.SIGUSR2, signal.SIGALRM, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU)


class Sentinel:
    """The wrapper's end: ``job(process)`` once spawned, ``done()`` when the tree is gone."""

    def __init__(self, signum: int, grace: float) -> None:
        read_end, self._write_end = procs.pipe()
        try:
            procs.fork_away(lambda: _watch(read_end, self._write_end, signum, grace))
        except OSError:
            os.close(self._write_end)
            raise
        finally:
            os.close(read_end)

    def job(self, job: procs.ProcessId) -> None:
        self._send(f"{job.pid} {job.start_time}\n".encode())

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
    """The sentinel process."""
    _detach(read_end, write_end)
    job, done = _listen(read_end)
    if job is not None and not done:
        procs.Tree(job).end(signum, grace)


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


def _listen(read_end: int) -> tuple[procs.ProcessId | None, bool]:
    """(the job, if it was started; whether "done" came) once the pipe ends."""
    data = b""
    while chunk := os.read(read_end, 64):
        data += chunk
    words = data.split()
    started = len(words) >= 2 and words[0].isdigit() and words[1].isdigit()
    job = procs.ProcessId(int(words[0]), int(words[1])) if started else None
    return job, b"done" in words
