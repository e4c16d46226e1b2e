"""The administrative commands (typer). Each is a few lines that call report/runner code."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import List, Optional

import typer

# typer 0.29 vendors click (pinned in pyproject.toml: its exception classes moved between releases)
from typer._click.exceptions import ClickException, NoArgsIsHelpError

from cronwrap.errors import EXIT_CRONWRAP, UsageError
from cronwrap.stdio import warn, write_utf8
# What every command reads first (ledger, config file, log directories) lives in reads.py, where
# the read commands run without typer.
from cronwrap.reads import config as _config, ledger as _ledger, ledger_url as _ledger_url
from cronwrap.reads import log_dirs as _log_dirs, now as _now

cli = typer.Typer(
    add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
    pretty_exceptions_show_locals=False, rich_markup_mode=None,
    help="Make crontab jobs trustworthy: no overlaps, hard timeouts, one run per slot, a ledger.",
)

DB_HELP = "Ledger URL (default: CRONWRAP_DB, then the embedded SQLite ledger)."
SINCE_HELP = "Window for counts and history, a duration (e.g. 7d, 12h)."


def app(args: list[str]) -> int:
    try:
        result = cli(args, standalone_mode=False, prog_name="cronwrap")
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        return 130
    except NoArgsIsHelpError as exc:
        sys.stdout.write(exc.format_message() + "\n")
        return 0
    except ClickException as exc:
        sys.stderr.write(f"cronwrap: {exc.format_message()} (see cronwrap --help)\n")
        return EXIT_CRONWRAP
    return result if isinstance(result, int) else 0


def _name(name: str) -> str:
    from cronwrap.spec import job_name

    return job_name(name, "NAME")


@cli.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                               "help_option_names": []})
def run(ctx: typer.Context) -> int:
    """Run a job: lock, claim its slot, supervise, record (see: cronwrap run --help)."""
    from cronwrap.runargs import run_command

    return run_command(list(ctx.args))


@cli.command()
def status(
    names: List[str] = typer.Argument(None, help="Jobs to show (default: all); one NAME shows its runs."),
    since: str = typer.Option("7d", help=SINCE_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON array of jobs."),
    output_format: str = typer.Option("table", "--format", help="table, json or prometheus (text exposition format)."),
    textfile: Optional[str] = typer.Option(None, "--textfile", help="Write the Prometheus metrics to this file atomically (node_exporter textfile collector)."),
    check: bool = typer.Option(False, "--check", help="Nagios/Icinga plugin: one line plus perfdata; exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN."),
    max_age: Optional[str] = typer.Option(None, "--max-age", help="With --check: CRITICAL when a job has not succeeded for this long."),
    warn_duration: Optional[str] = typer.Option(None, "--warn-duration", help="With --check: WARNING when a run has been running longer than this."),
    db: Optional[str] = typer.Option(None, help=DB_HELP),
) -> int:
    """One row per job: last run, status, duration, last success, next due, running runs, health."""
    from cronwrap import reads

    return reads.status(names, since, as_json, output_format, textfile, check, max_age,
                        warn_duration, db)


@cli.command()
def history(
    name: str = typer.Argument(..., help="Job name."),
    limit: int = typer.Option(20, min=1, max=100000, help="At most this many runs."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON array of runs, newest first."),
    db: Optional[str] = typer.Option(None, help=DB_HELP),
) -> int:
    """The runs of one job, newest first."""
    from cronwrap import reads

    return reads.history(name, limit, as_json, db)


@cli.command()
def logs(
    name: str = typer.Argument(..., help="Job name."),
    run_id: Optional[int] = typer.Argument(None, min=1, max=2**62, help="Run id (default: the last run)."),
    last: bool = typer.Option(False, "--last", help="The last run (the default)."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing while the run is running; stop when it ends or is abandoned (its lease expired)."),
    raw: bool = typer.Option(False, "--raw", help="Copy the output byte for byte to a terminal too (there, control characters are otherwise shown escaped, e.g. \\x1b; piped output is always exact)."),
    db: Optional[str] = typer.Option(None, help=DB_HELP),
) -> int:
    """Print the captured output of a run, read only from this host's log directories (CRONWRAP_LOG_DIR, log-dir in the config file, the default): never from a path the ledger names, never through a symlink."""
    from cronwrap import reads

    return reads.logs(name, run_id, follow, raw, db)


