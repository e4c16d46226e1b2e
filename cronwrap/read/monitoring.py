"""Monitoring renderers over ``report.JobReport``: Nagios/Icinga check, Prometheus text, the
node_exporter textfile, and the history picture of ``status NAME``.

Data first, rendering second: every function takes the reports (or runs) and ``now`` and
returns text or plain data. The check's line shows job
names and reasons with control characters escaped (textsafe); Prometheus label values stay
exact, escaped only as the exposition format says, like ``--json``.
"""

from __future__ import annotations

import os
import stat
from datetime import datetime
from functools import lru_cache
from pathlib import Path

from cronwrap.errors import (CHECK_CRITICAL, CHECK_OK, CHECK_UNKNOWN, CHECK_WARNING, PathError)
from cronwrap.model import DURATION_BUCKETS, FINAL_STATUSES, RunTally, Status, job_host, shown_job
from cronwrap.options.durations import format_duration
from cronwrap.read.report import CRITICAL, OK, WARNING
from cronwrap.record import TYPE_CHECKING, Record
from cronwrap.textsafe import safe_text

if TYPE_CHECKING:
    from cronwrap.model import Run
    from cronwrap.read.report import JobReport

STATE_WORDS = {CHECK_OK: "OK", CHECK_WARNING: "WARNING", CHECK_CRITICAL: "CRITICAL",
               CHECK_UNKNOWN: "UNKNOWN"}
HEALTH_STATES = {OK: CHECK_OK, WARNING: CHECK_WARNING, CRITICAL: CHECK_CRITICAL}
CRITICAL_LAST = (Status.FAILED, Status.TIMEOUT, Status.KILLED, Status.MISSED)
MAX_REASONS = 5  # jobs named in the summary line; the rest are counted
TEXTFILE_MODE = 0o644  # node_exporter, often another user, must read it


# -- Nagios / Icinga ---------------------------------------------------------------------------

class CheckResult(Record):
    """exit_code: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN; text: the plugin's one line."""

    exit_code: int
    text: str


class Verdict(Record):
    """One job's state (a CHECK_* value) and why, in a few words per reason."""

    job: str
    state: int
    reasons: list[str]


def check(reports: list[JobReport], now: datetime, max_age: float | None = None,
          warn_duration: float | None = None,
          usual_p95: dict[str, float] | None = None) -> CheckResult:
    """``status --check``: CRITICAL on a failed, timed-out, killed or missed last run, late
    slots (passed with no firing), or no success within ``max_age`` seconds; WARNING on a live run longer than
    ``warn_duration`` or than its job's ``usual_p95[job]`` seconds, or on what ``assess``
    calls a warning (an abandoned run); UNKNOWN when ``reports`` is empty. A paused job is
    OK, named in the line with its pause after the others."""
    if not reports:
        return CheckResult(CHECK_UNKNOWN, "CRONWRAP UNKNOWN - no jobs match (none recorded "
                                          "yet, or a misspelt name)")
    p95 = usual_p95 or {}
    verdicts = [verdict(r, now, max_age, warn_duration, p95.get(r.summary.job)) for r in reports]
    worst = max(v.state for v in verdicts)
    perf = " ".join(item for r in reports for item in perfdata(r, now, max_age, warn_duration))
    text = f"CRONWRAP {STATE_WORDS[worst]} - {_tally(verdicts)}"
    reasons = [safe_text(f"{v.job} {', '.join(v.reasons)}").replace("|", "/")  # '|': perfdata
               for state in (CHECK_CRITICAL, CHECK_WARNING, CHECK_OK) for v in verdicts
               if v.state == state and v.reasons]
    if reasons:
        more = len(reasons) - MAX_REASONS
        text += ": " + "; ".join(reasons[:MAX_REASONS]) + (f"; and {more} more" if more > 0 else "")
    return CheckResult(worst, f"{text} | {perf}" if perf else text)


def _tally(verdicts: list[Verdict]) -> str:
    counts = [(sum(v.state == s for v in verdicts), STATE_WORDS[s].lower())
              for s in (CHECK_CRITICAL, CHECK_WARNING, CHECK_OK)]
    return ", ".join(f"{n} {word}" for n, word in counts if n) or "0 ok"


