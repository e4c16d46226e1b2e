"""Run one job: spawn it, stream its output, and end its whole process tree like GNU ``timeout``.

Why it is built this way (ARCHITECTURE.md §6, "Killing a tree"):

- The wrapper makes itself a child subreaper for the length of ``run()``, so every orphan of
  the job re-parents to the wrapper instead of PID 1. "The job" is then "every descendant of
  the wrapper" (procs.Tree) — which catches grandchildren that called setsid(), the ones
  ``os.killpg`` misses. A side effect to know about: while ``run()`` is supervising, it reaps
  *every* child of the wrapper process, so the caller must not run other children of its own
  at the same time. Where the OS has no subreaper (macOS, the BSDs), the job's session is what
  finds the orphans of an exited shell, and leftovers are looked for in the process table.
- One poll loop waits on the main process (a pidfd), the two output pipes and a self-pipe that
  signals and ``request_stop()`` write to. Pipe EOF never decides that the job ended: a
  grandchild that keeps stdout open must not delay a timeout.
- Spawning, the tree, signals (each checked against the process that was seen) and reaping
  are procs.py's; this module decides when.

Only light stdlib modules are imported here; ``subprocess`` and ``ctypes`` are imported when a
job is actually spawned, so that ``status`` and friends do not pay for them.
"""

from __future__ import annotations

import fcntl
import math
import os
import select
import signal
import threading
import time
from cronwrap import procs
from cronwrap.errors import (
    EXIT_KILLED,
    EXIT_NOT_EXECUTABLE,
    EXIT_NOT_FOUND,
    EXIT_SIGNAL_BASE,
    EXIT_TIMEOUT,
)
from cronwrap.record import TYPE_CHECKING, Record

if TYPE_CHECKING:
    from collections.abc import Callable
    from subprocess import Popen

    from cronwrap.sentinel import Sentinel
    from cronwrap.stdio import Passthrough

# Every catchable signal whose default action would end the wrapper belongs to the job: the
# wrapper forwards it to the whole tree like TERM and supervises on (an ALRM cascaded from an
# outer ``timeout``, XCPU from a CPU limit, PWR from a UPS daemon...). Left out: PIPE and XFSZ
# (Python ignores them: they become EPIPE/EFBIG), and the faults the kernel raises on the
# wrapper's own instructions (SEGV, BUS, ILL, FPE, TRAP), where a handler that returns would
# fault again forever; and VTALRM, cronwrap's own: the CPU deadline of a regular expression
# (redact.py, deadline.py), which only a signal can interrupt.
FORWARDED_SIGNALS = tuple(
    sig for sig in (
        signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
        signal.SIGUSR2, signal.SIGALRM, signal.SIGABRT, getattr(signal, "SIGSTKFLT", None),
        signal.SIGXCPU, signal.SIGPROF, signal.SIGIO,
        getattr(signal, "SIGPWR", None), signal.SIGSYS,
        *range(getattr(signal, "SIGRTMIN", 0), getattr(signal, "SIGRTMAX", -1) + 1),
    ) if sig is not None
)
# Job control must not stop the wrapper while its job (in a session of its own) runs on
# unsupervised: caught and ignored (a caught signal is reset to its default in the job at exec).
IGNORED_SIGNALS = (signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU)

_PIPE_SIZE = 1 << 20  # big pipe + big reads: ~1000 syscalls per GiB, no per-line work
_READ_SIZE = 1 << 20
# SIGCHLD only wakes the keeper, so that orphans re-parented to us are reaped as they die and
# cannot pile up as zombies while a long job runs. VTALRM is caught so that one sent from
# outside neither ends the wrapper nor reaches the job (deadline.py takes it while it times).
_WAKE_ONLY_SIGNALS = (signal.SIGCHLD, signal.SIGVTALRM)
_TICK = 0.01  # how often to look for leftovers while a tree is being ended
_IDLE_TICK = 1.0  # reaping safety net when no SIGCHLD arrives (run() outside the main thread)
_STOP_BYTE = b"\0"  # written to the self-pipe by request_stop(); no signal has number 0


