"""``cronwrap wrap`` and ``--unwrap``: put ``cronwrap run`` in front of each job of a
crontab, and take it away again, byte for byte; and what a ``cronwrap run`` line says."""

from __future__ import annotations

import difflib
import re
import shlex
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import NamedTuple

from cronwrap.crontab.entries import Entry, Job, parse, parse_line, with_env
from cronwrap.crontab.names import NAME_RE, derive_name, unique
from cronwrap.crontab.shell import (
    ASSIGNMENT,
    BUILTINS,
    CONTROL,
    OUTPUT_REDIRECTS,
    RESERVED,
    SHELLS,
    Tok,
    backgrounds,
    basename,
    cron_quote,
    is_io_number,
    lex,
    option_words,
    shell_marker,
    simple_commands,
    single_quote,
    single_unquote,
    split_percent,
    unquote,
)
from cronwrap.errors import UsageError

_SHELL_WORD = re.compile(r"[A-Za-z0-9_./+-]+")
DEFAULT_SHELL = "/bin/sh"  # what cron runs the line with when the crontab sets no SHELL


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
    used = {name.lower(): 2 for name in _declared_names(entries)}
    lines = [
        _wrap_job(entry, env, head, used)
        if isinstance(entry, Job) and not _ends_its_daemon(entry, extra_args, env)
        else entry.text
        for entry, env in with_env(entries)
    ]
    return "\n".join(lines)


def starts_daemon(reboot: bool, command: str, env: Mapping[str, str]) -> bool:
    """``command`` (the line's, or the one cronwrap runs) runs at boot (``reboot``) or
    backgrounds something: what it starts is meant to outlive it."""
    shell = basename(env.get("SHELL") or DEFAULT_SHELL)
    return reboot or backgrounds(split_percent(command)[0], shell)


def leaves_orphans(run_options: Iterable[str], env: Mapping[str, str]) -> bool:
    """``--leave-orphans`` among cronwrap run's options, or set true in the crontab."""
    setting = env.get("CRONWRAP_LEAVE_ORPHANS", "").strip().lower()
    return "--leave-orphans" in run_options or setting in ("1", "true", "yes", "on")


def _ends_its_daemon(job: Job, extra_args: Sequence[str], env: Mapping[str, str]) -> bool:
    """Wrapping ``job`` would have cronwrap end the daemon it starts as a leftover."""
    return starts_daemon(job.is_reboot, job.command, env) and \
        not leaves_orphans(extra_args, env)


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
    if basename(cronwrap) != "cronwrap":
        raise UsageError(
            f"cronwrap program {cronwrap!r} must be a path ending in /cronwrap, "
            "so that wrapped lines are recognised (e.g. /usr/local/bin/cronwrap)"
        )
    return cron_quote(cronwrap), tuple(cron_quote(arg) for arg in extra_args)


def _wrap_job(
    job: Job, env: Mapping[str, str], head: tuple[str, tuple[str, ...]], used: dict[str, int]
) -> str:
    if job.problem or is_cronwrap(job.command):
        return job.text
    body = _render_command(job.command, _shell_for(env))
    if body is None:
        return job.text
    program, extras = head
    words = [program, "run", "-n", unique(derive_name(job.command), used)]
    if not job.is_reboot:
        words += ["--schedule", shlex.quote(job.schedule)]
    return job.text[: job.command_start] + " ".join([*words, *extras, "--", body])


def _shell_for(env: Mapping[str, str]) -> str | None:
    """The shell cron runs this line with, as a word for ``-c``; ``None`` if not sh-like."""
    shell = env.get("SHELL") or DEFAULT_SHELL
    if _SHELL_WORD.fullmatch(shell) and basename(shell) in SHELLS:
        return shell
    return None


def _render_command(command: str, shell: str | None) -> str | None:
    """What follows ``-- `` for ``command``; ``None`` when it needs an unknown shell."""
    cmd, stdin = split_percent(command)
    if _is_simple(cmd) and not shell_marker(command):
        return command
    if shell is None:
        return None
    toks = lex(cmd)
    cut = _tail_start(toks) if toks else None
    inner, tail = (cmd, "") if cut is None else (cmd[:cut], cmd[cut:])
    return f"{shell} -c {single_quote(inner)}{tail}{stdin}"


def _is_simple(cmd: str) -> bool:
    """One external program with arguments and redirections: cronwrap can exec it as is."""
    toks = lex(cmd)
    if toks is None:
        return False
    if any(t.kind == "op" and (t.text in CONTROL or t.text.startswith("<<")) for t in toks):
        return False
    commands = simple_commands(toks)
    if len(commands) != 1:
        return False
    first = commands[0][0].text
    return not ASSIGNMENT.match(first) and unquote(first) not in BUILTINS | RESERVED


def _tail_start(toks: Sequence[Tok]) -> int | None:
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


def _redirect_start(toks: Sequence[Tok], k: int) -> int | None:
    """Start of the output redirection ending just before ``toks[k]``, if there is one."""
    if k < 2 or toks[k - 2].text not in OUTPUT_REDIRECTS or toks[k - 2].kind != "op":
        return None
    op, target = toks[k - 2], toks[k - 1]
    if target.kind != "word" or (op.text == ">&" and not re.fullmatch(r"[0-9]|-", target.text)):
        return None
    start = k - 2
    if start >= 1 and is_io_number(toks, start - 1):
        if toks[start - 1].text not in ("1", "2"):
            return None
        start -= 1
    return start


def is_cronwrap(command: str) -> bool:
    """Whether ``command`` starts with a ``cronwrap`` program (a line already wrapped)."""
    words = option_words(command)[0]
    return bool(words) and basename(unquote(words[0])) == "cronwrap"


def _declared_names(entries: Iterable[Entry]) -> Iterator[str]:
    """``-n``/``--name`` values of lines that already carry cronwrap."""
    for entry in entries:
        if isinstance(entry, Job) and is_cronwrap(entry.command):
            words = option_words(entry.command)[0]
            for flag, value in zip(words, words[1:]):
                if flag in ("-n", "--name"):
                    yield unquote(value)
            yield from (w[len("--name=") :] for w in words if w.startswith("--name="))


def _unwrap_line(line: str, modes: Iterable[bool]) -> str:
    for system in modes:
        entry = parse_line(0, line, system)
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
    if original is None or is_cronwrap(original):
        return None
    base = derive_name(original)
    if wrapped.name != base and not re.fullmatch(re.escape(base) + r"-[0-9]+", wrapped.name):
        return None
    if wrapped.schedule != (None if job.is_reboot else job.schedule):
        return None
    return job.text[: job.command_start] + original


def _split_wrapped(command: str) -> _Wrapped | None:
    words, body_start = option_words(command)
    if body_start is None or len(words) < 4:
        return None
    program, run, flag, name = words[:4]
    if basename(unquote(program)) != "cronwrap" or (run, flag) != ("run", "-n"):
        return None
    if not NAME_RE.fullmatch(name):
        return None
    schedule = unquote(words[5]) if words[4:5] == ["--schedule"] and len(words) > 5 else None
    return _Wrapped(name, schedule, command[body_start:])


def _original_command(body: str) -> str | None:
    """The command ``wrap`` turned into ``body``; ``None`` if wrap would not write ``body``."""
    match = shell_marker(body)
    if match is None:
        return body if _render_command(body, DEFAULT_SHELL) == body else None
    quoted = single_unquote(body, match.end() - 1)
    if quoted is None:
        return None
    inner, end = quoted
    original = inner + body[end:]
    return original if _render_command(original, match.group("shell")) == body else None