@cli.command()
def unlock(
    name: str = typer.Argument(..., help="Job name."),
    lock_file: Optional[str] = typer.Option(None, "--lock-file", help="The job's lock file, when its crontab line gives --lock-file (default: CRONWRAP_LOCK_FILE, lock-file in the config file, else NAME.lock in cronwrap's lock directory)."),
    db: Optional[str] = typer.Option(None, help=DB_HELP),
) -> int:
    """Expire the leases of a job's running runs, for an operator who knows the holder is dead; and tell who holds the job's local lock on this host (wrapper and job PIDs, alive or gone). A lock a live process holds is never broken; a PID lock whose holder is gone is released (its holder record is removed)."""
    from cronwrap import locks
    from cronwrap.textsafe import safe_text

    name = _name(name)
    path, lock_dir = _lock_file(name, lock_file)  # a bad path stops unlock before any change
    ledger = _ledger(db)
    try:
        released = ledger.unlock(name)
    finally:
        ledger.close()
    for r in released:
        print(safe_text(f"released run {r.run_id} ({r.run_key}) held by {r.host} pid {r.pid}, "
                        f"fence {r.fence}"))
    if not released:
        print(f"{name}: no running run holds a lease")
    state = locks.inspect(path, lock_dir)
    removed = locks.release_stale(path, lock_dir) if state.stale else None
    print(safe_text(_lock_line(name, state, removed)))
    return 0


def _lock_file(name: str, given: Optional[str]) -> tuple[Path, Path]:
    """The job's lock file as its firings on this host find it (--lock-file,
    CRONWRAP_LOCK_FILE, lock-file in the config file, else the default), and the lock
    directory that keeps its holder record."""
    from cronwrap import config, locks, spec
    from cronwrap.paths import resolve_dirs

    lock_dir = resolve_dirs(os.environ).locks
    merged = config.merge({} if given is None else {"lock-file": given}, os.environ, _config(),
                          name)
    value = merged.values.get("lock-file")
    if value is None:
        return locks.default_lock_file(lock_dir, name), lock_dir
    return spec.path(value, merged.label("lock-file")), lock_dir


def _lock_line(name: str, state, removed) -> str:
    """One line about the job's local lock (``state``: locks.LockState; ``removed``: the
    holder whose stale record unlock removed, or None)."""
    where = f"{name}: lock {state.path}"
    if not state.exists:
        return f"{name}: no lock file {state.path} on this host"
    if state.problem:
        return f"{name}: lock not inspected: {state.problem}"
    if removed is not None:
        return (f"{where} is free: its last holder ({_pids(removed)}) is gone; removed its "
                "holder record (for a PID lock, that releases it)")
    if state.held:
        return f"{where} is held (flock) by {_holder(state)}; left alone: a live process holds it"
    if state.live:
        return f"{where} is held (PID lock) by {_holder(state)}; left alone: its holder lives"
    return f"{where} is free"


def _pids(holder) -> str:
    return f"wrapper pid {holder.pid}" + (f", job pid {holder.job_pid}" if holder.job_pid else "")


def _holder(state) -> str:
    """Who the holder record names, each process alive or gone."""
    holder = state.holder
    if holder is None:
        return "a process cronwrap has no record of"
    shown = {True: "alive", False: "gone", None: "cannot be checked here: another PID namespace"}
    job = f"job pid {holder.job_pid} ({shown[state.job_alive]})" if holder.job_pid \
        else "no job started yet"
    return f"wrapper pid {holder.pid} ({shown[state.wrapper_alive]}), {job}"


