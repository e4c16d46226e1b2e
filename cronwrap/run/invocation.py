"""One invocation's state and its collaborators, shared by the runner, one attempt and the
dry run (ARCHITECTURE.md §5)."""

from __future__ import annotations

import os

from cronwrap import jsontext
from cronwrap.model import ClaimRequest, Event, JobInfo, Run, SlotRun, iso, ledger_job
from cronwrap.paths import resolve_dirs
from cronwrap.process import procs
from cronwrap.record import TYPE_CHECKING, Record
from cronwrap.run import policy
from cronwrap.run.firing import Timing
from cronwrap.run.runlog import EventLog
from cronwrap.stdio import warn

if TYPE_CHECKING:
    from typing import Any, Callable, Protocol

    from cronwrap.ledger.base import Ledger
    from cronwrap.model import Pause
    from cronwrap.options.spec import JobSpec
    from cronwrap.process.keeper import JobProcess, Outcome, SuperviseSpec
    from cronwrap.process.locks import Lock
    from cronwrap.run.hooks import HookResult, Pinger
    from cronwrap.run.retry import Uniform
    from cronwrap.run.runlog import Redaction
    from cronwrap.stdio import Passthrough

    class Supervising(Protocol):
        """One supervised run (supervise.Supervisor; testing.ScriptedSupervisor)."""

        def run(self) -> Outcome: ...

        def request_stop(self, reason: str) -> None: ...

    class SupervisorFactory(Protocol):
        def __call__(self, spec: SuperviseSpec, on_output: Callable[[int, bytes], None],
                     on_spawn: Callable[[JobProcess], None] | None,
                     passthrough: Passthrough | None) -> Supervising: ...


class LocalLock(Record):
    """The firing's lock on this host: ``held`` (None under ``--lock none`` or ``--overlap
    allow``), or ``busy``: another firing here holds it, and this one only records its skip."""

    held: Lock | None
    busy: bool
    _defaults = dict(held=None, busy=False)


class World(Record):
    """What a run needs from outside itself. ``open_ledger(inv)`` -> a Ledger (or raises
    LedgerError); ``take_lock(inv)`` -> LocalLock;
    ``supervisor(spec, on_output, on_spawn, passthrough)`` -> a ``Supervising`` (``run()`` ->
    Outcome, ``request_stop(reason)``); ``run_hook(command, env, timeout)`` -> HookResult;
    ``tables``: whether firings keep their slot tables in STATE (run/tables.py).
    cronwrap.testing.MemoryWorld makes one in memory."""

    clock: Callable[[], float]
    monotonic: Callable[[], float]
    sleep: Callable[[float], None]
    rng: Uniform
    open_ledger: Callable[[Invocation], Ledger]
    take_lock: Callable[[Invocation], LocalLock]
    supervisor: SupervisorFactory
    run_hook: Callable[[str, dict[str, str], float], HookResult]
    tables: bool
    _defaults = dict(tables=False)


class Invocation:
    """State shared by the steps of one ``run``."""

    def __init__(self, spec: JobSpec, environ: dict[str, str], now: float,
                 timing: Timing | None, world: World) -> None:
        self.spec = spec
        # The job's name in the ledger: a host-scoped job's runs here are a job of their own.
        self.job = ledger_job(spec.name, spec.host if spec.scope == "host" else None)
        self.timing = timing or Timing()
        self.environ = environ
        self.now = now
        self.world = world
        self.dirs = resolve_dirs(environ)
        self.log_dir = spec.log_dir or self.dirs.logs
        self.events = EventLog(self.log_dir)
        self.pid, self.pid_start = procs.self_identity()
        self.runner = procs.Runner(spec.host)
        self.interactive = os.isatty(2)
        self.replaced = False
        self.paused: Pause | None = None  # the pause that skipped the slot being run
        self.pinger: Pinger | None = None  # the runner's, for a job that pings
        self.redaction: Redaction | None = None  # the job's secrets, once its environment is known
        self.settings = job_settings(spec)
        # Under --force, each slot's first fence of this invocation: the job's steps count
        # from it (CRONWRAP_STEPS_FROM), so a forced re-run does them again and its retries
        # keep what it did.
        self.forced_from: dict[str, int] = {}

    def event(self, event: Event, run: Run | None = None, slot: SlotRun | None = None,
              **fields: Any) -> None:
        common = {"job": self.spec.name, "host": self.spec.host, "pid": self.pid}
        if run is not None:
            common.update(run_id=run.run_id, run_key=run.run_key, attempt=run.attempt,
                          trigger=run.trigger, scheduled_at=iso(run.scheduled_at))
        elif slot is not None:
            common.update(run_key=slot.run_key, trigger=slot.trigger,
                          scheduled_at=iso(slot.scheduled_at))
        self.events.emit(event, **common, **fields)

    def failpoint(self, phase: str) -> None:
        """Fault injection for the test suite: ``CRONWRAP_FAILPOINT=PHASE`` makes the wrapper
        stop itself (SIGSTOP) at that phase, so a test can SIGKILL it exactly there. Phases:
        after_connect (ledger open, nothing read yet), before_claim, after_claim, after_spawn,
        after_exit (job ended, end not recorded)."""
        if self.environ.get("CRONWRAP_FAILPOINT") == phase:
            import signal

            os.kill(os.getpid(), signal.SIGSTOP)

    def say(self, message: str, always: bool = False) -> None:
        """Messages for a person at a terminal; from cron they would only make mail."""
        if self.interactive or always:
            warn(message)

    def request(self, slot: SlotRun, retry_of: int | None = None) -> ClaimRequest:
        """retry_of: the attempt this invocation is retrying (see policy.max_attempts)."""
        spec = self.spec
        # After --overlap replace ended the holder of this very slot, the slot is run again.
        return ClaimRequest(
            job=JobInfo(self.job, self.timing.expr, self.timing.zone_name, self.timing.key,
                        self.settings),
            **slot.asdict(), host=spec.host, pid=self.pid, pid_start=self.pid_start,
            lease=spec.lease, overlap_skip=spec.overlap != "allow",
            force=spec.force or self.replaced, max_attempts=policy.max_attempts(spec, retry_of),
            is_gone=lambda pid, start: not procs.is_alive(pid, start),
            boot_id=self.runner.boot_id, pid_ns=self.runner.pid_ns,
        )


def job_settings(spec: JobSpec) -> str | None:
    """What prune must respect, kept with the job (JSON): the catch-up policy and window, and
    the job's own --log-dir; and what status must know: --slow-factor, --memory-factor."""
    settings: dict[str, object] = {}
    if spec.schedule is not None and spec.catchup != "none":
        settings.update(catchup=spec.catchup, catchup_window=spec.catchup_window)
    if spec.log_dir is not None:
        settings["log_dir"] = str(spec.log_dir)
    if spec.slow_factor:
        settings["slow_factor"] = spec.slow_factor
    if spec.memory_factor:
        settings["memory_factor"] = spec.memory_factor
    # and what `watch` must know: when a failing streak alerts, when a live run is stuck
    if spec.alert_after != 1:
        settings["alert_after"] = spec.alert_after
    if spec.timeout:
        settings["timeout"] = spec.timeout
    if not settings:
        return None
    return jsontext.dumps(settings)
