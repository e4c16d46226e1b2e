"""The documentation cannot drift from the code.

The man pages are generated from the option tables, spec.OPTIONS and commands.COMMANDS
(tools/docs);
these tests fail when a committed page or README's generated block is stale, when an option,
command, variable or lint code is missing from README, a man page or ``--help``, when an
option has no help, when groff has anything to say about a page, when a configuration example
does not load, and when README loses the section of one of the operators' questions.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cronwrap import errors
from cronwrap.model import Run
from cronwrap.options import config, spec
from cronwrap.run import hooks, jobenv
from tools.docs.facts import (
    ETC_CONFIG, HOME_DIRS, README_BEGIN, README_END, ROOT_DIRS, USER_CONFIG, all_commands,
    choices, has_option, is_argument, option_names)
from tools.docs.generate import render_man, render_toml_man, update_readme
from tools.docs.prose_toml import TOML_EXAMPLE
from tools.docs.roff import bold

REPO = Path(__file__).resolve().parents[2]
MAN = REPO / "man" / "cronwrap.1"
TOML_MAN = REPO / "man" / "cronwrap.toml.5"
README = (REPO / "README.md").read_text(encoding="utf-8")
REGENERATE = "regenerate with: python -m tools.docs > man/cronwrap.1"
REGENERATE_TOML = "regenerate with: python -m tools.docs --toml > man/cronwrap.toml.5"

# The operators' questions (the product's design), in the order they ask them; README answers each
# under a heading of its own, in this order.
QUESTIONS = (
    "Is it still running, did it run last night, how long did it take?",
    "Why did it fail?",
    "It ran twice / it didn't run at all / it ran at 10:00 instead of 02:00",
    "Re-run the 28th by hand, safely",
    "Tell my monitoring",
    "Add it to my 40 existing crontab lines",
)

COMMANDS = all_commands()
COMMAND_NAMES = [name for name, _ in COMMANDS]
ADMIN_OPTIONS = [(name, opt) for name, command in COMMANDS for p in command.params
                 if not is_argument(p) for opt in option_names(p)]
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


@pytest.fixture(scope="module")
def toml_source() -> str:
    assert TOML_MAN.exists(), f"man/cronwrap.toml.5 is missing: {REGENERATE_TOML}"
    return TOML_MAN.read_text(encoding="utf-8")


# (a) the committed page is the generated one -----------------------------------------------

def test_man_page_is_generated_from_the_code(man_source: str) -> None:
    assert man_source == render_man(), f"man/cronwrap.1 is stale: {REGENERATE}"


def test_toml_man_page_is_generated_from_the_code(toml_source: str) -> None:
    assert toml_source == render_toml_man(), (
        f"man/cronwrap.toml.5 is stale: {REGENERATE_TOML}")


def test_readme_reference_is_generated_from_the_code() -> None:
    assert README_BEGIN in README and README_END in README
    assert update_readme(README) == README, (
        "README.md's reference block is stale: run python -m tools.docs --update-readme")


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
    assert bold(f"cronwrap {name}") in man_source, f"cronwrap {name} is not in the man page"
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


def test_commands_in_the_man_page_follow_the_table(man_source: str) -> None:
    commands = man_source.split(".SH COMMANDS", 1)[1].split(".SH", 1)[0]
    sections = re.findall(r'^\.SS "([^"]+)"$', commands, re.M)
    assert sections == COMMAND_NAMES


def test_job_variables_are_documented(man_source: str) -> None:
    run = Run(run_id=7, job="j", run_key="k", scheduled_at=datetime(2026, 1, 2, tzinfo=UTC),
              trigger="schedule", status="running", attempt=1, fence=3)
    env = jobenv.job_environment({}, {}, run, "h", None)
    assert list(env) == list(jobenv.JOB_VARIABLES), (
        "jobenv.JOB_VARIABLES must name exactly the variables the job gets, in order")
    for name in env:
        assert f"`{name}`" in README, f"{name} (what the job sees) is not in README.md"
        assert bold(name) in man_source


def test_readme_states_the_paths_and_exit_statuses_of_the_code() -> None:
    for dirs in (ROOT_DIRS, HOME_DIRS):
        for path in (dirs.ledger_file, dirs.logs, dirs.locks):
            assert str(path) in README, f"{path} (paths.py) is not in README.md"
    for status in (errors.EXIT_TIMEOUT, errors.EXIT_KILLED, errors.EXIT_CRONWRAP,
                   errors.EXIT_NOT_EXECUTABLE, errors.EXIT_NOT_FOUND):
        row = re.search(rf"^\| [^|]*\b{status}\b", README, re.M)
        assert row, f"exit status {status} is not in README's table"


def test_readme_names_every_metric_its_label_and_the_duration_buckets() -> None:
    from cronwrap.model import DURATION_BUCKETS
    from cronwrap.read import monitoring

    for name, _, _ in monitoring.FAMILIES:
        assert f"`{name}" in README, f"the metric {name} is not in README.md"
    assert f"`{monitoring.LABEL}`" in README
    assert not re.search(r'[{,]\s*job=', README), "a selector by job: Prometheus renames it"
    words = " ".join(README.split())
    assert ", ".join(f"{b:g}" for b in DURATION_BUCKETS[:-1]) + f" and {DURATION_BUCKETS[-1]:g}" \
        in words, "README.md does not list the duration buckets of model.DURATION_BUCKETS"


# (c) every option has help ----------------------------------------------------------------

@pytest.mark.parametrize("opt", spec.OPTIONS, ids=lambda o: o.name)
def test_run_option_has_help(opt: spec.Option) -> None:
    assert opt.help.strip() and opt.group.strip()
    if choices(opt):
        assert opt.metavar == "|".join(choices(opt)), "the metavar must list the choices"


@pytest.mark.parametrize("name", COMMAND_NAMES)
def test_command_and_its_parameters_have_help(name: str) -> None:
    command = dict(COMMANDS)[name]
    assert command.help.strip(), f"cronwrap {name} has no help"
    for param in command.params:
        assert param.help.strip(), f"cronwrap {name}: {param.dest} has no help"
        assert param.is_flag or param.metavar, f"cronwrap {name}: {param.dest} has no metavar"


# (d) groff renders it without a warning ---------------------------------------------------

@pytest.mark.parametrize("device", ["-Tutf8", "-Tascii", "-Tps"])  # -Tps: groff's default
@pytest.mark.parametrize("page", [MAN, TOML_MAN], ids=lambda p: p.name)
def test_groff_renders_without_warnings(page: Path, device: str) -> None:
    if shutil.which("groff") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("groff is missing, and CI=true never skips this test")
        pytest.skip("groff is not installed")
    proc = subprocess.run(["groff", "-man", "-ww", device, str(page)], capture_output=True,
                          text=True, timeout=60, errors="replace")
    if device == "-Tps":
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
        return
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert "--overlap" in proc.stdout.replace("\u2212", "-")  # options survive as text


@pytest.mark.parametrize("page", [MAN, TOML_MAN], ids=lambda p: p.name)
def test_roff_has_no_unescaped_specials(page: Path) -> None:
    man_source = page.read_text(encoding="utf-8")
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


# (f) the configuration file's page --------------------------------------------------------

@pytest.mark.parametrize("opt", spec.OPTIONS, ids=lambda o: o.name)
def test_every_run_option_is_in_the_toml_page(opt: spec.Option, toml_source: str) -> None:
    keys = toml_source.split(".SH KEYS", 1)[1].split(".SH", 1)[0]
    assert bold(opt.name) in keys, f"{opt.name} is not a key entry of cronwrap.toml.5"
    if opt.name in config.NOT_KEYS:
        assert "Not a key" in keys.split(bold(opt.name), 1)[1].split(".TP", 1)[0]
        return
    if opt.attr != opt.name:
        assert bold(opt.attr) in keys, f"{opt.attr} (the _ spelling) is not in the page"
    assert bold(opt.env) in keys, f"{opt.env} is not in {opt.name}'s entry"


def test_toml_page_states_the_files_and_rules_of_the_code(toml_source: str) -> None:
    text = re.sub(r"\\f[BIRP]", "", toml_source).replace("\\-", "-")
    for path in (USER_CONFIG, ETC_CONFIG, "$CRONWRAP_CONFIG", "/dev/null"):
        assert path in text, f"{path} (config.py) is not in cronwrap.toml.5"
    for table in ("[defaults]", "[jobs.NAME]"):
        assert table in text
    for rule in ("owned by", "belongs to", "writable by group or others"):
        if rule in text:
            break
    else:
        pytest.fail("cronwrap.toml.5 does not say who may own and write the file")


def write_private(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    path.chmod(0o600)
    return path


def test_the_toml_page_example_loads(tmp_path: Path) -> None:
    file = write_private(tmp_path / "config.toml", str(TOML_EXAMPLE))
    loaded = config.load_config(file)
    assert loaded.defaults and loaded.jobs, "the example should show both kinds of table"
    for values in (loaded.defaults, *loaded.jobs.values()):
        spec.build_spec(["true"], values, {}, lambda: "host", warn=pytest.fail)  # every value is valid for run


def test_readme_config_examples_load(tmp_path: Path) -> None:
    blocks = re.findall(r"^```toml\n(.*?)^```", README, re.M | re.S)
    assert blocks, "README.md shows no configuration file"
    for i, block in enumerate(blocks):
        loaded = config.load_config(write_private(tmp_path / f"c{i}.toml", block))
        for values in (loaded.defaults, *loaded.jobs.values()):
            spec.build_spec(["true"], values, {}, lambda: "host", warn=pytest.fail)


# (g) README answers the operators' questions, in their order ------------------------------

def test_readme_has_a_section_per_question_in_order() -> None:
    headings = [h.strip() for h in re.findall(r"^## (.+)$", README, re.M)]
    missing = [q for q in QUESTIONS if q not in headings]
    assert not missing, f"README.md has no section for: {missing}"
    positions = [headings.index(q) for q in QUESTIONS]
    assert positions == sorted(positions), "README.md's question sections are out of order"
    assert headings.index("Quick start") < positions[0], "the quick start comes first"


# (h) what the code reads, sets and reports is documented ---------------------------------

def test_hook_variables_are_documented(man_source: str) -> None:
    env = hooks.hook_env({}, "failed", 1, 5, b"tail", alert="failing")
    assert list(env) == list(hooks.HOOK_VARIABLES), (
        "hooks.HOOK_VARIABLES must name exactly the variables a hook gets, in order")
    for name in env:
        assert f"`{name}`" in README, f"{name} (what a hook sees) is not in README.md"
        assert bold(name) in man_source


def test_every_cronwrap_variable_of_the_code_is_in_the_man_page(man_source: str) -> None:
    package = REPO / "cronwrap"
    found = set()
    for source in package.rglob("*.py"):
        found |= set(re.findall(r'"(CRONWRAP_[A-Z_]+)"', source.read_text(encoding="utf-8")))
    missing = sorted(n for n in found if bold(n) not in man_source)
    assert not missing, f"variables the code uses but cronwrap.1 does not name: {missing}"
    assert bold("CRONWRAP_CONFIG") in man_source.split(".SH ENVIRONMENT", 1)[1]


def test_lint_codes_are_documented(man_source: str) -> None:
    from cronwrap import crontab

    codes = list(crontab.LINT_CODES)  # the registry the checks report from
    in_readme = re.findall(r"^\| ([EWI]\d{3}) \|", README, re.M)
    assert sorted(in_readme) == sorted(codes), "README's lint table differs from the registry"
    for code in codes:
        assert re.search(rf"^\| {code} \|", README, re.M), f"lint code {code} is not in README"
        assert bold(code) in man_source, f"lint code {code} is not in cronwrap.1"


def test_check_exit_statuses_are_documented(man_source: str) -> None:
    assert has_option("status", "--check")
    exit_status = man_source.split('.SH "EXIT STATUS"', 1)[1].split(".SH", 1)[0]
    for code, word in ((errors.CHECK_OK, "OK"), (errors.CHECK_WARNING, "WARNING"),
                       (errors.CHECK_CRITICAL, "CRITICAL"), (errors.CHECK_UNKNOWN, "UNKNOWN")):
        assert f"{code} ({word})" in exit_status
        assert f"{code} {word}" in README


def test_readme_states_the_config_files_of_the_code() -> None:
    for path in (USER_CONFIG, ETC_CONFIG, "$CRONWRAP_CONFIG"):
        assert path in README, f"{path} (config.py) is not in README.md"


# (i) every registry is read by the docs ---------------------------------------------------

# A registry is a module-level table of facts the docs are made from, named for what it holds:
# ``*_MEANINGS``, ``*_VARIABLES``, ``*_CODES``, ``*_FIELDS``, ``OPTIONS``, ``COMMANDS``. Each is
# swapped for a copy that notes being read, then the pages are rendered: a registry nothing
# read is a fact the pages restate in prose, or do not state at all.
REGISTRY_PROBE = r"""
import importlib, pkgutil, re, sys
import cronwrap

