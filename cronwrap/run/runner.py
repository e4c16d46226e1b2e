"""One invocation of ``cronwrap run``: lock → claim → supervise → record, for each slot.

The loop over the firing's slots, with its collaborators passed in (``World``: the clock, the
ledger, the lock, the supervisor, the hook runner), so that its policy runs in-process in
tests against an in-memory ledger and a fake supervisor. The decisions are policy.py's, the
planning firing.py's, one attempt attempt.py's (ARCHITECTURE.md). The order matters: the
local lock is taken before the claim (so two firings on one host never both reach the ledger
as runners), and released only after the finish is recorded (so ``--overlap replace`` sees
the old run's record).
"""

from __future__ import annotations

import time
from datetime import datetime, timezone

from cronwrap.errors import LedgerError
from cronwrap.ledger.url import open_ledger
from cronwrap.model import (DONE_STATUSES, Claim, Event, JobInfo, Mark, Reason, Run,
                            SlotHistory, SlotRun, Status, Trigger, iso)
from cronwrap.options.spec import JobSpec
from cronwrap.paths import check_parent, ensure_private_dir, resolve_dirs
from cronwrap.process import locks
from cronwrap.record import TYPE_CHECKING
from cronwrap.run import outbox, policy, retry
from cronwrap.run.attempt import Attempt, execute
from cronwrap.run.firing import (FiringPlan, Timing, history_since, is_manual,
                             needs_recorded_schedule, plan_firing, resolve_timing)
from cronwrap.run.invocation import Invocation, LocalLock, World
from cronwrap.stdio import warn

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, Callable, TypeVar, TypeVarTuple

    T = TypeVar("T")
    Ts = TypeVarTuple("Ts")

    from cronwrap.ledger import base
    from cronwrap.process.keeper import JobProcess, SuperviseSpec
    from cronwrap.run.hooks import HookResult
    from cronwrap.run.invocation import Supervising
    from cronwrap.run.retry import Uniform
    from cronwrap.stdio import Passthrough

WAIT_POLL = 1.0


def real_world() -> World:
    def supervisor(spec: SuperviseSpec, on_output: Callable[[int, bytes], None],
                   on_spawn: Callable[[JobProcess], None] | None,
                   passthrough: Passthrough | None) -> Supervising:
        from cronwrap.process.supervise import Supervisor  # only for a claimed slot

        return Supervisor(spec, on_output, on_spawn, passthrough)

    def run_hook(command: str, env: dict[str, str], timeout: float) -> HookResult:
        from cronwrap.run.hooks import run_hook as run  # only when a hook is due

        return run(command, env, timeout)

    return World(time.time, time.monotonic, time.sleep, LazyRandom(), connect, take_lock,
                 supervisor, run_hook, tables=True)


class LazyRandom:
    """``random.Random``, made when a firing first draws a number (``--jitter``, a retry's
    backoff): ``random`` loads ``bisect`` and a SHA-512, ~0.8 ms of imports that the other
    firings do not need (bench/results.md, issue 24)."""

    def __init__(self) -> None:
        self._rng: Uniform | None = None

    def uniform(self, a: float, b: float) -> float:
        if self._rng is None:
            import random

            self._rng = random.Random()
        return self._rng.uniform(a, b)


