"""Every command is declared once (issue 21 §3): commands.COMMANDS drives the lean parser that
runs the read commands without typer (issue 15 §1), the typer app that runs the rest and
answers what the lean parser leaves to it, --help, the man page and README."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from importlib import import_module

import pytest

from cronwrap import admin, commands
from cronwrap.commands import COMMANDS, Command, lean_command, option, parse
from tests.imports import modules_of_a_firing
from tools.docs.generate import render_man, render_readme_reference

CALLS: list[tuple[str, dict[str, object]]] = []


def record(**values: object) -> int:
    CALLS.append(("called", values))
    return 0


def recording(command: Command) -> Command:
    return command.replace(function=f"{__name__}:record")


def typer_values(args: list[str]) -> dict[str, object]:
    """What the typer app built from the table passes to the command's function."""
    CALLS.clear()
    table = tuple(recording(c) for c in COMMANDS)
    assert admin.typer_app(table)(args, standalone_mode=False, prog_name="cronwrap") == 0
    return CALLS[0][1]


LEAN_LINES = [
    ["status"],
    ["status", "a", "b", "--json", "--since", "2h"],
    ["status", "--since=1d", "x", "--format", "prometheus", "--db", "postgresql://h/x"],
    ["status", "--check", "--max-age", "1h", "--warn-duration", "5m", "--textfile", "/t/m.prom"],
    ["history", "j"],
    ["history", "j", "--limit", "5", "--json"],
    ["history", "--limit=100000", "j"],
    ["logs", "j"],
    ["logs", "j", "7", "-f", "--raw"],
    ["logs", "j", "--last", "--follow", "--db", "sqlite:///x.db"],
    ["explain", "*/5 * * * *", "--tz", "UTC", "--count", "0", "--from", "2026-01-01"],
    ["explain", "@daily", "--json"],
    ["step", "batch-0003", "--", "settle.py", "--batch", "3", "-x"],
    ["step", "--force", "k", "--", "true"],
    ["step", "--done", "k"],
]


@pytest.mark.parametrize("args", LEAN_LINES, ids=" ".join)
def test_the_lean_parser_reads_a_command_line_as_typer_does(args):
    """Both parsers are built from the one table, and give the command's function the same
    keywords, defaults included."""
    values = parse(commands.BY_NAME[args[0]], args[1:])
    assert values is not None
    assert values == typer_values(args)


def test_the_lean_parser_fills_in_the_defaults_of_the_table():
    assert parse(commands.BY_NAME["history"], ["j"]) == {
        "name": "j", "limit": 20, "as_json": False, "host": None, "db": None}
    assert parse(commands.BY_NAME["logs"], ["j", "3", "-f"]) == {
        "name": "j", "run_id": 3, "last": False, "attempt": None, "follow": True, "raw": False,
        "timestamps": False, "host": None, "db": None}


@pytest.mark.parametrize("args", [
    ["status", "--help"], ["status", "--jsn"], ["status", "--json=yes"], ["status", "--since"],
    ["status", "--since", "--json"], ["status", "-h"],
    ["history"], ["history", "a", "b"], ["history", "j", "--limit", "0"],
    ["history", "j", "--limit", "many"], ["logs", "j", "0"], ["logs", "j", "1", "2"],
    ["explain"], ["explain", "@daily", "--count", "1001"], ["logs", "j", "-x"], ["unlock", "j"],
    ["prune", "--older-than", "9d"], ["db", "init"], [], ["--help"], ["nonsense"],
], ids=lambda a: " ".join(a) or "nothing")
def test_anything_else_is_left_to_typer(args):
    assert lean_command(args) is None


def test_a_parameter_declared_once_reaches_both_parsers_help_and_the_docs(monkeypatch, capsys):
    """One entry in the table, and nothing else, gives a command a new option everywhere."""
    history = commands.BY_NAME["history"]
    newest = option("--since-id", "since_id", "RUN_ID", "Only runs after this one.",
                    kind=(1, None))
    grown = history.replace(params=(*history.params, newest))
    table = tuple(grown if c is history else c for c in COMMANDS)
    monkeypatch.setattr(commands, "COMMANDS", table)
    monkeypatch.setitem(commands.BY_NAME, "history", grown)

    assert parse(grown, ["j", "--since-id", "9"])["since_id"] == 9
    assert parse(grown, ["j", "--since-id", "0"]) is None  # out of range: typer's to say
    CALLS.clear()
    admin.typer_app(tuple(map(recording, table)))(["history", "j", "--since-id", "9"],
                                                  standalone_mode=False)
    assert CALLS[0][1]["since_id"] == 9
    admin.typer_app(table)(["history", "--help"], standalone_mode=False, prog_name="cronwrap")
    assert "--since-id RUN_ID" in capsys.readouterr().out
    assert "\\-\\-since\\-id" in render_man()
    assert "`--since-id RUN_ID`: Only runs after this one. At least 1." in \
        render_readme_reference()


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.name)
def test_each_command_runs_its_function_with_one_keyword_per_parameter(command):
    module, _, name = command.function.partition(":")
    function = getattr(import_module(module), name)
    wanted = [p.dest for p in command.params] + ([command.rest] if command.rest else [])
    assert list(inspect.signature(function).parameters) == wanted


def run_cli(code: str, home) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRONWRAP_")}
    env["CRONWRAP_HOME"] = str(home)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize("args", [["status"], ["status", "--json"], ["history", "j", "--json"],
                                  ["explain", "@daily"], ["status", "j"]])
def test_read_commands_import_neither_typer_nor_rich(args, tmp_path):
    code = ("import sys\nfrom cronwrap.cli import main\n"
            f"code = main({args!r})\n"
            "heavy = sorted(m for m in ('typer', 'rich', 'pydantic', 'dataclasses') if m in sys.modules)\n"
            "print(code, heavy, file=sys.stderr)")
    if args[0] == "history":  # a job the ledger does not know is an error (exit 125)
        run_cli("from cronwrap.cli import main\nmain(['run', '-n', 'j', '--', 'true'])", tmp_path)
    done = run_cli(code, tmp_path)
    assert done.stderr.strip().splitlines()[-1] == "0 []", done.stderr


def test_run_does_not_import_the_command_table(tmp_path):
    """``run`` has its own parser (runargs.py over spec.OPTIONS): the other commands'
    declarations and typer stay off every cron firing."""
    modules = modules_of_a_firing(tmp_path, ["run", "-n", "x", "--", "true"])
    assert "cronwrap.run.runner" in modules  # it did run
    assert not {"cronwrap.commands", "cronwrap.admin", "typer"} & modules


def test_typer_still_answers_help_and_mistakes(tmp_path):
    done = run_cli("import sys\nfrom cronwrap.cli import main\nsys.exit(main(['status', '--help']))",
                   tmp_path)
    assert done.returncode == 0 and "--warn-duration DURATION" in done.stdout
    done = run_cli("import sys\nfrom cronwrap.cli import main\n"
                   "sys.exit(main(['history', 'j', '--limit', '0']))", tmp_path)
    assert done.returncode == 125 and "'--limit'" in done.stderr
    assert len(done.stderr.splitlines()) == 1


def test_after_a_double_dash_every_word_is_an_argument():
    """As typer takes them: ``completion bash --cword 2 -- cronwrap status --j``."""
    assert parse(commands.BY_NAME["completion"], ["bash", "--cword", "2", "--", "cronwrap",
                                                   "status", "--j"]) == {
        "shell": "bash", "cword": 2, "words": ["cronwrap", "status", "--j"]}

