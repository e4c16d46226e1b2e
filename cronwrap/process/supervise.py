"""Run one job: its keeper ends its whole tree like GNU ``timeout``; the wrapper takes its output.

Why it is built this way (ARCHITECTURE.md §6):

- The job's life belongs to the keeper (keeper.py), a process the wrapper forks before the job
  starts: the job's child subreaper, its spawner, its timer, the one that signals, KILLs and
  reaps. The wrapper only takes the job's output (capture, redaction, passthrough) and renews
  its lease, so nothing either does can delay a timeout, a KILL or a forwarded signal: they
  share no interpreter with the keeper. The keeper is also the job's guard when the wrapper
  dies: it ends the job as a timeout would.
- Signals sent to the wrapper reach the keeper without any Python code of the wrapper's: the
  wrapper's signal wakeup fd is the keeper's control pipe, and its handlers do nothing.
  ``request_stop()`` writes to the same pipe.
- Pipe EOF never decides that the job ended: a grandchild that keeps stdout open must not
  delay a timeout. The keeper says when the tree is gone; the wrapper then takes what the
  pipes hold and stops.

Only light stdlib modules are imported here: the keeper spawns the job with
``os.posix_spawn`` (``procs.spawn_job``), and ``ctypes`` is imported just before its fork
(``procs.fork``).
"""

from __future__ import annotations

import fcntl
import os
import select
import signal
import threading

from cronwrap import jsontext
from cronwrap.process import procs
from cronwrap.process.keeper import (
    ABORT,
    FORWARDED_SIGNALS,
    IGNORED_SIGNALS,
    OWN_SIGNALS,
    STOP,
    JobProcess,
    Outcome,
    SuperviseSpec,
    keep,
    spawn_failure,
)
from cronwrap.record import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from cronwrap.stdio import Passthrough

__all__ = ["FORWARDED_SIGNALS", "IGNORED_SIGNALS", "JobProcess", "Outcome", "SuperviseSpec",
           "Supervisor", "supervise"]

_PIPE_SIZE = 1 << 20  # big pipe + big reads: ~1000 syscalls per GiB, no per-line work
_READ_SIZE = 1 << 20
_ABORT_WAIT = 10.0  # seconds the keeper gets to KILL the tree after an abort


class KeeperLost(RuntimeError):
    """The keeper process died before it reported how the job ended."""