def verdict(report: JobReport, now: datetime, max_age: float | None,
            warn_duration: float | None, usual_p95: float | None) -> Verdict:
    """One job's check state; reasons are worded to follow the job name. A paused job is OK,
    and says so ("paused until …"), whatever its last run or its age."""
    if report.pause is not None:
        return Verdict(report.summary.job, CHECK_OK, [report.pause.describe()])
    critical = _critical_reasons(report, now, max_age)
    warnings = _warning_reasons(report, now, warn_duration, usual_p95)
    floor = HEALTH_STATES.get(report.health, CHECK_OK)  # whatever assess knows that we do not
    job = shown_job(report.summary.job)
    if critical or floor == CHECK_CRITICAL:
        return Verdict(job, CHECK_CRITICAL, critical or [report.why])
    if warnings or floor == CHECK_WARNING:
        return Verdict(job, CHECK_WARNING, warnings or [report.why])
    return Verdict(job, CHECK_OK, [])


def _critical_reasons(report: JobReport, now: datetime, max_age: float | None) -> list[str]:
    s, reasons = report.summary, []
    last = s.last_run
    shown = last.shown_status(now) if last else None
    if last is not None and shown in CRITICAL_LAST:
        detail = ", ".join(d for d in (last.skip_reason, None if last.exit_code is None
                                       else f"exit {last.exit_code}") if d)
        reasons.append(shown + (f" ({detail})" if detail else ""))
    if report.late > 0:  # slots missed earlier but followed by a good run are perfdata only
        reasons.append(f"late {report.late} slot{'s' if report.late != 1 else ''}")
    if max_age is not None:
        if s.last_success_at is not None:
            age = (now - s.last_success_at).total_seconds()
            if age > max_age:
                reasons.append(f"no success for {format_duration(age)} "
                               f"(max age {format_duration(max_age)})")
        elif s.first_seen is None or (now - s.first_seen).total_seconds() > max_age:
            reasons.append(f"no success recorded (max age {format_duration(max_age)})")
    return reasons


def _warning_reasons(report: JobReport, now: datetime, warn_duration: float | None,
                     usual_p95: float | None) -> list[str]:
    reasons = []
    for run in report.live:
        elapsed = _elapsed(run, now)
        if elapsed is None:
            continue
        if warn_duration and elapsed > warn_duration:
            reasons.append(f"running for {format_duration(elapsed)} "
                           f"(warn at {format_duration(warn_duration)})")
        elif usual_p95 and elapsed > usual_p95:
            reasons.append(f"running for {format_duration(elapsed)}, past its usual "
                           f"p95 of {format_duration(usual_p95)}")
    return reasons


def _elapsed(run: Run, now: datetime) -> float | None:
    return None if run.started_at is None else (now - run.started_at).total_seconds()


def perfdata(report: JobReport, now: datetime, max_age: float | None,
             warn_duration: float | None) -> list[str]:
    """Nagios perfdata, ``'label'=value[UOM];[warn];[crit];[min];[max]``: the job's duration
    (of its live run, else of its last run), missed slots, and seconds since its last success."""
    s, items, job = report.summary, [], shown_job(report.summary.job)
    live = [e for e in (_elapsed(r, now) for r in report.live) if e is not None]
    last = s.last_run
    duration = max(live) if live else (
        last.duration_ms / 1000 if last is not None and last.duration_ms is not None else None)
    if duration is not None:
        items.append(_perf(f"{job}_duration", duration, "s", warn_duration, None))
    items.append(_perf(f"{job}_missed", report.missed, "", None, None))  # a count, not a state
    if s.last_success_at is not None:
        age = max((now - s.last_success_at).total_seconds(), 0.0)
        items.append(_perf(f"{job}_since_success", age, "s", None, max_age))
    return items


def _perf(label: str, value: float, uom: str, warn: float | None, crit: float | None) -> str:
    def num(x: float | None) -> str:
        return "" if x is None else f"{x:.3f}".rstrip("0").rstrip(".")

    quoted = safe_text(label).replace("'", "''")
    return f"'{quoted}'={num(value)}{uom};{num(warn)};{num(crit)};0;"


# -- Prometheus --------------------------------------------------------------------------------