def run(spec: JobSpec, environ: dict[str, str], now: float | None = None,
        world: World | None = None) -> int:
    """Run the firing; its exit status."""
    world = world or real_world()
    store = None
    if world.tables and spec.schedule is not None and not is_manual(spec):
        from cronwrap.run.tables import TableStore  # a scheduled firing's slots, read or kept

        store = TableStore(resolve_dirs(environ).state, spec.name)
    timing = None if needs_recorded_schedule(spec) else \
        resolve_timing(spec, environ, find_table=store.find if store else None)
    inv = Invocation(spec, environ, world.clock() if now is None else now, timing, world)
    if spec.ping:
        from cronwrap.run.hooks import Pinger  # only for a job that pings

        inv.pinger = Pinger(spec.ping)
    ledger = None
    try:
        if spec.jitter > 0:  # before connecting: a sleeping firing holds no connection
            world.sleep(world.rng.uniform(0, spec.jitter))
        ledger = open_or_unrecorded(inv)
        inv.failpoint("after_connect")
        if timing is None:
            timing = inv.timing = resolve_timing(spec, environ, recorded_job(inv, ledger))
        local = world.take_lock(inv)
        try:
            status = run_slots(inv, ledger, timing, local)
        finally:
            if local.held is not None:
                local.held.release()
        if store is not None and timing.schedule is not None:
            store.refresh(timing.schedule, datetime.fromtimestamp(inv.now, timezone.utc))
        return status
    finally:
        if ledger is not None:
            ledger.close()
        if inv.pinger is not None:
            for error in inv.pinger.wait(2.0):
                inv.event(Event.PING_FAILED, error=error)
        inv.events.close()


def recorded_job(inv: Invocation, ledger: base.Ledger | None) -> JobInfo | None:
    """What the ledger recorded of the job when cron fired it (schedule, zone, key)."""
    return None if ledger is None else once_more(ledger.job_info, inv.job)


def connect(inv: Invocation) -> base.Ledger:
    """The firing's ledger, with this host's waiting results delivered to it."""
    ledger = open_ledger(inv.spec.db, inv.dirs, exiting=True, wait=inv.spec.db_wait)
    outbox.deliver(inv.dirs.state, inv.spec.db, ledger, inv.events.emit)
    return ledger


def open_or_unrecorded(inv: Invocation) -> base.Ledger | None:
    """The ledger; None: run unrecorded (--on-db-error run-unrecorded)."""
    try:
        return inv.world.open_ledger(inv)
    except LedgerError as exc:
        unreachable(inv, exc)
        return None


def unreachable(inv: Invocation, exc: LedgerError) -> None:
    if inv.spec.on_db_error == "fail":
        raise exc
    inv.event(Event.LEDGER_UNREACHABLE, error=str(exc), action="run-unrecorded")
    warn(f"{exc}; running {inv.spec.name} unrecorded (--on-db-error run-unrecorded): only the "
         "local lock prevents overlaps")


def once_more(call: Callable[[*Ts], T], *args: *Ts) -> T:
    """A ledger call before the claim, retried once on a fresh connection when the previous
    one was ended (idle_session_timeout, pg_terminate_backend, a server restart). These calls
    read, or write what is written only once (marks, skips), so a retry is always safe."""
    try:
        return call(*args)
    except LedgerError as exc:
        if not exc.connection_lost:
            raise
        return call(*args)


def take_lock(inv: Invocation) -> LocalLock:
    """The firing's lock on this host, held or busy (none under ``--lock none``)."""
    spec = inv.spec
    if spec.lock == "none" or spec.overlap == "allow":
        return LocalLock()
    lock_dir = ensure_private_dir(inv.dirs.locks)
    if spec.lock_file:
        check_parent(spec.lock_file)
    path = spec.lock_file or locks.default_lock_file(lock_dir, spec.name)
    lock = locks.open_lock(spec.lock, path, lock_dir)
    if spec.overlap == "wait":
        acquired = locks.acquire_waiting(lock, spec.wait_timeout)
    elif spec.overlap == "replace" and not lock.try_acquire():
        holder = lock.holder()
        inv.event(Event.REPLACE, holder_pid=holder.pid if holder else None)
        acquired = inv.replaced = locks.replace_holder(lock, spec.signal, spec.kill_after or 10.0)
    else:
        acquired = lock.try_acquire()
    if not acquired:
        lock.release()
        return LocalLock(busy=True)
    if lock.stale is not None:
        inv.event(Event.STALE_LOCK, lock_file=str(path), stale_pid=lock.stale.pid)
    return LocalLock(held=lock)


