"""The pure core type-checks under ``mypy --strict`` (issue 14 §6): the modules that take
``now`` and do no I/O (ARCHITECTURE.md §1's *pure* marks, read by tests/purecore.py), where a
wrong type is a wrong schedule or a wrong decision."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.purecore import pure_paths

REPO = Path(__file__).resolve().parents[2]


def test_the_pure_core_passes_mypy_strict(tmp_path: Path) -> None:
    try:
        import mypy  # noqa: F401
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("mypy is missing (pip install -e '.[test]'), and CI=true never skips")
        pytest.skip("mypy is not installed")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
         "--cache-dir", str(tmp_path / "mypy-cache"), *pure_paths()],
        cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
