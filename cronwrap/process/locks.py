"""Overlap locks: a kernel ``flock`` (default) or a PID lock, on a lock file cronwrap only locks.

A lock file is never written: it may be the job's own script (the ``flock -n "$0"`` habit) or
any file an operator names with ``--lock-file``, and flock(1) never writes its file either.
It is opened read-only, without following a symlink, and refused when it is not a regular file
or has other hard links (another name of it could be anything).

Who holds the lock is kept apart, in cronwrap's own holder file in its private lock directory
(``HOLDERS/DEV-INODE``, one per lock file): ``WRAPPER_PID WRAPPER_START JOB_PID JOB_START BOOT_ID
PID_NS``, so that ``--overlap replace`` can name the holder and a PID lock can tell a live
holder from a stale one (dead PID, a PID now used by another process, an earlier boot).

flock: the descriptor is handed to the job (as ``flock(1)`` does), so the kernel releases the
lock only when the last process of the job's tree holding it is gone, even after a SIGKILL of
the wrapper (whose job then gets the timeout signal from its keeper, keeper.py).
pid: the holder file is the lock; it is checked and written under a brief flock of the lock file.
"""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import time

from cronwrap.errors import LockError, PathError
from cronwrap.paths import check_dir, ensure_private_dir, file_name, open_private
from cronwrap.process import procs
from cronwrap.record import TYPE_CHECKING, Record

if TYPE_CHECKING:
    from typing import Callable

POLL = 0.05
HOLDERS = "holders"


class Holder(Record):
    """Who holds a lock: the wrapper and its job, each by PID and start time, and where those
    PIDs mean something (boot ID, PID namespace; "" / 0 when unknown)."""

    pid: int
    start: int
    job_pid: int
    job_start: int
    boot_id: str
    pid_ns: int
    _defaults = dict(boot_id="", pid_ns=0)

    def alive(self, here: procs.Runner | None = None) -> bool:
        """A holder of another boot is gone; one whose PIDs cannot be checked from here
        (another PID namespace) counts as alive: only its own runner can tell."""
        here = here or procs.Runner("")
        if self.boot_id and here.boot_id and self.boot_id != here.boot_id:
            return False
        if not here.same_namespace(self.boot_id, self.pid_ns):
            return True
        return procs.is_alive(self.pid, self.start) or procs.is_alive(self.job_pid, self.job_start)

    def line(self) -> str:
        return f"{self.pid} {self.start} {self.job_pid} {self.job_start} {self.boot_id} {self.pid_ns}\n"

    @classmethod
    def parse(cls, text: str) -> Holder | None:
        words = text.split()
        if len(words) != 6 or not all(w.isascii() and w.isdigit() for w in words[:4] + words[5:]):
            return None
        return cls(*(int(w) for w in words[:4]), boot_id=words[4], pid_ns=int(words[5]))


