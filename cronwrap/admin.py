"""The administrative commands, and the typer app of every command.

The app is built from commands.COMMANDS, the one declaration of the command line: one typer
command per entry, with one ``typer.Argument`` or ``typer.Option`` per parameter, calling the
entry's function. typer runs the administrative commands, and answers for the read commands
what commands.lean_command does not understand (``--help``, mistakes). The administrative
commands' bodies follow: each a few lines that call report/runner code.
"""

from __future__ import annotations

import inspect
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Callable, List, Optional

import typer

# typer 0.29 vendors click (pinned in pyproject.toml: its exception classes moved between releases)
from typer._click.exceptions import ClickException, NoArgsIsHelpError

from cronwrap import __version__
from cronwrap.commands import COMMANDS, GROUPS, SUMMARY, Command, Param
from cronwrap.errors import EXIT_CRONWRAP, UsageError
from cronwrap.record import TYPE_CHECKING
from cronwrap.stdio import warn, write_utf8
# What every command reads first (ledger, config file, log directories) lives in reads.py, where
# the read commands run without typer.
from cronwrap.read.reads import config as _config, ledger as _ledger, ledger_url as _ledger_url
from cronwrap.read.reads import host_option as _host, log_dirs as _log_dirs, now as _now, one_job
from cronwrap.read.reads import this_host as _this_host

if TYPE_CHECKING:
    from datetime import datetime

    from cronwrap.crontab.lint import Finding
    from cronwrap.ledger.base import Ledger
    from cronwrap.process.locks import Holder, LockState


def app(args: list[str]) -> int:
    try:
        command = typer.main.get_command(typer_app(COMMANDS))
        _plain_help(command)
        result = command.main(args, standalone_mode=False, prog_name="cronwrap")
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        return 130
    except NoArgsIsHelpError as exc:
        sys.stdout.write(exc.format_message() + "\n")
        return 0
    except ClickException as exc:  # its context, when it has one, is the command's own
        context = getattr(exc, "ctx", None)
        where = context.command_path if context is not None else "cronwrap"
        sys.stderr.write(f"cronwrap: {exc.format_message()} (see {where} --help)\n")
        return EXIT_CRONWRAP
    return result if isinstance(result, int) else 0


def _plain_help(command: Any) -> None:
    """Help in the project's words: typer writes Python's type beside an argument's metavar
    (``NAME <str>``, ``NAME <list[str]>``) and a range with its 64-bit bound
    (``[1<=x<=4611686018427387904]``); the metavar says what an argument is, and a range reads
    ``1 or more`` or ``1 to 100000``."""
    for param in command.params:
        if param.param_type_name == "argument":
            setattr(param, "display_type", lambda ctx: "")
        low, high = getattr(param, "min", None), getattr(param, "max", None)
        if low is not None or high is not None:
            words = f"{low} or more" if high is None or high >= 2**31 - 1 else f"{low} to {high}"
            setattr(param, "_get_number_range_help_str", lambda words=words: words)
    for sub in getattr(command, "commands", {}).values():
        _plain_help(sub)


def typer_app(commands: tuple[Command, ...]) -> typer.Typer:
    """The typer app of ``commands``; a command of two words (``db init``) in a sub-app."""
    top = _typer(SUMMARY)
    groups: dict[str, typer.Typer] = {}
    for command in commands:
        *group, name = command.name.split(" ")
        parent = top
        if group:
            if group[0] not in groups:
                groups[group[0]] = _typer(GROUPS[group[0]])
                top.add_typer(groups[group[0]], name=group[0])
            parent = groups[group[0]]
        context = {**CONTEXT, "ignore_unknown_options": True, "allow_extra_args": True} \
            if command.rest else CONTEXT
        parent.command(name, help=command.help, short_help=command.summary,
                       context_settings=context)(_function(command))
    top.callback(invoke_without_command=False)(_top)
    return top


def _top(version: bool = typer.Option(False, "--version", "-V", help="Print cronwrap's "
                                      "version and exit.", is_eager=True)) -> None:
    """cronwrap's own options, before a command (cli.main answers --version and -V before
    typer is loaded: this declares them for --help)."""
    if version:
        print(f"cronwrap {__version__}")
        raise typer.Exit(0)


