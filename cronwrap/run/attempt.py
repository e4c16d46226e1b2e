"""One attempt at a claimed slot: capture and pass on the job's output, supervise it under its
lease, then record how it ended (ARCHITECTURE.md §2 steps 6-7).

Once the job has run, a failure to record its end never changes cronwrap's exit status: the
result is retried, then spooled to the outbox for the next invocation on this host.
"""

from __future__ import annotations

import time

from cronwrap.errors import EXIT_SUPERSEDED, LedgerError
from cronwrap.model import Claim, Event, Finish, Reason, Run, Status
from cronwrap.options.durations import format_duration
from cronwrap.record import TYPE_CHECKING, Record
from cronwrap.run import outbox, policy
from cronwrap.run.firing import cron_zone
from cronwrap.run.jobenv import job_environment
from cronwrap.run.lease import Heartbeat
from cronwrap.run.runlog import Redaction, RunFiles
from cronwrap.stdio import Passthrough, warn

if TYPE_CHECKING:
    from cronwrap.ledger import base
    from cronwrap.process import locks
    from cronwrap.process.keeper import JobProcess, Outcome
    from cronwrap.run.invocation import Invocation
    from datetime import datetime
    from typing import Callable, TypedDict

    from cronwrap.options.spec import JobSpec

    class WrapperUsage(TypedDict):
        wrapper_cpu_ms: int
        wrapper_maxrss_kb: int


FINISH_RETRIES = 3
FINISH_DB_WAIT = 10.0  # a finish waits at most this long for a full server (then: the outbox)


class Attempt(Record):
    """One run of a slot as it ended: cronwrap's exit status, what was recorded, the row,
    and the environment the job had (hooks get it too)."""

    exit_status: int
    result: Finish
    run: Run
    env: dict[str, str]


def local_time(inv: Invocation) -> Callable[[datetime], datetime] | None:
    """A time as the job's zone shows it: its schedule's, else CRON_TZ's; None: the local
    zone (TZ's)."""
    if inv.timing.schedule is not None:
        return inv.timing.schedule.local
    zone = cron_zone(inv.environ)
    return None if zone is None else lambda t: t.astimezone(zone)


def execute(inv: Invocation, ledger: base.Ledger | None, claim: Claim,
            lock: locks.Lock | None) -> Attempt:
    """Run the job of ``claim`` to its end and record it (``ledger`` None: unrecorded)."""

    from cronwrap.process.supervise import SuperviseSpec  # as the supervisor: a claimed slot's

    spec, run = inv.spec, claim.run
    assert run is not None and run.fence is not None
    steps_from = inv.forced_from.setdefault(run.run_key, run.fence) if spec.force else 0
    env = job_environment(inv.environ, spec.env_extra, run, spec.host, local_time(inv),
                          spec.db or f"sqlite://{inv.dirs.ledger_file}", steps_from)
    inv.redaction = Redaction(env, spec.redact or ())
    log_id = run.run_id if ledger is not None else f"unrecorded-{int(inv.now)}"
    files = RunFiles(inv.log_dir, spec.name, log_id, run.attempt, inv.redaction, spec.timestamps)
    capture = files.capture
    if capture.error:
        inv.events.report(capture.error)
    inv.event(Event.START, run=run, fence=run.fence, took_over=claim.took_over,
              recorded=ledger is not None)
    if inv.pinger is not None:
        inv.pinger.start(run.run_key)
    passthrough = Passthrough() if spec.output == "passthrough" else None
    supervisor = inv.world.supervisor(
        SuperviseSpec(argv=spec.command, env=env, timeout=spec.timeout,
                      kill_after=spec.kill_after, signal=spec.signal,
                      leave_orphans=spec.leave_orphans, max_memory=spec.max_memory,
                      max_cpu=spec.max_cpu, pass_fds=(lock.fd_for_job,) if lock and lock.fd_for_job is not None else ()),
        capture, lambda job: on_spawn(inv, lock, job), passthrough)
    heartbeat = None
    if ledger is not None:
        heartbeat = Heartbeat(ledger, run, spec.lease, supervisor)
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
    result = finish_of(spec, outcome, status, files, heartbeat is not None and heartbeat.lost)
    superseded = ledger is not None and not record_finish(inv, ledger, run, result)
    stopped = outcome.timed_out or outcome.stop_reason is not None or bool(outcome.forwarded)
    if spec.output == "on-failure" and result.status != Status.SUCCEEDED:
        passthrough = Passthrough()
        passthrough.pour(1, files.replay(), stopped)
    dropped = passthrough.flush(stopped) if passthrough is not None else 0
    inv.event(Event.TIMEOUT if outcome.timed_out else Event.FINISH, run=run,
              status=result.status, exit_code=status, duration_ms=result.duration_ms,
              signal=outcome.signal, skip_reason=result.skip_reason, orphans=outcome.orphans,
              forwarded=outcome.forwarded or None, spawn_error=outcome.spawn_error,
              output_bytes=capture.total, output_dropped=dropped,
              passthrough_error=passthrough_error(passthrough), cpu_user_ms=result.cpu_user_ms,
              cpu_system_ms=result.cpu_system_ms, max_rss_kb=result.max_rss_kb,
              **wrapper_usage())
    if result.skip_reason == Reason.TOO_FAST:
        inv.event(Event.WARNING, run=run, status=result.status, skip_reason=result.skip_reason,
                  message=f"succeeded in {format_duration(outcome.duration)}, less than "
                          f"--min-duration {format_duration(spec.min_duration)}: recorded "
                          "warning (too_fast)")
    if outcome.spawn_error:
        warn(f"{spec.name}: {outcome.spawn_error}")
    if outcome.limit_detail:  # --max-memory, --max-cpu
        warn(f"{spec.name}: {outcome.limit_detail}: the job was ended ({result.status}, "
             f"{result.skip_reason})")
    files.tidy(spec.keep_logs, time.time())
    # The slot was taken over: another runner's record stands. Whatever the job itself did (it
    # may have run to its end while this wrapper was stopped), cron sees a status of its own,
    # so its mail flags the superseded run.
    return Attempt(EXIT_SUPERSEDED if superseded else status, result, run, env)