@cli.command()
def explain(
    expression: str = typer.Argument(..., help="A cron expression (5 fields or @daily etc.), quoted."),
    tz: Optional[str] = typer.Option(None, "--tz", help="Zone of the expression (default: CRON_TZ, TZ, the system zone)."),
    count: int = typer.Option(5, "--count", min=0, max=1000, help="How many fire times to show."),
    start: Optional[str] = typer.Option(None, "--from", help="Start after this time (ISO 8601; default: now)."),
    as_json: bool = typer.Option(False, "--json", help='Print {"expression", "tz", "next", "warnings"}.'),
) -> int:
    """The next fire times of a schedule, and what a person should know about it."""
    from cronwrap import reads

    return reads.explain(expression, tz, count, start, as_json)


# A crontab is a few KiB; 1 MiB (as for --env-file) is some 15,000 lines, read and linted in
# seconds. Anything larger is not a crontab: /dev/zero, an endless pipe, the wrong file.
CRONTAB_MAX = 1 << 20


def _read_crontab(file: str) -> tuple[str, str]:
    """The text of FILE (``-``: standard input) and the name to show for it: at most
    CRONTAB_MAX bytes of UTF-8 are read, so /dev/zero or an endless pipe is refused, not read
    until memory runs out."""
    name = "<stdin>" if file == "-" else file
    try:
        if file == "-":
            data = sys.stdin.buffer.read(CRONTAB_MAX + 1)
        else:
            with open(file, "rb") as f:
                data = f.read(CRONTAB_MAX + 1)
        if len(data) > CRONTAB_MAX:
            raise UsageError(f"{name}: more than {CRONTAB_MAX >> 20} MiB, which no crontab is: "
                             "give the crontab file itself (cronwrap reads at most "
                             f"{CRONTAB_MAX >> 20} MiB)")
        return data.decode("utf-8"), name
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise UsageError(f"{name}: {reason}") from None


def _is_system(file: str, system: Optional[bool]) -> bool:
    from cronwrap import crontab

    return crontab.is_system_crontab(os.path.abspath(file)) if system is None else system


def _cronwrap_path(given: Optional[str]) -> str:
    import shutil

    if given:
        return given
    found = shutil.which("cronwrap")
    return os.path.abspath(found) if found else "/usr/local/bin/cronwrap"


SYSTEM_HELP = "The file has a user field (/etc/crontab, /etc/cron.d/*); default: from its path."


@cli.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def wrap(
    ctx: typer.Context,
    file: str = typer.Argument("-", help="Crontab file, or - for standard input."),
    show_diff: bool = typer.Option(False, "--diff", help="Print a unified diff instead of the new crontab."),
    undo: bool = typer.Option(False, "--unwrap", help="Restore the lines wrap wrote to their original text."),
    cronwrap_path: Optional[str] = typer.Option(None, "--cronwrap", help="Path of cronwrap in the lines (default: this one's)."),
    system: Optional[bool] = typer.Option(None, "--system/--user", help=SYSTEM_HELP),
) -> int:
    """Print a crontab with every job prefixed by cronwrap run (options after -- are added to each)."""
    from cronwrap import crontab
    from cronwrap.runargs import parse_run_args

    extra = list(ctx.args)
    if extra:
        from cronwrap.spec import build_spec

        given, rest = parse_run_args(extra)  # the same checks as run: a bad option is 125 here
        if given is None or rest:
            raise UsageError(f"wrap: after -- give only run options (got {' '.join(rest)!r})")
        build_spec(["true"], given, {}, lambda: "host", warn=warn)  # validates each value
    text, name = _read_crontab(file)
    is_system = _is_system(file, system)
    if undo:
        result = crontab.unwrap(text, system=is_system)
    else:
        result = crontab.wrap(text, cronwrap=_cronwrap_path(cronwrap_path), extra_args=extra,
                              system=is_system)
    shown = name.lstrip("/")  # diff headers read a/etc/crontab, not a//etc/crontab
    write_utf8(crontab.diff(text, result, filename=shown) if show_diff else result)
    return 0


