#!/usr/bin/env python3
"""Measure cronwrap against the budgets of DESIGN §7, side by side with flock + timeout.

    python3 bench/run.py [--quick] [--only NAME…] [--pg]

Installs the checkout (non-editable, so bytecode is compiled as for an operator) into
bench/.venv, then runs each measurement in one go, prints a table with medians, ratios and
budgets, and writes it to bench/results.md. Nothing here asserts: the figures are reported.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
VENV = Path(os.environ.get("CRONWRAP_BENCH_VENV", HERE / ".venv"))
RESULTS = HERE / "results.md"
GIB = 1 << 30


def install() -> Path:
    python = VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    "--force-reinstall", "--no-deps", str(REPO)], check=True)
    probe = subprocess.run([str(python), "-c", "import cronsim, typer, psycopg"], capture_output=True)
    if probe.returncode != 0:
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        str(REPO)], check=True)
    return VENV / "bin" / "cronwrap"


def timed(argv: list[str], env: dict[str, str], **kw) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)
    return (time.perf_counter() - start) * 1000


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


class Bench:
    def __init__(self, exe: Path, quick: bool) -> None:
        self.exe = str(exe)
        self.python = str(exe.parent / "python")
        self.quick = quick
        self.tmp = Path(tempfile.mkdtemp(prefix="cronwrap-bench."))
        self.rows: list[tuple[str, str, str, str]] = []

    def env(self, home: str, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CRONWRAP_")}
        env.update(CRONWRAP_HOME=str(self.tmp / home), **extra)
        return env

    def row(self, what: str, figure: str, budget: str, verdict: bool | None) -> None:
        mark = "—" if verdict is None else ("met" if verdict else "MISSED")
        self.rows.append((what, figure, budget, mark))
        print(f"  {what}: {figure}  [{budget}: {mark}]", flush=True)

    # -- measurements -----------------------------------------------------------------------

    def startup(self, db: str | None = None, label: str = "SQLite") -> None:
        n = 15 if self.quick else 60
        env = self.env("startup-" + label.lower(), **({"CRONWRAP_DB": db} if db else {}))
        cw = [self.exe, "run", "-n", "x", "--force", "--", "true"]
        floor = [self.python, str(HERE / "floor_wrapper.py"), str(self.tmp), "true"]
        flock = ["flock", "-n", str(self.tmp / "flock.lock"), "timeout", "10", "true"]
        for argv in (cw, floor, flock):
            timed(argv, env)  # warm caches and create the ledger
        samples: dict[str, list[float]] = {"cw": [], "floor": [], "flock": []}
        for _ in range(n):  # interleaved, so load changes hit all three alike
            samples["cw"].append(timed(cw, env))
            samples["floor"].append(timed(floor, env))
            samples["flock"].append(timed(flock, env))
        med = {k: statistics.median(v) for k, v in samples.items()}
        budget = 60.0 if db is None else 180.0
        self.row(f"run -- true, {label}, median of {n}",
                 f"{med['cw']:.1f} ms (p95 {pct(samples['cw'], 95):.1f}); floor {med['floor']:.1f} ms; "
                 f"flock+timeout {med['flock']:.1f} ms; ratio to floor {med['cw'] / med['floor']:.2f}x, "
                 f"to flock+timeout {med['cw'] / med['flock']:.1f}x",
                 f"≤ {budget:.0f} ms" + (" and ≤ 2.5x floor" if db is None else ""),
                 med["cw"] <= budget and (db is not None or med["cw"] <= 2.5 * med["floor"]))

    def big_output(self) -> None:
        size = GIB // 4 if self.quick else GIB
        env = self.env("big")
        argv = [self.exe, "run", "-n", "big", "--force", "--", "head", "-c", str(size), "/dev/zero"]
        start = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=True)
        wall = time.perf_counter() - start
        finish = self.last_event(env, "big")
        cpu_per_gib = finish["wrapper_cpu_ms"] / 1000 * GIB / size
        rss_mb = finish["wrapper_maxrss_kb"] / 1024
        gnu = self.gnu_cpu(["timeout", "60", "head", "-c", str(size), "/dev/zero"])
        self.row(f"job writes {size // (1 << 20)} MiB to stdout",
                 f"wrapper peak RSS {rss_mb:.1f} MB; wrapper CPU {cpu_per_gib:.2f} s/GiB; "
                 f"wall {wall:.2f} s (timeout+head alone: {gnu:.2f} s CPU incl. head)",
                 "RSS ≤ 40 MB, CPU ≤ 1.5 s/GiB", rss_mb <= 40 and cpu_per_gib <= 1.5)

    def gnu_cpu(self, argv: list[str]) -> float:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
        _, _, usage = os.wait4(proc.pid, 0)
        return usage.ru_utime + usage.ru_stime

    def last_event(self, env: dict[str, str], job: str) -> dict:
        path = Path(env["CRONWRAP_HOME"]) / "logs" / "events.jsonl"
        events = [json.loads(l) for l in path.read_text().splitlines()]
        return [e for e in events if e["job"] == job and e["event"] in ("finish", "timeout")][-1]

    def start_ts(self, env: dict[str, str], job: str) -> float:
        from datetime import datetime

        path = Path(env["CRONWRAP_HOME"]) / "logs" / "events.jsonl"
        events = [json.loads(l) for l in path.read_text().splitlines()]
        start = [e for e in events if e["job"] == job and e["event"] == "start"][-1]
        return datetime.fromisoformat(start["ts"]).timestamp()

    def term_lateness(self) -> None:
        n = 10 if self.quick else 40
        timeout, kill_after = 0.2, 0.3
        job = self.tmp / "stubborn.py"
        job.write_text(
            "import os, signal, sys, time\n"
            "out = sys.argv[1]\n"
            "t0 = time.time()\n"
            "def on_term(*_):\n"
            "    with open(out, 'w') as f: f.write(f'{t0} {time.time()}')\n"
            "signal.signal(signal.SIGTERM, on_term)\n"
            "while True: time.sleep(1)\n")
        results = {}
        for label, prefix in (("cronwrap", [self.exe, "run", "-n", "late", "--force", "--timeout",
                                            str(timeout), "--kill-after", str(kill_after), "--"]),
                              ("timeout", ["timeout", "-k", str(kill_after), str(timeout)])):
            late, gone = [], []
            for i in range(n):
                out = self.tmp / f"term-{label}-{i}"
                env = self.env("late")
                launched = time.time()
                subprocess.run([*prefix, self.python, str(job), str(out)], env=env)
                end = time.time()
                # The deadline counts from the spawn: cronwrap logs its start event just before
                # it; GNU timeout spawns within a millisecond of launch. Both err on "later".
                spawned = self.start_ts(env, "late") if label == "cronwrap" else launched
                t_term = float(out.read_text().split()[1])
                late.append((t_term - spawned - timeout) * 1000)
                gone.append((end - spawned - timeout - kill_after) * 1000)
            results[label] = (late, gone)
        late, gone = results["cronwrap"]
        g_late, g_gone = results["timeout"]
        self.row(f"TERM after the deadline, {n} runs",
                 f"p99 {pct(late, 99):.1f} ms late (GNU timeout {pct(g_late, 99):.1f} ms); tree gone "
                 f"p99 {pct(gone, 99):.1f} ms after kill-after (GNU {pct(g_gone, 99):.1f} ms)",
                 "p99 ≤ 50 ms; gone ≤ kill-after + 100 ms",
                 pct(late, 99) <= 50 and pct(gone, 99) <= 100)

    def write(self) -> None:
        lines = ["# cronwrap benchmark results", "",
                 f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on "
                 f"{os.cpu_count()} cores, Python {sys.version.split()[0]}, by `python3 bench/run.py`"
                 + (" --quick" if self.quick else "") + ".", "",
                 "| what | measured | budget (DESIGN §7) | verdict |", "|---|---|---|---|"]
        lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in self.rows]
        RESULTS.write_text("\n".join(lines) + "\n")
        shutil.rmtree(self.tmp, ignore_errors=True)


MEASUREMENTS = ("startup", "big_output", "term_lateness")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples, 256 MiB output")
    parser.add_argument("--only", nargs="*", choices=MEASUREMENTS, help="run only these")
    args = parser.parse_args()
    bench = Bench(install(), args.quick)
    for name in args.only or MEASUREMENTS:
        print(f"{name}:", flush=True)
        getattr(bench, name)()
    bench.write()
    print(f"\nwritten to {RESULTS.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
