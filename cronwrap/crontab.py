"""Parse, wrap, unwrap and lint crontab text.

Pure text processing: every function takes the crontab as a string and returns a string or a
list of findings; the clock (``now``) and the system zone are arguments. The only data read
from disk is the tz database, through ``zoneinfo``.

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
"""

from __future__ import annotations

import difflib
import re
import shlex
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, timezone
from functools import lru_cache
from typing import Literal, NamedTuple
from zoneinfo import ZoneInfo

from cronsim import CronSim

from cronwrap.errors import UsageError

__all__ = [
    "ALIASES",
    "Blank",
    "Comment",
    "EnvAssignment",
    "Entry",
    "Finding",
    "Invalid",
    "Job",
    "NAME_RE",
    "Problem",
    "Token",
    "derive_name",
    "diff",
    "format_finding",
    "has_errors",
    "is_system_crontab",
    "lint",
    "parse",
    "split_percent",
    "unwrap",
    "wrap",
]

# cronsim has no @aliases; these are cron's own (cronie entry.c). @reboot has no schedule.
ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
REBOOT = "@reboot"

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_NAME_BASE_MAX = 120  # leaves room for a "-NNN" suffix within the 128 characters of a name
_EPOCH = datetime(2000, 1, 1)
_DEFAULT_PATH = "/usr/bin:/bin"  # cron's PATH when the crontab sets none (cronie, Debian)


# --------------------------------------------------------------------------------------------
# Entries


class Token(NamedTuple):
    """A blank-separated piece of a line and its 1-based column."""

    text: str
    column: int


@dataclass(frozen=True)
class Problem:
    """Why a line cannot be scheduled: the lint finding it becomes, minus the line number."""

    code: str
    column: int | None
    message: str
    fix: str


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
        """The five-field form cronsim understands; ``None`` for ``@reboot``."""
        if len(self.fields) == 1:
            return ALIASES.get(self.schedule)
        return self.schedule

    @property
    def command(self) -> str:
        """The command field exactly as written, including any ``%``-stdin part."""
        return self.text[self.command_start :]


Entry = Blank | Comment | EnvAssignment | Invalid | Job


# --------------------------------------------------------------------------------------------
# Parsing

_BLANKS = " \t"
_TOKEN_RE = re.compile(r"[^ \t]+")
# cron's load_env: a name up to blank or '=', optional blanks, '=', then the value.
_ENV_RE = re.compile(r"[ \t]*(?P<name>[^ \t=]+)[ \t]*=[ \t]*(?P<value>.*)")
_FIELD_NAMES = ("minute", "hour", "day-of-month", "month", "day-of-week")
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
    return [_parse_line(n, line, system) for n, line in enumerate(text.split("\n"), 1)]


def _parse_line(number: int, text: str, system: bool) -> Entry:
    stripped = text.strip(_BLANKS + "\r")
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
    value = raw.rstrip(_BLANKS)
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
    column = len(text.rstrip(_BLANKS + "\r")) + 1
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
    try:
        CronSim(" ".join(tok.text for tok in fields), _EPOCH)
    except Exception:  # cronsim raises CronSimError, and ValueError on some exotic digits
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
    known = " ".join([REBOOT, *ALIASES])
    return Problem("E003", tok.column, f"unknown schedule {tok.text!r}", f"use one of {known}")


def _field_problem(index: int, tok: Token) -> Problem | None:
    words = re.findall(r"[A-Za-z]+", tok.text)
    allowed = _FIELD_WORDS.get(index, frozenset())
    ok = _FIELD_CHARS.fullmatch(tok.text) and all(w.lower() in allowed for w in words)
    if ok:
        probe = ["*"] * 5
        probe[index] = tok.text
        try:
            CronSim(" ".join(probe), _EPOCH)
            return None
        except Exception:  # see _schedule_problem
            pass
    return _bad_field(index, tok)


def _bad_field(index: int, tok: Token) -> Problem:
    message = f"bad {_FIELD_NAMES[index]} field {tok.text!r}"
    if re.search(r"[LW#?]", tok.text.upper()) and not re.fullmatch(r"[A-Za-z]{3}", tok.text):
        message += " (L, W, # and ? are Quartz extensions that cron does not have)"
    fix = f"use {_FIELD_RANGES[index]}, '*', a list (1,15), a range (1-5) or a step (*/10)"
    return Problem("E001", tok.column, message, fix)


def _user_problem(user: Token) -> Problem | None:
    # A path or a sixth field where the user belongs: the line was copied from a user crontab.
    if "/" in user.text or "=" in user.text or _looks_like_field(user.text):
        return Problem("E004", user.column,
                       f"the user field is {user.text!r}: /etc/crontab and /etc/cron.d lines "
                       "need a user name between the schedule and the command",
                       "insert the user, e.g. root, after the five schedule fields")
    return None


def _looks_like_field(word: str) -> bool:
    return bool(re.fullmatch(r"[0-9*][0-9*/,-]*", word))


def _with_env(entries: Iterable[Entry]) -> Iterator[tuple[Entry, dict[str, str]]]:
    """Each entry with the environment cron gives it: assignments apply to the lines below."""
    env: dict[str, str] = {}
    for entry in entries:
        if isinstance(entry, EnvAssignment):
            env[entry.name] = entry.value
        yield entry, dict(env)


# --------------------------------------------------------------------------------------------
# cron's % rule


def _percent_index(command: str) -> int | None:
    """Index of the first unescaped ``%`` (cron do_command.c: a backslash escapes one char)."""
    escaped = False
    for index, ch in enumerate(command):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == "%":
            return index
    return None


def split_percent(command: str) -> tuple[str, str]:
    """``(command, stdin)`` as written: ``stdin`` starts at the first unescaped ``%`` (kept)."""
    index = _percent_index(command)
    if index is None:
        return command, ""
    return command[:index], command[index:]


def _unescape_percent(text: str) -> str:
    """What cron hands to the shell: ``\\%`` becomes ``%``, other backslashes stay."""
    out: list[str] = []
    escaped = False
    for ch in text:
        if escaped and ch == "%":
            out[-1] = "%"
            escaped = False
            continue
        escaped = ch == "\\" and not escaped
        out.append(ch)
    return "".join(out)


