"""``cronwrap completion bash|zsh|fish``: a script for the shell, and the completions it asks
for (``--cword N -- WORDS…``), drawn from the one declaration of the command line
(commands.COMMANDS, spec.OPTIONS: commands, options, the values of options with fixed choices)
and from the ledger (job names, for the commands that take one). Run by the lean parser: a
completion must come back before a person notices (no typer).
"""

from __future__ import annotations

import sys

from cronwrap.commands import BY_NAME, COMMANDS, GROUPS
from cronwrap.errors import CronwrapError, UsageError
from cronwrap.model import job_host
from cronwrap.options import spec
from cronwrap.read.reads import FORMATS, ledger
from cronwrap.record import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

SHELLS = ("bash", "zsh", "fish")
JOB_COMMANDS = ("status", "history", "logs", "why", "unlock", "pause", "resume")  # NAME: a job's
# The values of options with fixed choices, beside run's (whose parsers carry theirs).
CHOICES = {"--format": FORMATS}

BASH = """\
# cronwrap completion for bash: source it, e.g. from ~/.bashrc:
#   source <(cronwrap completion bash)
_cronwrap() {
  local IFS=$'\\n'
  COMPREPLY=($(compgen -W "$(cronwrap completion bash --cword "$COMP_CWORD" -- \\
    "${COMP_WORDS[@]}" 2>/dev/null)" -- "${COMP_WORDS[COMP_CWORD]}"))
}
complete -o default -o nosort -F _cronwrap cronwrap
"""
ZSH = """\
# cronwrap completion for zsh: source it, e.g. from ~/.zshrc:
#   source <(cronwrap completion zsh)
autoload -U +X bashcompinit && bashcompinit
""" + BASH.split("\n", 2)[2]
FISH = """\
# cronwrap completion for fish: cronwrap completion fish > ~/.config/fish/completions/cronwrap.fish
function __cronwrap_complete
    set -l words (commandline -opc) (commandline -ct)
    cronwrap completion fish --cword (math (count $words) - 1) -- $words 2>/dev/null
end
complete -c cronwrap -f -a '(__cronwrap_complete)'
"""
SCRIPTS = {"bash": BASH, "zsh": ZSH, "fish": FISH}


def completion(shell: str, cword: int | None, words: list[str] | None) -> int:
    if shell not in SHELLS:
        raise UsageError(f"completion: {shell!r} is not one of {', '.join(SHELLS)}")
    if cword is None:
        sys.stdout.write(SCRIPTS[shell])
        return 0
    given = list(words or [])
    current = given[cword] if cword < len(given) else ""
    found = [c for c in candidates(given[:cword]) if c.startswith(current)]
    sys.stdout.write("".join(f"{c}\n" for c in found))
    return 0


def candidates(before: Sequence[str]) -> list[str]:
    """What may come next after ``before`` (the words up to the one being completed, the
    first of them the program's name)."""
    words = list(before[1:])
    if not words:
        return [*dict.fromkeys(c.name.split(" ")[0] for c in COMMANDS), "--help", "--version"]
    first = words[0]
    if first in GROUPS:
        if len(words) == 1:
            return [c.name.split(" ")[1] for c in COMMANDS if c.name.startswith(first + " ")]
        first, words = f"{first} {words[1]}", words[1:]
    if first == "run":
        return _run(words[1:])
    command = BY_NAME.get(first)
    if command is None:
        return []
    previous = words[-1] if len(words) > 1 else ""
    options = {name: p for p in command.params for name in p.names}
    taking = options.get(previous)
    if taking is not None and not taking.is_flag:
        return list(CHOICES.get(previous, ()))  # a value: its choices, else the shell's files
    if first == "completion":
        return list(SHELLS)
    names = [n for p in command.params for n in (*p.names, *([p.off] if p.off else []))]
    jobs = _jobs(words) if first in JOB_COMMANDS else []
    return [*jobs, *names, "--help"]


def _run(words: list[str]) -> list[str]:
    """run's options, their fixed choices, and a job's name after -n/--name."""
    if "--" in words:
        return []  # the command's own words: the shell's files
    previous = words[-1] if words else ""
    option = spec.BY_LONG.get(previous[2:]) if previous.startswith("--") else \
        spec.BY_SHORT.get(previous[1:]) if previous.startswith("-") else None
    if option is not None and not option.is_flag:
        if option.name == "name":
            return _jobs(words)
        return list(getattr(option.parse, "choices", ()))
    return [*(f"--{o.name}" for o in spec.OPTIONS), *(f"-{o.short}" for o in spec.OPTIONS
                                                      if o.short), "--help", "--"]


def _jobs(words: list[str]) -> list[str]:
    """The names of the ledger's jobs (the ledger the words name with --db, else the one
    every command reads); none when it cannot be read: a completion never complains."""
    db = words[words.index("--db") + 1] if "--db" in words[:-1] else None
    try:
        opened = ledger(db, read_only=True)
        try:
            names = opened.job_names()
        finally:
            opened.close()
    except (CronwrapError, OSError):
        return []
    return list(dict.fromkeys(job_host(n)[0] for n in names))