# -h beside --help everywhere; help wrapped to the terminal's width (click's default: 80)
CONTEXT = {"help_option_names": ["-h", "--help"],
           "max_content_width": max(shutil.get_terminal_size().columns, 60)}


def _typer(help: str) -> typer.Typer:
    return typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                       pretty_exceptions_show_locals=False, rich_markup_mode=None, help=help,
                       context_settings=CONTEXT)


def _function(command: Command) -> Callable[..., int]:
    """A function whose signature typer reads as the command's parameters, and which calls
    the command's own function with them (and the words typer left, as ``command.rest``)."""
    def call(ctx: typer.Context | None = None, **values: object) -> int:
        if command.rest and ctx is not None:
            values[command.rest] = list(ctx.args)
        return command.call(values)

    params = [inspect.Parameter(p.dest, inspect.Parameter.KEYWORD_ONLY, default=_typer_param(p),
                                annotation=_annotation(p)) for p in command.params]
    if command.rest:
        params.insert(0, inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY,
                                           annotation=typer.Context))
    call.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    call.__annotations__ = {p.name: p.annotation for p in params}
    return call


def _typer_param(param: Param) -> Any:
    default = param.default  # REQUIRED is typer's ``...``
    low, high = param.kind if isinstance(param.kind, tuple) else (None, None)
    if param.is_argument:
        return typer.Argument(default, help=param.help, metavar=param.metavar, min=low, max=high)
    names = [f"{param.names[0]}/{param.off}", *param.names[1:]] if param.off else param.names
    return typer.Option(default, *names, help=param.help, metavar=param.metavar, min=low,
                        max=high)


def _annotation(param: Param) -> object:
    if param.many:
        return List[str]
    if param.is_flag:
        return Optional[bool] if param.off else bool
    kind = int if isinstance(param.kind, tuple) else str
    return Optional[kind] if param.default is None else kind


def _name(name: str) -> str:
    from cronwrap.options.spec import job_name

    return job_name(name, "NAME")


def unlock(name: str, lock_file: str | None, host: str | None, db: str | None) -> int:
    from cronwrap.process import locks
    from cronwrap.textsafe import safe_text

    name = _name(name)
    host = _host(host)
    path, lock_dir = _lock_file(name, lock_file)  # a bad path stops unlock before any change
    ledger = _ledger(db)
    try:
        released = ledger.unlock(one_job(ledger, name, host))
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


def _lock_file(name: str, given: str | None) -> tuple[str, str]:
    """The job's lock file as its firings on this host find it (--lock-file,
    CRONWRAP_LOCK_FILE, lock-file in the config file, else the default), and the lock
    directory that keeps its holder record."""
    from cronwrap.options import config, spec
    from cronwrap.paths import resolve_dirs
    from cronwrap.process import locks

    lock_dir = resolve_dirs(os.environ).locks
    merged = config.merge({} if given is None else {"lock-file": given}, os.environ, _config(),
                          name)
    value = merged.values.get("lock-file")
    if not isinstance(value, str):  # not set (lock-file is no flag: never a bool)
        return locks.default_lock_file(lock_dir, name), lock_dir
    return spec.path(value, merged.label("lock-file")), lock_dir


def _lock_line(name: str, state: LockState, removed: Holder | None) -> str:
    """One line about the job's local lock (``removed``: the holder whose stale record
    unlock removed, or None)."""
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


def _pids(holder: Holder) -> str:
    return f"wrapper pid {holder.pid}" + (f", job pid {holder.job_pid}" if holder.job_pid else "")


def _holder(state: LockState) -> str:
    """Who the holder record names, each process alive or gone."""
    holder = state.holder
    if holder is None:
        return "a process cronwrap has no record of"
    shown = {True: "alive", False: "gone", None: "cannot be checked here: another PID namespace"}
    job = f"job pid {holder.job_pid} ({shown[state.job_alive]})" if holder.job_pid \
        else "no job started yet"
    return f"wrapper pid {holder.pid} ({shown[state.wrapper_alive]}), {job}"


