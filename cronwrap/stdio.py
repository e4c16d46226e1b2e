"""cronwrap's own stdout and stderr, written without ever blocking the wrapper.

A reader that stalls (``| logger`` to a stuck syslog, a pager left open, ``| (sleep 25; cat)``)
must not hold up supervision: while a blocking write waits, no timeout fires and the lease is
renewed forever. So every write to cronwrap's stdout/stderr goes through an ``Out``:

- a pipe, FIFO or terminal is reopened through /proc/self/fd as a new open file description
  with O_NONBLOCK — never by setting O_NONBLOCK on the one cronwrap inherited, which the
  shell and other processes share;
- a socket (systemd's journal) is written with MSG_DONTWAIT;
- a regular file or /dev/null never waits for a reader: plain writes.

``Passthrough`` forwards the job's output through two Outs with bounded buffers. While the
job runs, a full buffer stops the reading of the job's pipe (back-pressure: the job waits on
its write exactly as it would without cronwrap); the supervisor keeps polling, so timeouts,
signals and the lease still act. Once the job has ended, what a stalled reader does not take
is dropped and counted (``output_dropped``); the capture keeps every byte. A reader that went
away (EPIPE) ends passthrough of that stream and the supervisor closes the job's pipe, so the
job's next write gets EPIPE/SIGPIPE as it would without cronwrap. Any other write error
(ENOSPC on ``> /dev/full``, EIO) ends passthrough of that stream and nothing else.
"""

from __future__ import annotations

import codecs
import errno
import os
import select
import stat
import sys
import time

from cronwrap.record import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

BUFFER_LIMIT = 1 << 20  # per stream, on top of the job's own 1 MiB pipe
FLUSH_STALL = 10.0  # after the job ended: give up on a reader that takes nothing this long
FLUSH_STALL_STOPPED = 1.0  # the same after a timeout or a stop: the run is over already


class Out:
    """One of cronwrap's output descriptors (1 or 2), for writes that never block.

    ``fd`` is what to poll for POLLOUT (None: writes never wait). ``write`` returns the bytes
    taken (0: try again when writable) and raises OSError for EPIPE and real errors."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.fd: int | None = None
        self._sock = None
        self._own = False
        try:
            info = os.fstat(target)
        except OSError:
            return  # closed: cli.py reopens 0-2 on /dev/null, so this is rare; writes fail EBADF
        if stat.S_ISSOCK(info.st_mode):
            import socket

            self._sock = socket.socket(fileno=os.dup(target))
            self.fd = self._sock.fileno()
        elif stat.S_ISFIFO(info.st_mode) or os.isatty(target):
            self._reopen(target)

    def _reopen(self, target: int) -> None:
        try:
            self.fd = os.open(f"/proc/self/fd/{target}",
                              os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
            self._own = True
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # a FIFO whose reader is gone
                raise BrokenPipeError(errno.EPIPE, "the reader went away") from None
            # No /proc: poll for room and write at most PIPE_BUF bytes, which then cannot block.
            self.fd = target

    def write(self, data: memoryview) -> int:
        try:
            if self._sock is not None:
                import socket

                return self._sock.send(data, socket.MSG_DONTWAIT)
            if self.fd is not None and not self._own:
                if not select.select([], [self.fd], [], 0)[1]:
                    return 0
                data = data[:select.PIPE_BUF]
            own = self.fd if self._own else None  # _reopen opened it
            return os.write(self.target if own is None else own, data)
        except BlockingIOError:
            return 0

    def wait_writable(self, seconds: float) -> None:
        if self.fd is not None and seconds > 0:
            select.select([], [self.fd], [], seconds)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
        elif self._own and self.fd is not None:
            os.close(self.fd)
        self.fd = None


def warn(message: str) -> None:
    """One line on cronwrap's stderr, whatever the message holds (a newline from a file or a
    name would forge a second line), in the locale's charset (FALLBACK for what it lacks),
    never blocking and never raising: a stalled or closed stderr loses the message, not the
    run."""
    encoding = getattr(sys.stderr, "encoding", None) or "utf-8"
    data = f"cronwrap: {one_line(message)}\n".encode(encoding, FALLBACK)
    try:
        out = Out(2)
    except OSError:
        return
    try:
        out.write(memoryview(data))
    except OSError:
        pass
    finally:
        out.close()


# -- a locale whose charset lacks what cronwrap writes --------------------------------------
# LC_ALL=en_US.ISO-8859-1, or LC_ALL=C with PYTHONUTF8=0 (ASCII): Python would raise
# UnicodeEncodeError at the first mark of a table. What the charset lacks is written instead
# as ASCII: the marks and dashes cronwrap draws as their look-alikes, one column each like the
# originals (tables and the history picture keep their columns); any other character as "?"
# per column it takes, as ls(1) shows a name it cannot; an undecodable byte of the command line
# (a surrogate escape) as \xNN.

ASCII_LOOKALIKES = {
    "✓": "+", "✗": "x", "·": ".", "○": "o", "▶": ">", "…": "...", "—": "-", "–": "-",
    "‘": "'", "’": "'", "“": '"', "”": '"', "→": "->",
    **dict(zip("▁▂▃▄▅▆▇█", "_.,:-=+#")),  # the duration sparkline, lowest to highest
}
FALLBACK = "cronwrap-ascii"


def _ascii(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    return "".join(map(_ascii_char, exc.object[exc.start:exc.end])), exc.end


def _ascii_char(char: str) -> str:
    if char in ASCII_LOOKALIKES:
        return ASCII_LOOKALIKES[char]
    if "\udc80" <= char <= "\udcff":
        return f"\\x{ord(char) - 0xdc00:02x}"
    import unicodedata

    if unicodedata.combining(char):
        return ""
    return "??" if unicodedata.east_asian_width(char) in "WF" else "?"


codecs.register_error(FALLBACK, _ascii)


def fit_locale() -> None:
    """cronwrap's stdout and stderr write what their charset lacks with FALLBACK, never
    failing: every command works in every locale."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors=FALLBACK)


