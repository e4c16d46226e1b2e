"""What is wrong with the jobs now, as alerts: the pure core of ``cronwrap watch``.

``breaches`` reads the reports ``status`` computes (report.job_reports) and names each breach by
a key that stays the same for as long as that one breach lasts: a late slot by its slot time, a
failing streak by its first failed run, a stuck or warning run by its run id. The watcher opens
an alert for a key it has not seen and closes the alerts whose key is gone (``recovered``); the
ledger makes each of those transitions, and each notification, happen once across watchers.
It takes ``now`` and does no I/O (not marked pure: it reads the schedule and settings as
``status`` does, through read/report.py).
"""

from __future__ import annotations

from datetime import timedelta

from cronwrap.model import BAD_STATUSES, Alert, Status, iso, shown_job
from cronwrap.options.durations import format_duration
from cronwrap.read.report import plan_of, setting
from cronwrap.record import TYPE_CHECKING

if TYPE_CHECKING:
    from datetime import datetime

    from cronwrap.read.report import JobReport

LATE, FAILING, STUCK, WARNING, RECOVERED = "late", "failing", "stuck", "warning", "recovered"
KINDS = (LATE, FAILING, STUCK, WARNING)
MAX_GRACE = timedelta(minutes=10)
MIN_GRACE = timedelta(seconds=5)  # a firing's own start: cron, the interpreter, the claim


def alert_key(kind: str, job: str, what: object) -> str:
    """A breach's name: what it is, whose, and which slot or run."""
    return f"{kind}|{job}|{what}"


def grace(period: timedelta, given: float | None) -> timedelta:
    """How long after a slot its job may still be starting: ``--grace``, else a tenth of the
    period between its slots, at least MIN_GRACE and at most MAX_GRACE."""
    if given is not None:
        return timedelta(seconds=given)
    return max(MIN_GRACE, min(period / 10, MAX_GRACE))


def breaches(reports: list[JobReport], now: datetime, given_grace: float | None,
             streaks: dict[str, tuple[int, int]]) -> list[Alert]:
    """Every breach now, but of paused jobs. ``streaks``: for a job whose last run failed,
    its failed slots in a row and the run id of the first of them (``policy.failure_streak``)."""
    found: list[Alert] = []
    for report in reports:
        if report.pause is not None:
            continue  # paused on purpose: told nothing new until it resumes
        found += late(report, now, given_grace)
        found += failing(report, streaks.get(report.summary.job))
        found += stuck(report, now, given_grace)
        found += warning(report)
    return found


def late(report: JobReport, now: datetime, given_grace: float | None) -> list[Alert]:
    """The first slot since the job's newest that passed, plus its grace, with no firing on
    any host (per host for a host job): one alert per slot, until a firing comes."""
    s = report.summary
    plan = plan_of(s)
    if plan is None or s.last_slot is None:
        return []  # no schedule known, or never fired on one: nothing to be late for
    due = plan.next_after(s.last_slot)
    allowed = grace(plan.next_after(due) - due, given_grace)
    if due + allowed > now:
        return []
    job = shown_job(s.job)
    last = (f"its last: {_when(s.last_slot.astimezone(due.tzinfo))}" if s.last_run or s.last_seen
            else "it has never run: the config file names it")
    return [Alert(alert_key(LATE, s.job, iso(due)), LATE, s.job,
                  f"{job}: late: its slot {_when(due)} passed {_ago(now - due)} ago with no "
                  f"run ({last})", slot=due)]


def failing(report: JobReport, streak: tuple[int, int] | None) -> list[Alert]:
    """The job's last slot failed, the N-th in a row, N its recorded --alert-after."""
    last = report.summary.last_run
    if last is None or last.status not in BAD_STATUSES or streak is None:
        return []
    count, first = streak
    needed = int(setting(report.summary, "alert_after") or 1)
    if count < needed:
        return []
    job = shown_job(report.summary.job)
    what = f"{count} failed slots in a row" if count > 1 else "its last slot failed"
    exit_code = "" if last.exit_code is None else f", exit {last.exit_code}"
    return [Alert(alert_key(FAILING, report.summary.job, first), FAILING, report.summary.job,
                  f"{job}: failing: {what} (run {last.run_id} {last.status}{exit_code} on "
                  f"{last.host or 'an unknown host'})", detail=last.error_tail or "",
                  slot=last.scheduled_at, run_id=last.run_id)]


def stuck(report: JobReport, now: datetime, given_grace: float | None) -> list[Alert]:
    """A run still holding its lease past its --timeout and grace (its wrapper should have
    ended it), or one whose runner is gone (abandoned) and that no firing has taken over."""
    out = []
    timeout = setting(report.summary, "timeout")
    for run in report.summary.running:
        job = shown_job(report.summary.job)
        started = run.started_at
        if run.shown_status(now) == Status.ABANDONED:
            expired = run.locked_until or started or now
            if now - expired < grace(timedelta(0), given_grace):
                continue
            why = f"run {run.run_id} abandoned: its runner on {run.host} is gone and no firing " \
                  f"has taken its slot over (lease ended {_ago(now - expired)} ago)"
        elif timeout and started is not None and \
                now - started > timedelta(seconds=timeout) + grace(timedelta(0), given_grace):
            why = (f"run {run.run_id} on {run.host} has run {_ago(now - started)}, past its "
                   f"--timeout of {_ago(timedelta(seconds=timeout))}")
        else:
            continue
        out.append(Alert(alert_key(STUCK, report.summary.job, run.run_id), STUCK,
                         report.summary.job, f"{job}: stuck: {why}", slot=run.scheduled_at,
                         run_id=run.run_id))
    return out


def warning(report: JobReport) -> list[Alert]:
    """The last run ended `warning` (a --warning-exit status, too fast), or slow, or its peak
    memory was unusual (--memory-factor)."""
    last = report.summary.last_run
    flagged = "; ".join(note for note in (report.slow, report.heavy) if note)
    if last is None or not (last.status == Status.WARNING or flagged):
        return []
    why = flagged if last.status != Status.WARNING else \
        f"run {last.run_id} ended warning ({last.skip_reason or f'exit {last.exit_code}'})"
    return [Alert(alert_key(WARNING, report.summary.job, last.run_id), WARNING,
                  report.summary.job, f"{shown_job(report.summary.job)}: warning: {why}",
                  slot=last.scheduled_at, run_id=last.run_id)]


def recovered(alert: Alert, now: datetime) -> Alert:
    """The notification that ``alert``'s breach is over."""
    was = alert.text.split(": ", 2)[-1]  # "JOB: KIND: why" -> why
    return Alert(alert.key, RECOVERED, alert.job,
                 f"{shown_job(alert.job)}: recovered: no longer {alert.kind} (was: {was})",
                 slot=alert.slot, run_id=alert.run_id)


def _when(t: datetime) -> str:
    """A slot as a person reads it: in its schedule's zone, to the second."""
    return t.isoformat(timespec="seconds")


def _ago(delta: timedelta) -> str:
    return format_duration(max(delta.total_seconds(), 0.0))
