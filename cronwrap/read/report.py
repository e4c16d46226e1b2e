"""What ``status``, ``history`` and ``logs`` show: data first, rendering second.

``job_reports`` builds plain objects from the ledger; ``to_json`` and the ``render_*``
functions draw them, through table.py (rich's look without rich's cost: 350 ms for a fleet's
table). What the renderers show of the ledger goes through ``cell`` (or
``textsafe.safe_text``): a shared ledger's writer chooses those strings, and they must reach
a terminal as text, not as escape sequences or markup.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from cronwrap.errors import CronwrapError
from cronwrap.model import (BAD_STATUSES, DONE_STATUSES, FORMAT_VERSION, JobSummary, Pause,
                            Reason, Run, Status, Trigger, active_pause, iso, job_host,
                            memory_text, shown_job, usage_text)
from cronwrap.options.durations import format_duration
from cronwrap.read.table import Cell, Screen, render_table, render_text
from cronwrap.read.table import cell as plain_cell
from cronwrap.record import TYPE_CHECKING, Record
from cronwrap.textsafe import safe_text

if TYPE_CHECKING:
    from cronwrap.ledger import base
    from cronwrap.model import AlertState, RunAttempt, Step
    from cronwrap.read.picture import Picture
    from cronwrap.schedule import Explanation, Schedule

OK, WARNING, CRITICAL = "ok", "warning", "critical"


class JobReport(Record):
    """One job as ``status`` shows it (a Record: a dataclass cost ``status`` 10 ms of import)."""

    summary: JobSummary
    health: str
    why: str
    now: datetime
    next_due_at: datetime | None = None
    missed: int = 0  # slots without a run: recorded missed + late
    late: int = 0  # slots passed that no host has fired yet (recorded missed by the next firing)
    slow: str | None = None  # --slow-factor: why the last run counts as slow
    heavy: str | None = None  # --memory-factor: why the last run's memory counts as unusual
    pause: Pause | None = None  # the pause in force (cronwrap pause): health ok, its slots skipped
    alerts: list[AlertState]  # the job's open alerts (cronwrap watch)
    _defaults = dict(next_due_at=None, missed=0, late=0, slow=None, heavy=None, pause=None)
    _factories = dict(alerts=list)

    @property
    def live(self) -> list[Run]:
        """Runs holding a live lease."""
        return [r for r in self.summary.running if r.locked_until and r.locked_until > self.now]


LATE_GRACE = timedelta(seconds=90)  # the slot-mapping tolerance: a firing may still come
MAX_LATE = 1000
_PLANS: dict[tuple[str, str | None], Schedule | None] = {}  # parsed schedules, by (schedule, tz)


def assess(summary: JobSummary, now: datetime, missed: int = 0, late: int = 0,
           slow: str | None = None, pause: Pause | None = None) -> tuple[str, str]:
    """Health of a job now, and a few words of why. It describes the present: slots passing
    unfired (late) and the last run. Slots recorded missed earlier in the window are counted
    (``missed``), but once a later run went well the job is ``ok`` again: one missed minute
    must not page for the whole window. A paused job is ``ok``: an operator stopped it on
    purpose (Kubernetes' suspended CronJob, healthchecks.io's paused check)."""
    last = summary.last_run
    if pause is not None:
        return OK, pause.describe()
    if late:
        return CRITICAL, f"late: {plural(late, 'slot')} passed without a run"
    abandoned = [r for r in summary.running if r.shown_status(now) == Status.ABANDONED]
    if abandoned:  # its slot has not run to an end: the job's next firing takes it over
        return CRITICAL, f"run {abandoned[-1].run_id} abandoned (its runner is gone)"
    if last is None:
        return OK, "no runs yet"
    shown = last.shown_status(now)
    if shown in BAD_STATUSES:
        return CRITICAL, f"last run {shown}"
    if shown == Status.WARNING:
        return WARNING, f"last run warning ({warning_detail(last)})"
    if slow:  # --slow-factor, and --memory-factor's note
        return WARNING, slow
    if last.skew_ms is not None and abs(last.skew_ms) > LATE_GRACE.total_seconds() * 1000:
        return WARNING, (f"host {last.host} fired {abs(last.skew_ms) / 1000:.0f}s "
                         f"{'after' if last.skew_ms > 0 else 'before'} the slot: check its clock")
    recorded = missed - late
    return OK, f"last run {shown}" + (f" ({plural(recorded, 'missed slot')} in the window)"
                                      if recorded else "")


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def warning_detail(run: Run) -> str:
    """Why a run was recorded ``warning``: its reason (``too_fast``), else its exit status."""
    return run.skip_reason or f"exit {run.exit_code}"


# Words for a person, by the ledger's strings (run's exit statuses 126/127, as a shell's).
_SPAWN_EXITS = {126: "the command was found but is not executable",
                127: "the command was not found"}
_TRIGGER_WORDS: dict[str, str] = {
    Trigger.SCHEDULE: "cron fired it for its slot",
    Trigger.CATCHUP: "its slot had been missed",
    Trigger.TAKEOVER: "the slot's runner had died",
    Trigger.MANUAL: "run by hand for its slot: --date, --at"}
_SKIP_WORDS: dict[str, str] = {
    Reason.OVERLAP: "another run of the job was live (--overlap skip)",
    Reason.TOO_LATE: "a missed slot older than --catchup-window",
    Reason.DUPLICATE: "the slot had already been run"}


def run_why(run: Run, now: datetime) -> str:
    """Why a run ended as it did, in a person's words: its status read with its exit status,
    signal, timeout and reason (what README's exit statuses and STATUS_MEANINGS say)."""
    shown, code, reason = run.shown_status(now), run.exit_code, run.skip_reason
    if shown == Status.ABANDONED:
        return "its runner is gone and its lease expired: the job's next firing takes it over"
    if shown == Status.RUNNING:
        return f"running; its lease has {format_duration(run.lease_left(now) or 0)} left"
    if shown == Status.TIMEOUT:
        killed = " and needed KILL" if code == 137 else ""
        return f"it reached its --timeout and was ended{killed} (exit {code})"
    if reason == Reason.LEASE_LOST:
        return ("cronwrap ended it: its lease was lost (another runner took the slot over, or "
                "the ledger was unreachable for longer than the lease)")
    if reason in (Reason.MEMORY, Reason.CPU):
        limit = "--max-memory" if reason == Reason.MEMORY else "--max-cpu"
        return f"cronwrap ended its tree: it went over {limit} (exit {code})"
    if shown in (Status.SKIPPED, Status.MISSED):
        return _SKIP_WORDS.get(reason or "", f"not run ({reason})" if reason else
                              "the slot passed without a run")
    if run.signal is not None:
        return f"ended by signal {run.signal} ({signal_name(run.signal)}), exit {code}"
    if shown == Status.WARNING:
        return ("it succeeded faster than --min-duration" if reason == Reason.TOO_FAST
                else f"exit {code} is a --warning-exit status")
    if code is None:
        return str(shown)
    if shown == Status.FAILED and code in _SPAWN_EXITS:
        return f"exit {code}: {_SPAWN_EXITS[code]}"
    return f"the job exited with status {code}"


def trigger_words(trigger: str) -> str:
    """``schedule (cron fired it for its slot)``: a run's trigger and what it means."""
    return f"{trigger} ({_TRIGGER_WORDS[trigger]})" if trigger in _TRIGGER_WORDS else trigger


def signal_name(number: int) -> str:
    import signal

    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def last_failure(runs: list[Run]) -> Run | None:
    """The newest run (``runs`` newest first) that failed, timed out, was killed or warned."""
    return next((r for r in runs if r.status in (*BAD_STATUSES, Status.WARNING)), None)


def job_reports(ledger: base.Ledger, since: datetime, names: list[str] | None,
                now: datetime) -> list[JobReport]:
    reports = []
    # jobs on one schedule share its slots
    known: dict[tuple[str | None, str | None, datetime | None], tuple[datetime | None, int]] = {}
    pauses = ledger.pauses()
    alerts: dict[str, list[AlertState]] = {}
    for state in ledger.alerts(now):
        if state.closed_at is None:
            alerts.setdefault(state.alert.job, []).append(state)
    summaries = ledger.summaries(since, names)
    # What the last runs used (expansion 6): one read for them all, for --json and the metrics.
    used = {r.run_id: r for r in ledger.with_usage([s.last_run for s in summaries
                                                     if s.last_run is not None])}
    for summary in summaries:
        if summary.last_run is not None \
                and (run := used.get(summary.last_run.run_id, summary.last_run)) \
                is not summary.last_run:
            summary = summary.replace(last_run=run)  # with its usage
        key = (summary.schedule, summary.tz, summary.last_slot)
        if key not in known:
            known[key] = schedule_state(summary, now)
        next_due, late = known[key]
        pause = active_pause(pauses, summary.job, now)
        if pause is not None:
            late = 0  # a paused job's slots are not due: none is late
        missed = summary.counts.get(Status.MISSED, 0) + late
        slow = slow_note(summary, ledger)
        heavy = heavy_note(summary, ledger)
        flagged = "; ".join(note for note in (slow, heavy) if note) or None
        health, why = assess(summary, now, missed, late, flagged, pause)
        reports.append(JobReport(summary=summary, health=health, why=why, now=now,
                                 next_due_at=next_due, missed=missed, late=late, slow=slow,
                                 heavy=heavy, pause=pause, alerts=alerts.get(summary.job, [])))
    return reports


P95_MIN_RUNS, P95_RUNS = 5, 50  # a usual duration needs 5 successes among the last 50 runs


def p95(durations: list[float]) -> float | None:
    """The 95th percentile (nearest rank) of ``durations``; None for fewer than P95_MIN_RUNS."""
    if len(durations) < P95_MIN_RUNS:
        return None
    ordered = sorted(durations)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def setting(summary: JobSummary, key: str) -> float | None:
    """A number the job's firings recorded in its settings (``invocation.job_settings``):
    None when they did not (the option's default) or it is not a number."""
    if not summary.settings or key not in summary.settings:
        return None
    import json

    try:
        value = json.loads(summary.settings).get(key)
    except (ValueError, AttributeError):
        return None  # anyone who can write a shared ledger can put anything there
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None


def slow_factor(summary: JobSummary) -> float | None:
    """The job's --slow-factor, as its firings recorded it (None: off)."""
    value = setting(summary, "slow_factor")
    return value if value is not None and value >= 1 else None


def slow_note(summary: JobSummary, ledger: base.Ledger) -> str | None:
    """``slow: took 9m, more than 3x its usual p95 of 2m`` when the job has --slow-factor F and
    its last finished run took more than F times the p95 of the successful runs before it.
    Only jobs with a factor cost a query."""
    factor, last = slow_factor(summary), summary.last_run
    if factor is None or last is None or last.duration_ms is None \
            or last.status not in DONE_STATUSES:
        return None
    earlier = [r.duration_ms / 1000 for r in ledger.runs(summary.job, P95_RUNS + 1)
               if r.run_id != last.run_id and r.status == Status.SUCCEEDED
               and r.duration_ms is not None][:P95_RUNS]
    usual = p95(earlier)
    took = last.duration_ms / 1000
    if usual is None or took <= factor * usual:
        return None
    return (f"slow: took {format_duration(took)}, more than {factor:g}x its usual p95 of "
            f"{format_duration(usual)}")


def memory_factor(summary: JobSummary) -> float | None:
    """The job's --memory-factor, as its firings recorded it (None: off)."""
    value = setting(summary, "memory_factor")
    return value if value is not None and value >= 1 else None


def memory_note(factor: float | None, last_kb: int | None, earlier_kb: list[int]) -> str | None:
    """``memory: peak 900 MiB, more than 3x its usual p95 of 200 MiB`` when a run's peak
    memory ``last_kb`` is more than ``factor`` times the p95 of ``earlier_kb`` (the peaks of
    the successful runs before it, at least P95_MIN_RUNS of them); else None. Pure."""
    if factor is None or last_kb is None:
        return None
    usual = p95([float(kb) for kb in earlier_kb])
    if usual is None or last_kb <= factor * usual:
        return None
    return (f"memory: peak {memory_text(last_kb)}, more than {factor:g}x its usual p95 of "
            f"{memory_text(round(usual))}")


def heavy_note(summary: JobSummary, ledger: base.Ledger) -> str | None:
    """memory_note for the job's last finished run, when it has --memory-factor F: only jobs
    with a factor cost a read (its last 50 runs and what they used)."""
    factor, last = memory_factor(summary), summary.last_run
    if factor is None or last is None or last.max_rss_kb is None \
            or last.status not in DONE_STATUSES:
        return None
    earlier = [r.max_rss_kb for r in ledger.with_usage(ledger.runs(summary.job, P95_RUNS + 1))
               if r.run_id != last.run_id and r.status == Status.SUCCEEDED
               and r.max_rss_kb is not None][:P95_RUNS]
    return memory_note(factor, last.max_rss_kb, earlier)


def plan_of(summary: JobSummary) -> Schedule | None:
    """The job's recorded schedule, parsed (None: none, or one this version cannot read)."""
    if not summary.schedule:
        return None
    from cronwrap import schedule as sched

    key = (summary.schedule, summary.tz)
    if key not in _PLANS:  # a fleet's jobs share a few schedules: each is parsed once
        try:
            zone = sched.load_zone(summary.tz or "UTC")
            _PLANS[key] = sched.Schedule.parse(summary.schedule, zone, summary.tz)
        except CronwrapError:
            _PLANS[key] = None
    return _PLANS[key]


def schedule_state(summary: JobSummary, now: datetime) -> tuple[datetime | None, int]:
    """The next due slot, and how many slots passed since the job was last seen (no host
    fired them: they are late, and will be recorded missed by the next firing)."""
    plan = plan_of(summary)
    if plan is None:
        return None, 0  # no schedule, or one this version cannot read: show the rest
    late = 0
    if summary.last_slot is None:
        return plan.next_after(now), 0
    for _ in plan.slots_between(summary.last_slot, now - LATE_GRACE):
        late += 1
        if late >= MAX_LATE:
            break
    return plan.next_after(now), late


def history_json(run: Run, attempts: list[RunAttempt], now: datetime,
                 steps: list[Step] | None = None) -> dict[str, object]:
    """A run as ``history --json`` and serve's history API show it: with its attempts and
    its slot's steps (cronwrap step), in the order they started."""
    return {"format": FORMAT_VERSION, **run.to_json(now),
            "attempts": [a.to_json() for a in attempts],
            "steps": [s.to_json() for s in steps or ()]}


def step_status(step: Step, run: Run) -> str:
    """A step as a person reads it: one left ``running`` by an attempt that is no longer the
    slot's (its runner died or was taken over) is ``abandoned``."""
    if step.status == Status.RUNNING and (run.status != Status.RUNNING or run.fence != step.fence):
        return Status.ABANDONED
    return step.status


def step_cells(step: Step, run: Run, now: datetime) -> list[Cell]:
    """A step's row of the runs table, under its run's."""
    shown = step_status(step, run)
    return _cells("", cell(f"step {step.key}"), "", cell(shown, _COLOURS.get(shown, "white")),
                  str(step.attempt), step.host or "-", ago(step.started_at, now),
                  "-" if step.duration_ms is None else format_duration(step.duration_ms / 1000),
                  "-" if step.exit_code is None else str(step.exit_code), str(step.fence),
                  "")  # a step's usage is in its attempt's


def run_json(run: Run | None, now: datetime) -> dict[str, object] | None:
    return None if run is None else run.to_json(now)


def report_json(report: JobReport, now: datetime) -> dict[str, object]:
    s = report.summary
    name, host = job_host(s.job)
    return {
        "format": FORMAT_VERSION, "job": name, "scope": "fleet" if host is None else "host",
        "host": host,
        "schedule": s.schedule, "tz": s.tz,
        "last_run": run_json(s.last_run, now), "last_success_at": iso(s.last_success_at),
        "next_due_at": iso(report.next_due_at),
        "running": [dict(r.to_json(now), lease_left_s=r.lease_left(now)) for r in report.live],
        "missed": report.missed, "late": report.late, "counts": s.counts, "health": report.health,
        "why": report.why, "paused": report.pause is not None,
        "pause": None if report.pause is None else report.pause.to_json(),
        "alerts": [{"kind": a.alert.kind, "text": a.alert.text, "opened_at": iso(a.opened_at),
                    "key": a.alert.key} for a in report.alerts],
        "first_seen": iso(s.first_seen), "last_seen": iso(s.last_seen),
    }


def alerts_note(rep: JobReport) -> str:
    """``; alerted: late, failing``: the open alerts of cronwrap watch, after the why."""
    kinds = list(dict.fromkeys(a.alert.kind for a in rep.alerts))
    return f"; alerted: {', '.join(kinds)}" if kinds else ""


def ago(t: datetime | None, now: datetime) -> str:
    if t is None:
        return "-"
    delta = (now - t).total_seconds()
    return f"{format_duration(delta)} ago" if delta >= 0 else f"in {format_duration(-delta)}"


def duration_text(run: Run | None) -> str:
    if run is None or run.duration_ms is None:
        return "-"
    return format_duration(run.duration_ms / 1000)


_COLOURS: dict[str, str] = {  # by Run.status, the stored string
    Status.SUCCEEDED: "green", Status.WARNING: "yellow", Status.FAILED: "red",
    Status.TIMEOUT: "magenta",
    Status.KILLED: "red", Status.SKIPPED: "dim", Status.MISSED: "yellow",
    Status.RUNNING: "cyan", Status.ABANDONED: "yellow"}
_HEALTH = {OK: "green", WARNING: "yellow", CRITICAL: "bold red"}


def status_cell(run: Run, now: datetime) -> Cell:
    shown = run.shown_status(now)
    text = shown + (f" ({run.skip_reason})" if run.skip_reason else "")
    return cell(text, _COLOURS.get(shown, "white"))


def attempt_status_cell(attempt: RunAttempt) -> Cell:
    text = attempt.status + (f" ({attempt.reason})" if attempt.reason else "")
    return cell(text, _COLOURS.get(attempt.status, "white"))


def cell(value: object, style: str = "") -> Cell:
    """Text for a person from anything the ledger holds: control characters escaped
    (textsafe), in a ``table.Cell``, which is never read as markup: ``[red]`` or ``:smile:``
    in a job name or a host is shown as written."""
    return plain_cell(safe_text(value if type(value) is str else str(value)), style)


def _cells(*values: str | Cell) -> list[Cell]:
    return [cell(v) if isinstance(v, str) else v for v in values]


STATUS_COLUMNS = ["JOB", "LAST RUN", "STATUS", "EXIT", "DURATION", "LAST SUCCESS", "NEXT DUE",
                  "RUNNING", "HEALTH"]
RUN_COLUMNS = ["RUN", "SLOT", "TRIGGER", "STATUS", "ATTEMPT", "HOST", "STARTED", "DURATION",
               "EXIT", "FENCE", "CPU+SYS MEM"]


def render_status(reports: list[JobReport], now: datetime) -> None:
    screen = Screen.of_stdout()
    if not reports:
        _write(render_text("no jobs recorded yet: run one with cronwrap run -n NAME -- COMMAND",
                           screen))
        return
    rows = []
    for rep in reports:
        s, last = rep.summary, rep.summary.last_run
        running = ", ".join(f"{r.host}:{r.pid} lease {format_duration(r.lease_left(now))} "
                            f"fence {r.fence}" for r in rep.live) or "-"
        rows.append(_cells(
            shown_job(s.job), ago(last.started_at or last.scheduled_at, now) if last else "-",
            status_cell(last, now) if last else "-",
            "-" if last is None or last.exit_code is None else str(last.exit_code),
            duration_text(last), ago(s.last_success_at, now), ago(rep.next_due_at, now), running,
            Cell([(rep.health, _HEALTH[rep.health]),
                  (" " + safe_text(rep.why + alerts_note(rep)), "")]),
        ))
    _write(render_table(STATUS_COLUMNS, rows, screen))


def render_runs(runs: list[Run], now: datetime,
                attempts: dict[int, list[RunAttempt]] | None = None,
                steps: dict[int, list[Step]] | None = None) -> None:
    """The runs table; with ``attempts`` (``Ledger.attempts``), a slot's earlier attempts
    under its row, and the slot marked (``*`` after its attempt) when its job ran more than
    once."""
    rows = []
    ran_again = False
    for r in runs:
        earlier = (attempts or {}).get(r.run_id, [])[:-1]
        ran_again = ran_again or bool(earlier)
        rows.append(_cells(str(r.run_id), r.run_key, r.trigger, status_cell(r, now),
                           f"{r.attempt} *" if earlier else str(r.attempt), r.host or "-",
                           ago(r.started_at, now), duration_text(r),
                           "-" if r.exit_code is None else str(r.exit_code),
                           str(r.fence or "-"), usage_text(r)))
        rows += [_cells("", "", "", attempt_status_cell(a), str(a.attempt), a.host or "-",
                        ago(a.started_at, now),
                        "-" if a.duration_ms is None else format_duration(a.duration_ms / 1000),
                        "-" if a.exit_code is None else str(a.exit_code), str(a.fence or "-"),
                        usage_text(a))
                 for a in reversed(earlier)]
        rows += [step_cells(step, r, now) for step in (steps or {}).get(r.run_id, [])]
    screen = Screen.of_stdout()
    out = []
    if runs:
        from cronwrap.read.picture import history_picture

        picture = history_picture(runs, 60, now)
        out += [render_text(picture.plain(), screen, _offsets(picture)), "\n"]
    out.append(render_table(RUN_COLUMNS, rows, screen))
    if ran_again:
        out.append(render_text("* the job ran more than once for this slot: its earlier "
                               "attempts are listed under it (cronwrap logs NAME RUN --attempt "
                               "K prints one's output)", screen))
    last_bad = next((r for r in runs if r.status in BAD_STATUSES and r.error_tail), None)
    if last_bad is not None and last_bad.error_tail:
        heading = safe_text(f"last output of run {last_bad.run_id} ({last_bad.status}):")
        out += ["\n", render_text(heading, screen, style="bold"),
                render_text(safe_text(last_bad.error_tail.rstrip()[-1500:], lines=True), screen)]
    _write("".join(out))


def _offsets(picture: Picture) -> list[tuple[int, int, str]]:
    """The picture's style spans as offsets into ``picture.plain()``."""
    starts = [0]
    for line in picture.lines:
        starts.append(starts[-1] + len(line) + 1)
    return [(starts[line] + start, starts[line] + end, style)
            for line, start, end, style in picture.spans]


def _write(text: str) -> None:
    import sys

    sys.stdout.write(text)


def usual_p95(ledger: base.Ledger, reports: list[JobReport]) -> dict[str, float]:
    """The 95th percentile of recent successful durations, for jobs running now."""
    p95 = {}
    for rep in reports:
        if not rep.live:
            continue
        durations = sorted(r.duration_ms / 1000 for r in ledger.runs(rep.summary.job, 50)
                           if r.status == Status.SUCCEEDED and r.duration_ms is not None)
        if len(durations) >= 5:
            p95[rep.summary.job] = durations[min(len(durations) - 1, int(0.95 * len(durations)))]
    return p95


def render_explain(result: Explanation) -> None:
    screen = Screen.of_stdout()
    same = not result.cron or result.cron == result.expression
    head = f"{result.expression} in {result.tz}" + ("" if same else f" (= {result.cron})")
    out = [render_text(head, screen, [(0, len(result.expression), "bold")])]
    out += [render_text(f"  {t.isoformat()}  {t:%a}", screen) for t in result.next]
    out += [render_text(f"warning: {w}", screen, [(0, 8, "yellow")]) for w in result.warnings]
    _write("".join(out))


def since_of(now: datetime, seconds: float) -> datetime:
    return now - timedelta(seconds=seconds)
