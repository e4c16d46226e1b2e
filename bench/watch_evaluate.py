"""What a long-running ``cronwrap watch`` pays every --interval (bench/run.py's watch row, issue 23):
one ``Watcher`` built once, as ``cronwrap watch`` builds it, then N calls of ``evaluate(now)``.

    python watch_evaluate.py N

Run with bench/.venv's python and the ledger's environment (CRONWRAP_HOME or CRONWRAP_DB). The
watcher is a dry run (``Watcher(..., dry_run=True)``): it reads everything a watcher reads — the
ledger opened (each evaluation opens and closes it, as the watcher does: PostgreSQL connects),
``report.job_reports`` as ``status``, one ``Ledger.runs`` per job whose last run failed (its
failing streak), the alerts the ledger holds — and writes nothing to the ledger; what it would
open and close goes to /dev/null. (A watcher that sends has, once its alerts are open and told,
nothing more to write per evaluation: each open alert's sends are already in what ``alerts``
read.) One untimed evaluation first (the cold one: its wall time is reported apart), then N, each
timed by CPU (time.process_time: this process only; a PostgreSQL server's share is in the wall
time) and wall, with the wall time split into connect, reports, streaks (the runs queries) and
alerts; the rest is the breaches' computation, the dry run's lines, and closing. Then, untimed,
what the ledger holds now: the jobs, the breaches by kind and the jobs with one open. Prints one
JSON object (milliseconds).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter

from cronwrap.ledger import sqlcore
from cronwrap.read import reads, report
from cronwrap.watch import alerts as found, watcher


def main() -> int:
    n = int(sys.argv[1])
    url = reads.ledger_url(None)
    spent = {"connect": 0.0, "reports": 0.0, "streaks": 0.0, "alerts": 0.0}
    calls = Counter()

    def timing(phase, function):
        def wrapper(*a, **kw):
            begun = time.perf_counter()
            try:
                return function(*a, **kw)
            finally:
                spent[phase] += time.perf_counter() - begun
                calls[phase] += 1
        return wrapper

    real_reports = report.job_reports
    report.job_reports = timing("reports", report.job_reports)
    sqlcore.SqlLedger.runs = timing("streaks", sqlcore.SqlLedger.runs)
    sqlcore.SqlLedger.alerts = timing("alerts", sqlcore.SqlLedger.alerts)
    opened = timing("connect", lambda: reads.ledger(url))
    watch = watcher.Watcher(opened, [], None, dry_run=True)
    out = sys.stdout
    null = open(os.devnull, "w")
    sys.stdout = null  # the dry run's "would open" lines
    try:
        begun = time.perf_counter()
        watch.evaluate(watcher.now())
        cold = (time.perf_counter() - begun) * 1000
        cpu, wall, phases, runs_calls = [], [], [], []
        for _ in range(n):
            for phase in spent:
                spent[phase] = 0.0
            calls.clear()
            at = watcher.now()
            c0, w0 = time.process_time(), time.perf_counter()
            watch.evaluate(at)
            w1, c1 = time.perf_counter(), time.process_time()
            cpu.append((c1 - c0) * 1000)
            wall.append((w1 - w0) * 1000)
            phases.append({k: v * 1000 for k, v in spent.items()})
            runs_calls.append(calls["streaks"])
    finally:
        sys.stdout = out
        null.close()
    # untimed: what this ledger has open now, as the evaluation just saw it
    report.job_reports = real_reports
    ledger = reads.ledger(url)
    try:
        at = watcher.now()
        reports = report.job_reports(ledger, at - watcher.WINDOW, None, at)
        streaks = {r.summary.job: s for r in reports if (s := watcher._streak(ledger, r))}
        breaches = found.breaches(reports, at, None, streaks)
    finally:
        ledger.close()
    print(json.dumps({
        "cpu": cpu, "wall": wall, "cold": cold, "phases": phases, "runs_queries": runs_calls,
        "jobs": len(reports), "streak_jobs": len(streaks),
        "breaches": dict(Counter(a.kind for a in breaches)),
        "jobs_breached": len({a.job for a in breaches}),
    }), file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
