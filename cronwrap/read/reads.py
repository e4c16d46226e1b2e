"""The read commands — ``status``, ``history``, ``logs``, ``explain`` — and what every
administrative command reads first: which ledger, the config file, the log directories.

No typer here: an operator's ``status`` is half of what cronwrap is used for, and typer's
parameter machinery alone cost more than the whole command may (bench/results.md, issue 15).
Their command line is declared in commands.py, which runs the functions below with one
keyword per parameter, its defaults included (through typer too, for what the lean parser
leaves to it). What ``status --json`` computes is ``report.job_reports`` and
``report.report_json``: one function per fact, for ``serve`` too.
"""

from __future__ import annotations

import os
import sys
from datetime import datetime, timezone

from cronwrap.errors import CHECK_UNKNOWN, CronwrapError, UsageError
from cronwrap.ledger.url import open_ledger
from cronwrap.model import job_host, shown_job
from cronwrap.options import config as files, spec
from cronwrap.paths import resolve_dirs
from cronwrap.record import TYPE_CHECKING
from cronwrap.stdio import write_utf8
from cronwrap.textsafe import safe_text

if TYPE_CHECKING:
    from typing import Any

    from cronwrap.ledger import base
    from cronwrap.model import JobInfo
    from cronwrap.model import RunTally
    from cronwrap.options.config import Config
    from cronwrap.read.report import JobReport
    from cronwrap.read.why import Story
    from cronwrap.schedule import Schedule

FORMATS = ("table", "json", "prometheus")


def now() -> datetime:
    return datetime.now(timezone.utc)


def job_name(name: str) -> str:
    return spec.job_name(name, "NAME")


def host_option(given: str | None) -> str | None:
    """--host of a read command, checked as run checks its own."""
    return None if given is None else spec.host_name(given, "--host")


def ledger(db: str | None, read_only: bool = False, upgrade: bool = False) -> base.Ledger:
    """The ledger the command names (``ledger_url``), opened. read_only: status, history and
    logs read a ledger on a read-only or full disk. upgrade: ``db init``, ``db upgrade``."""
    return open_ledger(ledger_url(db), resolve_dirs(os.environ), read_only=read_only,
                       upgrade=upgrade)


def ledger_url(db: str | None) -> str | None:
    """--db, else CRONWRAP_DB, else the config file's db, checked; None: the embedded one."""
    url, label = db, "--db"
    if not url and os.environ.get("CRONWRAP_DB"):
        url, label = os.environ["CRONWRAP_DB"], "CRONWRAP_DB"
    if not url:
        url, label = _config_db()
    return spec.ledger_url(url, label) if url else None


def config() -> Config | None:
    """The config file this host's jobs read, loaded (None when there is none)."""
    path = files.find_config(os.environ)
    return None if path is None else files.load_config(path)


def _config_db() -> tuple[str | None, str]:
    """The [defaults] db of the config file: the ledger the jobs on this host use."""
    loaded = config()
    value = loaded.defaults.get("db") if loaded else None
    if loaded is None or not value:
        return None, ""
    return str(value), loaded.where(None, "db")


def log_dirs(name: str) -> list[str]:
    """The log directories the operator configured here, where ``logs`` may read captured
    output: CRONWRAP_LOG_DIR, log-dir of the config file's [jobs.NAME] and [defaults], and
    the default. Never a path the ledger names: a shared ledger's writer chooses those."""
    option = spec.BY_LONG["log-dir"]
    env = os.environ.get(option.env)
    found = [spec.absolute_path(env, option.env)] if env else []
    loaded = config()
    if loaded is not None:
        for section, values in [(name, loaded.jobs.get(name, {})), (None, loaded.defaults)]:
            value = values.get("log-dir")
            if isinstance(value, str) and value:  # log-dir is no flag: never a bool
                found.append(spec.path(value, loaded.where(section, "log-dir")))
    return list(dict.fromkeys([*found, resolve_dirs(os.environ).logs]))


