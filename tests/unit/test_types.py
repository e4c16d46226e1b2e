"""The whole package type-checks under ``mypy --strict`` (issue 21 §1), the pure core on its
own too (ARCHITECTURE.md §1's *pure* marks, read by tests/purecore.py: with nothing else
imported it must still check), and a ``JobSpec`` is held to its declared fields."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.purecore import pure_paths

REPO = Path(__file__).resolve().parents[2]


def mypy_strict(tmp_path: Path, *files: str) -> subprocess.CompletedProcess[str]:
    try:
        import mypy  # noqa: F401
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("mypy is missing (pip install -e '.[test]'), and CI=true never skips")
        pytest.skip("mypy is not installed")
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
         "--cache-dir", str(tmp_path / "mypy-cache"), *files],
        cwd=REPO, capture_output=True, text=True, timeout=600)


def test_the_whole_package_passes_mypy_strict(tmp_path: Path) -> None:
    proc = mypy_strict(tmp_path, "cronwrap")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_pure_core_passes_mypy_strict(tmp_path: Path) -> None:
    proc = mypy_strict(tmp_path, *pure_paths())
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_holds_a_jobspec_to_its_fields(tmp_path: Path) -> None:
    """JobSpec's fields are declared (issue 21 §1): a misspelt option or a value of the wrong
    type is an error, where ``__getattr__ -> Any`` let both through."""
    snippet = tmp_path / "uses_spec.py"
    snippet.write_text(
        "from cronwrap.options.spec import JobSpec\n\n\n\n"
        "def fine(spec: JobSpec) -> tuple[str, float, str | None]:\n"
        "    return spec.overlap, spec.timeout, spec.lock_file\n\n\n"
        "def wrong_type(spec: JobSpec) -> int:\n"
        "    overlap: int = spec.overlap\n"
        "    return overlap\n\n\n"
        "def misspelt(spec: JobSpec) -> object:\n"
        "    return spec.no_such_option\n", encoding="utf-8")
    proc = mypy_strict(tmp_path, str(snippet))
    errors = [line for line in proc.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 2, proc.stdout + proc.stderr
    assert "uses_spec.py:10:" in errors[0] and 'variable has type "int"' in errors[0]
    assert '"JobSpec" has no attribute "no_such_option"' in errors[1]