def _pause_target(name: str, host: str | None) -> str:
    """The ledger name a pause is kept under: NAME, or one host's share of a host-scoped job
    (``model.ledger_job``)."""
    from cronwrap.model import ledger_job

    return ledger_job(_name(name), _host(host))


REASON_MAX = 500  # a pause's reason: a line in status, --check and serve


def pause(name: str, until: str | None, reason: str | None, host: str | None,
          db: str | None) -> int:
    from cronwrap.model import shown_job
    from cronwrap.textsafe import safe_text

    target = _pause_target(name, host)
    label = shown_job(target)
    ends = None if until is None else _until(until, _now())
    if reason is not None and not (0 < len(reason) <= REASON_MAX and reason.isprintable()):
        raise UsageError(f"--reason: {reason[:40]!r}: give one line of printable text, at "
                         f"most {REASON_MAX} characters (it is shown by status and --check)")
    by = _this_host()
    ledger = _ledger(db)
    try:
        recorded = ledger.pause(target, ends, reason, by)
        known = _known_job(ledger, target)
    finally:
        ledger.close()
    print(safe_text(f"{label}: {recorded.describe()}; its firings are skipped until "
                    + ("then" if ends else f"cronwrap resume {name}"
                       + (f" --host {host}" if host else ""))))
    if not known:
        warn(f"{label}: the ledger has no record of this job yet (check the name with "
             "cronwrap status); its firings will be skipped once they come")
    return 0


def _until(text: str, now: datetime) -> datetime:
    """--until: a time (ISO 8601, without an offset in this host's zone, as --at reads it) or
    a duration from ``now`` with a unit (as --since reads it); one not after ``now`` is
    refused."""
    from datetime import timedelta

    from cronwrap import schedule as sched
    from cronwrap.options.spec import window

    value = text.strip()
    if "-" in value[1:] or ":" in value:  # 2026-12-05, 06:00: a time; 90m, 2d: a duration
        zone, _ = sched.resolve_zone(None, os.environ, sched.system_zone_name())
        ends = sched.parse_timestamp(value, zone, "--until")
    else:
        ends = now + timedelta(seconds=window(value, "--until"))
    if ends <= now:
        raise UsageError(f"--until: {text!r} is not in the future "
                         f"({ends.isoformat(timespec='seconds')}): give a later time, or a "
                         "duration from now (e.g. 2h)")
    return ends


def _known_job(ledger: Ledger, target: str) -> bool:
    """The ledger has seen the job (or, for NAME, a host's share of a host-scoped NAME)."""
    return bool(ledger.jobs_named(target))


def resume(name: str, host: str | None, db: str | None) -> int:
    from cronwrap.model import active_pause, shown_job
    from cronwrap.textsafe import safe_text

    target = _pause_target(name, host)
    label = shown_job(target)
    ledger = _ledger(db)
    try:
        removed = ledger.resume(target)
        still = active_pause(ledger.pauses(), target, _now())
    finally:
        ledger.close()
    if still is not None:  # NAME's pause covers every host's share of it too
        print(safe_text(f"{label}: still {still.describe()}: the pause of "
                        f"{shown_job(still.job)} covers every host (cronwrap resume "
                        f"{shown_job(still.job)} ends it)"))
    elif removed is None:
        print(safe_text(f"{label}: not paused; nothing to do"))
    elif removed.until is not None and removed.until <= _now():
        print(safe_text(f"{label}: its pause had ended already (until "
                        f"{removed.until.isoformat(timespec='seconds')}); removed"))
    else:
        print(safe_text(f"{label}: resumed (was {removed.describe()}); its next firing "
                        "runs"))
    return 0


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


def _is_system(file: str, system: bool | None) -> bool:
    from cronwrap import crontab

    return crontab.is_system_crontab(os.path.abspath(file)) if system is None else system


