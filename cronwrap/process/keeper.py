"""The keeper: a process of its own that owns the job's life (ARCHITECTURE.md §6).

The wrapper forks it before the job starts (supervise.py). It makes itself the job's child
subreaper, spawns the job in a process group of its own (a session where the OS has no
subreaper: ``procs.spawn_job``), and from then on it alone decides when the
job is ended: at ``--timeout``, at a signal the wrapper forwards, at a stop the wrapper asks
for (a lost lease), when the job's main process leaves descendants behind, and when the
wrapper itself dies. It reaps, finds the tree (procs.Tree), signals and KILLs; once the tree
is gone it reports how the job ended, and exits.

Why a process: the wrapper reads, captures and redacts the job's output in Python, and nothing
it does there — a slow match, a disk that blocks, a reader that stalls — may delay a timeout,
a KILL or a forwarded signal. A thread would share the interpreter's lock with that work
(measured: TERM 651 ms late at the p99 while the output was slow to redact, every /proc read
of the thread waiting behind the busy output); a process shares nothing with it.

From the wrapper (``control``) come bytes: a signal number to forward (the wrapper's signal
handlers write them there themselves, signal.set_wakeup_fd: no Python code of the wrapper's
runs on the way), STOP for request_stop(), ABORT when the wrapper failed mid-run and wants
everything KILLed at once. Its end of file means that the wrapper died (SIGKILL, the OOM
killer): the keeper ends the job as a timeout would — it must not outlive a wrapper that can
no longer renew its lease — and KILLs, after the grace, every process it saw in the tree.
To the wrapper (``report``) go JSON lines: the job's PID and start time once it is spawned,
then how it ended.

The keeper leaves the wrapper's process group: a KILL sent to the wrapper's whole group
leaves it to end the job. Where cronwrap has a controlling terminal (run by hand), the keeper
starts a session of its own, which has none: the terminal's signals (Ctrl-C, a hang-up) and its
job control (a stop for reading it) reach neither the keeper nor the job, and the job gets a
signal from the terminal once, forwarded by the wrapper. Signals sent to the keeper itself
(``pkill cronwrap``) are caught and dropped: the wrapper forwards what it gets. One that was
ignored when cronwrap started stays ignored, for the keeper and for the job (GNU timeout's
rule).
"""

from __future__ import annotations

import math
import os
import resource  # on the firing's path anyway (attempt.wrapper_usage); here before the fork
import select
import signal
import time
from signal import SIGTERM  # for SuperviseSpec, whose field "signal" hides the module there

from cronwrap import jsontext
from cronwrap.errors import (
    EXIT_KILLED,
    EXIT_NOT_EXECUTABLE,
    EXIT_NOT_FOUND,
    EXIT_SIGNAL_BASE,
    EXIT_TIMEOUT,
)
from cronwrap.process import procs
from cronwrap.process.procs import LINUX
from cronwrap.record import Record

# Every catchable signal whose default action would end the wrapper belongs to the job: the
# wrapper forwards it to the whole tree like TERM and supervises on (an ALRM cascaded from an
# outer ``timeout``, XCPU from a CPU limit, PWR from a UPS daemon...). Left out: PIPE and XFSZ
# (Python ignores them: they become EPIPE/EFBIG), the faults the kernel raises on the
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
# Job control must not stop the wrapper while its job (out of the wrapper's group) runs on
# unsupervised: caught and ignored (a caught signal is reset to its default in the job at exec).
IGNORED_SIGNALS = (signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU)
# Caught so that one sent from outside neither ends the process nor reaches the job.
OWN_SIGNALS = (signal.SIGVTALRM,)

STOP = 0  # control bytes: no signal has number 0...
ABORT = 255  # ...nor 255
_TICK = 0.01  # how often to look for leftovers while a tree is being ended
_IDLE_TICK = 1.0  # reaping safety net when no SIGCHLD arrives
# How often the tree is looked at while a limit is set (--max-memory, --max-cpu): one look
# lists /proc and reads each process's stat (measured 2.0 ms of CPU a look on a host of 140
# processes, growing with their number: ~0.4% of a core). A job without a limit is never looked
# at.
WATCH_INTERVAL = 0.5


JobProcess = procs.ProcessId  # the spawned main process, as on_spawn gets it