JobProcess = procs.ProcessId  # the spawned main process, as on_spawn gets it


class SuperviseSpec(Record):
    """What to run and how to end it.

    argv: exec'd directly, no shell; PATH is looked up in env["PATH"]. timeout: seconds, 0 =
    none. kill_after: seconds from first signal to KILL; 0 = never KILL the main process.
    signal: first signal at timeout. pass_fds: e.g. the flock descriptor, so the job keeps the
    lock. orphan_grace: when kill_after is 0, leftovers' time between signal and KILL.
    """

    __slots__ = ("argv", "env", "timeout", "kill_after", "signal", "leave_orphans", "cwd",
                 "pass_fds", "orphan_grace")
    _defaults = dict(timeout=0.0, kill_after=0.0, signal=signal.SIGTERM, leave_orphans=False,
                     cwd=None, pass_fds=(), orphan_grace=5.0)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if not self.argv:
            raise ValueError("SuperviseSpec.argv is empty: there is no command to run")


class Outcome(Record):
    """How a supervised run ended.

    exit_code: the main process's, if it exited; signal: the one that ended it, if any;
    killed: KILL had to be sent to something because the first signal did not suffice;
    spawn_error: "not found: foo" / "not executable: ./x"; duration: seconds, monotonic, spawn
    to main process reaped and tree gone; forwarded: signals forwarded to the job; orphans:
    leftovers found when the main process exited by itself; stop_reason: set when
    request_stop() ended the job.
    """

    __slots__ = ("exit_code", "signal", "timed_out", "killed", "spawn_error", "duration",
                 "forwarded", "orphans", "stop_reason")
    _defaults = dict(orphans=0, stop_reason=None)
    _factories = dict(forwarded=list)

    def exit_status(self, preserve_status: bool = False) -> int:
        """The status ``cronwrap run`` exits with (README, "Exit statuses"; GNU ``timeout``)."""
        if self.spawn_error is not None:
            return self.exit_code if self.exit_code is not None else EXIT_NOT_EXECUTABLE
        if self.timed_out and not preserve_status:
            needed_kill = self.killed or self.signal == signal.SIGKILL
            return EXIT_KILLED if needed_kill else EXIT_TIMEOUT
        if self.signal is not None:
            return EXIT_SIGNAL_BASE + self.signal
        return self.exit_code if self.exit_code is not None else EXIT_SIGNAL_BASE


