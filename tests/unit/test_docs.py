"""The documentation cannot drift from the code.

The man page is generated from the option table and the typer app (cronwrap/manpage.py); these
tests fail when the committed page or README's generated block is stale, when an option or
command is missing from README, the man page or its ``--help``, when an option has no help, and
when groff has anything to say about the page.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cronwrap import errors, manpage, spec

REPO = Path(__file__).resolve().parents[2]
MAN = REPO / "man" / "cronwrap.1"
README = (REPO / "README.md").read_text(encoding="utf-8")
REGENERATE = "regenerate with: python -m cronwrap.manpage > man/cronwrap.1"

COMMANDS = manpage.admin_commands()
COMMAND_NAMES = [name for name, _ in COMMANDS]
ADMIN_OPTIONS = [(name, opt) for name, command in COMMANDS for p in command.params
                 if not manpage.is_argument(p) for opt in manpage.option_names(p)]
RUN_OPTIONS = [f"--{o.name}" for o in spec.OPTIONS] + [f"-{o.short}" for o in spec.OPTIONS
                                                         if o.short]


def mentions(text: str, option: str) -> bool:
    """``option`` as a whole word: ``--lock`` is not found in ``--lock-file``."""
    return re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text) is not None


def man_mentions(roff: str, option: str) -> bool:
    """``option`` in the page's text: font changes dropped, ``\\-`` read as ``-``."""
    text = re.sub(r"\\f[BIRP]", "", roff).replace("\\-", "-")
    return mentions(text, option)


