"""Crontab text as entries: one per line, each keeping its original text.

Lines follow cron (cronie and Debian/Vixie cron agree on all of this):

- blank lines, and comments whose first non-blank character is ``#``;
- environment assignments ``NAME=value`` or ``NAME = "value"``, tried before a job, as cron's
  ``load_env`` does, so ``*=x`` is an assignment and ``0 * * * * a=b`` is a job;
- jobs: five schedule fields or one ``@alias``, then (in ``/etc/crontab`` and ``/etc/cron.d``)
  a user, then the command: the rest of the line after the blanks that follow the last field.
  In the command the first unescaped ``%`` ends the command and the rest becomes its standard
  input; ``\\%`` is a literal percent sign.

Every entry keeps its original text, so rewriting one line never disturbs another, and the
separators (tabs, runs of spaces, leading blanks, a trailing ``\\r``) survive byte for byte.
Whether a schedule is valid is the schedule engine's to say (:mod:`cronwrap.schedule`);
this module only adds what cron itself refuses and cronsim allows (``L``, ``W``, ``#``, ``?``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from cronwrap.crontab.shell import BLANKS
from cronwrap.schedule import ALIASES, FIELD_NAMES, REBOOT, field_accepted, syntax_error


class Token(NamedTuple):
    """A blank-separated piece of a line and its 1-based column."""

    text: str
    column: int


@dataclass(frozen=True)
class Problem:
    """Why a line cannot be scheduled: the lint finding it becomes, minus the line number.
    ``fix`` is None where the code's standard fix (``lint.LINT_CODES``) says it all."""

    code: str
    column: int | None
    message: str
    fix: str | None = None


@dataclass(frozen=True)
class Blank:
    number: int
    text: str


@dataclass(frozen=True)
class Comment:
    number: int
    text: str


@dataclass(frozen=True)
class EnvAssignment:
    """``NAME=value``; ``value`` is what cron puts in the environment (quotes removed)."""

    number: int
    text: str
    name: str
    value: str
    value_column: int


@dataclass(frozen=True)
class Invalid:
    """A line cron cannot read as a job: too few fields, or no command."""

    number: int
    text: str
    problem: Problem


@dataclass(frozen=True)
class Job:
    """A job line. ``problem`` is set when its schedule is not valid cron syntax."""

    number: int
    text: str
    fields: tuple[Token, ...]  # five schedule fields, or one @alias
    user: Token | None  # system crontabs only
    command_start: int  # index into text where the command field begins
    problem: Problem | None = None

    @property
    def schedule(self) -> str:
        """The line's own expression, fields joined by one space: ``30 1 * * *``, ``@daily``."""
        return " ".join(tok.text for tok in self.fields)

    @property
    def is_reboot(self) -> bool:
        return self.schedule == REBOOT

    @property
    def expression(self) -> str | None:
        """The five-field form of the schedule; ``None`` for ``@reboot``."""
        if len(self.fields) == 1:
            return ALIASES.get(self.schedule)
        return self.schedule

    @property
    def command(self) -> str:
        """The command field exactly as written, including any ``%``-stdin part."""
        return self.text[self.command_start :]


Entry = Blank | Comment | EnvAssignment | Invalid | Job


# --- parsing -------------------------------------------------------------------------------

_TOKEN_RE = re.compile(r"[^ \t]+")
# cron's load_env: a name up to blank or '=', optional blanks, '=', then the value.
_ENV_RE = re.compile(r"[ \t]*(?P<name>[^ \t=]+)[ \t]*=[ \t]*(?P<value>.*)")
_FIELD_RANGES = ("0-59", "0-23", "1-31", "1-12 or jan-dec", "0-7 or sun-sat")
_FIELD_CHARS = re.compile(r"[0-9A-Za-z*,/-]+")
_MONTHS = frozenset("jan feb mar apr may jun jul aug sep oct nov dec".split())
_DAYS = frozenset("sun mon tue wed thu fri sat".split())
_FIELD_WORDS = {3: _MONTHS, 4: _DAYS}


def is_system_crontab(path: str) -> bool:
    """Whether ``path`` names a system crontab (a user field before each command)."""
    return path == "/etc/crontab" or path.startswith("/etc/cron.d/")


def parse(text: str, *, system: bool = False) -> list[Entry]:
    """One entry per line of ``text`` (split on ``\\n`` only, as cron does); never raises.

    ``"\\n".join(e.text for e in parse(t)) == t`` for every ``t``.
    """
    return [parse_line(n, line, system) for n, line in enumerate(text.split("\n"), 1)]


def parse_line(number: int, text: str, system: bool) -> Entry:
    stripped = text.strip(BLANKS + "\r")
    if not stripped:
        return Blank(number, text)
    if stripped.startswith("#"):
        return Comment(number, text)
    env = _ENV_RE.fullmatch(text)
    if env:
        value = _env_value(env.group("value"))
        return EnvAssignment(number, text, env.group("name"), value, env.start("value") + 1)
    return _parse_job(number, text, system)


def _env_value(raw: str) -> str:
    value = raw.rstrip(BLANKS)
    if len(value) >= 2 and value[0] in "'\"" and value[-1] == value[0]:
        return value[1:-1]
    return value


def _parse_job(number: int, text: str, system: bool) -> Entry:
    tokens = [Token(m.group(), m.start() + 1) for m in _TOKEN_RE.finditer(text)]
    n_fields = 1 if tokens[0].text.startswith("@") else 5
    n_head = n_fields + (1 if system else 0)
    if len(tokens) <= n_head:
        return Invalid(number, text, _missing_parts(text, len(tokens), n_fields, system))
    fields = tuple(tokens[:n_fields])
    user = tokens[n_fields] if system else None
    start = tokens[n_head].column - 1
    problem = _schedule_problem(fields) or (_user_problem(user) if user else None)
    return Job(number, text, fields, user, start, problem)


def _missing_parts(text: str, n_tokens: int, n_fields: int, system: bool) -> Problem:
    column = len(text.rstrip(BLANKS + "\r")) + 1
    if n_tokens < n_fields:
        what = f"only {n_tokens} of the 5 schedule fields"
    elif system and n_tokens == n_fields:
        what = "no user and no command after the schedule"
    else:
        what = "no command after the schedule"
    fix = "a job line is: minute hour day-of-month month day-of-week " + (
        "user command" if system else "command"
    )
    return Problem("E002", column, f"{what}", fix)


def _schedule_problem(fields: tuple[Token, ...]) -> Problem | None:
    if len(fields) == 1:
        return _alias_problem(fields[0])
    for index, tok in enumerate(fields):
        problem = _field_problem(index, tok)
        if problem:
            return problem
    if syntax_error(" ".join(tok.text for tok in fields)) is not None:
        return Problem(
            "E001",
            fields[2].column,
            f"day-of-month {fields[2].text!r} never occurs in month {fields[3].text!r}: "
            "the job never runs",
            "pick a day that exists in those months",
        )
    return None


def _alias_problem(tok: Token) -> Problem | None:
    if tok.text == REBOOT or tok.text in ALIASES:
        return None
    return Problem("E003", tok.column, f"unknown schedule {tok.text!r}")


def _field_problem(index: int, tok: Token) -> Problem | None:
    words = re.findall(r"[A-Za-z]+", tok.text)
    allowed = _FIELD_WORDS.get(index, frozenset())
    cron_syntax = _FIELD_CHARS.fullmatch(tok.text) and all(w.lower() in allowed for w in words)
    if cron_syntax and field_accepted(index, tok.text):
        return None
    return _bad_field(index, tok)


def _bad_field(index: int, tok: Token) -> Problem:
    message = f"bad {FIELD_NAMES[index]} field {tok.text!r}"
    if re.search(r"[LW#?]", tok.text.upper()) and not re.fullmatch(r"[A-Za-z]{3}", tok.text):
        message += " (L, W, # and ? are Quartz extensions that cron does not have)"
    fix = f"use {_FIELD_RANGES[index]}, '*', a list (1,15), a range (1-5) or a step (*/10)"
    return Problem("E001", tok.column, message, fix)


def _user_problem(user: Token) -> Problem | None:
    # A path or a sixth field where the user belongs: the line was copied from a user crontab.
    if "/" in user.text or "=" in user.text or looks_like_field(user.text):
        return Problem("E004", user.column,
                       f"the user field is {user.text!r}: /etc/crontab and /etc/cron.d lines "
                       "need a user name between the schedule and the command")
    return None


def looks_like_field(word: str) -> bool:
    """Whether ``word`` reads as a numeric schedule field (a misplaced one: user, command)."""
    return bool(re.fullmatch(r"[0-9*][0-9*/,-]*", word))


def with_env(entries: Iterable[Entry]) -> Iterator[tuple[Entry, dict[str, str]]]:
    """Each entry with the environment cron gives it: assignments apply to the lines below."""
    env: dict[str, str] = {}
    for entry in entries:
        if isinstance(entry, EnvAssignment):
            env[entry.name] = entry.value
        yield entry, dict(env)
