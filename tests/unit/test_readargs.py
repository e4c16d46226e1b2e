"""The read commands without typer (issue 15 §1): readargs.py parses ``status``, ``history``,
``logs`` and ``explain`` as typer would, and leaves to typer what it does not understand."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import typer.main

from cronwrap import readargs, reads
from cronwrap.admin import cli
from cronwrap.readargs import FLAG, TEXT, parse


def typer_params(command: str) -> tuple[list[tuple], list[tuple]]:
    """(arguments, options) of the typer command, in readargs' terms."""
    click_command = typer.main.get_command(cli).commands[command]
    arguments, options = [], []
    for param in click_command.params:
        kind = TEXT
        if param.type_descriptor.annotation is int:
            kind = (param.min, param.max)
        if param.param_type_name == "argument":
            count = "*" if param.nargs == -1 else "1" if param.required else "?"
            arguments.append((param.name, count, kind))
        else:
            options.append((tuple(param.opts), param.name, FLAG if param.is_flag else kind))
    return arguments, options


@pytest.mark.parametrize("command", sorted(readargs.COMMANDS))
def test_the_lean_parser_mirrors_the_typer_command(command):
    arguments, options = readargs.COMMANDS[command]
    want_arguments, want_options = typer_params(command)
    assert [(a.dest, a.count, a.kind) for a in arguments] == want_arguments
    assert sorted((o.names, o.dest, o.kind) for o in options) == sorted(want_options)


@pytest.mark.parametrize("command", sorted(readargs.COMMANDS))
def test_typer_and_the_lean_parser_call_the_same_function(command):
    """The typer command's parameters are the keywords of reads.COMMAND: both routes run the
    same code."""
    import inspect

    params = inspect.signature(getattr(reads, command)).parameters
    click_command = typer.main.get_command(cli).commands[command]
    typed = [p for p in click_command.params if p.name != "last"]
    assert list(params) == [p.name for p in typed]
    for p in typed:  # the defaults the lean route relies on are typer's
        if params[p.name].default is not inspect.Parameter.empty:
            assert params[p.name].default == p.default, p.name


@pytest.mark.parametrize("args,expected", [
    (["status"], ("status", {"names": None})),
    (["status", "a", "b", "--json", "--since", "2h"],
     ("status", {"names": ["a", "b"], "as_json": True, "since": "2h"})),
    (["status", "--since=1d", "x", "--format", "prometheus", "--db", "postgresql://h/x"],
     ("status", {"names": ["x"], "since": "1d", "output_format": "prometheus",
                 "db": "postgresql://h/x"})),
    (["status", "--check", "--max-age", "1h", "--warn-duration", "5m"],
     ("status", {"names": None, "check": True, "max_age": "1h", "warn_duration": "5m"})),
    (["history", "j", "--limit", "5", "--json"],
     ("history", {"name": "j", "limit": 5, "as_json": True})),
    (["logs", "j", "7", "-f", "--raw"],
     ("logs", {"name": "j", "run_id": 7, "follow": True, "raw": True})),
    (["logs", "j", "--last"], ("logs", {"name": "j", "last": True})),
    (["explain", "*/5 * * * *", "--tz", "UTC", "--count", "0", "--from", "2026-01-01"],
     ("explain", {"expression": "*/5 * * * *", "tz": "UTC", "count": 0, "start": "2026-01-01"})),
    (["explain", "@daily", "--json"], ("explain", {"expression": "@daily", "as_json": True})),
])
def test_command_lines_the_lean_parser_runs(args, expected):
    assert parse(args) == expected


@pytest.mark.parametrize("args", [
    ["status", "--help"], ["status", "--jsn"], ["status", "--json=yes"], ["status", "--since"],
    ["status", "--since", "--json"], ["status", "--", "x"], ["status", "-h"],
    ["history"], ["history", "a", "b"], ["history", "j", "--limit", "0"],
    ["history", "j", "--limit", "many"], ["logs", "j", "0"], ["logs", "j", "1", "2"],
    ["explain"], ["explain", "@daily", "--count", "1001"], ["logs", "j", "-x"], ["unlock", "j"],
])
def test_anything_else_is_left_to_typer(args):
    assert parse(args) is None


def run_cli(code: str, home) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRONWRAP_")}
    env["CRONWRAP_HOME"] = str(home)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize("args", [["status"], ["status", "--json"], ["history", "j"],
                                  ["explain", "@daily"], ["status", "j"]])
def test_read_commands_import_neither_typer_nor_rich(args, tmp_path):
    code = ("import sys\nfrom cronwrap.cli import main\n"
            f"code = main({args!r})\n"
            "heavy = sorted(m for m in ('typer', 'rich', 'pydantic', 'dataclasses') if m in sys.modules)\n"
            "print(code, heavy, file=sys.stderr)")
    done = run_cli(code, tmp_path)
    assert done.stderr.strip().splitlines()[-1] == "0 []", done.stderr


def test_typer_still_answers_help_and_mistakes(tmp_path):
    done = run_cli("import sys\nfrom cronwrap.cli import main\nsys.exit(main(['status', '--help']))",
                   tmp_path)
    assert done.returncode == 0 and "--warn-duration" in done.stdout
    done = run_cli("import sys\nfrom cronwrap.cli import main\n"
                   "sys.exit(main(['history', 'j', '--limit', '0']))", tmp_path)
    assert done.returncode == 125 and "'--limit'" in done.stderr