def _cron_quote(arg: str) -> str:
    """Quote ``arg`` as one shell word that survives cron's ``%`` rule.

    Each ``%`` becomes ``\\%`` *between* quoted pieces, since inside single quotes a
    backslash before ``%`` could not be expressed (cron would eat it).
    """
    if any(ch in arg for ch in "\n\r\0"):
        raise UsageError(f"argument {arg!r} holds a line break or NUL, which a crontab cannot")
    if arg == "--":
        return "'--'"  # a bare -- would end cronwrap's options in the middle of ours
    if "%" not in arg:
        return shlex.quote(arg)
    return "\\%".join(shlex.quote(piece) if piece else "" for piece in arg.split("%"))


# --------------------------------------------------------------------------------------------
# A small sh lexer: enough to find top-level operators, redirections and words


class _Tok(NamedTuple):
    kind: str  # "word", "op" or "comment"
    text: str
    start: int
    end: int


_OPERATORS = ("<<-", "&&", "||", ";;", "|&", ">>", "<<", "<&", ">&", "<>", ">|")
_OPERATORS += tuple("&|;<>()")
_OP_CHARS = frozenset("&|;<>()")
_CONTROL = frozenset({"&&", "||", ";;", "|&", "&", "|", ";", "(", ")"})
_REDIRECTS = frozenset({"<", ">", ">>", "<<", "<<-", "<&", ">&", "<>", ">|"})
_OUTPUT_REDIRECTS = frozenset({">", ">>", ">|", ">&"})
_BUILTINS = frozenset(
    ". : [ alias bg break cd command continue echo eval exec exit export false fc fg getopts "
    "hash jobs kill let local printf pwd read readonly return set shift source test times "
    "trap true type typeset ulimit umask unalias unset wait declare".split()
)
_RESERVED = frozenset(
    "! { } [[ ]] case coproc do done elif else esac fi for function if in select then time "
    "until while".split()
)
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def _lex(cmd: str) -> list[_Tok] | None:
    """Top-level tokens of ``cmd``; ``None`` when a quote or substitution is left open."""
    toks: list[_Tok] = []
    i = 0
    while i < len(cmd):
        ch = cmd[i]
        if ch in _BLANKS:
            i += 1
        elif ch == "#":  # a comment starts only where a word could start
            toks.append(_Tok("comment", cmd[i:], i, len(cmd)))
            break
        elif ch in _OP_CHARS:
            op = next(o for o in _OPERATORS if cmd.startswith(o, i))
            toks.append(_Tok("op", op, i, i + len(op)))
            i += len(op)
        else:
            end = _word_end(cmd, i)
            if end is None:
                return None
            toks.append(_Tok("word", cmd[i:end], i, end))
            i = end
    return toks


def _word_end(s: str, i: int) -> int | None:
    while i < len(s) and s[i] not in _BLANKS and s[i] not in _OP_CHARS:
        nxt = _skip_unit(s, i)
        if nxt is None:
            return None
        i = nxt
    return i


def _skip_unit(s: str, i: int) -> int | None:
    ch = s[i]
    if ch == "\\":
        return min(i + 2, len(s))
    if ch == "'":
        close = s.find("'", i + 1)
        return None if close < 0 else close + 1
    if ch in "\"`":
        return _skip_quoted(s, i + 1, ch)
    if s.startswith("$(", i):
        return _skip_group(s, i + 1, "(", ")")
    if s.startswith("${", i):
        return _skip_group(s, i + 1, "{", "}")
    return i + 1


def _skip_quoted(s: str, i: int, close: str) -> int | None:
    # Inside "…" and `…` a backslash escapes the next character; "…" may hold $( ) and ` `.
    while i < len(s):
        ch = s[i]
        if ch == close:
            return i + 1
        if ch == "\\":
            i += 2
        elif close == '"' and (ch == "`" or s.startswith(("$(", "${"), i)):
            nxt = _skip_unit(s, i)
            if nxt is None:
                return None
            i = nxt
        else:
            i += 1
    return None


def _skip_group(s: str, i: int, open_: str, close: str) -> int | None:
    depth = 0
    while i < len(s):
        ch = s[i]
        if ch in (open_, close):
            depth += 1 if ch == open_ else -1
            i += 1
            if depth == 0:
                return i
        elif ch in "\\'\"`$":
            nxt = _skip_unit(s, i)
            if nxt is None:
                return None
            i = nxt
        else:
            i += 1
    return None


def _is_io_number(toks: Sequence[_Tok], k: int) -> bool:
    """``2`` in ``2>&1``: digits glued to the redirection that follows."""
    tok = toks[k]
    if tok.kind != "word" or not tok.text.isascii() or not tok.text.isdigit():
        return False
    nxt = toks[k + 1] if k + 1 < len(toks) else None
    return nxt is not None and nxt.text in _REDIRECTS and nxt.start == tok.end


def _commands(toks: Sequence[_Tok]) -> list[list[_Tok]]:
    """The words of each simple command, without redirections, fd numbers or comments."""
    commands: list[list[_Tok]] = [[]]
    target_next = False
    for k, tok in enumerate(toks):
        if tok.kind == "op" and tok.text in _CONTROL:
            commands.append([])
        elif tok.kind == "op":
            target_next = True
        elif tok.kind == "word" and target_next:
            target_next = False
        elif tok.kind == "word" and not _is_io_number(toks, k):
            commands[-1].append(tok)
    return [words for words in commands if words]


def _unquote(raw: str) -> str:
    """The value sh gives a word, near enough for names: quotes and escapes removed."""
    text = _unescape_percent(raw)
    try:
        parts = shlex.split(text)
    except ValueError:
        parts = []
    return parts[0] if len(parts) == 1 else text.replace("'", "").replace('"', "")


def _basename(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1] or path


def _words(cmd: str) -> list[str]:
    """Unquoted words of every simple command (a plain split when the text does not lex)."""
    toks = _lex(cmd)
    if toks is None:
        return cmd.split()
    return [_unquote(tok.text) for words in _commands(toks) for tok in words]


def _backgrounds(cmd: str, shell: str) -> bool:
    """Whether ``cmd`` (run by ``shell``, a basename) starts something in the background: a
    ``&`` control operator at its top level, or in the ``sh -c '…'`` text it starts with.

    ``&&`` is a list and ``>&2`` a redirection (the lexer reads both as operators of their
    own); ``&>`` redirects in bash and zsh but backgrounds the command in a POSIX sh (dash).
    """
    toks = _lex(cmd)
    if toks is None:
        return False  # a quote left open: sh refuses the line and starts nothing
    for k, tok in enumerate(toks):
        if tok.kind != "op" or tok.text != "&":
            continue
        nxt = toks[k + 1] if k + 1 < len(toks) else None
        redirects = nxt is not None and nxt.start == tok.end and nxt.text in (">", ">>")
        if not (redirects and shell in ("bash", "zsh")):
            return True
    inner = _marker(cmd)
    quoted = _single_unquote(cmd, inner.end() - 1) if inner else None
    return quoted is not None and _backgrounds(quoted[0], _basename(inner.group("shell")))