class HolderFile:
    """cronwrap's own record of a lock's holder, written whole (temp file + rename)."""

    def __init__(self, lock_dir: str, lock_fd: int) -> None:
        info = os.fstat(lock_fd)
        self.dir = os.path.join(lock_dir, HOLDERS)
        self.path = os.path.join(self.dir, f"{info.st_dev}-{info.st_ino}")

    def read(self) -> Holder | None:
        try:
            fd = open_private(self.path, os.O_RDONLY)
        except Exception:  # missing, or not ours: no holder is known
            return None
        try:
            return Holder.parse(os.read(fd, 512).decode("ascii", "replace"))
        finally:
            os.close(fd)

    def write(self, holder: Holder) -> bool:
        """False when the disk refused (full, read-only)."""
        temp = os.path.join(self.dir, f".{os.path.basename(self.path)}.{os.getpid()}")
        try:
            ensure_private_dir(self.dir)
            fd = open_private(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            try:
                data = holder.line().encode()
                if os.write(fd, data) != len(data):
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            finally:
                os.close(fd)
            os.replace(temp, self.path)
        except Exception:  # OSError, PathError: the record is lost, never the run
            try:
                os.unlink(temp)
            except OSError:
                pass
            return False
        return True

    def remove(self) -> None:
        try:
            os.unlink(self.path)
        except OSError:
            pass


def _me(job_pid: int = 0, job_start: int = 0, here: procs.Runner | None = None) -> Holder:
    pid, start = procs.self_identity()
    here = here or procs.Runner("")
    return Holder(pid, start, job_pid, job_start, boot_id=here.boot_id, pid_ns=here.pid_ns)


def open_lock_file(path: str) -> int:
    """The lock file, read-only: cronwrap can lock it and never change it."""
    return open_private(path, os.O_RDONLY | os.O_CREAT, single_link=True)


class _Lock:
    """What both kinds share: the lock file's descriptor (``path`` is never written) and the
    holder record in cronwrap's private lock directory, which names the holder."""

    kind: str

    def __init__(self, path: str, lock_dir: str) -> None:
        self.path = path
        self.fd = open_lock_file(path)
        self.record = HolderFile(lock_dir, self.fd)
        self.here = procs.Runner("")
        self.stale: Holder | None = None  # the dead holder this one replaced, if any

    def holder(self) -> Holder | None:
        return self.record.read()

    def set_job(self, job_pid: int, job_start: int) -> None:
        self.record.write(_me(job_pid, job_start, self.here))


# Not filelock's FileLock (checked with 4.3.2, what the package index gives; its soft locks need
# >= 4.2.1 for GHSA-fq56-3cx3-fjxp): it opens the lock file O_RDWR, so a job's own read-only
# script cannot be locked by its owner (PermissionError as uid 65534 on a 0555 script, where
# this open + flock succeeds); its descriptor is close-on-exec and private
# (``_context.lock_file_fd``), and a locker SIGKILLed while its child ran left the lock free
# under that child, where this lock must be held by the job's whole tree; on a file system
# without flock it falls back to SoftFileLock, which writes its marker over the lock file (see
# PidLock). And importing filelock on every firing took ``run -- true`` from 60.7 to 96.8 ms
# median (40 interleaved firings; 1.51x to 2.42x the stdlib floor, over the 1.5x budget of
# ARCHITECTURE.md §9).
# ``filelock.lock_descriptor(fd)``, which locks a caller's descriptor, is this one
# fcntl.flock call behind that import.
class FlockLock(_Lock):
    """Held while the wrapper or any process of the job that inherited ``fd`` lives."""

    kind = "flock"

    def __init__(self, path: str, lock_dir: str) -> None:
        super().__init__(path, lock_dir)
        self.unnamed = False

    def try_acquire(self) -> bool:
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        # The kernel lock is what excludes; a holder record the disk refused only costs
        # --overlap replace its target.
        self.unnamed = not self.record.write(_me(here=self.here))
        return True

    @property
    def fd_for_job(self) -> int | None:
        return self.fd

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # the file stays: unlinking a flock file races with a new holder
            self.fd = -1


# Not filelock's SoftFileLock (4.3.2): its marker is the file at the lock path, so on the
# job's own script it waited 2 s, judged the script a malformed marker and replaced it with
# "PID\nHOST\nSTART" (observed); cronwrap never writes a lock file. Kept in cronwrap's holder
# directory instead, it would still not be this lock: its marker names one process, so after
# a SIGKILL of the holder's wrapper a second holder got it in 0.01 s while the job ran on
# (observed), where this lock is held while the wrapper *or* its job lives; it breaks a stale
# marker silently, where a takeover must be logged with the holder it replaced; and its
# import costs 36 ms per firing (above). Its identity rules match ours (PID + start time + boot
# ID; another PID namespace counts as alive).
class PidLock(_Lock):
    """The holder record is the lock, checked and written under a brief flock for atomicity."""

    kind = "pid"

    def __init__(self, path: str, lock_dir: str) -> None:
        super().__init__(path, lock_dir)
        self.held = False

    def try_acquire(self) -> bool:
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            current = self.record.read()
            if current is not None and current.alive(self.here):
                return False
            self.stale = current
            if not self.record.write(_me(here=self.here)):  # for a PID lock the record is the lock
                raise LockError(f"cannot write the lock record {self.record.path}: the disk is full "
                                "or read-only; free space or use --lock flock")
            self.held = True
            return True
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)

    @property
    def fd_for_job(self) -> int | None:
        return None

    def release(self) -> None:
        if self.fd < 0:
            return
        if self.held:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            current = self.record.read()
            if current is not None and current.pid == os.getpid():
                self.record.remove()
            fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
        self.fd = -1


Lock = FlockLock | PidLock


def open_lock(kind: str, path: str, lock_dir: str) -> Lock:
    """``lock_dir``: cronwrap's private lock directory, where holder records are kept."""
    return FlockLock(path, lock_dir) if kind == "flock" else PidLock(path, lock_dir)


def acquire_waiting(lock: Lock, wait: float,
                    monotonic: Callable[[], float] = time.monotonic) -> bool:
    """Try until ``wait`` seconds have passed (0 = wait forever)."""
    deadline = monotonic() + wait if wait > 0 else None
    while not lock.try_acquire():
        if deadline is not None and monotonic() >= deadline:
            return False
        time.sleep(POLL)
    return True