class Supervisor:
    """Supervises one run of ``spec``; ``run()`` once, ``request_stop()`` from any thread."""

    def __init__(
        self,
        spec: SuperviseSpec,
        on_output: Callable[[int, bytes], None],
        on_spawn: Callable[[JobProcess], None] | None = None,
        passthrough: Passthrough | None = None,
    ) -> None:
        """on_output(fd, chunk) gets every chunk (the capture); passthrough, when given,
        forwards them to the wrapper's own stdout/stderr without ever blocking the loop."""
        self.spec = spec
        self._on_output = on_output
        self._on_spawn = on_spawn
        self._passthrough = passthrough
        self._control_lock = threading.Lock()
        self._control: int | None = None  # guarded by _control_lock
        self._stop_reason: str | None = None
        self._pipes: dict[int, int] = {}  # read end -> the job's fd number (1 or 2)
        self._job: JobProcess | None = None
        self._reports = b""

    # ---- public -------------------------------------------------------------------------

    def run(self) -> Outcome:
        """Run the job to the end of its whole tree."""
        control_read, control_write = procs.pipe(nonblock=True)
        report_read, report_write = procs.pipe()
        out_read, out_write = _output_pipe()
        err_read, err_write = _output_pipe()
        self._pipes = {out_read: 1, err_read: 2}
        # The wrapper keeps the control pipe's read end open too: a signal or a stop written
        # after the keeper has exited then fills a pipe (and is dropped) instead of failing.
        with self._control_lock:
            self._control = control_write
        keeper = None
        try:
            # Signals are caught before the keeper is forked: once the job may run, a signal
            # sent to cronwrap goes to the control pipe, and the keeper forwards it, never the
            # wrapper's own death by the signal's default action (seen as a test's USR1 that
            # killed the wrapper when it came right after the job started, under load).
            with _SignalsToPipe(control_write):
                try:
                    keeper = procs.fork(lambda: keep(self.spec, control_read, report_write,
                                                     out_write, err_write))
                except OSError as exc:
                    return spawn_failure(self.spec, exc)
                finally:
                    for fd in (report_write, out_write, err_write):
                        os.close(fd)
                try:
                    outcome = self._follow(report_read)
                except BaseException:
                    self._abort(keeper)
                    raise
        finally:
            with self._control_lock:
                self._control = None
            for fd in (control_read, control_write, report_read, *self._pipes):
                os.close(fd)
            self._pipes = {}
            if keeper is not None:
                procs.reap(keeper)
        if outcome.stop_reason is not None:
            outcome.stop_reason = self._stop_reason
        return outcome

    def request_stop(self, reason: str) -> None:
        """End the whole tree as a timeout would (the first reason wins). Thread-safe."""
        with self._control_lock:
            if self._stop_reason is None:
                self._stop_reason = reason
            self._tell(STOP)

    def _tell(self, byte: int) -> None:
        """A byte to the keeper (call with _control_lock held)."""
        if self._control is not None:
            try:
                os.write(self._control, bytes((byte,)))
            except BlockingIOError:
                pass  # full: the keeper has not read the last ones yet, and will

    def _abort(self, keeper: int) -> None:
        """The wrapper failed mid-run: the keeper KILLs the tree at once; if the keeper
        itself does not answer, what is known of the job is ended from here."""
        with self._control_lock:
            self._tell(ABORT)
        if not procs.reap(keeper, _ABORT_WAIT):
            procs.send(procs.ProcessId(keeper, 0), signal.SIGKILL)
            procs.reap(keeper)
            self._end_job()

    def _end_job(self) -> None:
        """The job, when its keeper is gone: ended as the keeper would have."""
        if self._job is not None:
            procs.Tree(self._job).end(self.spec.signal,
                                      self.spec.kill_after or self.spec.orphan_grace)

    # ---- the output, and the keeper's reports ---------------------------------------------

    def _follow(self, report: int) -> Outcome:
        """Pass the job's output on until the keeper reports its end, then what the pipes
        still hold."""
        while True:
            poller, writable = self._poll_set(report)
            for fd, _events in poller.poll():
                if fd == report:
                    outcome = self._read_reports(report)
                    if outcome is not None:
                        self._drain_output()
                        return outcome
                elif fd in self._pipes:
                    self._pass_output(fd)
                elif fd in writable and self._passthrough is not None:
                    self._passthrough.send(writable[fd])
            self._close_unread_pipes()

    def _read_reports(self, report: int) -> Outcome | None:
        """The keeper's lines: the job spawned (``on_spawn``), then how it ended."""
        data = os.read(report, 65536)
        if not data:
            self._end_job()
            raise KeeperLost(f"the keeper of {self.spec.argv[0]} died before the job's end; "
                             "its tree was ended")
        self._reports += data
        *lines, self._reports = self._reports.split(b"\n")
        for line in lines:
            message = jsontext.loads(line)
            if "spawned" in message:
                self._job = JobProcess(*message["spawned"])
                if self._on_spawn is not None:
                    self._on_spawn(self._job)
            elif "outcome" in message:
                return Outcome(**message["outcome"])
        return None

    def _poll_set(self, report: int) -> tuple[select.poll, dict[int, int]]:
        """What to wait for now: the job's pipes (unless passthrough is backed up: the job
        then waits on its write, as it would on a slow reader without cronwrap), cronwrap's
        own stdout/stderr when output waits for them, and the keeper's reports."""
        poller = select.poll()
        passthrough = self._passthrough
        for fd, target in self._pipes.items():
            if passthrough is None or not passthrough.full(target):
                poller.register(fd, select.POLLIN)
        writable = passthrough.waiting() if passthrough is not None else {}
        for fd in writable:
            poller.register(fd, select.POLLOUT)
        poller.register(report, select.POLLIN)
        return poller, writable

    def _close_unread_pipes(self) -> None:
        """A stream whose reader went away (EPIPE) is closed to the job after what it holds
        now is captured: the job's next write fails as it would without cronwrap."""
        if self._passthrough is None:
            return
        for fd, target in list(self._pipes.items()):
            if target in self._passthrough.gone:
                budget = _PIPE_SIZE
                while budget > 0 and select.select([fd], [], [], 0)[0]:
                    n = self._pass_output(fd)
                    if n == 0:
                        break
                    budget -= n
                if fd in self._pipes:
                    os.close(fd)
                    del self._pipes[fd]

    def _pass_output(self, fd: int) -> int:
        """Pass one chunk on (closing the pipe at EOF); the number of bytes passed."""
        data = os.read(fd, _READ_SIZE)
        if data:
            target = self._pipes[fd]
            self._on_output(target, data)
            if self._passthrough is not None:
                self._passthrough.take(target, data)
            return len(data)
        os.close(fd)
        del self._pipes[fd]
        return 0

    def _drain_output(self) -> None:
        """Pass on what is already in the pipes.

        The tree is gone, so the buffered data ends in EOF — unless leave_orphans kept a writer
        alive, which may hold the pipe forever: never wait for more than is readable now, and
        stop after twice what a pipe can buffer, so that a writer that never stops cannot keep
        the wrapper here.
        """
        budget = 2 * _PIPE_SIZE * len(self._pipes)
        while self._pipes and budget > 0:
            ready = select.poll()
            for fd in self._pipes:
                ready.register(fd, select.POLLIN)
            events = ready.poll(0)
            if not events:
                break
            for fd, _events in events:
                budget -= self._pass_output(fd)


