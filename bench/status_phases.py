"""Where one ``cronwrap status`` spends its time: import, connect, query, render (bench/run.py's
status rows, issue 15 §1).

    python status_phases.py --modules ARGS…          the modules the command imports, one a line
    python status_phases.py --time MODULES ARGS…     one timed run, as JSON (milliseconds)

Run with bench/.venv's python and the command's environment (CRONWRAP_HOME or CRONWRAP_DB).
A timed run first imports every module the command would (the list --modules printed: its
import phase), then runs ``cli.main(ARGS)`` with stdout on /dev/null, timing ``reads.ledger``
(connect: the ledger opened, PostgreSQL's connection made), ``report.job_reports`` or
``Ledger.runs`` (query: the ledger read and the reports built) and the rest of ``main``
(render: argument parsing, JSON or table, and closing). The interpreter's own start is not
in it: bench/run.py measures ``python -c pass`` beside it.
"""

from __future__ import annotations

import time

START = time.perf_counter()

import importlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402


def modules(args: list[str]) -> None:
    before = set(sys.modules)
    from cronwrap import cli

    with open(os.devnull, "w") as null:
        real, sys.stdout = sys.stdout, null
        try:
            cli.main(args)
        finally:
            sys.stdout = real
    print("\n".join(sorted(set(sys.modules) - before)))


def timed(names: list[str], args: list[str]) -> None:
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:
            pass  # a module made at run time (not importable by name)
    imported = time.perf_counter()
    from cronwrap import cli
    from cronwrap.ledger import sqlcore
    from cronwrap.read import reads, report

    spent = {"connect": 0.0, "query": 0.0}

    def timing(phase, function):
        def wrapper(*a, **kw):
            begun = time.perf_counter()
            try:
                return function(*a, **kw)
            finally:
                spent[phase] += time.perf_counter() - begun
        return wrapper

    reads.ledger = timing("connect", reads.ledger)
    report.job_reports = timing("query", report.job_reports)
    sqlcore.SqlLedger.runs = timing("query", sqlcore.SqlLedger.runs)
    with open(os.devnull, "w") as null:
        real, sys.stdout = sys.stdout, null
        begun = time.perf_counter()
        try:
            code = cli.main(args)
        finally:
            sys.stdout = real
        ran = time.perf_counter() - begun
    ms = {"import": (imported - START) * 1000, "connect": spent["connect"] * 1000,
          "query": spent["query"] * 1000,
          "render": (ran - spent["connect"] - spent["query"]) * 1000, "exit": code}
    print(json.dumps(ms))


if __name__ == "__main__":
    if sys.argv[1] == "--modules":
        modules(sys.argv[2:])
    else:
        with open(sys.argv[2]) as f:
            timed(f.read().split(), sys.argv[3:])
