"""What ``status``, ``history`` and ``logs`` show: data first, rendering second.

``job_reports`` builds plain objects from the ledger; ``to_json`` and the ``render_*``
functions draw them. rich is imported only inside the renderers.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from cronwrap.durations import format_duration
from cronwrap.ledger import base
from cronwrap.ledger.base import JobSummary, Run, iso

OK, WARNING, CRITICAL = "ok", "warning", "critical"
BAD_STATUSES = (base.FAILED, base.TIMEOUT, base.KILLED)


@dataclass
class JobReport:
    summary: JobSummary
    health: str
    why: str
    now: datetime
    next_due_at: datetime | None = None
    missed: int = 0

    @property
    def live(self) -> list[Run]:
        """Runs holding a live lease."""
        return [r for r in self.summary.running if r.locked_until and r.locked_until > self.now]


def assess(summary: JobSummary, now: datetime) -> tuple[str, str]:
    """Health of a job and a few words of why."""
    last = summary.last_run
    if last is None:
        return OK, "no runs yet"
    shown = last.shown_status(now)
    if shown in BAD_STATUSES:
        return CRITICAL, f"last run {shown}"
    abandoned = [r for r in summary.running if r.shown_status(now) == base.ABANDONED]
    if abandoned:
        return WARNING, f"run {abandoned[-1].run_id} abandoned (its runner is gone)"
    return OK, f"last run {shown}"


def job_reports(ledger: base.Ledger, since: datetime, names: list[str] | None,
                now: datetime) -> list[JobReport]:
    reports = []
    for summary in ledger.summaries(since, names):
        health, why = assess(summary, now)
        reports.append(JobReport(summary=summary, health=health, why=why, now=now))
    return reports


def run_json(run: Run | None, now: datetime) -> dict | None:
    return None if run is None else run.to_json(now)


def report_json(report: JobReport, now: datetime) -> dict:
    s = report.summary
    return {
        "job": s.job, "schedule": s.schedule, "tz": s.tz,
        "last_run": run_json(s.last_run, now), "last_success_at": iso(s.last_success_at),
        "next_due_at": iso(report.next_due_at),
        "running": [dict(r.to_json(now), lease_left_s=r.lease_left(now)) for r in report.live],
        "missed": report.missed, "counts": s.counts, "health": report.health,
        "first_seen": iso(s.first_seen), "last_seen": iso(s.last_seen),
    }


def ago(t: datetime | None, now: datetime) -> str:
    if t is None:
        return "-"
    delta = (now - t).total_seconds()
    return f"{format_duration(delta)} ago" if delta >= 0 else f"in {format_duration(-delta)}"


def duration_text(run: Run | None) -> str:
    if run is None or run.duration_ms is None:
        return "-"
    return format_duration(run.duration_ms / 1000)


_COLOURS = {base.SUCCEEDED: "green", base.FAILED: "red", base.TIMEOUT: "magenta",
            base.KILLED: "red", base.SKIPPED: "dim", base.MISSED: "yellow",
            base.RUNNING: "cyan", base.ABANDONED: "yellow"}
_HEALTH = {OK: "green", WARNING: "yellow", CRITICAL: "bold red"}


def status_label(run: Run, now: datetime) -> str:
    shown = run.shown_status(now)
    text = shown + (f" ({run.skip_reason})" if run.skip_reason else "")
    return f"[{_COLOURS.get(shown, 'white')}]{text}[/]"


def render_status(reports: list[JobReport], now: datetime) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, header_style="bold")
    for column in ("JOB", "LAST RUN", "STATUS", "EXIT", "DURATION", "LAST SUCCESS",
                   "RUNNING", "HEALTH"):
        table.add_column(column)
    for rep in reports:
        s, last = rep.summary, rep.summary.last_run
        running = ", ".join(f"{r.host}:{r.pid} lease {format_duration(r.lease_left(now))} "
                            f"fence {r.fence}" for r in rep.live) or "-"
        table.add_row(
            s.job, ago(last.started_at or last.scheduled_at, now) if last else "-",
            status_label(last, now) if last else "-",
            "-" if last is None or last.exit_code is None else str(last.exit_code),
            duration_text(last), ago(s.last_success_at, now), running,
            f"[{_HEALTH[rep.health]}]{rep.health}[/] {rep.why}",
        )
    console = Console()
    if not reports:
        console.print("no jobs recorded yet: run one with cronwrap run -n NAME -- COMMAND")
        return
    console.print(table)


def render_runs(runs: list[Run], now: datetime) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, header_style="bold")
    for column in ("RUN", "SLOT", "TRIGGER", "STATUS", "ATTEMPT", "HOST", "STARTED",
                   "DURATION", "EXIT", "FENCE"):
        table.add_column(column)
    for r in runs:
        table.add_row(
            str(r.run_id), r.run_key, r.trigger, status_label(r, now), str(r.attempt),
            r.host or "-", ago(r.started_at, now), duration_text(r),
            "-" if r.exit_code is None else str(r.exit_code), str(r.fence or "-"),
        )
    Console().print(table)
    last_bad = next((r for r in runs if r.status in BAD_STATUSES and r.error_tail), None)
    if last_bad is not None:
        Console().print(f"\n[bold]last output of run {last_bad.run_id} ({last_bad.status}):[/]")
        Console().print(last_bad.error_tail.rstrip()[-1500:], markup=False, highlight=False)


def since_of(now: datetime, seconds: float) -> datetime:
    return now - timedelta(seconds=seconds)