RUN_STATUSES = (Status.RUNNING, *FINAL_STATUSES)
LABEL = "cronjob"  # kube-state-metrics' label for a CronJob's name
GAUGE, COUNTER, HISTOGRAM = "gauge", "counter", "histogram"
RUNS_TOTAL = "cronwrap_runs_total"
DURATION_HISTOGRAM = "cronwrap_run_duration_seconds"
FAMILIES = (
    ("cronwrap_last_run_timestamp_seconds", GAUGE,
     "Start of the job's latest run (its slot time if it never started), Unix time."),
    ("cronwrap_last_success_timestamp_seconds", GAUGE,
     "End of the job's latest successful run, Unix time."),
    ("cronwrap_last_run_duration_seconds", GAUGE, "Duration of the job's latest finished run."),
    ("cronwrap_last_run_exit_code", GAUGE, "Exit status of the job's latest run that has one."),
    ("cronwrap_last_run_cpu_seconds", GAUGE, "CPU time of the job's latest finished run, its "
     "whole process tree, by mode (user, system)."),
    ("cronwrap_last_run_max_rss_bytes", GAUGE, "Peak resident memory of the largest process of "
     "the job's latest finished run."),
    ("cronwrap_last_run_status", GAUGE, "1 for the status of the job's latest run."),
    ("cronwrap_runs_in_window", GAUGE, "Runs of the job in the report window, by status."),
    ("cronwrap_missed_slots", GAUGE, "Slots of the job without a run in the report window."),
    ("cronwrap_running", GAUGE, "Runs of the job holding a live lease."),
    ("cronwrap_next_due_timestamp_seconds", GAUGE, "The job's next scheduled slot, Unix time."),
    ("cronwrap_health", GAUGE,
     "Health of the job as status shows it: 0 ok, 1 warning, 2 critical."),
    ("cronwrap_paused", GAUGE, "1 while the job is paused (cronwrap pause): its firings are "
                               "skipped; else 0."),
    (RUNS_TOTAL, COUNTER, "Ends the ledger has recorded for the job, by status: each finished "
                          "attempt, skip and missed slot."),
    (DURATION_HISTOGRAM, HISTOGRAM, "Durations of the job's finished attempts."),
)


def prometheus(reports: list[JobReport], now: datetime,
               tallies: dict[str, RunTally] | None = None) -> str:
    """Prometheus text exposition (version 0.0.4): gauges from the reports, one series per
    job, and the counters and duration histogram of ``tallies`` (``Ledger.tallies``) for the
    same jobs (all at 0 for a job the ledger has counted nothing of)."""
    samples: dict[str, list[str]] = {name: [] for name, _, _ in FAMILIES}
    for report in reports:
        tally = (tallies or {}).get(report.summary.job)
        for name, labels, value in [*job_samples(report, now), *tally_samples(report, tally)]:
            family = name.removesuffix("_bucket").removesuffix("_sum").removesuffix("_count") \
                if name.startswith(DURATION_HISTOGRAM) else name
            samples[family].append(f"{name}{{{_labels(labels)}}} {_number(value)}")
    out = []
    for name, kind, help_text in FAMILIES:
        if samples[name]:
            out += [f"# HELP {name} {_escape_help(help_text)}", f"# TYPE {name} {kind}",
                    *samples[name]]
    return "\n".join(out) + "\n" if out else ""


def tally_samples(report: JobReport,
                  tally: RunTally | None) -> list[tuple[str, dict[str, str], float]]:
    """The counters of one job: its ends by status (every status, 0 when none yet, so that
    a first failure is an increase), and the histogram of its durations, cumulative by
    ``le`` as Prometheus has it."""
    series = series_labels(report)
    tally = tally or RunTally(report.summary.job, {}, 0, 0, {})
    out: list[tuple[str, dict[str, str], float]] = []
    for status in (*FINAL_STATUSES, *sorted(set(tally.ends) - set(FINAL_STATUSES))):
        out.append((RUNS_TOTAL, {**series, "status": status}, tally.ends.get(status, 0)))
    for bound in DURATION_BUCKETS:
        below = sum(n for le_ms, n in tally.buckets.items() if le_ms <= bound * 1000)
        out.append((f"{DURATION_HISTOGRAM}_bucket", {**series, "le": repr(bound)}, below))
    out.append((f"{DURATION_HISTOGRAM}_bucket", {**series, "le": "+Inf"}, tally.timed))
    out.append((f"{DURATION_HISTOGRAM}_sum", series, tally.duration_ms / 1000))
    out.append((f"{DURATION_HISTOGRAM}_count", series, tally.timed))
    return out