def history(inv: Invocation, ledger: base.Ledger | None) -> SlotHistory | None:
    """What plan_firing needs of the ledger: the job's newest slot, its abandoned runs, and
    which run keys it has (asked while planning: each question retried as the first)."""
    if ledger is None or inv.timing.schedule is None or is_manual(inv.spec):
        return None
    found = once_more(ledger.slot_history, inv.job, history_since(inv.spec, inv.now))
    known = found.known
    return SlotHistory(found.last_slot, lambda keys: once_more(known, keys), found.abandoned)


def run_slots(inv: Invocation, ledger: base.Ledger | None, timing: Timing,
              local: LocalLock) -> int:
    """Run each slot of the firing under the one lock (policy.firing_status, stops_here)."""
    try:
        plan = plan_firing(inv.spec, timing, inv.now, history(inv, ledger))
        announce(inv, ledger, plan)
    except LedgerError as exc:
        unreachable(inv, exc)
        ledger = None
        plan = plan_firing(inv.spec, timing, inv.now, None)
        announce(inv, None, plan)
    slots = plan.slots[-1:] if local.busy else plan.slots  # busy: record its own skip
    statuses = []
    for slot in slots:
        status, failed = run_slot(inv, ledger, slot, local)
        statuses.append(status)
        if policy.stops_here(inv.spec, failed):
            break
    return policy.firing_status(statuses)


def announce(inv: Invocation, ledger: base.Ledger | None, plan: FiringPlan) -> None:
    """Carry out the plan's side: warnings, catch-up events, marks recorded in the ledger."""
    for warning in plan.warnings:
        inv.event(Event.WARNING, message=warning, skew_s=round(plan.skew, 3))
        if not plan.quiet:
            warn(f"{inv.spec.name}: {warning}")
    for slot in plan.slots:
        if slot.trigger == Trigger.CATCHUP:
            inv.event(Event.CATCHUP, run_key=slot.run_key, scheduled_at=iso(slot.scheduled_at))
    if plan.marks and ledger is not None:
        record_marks(inv, ledger, plan.marks)


def record_marks(inv: Invocation, ledger: base.Ledger, marks: Sequence[Mark]) -> None:
    req = inv.request(SlotRun(marks[0].run_key, marks[0].scheduled_at, Trigger.SCHEDULE))
    once_more(ledger.record_marks, req, marks)
    for m in marks:
        inv.event(Event.MISSED if m.status == Status.MISSED else Event.SKIP, run_key=m.run_key,
                  scheduled_at=iso(m.scheduled_at), status=m.status, skip_reason=m.reason)


def run_slot(inv: Invocation, ledger: base.Ledger | None, slot: SlotRun,
             local: LocalLock) -> tuple[int, bool]:
    """Run a slot, retrying transient failures with backoff, then tell hooks and pings.
    Returns cronwrap's exit status for it, and whether it ran and did not succeed."""
    began = inv.world.clock()
    inv.paused = None
    attempt = claim_and_execute(inv, ledger, slot, local)
    if attempt is None:  # nothing ran: a skip (a paused job's is no news: exit 0)
        return (0 if inv.paused else inv.spec.skip_exit_code), False
    first = attempt.run.attempt
    while (delay := retry_delay(inv, attempt, first, began)) is not None:
        inv.event(Event.RETRY, run=attempt.run, status=attempt.result.status,
                  exit_code=attempt.exit_status, delay_s=round(delay, 3))
        inv.world.sleep(delay)
        again = claim_and_execute(inv, ledger, slot, local, retry_of=attempt.run.attempt)
        if again is None:
            break  # the slot was taken in the meantime (another host retried it)
        attempt = again
    after_slot(inv, ledger, attempt)
    return attempt.exit_status, attempt.result.status not in DONE_STATUSES