NAME = re.compile(r"^(?:[A-Z][A-Z0-9_]*_(?:MEANINGS|VARIABLES|CODES|FIELDS)|OPTIONS|COMMANDS)$")
for info in pkgutil.walk_packages(cronwrap.__path__, "cronwrap."):
    if not info.name.endswith(".__main__"):
        importlib.import_module(info.name)
modules = [m for n, m in list(sys.modules.items()) if n.split(".")[0] == "cronwrap"]


def watched(value):
    base = type(value)

    def noting(method):
        def read(self, *args):
            self.was_read = True
            return getattr(base, method)(self, *args)
        return read

    methods = ["__iter__", "__getitem__", "__len__", "__contains__"]
    methods += ["items", "keys", "values", "get"] if isinstance(value, dict) else []
    copy = type("Watched", (base,), {m: noting(m) for m in methods})(value)
    copy.was_read = False
    return copy


registries = {}
for module in modules:
    for name, value in list(vars(module).items()):
        if NAME.match(name) and isinstance(value, (dict, tuple, list)):
            found = registries.setdefault(id(value), (f"{module.__name__}.{name}", value, []))
            found[2].append((module, name))
copies = {}
for key, (label, value, holders) in registries.items():
    copies[label] = watched(value)
    for module, name in holders:
        setattr(module, name, copies[label])

from tools.docs.generate import render_man, render_readme_reference, render_toml_man

render_man(), render_toml_man(), render_readme_reference()
print(sorted(copies))
print(sorted(label for label, copy in copies.items() if not copy.was_read))
"""


def test_every_registry_is_read_by_the_docs() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRONWRAP_")}
    proc = subprocess.run([sys.executable, "-c", REGISTRY_PROBE], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    found, unread = proc.stdout.splitlines()[-2:]
    assert "cronwrap.model.STATUS_MEANINGS" in found and "cronwrap.options.spec.OPTIONS" in found
    assert unread == "[]", f"registries the docs do not read: {unread}"