def write_utf8(text: str) -> None:
    """``text`` to stdout as UTF-8, whatever the locale: what a program reads (a crontab,
    Prometheus' text format, a monitoring plugin's perfdata) must name a job exactly."""
    sys.stdout.flush()
    sys.stdout.buffer.write(text.encode("utf-8", "surrogateescape"))


def unicode_stdout() -> bool:
    """Whether stdout's charset has the marks cronwrap draws (a UTF-8 locale)."""
    try:
        "…✓".encode(getattr(sys.stdout, "encoding", None) or "utf-8")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def one_line(text: str) -> str:
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class Passthrough:
    """The job's stdout/stderr chunks on their way to cronwrap's own (see the module doc)."""

    def __init__(self) -> None:
        self.outs: dict[int, Out | None] = {}
        self.buffers: dict[int, bytearray] = {1: bytearray(), 2: bytearray()}
        self.gone: set[int] = set()  # targets whose reader went away (EPIPE)
        self.errors: dict[int, str] = {}  # targets that failed otherwise (ENOSPC, EIO, …)
        self.taken = 0
        self.delivered = 0
        for target in (1, 2):
            try:
                self.outs[target] = Out(target)
            except OSError:
                self.outs[target] = None
                self.gone.add(target)

    @property
    def dropped(self) -> int:
        """Bytes of the job's output that did not reach cronwrap's stdout/stderr."""
        return self.taken - self.delivered

    def take(self, target: int, data: bytes) -> None:
        self.taken += len(data)
        if target in self.gone or target in self.errors:
            return
        self.buffers[target] += data
        self.send(target)

    def full(self, target: int) -> bool:
        """Stop reading the job's pipe for ``target`` until its buffer drains."""
        return len(self.buffers[target]) >= BUFFER_LIMIT

    def waiting(self) -> dict[int, int]:
        """Descriptor to poll for POLLOUT -> target, for buffers that hold data."""
        waits = {}
        for target, buffer in self.buffers.items():
            out = self.outs.get(target)
            if buffer and out is not None and out.fd is not None:
                waits[out.fd] = target
        return waits

    def send(self, target: int) -> None:
        """Write what the reader takes now; never waits."""
        buffer, out = self.buffers[target], self.outs.get(target)
        while buffer and out is not None:
            try:
                with memoryview(buffer) as view:  # released before the buffer is resized
                    n = out.write(view)
            except OSError as exc:
                self._fail(target, exc)
                return
            if n == 0:
                return
            del buffer[:n]
            self.delivered += n

    def _fail(self, target: int, exc: OSError) -> None:
        if exc.errno == errno.EPIPE:
            self.gone.add(target)
        else:
            self.errors[target] = exc.strerror or str(exc)
        self.buffers[target].clear()

    def flush(self, stopped: bool) -> int:
        """After the job: deliver what the readers take; give up on one that takes nothing
        for FLUSH_STALL seconds (FLUSH_STALL_STOPPED after a timeout or stop). Closes the
        outputs and returns output_dropped."""
        for target in (1, 2):
            self._drain(target, _stall(stopped), room=0)
        for out in self.outs.values():
            if out is not None:
                out.close()
        return self.dropped

    def pour(self, target: int, chunks: Iterable[bytes], stopped: bool) -> None:
        """Pass ``chunks`` (the captured output of ``--output on-failure``) to ``target``,
        never holding more than the buffer limit in memory."""
        for chunk in chunks:
            self.take(target, chunk)
            if self.full(target):
                self._drain(target, _stall(stopped), room=BUFFER_LIMIT // 2)

    def _drain(self, target: int, stall: float, room: int,
               monotonic: Callable[[], float] = time.monotonic) -> None:
        """Send until at most ``room`` bytes wait; a reader that takes nothing for ``stall``
        seconds is given up on (the rest of that stream is dropped)."""
        buffer, out = self.buffers[target], self.outs.get(target)
        last_progress = monotonic()
        while len(buffer) > room and target not in self.gone and target not in self.errors:
            before = len(buffer)
            self.send(target)
            now = monotonic()
            if len(buffer) < before:
                last_progress = now
            elif now - last_progress >= stall:
                self.errors[target] = f"the reader took nothing for {stall:g}s"
                buffer.clear()
            elif out is not None:
                out.wait_writable(min(0.1, stall - (now - last_progress)))


def _stall(stopped: bool) -> float:
    return FLUSH_STALL_STOPPED if stopped else FLUSH_STALL