# --------------------------------------------------------------------------------------------
# Job names

# wrapper program: (its options that take a value, positional arguments before the command)
_WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    "env": (frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}), 0),
    "nice": (frozenset({"-n", "--adjustment"}), 0),
    "ionice": (frozenset({"-c", "--class", "-n", "--classdata"}), 0),
    "timeout": (frozenset({"-s", "--signal", "-k", "--kill-after"}), 1),
    "flock": (frozenset({"-w", "--wait", "--timeout", "-E", "--conflict-exit-code"}), 1),
    "sudo": (frozenset({"-u", "--user", "-g", "--group", "-D", "--chdir"}), 0),
    "stdbuf": (frozenset({"-i", "-o", "-e"}), 0),
    "systemd-cat": (frozenset({"-t", "--identifier", "-p", "--priority"}), 0),
    "setlock": (frozenset(), 1),
    "lckdo": (frozenset({"-w"}), 1),
    "taskset": (frozenset(), 1),
    "time": (frozenset({"-f", "--format", "-o", "--output"}), 0),
    **{w: (frozenset(), 0) for w in "nohup chronic cronic run-one ifne exec command".split()},
}
_INTERPRETERS = re.compile(
    r"(python|perl|ruby|php|node|nodejs|bash|sh|dash|zsh|ksh|Rscript|java|run-parts)[0-9.]*"
)
_LOOPS = frozenset({"for", "case", "select", "function", "in"})  # their words are no command
_SCRIPT_GIVERS = frozenset({"-m", "-jar", "-f"})  # python -m MODULE, java -jar X, php -f X
_INLINE_CODE = frozenset({"-c", "-e", "-r", "-E"})  # sh -c '…', perl -e '…': no script name
_NOT_A_NAME = frozenset(
    ". : [ [[ cd test true false sleep echo printf export set unset umask ulimit source exit "
    "wait read trap shift local readonly alias return break continue pwd hash type".split()
)
_SCRIPT_EXTENSIONS = frozenset(
    "sh bash zsh ksh py pl rb php js mjs ts jar lua tcl r exe bin out cmd bat ps1".split()
)


def derive_name(command: str) -> str:
    """A job name for ``command``: the basename, without extension, of its main program.

    ``/usr/local/bin/settle.sh >> log`` → ``settle``; ``cd /srv && ./run.sh`` → ``run``;
    ``php /var/www/artisan schedule:run`` → ``artisan``; ``python3 -m app.jobs`` → ``app.jobs``.
    Builtins such as ``cd``, ``test`` and ``[``, wrappers such as ``nice``, ``flock`` and
    ``timeout``, and interpreters are looked through. Always matches ``NAME_RE``.
    """
    cmd, _ = split_percent(command)
    toks = _lex(cmd)
    if toks is None:
        argvs = [cmd.split()]
    else:
        argvs = [[_unquote(tok.text) for tok in words] for words in _commands(toks)]
    for argv in argvs:
        name = _sanitize(_main_program(argv) or "")
        if name:
            return name
    # nothing but builtins and wrappers: take the first builtin (`exit`), else `env` in `A=1 env`
    candidates = [w for argv in argvs for w in _strip_prefixes(argv)[:1]]
    candidates += [w for argv in argvs for w in argv if not _ASSIGNMENT.match(w)]
    return next(filter(None, map(_sanitize, candidates)), "job")


def _main_program(argv: list[str]) -> str | None:
    words = _strip_prefixes(argv)
    if not words or words[0] in _LOOPS:
        return None
    program = _basename(words[0])
    if program in _NOT_A_NAME:
        return None
    if _INTERPRETERS.fullmatch(program):
        return _script_of(words[1:]) or program
    return words[0]


def _strip_prefixes(argv: list[str]) -> list[str]:
    """Drop assignments, reserved words (``if``, ``then``, ``fi``, ``!``) and wrappers."""
    words = list(argv)
    while words:
        head = _basename(words[0])
        if _ASSIGNMENT.match(words[0]) or words[0] in _RESERVED - _LOOPS:
            words = words[1:]
        elif head in _WRAPPERS:
            words = _skip_wrapper(words, *_WRAPPERS[head])
        else:
            break
    return words


def _skip_wrapper(words: list[str], takes_value: frozenset[str], positional: int) -> list[str]:
    i = 1
    while i < len(words) and (words[i].startswith("-") or _ASSIGNMENT.match(words[i])):
        if words[i] == "--":
            i += 1
            break
        i += 2 if words[i] in takes_value else 1
    return words[i + positional :]


def _script_of(args: list[str]) -> str | None:
    it = iter(args)
    for word in it:
        if word in _SCRIPT_GIVERS:
            return next(it, None)
        if word in _INLINE_CODE:
            return None
        if not word.startswith("-"):
            return word
    return None


def _sanitize(word: str) -> str | None:
    base = _basename(word)
    stem, dot, ext = base.rpartition(".")
    if dot and stem and ext.lower() in _SCRIPT_EXTENSIONS:
        base = stem
    ascii_base = unicodedata.normalize("NFKD", base).encode("ascii", "ignore").decode()
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", ascii_base)
    name = re.sub(r"^[^A-Za-z0-9]+", "", name)[:_NAME_BASE_MAX].rstrip("-._")
    return name or None


def _unique(base: str, used: set[str]) -> str:
    """``base``, else ``base-2``, ``base-3``…; compared without case, for log directories."""
    name, n = base, 2
    while name.lower() in used:
        name, n = f"{base}-{n}", n + 1
    used.add(name.lower())
    return name


# --------------------------------------------------------------------------------------------
# wrap / unwrap

_SHELLS = frozenset("sh bash dash ksh mksh zsh ash yash posh".split())
_SHELL_WORD = re.compile(r"[A-Za-z0-9_./+-]+")
_MARKER = re.compile(r"(?P<shell>[A-Za-z0-9_./+-]+) -c '")
_DEFAULT_SHELL = "/bin/sh"  # what cron runs the line with when the crontab sets no SHELL


class _Wrapped(NamedTuple):
    name: str
    schedule: str | None
    body: str  # everything after "-- "


