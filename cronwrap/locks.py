"""Overlap locks: a kernel ``flock`` (default) or a PID file, both on a private lock file.

The lock file holds ``WRAPPER_PID WRAPPER_START JOB_PID JOB_START`` so that ``--overlap
replace`` and ``status`` can name the holder, and a PID lock can tell a live holder from a
stale one (dead PID, or a PID now used by another process: start time differs).

flock choice: the descriptor is handed to the job (as ``flock(1)`` does), so even a SIGKILL of
the wrapper cannot leave the job running unlocked: the kernel releases the lock only when the
last process of the job's tree holding it is gone. PR_SET_PDEATHSIG was rejected because it
reaches only the direct child: grandchildren would keep running without the lock.
"""

from __future__ import annotations

import fcntl
import os
import signal
import time
from pathlib import Path

from cronwrap import procs
from cronwrap.errors import LockError
from cronwrap.paths import open_private
from cronwrap.record import Record

POLL = 0.05


class Holder(Record):
    """Who holds a lock: the wrapper and its job, each by PID and start time."""

    __slots__ = ("pid", "start", "job_pid", "job_start")

    def alive(self) -> bool:
        return procs.is_alive(self.pid, self.start) or procs.is_alive(self.job_pid, self.job_start)


def _read_holder(fd: int) -> Holder | None:
    raw = os.pread(fd, 200, 0).split()
    try:
        values = [int(x) for x in raw[:4]]
    except ValueError:
        return None
    return Holder(*values) if len(values) == 4 else None


def _write_holder(fd: int, job_pid: int = 0, job_start: int = 0) -> bool:
    """Name the holder in the lock file; False when the disk refused (full, read-only)."""
    pid, start = procs.self_identity()
    data = f"{pid} {start} {job_pid} {job_start}\n".encode()
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
    except OSError:
        return False
    return True


class FlockLock:
    """Held while the wrapper or any process of the job that inherited ``fd`` lives."""

    kind = "flock"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = open_private(path)
        self.stale: Holder | None = None
        self.unnamed = False

    def try_acquire(self) -> bool:
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        # The kernel lock is what excludes; a holder record the disk refused only costs
        # --overlap replace its target.
        self.unnamed = not _write_holder(self.fd)
        return True

    def holder(self) -> Holder | None:
        return _read_holder(self.fd)

    @property
    def fd_for_job(self) -> int | None:
        return self.fd

    def set_job(self, job_pid: int, job_start: int) -> None:
        _write_holder(self.fd, job_pid, job_start)

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # the file stays: unlinking a flock file races with a new holder
            self.fd = -1


class PidLock:
    """A lock file naming its holder; checked and written under a brief flock for atomicity."""

    kind = "pid"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = open_private(path)
        self.stale: Holder | None = None
        self.held = False

    def try_acquire(self) -> bool:
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            current = _read_holder(self.fd)
            if current is not None and current.alive():
                return False
            self.stale = current
            if not _write_holder(self.fd):  # for a PID lock the record is the lock
                raise LockError(f"cannot write the lock file {self.path}: the disk is full or "
                                "read-only; free space or use --lock flock")
            self.held = True
            return True
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)

    def holder(self) -> Holder | None:
        return _read_holder(self.fd)

    @property
    def fd_for_job(self) -> int | None:
        return None

    def set_job(self, job_pid: int, job_start: int) -> None:
        _write_holder(self.fd, job_pid, job_start)

    def release(self) -> None:
        if self.fd < 0:
            return
        if self.held:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            current = _read_holder(self.fd)
            if current is not None and current.pid == os.getpid():
                os.ftruncate(self.fd, 0)
            fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
        self.fd = -1


Lock = FlockLock | PidLock


def open_lock(kind: str, path: Path) -> Lock:
    return FlockLock(path) if kind == "flock" else PidLock(path)


def acquire_waiting(lock: Lock, wait: float, monotonic=time.monotonic) -> bool:
    """Try until ``wait`` seconds have passed (0 = wait forever)."""
    deadline = monotonic() + wait if wait > 0 else None
    while not lock.try_acquire():
        if deadline is not None and monotonic() >= deadline:
            return False
        time.sleep(POLL)
    return True


def replace_holder(lock: Lock, sig: int, grace: float) -> bool:
    """End the running instance (its wrapper forwards ``sig`` to its tree), then take the lock.

    After ``grace`` seconds the holder's wrapper and its job's process group get KILL.
    """
    holder = lock.holder()
    if holder is not None and holder.alive():
        _signal(holder.pid, holder.start, sig)
        if acquire_waiting(lock, grace):
            return True
        _signal(holder.pid, holder.start, signal.SIGKILL)
        if procs.is_alive(holder.job_pid, holder.job_start):
            _killpg(holder.job_pid, signal.SIGKILL)
    return acquire_waiting(lock, max(grace, 5.0))


def _signal(pid: int, start: int, sig: int) -> None:
    if procs.is_alive(pid, start):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass
