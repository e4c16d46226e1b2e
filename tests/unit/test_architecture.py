"""ARCHITECTURE.md stays the map of the code: every module is on it, and every section the code
cites exists."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MAP = (REPO / "ARCHITECTURE.md").read_text(encoding="utf-8")
SECTIONS = {int(n) for n in re.findall(r"^## (\d+)\. ", MAP, re.M)}


def test_every_module_is_on_the_map() -> None:
    table = MAP.split("## 2.", 1)[0]
    package = REPO / "cronwrap"
    missing = []
    for source in sorted(package.rglob("*.py")):
        relative = source.relative_to(package)
        if source.name in ("__init__.py", "__main__.py") and len(relative.parts) == 1:
            continue
        shown = f"`{relative.parts[0]}/`" if len(relative.parts) > 1 else f"`{source.name}`"
        if shown not in table:
            missing.append(str(relative))
    assert not missing, f"modules ARCHITECTURE.md §1 does not list: {missing}"


def test_citations_name_sections_that_exist() -> None:
    cited = []
    for folder in ("cronwrap", "tests", "bench", "tools"):
        for source in (REPO / folder).rglob("*.py"):
            if ".venv" in source.parts:
                continue
            text = source.read_text(encoding="utf-8")
            cited += [(source.name, int(n)) for n in re.findall(r"ARCHITECTURE\.md\s+§(\d+)", text)]
            assert not re.search(r"DESIGN(\.md| §)", text) or source.name == Path(__file__).name, (
                f"{source.name} cites a design document the repository does not have")
    assert cited, "nothing cites ARCHITECTURE.md"
    unknown = [(name, n) for name, n in cited if n not in SECTIONS]
    assert not unknown, f"citations of sections ARCHITECTURE.md does not have: {unknown}"


def _imports(source: Path) -> set[str]:
    """The cronwrap modules a module imports anywhere: at load, in a function (kept there only
    to keep an import off the `run` path, ARCHITECTURE.md §9, never to hide a cycle), or for
    the type checker."""
    import ast

    found: set[str] = set()
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def test_no_import_cycle() -> None:
    package = REPO / "cronwrap"
    modules = {}
    for source in package.rglob("*.py"):
        parts = source.relative_to(REPO).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = source
    graph = {name: {dep for dep in _imports(source)
                    if dep in modules and dep != name}
             for name, source in modules.items()}
    # A package's __init__ is loaded with each of its modules: an edge to it is real.
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(name: str) -> list[str] | None:
        state[name] = 1
        path.append(name)
        for dep in sorted(graph[name]):
            if state.get(dep) == 1:
                return path[path.index(dep):] + [dep]
            if dep not in state and (cycle := visit(dep)):
                return cycle
        path.pop()
        state[name] = 2
        return None

    for name in sorted(graph):
        if name not in state:
            cycle = visit(name)
            assert cycle is None, f"import cycle: {' -> '.join(cycle)}"