def wrap(
    text: str,
    *,
    cronwrap: str = "cronwrap",
    extra_args: Sequence[str] = (),
    system: bool = False,
) -> str:
    """Prefix every job of ``text`` with ``cronwrap run``; everything else is kept as it is.

    A job becomes ``<fields> [user] <cronwrap> run -n NAME --schedule 'EXPR' [extra…] --
    <command>``. NAME comes from ``derive_name``, made unique in the file (``-2``, ``-3``…;
    names of lines already carrying cronwrap are taken first). ``EXPR`` is the line's own
    expression. Nothing is added for the zone: cron exports ``CRON_TZ``/``TZ`` lines to the
    job's environment and cronwrap reads them from there.

    Daemon starters are left as they are, byte for byte: ``@reboot`` lines, and commands that
    background something (``&``). cronwrap ends what a job leaves running when its command
    exits, so it would end the daemon seconds after it started (lint's W011). With
    ``--leave-orphans`` in ``extra_args``, or ``CRONWRAP_LEAVE_ORPHANS`` set true above the
    line, they are wrapped like any other (an ``@reboot`` line without ``--schedule``: each
    boot is its own run, keyed by the minute it fired).

    The command, as written (redirections and ``%``-stdin included), follows ``-- ``:

    - a *simple* command (one program, its arguments and redirections, no ``;``, ``&``,
      ``&&``, ``||``, pipe, subshell, leading ``VAR=`` assignment, shell builtin or keyword)
      follows byte for byte. The crontab line is still shell text, so its redirections now
      apply to cronwrap, which passes the job's output through (and keeps a copy).
    - anything else runs under the crontab's shell (``SHELL=``, else ``/bin/sh``) as
      ``/bin/sh -c '<command>'``, single-quoted (``'`` → ``'\\''``). Output redirections at
      the very end (``>> log 2>&1``) stay outside the quotes, on the line, so cronwrap sees
      and captures the job's output; they then cover the whole command instead of its last
      part (``cd /x && ./y >> log`` also logs a failing ``cd``). Input redirections and
      here-documents stay inside. A command that already starts ``sh -c '`` (or bash, …)
      is wrapped this way too, so that ``unwrap`` can tell the two shapes apart.
    - the ``%``-stdin part always stays after the command, outside any quotes, where cron
      looks for it. ``\\%`` inside the quoted text still reaches the shell as ``%``, exactly
      as before; a ``%`` in ``extra_args`` is written ``\\%``.

    Left unchanged as well: lines whose command already starts with a ``cronwrap`` program
    (so ``wrap(wrap(t)) == wrap(t)``), lines with a syntax error (``lint`` reports them), and
    compound commands under a ``SHELL`` that is not a known sh-like shell.
    ``extra_args`` are added to every wrapped line, each shell-quoted.
    """
    head = _head_words(cronwrap, extra_args)
    entries = parse(text, system=system)
    used = {name.lower() for name in _declared_names(entries)}
    lines = [
        _wrap_job(entry, env, head, used)
        if isinstance(entry, Job) and not _ends_its_daemon(entry, extra_args, env)
        else entry.text
        for entry, env in _with_env(entries)
    ]
    return "\n".join(lines)


def _starts_daemon(reboot: bool, command: str, env: Mapping[str, str]) -> bool:
    """``command`` (the line's, or the one cronwrap runs) runs at boot (``reboot``) or
    backgrounds something: what it starts is meant to outlive it."""
    shell = _basename(env.get("SHELL") or _DEFAULT_SHELL)
    return reboot or _backgrounds(split_percent(command)[0], shell)


def _leaves_orphans(run_options: Iterable[str], env: Mapping[str, str]) -> bool:
    """``--leave-orphans`` among cronwrap run's options, or set true in the crontab."""
    setting = env.get("CRONWRAP_LEAVE_ORPHANS", "").strip().lower()
    return "--leave-orphans" in run_options or setting in ("1", "true", "yes", "on")


def _ends_its_daemon(job: Job, extra_args: Sequence[str], env: Mapping[str, str]) -> bool:
    """Wrapping ``job`` would have cronwrap end the daemon it starts as a leftover."""
    return _starts_daemon(job.is_reboot, job.command, env) and \
        not _leaves_orphans(extra_args, env)


def unwrap(text: str, *, system: bool | None = None) -> str:
    """Restore every line ``wrap`` produced to its original text; other lines are kept.

    A line is restored only when it has exactly the shape ``wrap`` writes (the name is the
    one ``derive_name`` gives its command, maybe with a ``-N`` suffix, and ``--schedule``
    is the line's own), so hand-written cronwrap lines with their own names survive.
    ``system=None`` accepts both user and system crontab lines.
    """
    modes = (False, True) if system is None else (system,)
    return "\n".join(_unwrap_line(line, modes) for line in text.split("\n"))


def diff(before: str, after: str, *, filename: str = "crontab") -> str:
    """A unified diff of two versions of a crontab, for ``cronwrap wrap --diff``."""
    lines = difflib.unified_diff(
        _lines_with_ends(before), _lines_with_ends(after), f"a/{filename}", f"b/{filename}"
    )
    # difflib leaves a last line without "\n" glued to the next; say so as diff(1) does
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                   for line in lines)


def _lines_with_ends(text: str) -> list[str]:
    return re.findall(r"[^\n]*\n|[^\n]+$", text)


def _head_words(cronwrap: str, extra_args: Sequence[str]) -> tuple[str, tuple[str, ...]]:
    if isinstance(extra_args, str):
        raise UsageError("extra arguments must be a list of words, not one string")
    own = [a for a in extra_args if a.split("=", 1)[0] in ("-n", "--name", "--schedule")]
    if own:
        raise UsageError(f"wrap sets -n/--name and --schedule itself; remove {own[0]!r}")
    if _basename(cronwrap) != "cronwrap":
        raise UsageError(
            f"cronwrap program {cronwrap!r} must be a path ending in /cronwrap, "
            "so that wrapped lines are recognised (e.g. /usr/local/bin/cronwrap)"
        )
    return _cron_quote(cronwrap), tuple(_cron_quote(arg) for arg in extra_args)


def _wrap_job(
    job: Job, env: Mapping[str, str], head: tuple[str, tuple[str, ...]], used: set[str]
) -> str:
    if job.problem or _is_cronwrap(job.command):
        return job.text
    body = _render_command(job.command, _shell_for(env))
    if body is None:
        return job.text
    program, extras = head
    words = [program, "run", "-n", _unique(derive_name(job.command), used)]
    if not job.is_reboot:
        words += ["--schedule", shlex.quote(job.schedule)]
    return job.text[: job.command_start] + " ".join([*words, *extras, "--", body])


