"""The wheel an operator installs holds the whole package: every module of every wing, the
SQL the ledger migrates with, and ``py.typed`` (issue 21 §1), so that a package list that
forgot a new folder fails here rather than on a host."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_wheel_holds_every_module_the_sql_and_py_typed(tmp_path: Path) -> None:
    source = tmp_path / "source"  # a copy: a build/ left in the checkout would fill the gaps
    shutil.copytree(REPO / "cronwrap", source / "cronwrap",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    for folder in ("man", "completions", "packaging/bin"):
        shutil.copytree(REPO / folder, source / folder)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--disable-pip-version-check", str(source), "-w", str(tmp_path)],
                   check=True, capture_output=True, timeout=300, cwd=tmp_path)
    (wheel,) = tmp_path.glob("cronwrap-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    wanted = {path.relative_to(REPO).as_posix() for path in (REPO / "cronwrap").rglob("*")
              if path.suffix in (".py", ".sql", ".json") or path.name == "py.typed"}
    assert "cronwrap/py.typed" in wanted and "cronwrap/run/runner.py" in wanted
    assert not wanted - shipped, f"missing from the wheel: {sorted(wanted - shipped)}"
    data = {name.split(".data/data/", 1)[1] for name in shipped if ".data/data/" in name}
    assert data == {"share/man/man1/cronwrap.1", "share/man/man5/cronwrap.toml.5",
                    "share/bash-completion/completions/cronwrap",
                    "share/fish/vendor_completions.d/cronwrap.fish"}, data
    scripts = {name.split(".data/scripts/", 1)[1] for name in shipped if ".data/scripts/" in name}
    assert scripts == {"cronwrap"}, scripts  # packaging/bin/cronwrap, no entry point launcher

    # installed (pip install ., not editable) with its dependencies as pinned, without the
    # postgres extra: a SQLite-only host
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                    "--disable-pip-version-check", "-c", str(REPO / "constraints.txt"),
                    str(wheel)], check=True, capture_output=True, timeout=600)
    the_sqlite_only_host_runs_and_names_the_missing_extra(venv, tmp_path)

    # man finds both pages through the venv's bin/
    if shutil.which("man") is None:
        return  # man-db is not on this host: the files are in place (above)
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}
    for page, section in (("cronwrap", "man1"), ("cronwrap.toml", "man5")):
        found = subprocess.run(["man", "-w", page], env=env, capture_output=True, text=True,
                               timeout=60)
        assert found.stdout.strip() == str(venv / "share" / "man" / section /
                                           (page + (".1" if section == "man1" else ".5"))), found


def the_sqlite_only_host_runs_and_names_the_missing_extra(venv: Path, tmp_path: Path) -> None:
    """No psycopg on a SQLite-only host; a postgresql:// ledger there is one line naming the
    install that fixes it, exit 125, and the job does not run (issue 25 §1)."""
    site = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "list", "--format",
                           "freeze", "--disable-pip-version-check"], capture_output=True,
                          text=True, check=True).stdout.lower()
    assert "psycopg" not in site and "typer==" in site, site
    exe = str(venv / "bin" / "cronwrap")
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path),
           "CRONWRAP_HOME": str(tmp_path / "cw")}
    ran = subprocess.run([exe, "run", "-n", "t", "--", "true"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    url = "postgresql://cronwrap@127.0.0.1:1/cronwrap"
    marker = tmp_path / "ran"
    for argv in ([exe, "status", "--db", url],
                 [exe, "run", "-n", "pg", "--db", url, "--", "touch", str(marker)]):
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 125, (argv, done.stderr)
        assert done.stderr.count("\n") == 1 and "pip install '.[postgres]'" in done.stderr, \
            done.stderr
        assert "Traceback" not in done.stderr
    assert not marker.exists(), "the job ran although its ledger could not be opened"


def test_the_completion_scripts_in_the_checkout_are_cronwrap_s_own():
    """completions/ holds what `cronwrap completion SHELL` prints, for the wheel's share/."""
    from cronwrap.read.complete import SCRIPTS

    assert (REPO / "completions" / "cronwrap").read_text() == SCRIPTS["bash"], \
        "completions/cronwrap is stale: cronwrap completion bash > completions/cronwrap"
    assert (REPO / "completions" / "cronwrap.fish").read_text() == SCRIPTS["fish"], \
        "completions/cronwrap.fish is stale: cronwrap completion fish > completions/cronwrap.fish"



def test_constraints_pin_every_distribution_the_tests_run_with():
    """constraints.txt is what the tests ran with (tests/run.sh installs with -c): a dependency
    added to pyproject.toml without its pin fails here, not on a host months later."""
    frozen = subprocess.run([sys.executable, "-m", "pip", "freeze", "--exclude-editable",
                             "--disable-pip-version-check"], capture_output=True, text=True,
                            check=True).stdout

    def canonical(line: str) -> str:
        name, _, version = line.partition("==")
        return f"{name.lower().replace('_', '-')}=={version.strip()}"

    pinned = {canonical(line) for line in (REPO / "constraints.txt").read_text().splitlines()
              if "==" in line and not line.startswith("#")}
    installed = {canonical(line) for line in frozen.splitlines() if "==" in line}
    assert installed <= pinned, (
        f"not pinned in constraints.txt: {sorted(installed - pinned)}; regenerate it as its "
        "header says")