def retry_delay(inv: Invocation, attempt: Attempt, first: int, began: float) -> float | None:
    """The backoff before another attempt, or None when the run is final (policy.py).
    ``began``: when this invocation's first attempt at the slot started; a manual run's
    retries count the schedule's interval from it (retry.retry_deadline), and a manual run
    says on stderr why it does not retry, as the run log does."""
    run, result = attempt.run, attempt.result
    manual = run.trigger == Trigger.MANUAL
    scheduled = run.scheduled_at
    next_slot = (inv.timing.schedule.next_after(scheduled)
                 if inv.timing.schedule is not None and scheduled is not None else None)
    start = datetime.fromtimestamp(began, timezone.utc) if manual else None
    deadline = retry.retry_deadline(scheduled, next_slot, start)
    delay, given_up = policy.retry_delay(
        inv.spec, result.status, result.exit_code, result.duration_ms, run.attempt, first,
        deadline, datetime.fromtimestamp(inv.world.clock(), timezone.utc), inv.world.rng,
        manual=manual)
    if delay is not None and run.run_id == 0:  # no ledger to claim the slot again in
        delay, given_up = None, policy.UNRECORDED
    if given_up:
        inv.event(Event.RETRY_SKIPPED, run=run, reason=given_up, next_slot=iso(next_slot),
                  deadline=iso(deadline))
        inv.say(no_retry_note(inv.spec.name, attempt, given_up, deadline), always=manual)
    return delay


def no_retry_note(name: str, attempt: Attempt, reason: str, deadline: datetime | None) -> str:
    """One line for a person who asked for --retries: which attempt ended how, and why it is
    the last."""
    run, code = attempt.run, attempt.result.exit_code
    by = f" (by {deadline.isoformat(timespec='seconds')})" \
        if deadline is not None and reason != policy.UNRECORDED else ""
    return (f"{name}: slot {run.run_key} {attempt.result.status} (attempt {run.attempt}"
            f"{'' if code is None else f', exit {code}'}); no retry: it {reason}{by}")


def after_slot(inv: Invocation, ledger: base.Ledger | None, attempt: Attempt) -> None:
    """Hooks and the finish ping; their failures are logged, never change the exit status."""
    spec, result = inv.spec, attempt.result
    if inv.pinger is not None:
        inv.pinger.finish(attempt.run.run_key, result.status, attempt.exit_status,
                          result.error_tail)
    streak = failure_streak(inv, ledger) if spec.alert_after > 1 else 0
    hook, alert = policy.choose_hook(spec, result.status, streak)
    if hook is None:
        return
    from cronwrap.run import hooks

    env = hooks.hook_env(attempt.env, result.status, attempt.exit_status, result.duration_ms,
                         result.error_tail, alert, result.skip_reason)
    outcome = inv.world.run_hook(hook, env, spec.hook_timeout)
    inv.event(Event.HOOK, run=attempt.run, hook=hook_name(spec, result.status, alert),
              alert=alert,
              exit_code=outcome.exit_code, timed_out=outcome.timed_out,
              duration_ms=int(outcome.duration * 1000))
    if not outcome.ok:
        tail = outcome.output_tail.strip()[-300:]
        inv.events.report(f"{spec.name}: hook exited {outcome.exit_code}"
                          f"{' (timed out)' if outcome.timed_out else ''}: "
                          f"{inv.redaction.text(tail) if inv.redaction else tail}")


def hook_name(spec: JobSpec, status: str, alert: str | None) -> str:
    """Which hook ran, for the run log (two options may name the same command)."""
    if status == Status.WARNING:
        return "on-warning"
    return "on-success" if status == Status.SUCCEEDED and alert is None else "on-failure"


def failure_streak(inv: Invocation, ledger: base.Ledger | None) -> int:
    """policy.failure_streak over the job's recent runs (1 when the ledger cannot tell)."""
    if ledger is None:
        return 1
    try:
        return policy.failure_streak(ledger.runs(inv.job, inv.spec.alert_after + 21))
    except LedgerError:
        return 1