class Supervisor:
    """Supervises one run of ``spec``; ``run()`` once, ``request_stop()`` from any thread.

    Two loops share the run. The keeper (a thread of its own) owns the job's life: it waits
    on the main process, the signals and the clock; it forwards signals, times out, ends the
    tree and reaps. The calling thread owns the output: it reads the job's pipes, hands every
    chunk to ``on_output`` (the capture, which redacts) and to passthrough, until the keeper
    says the tree is gone. Nothing the output side does — a slow redaction, a stalled reader,
    a disk that blocks — delays a timeout, a KILL or a forwarded signal; the keeper needs
    only the interpreter, and every piece of output work that holds it is short (redact.py's
    patterns are linear and operator patterns run under a CPU deadline, which is why the
    output side is the main thread: only there can a signal interrupt a regular expression).
    """

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
        self._sentinel: Sentinel | None = None
        self._stop_lock = threading.Lock()
        self._stop_reason: str | None = None
        self._wakeup_write: int | None = None  # guarded by _stop_lock
        self._subreaper = False  # orphans of the job re-parent to the wrapper (set by run())
        self._reset_run_state()

    def _reset_run_state(self) -> None:
        self._proc: Popen[bytes] | None = None
        self._pidfd: int | None = None
        self._main_pid = 0
        self._tree: procs.Tree | None = None
        self._main_status: int | None = None
        self._pipes: dict[int, int] = {}  # read end -> the job's fd number (1 or 2)
        self._ending = False  # the first signal went to the tree
        self._kill_at: float | None = None
        self._escalating = False  # KILL until nothing is left
        self._aborting = False  # the output side failed: KILL everything at once
        self._keeper_error: BaseException | None = None
        self._timed_out = False
        self._stop_handled = False
        self._stopped_by_request = False
        self._killed = False
        self._orphans = 0
        self._forwarded: list[int] = []

    # ---- public -------------------------------------------------------------------------

    def run(self) -> Outcome:
        """Run the job to the end of its whole tree. Call from the main thread."""
        wakeup_read, wakeup_write = procs.pipe(nonblock=True)
        with self._stop_lock:
            self._wakeup_write = wakeup_write
        # Before the subreaper: the sentinel must not become one of our children. As PID 1
        # there is none to start: when init dies, the kernel KILLs its whole PID namespace.
        self._sentinel = None if procs.is_init() else _start_sentinel(self.spec)
        try:
            with _SignalsToPipe(wakeup_write), procs.Subreaper() as subreaper:
                self._subreaper = subreaper.active
                return self._run_with_wakeup(wakeup_read)
        finally:
            if self._sentinel is not None:
                self._sentinel.done()
            with self._stop_lock:
                self._wakeup_write = None
            os.close(wakeup_read)
            os.close(wakeup_write)

    def request_stop(self, reason: str) -> None:
        """End the whole tree as a timeout would (the first reason wins). Thread-safe."""
        with self._stop_lock:
            if self._stop_reason is None:
                self._stop_reason = reason
        self._wake()

    def _wake(self) -> None:
        """Wake the keeper: a stop request or an abort is waiting for it."""
        with self._stop_lock:
            if self._wakeup_write is not None:
                try:
                    os.write(self._wakeup_write, _STOP_BYTE)
                except BlockingIOError:
                    pass  # the pipe is full, so the keeper wakes anyway

    # ---- one run ------------------------------------------------------------------------

    def _run_with_wakeup(self, wakeup_read: int) -> Outcome:
        self._reset_run_state()
        started = time.monotonic()
        spawn_failure = self._spawn()
        if spawn_failure is not None:
            spawn_failure.duration = time.monotonic() - started
            return spawn_failure
        gone_read, gone_write = procs.pipe(nonblock=True)
        keeper = threading.Thread(target=self._keep, args=(wakeup_read, gone_write, started),
                                  name="cronwrap-keeper", daemon=True)
        try:
            if self._on_spawn is not None:
                self._on_spawn(self._tree.leader)
            keeper.start()
            self._pump_output(gone_read)
        except BaseException:
            self._aborting = True
            if keeper.is_alive():
                self._wake()
            else:  # on_spawn failed: the keeper never started
                self._abort()
            raise
        finally:
            if keeper.ident is not None:
                keeper.join()
            os.close(gone_read)
            os.close(gone_write)
            self._close_job_fds()
            if self._pidfd is not None:
                os.close(self._pidfd)
                self._pidfd = None
        if self._keeper_error is not None:
            raise self._keeper_error
        return self._outcome(time.monotonic() - started)

    def _spawn(self) -> Outcome | None:
        """Start the job; an Outcome only when it could not be executed."""
        out_read, out_write = _output_pipe()
        err_read, err_write = _output_pipe()
        self._pipes = {out_read: 1, err_read: 2}
        spec = self.spec
        try:
            self._proc = procs.spawn(spec.argv, spec.env, stdout=out_write, stderr=err_write,
                                     cwd=spec.cwd, pass_fds=spec.pass_fds)
        except OSError as exc:
            self._close_job_fds()
            return _spawn_failure(self.spec, exc)
        except BaseException:
            self._close_job_fds()
            raise
        finally:
            os.close(out_write)
            os.close(err_write)
        self._main_pid = self._proc.pid
        main = procs.identify(self._main_pid)
        self._tree = procs.Tree(main, root=procs.ProcessId(os.getpid(), 0), group=True)
        if self._sentinel is not None:
            self._sentinel.job(main)
        self._pidfd = procs.open_pidfd(self._main_pid)  # None: fall back to ticking waitpid()
        return None

    # ---- the keeper: the job's life -----------------------------------------------------

    def _keep(self, wakeup_read: int, gone_write: int, started: float) -> None:
        """The keeper thread: supervise until the tree is gone, then tell the output side."""
        try:
            self._check_stop_request()  # request_stop() may have come before the spawn
            self._supervise(wakeup_read, started)
        except BaseException as exc:  # a bug here must never leave the job unsupervised
            self._keeper_error = exc
            self._abort()
        finally:
            os.write(gone_write, b"\0")

    def _supervise(self, wakeup_read: int, started: float) -> None:
        deadline = started + self.spec.timeout if self.spec.timeout > 0 else None
        while True:
            poller = select.poll()
            poller.register(wakeup_read, select.POLLIN)
            if self._pidfd is not None:
                poller.register(self._pidfd, select.POLLIN)
            for fd, _events in poller.poll(self._poll_timeout_ms(deadline)):
                if fd == wakeup_read:
                    self._handle_wakeups(wakeup_read)
            if self._aborting:
                return self._abort()
            if deadline is not None and time.monotonic() >= deadline and not self._ending:
                self._on_timeout()
            if self._advance():
                return
            if self._main_status is not None and self._pidfd is not None:
                os.close(self._pidfd)  # it stays readable forever once the main exited
                self._pidfd = None

    def _poll_timeout_ms(self, deadline: float | None) -> int:
        """Milliseconds until the next thing to do, if nothing wakes the keeper first."""
        now = time.monotonic()
        waits = [_IDLE_TICK]
        if deadline is not None and not self._ending:
            waits.append(deadline - now)
        if self._kill_at is not None and not self._escalating:
            waits.append(self._kill_at - now)
        if self._main_status is not None or self._escalating or self._pidfd is None:
            waits.append(_TICK)  # leftovers are not our pidfd: look for them regularly
        return max(0, math.ceil(min(waits) * 1000))

    def _advance(self) -> bool:
        """Reap, escalate when it is time; True once the tree is gone."""
        if self._kill_at is not None and time.monotonic() >= self._kill_at:
            self._escalating = True
        main_was_running = self._main_status is None
        children_left = self._reap_children()
        if main_was_running and self._main_status is not None:
            children_left = self._on_main_exit(children_left)
        if self._main_status is None:
            if self._escalating:
                self._kill_remaining()
            return False
        if not children_left:
            return True
        if self._escalating:
            self._kill_remaining()
        return False

    def _on_main_exit(self, children_left: bool) -> bool:
        """Decide what happens to what the main process left behind; False when nothing is."""
        if not children_left:
            return False
        if self._ending:
            # A timeout with kill_after 0 never KILLs the main process (GNU), but once it has
            # gone, its leftovers get orphan_grace like any other leftovers.
            self._schedule_kill(self.spec.kill_after or self.spec.orphan_grace)
            return True
        self._orphans = len(self._tree.members())
        if self.spec.leave_orphans:
            return False
        self._begin_ending(self.spec.kill_after or self.spec.orphan_grace)
        return True

    def _on_timeout(self) -> None:
        self._timed_out = True
        self._begin_ending(self.spec.kill_after)

    def _check_stop_request(self) -> None:
        if self._stop_reason is None or self._stop_handled:
            return
        self._stop_handled = True
        # The stop "ended the job" only if nothing else (timeout, leftovers) had begun to.
        if not self._ending and self._main_status is None:
            self._stopped_by_request = True
        # Unlike a timeout, a stop must end the job: with kill_after 0 it gets orphan_grace.
        self._begin_ending(self.spec.kill_after or self.spec.orphan_grace)

    # ---- signals ------------------------------------------------------------------------

    def _handle_wakeups(self, wakeup_read: int) -> None:
        try:
            wakeups = os.read(wakeup_read, 4096)
        except BlockingIOError:
            return
        for number in wakeups:
            if number in FORWARDED_SIGNALS:
                self._forwarded.append(number)
                self._signal_tree(number)
        self._check_stop_request()

    def _begin_ending(self, grace: float) -> None:
        """First signal to the tree, then KILL after ``grace`` (0 = no KILL scheduled)."""
        if not self._ending:
            self._ending = True
            self._signal_tree(*procs.first_signals(self.spec.signal))
        self._schedule_kill(grace)

    def _schedule_kill(self, grace: float) -> None:
        if grace > 0 and self._kill_at is None:
            self._kill_at = time.monotonic() + grace

    def _signal_tree(self, *signums: int) -> None:
        """Each signal once to the whole tree (procs.Tree.signal)."""
        if self._tree is not None:
            self._tree.signal(*signums)

    def _kill_remaining(self) -> None:
        if self._tree is not None and self._tree.signal(signal.SIGKILL):
            self._killed = True

    # ---- processes ----------------------------------------------------------------------

    def _reap_children(self) -> bool:
        """Reap every zombie child; True while some process of the job is still alive."""
        children_left = procs.reap_children(self._on_reaped)
        if children_left or self._subreaper or self._tree is None:
            return children_left
        # No subreaper: the orphans of the job are not our children; look for them.
        return bool(self._tree.members())

    def _on_reaped(self, pid: int, status: int) -> None:
        if pid == self._main_pid and self._main_status is None:
            self._main_status = status
            self._tree.group = False  # its PID, the group's ID, may be reused from now on
            if self._proc is not None:
                # Tell Popen it is reaped, or its __del__ would waitpid() a recycled PID.
                self._proc.returncode = os.waitstatus_to_exitcode(status)

    def _abort(self) -> None:
        """Something in the wrapper failed mid-run: never leave the job running unsupervised."""
        for _ in range(1000):
            self._escalating = True
            self._kill_remaining()
            if not self._reap_children():
                return
            time.sleep(_TICK / 10)

    # ---- the output side ----------------------------------------------------------------

    def _pump_output(self, gone_read: int) -> None:
        """Pass the job's output on until the keeper says the tree is gone, then what the
        pipes still hold."""
        while True:
            poller, writable = self._poll_set(gone_read)
            for fd, _events in poller.poll():
                if fd == gone_read:
                    return self._drain_output()
                if fd in self._pipes:
                    self._pass_output(fd)
                elif fd in writable:
                    self._passthrough.send(writable[fd])
            self._close_unread_pipes()

    def _poll_set(self, gone_read: int) -> tuple[select.poll, dict[int, int]]:
        """What to wait for now: the job's pipes (unless passthrough is backed up: the job
        then waits on its write, as it would on a slow reader without cronwrap), cronwrap's
        own stdout/stderr when output waits for them, and the keeper's word."""
        poller = select.poll()
        passthrough = self._passthrough
        for fd, target in self._pipes.items():
            if passthrough is None or not passthrough.full(target):
                poller.register(fd, select.POLLIN)
        writable = passthrough.waiting() if passthrough is not None else {}
        for fd in writable:
            poller.register(fd, select.POLLOUT)
        poller.register(gone_read, select.POLLIN)
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
        """Pass on what is already in the pipes, then close them.

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
        self._close_job_fds()

    def _close_job_fds(self) -> None:
        for fd in self._pipes:
            os.close(fd)
        self._pipes = {}

    def _outcome(self, duration: float) -> Outcome:
        status = self._main_status
        exited = status is not None and os.WIFEXITED(status)
        signaled = status is not None and os.WIFSIGNALED(status)
        return Outcome(
            exit_code=os.WEXITSTATUS(status) if exited else None,
            signal=os.WTERMSIG(status) if signaled else None,
            timed_out=self._timed_out,
            killed=self._killed,
            spawn_error=None,
            duration=duration,
            forwarded=list(self._forwarded),
            orphans=self._orphans,
            stop_reason=self._stop_reason if self._stopped_by_request else None,
        )


def supervise(
    spec: SuperviseSpec,
    on_output: Callable[[int, bytes], None],
    on_spawn: Callable[[JobProcess], None] | None = None,
) -> Outcome:
    """Run ``spec`` under a fresh Supervisor (see there)."""
    return Supervisor(spec, on_output, on_spawn).run()


# ---- signal handlers ---------------------------------------------------------------------


class _SignalsToPipe:
    """While active, forwarded and ignored signals and SIGCHLD write their number to
    ``wakeup_write`` (the keeper forwards the first kind and drops the others).

    A signal that was ignored when cronwrap started (``nohup``, ``&`` in a script) stays
    ignored, by cronwrap and by the job, which inherits the disposition at exec, as under GNU
    ``timeout``: a manual re-run started with ``nohup`` over SSH survives the hangup. SIGCHLD
    is caught whatever it was (ignored, children would reap themselves and the job's status
    would be lost), and keeps a handler that does nothing afterwards instead of going back to
    the default: a SIGCHLD that arrived while its handler was being reset would make Python
    print "Signal 17 ignored due to race condition" (the two are equivalent for SIGCHLD).

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
        for signum in (*FORWARDED_SIGNALS, *_WAKE_ONLY_SIGNALS, *IGNORED_SIGNALS):
            previous = signal.getsignal(signum)
            if previous is signal.SIG_IGN and signum not in _WAKE_ONLY_SIGNALS:
                continue
            signal.signal(signum, _note_signal)
            if not (signum == signal.SIGCHLD and previous is signal.SIG_DFL):
                self._previous_handlers[signum] = previous

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self._previous_handlers.items():
            if handler is not None:  # None: a handler set outside Python, which cannot be restored
                signal.signal(signum, handler)  # type: ignore[arg-type]
        if self._previous_wakeup is not None:
            signal.set_wakeup_fd(self._previous_wakeup)


