"""``cronwrap run``'s command line: a lean parser over the option table in spec.py (typer's
parameter machinery would cost every cron firing ~130 ms), and the config file merged
under it. cli.run_command checks the result into a ``JobSpec`` and hands it to the runner."""

from __future__ import annotations

import os
import sys

from cronwrap.errors import UsageError
from cronwrap.options import config
from cronwrap.options.spec import BY_LONG, BY_SHORT, OPTIONS, REPEAT_SEPARATOR, default_text
from cronwrap.paths import resolve_dirs

RUN_USAGE = "usage: cronwrap run [OPTIONS] [--] COMMAND [ARG…]"


def with_config(given: dict[str, str | bool], command: list[str]
                ) -> tuple[dict[str, str | bool], dict[str, str] | None]:
    """Command line > environment > [jobs.NAME] > [defaults] > built-in (ARCHITECTURE.md §8)."""
    path = config.find_config(os.environ)
    if path is None:
        return given, None
    loaded = config.load_config(path, os.path.join(resolve_dirs(os.environ).state,
                                                   config.CACHE_FILE))
    merged = config.merge(given, os.environ, loaded, config.job_name_of(given, os.environ, command))
    return merged.values, merged.labels


def parse_run_args(args: list[str]) -> tuple[dict[str, str | bool] | None, list[str]]:
    """Options up to ``--`` or the first word that is not an option (as GNU timeout)."""
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


def _wrapped(text: str, width: int, indent: int) -> list[str]:
    """``text`` in lines of at most ``width`` columns after ``indent`` spaces, broken at
    blanks (textwrap would be one more import on the run path for a help text)."""
    lines, line = [], ""
    for word in text.split():
        if line and indent + len(line) + 1 + len(word) > width:
            lines.append(" " * indent + line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return [*lines, " " * indent + line] if line else lines


def run_help() -> str:
    lines = [RUN_USAGE, "",
             "Run COMMAND (no shell) under a lock, a hard timeout and the run ledger.",
             "Every option can also be set as CRONWRAP_<NAME> (e.g. CRONWRAP_KILL_AFTER=30s).", ""]
    group = None
    try:
        width = max(os.get_terminal_size(1).columns, 60)
    except OSError:  # not a terminal: the width of one
        width = 80
    for opt in OPTIONS:
        if opt.group != group:
            group = opt.group
            lines.append(f"{group}:")
        names = (f"-{opt.short}, " if opt.short else "    ") + f"--{opt.name}"
        if opt.metavar:
            names += f" {opt.metavar}"
        lines.append(f"  {names}")
        default = default_text(opt)
        lines += _wrapped(opt.help + (f" Default: {default}." if default else ""), width, 8)
    lines += ["", "Exit status: the command's own; 124 timed out; 137 timed out and needed KILL;",
              "125 cronwrap failed; 126 not executable; 127 not found; 128+N ended by signal N;",
              "--skip-exit-code (0) when nothing ran.", ""]
    return "\n".join(lines)