@cli.command()
def lint(
    file: str = typer.Argument("-", help="Crontab file, or - for standard input."),
    system: Optional[bool] = typer.Option(None, "--system/--user", help=SYSTEM_HELP),
) -> int:
    """Report a crontab's classic mistakes, one line each; exit 1 when there are errors."""
    from cronwrap import crontab, schedule as sched

    text, name = _read_crontab(file)
    _, host = sched.resolve_zone(None, {}, sched.system_zone_name())  # UTC if unreadable, as for run
    findings = crontab.lint(text, system=_is_system(file, system), system_zone=host, now=_now())
    for finding in findings:
        print(crontab.format_finding(finding, name))
    return 1 if crontab.has_errors(findings) else 0


@cli.command()
def prune(
    older_than: str = typer.Option(..., "--older-than", help="Remove runs and log files older than this (e.g. 90d)."),
    keep_last: int = typer.Option(0, "--keep-last", min=0, help="Always keep each job's newest N runs."),
    db: Optional[str] = typer.Option(None, help=DB_HELP),
) -> int:
    """Retention: old ledger rows and log files; never a running run, nor a slot inside its catch-up window. Files go in cronwrap's log directory and in each job's own: its --log-dir as the ledger recorded it, CRONWRAP_LOG_DIR, log-dir in the config file; such a directory only if cronwrap would use it itself (a real directory of yours, not writable by others), and in it only cronwrap's own files (NAME/RUN_ID.ATTEMPT.log, events.jsonl.N), never through a symlink."""
    from cronwrap import retention
    from cronwrap.durations import parse_duration
    from cronwrap.paths import resolve_dirs

    age = parse_duration(older_than, "--older-than")
    ledger = _ledger(db)
    try:
        result = retention.prune(ledger, resolve_dirs(os.environ).logs, age, keep_last,
                                 time.time(), configured=_log_dirs)
    finally:
        ledger.close()
    print(f"removed {result.runs} runs and {result.files} log files older than {older_than}")
    return 0


@cli.command()
def serve(
    listen: str = typer.Option("127.0.0.1:8080", "--listen", help="HOST:PORT to listen on (every address HOST resolves to); port 0: any free port (the line printed at start names it)."),
    token_file: Optional[str] = typer.Option(None, "--token-file", help="A file (yours, mode 0600, not a symlink) holding the token every request must send (Authorization: Bearer TOKEN). Default: a token made at start, kept in STATE/serve/HOST-PORT.token while serve runs, and printed in a URL to open once in a browser (?token=TOKEN)."),
    no_auth: bool = typer.Option(False, "--no-auth", help="Serve without a token: anyone who can connect reads every job's output. Only on loopback addresses (checked on the sockets bound), and every page says so."),
    db: Optional[str] = typer.Option(None, help=DB_HELP),
) -> int:
    """A read-only web dashboard of the ledger: the jobs (/), a job's runs (/jobs/NAME), one run (/jobs/NAME/runs/ID), /metrics for Prometheus, /api/status and /api/jobs/NAME/history as JSON, /healthz. Every request needs a token (Authorization: Bearer TOKEN, or ?token=TOKEN once, which sets a cookie), on loopback too, unless --no-auth."""
    from cronwrap import redact, serve as server

    address = server.parse_listen(listen)
    token, made = server.token_for(address, token_file, no_auth)
    url = _ledger_url(db)
    label = redact.url(url) if url else "the embedded SQLite ledger"
    auth = None if token is None else server.Auth(token)
    app = server.Dashboard(lambda: _ledger(url, read_only=True), _log_dirs, auth, label)
    return server.serve(app, address, made)


db_cli = typer.Typer(help="The ledger's schema.", no_args_is_help=True)
cli.add_typer(db_cli, name="db")


@db_cli.command("init")
def db_init(db: Optional[str] = typer.Option(None, help=DB_HELP)) -> int:
    """Create or migrate the ledger schema (this also happens on first use)."""
    ledger = _ledger(db)
    try:
        ledger.init_schema()
    finally:
        ledger.close()
    print("ledger ready")
    return 0