def this_host(name: str | None = None) -> str:
    """The host identity this host's runs of job ``name`` write (run's --host default):
    CRONWRAP_HOST, host in the config file's [jobs.NAME] or [defaults], the hostname."""
    option = spec.BY_LONG["host"]
    if os.environ.get(option.env):
        return spec.host_name(os.environ[option.env], option.env)
    loaded = config()
    if loaded is not None:
        for section, values in [(name, loaded.jobs.get(name or "", {})), (None, loaded.defaults)]:
            value = values.get("host")
            if isinstance(value, str) and value:
                return spec.host_name(value, loaded.where(section, "host"))
    return os.uname().nodename


def one_job(ledger: base.Ledger, name: str, host: str | None) -> str:
    """The ledger's job that a command reading one job means by NAME and --host: a fleet job
    itself, or one host's share of a host-scoped job (--host's, else this host's, else the
    only one). A NAME the ledger does not know comes back as it is, for the caller to say so."""
    found = ledger.jobs_named(name)
    shares = {h: job for job in found if (h := job_host(job)[1]) is not None}
    if host is not None:
        if host in shares:
            return shares[host]
        if name in found and not shares:
            raise UsageError(f"{name} is a fleet job (every host's runs are its own): --host picks "
                             "a host-scoped job's runs on one host; leave it out")
        if shares:
            raise UsageError(f"{name}: no runs on host {host!r} in this ledger (it ran on "
                             f"{_hosts(shares)})")
        return name
    mine = shares.get(this_host(name))
    if mine is not None:
        return mine
    if name in found or not shares:
        return name
    if len(shares) == 1:
        return next(iter(shares.values()))
    raise UsageError(f"{name} runs on each host (--scope host) and not on this one: give --host, "
                     f"one of {_hosts(shares)}")


def _hosts(shares: dict[str, str]) -> str:
    hosts = sorted(shares)
    return ", ".join(hosts[:10]) + (f" and {len(hosts) - 10} more" if len(hosts) > 10 else "")


def jobs_shown(ledger: base.Ledger, names: list[str], host: str | None) -> list[str] | None:
    """The ledger's jobs a command reading many means: every host's share of each NAME (and
    a fleet job NAME itself), only HOST's with --host; None: every job of the ledger."""
    if not names:
        return None
    jobs = [job for name in names for job in ledger.jobs_named(name) or [name]]
    return [job for job in jobs if job_host(job)[1] == host] if host is not None else jobs


# -- status ------------------------------------------------------------------------------------

def status(names: list[str] | None, since: str, as_json: bool, output_format: str,
           textfile: str | None, check: bool, max_age: str | None, warn_duration: str | None,
           host: str | None, db: str | None) -> int:
    try:
        return _status(names, since, as_json, output_format, textfile, check, max_age,
                       warn_duration, host, db)
    except CronwrapError as exc:
        if not check:
            raise
        write_utf8(f"CRONWRAP UNKNOWN - {exc}\n")  # a plugin that cannot tell says UNKNOWN
        return CHECK_UNKNOWN


def _status(names: list[str] | None, since: str, as_json: bool, output_format: str,
            textfile: str | None, check: bool, max_age: str | None, warn_duration: str | None,
            host: str | None, db: str | None) -> int:
    from cronwrap.read import report

    if output_format not in FORMATS:
        raise UsageError(f"--format: {output_format!r} is not one of table, json, prometheus")
    if as_json and output_format not in ("table", "json"):
        raise UsageError(f"--json and --format {output_format} ask for two formats: give one "
                         "(--json is --format json)")
    limits = [spec.window(v, o) if v else None for v, o in ((max_age, "--max-age"),
                                                       (warn_duration, "--warn-duration"))]
    names = [job_name(n) for n in names or []]
    host = host_option(host)
    taken = now()
    since_at = report.since_of(taken, spec.window(since, "--since"))
    opened = ledger(db, read_only=True)
    try:
        if len(names) == 1 and output_format == "table" and not (as_json or check or textfile):
            runs = opened.with_usage(opened.runs(one_job(opened, names[0], host), 60, since_at))
            report.render_runs(runs, taken, opened.attempts(runs, taken))
            return 0
        jobs = jobs_shown(opened, names, host)
        reports = report.job_reports(opened, since_at, jobs, taken)
        if host is not None and jobs is None:
            reports = [r for r in reports if job_host(r.summary.job)[1] == host]
        p95 = report.usual_p95(opened, reports) if check else {}
        metrics = textfile is not None or (output_format == "prometheus" and not check)
        tallies = opened.tallies(jobs) if metrics else {}
    finally:
        opened.close()
    return _show_status(reports, taken, "json" if as_json else output_format, textfile, check,
                        limits, p95, tallies)