class SuperviseSpec(Record):
    """What to run and how to end it.

    argv: exec'd directly, no shell; PATH is looked up in env["PATH"]. timeout: seconds, 0 =
    none. kill_after: seconds from first signal to KILL; 0 = never KILL the main process.
    signal: first signal at timeout. pass_fds: e.g. the flock descriptor, so the job keeps the
    lock. orphan_grace: when kill_after is 0, leftovers' time between signal and KILL.
    max_memory (bytes), max_cpu (seconds): the tree's limits (--max-memory, --max-cpu), 0 =
    none; only a limit makes the keeper watch the tree (WATCH_INTERVAL).
    """

    argv: list[str]
    env: dict[str, str]
    timeout: float
    kill_after: float
    signal: int
    leave_orphans: bool
    cwd: str | None
    pass_fds: tuple[int, ...]
    orphan_grace: float
    max_memory: int
    max_cpu: float
    _defaults = dict(timeout=0.0, kill_after=0.0, signal=SIGTERM, leave_orphans=False,
                     cwd=None, pass_fds=(), orphan_grace=5.0, max_memory=0, max_cpu=0.0)

    def __init__(self, *args: object, **kwargs: object) -> None:
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
    request_stop() ended the job. cpu_user, cpu_system (seconds), max_rss_kb: what the tree
    used, from the keeper's getrusage of what it reaped (None: not known). limit: ``memory``
    or ``cpu`` when the keeper ended the tree for going over --max-memory/--max-cpu, and
    limit_detail says by how much.
    """

    exit_code: int | None
    signal: int | None
    timed_out: bool
    killed: bool
    spawn_error: str | None
    duration: float
    forwarded: list[int]
    orphans: int
    stop_reason: str | None
    cpu_user: float | None
    cpu_system: float | None
    max_rss_kb: int | None
    limit: str | None
    limit_detail: str | None
    _defaults = dict(orphans=0, stop_reason=None, cpu_user=None, cpu_system=None,
                     max_rss_kb=None, limit=None, limit_detail=None)
    _factories = dict(forwarded=list)

    def exit_status(self, preserve_status: bool = False) -> int:
        """The status ``cronwrap run`` exits with (README, "Exit statuses"; GNU ``timeout``)."""
        if self.spawn_error is not None:
            return self.exit_code if self.exit_code is not None else EXIT_NOT_EXECUTABLE
        if self.timed_out and not preserve_status:
            needed_kill = self.killed or self.signal == signal.SIGKILL
            return EXIT_KILLED if needed_kill else EXIT_TIMEOUT
        if self.limit is not None and not preserve_status:  # 128+TERM, or 128+KILL if needed
            needed_kill = self.killed or self.signal == signal.SIGKILL
            return EXIT_SIGNAL_BASE + (signal.SIGKILL if needed_kill else signal.SIGTERM)
        if self.signal is not None:
            return EXIT_SIGNAL_BASE + self.signal
        return self.exit_code if self.exit_code is not None else EXIT_SIGNAL_BASE


def keep(spec: SuperviseSpec, control: int, report: int, stdout: int, stderr: int) -> int:
    """The keeper process's life, from the fork to its exit status."""
    procs.keep_only_fds(0, 1, 2, control, report, stdout, stderr, *spec.pass_fds)
    procs.name_process("cronwrap-keeper")
    # Out of the wrapper's process group: a KILL of the wrapper's whole group (a service
    # manager, an outer timeout -s KILL) leaves the keeper to end the job. Out of its session
    # only when it has a terminal to leave (a Ctrl-C reaches the job once, forwarded by the
    # wrapper): a session is dear on a busy host (procs.spawn_job).
    if procs.controlling_terminal():
        os.setsid()
    else:
        os.setpgid(0, 0)
    wakeup_read, wakeup_write = procs.pipe(nonblock=True)
    signal.set_wakeup_fd(wakeup_write, warn_on_full_buffer=False)  # SIGCHLD wakes the loop
    for signum in (*FORWARDED_SIGNALS, *IGNORED_SIGNALS, *OWN_SIGNALS, signal.SIGCHLD):
        if procs.handler_of(signum) != signal.SIG_IGN or signum == signal.SIGCHLD:
            procs.set_handler(signum, _drop)
    with procs.Subreaper(fresh=True) as subreaper:
        Keeper(spec, control, report, subreaper.active).run(stdout, stderr, wakeup_read)
    return 0


def _drop(signum: int, frame: object) -> None:
    """A signal to the keeper itself: the wakeup fd carries SIGCHLD to the loop; others are
    the wrapper's to forward."""


