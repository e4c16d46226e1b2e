"""What expansion 7's triggers (the window's counts kept per job and day) cost the write path,
A/B on two ledgers of the same code, one with the day counts' triggers and one without.

    python day_counts_cost.py postgres URL_A URL_B ROUNDS OPS   claim and finish, per call
    python day_counts_cost.py sqlite HOME_A HOME_B ROUNDS N     a firing's CPU (wait4)

PostgreSQL: one client, a held connection, ``PostgresLedger.claim`` (the pinned claim
function: a new slot, inserted pending then running, fires nothing by the WHEN clauses) and
``finish`` (running to succeeded: the trigger's upsert) of OPS new slots per round, the two
ledgers alternating round by round (each first in turn); medians of each call's wall time. SQLite: ``cronwrap run
-n cost-K -- true`` (a new job, so a new slot: claimed, then finished) N times a round on
each CRONWRAP_HOME alternately, the child's CPU
(user + system) from ``os.wait4``; medians. The B side is made by dropping the expansion's
triggers (its tables stay, unread by a firing). Prints one JSON line.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone

TRIGGERS = {"postgres": ("cronwrap_runs_day_inserted", "cronwrap_runs_day_updated",
                         "cronwrap_runs_day_pruned"),
            "sqlite": ("runs_day_inserted", "runs_day_left", "runs_day_entered",
                       "runs_day_pruned")}


def _pg(urls: list[str], rounds: int, ops: int) -> dict[str, object]:
    import psycopg

    from cronwrap.ledger.postgres import PostgresLedger
    from cronwrap.model import ClaimRequest, Finish, JobInfo

    ledgers = [PostgresLedger(url) for url in urls]  # the schema made on an empty database
    with psycopg.connect(urls[1], autocommit=True) as conn:
        for name in TRIGGERS["postgres"]:
            conn.execute(f"DROP TRIGGER IF EXISTS {name} ON cronwrap_runs")
    times: dict[str, list[float]] = {f"{what}_{side}": [] for what in ("claim", "finish")
                                     for side in "ab"}
    done = Finish(status="succeeded", duration_ms=5, exit_code=0, signal=None, timed_out=False,
                  error_tail=None, log_path=None)
    for r in range(rounds):
        order = list(zip("ab", ledgers))
        for side, ledger in order if r % 2 == 0 else order[::-1]:  # each first in turn
            for i in range(ops):
                req = ClaimRequest(job=JobInfo(f"cost-{i % 20}"), run_key=f"r{r}-{i}",
                                   scheduled_at=datetime.now(timezone.utc), trigger="schedule",
                                   host="bench", pid=os.getpid(), pid_start=1, lease=60.0,
                                   overlap_skip=False)
                begun = time.perf_counter()
                claim = ledger.claim(req)
                claimed = time.perf_counter()
                assert claim.run is not None
                ledger.finish(claim.run, done)
                times[f"claim_{side}"].append((claimed - begun) * 1000)
                times[f"finish_{side}"].append((time.perf_counter() - claimed) * 1000)
    for ledger in ledgers:
        ledger.close()
    return {k: round(statistics.median(v), 3) for k, v in times.items()}


def _sqlite(homes: list[str], rounds: int, n: int) -> dict[str, object]:
    import sqlite3

    cronwrap = os.path.join(os.path.dirname(sys.executable), "cronwrap")
    for home in homes:  # the ledger made by a first firing
        subprocess.run([cronwrap, "run", "-n", "cost-first", "--", "true"], check=True,
                       env={**os.environ, "CRONWRAP_HOME": home})
    conn = sqlite3.connect(os.path.join(homes[1], "ledger.db"))
    with conn:
        for name in TRIGGERS["sqlite"]:
            conn.execute(f"DROP TRIGGER IF EXISTS {name}")
    conn.close()
    cpu: dict[str, list[float]] = {"a": [], "b": []}
    count = 0
    for r in range(rounds):
        order = list(zip("ab", homes))
        for side, home in order if r % 2 == 0 else order[::-1]:  # each first in turn
            for _ in range(n):
                count += 1  # a new job each firing: a new slot, claimed and finished
                proc = subprocess.Popen([cronwrap, "run", "-n", f"cost-{count}", "--", "true"],
                                        env={**os.environ, "CRONWRAP_HOME": home})
                _, status, usage = os.wait4(proc.pid, 0)
                assert os.waitstatus_to_exitcode(status) == 0
                cpu[side].append((usage.ru_utime + usage.ru_stime) * 1000)
    return {f"firing_cpu_{k}": round(statistics.median(v), 2) for k, v in cpu.items()}


def main() -> int:
    kind, a, b, rounds, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    result = (_pg if kind == "postgres" else _sqlite)([a, b], rounds, n)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
