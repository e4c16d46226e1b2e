"""``cronwrap logs``: copy a run's captured output to stdout, optionally following it.

The output of run ID, attempt N of job J is read from ``runlog.output_path(DIR, J, ID, N)``
in one of the log directories this host's operator configured (``trusted_dirs``), never from
the ``log_path`` a ledger row names: anyone who can write a shared ledger could point that at
any file, and ``logs`` is often run by root. Below the trusted directory no symlink is
followed, and only a regular file is read (a FIFO planted there must not hang ``logs``).

On a terminal, control characters are shown escaped (textsafe), unless ``--raw``; piped or
redirected output is copied byte for byte. With ``--timestamps``, each line begins with the
time it came, from the run's ``RUN_ID.ATTEMPT.times`` (runlog.OutputCapture writes it for
``run --timestamps``), read in step with the capture while following.
"""

from __future__ import annotations

import bisect
import codecs
import errno
import os
import stat
import sys
import time

from cronwrap.errors import PathError, UsageError
from cronwrap.model import Run, Status, shown_job
from cronwrap.record import TYPE_CHECKING
from cronwrap.run.runlog import output_path, times_path
from cronwrap.textsafe import safe_text

if TYPE_CHECKING:
    from cronwrap.ledger import base

FOLLOW_POLL = 0.5
CHUNK = 1 << 20


def show(ledger: base.Ledger, job: str, run_id: int | None, follow: bool,
         log_dirs: list[str], escape: bool, attempt: int | None = None,
         timestamps: bool = False) -> int:
    """Print the run's output; with ``follow``, until the run ends or its lease expires.
    ``attempt``: an earlier attempt of the run (its output file is its own; following it
    ends at once, as it has ended). ``timestamps``: each line begins with when it came."""
    run = _find(ledger, job, run_id)
    if attempt is not None and attempt != run.attempt:
        return _show_earlier(run, attempt, log_dirs, escape, timestamps)
    if not run.log_path and run.status != Status.RUNNING:
        raise UsageError(f"{shown_job(job)}: run {run.run_id} has no captured output "
                         f"({safe_text(run.status)})")
    source, out = OutputFile(log_dirs, run, timestamps), Terminal() if escape else Raw()
    source.copy_to(out)
    state: str | None = run.shown_status(ledger.now())
    while follow and state == Status.RUNNING:
        time.sleep(FOLLOW_POLL)
        source.copy_to(out)
        state = _state(ledger, run)
    if follow:
        source.copy_to(out)
    out.close()
    if not source.close():
        raise UsageError(source.not_found())
    if state == Status.ABANDONED:
        sys.stderr.write(f"cronwrap: {shown_job(job)}: run {run.run_id} was abandoned (its runner "
                         "is gone and its lease expired): above is the output it captured until "
                         "then\n")
    return 0


def _show_earlier(run: Run, attempt: int, log_dirs: list[str], escape: bool,
                  timestamps: bool) -> int:
    """Print the output of an attempt before the run's latest (the ledger keeps no path for
    it: its file is found by run id and attempt, as every run's is)."""
    if not 1 <= attempt < run.attempt:
        had = "no attempt" if run.attempt == 0 else "attempt 1" if run.attempt == 1 \
            else f"attempts 1-{run.attempt}"
        raise UsageError(f"{shown_job(run.job)}: run {run.run_id} has no attempt {attempt} (it "
                         f"has {had}: see cronwrap history)")
    source = OutputFile(log_dirs, run.replace(attempt=attempt), timestamps)
    out = Terminal() if escape else Raw()
    source.copy_to(out)
    out.close()
    if not source.close():
        raise UsageError(source.not_found())
    return 0


def _find(ledger: base.Ledger, job: str, run_id: int | None) -> Run:
    if run_id is None:
        runs = [r for r in ledger.runs(job, 20) if r.status != Status.SKIPPED]
        if not runs:
            raise UsageError(f"{shown_job(job)}: no runs recorded (check the name with cronwrap "
                             "status)")
        return runs[0]
    run = ledger.get_run(job, run_id)
    if run is None:
        raise UsageError(f"{shown_job(job)}: no run {run_id} (see cronwrap history)")
    return run


def _state(ledger: base.Ledger, run: Run) -> str | None:
    """The run's status as shown now (``abandoned`` once its lease expired), or None when
    another claim has taken its row over."""
    current = ledger.get_run(run.job, run.run_id)
    if current is None or current.fence != run.fence:
        return None
    return current.shown_status(ledger.now())


class OutputFile:
    """The captured output of one run attempt, found in the first trusted directory that
    holds it, then read on from where the last copy stopped."""

    def __init__(self, log_dirs: list[str], run: Run, timestamps: bool = False) -> None:
        self.dirs = log_dirs
        self.relative = output_path("", run.job, run.run_id, run.attempt)
        self.label = f"{shown_job(run.job)}: run {run.run_id} attempt {run.attempt}"
        self.fd: int | None = None
        self.offset = 0
        self.times: Times | None = Times() if timestamps else None

    def copy_to(self, out: Raw) -> None:
        if self.fd is None:
            found = next(((d, fd) for d in self.dirs if (fd := open_below(d, self.relative))
                          is not None), None)
            if found is None:
                return
            self.fd = found[1]
            if self.times is not None:
                self.times.open(found[0], times_path(self.relative), self.label)
        while chunk := os.pread(self.fd, CHUNK, self.offset):
            out.write(chunk if self.times is None else self.times.stamped(chunk, self.offset))
            self.offset += len(chunk)
        out.flush()

    def close(self) -> bool:
        """Close the file; False when it was never found."""
        if self.times is not None:
            self.times.close()
        if self.fd is None:
            return False
        os.close(self.fd)
        return True

    def not_found(self) -> str:
        where = " or ".join(str(d) for d in self.dirs)
        return (f"{self.label}: no captured output in {where} (looked for {self.relative}; "
                "for a job run with --log-dir DIR, set CRONWRAP_LOG_DIR=DIR)")