class Keeper:
    """One job's life in the keeper process (see the module's docstring)."""

    def __init__(self, spec: SuperviseSpec, control: int, report: int, subreaper: bool) -> None:
        self.spec = spec
        self._control: int | None = control
        self._report = report
        self._subreaper = subreaper  # orphans of the job re-parent to the keeper
        self._pidfd: int | None = None
        self._main_pid = 0
        self._tree: procs.Tree | None = None
        self._main_status: int | None = None
        self._ending = False  # the first signal went to the tree
        self._kill_at: float | None = None
        self._escalating = False  # KILL until nothing is left
        self._timed_out = False
        self._stopped = False  # a stop request ended the job
        self._killed = False
        self._orphans = 0
        self._forwarded: list[int] = []
        self._limit: str | None = None  # the limit the tree went over
        self._limit_detail: str | None = None
        self._watching = spec.max_memory > 0 or spec.max_cpu > 0
        self._next_watch = 0.0

    def run(self, stdout: int, stderr: int, wakeup: int) -> None:
        started = time.monotonic()
        try:
            failure = self._spawn(stdout, stderr)
        finally:
            os.close(stdout)
            os.close(stderr)
        if failure is not None:
            return self._send(outcome=failure.asdict())
        self._send(spawned=[self._job_tree.leader.pid, self._job_tree.leader.start_time])
        try:
            self._supervise(wakeup, started)
        except BaseException:
            self._abort()  # a bug here must never leave the job unsupervised
            raise
        self._send(outcome=self._outcome(time.monotonic() - started).asdict())

    def _spawn(self, stdout: int, stderr: int) -> Outcome | None:
        """Start the job; an Outcome only when it could not be executed."""
        spec = self.spec
        try:
            # A process group of the job's own, which with the subreaper finds its whole tree;
            # without one (macOS, the BSDs), a session, which still finds an exited shell's
            # orphans.
            self._main_pid = procs.spawn_job(spec.argv, spec.env, stdout=stdout, stderr=stderr,
                                             cwd=spec.cwd, pass_fds=spec.pass_fds,
                                             session=not self._subreaper)
        except OSError as exc:
            return spawn_failure(spec, exc)
        for fd in spec.pass_fds:  # the job's now (the flock): held by it alone, so the lock is
            os.close(fd)          # free the moment the job is gone, whenever the keeper ends
        self._tree = procs.Tree(procs.identify(self._main_pid),
                                root=procs.ProcessId(os.getpid(), 0), group=True)
        self._pidfd = procs.open_pidfd(self._main_pid)  # None: fall back to ticking waitpid()
        return None

    @property
    def _job_tree(self) -> procs.Tree:
        """The job's tree, once it has been spawned."""
        assert self._tree is not None, "the job has not been spawned"
        return self._tree

    def _send(self, **message: object) -> None:
        try:
            os.write(self._report, jsontext.dumps(message).encode() + b"\n")
        except OSError:
            pass  # the wrapper is gone: the job is ended all the same

    # ---- the loop -----------------------------------------------------------------------

    def _supervise(self, wakeup: int, started: float) -> None:
        deadline = started + self.spec.timeout if self.spec.timeout > 0 else None
        self._next_watch = started + WATCH_INTERVAL  # a look at the start would find nothing
        while True:
            poller = select.poll()
            poller.register(wakeup, select.POLLIN)
            if self._control is not None:
                poller.register(self._control, select.POLLIN)
            if self._pidfd is not None:
                poller.register(self._pidfd, select.POLLIN)
            for fd, _events in poller.poll(self._poll_timeout_ms(deadline)):
                if fd == wakeup:
                    _drain(wakeup)
                elif fd == self._control and self._from_wrapper(fd):
                    return self._abort()
            if deadline is not None and time.monotonic() >= deadline and not self._ending:
                self._timed_out = True
                self._begin_ending(self.spec.kill_after)
            if self._watching and time.monotonic() >= self._next_watch:
                self._watch()
            if self._advance():
                return
            if self._main_status is not None and self._pidfd is not None:
                os.close(self._pidfd)  # it stays readable forever once the main exited
                self._pidfd = None

    def _from_wrapper(self, control: int) -> bool:
        """Act on what the wrapper sent on ``control``; True when it asked to abort."""
        try:
            data = os.read(control, 4096)
        except BlockingIOError:
            return False
        if not data:  # the wrapper died: end the job as a timeout would
            os.close(control)
            self._control = None
            self._begin_ending(self.spec.kill_after or self.spec.orphan_grace)
            return False
        for number in data:
            if number == ABORT:
                return True
            if number == STOP:
                self._stop()
            elif number in FORWARDED_SIGNALS:
                self._forwarded.append(number)
                self._signal_tree(number)
        return False

    def _stop(self) -> None:
        # The stop "ended the job" only if nothing else (timeout, leftovers) had begun to.
        if not self._ending and self._main_status is None:
            self._stopped = True
        # Unlike a timeout, a stop must end the job: with kill_after 0 it gets orphan_grace.
        self._begin_ending(self.spec.kill_after or self.spec.orphan_grace)

    def _poll_timeout_ms(self, deadline: float | None) -> int:
        """Milliseconds until the next thing to do, if nothing wakes the keeper first."""
        now = time.monotonic()
        waits = [_IDLE_TICK]
        if deadline is not None and not self._ending:
            waits.append(deadline - now)
        if self._kill_at is not None and not self._escalating:
            waits.append(self._kill_at - now)
        if self._watching:
            waits.append(self._next_watch - now)
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
        self._orphans = len(self._job_tree.members())
        if self.spec.leave_orphans:
            return False
        self._begin_ending(self.spec.kill_after or self.spec.orphan_grace)
        return True

    # ---- limits -------------------------------------------------------------------------

    def _watch(self) -> None:
        """The tree against --max-memory and --max-cpu: over one, it is ended as a timeout
        ends it, but with TERM whatever --signal says (KILL after --kill-after, or
        orphan_grace). CPU counts what the keeper reaped (getrusage) and what the live
        members used and reaped; memory is the live members' resident memory, summed."""
        self._next_watch = time.monotonic() + WATCH_INTERVAL
        if self._ending or self._tree is None:
            self._watching = False
            return
        rss, cpu = procs.tree_usage(self._tree.members())
        spec = self.spec
        if spec.max_memory and rss > spec.max_memory:
            self._limit, self._limit_detail = "memory", (
                f"the tree's memory reached {_size(rss)}, over --max-memory "
                f"{_size(spec.max_memory)}")
        elif spec.max_cpu:
            reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu += reaped.ru_utime + reaped.ru_stime
            if cpu > spec.max_cpu:
                self._limit, self._limit_detail = "cpu", (
                    f"the tree's CPU time reached {cpu:.1f}s, over --max-cpu {spec.max_cpu:g}s")
        if self._limit is not None:
            self._watching = False
            self._ending = True
            self._signal_tree(*procs.first_signals(SIGTERM))
            self._schedule_kill(spec.kill_after or spec.orphan_grace)

    # ---- signals ------------------------------------------------------------------------

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
            self._job_tree.group = False  # its PID, the group's ID, may be reused from now on

    def _abort(self) -> None:
        """KILL everything now, until nothing is left (or give up after ~1 s of tries)."""
        for _ in range(1000):
            self._escalating = True
            self._kill_remaining()
            if not self._reap_children():
                return
            time.sleep(_TICK / 10)

    def _outcome(self, duration: float) -> Outcome:
        status = self._main_status
        # The tree is gone and reaped: the keeper, its subreaper, waited for the job and for
        # every orphan (daemons that left the session included), so its children's usage is
        # the tree's. ru_maxrss is the largest peak of one process (KiB on Linux).
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        return Outcome(
            exit_code=(os.WEXITSTATUS(status)
                       if status is not None and os.WIFEXITED(status) else None),
            signal=os.WTERMSIG(status) if status is not None and os.WIFSIGNALED(status) else None,
            timed_out=self._timed_out,
            killed=self._killed,
            spawn_error=None,
            duration=duration,
            forwarded=list(self._forwarded),
            orphans=self._orphans,
            stop_reason="stopped" if self._stopped else None,
            cpu_user=round(used.ru_utime, 3),
            cpu_system=round(used.ru_stime, 3),
            max_rss_kb=used.ru_maxrss if LINUX else used.ru_maxrss // 1024,
            limit=self._limit,
            limit_detail=self._limit_detail,
        )


def _size(n: int) -> str:
    """Bytes as a person reads them: 130.2 MiB."""
    return f"{n / (1 << 20):.1f} MiB"


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def spawn_failure(spec: SuperviseSpec, exc: OSError) -> Outcome:
    """The Outcome of a job that could not be started (126 or 127, as GNU timeout)."""
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
    return Outcome(exit_code=code, signal=None, timed_out=False, killed=False,
                   spawn_error=message, duration=0.0)