def job_samples(report: JobReport, now: datetime) -> list[tuple[str, dict[str, str], float]]:
    """(metric name, labels, value) for one job; a value that is unknown is left out."""
    s, job = report.summary, series_labels(report)
    last = s.last_run
    out: list[tuple[str, dict[str, str], float]] = []
    if last is not None:
        started = last.started_at or last.scheduled_at
        if started is not None:
            out.append(("cronwrap_last_run_timestamp_seconds", job, started.timestamp()))
        if last.duration_ms is not None and last.status != Status.RUNNING:
            out.append(("cronwrap_last_run_duration_seconds", job, last.duration_ms / 1000))
        if last.exit_code is not None:
            out.append(("cronwrap_last_run_exit_code", job, last.exit_code))
        if last.cpu_user_ms is not None:
            out.append(("cronwrap_last_run_cpu_seconds", {**job, "mode": "user"},
                        last.cpu_user_ms / 1000))
            out.append(("cronwrap_last_run_cpu_seconds", {**job, "mode": "system"},
                        (last.cpu_system_ms or 0) / 1000))
        if last.max_rss_kb is not None:
            out.append(("cronwrap_last_run_max_rss_bytes", job, last.max_rss_kb * 1024))
        out.append(("cronwrap_last_run_status", {**job, "status": last.shown_status(now)}, 1))
    if s.last_success_at is not None:
        out.append(("cronwrap_last_success_timestamp_seconds", job, s.last_success_at.timestamp()))
    counts = s.counts or {}
    for status in (*RUN_STATUSES, *sorted(set(counts) - set(RUN_STATUSES))):
        out.append(("cronwrap_runs_in_window", {**job, "status": status}, counts.get(status, 0)))
    out.append(("cronwrap_missed_slots", job, report.missed))
    out.append(("cronwrap_running", job, len(report.live)))
    if report.next_due_at is not None:
        out.append(("cronwrap_next_due_timestamp_seconds", job, report.next_due_at.timestamp()))
    out.append(("cronwrap_health", job, HEALTH_STATES.get(report.health, CHECK_CRITICAL)))
    out.append(("cronwrap_paused", job, int(report.pause is not None)))
    return out


def series_labels(report: JobReport) -> dict[str, str]:
    """The labels naming a job's series: ``cronjob``, never ``job``, which Prometheus keeps
    for the scrape target's own (a scraped ``job`` label becomes ``exported_job``); and
    ``host`` for a host-scoped job, whose series are one per host."""
    name, host = job_host(report.summary.job)
    return {LABEL: name} if host is None else {LABEL: name, "host": host}


def _labels(labels: dict[str, str]) -> str:
    return ",".join([f'{k}="{_escape_label(str(v))}"' for k, v in labels.items()])


@lru_cache(maxsize=4096)
def _escape_label(value: str) -> str:
    """Cached: a job's name is in each of its ~40 series (``serve`` draws /metrics each
    second under load)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _number(value: float) -> str:
    if isinstance(value, bool) or isinstance(value, int):
        return str(int(value))
    return repr(float(value))


def write_textfile(path: Path | str, text: str) -> None:
    """Replace ``path`` atomically with ``text``, mode 0644, for node_exporter's textfile
    collector: a temporary file in the same directory (named ``.NAME.*.tmp``, which the
    collector ignores), fsync, rename. A symlink at ``path`` is refused. Raises PathError."""
    path = Path(path)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise PathError(f"--textfile {path}: {exc.strerror}") from None
    if info is not None and stat.S_ISLNK(info.st_mode):
        raise PathError(f"--textfile {path} is a symlink; cronwrap refuses to replace it: "
                        "give the real path")
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise PathError(f"--textfile {path} is not a regular file")
    _atomic_write(path, text.encode("utf-8"))


def _atomic_write(path: Path, data: bytes) -> None:
    import tempfile

    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise PathError(f"--textfile {path}: cannot create a file in {path.parent}: "
                        f"{exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), TEXTFILE_MODE)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise PathError(f"--textfile {path}: {exc.strerror}") from None
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse fsync on a directory; the rename is done
    finally:
        os.close(fd)
