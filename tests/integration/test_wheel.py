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
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--disable-pip-version-check", str(source), "-w", str(tmp_path)],
                   check=True, capture_output=True, timeout=300, cwd=tmp_path)
    (wheel,) = tmp_path.glob("cronwrap-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    wanted = {path.relative_to(REPO).as_posix() for path in (REPO / "cronwrap").rglob("*")
              if path.suffix in (".py", ".sql", ".json") or path.name == "py.typed"}
    assert "cronwrap/py.typed" in wanted and "cronwrap/run/runner.py" in wanted
    assert not wanted - shipped, f"missing from the wheel: {sorted(wanted - shipped)}"
