"""The least a ``status`` of every job can do in Python, a reference for the status rows of
bench/run.py (issue 24 §3): the stdlib only, one query for each job's last run and its runs in
the 7-day window that did not succeed, one line a job in fixed columns. No schedule is read
(no next slot, no late slots), no running runs, no health, no escaping, no terminal layout,
none of cronwrap's imports: everything ``status`` does beyond this is on top of it.

    python status_floor.py LEDGER.db            # the rows
    python status_floor.py LEDGER.db --next     # and each job's next slot (cronsim, as cronwrap)
"""

import sqlite3
import sys
import time

db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
since = time.time() - 7 * 86400
rows = db.execute(
    "SELECT j.name, r.status, r.started_at, r.duration_ms, r.exit_code, j.schedule,"
    " (SELECT count(*) FROM runs o WHERE o.job = j.name AND o.created_at >= :since"
    "  AND o.status <> 'succeeded')"
    " FROM jobs j LEFT JOIN runs r ON r.id = (SELECT max(id) FROM runs x WHERE x.job = j.name)"
    " ORDER BY j.name", {"since": since}).fetchall()
nexts: dict[str, str] = {}
if "--next" in sys.argv:
    from datetime import datetime, timezone

    from cronsim import CronSim

    now = datetime.now(timezone.utc)
    for name, *_, schedule, _bad in rows:
        nexts[name] = next(CronSim(schedule, now)).strftime("%H:%M") if schedule else "-"
out = [f"{'JOB':<10} {'STATUS':<10} {'STARTED':>14} {'DURATION':>9} {'EXIT':>4} {'BAD':>4} NEXT"]
for name, status, started, ms, code, _schedule, bad in rows:
    out.append(f"{name:<10} {status or '-':<10} {started or 0:>14.0f} {ms or 0:>9} "
               f"{'-' if code is None else code:>4} {bad:>4} {nexts.get(name, '')}")
sys.stdout.write("\n".join(out) + "\n")