def _cronwrap_path(given: str | None) -> str:
    """The cronwrap that wrap writes into each line: ``--cronwrap``, else this very program
    by the path it was started with, made absolute (a virtualenv's cronwrap run by its full
    path need not be on PATH, nor on cron's; a symlink such as pipx's ~/.local/bin/cronwrap is
    kept, so the lines survive an upgrade), else the cronwrap beside this Python (``python -m
    cronwrap`` in a virtualenv), else the one on PATH."""
    import shutil

    if given:
        return given
    beside = os.path.join(os.path.dirname(sys.executable), "cronwrap")
    for candidate in (sys.argv[0], beside, shutil.which("cronwrap") or ""):
        if os.path.basename(candidate) == "cronwrap" and os.path.isfile(candidate) and \
                os.access(candidate, os.X_OK):
            return os.path.abspath(candidate)
    raise UsageError("wrap: cannot tell where the cronwrap program is (not started as "
                     "cronwrap, none beside this Python or on PATH): give its absolute path "
                     "with --cronwrap PATH")


def wrap(file: str, show_diff: bool, undo: bool, cronwrap_path: str | None,
         system: bool | None, extra: list[str]) -> int:
    from cronwrap import crontab
    from cronwrap.options.runargs import parse_run_args

    if extra:
        from cronwrap.options.spec import build_spec

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
        _warn_wrapped_errors(text, result, name, is_system)
    shown = name.lstrip("/")  # diff headers read a/etc/crontab, not a//etc/crontab
    write_utf8(crontab.diff(text, result, filename=shown) if show_diff else result)
    return 0


def _warn_wrapped_errors(text: str, result: str, name: str, is_system: bool) -> None:
    """One warning on stderr for each error lint reports on a line wrap wrapped: cronwrap
    cannot fix it (an unescaped %, a sixth field), and the wrapped line keeps it."""
    from cronwrap import crontab

    wrapped = {number for number, (before, after) in
               enumerate(zip(text.split("\n"), result.split("\n")), 1) if before != after}
    for finding in _lint_findings(text, is_system):
        if finding.severity == "error" and finding.line in wrapped:
            warn(f"wrap: line {finding.line} is wrapped, but lint reports an error on it: "
                 f"{crontab.format_finding(finding, name)}")


def _lint_findings(text: str, is_system: bool) -> list[Finding]:
    from cronwrap import crontab, schedule as sched
    from cronwrap.crontab.daemon import cron_daemon

    _, host = sched.resolve_zone(None, {}, sched.system_zone_name())  # UTC if unreadable, as for run
    return crontab.lint(text, system=is_system, system_zone=host, now=_now(),
                        daemon=cron_daemon(os.environ))


def lint(file: str, system: bool | None) -> int:
    from cronwrap import crontab

    text, name = _read_crontab(file)
    findings = _lint_findings(text, _is_system(file, system))
    for finding in findings:
        print(crontab.format_finding(finding, name))
    return 1 if crontab.has_errors(findings) else 0


def prune(older_than: str, keep_last: int, db: str | None) -> int:
    from cronwrap.options.durations import parse_duration
    from cronwrap.paths import resolve_dirs
    from cronwrap.read import prune as retention

    age = parse_duration(older_than, "--older-than", unit_required=True)
    ledger = _ledger(db)
    try:
        result = retention.prune(ledger, resolve_dirs(os.environ).logs, age, keep_last,
                                 time.time(), configured=_log_dirs)
    finally:
        ledger.close()
    print(f"removed {result.runs} runs and {result.files} log files older than {older_than}")
    return 0


def serve(listen: str, token_file: str | None, no_auth: bool, db: str | None) -> int:
    from cronwrap.read import serve as server
    from cronwrap.redact import redactor as redact

    address = server.parse_listen(listen)
    token, made = server.token_for(address, token_file, no_auth)
    url = _ledger_url(db)
    label = redact.url(url) if url else "the embedded SQLite ledger"
    auth = None if token is None else server.Auth(token)
    dashboard = server.Dashboard(lambda: _ledger(url, read_only=True), _log_dirs, auth, label)
    return server.serve(dashboard, address, made)


def db_upgrade(db: str | None) -> int:
    ledger = _ledger(db, upgrade=True)
    try:
        ledger.analyze()  # the planner's statistics, fresh whether or not anything migrated
    finally:
        ledger.close()
    print("ledger upgraded")
    return 0


def db_init(db: str | None) -> int:
    ledger = _ledger(db, upgrade=True)
    try:
        ledger.init_schema()
    finally:
        ledger.close()
    print("ledger ready")
    return 0