def _shell_for(env: Mapping[str, str]) -> str | None:
    """The shell cron runs this line with, as a word for ``-c``; ``None`` if not sh-like."""
    shell = env.get("SHELL") or _DEFAULT_SHELL
    if _SHELL_WORD.fullmatch(shell) and _basename(shell) in _SHELLS:
        return shell
    return None


def _render_command(command: str, shell: str | None) -> str | None:
    """What follows ``-- `` for ``command``; ``None`` when it needs an unknown shell."""
    cmd, stdin = split_percent(command)
    if _is_simple(cmd) and not _marker(command):
        return command
    if shell is None:
        return None
    toks = _lex(cmd)
    cut = _tail_start(toks) if toks else None
    inner, tail = (cmd, "") if cut is None else (cmd[:cut], cmd[cut:])
    return f"{shell} -c {_single_quote(inner)}{tail}{stdin}"


def _is_simple(cmd: str) -> bool:
    """One external program with arguments and redirections: cronwrap can exec it as is."""
    toks = _lex(cmd)
    if toks is None:
        return False
    if any(t.kind == "op" and (t.text in _CONTROL or t.text.startswith("<<")) for t in toks):
        return False
    commands = _commands(toks)
    if len(commands) != 1:
        return False
    first = commands[0][0].text
    return not _ASSIGNMENT.match(first) and _unquote(first) not in _BUILTINS | _RESERVED


def _tail_start(toks: Sequence[_Tok]) -> int | None:
    """Where the trailing output redirections of a compound command may be cut off.

    Only ``>``, ``>>``, ``>|`` and ``>&`` on fd 1 or 2 (or none), after a word or ``)``:
    ``a | b >> log 2>&1`` cuts before `` >>``; ``a; b < in`` and ``a > log # note`` do not.
    """
    k = len(toks)
    while (start := _redirect_start(toks, k)) is not None:
        k = start
    if k in (0, len(toks)):
        return None
    before = toks[k - 1]
    return before.end if before.kind == "word" or before.text == ")" else None


def _redirect_start(toks: Sequence[_Tok], k: int) -> int | None:
    """Start of the output redirection ending just before ``toks[k]``, if there is one."""
    if k < 2 or toks[k - 2].text not in _OUTPUT_REDIRECTS or toks[k - 2].kind != "op":
        return None
    op, target = toks[k - 2], toks[k - 1]
    if target.kind != "word" or (op.text == ">&" and not re.fullmatch(r"[0-9]|-", target.text)):
        return None
    start = k - 2
    if start >= 1 and _is_io_number(toks, start - 1):
        if toks[start - 1].text not in ("1", "2"):
            return None
        start -= 1
    return start


def _single_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _single_unquote(text: str, i: int) -> tuple[str, int] | None:
    """Read back ``_single_quote``'s output starting at ``text[i]``: (value, end index)."""
    parts: list[str] = []
    while True:
        close = text.find("'", i + 1)
        if close < 0:
            return None
        parts.append(text[i + 1 : close])
        if not text.startswith("\\''", close + 1):
            return "".join(parts), close + 1
        parts.append("'")
        i = close + 3


def _marker(body: str) -> re.Match[str] | None:
    match = _MARKER.match(body)
    return match if match and _basename(match.group("shell")) in _SHELLS else None


def _is_cronwrap(command: str) -> bool:
    words = _option_words(command)[0]
    return bool(words) and _basename(_unquote(words[0])) == "cronwrap"


def _option_words(command: str) -> tuple[list[str], int | None]:
    """The raw words before a bare ``--`` and the index just past ``-- ``.

    The index is ``None`` when no ``-- `` followed by a command was found.
    """
    words: list[str] = []
    i = 0
    while True:
        while i < len(command) and command[i] in _BLANKS:
            i += 1
        end = _word_end(command, i) if i < len(command) else None
        if end is None or end == i:
            return words, None
        if command[i:end] == "--":
            ok = command.startswith(" ", end) and end + 1 < len(command)
            return words, end + 1 if ok else None
        words.append(command[i:end])
        i = end


def _declared_names(entries: Iterable[Entry]) -> Iterator[str]:
    """``-n``/``--name`` values of lines that already carry cronwrap."""
    for entry in entries:
        if isinstance(entry, Job) and _is_cronwrap(entry.command):
            words = _option_words(entry.command)[0]
            for flag, value in zip(words, words[1:]):
                if flag in ("-n", "--name"):
                    yield _unquote(value)
            yield from (w[len("--name=") :] for w in words if w.startswith("--name="))


def _unwrap_line(line: str, modes: Iterable[bool]) -> str:
    for system in modes:
        entry = _parse_line(0, line, system)
        if isinstance(entry, Job) and entry.problem is None:
            original = _unwrap_job(entry)
            if original is not None:
                return original
    return line


def _unwrap_job(job: Job) -> str | None:
    wrapped = _split_wrapped(job.command)
    if wrapped is None:
        return None
    original = _original_command(wrapped.body)
    if original is None or _is_cronwrap(original):
        return None
    base = derive_name(original)
    if wrapped.name != base and not re.fullmatch(re.escape(base) + r"-[0-9]+", wrapped.name):
        return None
    if wrapped.schedule != (None if job.is_reboot else job.schedule):
        return None
    return job.text[: job.command_start] + original


def _split_wrapped(command: str) -> _Wrapped | None:
    words, body_start = _option_words(command)
    if body_start is None or len(words) < 4:
        return None
    program, run, flag, name = words[:4]
    if _basename(_unquote(program)) != "cronwrap" or (run, flag) != ("run", "-n"):
        return None
    if not NAME_RE.fullmatch(name):
        return None
    schedule = _unquote(words[5]) if words[4:5] == ["--schedule"] and len(words) > 5 else None
    return _Wrapped(name, schedule, command[body_start:])


def _original_command(body: str) -> str | None:
    """The command ``wrap`` turned into ``body``; ``None`` if wrap would not write ``body``."""
    match = _marker(body)
    if match is None:
        return body if _render_command(body, _DEFAULT_SHELL) == body else None
    quoted = _single_unquote(body, match.end() - 1)
    if quoted is None:
        return None
    inner, end = quoted
    original = inner + body[end:]
    return original if _render_command(original, match.group("shell")) == body else None