@functools.lru_cache(maxsize=None)
def cronwrap_help(*command: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRONWRAP_")}
    proc = subprocess.run([sys.executable, "-m", "cronwrap", *command, "--help"], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def man_source() -> str:
    assert MAN.exists(), f"man/cronwrap.1 is missing: {REGENERATE}"
    return MAN.read_text(encoding="utf-8")


# (a) the committed page is the generated one -----------------------------------------------

def test_man_page_is_generated_from_the_code(man_source: str) -> None:
    assert man_source == manpage.render_man(), f"man/cronwrap.1 is stale: {REGENERATE}"


def test_readme_reference_is_generated_from_the_code() -> None:
    assert manpage.README_BEGIN in README and manpage.README_END in README
    assert manpage.update_readme(README) == README, (
        "README.md's reference block is stale: run python -m cronwrap.manpage --update-readme")


# (b) every option and command is in README, the man page and --help -------------------------

@pytest.mark.parametrize("option", RUN_OPTIONS)
def test_run_option_is_documented(option: str, man_source: str) -> None:
    assert mentions(README, option), f"{option} is not in README.md"
    assert man_mentions(man_source, option), f"{option} is not in man/cronwrap.1"


def test_run_options_are_in_run_help() -> None:
    text = cronwrap_help("run")
    missing = [o for o in RUN_OPTIONS if not mentions(text, o)]
    assert not missing, f"not in cronwrap run --help: {missing}"


@pytest.mark.parametrize("name", COMMAND_NAMES)
def test_command_is_documented(name: str, man_source: str) -> None:
    assert f"cronwrap {name}" in README, f"cronwrap {name} is not in README.md"
    assert manpage.bold(f"cronwrap {name}") in man_source, f"cronwrap {name} is not in the man page"
    top, *sub = name.split()
    listing = cronwrap_help(top) if sub else cronwrap_help()  # "db init": by cronwrap db --help
    entry = sub[0] if sub else top
    assert re.search(rf"^\s+{re.escape(entry)}\s", listing, re.M), f"{name} not listed by --help"


@pytest.mark.parametrize("name,option", ADMIN_OPTIONS)
def test_admin_option_is_documented(name: str, option: str, man_source: str) -> None:
    if option.startswith("--"):
        assert mentions(README, option), f"{name} {option} is not in README.md"
    assert man_mentions(man_source, option), f"{name} {option} is not in man/cronwrap.1"
    assert mentions(cronwrap_help(*name.split()), option), f"{option} not in cronwrap {name} --help"


def test_commands_in_the_man_page_follow_the_app(man_source: str) -> None:
    commands = man_source.split(".SH COMMANDS", 1)[1].split(".SH", 1)[0]
    sections = re.findall(r'^\.SS "([^"]+)"$', commands, re.M)
    assert sections == COMMAND_NAMES


def test_job_variables_are_documented(man_source: str) -> None:
    seen = manpage.job_variables()
    assert sorted(seen) == sorted(manpage.JOB_VARIABLES), (
        "manpage.JOB_VARIABLES must describe exactly the variables the job sees")
    for name in seen:
        assert f"`{name}`" in README, f"{name} (what the job sees) is not in README.md"
        assert manpage.bold(name) in man_source


def test_readme_states_the_paths_and_exit_statuses_of_the_code() -> None:
    for dirs in (manpage.ROOT_DIRS, manpage.HOME_DIRS):
        for path in (dirs.ledger_file, dirs.logs, dirs.locks):
            assert str(path) in README, f"{path} (paths.py) is not in README.md"
    for status in (errors.EXIT_TIMEOUT, errors.EXIT_KILLED, errors.EXIT_CRONWRAP,
                   errors.EXIT_NOT_EXECUTABLE, errors.EXIT_NOT_FOUND):
        row = re.search(rf"^\| [^|]*\b{status}\b", README, re.M)
        assert row, f"exit status {status} is not in README's table"


# (c) every option has help ----------------------------------------------------------------

@pytest.mark.parametrize("opt", spec.OPTIONS, ids=lambda o: o.name)
def test_run_option_has_help(opt: spec.Option) -> None:
    assert opt.help.strip() and opt.group.strip()
    if manpage.choices(opt):
        assert opt.metavar == "|".join(manpage.choices(opt)), "the metavar must list the choices"


@pytest.mark.parametrize("name", COMMAND_NAMES)
def test_command_and_its_parameters_have_help(name: str) -> None:
    command = dict(COMMANDS)[name]
    assert (command.help or "").strip(), f"cronwrap {name} has no help"
    for param in command.params:
        assert (param.help or "").strip(), f"cronwrap {name}: {param.name} has no help"


# (d) groff renders it without a warning ---------------------------------------------------

def test_groff_renders_without_warnings() -> None:
    if shutil.which("groff") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("groff is missing, and CI=true never skips this test")
        pytest.skip("groff is not installed")
    proc = subprocess.run(["groff", "-man", "-ww", "-Tutf8", str(MAN)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert "--overlap" in proc.stdout.replace("\u2212", "-")  # options survive as text


def test_roff_has_no_unescaped_specials(man_source: str) -> None:
    for number, text in enumerate(man_source.splitlines(), 1):
        assert text.isascii(), f"line {number}: non-ASCII must be a \\[uXXXX] glyph"
        if not text.startswith("."):
            assert not text.startswith("'"), f"line {number} starts with a control character"
            assert not re.search(r"(?<!\\)-", text.replace("\\\\", "")), f"line {number}: bare '-'"
    assert "\n\n" not in man_source, "a blank line in roff is an unwanted break"


# (e) README's set-up block and .ci/run ----------------------------------------------------

def test_readme_setup_block_has_two_commands_and_ci_runs_the_second() -> None:
    block = re.search(r"^```[^\n]*\n(.*?)^```", README, re.M | re.S)
    assert block is not None, "README.md has no fenced code block"
    commands = [line for line in block.group(1).splitlines()
                if line.strip() and not line.lstrip().startswith("#")]
    assert len(commands) == 2, f"README's first block must hold exactly two commands: {commands}"
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    calls = [shlex.split(line) for line in ci.splitlines()
             if line.strip() and not line.startswith("#")]
    wanted = shlex.split(commands[1])
    assert any(call[:len(wanted)] == wanted for call in calls), (
        f".ci/run does not call {commands[1]!r}")