def claim_and_execute(inv: Invocation, ledger: base.Ledger | None, slot: SlotRun,
                      local: LocalLock, retry_of: int | None = None) -> Attempt | None:
    """Claim and run the slot (an Attempt), or record why not (None)."""
    try:
        if ledger is not None and local.busy:
            skip(inv, once_more(ledger.record_skip, inv.request(slot), Reason.OVERLAP), slot)
            return None
        inv.failpoint("before_claim")
        claim = claim_slot(inv, ledger, slot, retry_of) if ledger is not None else None
        inv.failpoint("after_claim")
    except LedgerError as exc:
        unreachable(inv, exc)
        ledger = claim = None
    if local.busy:
        skip(inv, Claim(run=None, skip_reason=Reason.OVERLAP), slot)
        return None
    if claim is None:
        claim = Claim(run=unrecorded_run(inv, slot))
    elif claim.run is None:
        skip(inv, claim, slot)
        return None
    return execute(inv, ledger, claim, local.held)


def unrecorded_run(inv: Invocation, slot: SlotRun) -> Run:
    """A stand-in row for a run the ledger does not know about (id 0, fence 0)."""
    return Run(run_id=0, job=inv.job, run_key=slot.run_key, scheduled_at=slot.scheduled_at,
               trigger=slot.trigger, status=Status.RUNNING, attempt=1, host=inv.spec.host,
               pid=inv.pid, fence=0)


def claim_slot(inv: Invocation, ledger: base.Ledger, slot: SlotRun,
               retry_of: int | None = None) -> Claim:
    """Claim; under ``--overlap wait`` a run elsewhere is waited for, polling the ledger."""
    world = inv.world
    deadline = world.monotonic() + inv.spec.wait_timeout
    while True:
        try:
            claim = ledger.claim(inv.request(slot, retry_of))
        except LedgerError as exc:
            if not exc.connection_lost:
                raise
            # Once more on a fresh connection: the server may have restarted since it was
            # opened. If the first claim did commit (only its answer was lost), the row in
            # the way is this very wrapper's: it is ours.
            claim = ours(inv, ledger.claim(inv.request(slot, retry_of)))
        waiting = inv.spec.overlap == "wait" and claim.skip_reason == Reason.OVERLAP
        if not waiting or (inv.spec.wait_timeout and world.monotonic() >= deadline):
            return claim
        world.sleep(WAIT_POLL)


def ours(inv: Invocation, claim: Claim) -> Claim:
    held = claim.blocking
    if (claim.skip_reason == Reason.DUPLICATE and held is not None
            and held.status == Status.RUNNING and held.host == inv.spec.host
            and held.pid == inv.pid and held.pid_start == inv.pid_start):
        return Claim(run=held)
    return claim


def skip(inv: Invocation, claim: Claim, slot: SlotRun) -> None:
    reason = claim.skip_reason
    blocking = claim.blocking
    fields: dict[str, Any] = {"status": Status.SKIPPED, "skip_reason": reason}
    if claim.pause is not None:
        inv.paused = claim.pause
        inv.event(Event.SKIP, slot=slot, **fields, paused_until=iso(claim.pause.until),
                  pause_reason=claim.pause.reason, paused_by=claim.pause.paused_by)
        inv.say(f"{inv.spec.name}: {claim.pause.describe()}; slot {slot.run_key} skipped "
                f"(cronwrap resume {claim.pause.job} runs it again)")
        return
    if blocking is not None:
        fields.update(blocking_run_id=blocking.run_id, blocking_host=blocking.host,
                      blocking_status=blocking.status)
    inv.event(Event.SKIP, slot=slot, **fields)
    if reason == Reason.DUPLICATE and blocking is not None and blocking.status != Status.RUNNING:
        inv.say(f"{inv.spec.name}: slot {slot.run_key} already ran (run {blocking.run_id}, "
                f"{blocking.status}); nothing to do. Use --force to run it again.",
                always=slot.trigger == Trigger.MANUAL)
    elif blocking is not None:
        inv.say(f"{inv.spec.name}: run {blocking.run_id} is still running on {blocking.host} "
                f"(pid {blocking.pid}); skipped ({reason}).")
    else:
        inv.say(f"{inv.spec.name}: another run holds the lock; skipped ({reason}).")