# --------------------------------------------------------------------------------------------
# lint

Severity = Literal["error", "warning", "info"]


@dataclass(frozen=True)
class Finding:
    """One lint finding. ``line`` and ``column`` are 1-based; ``column`` may be unknown."""

    line: int
    column: int | None
    severity: Severity
    code: str
    message: str
    fix: str


def has_errors(findings: Iterable[Finding]) -> bool:
    return any(f.severity == "error" for f in findings)


def format_finding(finding: Finding, filename: str) -> str:
    """``crontab:3:1: error: E001 bad minute field '61' — fix: use 0-59, …`` (one line)."""
    where = f"{filename}:{finding.line}:"
    if finding.column is not None:
        where += f"{finding.column}:"
    text = f"{where} {finding.severity}: {finding.code} {finding.message}"
    if finding.fix:
        text += f" — fix: {finding.fix}"
    return re.sub(r"[\x00-\x1f\x7f]", "?", text)  # one line on a terminal, whatever the input


# Programs that bound a run or keep two runs apart ("chronic-style" wrappers count too).
_GUARDS = frozenset(
    "flock timeout cronwrap run-one run-this-one chronic cronic lckdo setlock solo lockrun "
    "lockf timelimit with-lock-ex".split()
)
_LOG_SINKS = frozenset("logger systemd-cat tee mail mailx sendmail s-nail".split())


