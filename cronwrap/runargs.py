"""``cronwrap run``'s command line: a lean parser over the option table in spec.py (typer's
parameter machinery would cost every cron firing ~130 ms), the config file merged under it,
and the hand-over to the runner (or the dry run)."""

from __future__ import annotations

import os
import sys

from cronwrap.errors import UsageError
from cronwrap.stdio import warn

RUN_USAGE = "usage: cronwrap run [OPTIONS] [--] COMMAND [ARG…]"


def run_command(args: list[str]) -> int:
    from cronwrap.spec import build_spec

    given, command = parse_run_args(args)
    if given is None:
        return 0  # --help was printed
    values, labels = with_config(given, command)
    spec = build_spec(command, values, os.environ, lambda: os.uname().nodename, labels,
                      warn=warn)
    if spec.dry_run:
        from cronwrap import dryrun as runner
    else:
        from cronwrap import runner

    status = runner.run(spec, dict(os.environ))
    # Leave without interpreter teardown: nothing is left to clean, and closing the SQLite
    # connection would checkpoint the WAL (two fsyncs, ~15 ms) on every cron firing; the next
    # connection, or SQLite's auto-checkpoint, takes care of the WAL. Nothing of the run's
    # is buffered in sys.stdout/stderr (stdio.py writes unbuffered): the job's status stands
    # whatever a flush would meet (a full disk, a closed pipe).
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status)


def with_config(given: dict, command: list[str]) -> tuple[dict, dict | None]:
    """Command line > environment > [jobs.NAME] > [defaults] > built-in (ARCHITECTURE.md §8)."""
    from cronwrap import config

    path = config.find_config(os.environ)
    if path is None:
        return given, None
    loaded = config.load_config(path)
    merged = config.merge(given, os.environ, loaded, config.job_name_of(given, os.environ, command))
    return merged.values, merged.labels


def parse_run_args(args: list[str]) -> tuple[dict | None, list[str]]:
    """Options up to ``--`` or the first word that is not an option (as GNU timeout)."""
    from cronwrap.spec import BY_LONG, BY_SHORT, REPEAT_SEPARATOR

    given: dict[str, str | bool] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return given, args[i + 1:]
        if arg in ("-h", "--help"):
            sys.stdout.write(run_help())
            return None, []
        if not arg.startswith("-") or arg == "-":
            return given, args[i:]
        if arg.startswith("--"):
            name, eq, value = arg[2:].partition("=")
            opt = BY_LONG.get(name)
            attached = value if eq else None
        else:
            opt = BY_SHORT.get(arg[1])
            attached = arg[2:] or None
        if opt is None:
            raise UsageError(f"run: unknown option {arg.partition('=')[0]} (see cronwrap run --help)")
        if opt.is_flag:
            if attached is not None:
                raise UsageError(f"run: --{opt.name} takes no value")
            given[opt.name] = True
        elif attached is None and i + 1 >= len(args):
            raise UsageError(f"run: --{opt.name} needs a value ({opt.metavar})")
        else:
            if attached is None:
                i += 1
            value = args[i] if attached is None else attached
            if opt.repeat and opt.name in given:
                value = f"{given[opt.name]}{REPEAT_SEPARATOR}{value}"
            given[opt.name] = value
        i += 1
    return given, []


def run_help() -> str:
    from cronwrap.spec import OPTIONS

    lines = [RUN_USAGE, "",
             "Run COMMAND (no shell) under a lock, a hard timeout and the run ledger.",
             "Every option can also be set as CRONWRAP_<NAME> (e.g. CRONWRAP_KILL_AFTER=30s).", ""]
    group = None
    for opt in OPTIONS:
        if opt.group != group:
            group = opt.group
            lines.append(f"{group}:")
        names = (f"-{opt.short}, " if opt.short else "    ") + f"--{opt.name}"
        if opt.metavar:
            names += f" {opt.metavar}"
        lines.append(f"  {names}")
        lines.append(f"        {opt.help}")
    lines += ["", "Exit status: the command's own; 124 timed out; 137 timed out and needed KILL;",
              "125 cronwrap failed; 126 not executable; 127 not found; 128+N ended by signal N;",
              "--skip-exit-code (0) when nothing ran.", ""]
    return "\n".join(lines)