def on_spawn(inv: Invocation, lock: locks.Lock | None, job: JobProcess) -> None:
    if lock is not None:
        lock.set_job(job.pid, job.start_time)
    inv.failpoint("after_spawn")


def passthrough_error(passthrough: Passthrough | None) -> str | None:
    """Why cronwrap's stdout/stderr stopped taking the job's output, for the run log."""
    if passthrough is None or not passthrough.errors:
        return None
    names = {1: "stdout", 2: "stderr"}
    return "; ".join(f"{names[t]}: {why}" for t, why in sorted(passthrough.errors.items()))


def wrapper_usage() -> WrapperUsage:
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


def finish_of(spec: JobSpec, outcome: Outcome, exit_status: int, files: RunFiles,
              lease_lost: bool) -> Finish:
    """The run's record. Its exit_code is the status cronwrap returned for it (124, or 137
    when KILL was needed, for a timeout; 128+N for a signal; the job's own otherwise): what
    cron saw is what the ledger says. The ending signal and timed_out are kept beside it;
    --success-exit/--warning-exit change only the status recorded."""
    status, reason = policy.ended_as(outcome, lease_lost, spec.success_exit,
                                     spec.warning_exit or frozenset(), spec.min_duration)
    tail = files.capture.error_tail()
    if outcome.spawn_error:  # it names the command, which may hold undecodable bytes
        error = outcome.spawn_error.encode("utf-8", "backslashreplace").decode()
        tail = (tail or "") + f"cronwrap: {error}\n"
    return Finish(
        status=status, duration_ms=int(outcome.duration * 1000), exit_code=exit_status,
        signal=outcome.signal, timed_out=outcome.timed_out, error_tail=tail,
        log_path=files.log_path, skip_reason=reason,
        cpu_user_ms=ms(outcome.cpu_user), cpu_system_ms=ms(outcome.cpu_system),
        max_rss_kb=outcome.max_rss_kb,
    )


def ms(seconds: float | None) -> int | None:
    return None if seconds is None else round(seconds * 1000)


def record_finish(inv: Invocation, ledger: base.Ledger, run: Run, result: Finish) -> bool:
    """Once the job ran, a failure to record never changes the exit status: retry, then spool
    the result to the outbox for the next invocation on this host to deliver. Whatever
    happens, a result that is not recorded is said on stderr. False: the ledger refused the
    end because the slot was taken over (the lease was lost)."""
    error = ""
    for attempt in range(FINISH_RETRIES):
        try:
            if not ledger.finish(run, result, wait=min(inv.spec.db_wait, FINISH_DB_WAIT)):
                inv.event(Event.LEASE_LOST, run=run, status=result.status,
                          detail="the slot was taken over; its new runner's record stands")
                keep_superseded(inv, ledger, run, result)
                return False
            return True
        except LedgerError as exc:
            error = str(exc)
            if exc.unreachable:
                break  # it has waited already: the outbox, not another wait
            inv.world.sleep(0.25 * (attempt + 1))
    try:
        path = outbox.spool(inv.dirs.state, inv.spec.db, run, result)
    except Exception as exc:  # disk full, read-only: the exit status still comes back
        message = (f"could not record the end of run {run.run_id} of {inv.spec.name} "
                   f"({result.status}) nor keep it in the outbox: {error}; {exc}")
        inv.event(Event.UNRECORDED, run=run, status=result.status, error=message)
        warn(message)
        return True
    inv.event(Event.SPOOLED, run=run, status=result.status, outbox=str(path), error=error)
    warn(f"could not record the end of run {run.run_id} ({error}); kept in the outbox for the "
         "next run on this host")
    return True


def keep_superseded(inv: Invocation, ledger: base.Ledger, run: Run, result: Finish) -> None:
    """The slot was taken over: keep this attempt's real end among the slot's attempts (the
    job may have run to its end while this wrapper was stopped), for ``history``. One try:
    the run log has it anyway, and the exit status does not depend on it."""
    try:
        ledger.record_superseded(run, result, wait=min(inv.spec.db_wait, FINISH_DB_WAIT))
    except LedgerError as exc:
        warn(f"could not keep the end of run {run.run_id} attempt {run.attempt} among its "
             f"attempts: {exc}")
