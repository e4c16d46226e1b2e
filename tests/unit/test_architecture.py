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
        shown = {f"`{relative.as_posix()}`", f"`{relative.parts[0]}/`"}
        if not any(name in table for name in shown):
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


# Standard-library modules whose business is I/O: files beyond path arithmetic, processes,
# threads, sockets, databases, the terminal, the clock. The pure core imports none of them
# (a clock is an argument, ARCHITECTURE.md §1). os, sys, pathlib, signal, stat and zoneinfo
# stay allowed: the core reads their names and constants and does path arithmetic; a call that
# does touch the file system is no import and this rule cannot see it, so the two that do
# (spec.read_env_file, schedule.zones.system_zone_name) are named in their modules' docstrings.
IO_MODULES = frozenset({
    "_thread", "asyncio", "concurrent", "ctypes", "dbm", "fcntl", "fileinput", "ftplib",
    "getpass", "glob", "grp", "http", "io", "logging", "mmap", "multiprocessing", "platform",
    "pty", "pwd", "resource", "select", "selectors", "shelve", "shutil", "smtplib", "socket",
    "socketserver", "sqlite3", "ssl", "subprocess", "tempfile", "termios", "threading", "time",
    "tty", "urllib.error", "urllib.request", "webbrowser", "wsgiref", "xmlrpc",
})
PURE_LIBRARIES = frozenset({"cronsim"})  # third-party libraries the core may use: pure ones


def _imported(source: Path, name: str) -> list[str]:
    """Every module ``source`` (the module ``name``) names in an import, at load, in a
    function, or for the type checker: ``from a import b`` names ``a`` and ``a.b`` (b may be a
    module). The package ``cronwrap`` itself holds only its version and is left out."""
    import ast

    found = []
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            package = name.split(".") if source.name == "__init__.py" else name.split(".")[:-1]
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *filter(None, [node.module])])
            found += [module, *(f"{module}.{alias.name}" for alias in node.names)]
    return [m for m in found if m != "cronwrap"]


def _only_a_docstring(package: Path) -> bool:
    """Whether a package's ``__init__`` holds nothing but its docstring (a wing's face)."""
    import ast

    init = package / "__init__.py"
    if not init.is_file():
        return False
    body = ast.parse(init.read_text(encoding="utf-8")).body
    return all(isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) for node in body)


def _verdict(module: str, pure: dict[str, Path]) -> str | None:
    """Why the pure core may not import ``module`` (None: it may)."""
    import sys

    top = module.partition(".")[0]
    if top == "cronwrap":
        if module in pure or _only_a_docstring(REPO.joinpath(*module.split("."))):
            return None
        return "a module of cronwrap outside the pure core"
    if top in sys.stdlib_module_names:
        io = [m for m in IO_MODULES if module == m or module.startswith(f"{m}.")]
        return f"a module of the standard library that does I/O ({io[0]})" if io else None
    return None if top in PURE_LIBRARIES else "a library outside the pure core's"


def test_the_pure_core_imports_no_io() -> None:
    """Each pure module (ARCHITECTURE.md §1's *pure* marks) imports only pure modules of
    cronwrap, the standard library's modules that do no I/O, and cronsim. Since a module of
    cronwrap it imports must be pure, and every pure module is checked, this holds however
    deep the imports go: nothing the pure core loads, at load or later, does I/O."""
    from tests.purecore import pure_modules

    known = {".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
             for p in (REPO / "cronwrap").rglob("*.py")}
    pure = pure_modules()
    bad = []
    for name, source in sorted(pure.items()):
        for module in _imported(source, name):
            if module.startswith("cronwrap.") and module not in known:
                continue  # a name imported from a module (from cronwrap.model import Run)
            why = _verdict(module, pure)
            if why:
                bad.append(f"{name} imports {module}: {why}")
    assert not bad, "the pure core imports what does I/O:\n" + "\n".join(sorted(set(bad)))


# The floors of ARCHITECTURE.md §1, top to bottom: a module imports only from its own floor or
# below (at load, in a function, or for the type checker). testing.py stands outside, above all.
FLOORS = [
    {"cli", "admin"},
    {"read", "watch", "commands"},
    {"run"},
    {"process", "ledger", "options"},
    {"redact", "schedule", "crontab"},
    {"model", "errors", "record", "paths", "stdio", "textsafe", "jsontext"},
]


def _floor(module: str) -> int | None:
    wing = module.split(".")[1] if module.count(".") else None
    return next((i for i, floor in enumerate(FLOORS) if wing in floor), None)


def test_wings_import_downward_only() -> None:
    climbing = []
    for source in sorted((REPO / "cronwrap").rglob("*.py")):
        parts = source.relative_to(REPO).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if name in ("cronwrap", "cronwrap.__main__", "cronwrap.testing"):
            continue
        own = _floor(name)
        assert own is not None, f"{name} is on no floor of ARCHITECTURE.md §1"
        for module in _imported(source, name):
            floor = _floor(module) if module.startswith("cronwrap.") else None
            if floor is not None and floor < own:
                climbing.append(f"{name} imports {module}")
    assert not climbing, "imports that climb a floor:\n" + "\n".join(sorted(set(climbing)))


def _boundaries() -> set[str]:
    """The modules ARCHITECTURE.md §9 names as the boundaries where imports are deferred."""
    section = MAP.split("## 9.", 1)[1].split("\n## ", 1)[0]
    rows = [row.split("|") for row in section.splitlines() if row.startswith("| `")]
    return {f"cronwrap/{name}" for cells in rows for name in re.findall(r"`([^`]+)`", cells[1])}


def test_imports_are_deferred_only_at_the_boundaries() -> None:
    """A module's dependencies show in its first lines: an import of cronwrap inside a function
    exists only at one of §9's boundaries, to keep a module off a path that does not need it."""
    import ast

    boundaries = _boundaries()
    assert "cronwrap/cli.py" in boundaries, "ARCHITECTURE.md §9 lists no boundary"
    hidden = []
    for source in sorted((REPO / "cronwrap").rglob("*.py")):
        relative = source.relative_to(REPO).as_posix()
        for function in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                module = (node.module if isinstance(node, ast.ImportFrom) else
                          node.names[0].name if isinstance(node, ast.Import) else None)
                if module and module.split(".")[0] == "cronwrap" and relative not in boundaries:
                    hidden.append(f"{relative}:{node.lineno} imports {module} in {function.name}()")
    assert not hidden, ("imports of cronwrap deferred outside ARCHITECTURE.md §9's boundaries "
                        "(move them to the module's top, or name the boundary there):\n"
                        + "\n".join(hidden))
