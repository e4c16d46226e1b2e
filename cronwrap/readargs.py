"""The read commands' command line without typer: ``status``, ``history``, ``logs``, ``explain``.

typer builds a pydantic adapter per parameter, ~200 ms before ``status`` reads anything
(bench/results.md, issue 15), so cli.py routes these commands here as it routes ``run`` to
runargs.py. ``COMMANDS`` mirrors the typer commands of admin.py (which remain the documented
surface: ``--help``, the man page); tests/unit/test_readargs.py fails when the two differ.
Only a command line this parser fully understands is run from here: anything else (``--help``,
an unknown option, a missing argument, a number out of range) goes to typer, so every error
and help text stays typer's own.
"""

from __future__ import annotations

from cronwrap.record import Record


class Opt(Record):
    """An option: its spellings, the keyword it sets, and ``kind``: ``flag``, ``text``, or
    ``(low, high)`` for a whole number in that range."""

    names: tuple[str, ...]
    dest: str
    kind: object


class Arg(Record):
    """A positional argument: ``count`` 1 (required), ``?`` (optional) or ``*`` (any)."""

    dest: str
    count: str
    kind: object
    _defaults = dict(kind="text")


FLAG, TEXT = "flag", "text"
DB = Opt(("--db",), "db", TEXT)
JSON = Opt(("--json",), "as_json", FLAG)
COMMANDS: dict[str, tuple[tuple[Arg, ...], tuple[Opt, ...]]] = {
    "status": ((Arg("names", "*"),), (
        Opt(("--since",), "since", TEXT), JSON, Opt(("--format",), "output_format", TEXT),
        Opt(("--textfile",), "textfile", TEXT), Opt(("--check",), "check", FLAG),
        Opt(("--max-age",), "max_age", TEXT), Opt(("--warn-duration",), "warn_duration", TEXT),
        DB)),
    "history": ((Arg("name", "1"),), (Opt(("--limit",), "limit", (1, 100000)), JSON, DB)),
    "logs": ((Arg("name", "1"), Arg("run_id", "?", (1, 2**62))), (
        Opt(("--last",), "last", FLAG), Opt(("--follow", "-f"), "follow", FLAG),
        Opt(("--raw",), "raw", FLAG), DB)),
    "explain": ((Arg("expression", "1"),), (
        Opt(("--tz",), "tz", TEXT), Opt(("--count",), "count", (0, 1000)),
        Opt(("--from",), "start", TEXT), JSON)),
}


def read_command(args: list[str]) -> int | None:
    """Run ``args`` (``status …``, ``history …``, ``logs …``, ``explain …``) if this parser
    understands all of it; None: leave it to typer."""
    parsed = parse(args)
    if parsed is None:
        return None
    from cronwrap import reads

    command, values = parsed
    values.pop("last", None)  # logs --last is the default
    return getattr(reads, command)(**values)


def parse(args: list[str]) -> tuple[str, dict[str, object]] | None:
    """``(command, keyword arguments)`` for reads.COMMAND, or None when typer should answer."""
    if not args or args[0] not in COMMANDS:
        return None
    options = COMMANDS[args[0]][1]
    by_name = {name: opt for opt in options for name in opt.names}
    values: dict[str, object] = {}
    given: list[str] = []
    rest = args[1:]
    while rest:
        token = rest.pop(0)
        if not token.startswith("-") or token == "-":
            given.append(token)
            continue
        name, has_value, value = token.partition("=") if token.startswith("--") else (token, "", "")
        opt = by_name.get(name)
        if opt is None or (opt.kind == FLAG and has_value):
            return None  # --help, --, an unknown or misspelt option: typer says what is wrong
        if opt.kind == FLAG:
            values[opt.dest] = True
            continue
        if not has_value:
            if not rest or rest[0].startswith("-"):
                return None
            value = rest.pop(0)
        checked = _value(value, opt.kind)
        if checked is None:
            return None
        values[opt.dest] = checked
    return _positionals(args[0], given, values)


def _positionals(command: str, given: list[str],
                 values: dict[str, object]) -> tuple[str, dict[str, object]] | None:
    for arg in COMMANDS[command][0]:
        if arg.count == "*":
            values[arg.dest], given = (given or None), []
        elif given:
            checked = _value(given.pop(0), arg.kind)
            if checked is None:
                return None
            values[arg.dest] = checked
        elif arg.count == "1":
            return None  # missing: typer's message names it
    return None if given else (command, values)


def _value(text: str, kind: object) -> object | None:
    if kind == TEXT:
        return text
    low, high = kind  # type: ignore[misc]
    try:
        number = int(text)
    except ValueError:
        return None
    return number if low <= number <= high else None
