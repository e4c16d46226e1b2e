"""One invocation of ``cronwrap run``: lock → claim → heartbeat → supervise → record.

This is the only module that composes I/O. Its order matters: the local lock is taken before
the claim (so two firings on one host never both reach the ledger as runners), and released
only after the finish is recorded (so ``--overlap replace`` sees the old run's record).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from cronwrap import locks, outbox, procs
from cronwrap.errors import CronwrapError, LedgerError, UsageError
from cronwrap.ledger import base
from cronwrap.ledger.base import Claim, ClaimRequest, Finish, JobInfo, Run
from cronwrap.paths import (Dirs, check_parent, ensure_private_dir, file_name, open_private,
                            resolve_dirs)
from cronwrap.record import Record
from cronwrap.runlog import EventLog, OutputCapture, output_path, prune_event_logs, prune_outputs
from cronwrap.spec import JobSpec
from cronwrap.stdio import Passthrough, warn

FINISH_RETRIES = 3
ADMIN_DB_WAIT = 5.0  # status, history, … wait this long for a full or restarting server
FINISH_DB_WAIT = 10.0  # a finish waits at most this long for one (then: the outbox)
WAIT_POLL = 1.0


class Slot(Record):
    """A slot a firing acts for: its run key, its original time (in the job's zone), why it
    runs (schedule, catchup, manual), and the firing's distance from it (seconds, or None)."""

    __slots__ = ("run_key", "scheduled_at", "trigger", "skew")
    _defaults = dict(skew=None)


class Attempt(Record):
    """One run of a slot as it ended: cronwrap's exit status, what was recorded, the row,
    and the environment the job had (hooks get it too)."""

    __slots__ = ("exit_status", "result", "run", "env")


class Timing(Record):
    """The job's schedule resolved: the Schedule (None without one), its zone's name and its
    run key template, from --schedule/--tz/--key or, for a manual run without --schedule,
    as the ledger recorded them when cron fired the job."""

    __slots__ = ("schedule", "zone_name", "key")
    _defaults = dict(schedule=None, zone_name=None, key=None)

    @property
    def expr(self) -> str | None:
        return None if self.schedule is None else self.schedule.expr


class FiringPlan(Record):
    """What a firing will do, before it does any of it: the slots to run in order, the slots
    to record without running (catch-up marks), and warnings (printed unless ``quiet``)."""

    __slots__ = ("slots", "marks", "warnings", "skew", "quiet")
    _defaults = dict(marks=(), warnings=(), skew=0.0, quiet=False)


def minute_slot(now: float) -> Slot:
    """Without a schedule a firing's slot is its minute (cron's own granularity)."""
    start = datetime.fromtimestamp(now - now % 60, timezone.utc)
    return Slot(start.strftime("%Y-%m-%dT%H:%M:%SZ"), start.astimezone(), "schedule")


def is_manual(spec: JobSpec) -> bool:
    return spec.date is not None or spec.at is not None


def needs_recorded_schedule(spec: JobSpec) -> bool:
    """A manual run without --schedule takes the job's schedule from the ledger."""
    return spec.schedule is None and is_manual(spec)


def resolve_timing(spec: JobSpec, environ: dict[str, str],
                   recorded: JobInfo | None = None) -> Timing:
    """Validate --schedule/--tz/--key/--date/--at before anything runs. ``recorded``: what
    the ledger knows of the job, for a manual run without --schedule (--tz and --key still
    win over what was recorded)."""
    expr, tz, key = spec.schedule, spec.tz, spec.key
    if expr is None and is_manual(spec) and recorded is not None and recorded.schedule:
        expr, tz = recorded.schedule, tz or recorded.tz
        key = key if key is not None else recorded.key_template
    if expr is None:
        option = "date" if spec.date is not None else "at" if spec.at is not None else "key"
        if option != "key":
            raise UsageError(f"--{option}: no schedule is recorded for {spec.name!r} (cron has "
                             "not run it with --schedule yet): pass --schedule EXPR, and --tz "
                             "and --key as the crontab line has them")
        if key is not None:
            raise UsageError("--key needs --schedule (the slots come from it)")
        return Timing()
    from cronwrap import schedule as sched

    zone, zone_name = sched.resolve_zone(tz, environ, sched.system_zone_name())
    if key is not None:
        sched.validate_key_template(key)
    if spec.date is not None and spec.at is not None:
        raise UsageError("--date and --at both name a slot: give one of them")
    return Timing(sched.Schedule.parse(expr, zone, zone_name), zone_name, key)


def plan_firing(inv: Invocation, ledger: base.Ledger | None, timing: Timing) -> FiringPlan:
    """The slots this firing runs, in order (catch-ups oldest first, then its own slot), and
    what catch-up records: read from the ledger, nothing written."""
    spec = inv.spec
    if timing.schedule is None:
        return FiringPlan([minute_slot(inv.now)])
    from cronwrap import catchup

    if is_manual(spec):
        runs = catchup.plan_manual(timing.schedule, date=spec.date, at=spec.at,
                                   key_template=timing.key, max_slots=spec.max_slots)
        return FiringPlan([Slot(r.run_key, r.slot, r.trigger) for r in runs])
    now = datetime.fromtimestamp(inv.now, timezone.utc)
    last_seen, known = None, set()
    if ledger is not None:
        back = spec.catchup_window or 400 * 86400.0
        last_seen, known = once_more(ledger.slot_history, spec.name,
                                     now - timedelta(seconds=back))
    plan = catchup.plan_firing(
        timing.schedule, now, key_template=timing.key, last_seen=last_seen, known_keys=known,
        policy=spec.catchup, window=spec.catchup_window, max_catchup=spec.max_catchup)
    if last_seen is not None and plan.runs and plan.runs[-1].slot < last_seen:
        plan.warnings.append(
            f"this firing's slot {plan.runs[-1].slot.isoformat()} is older than the newest slot "
            f"already seen ({last_seen.astimezone(timing.schedule.zone).isoformat()}): this "
            "host's clock is behind, or was stepped back; check it")
    # A firing far from any slot is a wrong clock (loudly: cron mails stderr), unless it is
    # hours off under a catch-up policy: then it is an @reboot-style catch-up firing.
    deliberate = not plan.matched and abs(plan.skew_seconds) >= 3600 and spec.catchup != "none"
    own = plan.runs[-1] if plan.runs and not deliberate else None
    skew = None if plan.matched else plan.skew_seconds  # only a firing off its slot is news
    slots = [Slot(r.run_key, r.slot, r.trigger, skew if r is own else None) for r in plan.runs]
    return FiringPlan(slots, plan.marks, plan.warnings, plan.skew_seconds, deliberate)


def announce(inv: Invocation, ledger: base.Ledger | None, plan: FiringPlan) -> None:
    """Carry out the plan's side: warnings, catch-up events, marks recorded in the ledger."""
    for warning in plan.warnings:
        inv.event("warning", message=warning, skew_s=round(plan.skew, 3))
        if not plan.quiet:
            warn(f"{inv.spec.name}: {warning}")
    for slot in plan.slots:
        if slot.trigger == "catchup":
            inv.event("catchup", run_key=slot.run_key, scheduled_at=base.iso(slot.scheduled_at))
    if plan.marks and ledger is not None:
        record_marks(inv, ledger, plan.marks)


def record_marks(inv: Invocation, ledger: base.Ledger, marks) -> None:
    req = inv.request(Slot(marks[0].run_key, marks[0].slot, "schedule"))
    once_more(ledger.record_marks, req, [(m.run_key, m.slot, m.status, m.reason) for m in marks])
    for m in marks:
        inv.event(m.status if m.status == base.MISSED else "skip", run_key=m.run_key,
                  scheduled_at=base.iso(m.slot), status=m.status, skip_reason=m.reason)


def open_ledger(url: str | None, dirs: Dirs, exiting: bool = False,
                read_only: bool = False, wait: float = ADMIN_DB_WAIT) -> base.Ledger:
    """exiting: the process exits right after (a cron firing): skip SQLite's close-time
    checkpoint. read_only: for commands that only read; nothing is created or migrated.
    wait: seconds a full or restarting PostgreSQL server is waited for (--db-wait)."""
    if url and not url.startswith("sqlite:///"):
        from cronwrap.ledger.postgres import PostgresLedger  # psycopg only for PostgreSQL

        return PostgresLedger(url, read_only=read_only, wait=wait)
    from cronwrap.ledger.sqlite import SqliteLedger

    if url:
        file = Path(url[len("sqlite://"):])
        check_parent(file)
    elif read_only:
        file = dirs.ledger_file
    else:
        file = ensure_private_dir(dirs.state) / "ledger.db"
    return SqliteLedger(file, checkpoint_on_close=not exiting, read_only=read_only)


class Invocation:
    """State shared by the steps of one ``run``."""

    def __init__(self, spec: JobSpec, environ: dict[str, str], now: float,
                 timing: Timing | None = None) -> None:
        self.spec = spec
        self.timing = timing or Timing()
        self.environ = environ
        self.now = now
        self.dirs = resolve_dirs(environ)
        self.log_dir = spec.log_dir or self.dirs.logs
        self.events = EventLog(self.log_dir)
        self.pid, self.pid_start = procs.self_identity()
        self.runner = procs.Runner(spec.host)
        self.interactive = os.isatty(2)
        self.replaced = False
        self.pinger = None
        if spec.ping:
            from cronwrap.hooks import Pinger

            self.pinger = Pinger(spec.ping)
        self.settings = job_settings(spec)

    def event(self, event: str, run: Run | None = None, slot: Slot | None = None, **fields) -> None:
        common = {"job": self.spec.name, "host": self.spec.host, "pid": self.pid}
        if run is not None:
            common.update(run_id=run.run_id, run_key=run.run_key, attempt=run.attempt,
                          trigger=run.trigger, scheduled_at=base.iso(run.scheduled_at))
        elif slot is not None:
            common.update(run_key=slot.run_key, trigger=slot.trigger,
                          scheduled_at=base.iso(slot.scheduled_at))
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

    def request(self, slot: Slot, retry_of: int | None = None) -> ClaimRequest:
        """retry_of: the attempt this invocation is retrying (so the ledger lets it retake
        the slot it just failed; other firings need --max-attempts)."""
        spec = self.spec
        max_attempts = spec.max_attempts or 1
        if retry_of is not None:
            max_attempts = max(max_attempts, retry_of + 1)
        # After --overlap replace ended the holder of this very slot, the slot is run again.
        return ClaimRequest(
            job=JobInfo(spec.name, self.timing.expr, self.timing.zone_name, self.timing.key,
                        self.settings),
            run_key=slot.run_key, scheduled_at=slot.scheduled_at,
            trigger=slot.trigger, host=spec.host, pid=self.pid, pid_start=self.pid_start,
            lease=spec.lease, overlap_skip=spec.overlap != "allow", force=spec.force or self.replaced,
            max_attempts=max_attempts,
            skew_ms=None if slot.skew is None else int(slot.skew * 1000),
            is_gone=lambda pid, start: not procs.is_alive(pid, start),
            boot_id=self.runner.boot_id, pid_ns=self.runner.pid_ns,
        )


def job_settings(spec: JobSpec) -> str | None:
    """What prune must respect, kept with the job (JSON): the catch-up policy and window, and
    the job's own --log-dir."""
    settings: dict[str, object] = {}
    if spec.schedule is not None and spec.catchup != "none":
        settings.update(catchup=spec.catchup, catchup_window=spec.catchup_window)
    if spec.log_dir is not None:
        settings["log_dir"] = str(spec.log_dir)
    if not settings:
        return None
    import json

    return json.dumps(settings)


def run(spec: JobSpec, environ: dict[str, str], now: float | None = None) -> int:
    timing = None if needs_recorded_schedule(spec) else resolve_timing(spec, environ)
    inv = Invocation(spec, environ, time.time() if now is None else now, timing)
    if spec.dry_run:
        from cronwrap import dryrun

        return dryrun.show(inv, timing)
    ledger = None
    try:
        if spec.jitter > 0:  # before connecting: a sleeping firing holds no connection
            import random

            time.sleep(random.uniform(0, spec.jitter))
        ledger = connect(inv)
        inv.failpoint("after_connect")
        if timing is None:
            timing = inv.timing = resolve_timing(spec, environ, recorded_job(inv, ledger))
        lock = take_lock(inv)
        try:
            return run_slots(inv, ledger, timing, lock)
        finally:
            if lock:
                lock.release()
    finally:
        if ledger is not None:
            ledger.close()
        if inv.pinger is not None:
            for error in inv.pinger.wait(2.0):
                inv.event("ping_failed", error=error)
        inv.events.close()


def recorded_job(inv: Invocation, ledger: base.Ledger | None) -> JobInfo | None:
    """What the ledger recorded of the job when cron fired it (schedule, zone, key)."""
    return None if ledger is None else once_more(ledger.job_info, inv.spec.name)


def connect(inv: Invocation) -> base.Ledger | None:
    """Open the ledger and deliver this host's waiting results; None: run unrecorded."""
    try:
        ledger = open_ledger(inv.spec.db, inv.dirs, exiting=True, wait=inv.spec.db_wait)
        outbox.deliver(inv.dirs.state, inv.spec.db, ledger, inv.events.emit)
        return ledger
    except LedgerError as exc:
        return unreachable(inv, exc)


def unreachable(inv: Invocation, exc: LedgerError) -> None:
    if inv.spec.on_db_error == "fail":
        raise exc
    inv.event("ledger_unreachable", error=str(exc), action="run-unrecorded")
    warn(f"{exc}; running {inv.spec.name} unrecorded (--on-db-error run-unrecorded): only the "
         "local lock prevents overlaps")
    return None


def once_more(call, *args):
    """A ledger call before the claim, retried once on a fresh connection when the previous
    one was ended (idle_session_timeout, pg_terminate_backend, a server restart). These calls
    read, or write what is written only once (marks, skips), so a retry is always safe."""
    try:
        return call(*args)
    except LedgerError as exc:
        if not exc.connection_lost:
            raise
        return call(*args)


def run_slots(inv: Invocation, ledger: base.Ledger | None, timing: Timing,
              lock: locks.Lock | None | bool) -> int:
    """Run each slot of the firing under the one lock. The exit status is the first failing
    run's, else the last run's (a failed catch-up is not hidden by a good current slot). A
    manual range stops at the first slot that does not succeed, unless --keep-going."""
    try:
        plan = plan_firing(inv, ledger, timing)
        announce(inv, ledger, plan)
    except LedgerError as exc:
        ledger = unreachable(inv, exc)
        plan = plan_firing(inv, None, timing)
        announce(inv, None, plan)
    slots = plan.slots if lock is not False else plan.slots[-1:]  # busy: record its own skip
    stop_on_failure = is_manual(inv.spec) and not inv.spec.keep_going
    statuses = []
    for slot in slots:
        status, failed = run_slot(inv, ledger, slot, lock)
        statuses.append(status)
        if failed and stop_on_failure:
            break
    return next((s for s in statuses if s != 0), statuses[-1] if statuses else 0)


def run_slot(inv: Invocation, ledger: base.Ledger | None, slot: Slot,
             lock: locks.Lock | None | bool) -> tuple[int, bool]:
    """Run a slot, retrying transient failures with backoff, then tell hooks and pings.
    Returns cronwrap's exit status for it, and whether it ran and did not succeed."""
    attempt = claim_and_execute(inv, ledger, slot, lock)
    if isinstance(attempt, int):
        return attempt, False  # nothing ran: a skip
    first = attempt.run.attempt
    while (delay := retry_delay(inv, attempt, first)) is not None:
        inv.event("retry", run=attempt.run, status=attempt.result.status,
                  exit_code=attempt.exit_status, delay_s=round(delay, 3))
        time.sleep(delay)
        again = claim_and_execute(inv, ledger, slot, lock, retry_of=attempt.run.attempt)
        if isinstance(again, int):
            break  # the slot was taken in the meantime (another host retried it)
        attempt = again
    after_slot(inv, ledger, attempt)
    return attempt.exit_status, attempt.result.status != base.SUCCEEDED


def retry_delay(inv: Invocation, attempt: Attempt, first: int) -> float | None:
    """The backoff before another attempt, or None when the run is final."""
    spec = inv.spec
    if spec.retries == 0 or attempt.run.run_id == 0:
        return None
    from cronwrap import retry

    result = attempt.result
    if not retry.should_retry(result.status, result.exit_code, spec.retry_on,
                              attempt.run.attempt, spec.retries, spec.max_attempts,
                              first_attempt=first):
        return None
    import random

    delay = retry.backoff(attempt.run.attempt - first + 1, spec.retry_delay,
                          spec.retry_max_delay, random.Random())
    next_slot = None
    if inv.timing.schedule is not None and attempt.run.scheduled_at is not None:
        next_slot = inv.timing.schedule.next_after(attempt.run.scheduled_at)
    now = datetime.now(timezone.utc)
    expected = spec.timeout or result.duration_ms / 1000
    if not retry.fits_before_next_slot(now, delay, next_slot, expected):
        inv.event("retry_skipped", run=attempt.run, reason="would run past the next slot",
                  next_slot=base.iso(next_slot))
        return None
    return delay


def after_slot(inv: Invocation, ledger: base.Ledger | None, attempt: Attempt) -> None:
    """Hooks and the finish ping; their failures are logged, never change the exit status."""
    spec, result = inv.spec, attempt.result
    if inv.pinger is not None:
        inv.pinger.finish(result.status, attempt.exit_status, result.error_tail)
    hook, alert = choose_hook(inv, ledger, attempt)
    if hook is None:
        return
    from cronwrap import hooks

    env = hooks.hook_env(attempt.env, result.status, attempt.exit_status, result.duration_ms,
                         result.error_tail)
    if alert:
        env["CRONWRAP_ALERT"] = alert
    outcome = hooks.run_hook(hook, env, spec.hook_timeout)
    inv.event("hook", run=attempt.run, hook="on-success" if hook == spec.on_success else "on-failure",
              alert=alert, exit_code=outcome.exit_code, timed_out=outcome.timed_out,
              duration_ms=int(outcome.duration * 1000))
    if not outcome.ok:
        inv.events.report(f"{spec.name}: hook exited {outcome.exit_code}"
                           f"{' (timed out)' if outcome.timed_out else ''}: "
                           f"{outcome.output_tail.strip()[-300:]}")


def choose_hook(inv: Invocation, ledger: base.Ledger | None,
                attempt: Attempt) -> tuple[str | None, str | None]:
    """Which hook to run, and CRONWRAP_ALERT (failing / recovered) under --alert-after."""
    spec = inv.spec
    ok = attempt.result.status == base.SUCCEEDED
    if spec.alert_after <= 1:
        return (spec.on_success if ok else spec.on_failure), None
    streak = failure_streak(inv, ledger, spec.alert_after + 1)
    if not ok:
        return (spec.on_failure, "failing") if streak >= spec.alert_after else (None, None)
    if streak >= spec.alert_after and spec.on_failure:
        return spec.on_failure, "recovered"  # the channel that alerted hears it is resolved
    return spec.on_success, None


def failure_streak(inv: Invocation, ledger: base.Ledger | None, limit: int) -> int:
    """Failed slots in a row, newest first; a success just recorded is passed over, so that
    a recovery sees the streak it ends."""
    if ledger is None:
        return 1
    try:
        runs = [r for r in ledger.runs(inv.spec.name, limit + 20) if r.status in
                (base.SUCCEEDED, base.FAILED, base.TIMEOUT, base.KILLED)]
    except LedgerError:
        return 1
    if runs and runs[0].status == base.SUCCEEDED:
        runs = runs[1:]
    streak = 0
    for r in runs:
        if r.status == base.SUCCEEDED:
            break
        streak += 1
    return streak


def claim_and_execute(inv: Invocation, ledger: base.Ledger | None, slot: Slot,
                      lock: locks.Lock | None | bool, retry_of: int | None = None) -> Attempt | int:
    """Claim and run the slot (an Attempt), or record why not (cronwrap's exit status)."""
    try:
        if ledger is not None and lock is False:
            return skip(inv, once_more(ledger.record_skip, inv.request(slot), base.OVERLAP), slot)
        inv.failpoint("before_claim")
        claim = claim_slot(inv, ledger, slot, retry_of) if ledger is not None else None
        inv.failpoint("after_claim")
    except LedgerError as exc:
        ledger = claim = unreachable(inv, exc)
    if lock is False:
        return skip(inv, Claim(run=None, skip_reason=base.OVERLAP), slot)
    if claim is None:
        claim = Claim(run=unrecorded_run(inv, slot))
    elif claim.run is None:
        return skip(inv, claim, slot)
    return execute(inv, ledger, claim, lock or None)


def unrecorded_run(inv: Invocation, slot: Slot) -> Run:
    """A stand-in row for a run the ledger does not know about (id 0, fence 0)."""
    return Run(run_id=0, job=inv.spec.name, run_key=slot.run_key, scheduled_at=slot.scheduled_at,
               trigger=slot.trigger, status=base.RUNNING, attempt=1, host=inv.spec.host,
               pid=inv.pid, fence=0)


def take_lock(inv: Invocation) -> locks.Lock | None | bool:
    """The local lock: the lock object, None for ``--lock none``, False when busy."""
    spec = inv.spec
    if spec.lock == "none" or spec.overlap == "allow":
        return None
    lock_dir = ensure_private_dir(inv.dirs.locks)
    if spec.lock_file:
        check_parent(spec.lock_file)
    path = spec.lock_file or locks.default_lock_file(lock_dir, spec.name)
    lock = locks.open_lock(spec.lock, path, lock_dir)
    if spec.overlap == "wait":
        acquired = locks.acquire_waiting(lock, spec.wait_timeout)
    elif spec.overlap == "replace" and not lock.try_acquire():
        holder = lock.holder()
        inv.event("replace", holder_pid=holder.pid if holder else None)
        acquired = inv.replaced = locks.replace_holder(lock, spec.signal, spec.kill_after or 10.0)
    else:
        acquired = lock.try_acquire()
    if not acquired:
        lock.release()
        return False
    if lock.stale is not None:
        inv.event("stale_lock", lock_file=str(path), stale_pid=lock.stale.pid)
    return lock


def claim_slot(inv: Invocation, ledger: base.Ledger, slot: Slot,
               retry_of: int | None = None) -> Claim:
    """Claim; under ``--overlap wait`` a run elsewhere is waited for, polling the ledger."""
    deadline = time.monotonic() + inv.spec.wait_timeout
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
        waiting = inv.spec.overlap == "wait" and claim.skip_reason == base.OVERLAP
        if not waiting or (inv.spec.wait_timeout and time.monotonic() >= deadline):
            return claim
        time.sleep(WAIT_POLL)


def ours(inv: Invocation, claim: Claim) -> Claim:
    held = claim.blocking
    if (claim.skip_reason == base.DUPLICATE and held is not None and held.status == base.RUNNING
            and held.host == inv.spec.host and held.pid == inv.pid
            and held.pid_start == inv.pid_start):
        return Claim(run=held)
    return claim


def skip(inv: Invocation, claim: Claim, slot: Slot) -> int:
    reason = claim.skip_reason
    blocking = claim.blocking
    fields = {"status": base.SKIPPED, "skip_reason": reason}
    if blocking is not None:
        fields.update(blocking_run_id=blocking.run_id, blocking_host=blocking.host,
                      blocking_status=blocking.status)
    inv.event("skip", slot=slot, **fields)
    if reason == base.DUPLICATE and blocking is not None and blocking.status != base.RUNNING:
        inv.say(f"{inv.spec.name}: slot {slot.run_key} already ran (run {blocking.run_id}, "
                f"{blocking.status}); nothing to do. Use --force to run it again.",
                always=slot.trigger == "manual")
    elif blocking is not None:
        inv.say(f"{inv.spec.name}: run {blocking.run_id} is still running on {blocking.host} "
                f"(pid {blocking.pid}); skipped ({reason}).")
    else:
        inv.say(f"{inv.spec.name}: another run holds the lock; skipped ({reason}).")
    return inv.spec.skip_exit_code


def job_environment(inv: Invocation, run: Run) -> dict[str, str]:
    env = dict(inv.environ)
    env.update(inv.spec.env_extra)
    zone = inv.timing.schedule.zone if inv.timing.schedule else cron_zone(inv.environ)
    scheduled = run.scheduled_at.astimezone(zone) if run.scheduled_at else None
    env.update(
        CRONWRAP_JOB=run.job, CRONWRAP_RUN_ID=str(run.run_id), CRONWRAP_RUN_KEY=run.run_key,
        CRONWRAP_SCHEDULED_AT=scheduled.isoformat() if scheduled else "",
        CRONWRAP_BIZ_DATE=scheduled.date().isoformat() if scheduled else "",
        CRONWRAP_ATTEMPT=str(run.attempt), CRONWRAP_TRIGGER=run.trigger,
        CRONWRAP_FENCE=str(run.fence), CRONWRAP_HOST=inv.spec.host,
    )
    return env


def cron_zone(environ: dict[str, str]):
    """Without --schedule the job's zone is still CRON_TZ when the crontab sets it (else the
    local zone, which honours TZ)."""
    name = environ.get("CRON_TZ")
    if not name:
        return None
    try:
        from zoneinfo import ZoneInfo

        return ZoneInfo(name)
    except (KeyError, ValueError, OSError):  # ZoneInfoNotFoundError is a KeyError
        return None


def execute(inv: Invocation, ledger: base.Ledger, claim: Claim, lock: locks.Lock | None) -> Attempt:
    from cronwrap.supervise import SuperviseSpec, Supervisor

    spec, run = inv.spec, claim.run
    assert run is not None and run.fence is not None
    log_id = run.run_id if ledger is not None else f"unrecorded-{int(inv.now)}"
    log_file = output_path(inv.log_dir, spec.name, log_id, run.attempt)
    try:
        ensure_private_dir(inv.log_dir)  # the log directory itself: not a symlink, not another's
        capture = OutputCapture(log_file)
    except CronwrapError as exc:
        capture = OutputCapture(None)
        capture.error = f"cannot capture output: {exc}"
    if capture.error:
        inv.events.report(capture.error)
    inv.event("start", run=run, fence=run.fence, took_over=claim.took_over,
              recorded=ledger is not None)
    env = job_environment(inv, run)
    if inv.pinger is not None:
        inv.pinger.start()
    passthrough = Passthrough() if spec.output == "passthrough" else None
    supervisor = Supervisor(
        SuperviseSpec(
            argv=spec.command, env=env, timeout=spec.timeout,
            kill_after=spec.kill_after, signal=spec.signal, leave_orphans=spec.leave_orphans,
            pass_fds=(lock.fd_for_job,) if lock and lock.fd_for_job is not None else (),
        ),
        on_output=capture,
        on_spawn=lambda job: on_spawn(inv, lock, job),
        passthrough=passthrough,
    )
    heartbeat = Heartbeat(ledger, run, spec.lease, supervisor) if ledger is not None else None
    if heartbeat:
        ledger.idle()  # claimed: no server connection while the job runs, but for renewals
        heartbeat.start()
    try:
        outcome = supervisor.run()
    finally:
        if heartbeat:
            heartbeat.stop()
        capture.close()
    inv.failpoint("after_exit")
    if capture.error:  # e.g. the disk filled up while the job ran: the capture is cut short
        inv.events.report(capture.error)
    status = outcome.exit_status(spec.preserve_status)
    result = finish_of(outcome, status, capture, log_file,
                       heartbeat is not None and heartbeat.lost)
    if ledger is not None:
        record_finish(inv, ledger, run, result)
    stopped = outcome.timed_out or outcome.stop_reason is not None or bool(outcome.forwarded)
    if spec.output == "on-failure" and result.status != base.SUCCEEDED:
        passthrough = replay_output(log_file, stopped)
    dropped = passthrough.flush(stopped) if passthrough is not None else 0
    inv.event("timeout" if outcome.timed_out else "finish", run=run, status=result.status,
              exit_code=status, duration_ms=result.duration_ms, signal=outcome.signal,
              skip_reason=result.skip_reason, orphans=outcome.orphans,
              forwarded=outcome.forwarded or None, spawn_error=outcome.spawn_error,
              output_bytes=capture.total, output_dropped=dropped,
              passthrough_error=passthrough_error(passthrough), **wrapper_usage())
    if outcome.spawn_error:
        warn(f"{spec.name}: {outcome.spawn_error}")
    tidy_logs(inv)
    return Attempt(status, result, run, env)


def passthrough_error(passthrough: Passthrough | None) -> str | None:
    """Why cronwrap's stdout/stderr stopped taking the job's output, for the run log."""
    if passthrough is None or not passthrough.errors:
        return None
    names = {1: "stdout", 2: "stderr"}
    return "; ".join(f"{names[t]}: {why}" for t, why in sorted(passthrough.errors.items()))


def on_spawn(inv: Invocation, lock: locks.Lock | None, job) -> None:
    if lock is not None:
        lock.set_job(job.pid, job.start_time)
    inv.failpoint("after_spawn")


def wrapper_usage() -> dict[str, int]:
    """The wrapper's own CPU and peak memory (not the job's), for the run log and bench/."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    peak = usage.ru_maxrss  # carried over fork+exec by Linux: VmHWM is this process's own
    try:
        with open("/proc/self/status") as f:
            peak = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration, ValueError):
        pass
    return {"wrapper_cpu_ms": int((usage.ru_utime + usage.ru_stime) * 1000),
            "wrapper_maxrss_kb": peak}


def finish_of(outcome, exit_status: int, capture: OutputCapture, log_file: Path,
              lease_lost: bool) -> Finish:
    """The run's record. Its exit_code is the status cronwrap returned for it (124, or 137
    when KILL was needed, for a timeout; 128+N for a signal; the job's own otherwise): what
    cron saw is what the ledger says. The ending signal and timed_out are kept beside it."""
    if lease_lost or outcome.stop_reason == base.LEASE_LOST:
        status, reason = base.KILLED, base.LEASE_LOST
    elif outcome.timed_out:
        status, reason = base.TIMEOUT, None
    elif outcome.spawn_error or (outcome.exit_code or 0) != 0:
        status, reason = base.FAILED, None
    elif outcome.signal is not None:
        status, reason = base.KILLED, None
    else:
        status, reason = base.SUCCEEDED, None
    tail = capture.error_tail()
    if outcome.spawn_error:  # it names the command, which may hold undecodable bytes
        error = outcome.spawn_error.encode("utf-8", "backslashreplace").decode()
        tail = (tail or "") + f"cronwrap: {error}\n"
    return Finish(
        status=status, duration_ms=int(outcome.duration * 1000), exit_code=exit_status,
        signal=outcome.signal, timed_out=outcome.timed_out, error_tail=tail,
        log_path=str(log_file) if capture.written or capture.total else None, skip_reason=reason,
    )


def record_finish(inv: Invocation, ledger: base.Ledger, run: Run, result: Finish) -> None:
    """Once the job ran, a failure to record never changes the exit status: retry, then spool
    the result to the outbox for the next invocation on this host to deliver. Whatever
    happens, a result that is not recorded is said on stderr."""
    error = ""
    for attempt in range(FINISH_RETRIES):
        try:
            if not ledger.finish(run, result, wait=min(inv.spec.db_wait, FINISH_DB_WAIT)):
                inv.event("lease_lost", run=run, status=result.status,
                          detail="the slot was taken over; its new runner's record stands")
            return
        except LedgerError as exc:
            error = str(exc)
            if exc.unreachable:
                break  # it has waited already: the outbox, not another wait
            time.sleep(0.25 * (attempt + 1))
    try:
        path = outbox.spool(inv.dirs.state, inv.spec.db, run, result)
    except Exception as exc:  # disk full, read-only: the exit status still comes back
        message = (f"could not record the end of run {run.run_id} of {inv.spec.name} "
                   f"({result.status}) nor keep it in the outbox: {error}; {exc}")
        inv.event("unrecorded", run=run, status=result.status, error=message)
        warn(message)
        return
    inv.event("spooled", run=run, status=result.status, outbox=str(path), error=error)
    warn(f"could not record the end of run {run.run_id} ({error}); kept in the outbox for the "
         "next run on this host")


def replay_output(log_file: Path, stopped: bool) -> Passthrough:
    """``--output on-failure``: the captured output, to stdout, never blocking on its reader."""
    passthrough = Passthrough()
    try:
        fd = open_private(log_file, os.O_RDONLY)
    except Exception:  # nothing was captured
        return passthrough
    try:
        passthrough.pour(1, iter(lambda: os.read(fd, 1 << 20), b""), stopped)
    except OSError:
        pass
    finally:
        os.close(fd)
    return passthrough


def tidy_logs(inv: Invocation) -> None:
    now = time.time()
    prune_outputs(inv.log_dir / file_name(inv.spec.name), inv.spec.keep_logs, now)
    prune_event_logs(inv.log_dir, inv.spec.keep_logs, now)


class Heartbeat:
    """Renews the lease every lease/3; ends the job when the lease is lost.

    Lost means: a renewal matched no row (another runner took the slot over), or no renewal
    succeeded for a whole lease by this wrapper's monotonic clock (the ledger unreachable,
    this wrapper SIGSTOPped). The second check runs in a watchdog thread of its own, so a
    renewal stuck on a server that stopped answering cannot delay it. A renewal counts from
    when it was sent: the database computed the new lease no earlier than that.
    """

    def __init__(self, ledger: base.Ledger, run: Run, lease: float, supervisor) -> None:
        self.ledger, self.run_row, self.lease, self.supervisor = ledger, run, lease, supervisor
        self.stopped = threading.Event()
        self.lost = False
        self.last_ok = time.monotonic()
        self.threads = [threading.Thread(target=self._renew, daemon=True, name="cronwrap-lease"),
                        threading.Thread(target=self._watch, daemon=True, name="cronwrap-watch")]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def _renew(self) -> None:
        while not self.stopped.wait(self.lease / 3):
            sent = time.monotonic()
            try:
                # a full server is waited for until the next renewal is due: the lease
                # has room for two more tries, and the watchdog ends the job past it
                if not self.ledger.heartbeat(self.run_row, self.lease, wait=self.lease / 3):
                    return self._lose()  # the row is another runner's now
                self.last_ok = max(self.last_ok, sent)
            except LedgerError:
                pass  # the watchdog decides when the lease must have expired

    def _watch(self) -> None:
        while not self.stopped.wait(min(self.lease / 10, 1.0)):
            if time.monotonic() - self.last_ok >= self.lease:
                return self._lose()

    def _lose(self) -> None:
        if not self.lost and not self.stopped.is_set():
            self.lost = True
            self.supervisor.request_stop(base.LEASE_LOST)

    def stop(self) -> None:
        self.stopped.set()
        for thread in self.threads:
            if thread.is_alive():
                thread.join(timeout=1.0)  # a renewal stuck on the network is a daemon thread