def _show_status(reports: list[JobReport], taken: datetime, output_format: str,
                 textfile: str | None, check: bool, limits: list[float | None],
                 p95: dict[str, float], tallies: dict[str, RunTally]) -> int:
    from cronwrap.read import report

    if textfile or check or output_format == "prometheus":
        from cronwrap.read import monitoring as monitor

        if textfile:
            monitor.write_textfile(textfile, monitor.prometheus(reports, taken, tallies))
        if check:
            result = monitor.check(reports, taken, limits[0], limits[1], p95)
            write_utf8(result.text + "\n")
            return result.exit_code
        if output_format == "prometheus":
            write_utf8(monitor.prometheus(reports, taken, tallies))
            return 0
    if output_format == "json":
        sys.stdout.write(_json([report.report_json(r, taken) for r in reports]) + "\n")
    elif not textfile:
        report.render_status(reports, taken)
    return 0


def _json(value: object) -> str:
    """An array one element a line (status's jobs, history's runs): json's C encoder, where
    ``indent`` takes its pure-Python one, 3x slower (~130 ms more for 5,000 jobs)."""
    import json

    if isinstance(value, list):
        return "[\n" + ",\n".join(f"  {json.dumps(item)}" for item in value) + "\n]" if value else "[]"
    return json.dumps(value, indent=2)


# -- history, logs, explain --------------------------------------------------------------------

def history(name: str, limit: int, as_json: bool, host: str | None, db: str | None) -> int:
    from cronwrap.read import report

    name = job_name(name)
    host = host_option(host)
    taken = now()
    opened = ledger(db, read_only=True)
    try:
        name = one_job(opened, name, host)
        runs = opened.with_usage(opened.runs(name, limit))
        if not runs and opened.job_info(name) is None:
            raise UsageError(f"{name}: no such job in this ledger (check the name with "
                             "cronwrap status)")
        attempts = opened.attempts(runs, taken)
        steps = opened.steps(runs)
    finally:
        opened.close()
    if as_json:
        sys.stdout.write(_json([report.history_json(r, attempts[r.run_id], taken,
                                                    steps[r.run_id]) for r in runs]) + "\n")
    else:
        report.render_runs(runs, taken, attempts, steps)
    return 0


def logs(name: str, run_id: int | None, last: bool, attempt: int | None, follow: bool,
         raw: bool, timestamps: bool, host: str | None, db: str | None) -> int:
    """``last`` (--last) is what no RUN_ID means anyway."""
    from cronwrap.read import logs as logview

    name = job_name(name)
    host = host_option(host)
    dirs = log_dirs(name)
    opened = ledger(db, read_only=True)
    try:
        return logview.show(opened, one_job(opened, name, host), run_id, follow, dirs,
                            escape=not raw and sys.stdout.isatty(), attempt=attempt,
                            timestamps=timestamps)
    finally:
        opened.close()


def explain(expression: str, tz: str | None, count: int, start: str | None,
            as_json: bool) -> int:
    from cronwrap import schedule as sched
    from cronwrap.read import report

    host = sched.system_zone_name()
    zone, zone_name = sched.resolve_zone(tz, os.environ, host)
    begin = sched.parse_timestamp(start, zone, "--from") if start else now()
    result = sched.explain(expression, zone, zone_name, host, begin, count)
    if as_json:
        sys.stdout.write(_json(result.to_json()) + "\n")
    else:
        report.render_explain(result)
    return 0



# -- why ---------------------------------------------------------------------------------------