@dataclass
class _LintState:
    system_zone: str
    now: datetime
    seen: dict[tuple[str, str], tuple[int, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class _Facts:
    """What the checks need to know about one valid job, worked out once."""

    job: Job
    env: Mapping[str, str]
    cmd: str  # the command before its %-stdin part, as written
    toks: list[_Tok] | None
    sim: CronSim | None  # parsed schedule; None for @reboot
    zone: str | None  # the zone its schedule is read in; None if unknown
    zone_source: str | None  # "CRON_TZ", "TZ" or None for the system zone


def lint(
    text: str, *, system: bool = False, system_zone: str, now: datetime
) -> list[Finding]:
    """The classic crontab mistakes in ``text``, in line order; never raises on any text.

    ``system_zone`` is the host's zone name (``UTC``, ``Europe/Berlin``); ``now`` starts the
    one-year window searched for DST transitions (a naive ``now`` is taken as UTC). Codes:
    E001 bad field, E002 missing fields/command or a sixth field, E003 unknown @alias,
    E004 bad user field, E005 unescaped %, E006 unknown zone; W001 relative command or PATH
    assumption, W002 day-of-month OR day-of-week, W003 DST gap, W004 DST overlap, W005 may
    overlap itself, W006 output only to local mail, W007 output discarded (MAILTO=""),
    W008 same command twice, W009 TZ without CRON_TZ, W010 no newline at the end, W011 a
    daemon starter (``@reboot``, ``&``) under cronwrap run without --leave-orphans;
    I001 the ``*`` AND quirk, I002 CRON_TZ differs from the system zone.
    """
    if _zone(system_zone) is None:
        raise UsageError(f"system zone {system_zone!r} is not a known time zone (e.g. UTC)")
    state = _LintState(system_zone, now if now.tzinfo else now.replace(tzinfo=timezone.utc))
    entries = parse(text, system=system)
    findings: list[Finding] = []
    for entry, env in _with_env(entries):
        findings.extend(_lint_entry(entry, env, state))
    findings.extend(_check_last_newline(text, entries))
    return findings


def _lint_entry(entry: Entry, env: dict[str, str], state: _LintState) -> Iterable[Finding]:
    if isinstance(entry, EnvAssignment):
        return _check_env(entry, env, state)
    if isinstance(entry, Invalid | Job) and entry.problem:
        return [_finding(entry.number, "error", entry.problem)]
    if isinstance(entry, Job):
        facts = _facts(entry, env, state.system_zone)
        return [f for check in _JOB_CHECKS for f in check(facts, state)]
    return []


def _finding(line: int, severity: Severity, problem: Problem) -> Finding:
    return Finding(line, problem.column, severity, problem.code, problem.message, problem.fix)


def _facts(job: Job, env: Mapping[str, str], system_zone: str) -> _Facts:
    cmd, _ = split_percent(job.command)
    sim = CronSim(job.expression, _EPOCH) if job.expression else None
    zone, source = system_zone, None
    for variable in ("CRON_TZ", "TZ"):  # the order cronwrap run takes its --tz default in
        key = _zone_key(env.get(variable, ""))
        if key:
            zone, source = key, variable
            break
    known = zone if _zone(zone) else None
    return _Facts(job, env, cmd, _lex(cmd), sim, known, source)


def _zone_key(value: str) -> str | None:
    """The zone a TZ-style value names, as ``cronwrap.schedule`` reads it; ``None`` for unset
    or for the system zone (``TZ=:/etc/localtime``). ``:Europe/Berlin`` and
    ``:/usr/share/zoneinfo/Europe/Berlin`` are POSIX spellings of ``Europe/Berlin``."""
    key = value.strip().lstrip(":")
    if key.startswith("/"):
        return key.split("/zoneinfo/", 1)[1] if "/zoneinfo/" in key else None
    return key or None


def _zone(name: str) -> ZoneInfo | None:
    try:
        return ZoneInfo(name)
    except Exception:  # ZoneInfoNotFoundError, or ValueError for names like "../x" or ""
        return None


def _col(facts: _Facts, offset: int) -> int:
    """Column of ``offset`` within the command field."""
    return facts.job.command_start + offset + 1


# --- checks on environment lines and on the file ---------------------------------------------


def _check_env(entry: EnvAssignment, env: dict[str, str], state: _LintState) -> list[Finding]:
    zone = _zone_key(entry.value) if entry.name in ("CRON_TZ", "TZ") else None
    if zone is None:
        return []
    if _zone(zone) is None:
        return [Finding(entry.number, entry.value_column, "error", "E006",
                        f"{entry.name}={entry.value!r} is not a known time zone",
                        "use a tz database name such as Europe/Berlin or UTC")]
    if entry.name == "TZ" and not env.get("CRON_TZ") and zone != state.system_zone:
        return [Finding(entry.number, 1, "warning", "W009",
                        f"TZ={zone} without CRON_TZ: cron schedules the lines below in the "
                        f"system zone ({state.system_zone}), but cronwrap reads their "
                        f"--schedule in {zone}, so its slots would not match the firings",
                        f"add CRON_TZ={zone} if the times are meant in {zone}, else remove TZ")]
    return []


def _check_last_newline(text: str, entries: list[Entry]) -> list[Finding]:
    last = entries[-1]
    if text.endswith("\n") or not isinstance(last, Job | Invalid):
        return []
    return [Finding(last.number, None, "warning", "W010",
                    "the last line has no newline at the end: some crons ignore such a line",
                    "end the file with a newline")]


# --- checks on job lines ------------------------------------------------------------------


def _first_word(facts: _Facts) -> tuple[str, int] | None:
    """The program the command starts with (after assignments) and its offset."""
    if facts.toks is None:
        match = re.search(r"[^ \t]+", facts.cmd)
        return (match.group(), match.start()) if match else None
    for words in _commands(facts.toks)[:1]:
        for tok in words:
            if not _ASSIGNMENT.match(tok.text):
                return _unquote(tok.text), tok.start
    return None


def _check_command_word(facts: _Facts, state: _LintState) -> Iterable[Finding]:
    first = _first_word(facts)
    if first is None:
        return
    word, offset = first
    line, column = facts.job.number, _col(facts, offset)
    if len(facts.job.fields) == 5 and _looks_like_field(word):
        yield Finding(line, column, "error", "E002",
                      f"the command starts with {word!r}: a sixth schedule field? cron has "
                      "five (no seconds)", "remove the extra field")
    elif _relies_on_lookup(word):
        finding = _path_finding(facts, word, line, column)
        if finding:
            yield finding


def _relies_on_lookup(word: str) -> bool:
    expands = word.startswith(("/", "~")) or "$" in word or "`" in word
    return bool(word) and not expands and word not in _BUILTINS | _RESERVED


def _path_finding(facts: _Facts, word: str, line: int, column: int) -> Finding | None:
    if "/" in word:
        return Finding(line, column, "warning", "W001",
                       f"relative path {word!r}: cron starts jobs in the owner's home "
                       "directory", "use an absolute path")
    if "PATH" in facts.env:
        return None  # the file chose its PATH; whether the program is on it needs the disk
    hint = " (a system crontab line in a user crontab?)" if word == "root" else ""
    return Finding(line, column, "warning", "W001",
                   f"{word!r} is looked up in cron's default PATH ({_DEFAULT_PATH}), which "
                   f"has no /usr/local/bin{hint}",
                   "use an absolute path, or set PATH=… at the top of the crontab")


def _check_percent(facts: _Facts, state: _LintState) -> Iterable[Finding]:
    index = _percent_index(facts.job.command)
    if index is None:
        return
    yield Finding(facts.job.number, _col(facts, index), "error", "E005",
                  "unescaped %: cron ends the command here and sends the rest to its standard "
                  "input (date +%Y must be written date +\\%Y in a crontab)",
                  "write \\% for a percent sign")


def _check_days(facts: _Facts, state: _LintState) -> Iterable[Finding]:
    if len(facts.job.fields) != 5:
        return
    dom, dow = facts.job.fields[2], facts.job.fields[4]
    line = facts.job.number
    if not dom.text.startswith("*") and not dow.text.startswith("*"):
        yield Finding(line, dom.column, "warning", "W002",
                      f"day-of-month {dom.text!r} and day-of-week {dow.text!r} are both set: "
                      "cron runs the job on days matching EITHER (0 0 1-7 * 1 runs on the "
                      "1st-7th and on every Monday)",
                      "keep one of them '*' and test the other in the command, e.g. "
                      "[ \"$(date +\\%u)\" = 1 ] && …")
    for tok, other in ((dom, dow), (dow, dom)):
        if tok.text.startswith("*") and tok.text != "*" and other.text != "*":
            yield Finding(line, tok.column, "info", "I001",
                          f"{tok.text!r} starts with '*', so cron requires day-of-month AND "
                          "day-of-week to match, unlike the usual OR rule",
                          "make sure both must match; write the days without '*' for OR")


def _check_overlap(facts: _Facts, state: _LintState) -> Iterable[Finding]:
    if facts.sim is None or _is_guarded(facts):
        return
    gap = _shortest_gap(facts.sim)
    if gap is None:
        return
    yield Finding(facts.job.number, facts.job.fields[0].column, "warning", "W005",
                  f"runs as often as every {gap} min with no lock or timeout: it may overlap "
                  f"itself if a run takes longer than {gap} min",
                  f"wrap it with cronwrap run --timeout {gap}m (overlapping runs are skipped "
                  "by default); cronwrap wrap does the whole file")


def _shortest_gap(sim: CronSim) -> int | None:
    """Minutes between the closest two firings, when that is under an hour."""
    minutes = sorted(sim.minutes)
    if len(minutes) < 2:
        return None
    gaps = [b - a for a, b in zip(minutes, minutes[1:])]
    if any((hour + 1) % 24 in sim.hours for hour in sim.hours):
        gaps.append(60 - minutes[-1] + minutes[0])  # from the last of one hour to the next
    return min(gaps)


def _is_guarded(facts: _Facts) -> bool:
    return any(_basename(word) in _GUARDS for word in _words(facts.cmd))


def _check_output(facts: _Facts, state: _LintState) -> Iterable[Finding]:
    if _is_cronwrap(facts.job.command) or _redirected(facts):
        return
    mailto = facts.env.get("MAILTO")
    line, column = facts.job.number, facts.job.command_start + 1
    if mailto is None:
        yield Finding(line, column, "warning", "W006",
                      "output is neither redirected nor sent by MAILTO: it goes to the "
                      "owner's local mailbox, where it is usually lost",
                      "append >> /var/log/NAME.log 2>&1, set MAILTO=, or wrap with cronwrap")
    elif not mailto.strip():
        yield Finding(line, column, "warning", "W007",
                      'MAILTO="" and no redirection: the output is silently discarded',
                      "append >> /var/log/NAME.log 2>&1, or wrap with cronwrap (keeps a log)")


def _redirected(facts: _Facts) -> bool:
    toks = facts.toks
    if toks is None:
        return ">" in facts.cmd
    for k, tok in enumerate(toks):
        if tok.kind != "op":
            continue
        if tok.text in (">", ">>", ">|"):
            return True
        nxt = toks[k + 1] if k + 1 < len(toks) else None
        if tok.text in ("|", "|&") and nxt and _basename(_unquote(nxt.text)) in _LOG_SINKS:
            return True
    return False


def _check_orphans(facts: _Facts, state: _LintState) -> Iterable[Finding]:
    """A daemon starter under ``cronwrap run``, which ends what its command leaves running."""
    words, body_start = _option_words(facts.cmd)
    options = [_unquote(word) for word in words]
    if options[1:2] != ["run"] or _basename(options[0]) != "cronwrap" or \
            _leaves_orphans(options, facts.env):
        return
    command = facts.cmd if body_start is None else facts.cmd[body_start:]
    # An @reboot line with a --schedule catches up that schedule's slot after the host was
    # off (README, "Hosts that were off"): a job that ends, not a daemon starter.
    scheduled = "CRONWRAP_SCHEDULE" in facts.env or any(
        option == "--schedule" or option.startswith("--schedule=") for option in options)
    reboot = facts.job.is_reboot and not scheduled
    if not _starts_daemon(reboot, command, facts.env):
        return
    what = "an @reboot line without --schedule" if reboot else \
        "a command that backgrounds a process (&)"
    yield Finding(facts.job.number, facts.job.command_start + 1, "warning", "W011",
                  f"{what} under cronwrap run without --leave-orphans: cronwrap ends what the "
                  "command leaves running when it exits, so a daemon it starts is killed "
                  "within seconds",
                  "unwrap the line (cronwrap wrap --unwrap), or add --leave-orphans to its "
                  "cronwrap run options")


def _check_duplicate(facts: _Facts, state: _LintState) -> Iterable[Finding]:
    job = facts.job
    key = (job.user.text if job.user else "", job.command.strip(_BLANKS + "\r"))
    if key not in state.seen:
        state.seen[key] = (job.number, job.schedule)
        return
    first, schedule = state.seen[key]
    if schedule == job.schedule:
        why = f"line {first} runs the same command on the same schedule: it runs twice"
    else:
        why = (f"line {first} runs the same command ({schedule}): cronwrap wrap names them "
               f"{derive_name(job.command)} and {derive_name(job.command)}-2, separate jobs")
    yield Finding(job.number, job.command_start + 1, "warning", "W008", why,
                  "delete one line, or give both the same cronwrap -n if they are one job")


# --- time zones and DST ----------------------------------------------------------------------


class _Transition(NamedTuple):
    at: int  # POSIX time of the change
    before: timedelta  # UTC offset just before
    after: timedelta  # UTC offset from then on

    def local_span(self) -> tuple[datetime, datetime]:
        """The wall-clock times skipped (spring forward) or repeated (fall back)."""
        utc = datetime.fromtimestamp(self.at, timezone.utc).replace(tzinfo=None)
        return utc + min(self.before, self.after), utc + max(self.before, self.after)


@lru_cache(maxsize=64)
def _transitions(zone_name: str, start: date) -> tuple[_Transition, ...]:
    """Offset changes in the year after ``start``: sampled daily, then bisected to the second."""
    zone = ZoneInfo(zone_name)
    t = int(datetime.combine(start, time(), timezone.utc).timestamp())
    found = []
    for _ in range(366):
        if _offset(zone, t) != _offset(zone, t + 86400):
            found.append(_bisect(zone, t, t + 86400))
        t += 86400
    return tuple(found)


def _offset(zone: ZoneInfo, ts: int) -> timedelta:
    return datetime.fromtimestamp(ts, zone).utcoffset() or timedelta(0)


def _bisect(zone: ZoneInfo, lo: int, hi: int) -> _Transition:
    before = _offset(zone, lo)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if _offset(zone, mid) == before else (lo, mid)
    return _Transition(hi, before, _offset(zone, hi))


def _check_dst(facts: _Facts, state: _LintState) -> Iterable[Finding]:
    job = facts.job
    if facts.sim is None or facts.zone is None or job.expression is None:
        return
    minute, hour = job.expression.split()[:2]
    if hour.startswith("*"):
        return  # wildcard hours follow real time: nothing is moved or repeated
    for tr in _transitions(facts.zone, state.now.astimezone(timezone.utc).date()):
        start, end = tr.local_span()
        fire = next(CronSim(job.expression, start - timedelta(seconds=1)))
        if fire < end:
            yield _dst_finding(facts, tr, fire, fixed=not minute.startswith("*"))


def _dst_finding(facts: _Facts, tr: _Transition, fire: datetime, fixed: bool) -> Finding:
    start, end = tr.local_span()
    span, day, zone = f"{start:%H:%M}–{end:%H:%M}", f"{start:%Y-%m-%d}", facts.zone
    if tr.after > tr.before:
        code, what = "W003", f"clocks jump from {start:%H:%M} to {end:%H:%M}"
        effect = (f"{fire:%H:%M} does not exist; cron runs the job once, right after the jump"
                  if fixed else f"the runs in {span} do not happen")
    else:
        code, what = "W004", f"clocks go back from {end:%H:%M} to {start:%H:%M}"
        effect = (f"{fire:%H:%M} happens twice; cron runs the job once, at the first"
                  if fixed else f"the runs in {span} happen twice")
    return Finding(facts.job.number, facts.job.fields[0].column, "warning", code,
                   f"on {day} in {zone} {what}: {effect}",
                   f"schedule it outside {span}, or set CRON_TZ=UTC and give UTC times")


def _check_zone(facts: _Facts, state: _LintState) -> Iterable[Finding]:
    job = facts.job
    if facts.zone_source != "CRON_TZ" or facts.zone is None or job.expression is None:
        return
    if facts.zone == state.system_zone:
        return
    fire = next(CronSim(job.expression, state.now.astimezone(ZoneInfo(facts.zone))))
    here = fire.astimezone(ZoneInfo(state.system_zone))
    if fire.utcoffset() == here.utcoffset():
        return
    minute, hour = job.expression.split()[:2]
    if minute.startswith("*") or hour.startswith("*"):
        said = f"the schedule is read in {facts.zone}, not in the system zone {state.system_zone}"
    else:
        day = "" if here.date() == fire.date() else (
            " (the day before)" if here.date() < fire.date() else " (the day after)")
        said = f"{fire:%H:%M} {facts.zone} is {here:%H:%M} {state.system_zone} here{day}"
    yield Finding(job.number, job.fields[0].column, "info", "I002", said,
                  "nothing to fix if that is meant; cronwrap reads CRON_TZ as cron does")


_JOB_CHECKS = (
    _check_command_word,
    _check_percent,
    _check_days,
    _check_dst,
    _check_zone,
    _check_overlap,
    _check_output,
    _check_duplicate,
    _check_orphans,
)
