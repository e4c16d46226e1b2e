"""Run inside a job of `cronwrap run` by bench/run.py's `step` row: times `cronwrap step` from
where a job calls it, interleaved with the floor wrapper, and writes the samples as JSON.

    step_timer.py CRONWRAP FLOOR_PYTHON FLOOR_WRAPPER FLOOR_DIR ROUNDS OUT

Each round: the floor wrapper (`floor_wrapper.py DIR true`), `cronwrap step new-I -- true` (a
step not done yet: begun, run, ended), `cronwrap step done -- true` (done by round 0: one line,
nothing run), `cronwrap step --done done`, and for comparison a firing on the same ledger
(`cronwrap run -n bench-step-firing --force -- true`). Wall ms and CPU ms (wait4) of each.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time


def timed(argv: list[str]) -> tuple[float, float]:
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = (time.perf_counter() - start) * 1000
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"step_timer: {argv} exited {os.waitstatus_to_exitcode(status)}")
    return wall, (usage.ru_utime + usage.ru_stime) * 1000


def main() -> int:
    exe, python, floor, floor_dir, rounds, out = sys.argv[1:7]
    commands = {
        "floor": lambda i: [python, floor, floor_dir, "true"],
        "new": lambda i: [exe, "step", f"new-{i}", "--", "true"],
        "done": lambda i: [exe, "step", "done", "--", "true"],
        "ask": lambda i: [exe, "step", "--done", "done"],
        "firing": lambda i: [exe, "run", "-n", "bench-step-firing", "--force", "--", "true"],
    }
    for name, argv in commands.items():  # one untimed round: caches, the done step
        timed(argv(-1))
    samples: dict[str, list[tuple[float, float]]] = {k: [] for k in commands}
    for i in range(int(rounds)):
        for name, argv in commands.items():
            samples[name].append(timed(argv(i)))
    with open(out, "w") as f:
        json.dump(samples, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
