"""``cronwrap status`` and ``status --json`` from two source trees, A/B in the same rounds.

    python status_ab.py ROUNDS TARGET BEFORE_SRC AFTER_SRC

TARGET: a CRONWRAP_HOME (SQLite) or a PostgreSQL URL (CRONWRAP_DB). Each tree (a checkout or
``git archive REV cronwrap | tar -x``) is put first on PYTHONPATH of this interpreter (run it
with bench/.venv's python, which has the dependencies); the commands alternate, a first
untimed round writes the trees' bytecode. Medians of wall time and of the child's CPU (user +
system, ``os.wait4``), in ms, as JSON. issue 24 §3's before/after in bench/results.md.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time


def main() -> int:
    rounds, target, before, after = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["CRONWRAP_DB" if target.startswith("postgres") else "CRONWRAP_HOME"] = target
    found: dict[str, list[float]] = {}
    for r in range(rounds + 1):
        for args in (["status"], ["status", "--json"]):
            for name, tree in (("before", before), ("after", after)):
                begun = time.perf_counter()
                proc = subprocess.Popen([sys.executable, "-m", "cronwrap", *args],
                                        env=dict(env, PYTHONPATH=tree, PYTHONSAFEPATH="1"),
                                        stdout=subprocess.DEVNULL)
                _, status, usage = os.wait4(proc.pid, 0)
                wall = time.perf_counter() - begun
                assert os.waitstatus_to_exitcode(status) == 0, (name, args)
                if r:
                    key = f"{' '.join(args)} {name}"
                    found.setdefault(f"{key} wall", []).append(wall * 1000)
                    found.setdefault(f"{key} cpu", []).append((usage.ru_utime + usage.ru_stime) * 1000)
    print(json.dumps({k: round(statistics.median(v), 1) for k, v in found.items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
