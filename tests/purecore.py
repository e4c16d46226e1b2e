"""The pure core, as ARCHITECTURE.md §1 marks it (*pure*): its one list, read by the type check
(tests/unit/test_types.py) and by the rule on its imports (tests/unit/test_architecture.py)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def pure_paths() -> list[str]:
    """The pure modules and packages, as paths from the repository: ``cronwrap/options/spec.py``,
    ``cronwrap/schedule`` (a package: every module in it)."""
    table = (REPO / "ARCHITECTURE.md").read_text(encoding="utf-8").split("## 2.", 1)[0]
    found = []
    for row in table.splitlines():
        cells = row.split("|")
        if row.startswith("|") and len(cells) > 2 and "*pure*" in cells[1]:
            found += [f"cronwrap/{name.rstrip('/')}" for name in re.findall(r"`([^`]+)`", cells[1])]
    assert found, "ARCHITECTURE.md §1 marks no module *pure*"
    return found


def pure_modules() -> dict[str, Path]:
    """Every module of the pure core by its dotted name, with its source."""
    modules = {}
    for path in map(REPO.joinpath, pure_paths()):
        for source in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            parts = source.relative_to(REPO).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = source
    return modules
