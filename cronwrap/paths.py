"""Where cronwrap keeps its ledger, logs and locks, and how it opens them safely.

Directories cronwrap owns are created 0700 and must belong to the user running it and not be
group- or world-writable; files are created 0600 and opened with O_NOFOLLOW, so another local
user can neither plant a symlink nor pre-create a file that cronwrap would then write or trust.
"""

from __future__ import annotations

import errno
import marshal
import os
import stat
from cronwrap.record import TYPE_CHECKING, Record

from cronwrap.errors import PathError
from cronwrap.model import valid_name

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

DIR_MODE = 0o700
FILE_MODE = 0o600


class Dirs(Record):
    """state holds ledger.db and the outbox; logs the run log and captured output. Paths are
    strings: the run path never imports pathlib (with urllib.parse and ipaddress, ~3.5 ms of
    a firing's start; ARCHITECTURE.md §9)."""

    state: str
    logs: str
    locks: str

    @property
    def ledger_file(self) -> str:
        return os.path.join(self.state, "ledger.db")


def parent(path: str) -> str:
    """The directory ``path`` is in (pathlib's ``parent``: ``.`` for a bare name)."""
    return os.path.dirname(os.path.normpath(path)) or "."


def file_name(job: str) -> str:
    """The job's name as one safe path component: itself when it is ``[A-Za-z0-9][A-Za-z0-9._-]*``
    (the common case, readable in ``ls``), otherwise ``%`` + its percent-encoded UTF-8 — a form
    no plain name can take, with no ``/``, and never ``.`` or ``..``."""
    if valid_name(job):
        return job
    from urllib.parse import quote

    encoded = "%" + quote(job, safe="")
    if len(encoded) > 200:  # file names stop at 255 bytes: keep a readable start and a hash
        import hashlib

        encoded = encoded[:160] + "~" + hashlib.sha256(job.encode()).hexdigest()[:20]
    return encoded


def resolve_dirs(environ: Mapping[str, str], euid: int | None = None) -> Dirs:
    """``CRONWRAP_HOME`` when set; system paths for root; XDG paths for everyone else."""
    euid = os.geteuid() if euid is None else euid
    home = environ.get("CRONWRAP_HOME")
    if home:
        base = os.path.normpath(home)
        return Dirs(state=base, logs=os.path.join(base, "logs"),
                    locks=os.path.join(base, "locks"))
    if euid == 0:
        return Dirs("/var/lib/cronwrap", "/var/log/cronwrap", "/run/lock/cronwrap")
    user_home = environ.get("HOME") or os.path.expanduser("~")
    state = os.path.join(os.path.normpath(environ.get("XDG_STATE_HOME")
                                          or os.path.join(user_home, ".local", "state")),
                         "cronwrap")
    # Not $XDG_RUNTIME_DIR: cron does not set it, so a job fired by cron and the same job run
    # by hand from a login shell would lock in two directories and overlap. (And logind
    # removes /run/user/UID at the user's last logout, under a running cron job.)
    return Dirs(state=state, logs=os.path.join(state, "logs"),
                locks=os.path.join(state, "locks"))


def ensure_private_dir(path: str) -> str:
    """Create ``path`` (and parents) 0700 if missing; refuse one that another user could change."""
    try:
        _make_dirs(path)
        info = os.lstat(path)
    except OSError as exc:
        raise PathError(f"cannot create directory {path}: {exc.strerror}") from exc
    check_dir(path, info)
    return path


def _make_dirs(path: str) -> None:
    """mkdir -p with 0700 for every directory created (os.makedirs gives parents 0777&umask)."""
    missing = []
    path = os.path.normpath(path)
    while not os.path.lexists(path):
        missing.append(path)
        path = parent(path)
    for directory in reversed(missing):
        try:
            os.mkdir(directory, DIR_MODE)
        except FileExistsError:
            pass


def check_dir(path: str, info: os.stat_result) -> None:
    if stat.S_ISLNK(info.st_mode):
        raise PathError(f"{path} is a symlink; cronwrap refuses it: use a real directory")
    if not stat.S_ISDIR(info.st_mode):
        raise PathError(f"{path} is not a directory")
    if info.st_uid != os.geteuid():
        raise PathError(f"{path} belongs to uid {info.st_uid}, not to you: use a directory you own")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise PathError(f"{path} is writable by other users: run chmod go-w {path}")


def check_parent(path: str) -> None:
    """A parent of an explicit path may be shared (e.g. /tmp) only if it is sticky."""
    directory = parent(path)
    try:
        info = os.stat(directory)
    except OSError as exc:
        raise PathError(f"cannot use {path}: {directory}: {exc.strerror}") from exc
    if info.st_mode & stat.S_IWOTH and not info.st_mode & stat.S_ISVTX:
        raise PathError(f"{directory} is world-writable without the sticky bit: choose another place")