class Times:
    """A capture's times file (``OFFSET MILLIS`` lines, offsets rising), read on as it grows:
    ``stamped`` puts the time of the read that stored each line's first byte before it."""

    UNKNOWN = b"????-??-??T??:??:??.???Z "  # a line older than any time kept (never, but for a
                                          # damaged file): as wide as a time, so columns hold

    def __init__(self) -> None:
        self.fd: int | None = None
        self.read = 0
        self.partial = b""
        self.offsets: list[int] = []
        self.millis: list[int] = []
        self.line_start = True

    def open(self, root: str, relative: str, label: str) -> None:
        self.fd = open_below(root, relative)
        if self.fd is None:
            raise UsageError(f"{label}: captured without --timestamps (no {relative} in "
                             f"{root}); run the job with --timestamps, or timestamps = true in "
                             "the config file, to record when each line came")

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def _load(self) -> None:
        assert self.fd is not None
        while chunk := os.pread(self.fd, CHUNK, self.read):
            self.read += len(chunk)
            *lines, self.partial = (self.partial + chunk).split(b"\n")
            for line in lines:
                offset, _, ms = line.partition(b" ")
                if offset.isdigit() and ms.isdigit() and \
                        (not self.offsets or int(offset) >= self.offsets[-1]):
                    self.offsets.append(int(offset))
                    self.millis.append(int(ms))

    def stamp(self, offset: int) -> bytes:
        i = bisect.bisect_right(self.offsets, offset) - 1
        if i < 0:
            return self.UNKNOWN
        ms = self.millis[i]
        try:
            clock = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000))
        except (OverflowError, ValueError, OSError):  # a damaged file's number
            return self.UNKNOWN
        return f"{clock}.{ms % 1000:03d}Z ".encode()

    def stamped(self, data: bytes, offset: int) -> bytes:
        """``data``, read at ``offset`` of the capture, with a time before each line."""
        self._load()
        pieces, start = [], 0
        while start < len(data):
            if self.line_start:
                pieces.append(self.stamp(offset + start))
            end = data.find(b"\n", start) + 1 or len(data)
            pieces.append(data[start:end])
            self.line_start = data[end - 1:end] == b"\n"
            start = end
        return b"".join(pieces)


DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def open_below(root: str, relative: str) -> int | None:
    """A read descriptor for the regular file ``root/relative``, None when it is not there.

    ``root`` is the operator's own and may be a symlink; each component below it is opened
    relative to its parent's descriptor with O_NOFOLLOW, so a symlink anywhere below is
    refused (PathError), as is anything but a regular file: O_NONBLOCK keeps the open of a
    FIFO from waiting for a writer, and fstat then tells what was opened."""
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise PathError(f"cannot read {root}: {exc.strerror}") from None
    *dirs, leaf = relative.split("/")
    path = root
    for part, flags in [(d, DIR_FLAGS) for d in dirs] + [(leaf, FILE_FLAGS)]:
        path = os.path.join(path, part)
        opened = _open_at(fd, part, flags, path)
        if opened is None:
            return None
        fd = opened
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise PathError(f"{path} is not a regular file; cronwrap refuses to read it")
    return fd


def _open_at(parent: int, name: str, flags: int, path: str) -> int | None:
    """Open ``name`` in the directory ``parent`` (closed here, whatever happens)."""
    try:
        return os.open(name, flags, dir_fd=parent)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return None
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(path):
            raise PathError(f"{path} is a symlink; cronwrap refuses to follow it") from None
        raise PathError(f"cannot read {path}: {exc.strerror}") from None
    finally:
        os.close(parent)


class Raw:
    """Bytes to stdout as they are."""

    def write(self, data: bytes) -> None:
        sys.stdout.buffer.write(data)

    def flush(self) -> None:
        sys.stdout.buffer.flush()

    def close(self) -> None:
        self.flush()


class Terminal(Raw):
    """Bytes to a terminal: decoded as UTF-8 across chunk boundaries (an invalid byte shown as
    ``\\xff``), control characters escaped, lines kept. A CR at the end of a chunk waits for
    the next, which may begin with the LF of a CRLF."""

    def __init__(self) -> None:
        self.decoder = codecs.getincrementaldecoder("utf-8")("backslashreplace")
        self.held = ""

    def write(self, data: bytes) -> None:
        text = self.held + self.decoder.decode(data)
        self.held = "\r" if text.endswith("\r") else ""
        super().write(safe_text(text[:len(text) - len(self.held)], lines=True).encode())

    def close(self) -> None:
        text = self.held + self.decoder.decode(b"", final=True)
        self.held = ""
        super().write(safe_text(text, lines=True).encode())
        self.flush()