def _note_signal(signum: int, frame: object) -> None:
    """The wakeup fd already carries the signal number to the keeper; nothing to do here."""


# ---- spawning ----------------------------------------------------------------------------


def _start_sentinel(spec: SuperviseSpec) -> Sentinel | None:
    """The watcher that ends the job if this wrapper dies (sentinel.py); None if it cannot
    be forked (the job then runs as under GNU timeout, which has no such watcher)."""
    from cronwrap.sentinel import Sentinel

    try:
        return Sentinel(spec.signal, spec.kill_after or spec.orphan_grace)
    except OSError:
        return None


def _output_pipe() -> tuple[int, int]:
    read_end, write_end = procs.pipe()
    try:
        fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
    except (OSError, AttributeError):
        # Over /proc/sys/fs/pipe-max-size or the user's pipe quota, or not Linux (no
        # F_SETPIPE_SZ): the default size still works.
        pass
    return read_end, write_end


def _spawn_failure(spec: SuperviseSpec, exc: OSError) -> Outcome:
    command = spec.argv[0]
    if spec.cwd is not None and exc.filename == spec.cwd:
        code = EXIT_NOT_EXECUTABLE
        message = f"cannot change directory to {spec.cwd}: {exc.strerror}"
    elif isinstance(exc, FileNotFoundError):
        code, message = EXIT_NOT_FOUND, f"not found: {command}"
    elif isinstance(exc, PermissionError):
        code, message = EXIT_NOT_EXECUTABLE, f"not executable: {command}"
    else:
        code, message = EXIT_NOT_EXECUTABLE, f"not executable: {command} ({exc.strerror})"
    return Outcome(
        exit_code=code,
        signal=None,
        timed_out=False,
        killed=False,
        spawn_error=message,
        duration=0.0,
    )