def replace_holder(lock: Lock, sig: int, grace: float) -> bool:
    """End the running instance (its wrapper forwards ``sig`` to its tree), then take the lock.

    After ``grace`` seconds the holder's wrapper and its job's tree get KILL, until none of it
    is left (or ``grace`` more has passed). A holder this host cannot check (another PID
    namespace) is waited for, never signalled.
    """
    holder = lock.holder()
    if holder is not None and holder.alive(lock.here) and \
            lock.here.same_namespace(holder.boot_id, holder.pid_ns):
        wrapper = procs.ProcessId(holder.pid, holder.start)
        procs.send(wrapper, sig)
        if acquire_waiting(lock, grace):
            return True
        job = procs.ProcessId(holder.job_pid, holder.job_start)
        # One look while the wrapper lives finds the orphans it adopted as subreaper too.
        procs.Tree(job, root=wrapper, with_root=True).end(signal.SIGKILL, 0, give_up=grace)
    return acquire_waiting(lock, max(grace, 5.0))


# -- cronwrap unlock: who holds a lock, and releasing one whose holder is gone --------------

def default_lock_file(lock_dir: str, job: str) -> str:
    """Where a job's lock file is when no --lock-file is given."""
    return os.path.join(lock_dir, f"{file_name(job)}.lock")


class LockState(Record):
    """What ``inspect`` found at a lock file. ``problem``: why it could not be looked at (a
    symlink, another user's file); ``held``: a kernel flock on it is held (by a ``--lock
    flock`` holder, or for an instant by a ``--lock pid`` check); ``holder``: cronwrap's record
    of who took it last; ``live``: that holder lives, or cannot be checked from here;
    ``wrapper_alive``, ``job_alive``: each process, None when it cannot be checked here
    (another PID namespace)."""

    path: str
    exists: bool
    problem: str | None
    held: bool
    holder: Holder | None
    live: bool
    wrapper_alive: bool | None
    job_alive: bool | None
    _defaults = dict(exists=True, problem=None, held=False, holder=None, live=False,
                     wrapper_alive=None, job_alive=None)

    @property
    def stale(self) -> bool:
        """A holder record of processes that are gone, on a lock no one holds: for a PID lock
        the record is the lock; for a flock it only names the last holder."""
        return not self.held and self.holder is not None and not self.live


def inspect(path: str, lock_dir: str, here: procs.Runner | None = None) -> LockState:
    """Who holds the lock at ``path``, changing nothing: no file is created, no symlink
    followed; the flock is tried without waiting and let go at once (a ``--lock flock``
    firing at that very instant finds the lock busy and skips)."""
    if not os.path.lexists(path):
        return LockState(path, exists=False)
    try:
        fd = open_private(path, os.O_RDONLY)
    except PathError as exc:
        return LockState(path, problem=str(exc))
    try:
        held = not _try_flock(fd)
        if not held:
            fcntl.flock(fd, fcntl.LOCK_UN)
        holder = HolderFile(lock_dir, fd).read()
    finally:
        os.close(fd)
    here = here or procs.Runner("")
    return LockState(path, held=held, holder=holder, **_liveness(holder, here))


def release_stale(path: str, lock_dir: str, here: procs.Runner | None = None) -> Holder | None:
    """Remove the holder record of a lock no one holds whose holder is gone, checked again
    under the brief flock a PID lock takes (so never a record a firing is writing): that
    releases a ``--lock pid`` lock. The record removed, or None when nothing was."""
    try:
        fd = open_private(path, os.O_RDONLY)
    except PathError:
        return None
    try:
        if not _try_flock(fd):
            return None
        record = HolderFile(lock_dir, fd)
        holder = record.read()
        if holder is None or holder.alive(here or procs.Runner("")) or \
                not all(map(_private, (lock_dir, record.dir))):
            return None
        record.remove()
        return holder
    finally:
        os.close(fd)  # lets the flock go


def _try_flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _liveness(holder: Holder | None, here: procs.Runner) -> dict[str, bool | None]:
    if holder is None:
        return {}
    live = holder.alive(here)
    if not here.same_namespace(holder.boot_id, holder.pid_ns):
        known = None if live else False  # another PID namespace, or an earlier boot: all gone
        return dict(live=live, wrapper_alive=known, job_alive=known)
    return dict(live=live, wrapper_alive=procs.is_alive(holder.pid, holder.start),
                job_alive=procs.is_alive(holder.job_pid, holder.job_start))


def _private(directory: str) -> bool:
    """A directory cronwrap would keep its records in (never one another user could change)."""
    try:
        check_dir(directory, os.lstat(directory))
    except (OSError, PathError):
        return False
    return True