def supervise(
    spec: SuperviseSpec,
    on_output: Callable[[int, bytes], None],
    on_spawn: Callable[[JobProcess], None] | None = None,
) -> Outcome:
    """Run ``spec`` under a fresh Supervisor (see there)."""
    return Supervisor(spec, on_output, on_spawn).run()


# ---- signal handlers ---------------------------------------------------------------------


class _SignalsToPipe:
    """While active, forwarded, ignored and cronwrap's own signals write their number to
    ``wakeup_write`` (the keeper's control pipe: it forwards the first kind and drops the
    others), and do nothing else in the wrapper.

    A signal that was ignored when cronwrap started (``nohup``, ``&`` in a script) stays
    ignored, by cronwrap and by the job, as under GNU ``timeout``: a manual re-run started
    with ``nohup`` over SSH survives the hangup. SIGCHLD is left alone: the wrapper's only
    child is the keeper, which it reaps at the end.

    Outside the main thread Python cannot install handlers; the job then still runs, it just
    gets no forwarded signals.
    """

    def __init__(self, wakeup_write: int) -> None:
        self._wakeup_write = wakeup_write
        self._previous_handlers: dict[int, object] = {}
        self._previous_wakeup: int | None = None

    def __enter__(self) -> None:
        try:
            self._previous_wakeup = signal.set_wakeup_fd(
                self._wakeup_write, warn_on_full_buffer=False
            )
        except ValueError:
            return  # not the main thread
        for signum in (*FORWARDED_SIGNALS, *IGNORED_SIGNALS, *OWN_SIGNALS):
            if procs.handler_of(signum) != signal.SIG_IGN:
                self._previous_handlers[signum] = procs.set_handler(signum, _note_signal)

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self._previous_handlers.items():
            if handler is not None:  # None: a handler set outside Python, which cannot be restored
                procs.set_handler(signum, handler)  # type: ignore[arg-type]
        if self._previous_wakeup is not None:
            signal.set_wakeup_fd(self._previous_wakeup)


def _note_signal(signum: int, frame: object) -> None:
    """The wakeup fd already carries the signal number to the keeper; nothing to do here."""


def _output_pipe() -> tuple[int, int]:
    read_end, write_end = procs.pipe()
    try:
        fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
    except (OSError, AttributeError):
        # Over /proc/sys/fs/pipe-max-size or the user's pipe quota, or not Linux (no
        # F_SETPIPE_SZ): the default size still works.
        pass
    return read_end, write_end
