"""Shell words in crontab commands: cron's ``%`` rule, quoting, and a small sh lexer.

Enough sh to find a command's top-level operators, redirections and words, to quote a word
so that it survives cron and sh, and to read back what cronwrap's own lines quoted.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from typing import NamedTuple

from cronwrap.errors import UsageError

BLANKS = " \t"

# --- cron's % rule ---------------------------------------------------------------------


def percent_index(command: str) -> int | None:
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
    index = percent_index(command)
    if index is None:
        return command, ""
    return command[:index], command[index:]


def unescape_percent(text: str) -> str:
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


def cron_quote(arg: str) -> str:
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


# --- a small sh lexer: enough to find top-level operators, redirections and words -----


class Tok(NamedTuple):
    kind: str  # "word", "op" or "comment"
    text: str
    start: int
    end: int


_OPERATORS = ("<<-", "&&", "||", ";;", "|&", ">>", "<<", "<&", ">&", "<>", ">|", *"&|;<>()")
_OP_CHARS = frozenset("&|;<>()")
CONTROL = frozenset({"&&", "||", ";;", "|&", "&", "|", ";", "(", ")"})
_REDIRECTS = frozenset({"<", ">", ">>", "<<", "<<-", "<&", ">&", "<>", ">|"})
OUTPUT_REDIRECTS = frozenset({">", ">>", ">|", ">&"})
BUILTINS = frozenset(
    ". : [ alias bg break cd command continue echo eval exec exit export false fc fg getopts "
    "hash jobs kill let local printf pwd read readonly return set shift source test times "
    "trap true type typeset ulimit umask unalias unset wait declare".split()
)
RESERVED = frozenset(
    "! { } [[ ]] case coproc do done elif else esac fi for function if in select then time "
    "until while".split()
)
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def lex(cmd: str) -> list[Tok] | None:
    """Top-level tokens of ``cmd``; ``None`` when a quote or substitution is left open."""
    toks: list[Tok] = []
    i = 0
    while i < len(cmd):
        ch = cmd[i]
        if ch in BLANKS:
            i += 1
        elif ch == "#":  # a comment starts only where a word could start
            toks.append(Tok("comment", cmd[i:], i, len(cmd)))
            break
        elif ch in _OP_CHARS:
            op = next(o for o in _OPERATORS if cmd.startswith(o, i))
            toks.append(Tok("op", op, i, i + len(op)))
            i += len(op)
        else:
            end = word_end(cmd, i)
            if end is None:
                return None
            toks.append(Tok("word", cmd[i:end], i, end))
            i = end
    return toks


def word_end(s: str, i: int) -> int | None:
    while i < len(s) and s[i] not in BLANKS and s[i] not in _OP_CHARS:
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
        nested = close == '"' and (ch == "`" or s.startswith(("$(", "${"), i))
        nxt = i + 2 if ch == "\\" else _skip_unit(s, i) if nested else i + 1
        if nxt is None:
            return None
        i = nxt
    return None


def _skip_group(s: str, i: int, open_: str, close: str) -> int | None:
    depth = 0
    while i < len(s):
        ch = s[i]
        if ch in (open_, close):
            depth += 1 if ch == open_ else -1
            if depth == 0:
                return i + 1
        step = _skip_unit(s, i) if ch in "\\'\"`$" else i + 1
        if step is None:
            return None
        i = step
    return None


def is_io_number(toks: Sequence[Tok], k: int) -> bool:
    """``2`` in ``2>&1``: digits glued to the redirection that follows."""
    tok = toks[k]
    if tok.kind != "word" or not tok.text.isascii() or not tok.text.isdigit():
        return False
    nxt = toks[k + 1] if k + 1 < len(toks) else None
    return nxt is not None and nxt.text in _REDIRECTS and nxt.start == tok.end


def simple_commands(toks: Sequence[Tok]) -> list[list[Tok]]:
    """The words of each simple command, without redirections, fd numbers or comments."""
    commands: list[list[Tok]] = [[]]
    target_next = False
    for k, tok in enumerate(toks):
        if tok.kind == "op" and tok.text in CONTROL:
            commands.append([])
        elif tok.kind == "op":
            target_next = True
        elif tok.kind == "word" and target_next:
            target_next = False
        elif tok.kind == "word" and not is_io_number(toks, k):
            commands[-1].append(tok)
    return [words for words in commands if words]


def unquote(raw: str) -> str:
    """The value sh gives a word, near enough for names: quotes and escapes removed."""
    text = unescape_percent(raw)
    try:
        parts = split_words(text)
    except ValueError:
        parts = []
    return parts[0] if len(parts) == 1 else text.replace("'", "").replace('"', "")


_SPLIT_BLANKS = " \t\r\n"
_PLAIN = re.compile(r"[^ \t\r\n\\'\"]+")
_IN_DOUBLE = re.compile(r'[^"\\]+')


def split_words(text: str) -> list[str]:
    """``shlex.split(text)`` in linear time: shlex builds a word one character at a time by
    string concatenation, so one long word (a 4 MiB crontab line) took hours. The same words,
    and ValueError where shlex raises it (an open quote, a final backslash)."""
    words: list[str] = []
    word: list[str] | None = None  # None between words; [] in a word that is still empty
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in _SPLIT_BLANKS:
            if word is not None:
                words.append("".join(word))
                word = None
            i += 1
            continue
        word = [] if word is None else word
        if ch == "\\":
            if i + 1 >= n:
                raise ValueError("No escaped character")
            word.append(text[i + 1])
            i += 2
        elif ch == "'":
            close = text.find("'", i + 1)
            if close < 0:
                raise ValueError("No closing quotation")
            word.append(text[i + 1:close])
            i = close + 1
        elif ch == '"':
            i = _double_quoted(text, i + 1, word)
        else:
            plain = _PLAIN.match(text, i)
            assert plain is not None
            word.append(plain.group())
            i = plain.end()
    if word is not None:
        words.append("".join(word))
    return words


def _double_quoted(text: str, i: int, word: list[str]) -> int:
    """Append the inside of a double-quoted string starting at ``i`` (after the quote) to
    ``word``, as shlex reads it: a backslash escapes only ``"`` and ``\\``. The index
    after the closing quote."""
    n = len(text)
    while i < n:
        run = _IN_DOUBLE.match(text, i)
        if run:
            word.append(run.group())
            i = run.end()
            continue
        if text[i] == '"':
            return i + 1
        if i + 1 >= n:
            raise ValueError("No escaped character")
        nxt = text[i + 1]
        word.append(nxt if nxt in '"\\' else "\\" + nxt)
        i += 2
    raise ValueError("No closing quotation")


def basename(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1] or path


def command_words(cmd: str) -> list[str]:
    """Unquoted words of every simple command (a plain split when the text does not lex)."""
    toks = lex(cmd)
    if toks is None:
        return cmd.split()
    return [unquote(tok.text) for words in simple_commands(toks) for tok in words]


def backgrounds(cmd: str, shell: str) -> bool:
    """Whether ``cmd`` (run by ``shell``, a basename) starts something in the background: a
    ``&`` control operator at its top level, or in the ``sh -c '…'`` text it starts with.

    ``&&`` is a list and ``>&2`` a redirection (the lexer reads both as operators of their
    own); ``&>`` redirects in bash and zsh but backgrounds the command in a POSIX sh (dash).
    """
    toks = lex(cmd)
    if toks is None:
        return False  # a quote left open: sh refuses the line and starts nothing
    for k, tok in enumerate(toks):
        if tok.kind != "op" or tok.text != "&":
            continue
        nxt = toks[k + 1] if k + 1 < len(toks) else None
        redirects = nxt is not None and nxt.start == tok.end and nxt.text in (">", ">>")
        if not (redirects and shell in ("bash", "zsh")):
            return True
    inner = shell_marker(cmd)
    if inner is None:
        return False
    quoted = single_unquote(cmd, inner.end() - 1)
    return quoted is not None and backgrounds(quoted[0], basename(inner.group("shell")))


# --- quoting, and reading back what cronwrap quoted ----------------------------------------

SHELLS = frozenset("sh bash dash ksh mksh zsh ash yash posh".split())
_MARKER = re.compile(r"(?P<shell>[A-Za-z0-9_./+-]+) -c '")


def single_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def single_unquote(text: str, i: int) -> tuple[str, int] | None:
    """Read back ``single_quote``'s output starting at ``text[i]``: (value, end index)."""
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


def shell_marker(body: str) -> re.Match[str] | None:
    """The ``sh -c '`` (or bash, …) that ``body`` starts with, if it does."""
    match = _MARKER.match(body)
    return match if match and basename(match.group("shell")) in SHELLS else None


def option_words(command: str) -> tuple[list[str], int | None]:
    """The raw words before a bare ``--`` and the index just past ``-- ``.

    The index is ``None`` when no ``-- `` followed by a command was found.
    """
    words: list[str] = []
    i = 0
    while True:
        while i < len(command) and command[i] in BLANKS:
            i += 1
        end = word_end(command, i) if i < len(command) else None
        if end is None or end == i:
            return words, None
        if command[i:end] == "--":
            ok = command.startswith(" ", end) and end + 1 < len(command)
            return words, end + 1 if ok else None
        words.append(command[i:end])
        i = end
