"""A firing loads what ARCHITECTURE.md §9 lists and nothing else (issue 24 §1): the run path's
imports, visible in one place. Each firing is a real ``cronwrap run`` with a real SQLite
ledger and job, in an interpreter started without ``site`` (tests/imports.py), so that every
module it holds when it leaves (the keeper's too) is cronwrap's doing."""

from __future__ import annotations

import fnmatch
import shutil
import re
from pathlib import Path

import pytest

from tests.imports import bare_interpreter, modules_of_a_firing

REPO = Path(__file__).resolve().parents[2]
SECTION = (REPO / "ARCHITECTURE.md").read_text(encoding="utf-8").split("## 9.", 1)[1] \
    .split("\n## ", 1)[0]
LINES = dict(line.split(": ", 1) for line in
             re.search(r"```imports\n(.*?)```", SECTION, re.S).group(1).splitlines())
CONFIG = "".join(
    f'[jobs.job{i}]\nschedule = "{i * 7} 2 * * *"\ntz = "Europe/Berlin"\ntimeout = "{i + 1}h"\n'
    f'kill-after = "30s"\non-failure = "logger -t cron job{i}"\n\n' for i in range(5))
FIRINGS = {  # the bench's firings (bench/run.py: startup, startup_config)
    "plain": (["run", "-n", "x", "--force", "--", "true"], False, ["run -- true"]),
    "config file": (["run", "-n", "job3", "--force", "--", "true"], True,
                    ["run -- true", "with a config file", "with --schedule"]),
    "schedule": (["run", "-n", "x", "--schedule", "* * * * *", "--catchup", "latest", "--force",
                  "--", "true"], False, ["run -- true", "with --schedule"]),
}
ENGINE = "with the schedule engine"  # a scheduled firing's first: it keeps the slot table


def listed(lines: list[str]) -> list[str]:
    return [name for line in lines for name in LINES[line].split()]


def allowed(module: str, names: list[str]) -> bool:
    """On the list: itself, a package of it (``json`` covers ``json.decoder``; not for
    cronwrap, whose modules are each listed), or a pattern."""
    parts = module.split(".")
    prefixes = {module} if parts[0] == "cronwrap" else \
        {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
    return any(name in prefixes or fnmatch.fnmatchcase(module, name) for name in names)


@pytest.mark.parametrize("firing", FIRINGS)
def test_a_firing_loads_only_what_the_map_lists(firing, tmp_path):
    """A scheduled firing is run twice: the first loads the engine and keeps its slot table,
    the second reads its slots from that table and loads neither cronsim nor zoneinfo."""
    argv, with_config, lines = FIRINGS[firing]
    env = {}
    if with_config:
        config = tmp_path / "config.toml"
        config.write_text('[defaults]\nlock = "flock"\ncatchup = "latest"\nkeep-logs = "30d"\n\n'
                          + CONFIG, encoding="utf-8")
        env["CRONWRAP_CONFIG"] = str(config)
    scheduled = "with --schedule" in lines
    for kept, firing_lines in ((False, lines + [ENGINE] if scheduled else lines),
                               (True, lines))[:2 if scheduled else 1]:
        loaded = modules_of_a_firing(tmp_path, argv, bare=True, env=env)
        assert "cronwrap.process.keeper" in loaded and (tmp_path / "home" / "ledger.db").exists(), \
            "the job did not run"
        names = listed(firing_lines)
        beyond = sorted(m for m in loaded - bare_interpreter() if not allowed(m, names))
        assert not beyond, (f"a firing ({firing}, table kept: {kept}) loads modules ARCHITECTURE.md"
                            f" §9 does not list (keep them off the run path, or list them with "
                            f"their cost): {beyond}")
        ours = {name for name in names if name.split(".")[0] == "cronwrap"}
        assert ours <= loaded, f"§9 lists modules of cronwrap a firing ({firing}, table kept: " \
                               f"{kept}) no longer loads: {sorted(ours - loaded)}"
    if scheduled:
        assert not {"cronsim", "zoneinfo"} & loaded, "the second firing loaded the engine"


def test_a_firing_reads_its_config_file_without_tomllib_once_it_has_been_parsed(tmp_path):
    """The first firing with a config file parses it (tomllib) and keeps the parse beside the
    ledger (config.CACHE_FILE); the next firing of the same text reads that instead, and one
    of a changed text parses it again."""
    config = tmp_path / "config.toml"
    config.write_text('[defaults]\nlock = "flock"\n\n[jobs.x]\ntimeout = "1h"\n', encoding="utf-8")
    env = {"CRONWRAP_CONFIG": str(config)}
    argv = ["run", "-n", "x", "--force", "--", "true"]
    assert "tomllib" in modules_of_a_firing(tmp_path, argv, bare=True, env=env)
    assert "tomllib" not in modules_of_a_firing(tmp_path, argv, bare=True, env=env)
    config.write_text('[defaults]\nlock = "pid"\n', encoding="utf-8")
    assert "tomllib" in modules_of_a_firing(tmp_path, argv, bare=True, env=env)


def test_the_list_can_fail():
    """A module off the list is found: the check above is not vacuous."""
    names = listed(["run -- true"])
    assert allowed("sqlite3.dbapi2", names) and allowed("cronwrap.run.runner", names)
    assert allowed("re._parser", listed(["run -- true", "with --schedule", ENGINE]))
    assert not allowed("cronsim", listed(["run -- true", "with --schedule"]))
    assert not allowed("re._parser", names) and not allowed("warnings", names)
    assert not allowed("subprocess", names) and not allowed("random", names)
    assert not allowed("json", names) and not allowed("pathlib", names)
    assert not allowed("cronwrap.run.hooks", names) and not allowed("typing", names)


def test_the_installed_command_is_the_script_as_written():
    """The command is packaging/bin/cronwrap with only its shebang changed: not the launcher
    pip writes for an entry point, which imports re (~1 ms of every firing)."""
    installed = Path(shutil.which("cronwrap") or "").read_text(encoding="utf-8")
    source = (REPO / "packaging" / "bin" / "cronwrap").read_text(encoding="utf-8")
    assert installed.startswith("#!") and installed.split("\n", 1)[1] == source.split("\n", 1)[1]