def why(name: str, at: str | None, as_json: bool, host: str | None, db: str | None) -> int:
    """The story of one slot (read/why.py). Reads only: never a write to the ledger."""
    name = job_name(name)
    host = host_option(host)
    taken = now()
    opened = ledger(db, read_only=True)
    try:
        told = why_story(opened, one_job(opened, name, host), at, taken, log_dirs(name))
    finally:
        opened.close()
    if as_json:
        sys.stdout.write(_json(told.to_json()) + "\n")
    else:
        write_utf8(safe_text(told.text, lines=True))  # a shared ledger's words are anyone's
    return 0


def why_story(opened: base.Ledger, job: str, at: str | None, taken: datetime,
              dirs: list[str]) -> Story:
    """``why``'s story of ledger job ``job``'s slot ``at`` (None: the next), for ``why`` and
    ``serve``: the ledger's row and attempts of the slot, its pauses, the job's first and
    newest slots, this host's run log (in ``dirs``, ``log_dirs``'s). UsageError: no such job, no schedule, a bad WHEN."""
    from cronwrap.read import why as story

    schedule, template, notes = _schedule_of(job, opened.job_info(job))
    asked = story.question(schedule, at, taken)
    row, attempts = None, []
    if asked.slot is not None:
        from cronwrap.schedule import run_key

        row = opened.run_by_key(job, run_key(asked.slot, template))
        attempts = opened.attempts([row], taken)[row.run_id] if row is not None else []
    pauses = opened.pauses()
    summary = next(iter(opened.summaries(taken, [job])), None)
    facts = story.Facts(job, schedule, template, row, attempts, pauses,
                        summary.first_seen if summary else None,
                        summary.last_slot if summary else None,
                        _slot_events(job, asked.slot, template, dirs),
                        this_host(job_host(job)[0]), notes)
    return story.tell(asked, facts, taken)


def _schedule_of(job: str, info: JobInfo | None) -> tuple[Schedule, str | None, list[str]]:
    """The job's schedule, zone and key as its firings recorded them in the ledger, else as
    this host's config file gives them ([jobs.NAME]); a one-line error without either."""
    from cronwrap import schedule as sched

    name = job_host(job)[0]
    loaded = config()
    section = loaded.jobs.get(name, {}) if loaded is not None else {}
    expr, tz, key, notes = None, None, None, []
    if info is not None and info.schedule:
        expr, tz, key = info.schedule, info.tz, info.key_template
        given = section.get("schedule")
        if isinstance(given, str) and given and (given, section.get("tz") or tz) != (expr, tz):
            notes.append(f"(the config file here gives {given!r}"
                         f"{' in ' + str(section['tz']) if section.get('tz') else ''}; the "
                         "ledger's, from the job's last firing, is the one told)")
    elif isinstance(section.get("schedule"), str) and section["schedule"]:
        given_tz, given_key = section.get("tz"), section.get("key")
        expr = str(section["schedule"])
        tz = given_tz if isinstance(given_tz, str) else None
        key = given_key if isinstance(given_key, str) else None
        notes.append("(the ledger has no schedule for it yet: the config file's is told)")
    if expr is None:
        if info is None:
            raise UsageError(f"{shown_job(job)}: no such job in this ledger (check the name "
                             "with cronwrap status)")
        raise UsageError(f"{shown_job(job)}: no schedule is recorded for it (cron has not run "
                         "it with --schedule yet): why tells the slots of a schedule")
    zone = sched.load_zone(str(tz) if tz else "UTC")
    return sched.Schedule.parse(str(expr), zone, str(tz) if tz else "UTC"), \
        str(key) if key else None, notes


def _slot_events(job: str, slot: datetime | None, template: str | None,
                 dirs: list[str]) -> list[dict[str, Any]]:
    """This host's run-log lines about the slot, from ``dirs`` (those ``logs`` reads)."""
    if slot is None:
        return []
    from cronwrap.read import why as story
    from cronwrap.run.runlog import read_events
    from cronwrap.schedule import run_key

    name, host = job_host(job)
    found: list[dict[str, Any]] = []
    for directory in dirs:
        try:
            found += story.slot_events(read_events(directory), name, host,
                                       run_key(slot, template), slot)
        except (OSError, ValueError):
            continue
    return sorted(found, key=lambda e: str(e.get("ts")))
