"""Job names for crontab lines: what ``cronwrap wrap`` calls each job (``-n NAME``)."""

from __future__ import annotations

import re
import unicodedata

from cronwrap.crontab.shell import (
    ASSIGNMENT,
    RESERVED,
    basename,
    lex,
    simple_commands,
    split_percent,
    unquote,
)

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_NAME_BASE_MAX = 120  # leaves room for a "-NNN" suffix within the 128 characters of a name

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
    toks = lex(cmd)
    if toks is None:
        argvs = [cmd.split()]
    else:
        argvs = [[unquote(tok.text) for tok in words] for words in simple_commands(toks)]
    for argv in argvs:
        name = _sanitize(_main_program(argv) or "")
        if name:
            return name
    # nothing but builtins and wrappers: take the first builtin (`exit`), else `env` in `A=1 env`
    candidates = [w for argv in argvs for w in _strip_prefixes(argv)[:1]]
    candidates += [w for argv in argvs for w in argv if not ASSIGNMENT.match(w)]
    return next(filter(None, map(_sanitize, candidates)), "job")


def _main_program(argv: list[str]) -> str | None:
    words = _strip_prefixes(argv)
    if not words or words[0] in _LOOPS:
        return None
    program = basename(words[0])
    if program in _NOT_A_NAME:
        return None
    if _INTERPRETERS.fullmatch(program):
        return _script_of(words[1:]) or program
    return words[0]


def _strip_prefixes(argv: list[str]) -> list[str]:
    """Drop assignments, reserved words (``if``, ``then``, ``fi``, ``!``) and wrappers."""
    words = list(argv)
    while words:
        head = basename(words[0])
        if ASSIGNMENT.match(words[0]) or words[0] in RESERVED - _LOOPS:
            words = words[1:]
        elif head in _WRAPPERS:
            words = _skip_wrapper(words, *_WRAPPERS[head])
        else:
            break
    return words


def _skip_wrapper(words: list[str], takes_value: frozenset[str], positional: int) -> list[str]:
    i = 1
    while i < len(words) and (words[i].startswith("-") or ASSIGNMENT.match(words[i])):
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
    base = basename(word)
    stem, dot, ext = base.rpartition(".")
    if dot and stem and ext.lower() in _SCRIPT_EXTENSIONS:
        base = stem
    ascii_base = unicodedata.normalize("NFKD", base).encode("ascii", "ignore").decode()
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", ascii_base)
    name = re.sub(r"^[^A-Za-z0-9]+", "", name)[:_NAME_BASE_MAX].rstrip("-._")
    return name or None


def unique(base: str, used: dict[str, int]) -> str:
    """``base``, else ``base-2``, ``base-3``…; compared without case, for log directories.
    ``used``: every name taken, in lower case, with the next suffix to try for it as a base,
    so that a crontab of n lines of one script costs n steps, not n²."""
    key, name = base.lower(), base
    n = used.get(key)
    if n is not None:
        while f"{key}-{n}" in used:
            n += 1
        name = f"{base}-{n}"
        used[key] = n + 1
    used.setdefault(name.lower(), 2)
    return name