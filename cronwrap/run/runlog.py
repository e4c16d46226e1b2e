"""The structured run log (JSON Lines) and each run's captured output.

Events go to ``events.jsonl`` in the log directory, one ``O_APPEND`` write per line, so many
concurrent wrappers never interleave a line. The file is rotated by size (``events.jsonl.1`` …)
and rotated files older than ``--keep-logs`` are removed.

Captured output: one file per run attempt, ``logs/NAME/RUN_ID.ATTEMPT.log``, bounded: the first
``HEAD_LIMIT`` bytes, then a marker, then the last ``TAIL_LIMIT`` bytes (kept in a ring buffer in
memory while the job runs), so a runaway job neither fills the disk nor the wrapper's memory.
With ``--timestamps``, ``RUN_ID.ATTEMPT.times`` beside it says when the bytes came: a line
``OFFSET MILLIS`` (byte offset in the capture, Unix time in ms) each time a read of the job's
output is stored at a new millisecond, written before those bytes, so a reader that sees the
bytes sees their time; the capture itself is the output, unchanged.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import time

from cronwrap import jsontext
from cronwrap.errors import CronwrapError
from cronwrap.model import FORMAT_VERSION, event_level, event_message, job_host
from cronwrap.paths import ensure_private_dir, file_name, open_private
from cronwrap.record import TYPE_CHECKING
from cronwrap.stdio import warn

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence
    from re import Pattern
    from typing import Any

    from cronwrap.model import Event
    from cronwrap.redact.redactor import Redactor, Stream

EVENT_FIELDS = ("ts", "format", "event", "level", "msg", "job", "host", "pid", "run_id",
                "run_key", "attempt", "trigger", "scheduled_at", "status", "skip_reason",
                "exit_code", "duration_ms")

EVENTS_FILE = "events.jsonl"
EVENTS_MAX_BYTES = 16 * 1024 * 1024
EVENTS_KEEP_FILES = 5
HEAD_LIMIT = 8 * 1024 * 1024
TAIL_LIMIT = 1024 * 1024
ERROR_TAIL = 4096
CONTEXT = 8192  # bytes seen on each side of a cut of the capture, to redact across it


def iso_now(clock: float | None = None) -> str:
    t = time.time() if clock is None else clock
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}+00:00"


class EventLog:
    """Append-only JSONL events; a failure to write is reported once and never raised."""

    def __init__(self, log_dir: str, max_bytes: int = EVENTS_MAX_BYTES) -> None:
        self.dir = log_dir
        self.path = os.path.join(log_dir, EVENTS_FILE)
        self.max_bytes = max_bytes
        self.fd: int | None = None
        self.failed: str | None = None

    def emit(self, event: Event, **fields: Any) -> dict[str, Any]:
        record = {"ts": iso_now(), "format": FORMAT_VERSION, "event": event,
                  "level": event_level(event, fields.get("status")),
                  "msg": event_message(event, fields), **fields}
        # backslashreplace: a name or path from argv may hold undecodable bytes (surrogates)
        line = (jsontext.dumps(record, ascii=False, default=str) + "\n").encode(
            "utf-8", "backslashreplace")
        try:
            if self.fd is None:
                ensure_private_dir(self.dir)
                self.fd = open_private(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
            os.write(self.fd, line)
            if os.fstat(self.fd).st_size > self.max_bytes:
                self._rotate()
        except OSError as exc:
            self.report(f"cannot write run log {self.path}: {exc.strerror}")
        except Exception as exc:  # PathError: an unsafe log path is reported, the job still runs
            self.report(str(exc))
        return record

    def report(self, message: str) -> None:
        """The run log cannot be written: said once on stderr, never raised."""
        if self.failed is None:
            self.failed = message
            warn(message)

    def _rotate(self) -> None:
        lock_fd = open_private(os.path.join(self.dir, ".rotate.lock"))
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
            if os.stat(self.path).st_size <= self.max_bytes:
                return  # another wrapper rotated it first
            for n in range(EVENTS_KEEP_FILES - 1, 0, -1):
                older = os.path.join(self.dir, f"{EVENTS_FILE}.{n}")
                if os.path.exists(older):
                    os.replace(older, os.path.join(self.dir, f"{EVENTS_FILE}.{n + 1}"))
            os.replace(self.path, os.path.join(self.dir, f"{EVENTS_FILE}.1"))
        finally:
            os.close(lock_fd)
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def read_events(log_dir: str) -> list[dict[str, Any]]:
    """All events, oldest first, across rotated files (for tests and ``logs``)."""
    out: list[dict[str, Any]] = []
    for n in range(EVENTS_KEEP_FILES, 0, -1):
        out.extend(_read_jsonl(os.path.join(log_dir, f"{EVENTS_FILE}.{n}")))
    out.extend(_read_jsonl(os.path.join(log_dir, EVENTS_FILE)))
    return out


def _read_jsonl(file: str) -> list[dict[str, Any]]:
    import json  # a reader's: the run path writes with jsontext

    try:
        with open(file, encoding="utf-8", errors="replace") as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def output_path(log_dir: str, job: str, run_id: int | str, attempt: int) -> str:
    """Where an attempt's output is kept on the host that ran it: under the job's name (a
    host-scoped job's share of the ledger, NAME and its host, is NAME here)."""
    return os.path.join(log_dir, file_name(job_host(job)[0]), f"{run_id}.{attempt}.log")


def times_path(output: str) -> str:
    """The ``--timestamps`` record of the capture ``output``: RUN_ID.ATTEMPT.times."""
    return os.path.splitext(output)[0] + ".times"


class Redaction:
    """What a job's output is cleaned of (its environment's secrets and ``--redact``), made
    into a Redactor (redact/redactor.py) only when first needed: output to keep, a tail for a
    hook. A job that prints nothing loads no redaction code (2.4 M instructions, ~0.6 ms of
    a firing, issue 24)."""

    def __init__(self, environ: Mapping[str, str], patterns: Sequence[Pattern[bytes]] = ()):
        self.environ, self.patterns = environ, patterns
        self._redactor: Redactor | None = None

    def redactor(self) -> Redactor:
        if self._redactor is None:
            from cronwrap.redact.deadline import CpuBudget
            from cronwrap.redact.redactor import Redactor, secret_values

            self._redactor = Redactor(secret_values(self.environ), self.patterns,
                                      guard=CpuBudget())
        return self._redactor

    def text(self, text: str) -> str:
        return self.redactor().text(text)


OUTPUT_SUFFIXES = (".log", ".times")  # what prune and --keep-logs remove of a run attempt
# In a job's log directory: its mtime is that of the oldest output file the last tidy-up kept
# (RunFiles.tidy). Files are only ever added newer, so until that one is due nothing is.
TIDY_MARK = ".oldest"
TIDY_LATE = 1.01  # a job's files are looked through once its oldest is 1% past --keep-logs


class RunFiles:
    """The files of one attempt, opened once: its captured output (``capture``, written while
    the job runs; ``replay`` gives it back for ``--output on-failure``) and, at the end, the
    tidy-up of its job's older ones and of the rotated run logs (``tidy``). A capture file
    that cannot be made leaves a capture that keeps only a tail, and says why in ``error``."""

    def __init__(self, log_dir: str, job: str, run_id: int | str, attempt: int,
                 redaction: Redaction | None, timestamps: bool = False) -> None:
        self.log_dir = log_dir
        self.path = output_path(log_dir, job, run_id, attempt)
        try:
            ensure_private_dir(log_dir)  # the log directory itself: not a symlink, not another's
            self.capture = OutputCapture(self.path, redaction, timestamps)
        except CronwrapError as exc:
            self.capture = OutputCapture(None, redaction)
            self.capture.error = f"cannot capture output: {exc}"

    @property
    def log_path(self) -> str | None:
        """The capture file, for the ledger: None when nothing was captured."""
        capture = self.capture
        return self.path if capture.written or capture.total else None

    def replay(self) -> Iterator[bytes]:
        """The captured output, a MiB at a time (nothing when there is none)."""
        try:
            fd = open_private(self.path, os.O_RDONLY)
        except CronwrapError:  # nothing was captured, or the file is not ours any more
            return
        try:
            while chunk := os.read(fd, 1 << 20):
                yield chunk
        except OSError:
            pass
        finally:
            os.close(fd)

    def tidy(self, keep_seconds: float, now: float) -> None:
        """Output files of this job and rotated run logs older than ``keep_seconds``.

        The job's directory is looked through only once its oldest file (``TIDY_MARK``) is
        1% past due (``TIDY_LATE``: within 7.2 hours under the default 30d), not at every
        firing: a job fired every minute keeps 43,200 files, and a look through them took
        ~145 ms of every firing. A file made to look older by hand (``touch -d``) waits for
        the oldest one the marker knows of. A job directory the capture refused (a symlink,
        another user's) is left alone."""
        prune_event_logs(self.log_dir, keep_seconds, now)
        if not self.capture.own_dir:
            return
        job_dir = os.path.dirname(self.path)
        mark = os.path.join(job_dir, TIDY_MARK)
        try:
            info = os.stat(mark, follow_symlinks=False)
            due = not stat.S_ISREG(info.st_mode) or now - info.st_mtime > keep_seconds * TIDY_LATE
        except OSError:
            due = True
        if due:
            oldest = prune_outputs(job_dir, keep_seconds, now)[1]
            if oldest is not None:
                _mark_oldest(mark, oldest)


class OutputCapture:
    """Receives the job's output chunks and keeps a bounded copy (passing them on to
    cronwrap's own stdout/stderr is stdio.Passthrough's). A write the disk refuses ends the
    capture, never the job: ``error`` says why.

    With a ``redaction`` (redact/redactor.py), secrets are taken out of what is kept, and only
    of that: the head by the stream (each of stdout and stderr its own stream, so a secret split
    between two reads is caught), the tail once the job has ended; at each cut of a long
    output the bytes beyond it (CONTEXT) are looked at, so a secret that straddles it is
    hidden, and output without secrets is kept exactly. The middle of a long output, which is
    never kept, costs nothing.

    With ``timestamps``, the times file (``times_path``) gets an ``OFFSET MILLIS`` line before
    each store at a new millisecond; the kept tail's lines get the times their bytes came
    (exact unless redaction changed the tail's length, then to within the redacted stretch)."""

    def __init__(self, file: str | None, redaction: Redaction | None = None,
                 timestamps: bool = False) -> None:
        self.file = file
        self.fd: int | None = None
        self.written = 0
        self.head = 0  # bytes of output taken into the head (before redaction)
        self.total = 0
        self.tail = bytearray()
        self.error: str | None = None
        self.redaction = redaction
        self.streams: dict[int, Stream] = {}
        self.head_end = b""  # the head's last bytes, as written: the tail's context
        self.after_head: dict[int, bytearray] = {}  # each stream's first bytes past the head
        self.times: int | None = None  # the --timestamps file
        self.stamped = -1  # the millisecond of its last line
        self.tail_times: list[tuple[int, int]] = []  # (offset in the output, ms) past the head
        self.own_dir = False  # the file's directory is cronwrap's own: private, no symlink
        if file is not None:
            try:
                ensure_private_dir(os.path.dirname(file))
                self.own_dir = True
                self.fd = open_private(file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            except Exception as exc:
                self.error = f"cannot capture output to {file}: {exc}"
        if timestamps and self.fd is not None:
            assert file is not None
            try:
                self.times = open_private(times_path(file), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            except Exception as exc:  # the output is still captured, without its times
                self.error = f"cannot record output timestamps in {times_path(file)}: {exc}"

    def __call__(self, fd: int, data: bytes) -> None:
        ms = int(time.time() * 1000) if self.times is not None else 0
        start = self.total
        self.total += len(data)
        room = HEAD_LIMIT - self.head if self.fd is not None else 0  # a failed capture
        if room > 0:                                                  # still keeps a tail
            self.head += min(room, len(data))
            kept = self._redacted(fd, data[:room])
            if kept and ms:
                self._stamp(self.written, ms)
            self._store(kept)
        if len(data) > room:  # past the head: keep a ring of the last TAIL_LIMIT bytes
            rest = data[max(room, 0):]
            self.tail += rest
            if ms:
                self.tail_times.append((start + max(room, 0), ms))
            if len(self.tail) > 2 * TAIL_LIMIT:  # and a little more: the kept tail's context
                del self.tail[: len(self.tail) - TAIL_LIMIT - CONTEXT]
                ring_start = self.total - len(self.tail)
                while len(self.tail_times) > 1 and self.tail_times[1][0] <= ring_start:
                    del self.tail_times[0]
            if fd in self.streams:
                after = self.after_head.setdefault(fd, bytearray())
                after += rest[:CONTEXT - len(after)]

    def _redacted(self, fd: int, data: bytes) -> bytes:
        if self.redaction is None:
            return data
        self.head_end = (self.head_end + data[-CONTEXT:])[-CONTEXT:]
        stream = self.streams.get(fd)
        if stream is None:
            stream = self.streams[fd] = self.redaction.redactor().stream()
        return stream.feed(data)

    def _stamp(self, offset: int, ms: int) -> None:
        """One line of the times file, unless this millisecond has one; a write the disk
        refuses ends the times file, never the capture."""
        if self.times is None or ms == self.stamped:
            return
        self.stamped = ms
        try:
            os.write(self.times, f"{offset} {ms}\n".encode())
        except OSError as exc:
            self.error = f"cannot record output timestamps in {times_path(self.file or '')}: " \
                         f"{exc.strerror}"
            os.close(self.times)
            self.times = None

    def _store(self, data: bytes) -> None:
        if self.fd is None:  # the capture failed: nothing more is kept
            return
        try:
            if os.write(self.fd, data) != len(data):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            self.written += len(data)
        except OSError as exc:
            self.error = f"cannot capture output to {self.file}: {exc.strerror}"
            os.close(self.fd)
            self.fd = None

    def close(self) -> None:
        for fd, stream in self.streams.items():  # what each stream held back, to the cut
            if self.fd is not None:
                self._store(stream.finish(bytes(self.after_head.get(fd, b""))))
        self.streams.clear()
        kept = len(self.tail[-TAIL_LIMIT:])
        if self.total > self.head:
            self.tail = bytearray(self._redacted_tail() if self.redaction is not None
                                  else self.tail[-TAIL_LIMIT:])
        if self.fd is None:
            self._close_times()
            return
        if self.total > self.head:
            tail = bytes(self.tail)
            skipped = self.total - self.head - kept
            marker = f"\n[cronwrap: {skipped} bytes omitted; output truncated to the first " \
                     f"{self.written} and the last {len(tail)} bytes]\n".encode()
            self._stamp_tail(len(marker), len(tail), kept)
            self._store(marker + tail)
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        self._close_times()

    def _stamp_tail(self, marker: int, length: int, kept: int) -> None:
        """The times of the kept tail, written after the marker: each stored read's offset in
        the output moved to where the tail lands in the file."""
        if self.times is None:
            return
        self._stamp(self.written, int(time.time() * 1000))  # the marker: written now
        begin, at = self.total - kept, self.written + marker
        for offset, ms in self.tail_times:
            self.stamped = -1  # offsets move on even when two reads share a millisecond
            self._stamp(at + min(max(offset - begin, 0), length), ms)

    def _close_times(self) -> None:
        if self.times is not None:
            os.close(self.times)
            self.times = None

    def _redacted_tail(self) -> bytes:
        """The kept tail, redacted with what came before it as context: the ring's older
        bytes, or the head's end when nothing was left out between them."""
        from cronwrap.redact.redactor import redact_window

        assert self.redaction is not None
        ring = bytes(self.tail)
        kept = ring[-TAIL_LIMIT:]
        before = ring[:-TAIL_LIMIT][-CONTEXT:] if len(ring) > TAIL_LIMIT else \
            self.head_end if self.total - self.head == len(ring) else b""
        return redact_window(self.redaction.redactor(), before, kept, b"")

    def last_bytes(self, n: int = ERROR_TAIL) -> bytes:
        if self.tail:
            return bytes(self.tail[-n:])
        if self.file is None or self.written == 0:
            return b""
        try:
            fd = open_private(self.file, os.O_RDONLY)
        except Exception:  # removed or replaced since: no tail
            return b""
        try:
            return os.pread(fd, n, max(0, self.written - n))
        finally:
            os.close(fd)

    def error_tail(self, n: int = ERROR_TAIL) -> str | None:
        data = self.last_bytes(n)
        return data.decode("utf-8", errors="replace") if data else None


def prune_outputs(job_dir: str, keep_seconds: float, now: float) -> tuple[int, float | None]:
    """Remove captured output files of one job older than ``keep_seconds``: how many, and
    the mtime of the oldest one kept (``now`` for none; None: the directory is not there)."""
    removed, oldest = 0, now
    try:
        entries = list(os.scandir(job_dir))
    except OSError:
        return 0, None
    for entry in entries:
        if entry.name.endswith(OUTPUT_SUFFIXES) and entry.is_file(follow_symlinks=False):
            mtime = entry.stat(follow_symlinks=False).st_mtime
            if now - mtime <= keep_seconds:
                oldest = min(oldest, mtime)
                continue
            try:
                os.unlink(entry.path)
                removed += 1
            except OSError:
                oldest = min(oldest, mtime)
    return removed, oldest


def _mark_oldest(mark: str, oldest: float) -> None:
    """``TIDY_MARK`` made (never through a symlink) and dated ``oldest``; best effort: without
    it the next firing looks through the directory again."""
    try:
        fd = open_private(mark, os.O_WRONLY | os.O_CREAT)
    except CronwrapError:
        return
    try:
        os.utime(fd, (oldest, oldest))
    except OSError:
        pass
    finally:
        os.close(fd)


def prune_event_logs(log_dir: str, keep_seconds: float, now: float) -> None:
    for n in range(1, EVENTS_KEEP_FILES + 2):
        rotated = os.path.join(log_dir, f"{EVENTS_FILE}.{n}")
        try:
            if now - os.stat(rotated).st_mtime > keep_seconds:
                os.unlink(rotated)
        except OSError:
            pass