WRITING = os.O_WRONLY | os.O_RDWR


def open_private(path: str, flags: int = os.O_RDWR | os.O_CREAT, single_link: bool = False) -> int:
    """Open (creating 0600) without following symlinks; refuse a file owned by another user,
    a file that is not a regular file (a FIFO would block every later open), and, when opening
    for writing or with ``single_link``, a file with other hard links: another name of it
    could be anything (a script, the ledger, another user's file), and a write would go
    through to it. The count is read from the opened descriptor, so a link made between a
    check and the open cannot slip in. O_TRUNC is applied only after those checks, so a
    refused file is never truncated. The open itself never blocks: O_NONBLOCK, which a
    regular file ignores."""
    truncate = bool(flags & os.O_TRUNC)
    try:
        fd = os.open(path, (flags & ~os.O_TRUNC) | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                     FILE_MODE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the last component is a symlink
            raise PathError(f"{path} is a symlink; cronwrap refuses to follow it") from exc
        if exc.errno == errno.ENXIO:  # a FIFO with no reader, opened for writing
            raise PathError(f"{path} is not a regular file (a FIFO): remove it") from exc
        raise PathError(f"cannot open {path}: {exc.strerror}") from exc
    problem = unsafe_file(path, os.fstat(fd), single_link or bool(flags & WRITING))
    if problem:
        os.close(fd)
        raise PathError(problem)
    if truncate:
        os.ftruncate(fd, 0)
    return fd


def unsafe_file(path: str, info: os.stat_result, single_link: bool = True) -> str | None:
    """Why cronwrap must not use the file ``info`` describes (None: it may): another user's,
    not a regular file, world-writable, or, with ``single_link``, with other hard links."""
    if info.st_uid != os.geteuid():
        return f"{path} belongs to uid {info.st_uid}, not to you: remove it or choose another path"
    if not stat.S_ISREG(info.st_mode):
        return f"{path} is not a regular file: remove it or choose another path"
    if info.st_mode & stat.S_IWOTH:
        return f"{path} is world-writable: run chmod o-w {path}"
    if single_link and info.st_nlink > 1:
        return (f"{path} has {info.st_nlink} hard links: cronwrap uses only a file with one name "
                "(another name could be any file): remove this name or choose another path")
    return None


def check_existing(path: str) -> None:
    """The rules of ``open_private`` for writing, for a file that another opener (SQLite: a
    ledger's -wal and -shm) opens by its name: checked with lstat, so a symlink is refused
    too. A missing file passes: its opener creates it, in a directory no one else can change
    (a private one, or a sticky one where no one else can replace cronwrap's name)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise PathError(f"cannot use {path}: {exc.strerror}") from exc
    if stat.S_ISLNK(info.st_mode):
        raise PathError(f"{path} is a symlink; cronwrap refuses to follow it")
    problem = unsafe_file(path, info)
    if problem:
        raise PathError(problem)


def read_kept(path: str, limit: int, key: object) -> tuple[object, ...] | None:
    """What cronwrap kept in ``path`` for a later firing (``keep``) under ``key``: the values
    kept with it; None when there is nothing, nothing cronwrap may trust (it is read as
    cronwrap's own files are: a private regular file, no symlink, at most ``limit`` bytes),
    or what was kept under another key (another format, interpreter or input)."""
    try:
        fd = open_private(path, os.O_RDONLY)
    except PathError:  # none yet, or not one cronwrap may trust
        return None
    try:
        blob = os.read(fd, limit)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        found = marshal.loads(blob)
    except (ValueError, EOFError, TypeError):
        return None
    if type(found) is not tuple or not found or found[0] != key:
        return None
    return found[1:]


def keep(path: str, key: Any, *values: Any) -> None:
    """Keep ``values`` in ``path`` under ``key`` for a later firing (marshal: a builtin
    module, nothing to import), written whole (a temporary file and a rename), in a private
    directory made if missing. What marshal cannot keep, or a state directory that cannot be
    written, keeps nothing: it is only made again next time."""
    try:
        blob = marshal.dumps((key, *values))
    except ValueError:
        return
    temporary = f"{path}.{os.getpid()}"
    try:
        ensure_private_dir(os.path.dirname(path))
        fd = open_private(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            written = os.write(fd, blob)
        finally:
            os.close(fd)
        if written == len(blob):
            os.replace(temporary, path)
    except (OSError, PathError):
        pass
    try:
        os.unlink(temporary)
    except OSError:
        pass
