"""The least a ``status`` of every job can do in Python, a reference for the status rows of
bench/run.py (issue 24 §3): the stdlib only, cronwrap's own two reads of SQLite as its
ledger/sql/sqlite.sql has them (``overview``: each job with its last run's row;
``window_counts``: the 7-day window's counts from day_counts, expansion 7), summed per job,
one line a job in fixed columns. No schedule is read (no next slot, no late slots), no
running runs, no health, no escaping, no terminal layout, none of cronwrap's imports:
everything ``status`` does beyond this is on top of it.

    python status_floor.py LEDGER.db            # the rows
    python status_floor.py LEDGER.db --next     # and each job's next slot (cronsim, as cronwrap)
    python status_floor.py LEDGER.db --json     # the objects ``status --json`` writes, as it
                                                # writes them: each job's keys, its last run's
                                                # row, its times in ISO 8601, its counts by status
"""

import os
import sqlite3
import sys
import time

SQL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cronwrap", "ledger", "sql",
                   "sqlite.sql")
with open(SQL, encoding="utf-8") as f:  # read as cronwrap.ledger.sql.load reads it, without
    # importing cronwrap: the floor is the stdlib alone
    BLOCKS = {name.strip(): body.strip().rstrip(";") for name, _, body in
              (block.partition("\n") for block in f.read().split("-- name: ")[1:])}
DAY = 86400
ENDS = ("succeeded", "warning", "failed", "timeout", "killed", "skipped", "missed")

db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
since = time.time() - 7 * DAY
first = int(since // DAY)
if since - first * DAY <= DAY / 2:  # as sqlcore's _window: at most half a day read from runs
    window = dict(lo=first * DAY - 1, hi=since, sign=-1, from_day=first)
else:
    window = dict(lo=since, hi=(first + 1) * DAY + 1, sign=1, from_day=first + 1)
window.update(since=since, edge_day=first)
rows = db.execute(BLOCKS["overview"]).fetchall()
counts: dict[str, dict[str, int]] = {}
for job, status, n, *ends, _others in db.execute(BLOCKS["window_counts"], window):
    kept = counts.setdefault(job, {})
    if status is None:  # a whole days' row (n NULL) or the first day's part (n: its sign)
        sign = 1 if n is None else n
        for end, count in zip(ENDS, ends):
            if count:
                kept[end] = kept.get(end, 0) + sign * count
    else:
        kept[status] = kept.get(status, 0) + n
bad = {job: sum(n for end, n in kept.items() if end != "succeeded") for job, kept in counts.items()}
nexts: dict[str, str] = {}
if "--next" in sys.argv:
    from datetime import datetime, timezone

    from cronsim import CronSim

    now = datetime.now(timezone.utc)
    for name, schedule in ((r[0], r[1]) for r in rows):
        nexts[name] = next(CronSim(schedule, now)).strftime("%H:%M") if schedule else "-"
names = [d[0] for d in db.execute(BLOCKS["overview"] + " LIMIT 0").description]
if "--json" in sys.argv:
    import json
    from datetime import datetime, timezone

    def iso(t):
        return None if t is None else \
            datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="milliseconds")

    job_keys, run_keys = names[:9], names[9:]
    times = {"scheduled_at", "locked_until", "started_at", "finished_at"}
    objects = []
    for r in rows:
        job = dict(zip(job_keys, r))
        run = None if r[9] is None else {
            k: iso(v) if k in times else v for k, v in zip(run_keys, r[9:])}
        good = run is not None and run["status"] == "succeeded"
        objects.append(json.dumps({
            "format": 1, "job": job["name"], "scope": "fleet", "host": None,
            "schedule": job["schedule"], "tz": job["tz"], "last_run": run,
            "last_success_at": iso(job["last_success_at"]),
            "next_due_at": nexts.get(job["name"]), "running": [], "missed": 0, "late": 0,
            "counts": counts.get(job["name"], {}), "health": "ok" if good else "critical",
            "why": "last run " + (run["status"] if run else "none"), "paused": False,
            "pause": None, "alerts": [], "first_seen": iso(job["first_seen"]),
            "last_seen": iso(job["last_seen"])}))
    sys.stdout.write("[\n  " + ",\n  ".join(objects) + "\n]\n")
    sys.exit(0)
at = {k: names.index(k) for k in ("status", "started_at", "duration_ms", "exit_code")}
out = [f"{'JOB':<10} {'STATUS':<10} {'STARTED':>14} {'DURATION':>9} {'EXIT':>4} {'BAD':>4} NEXT"]
for r in rows:
    status, started, ms, code = (r[at[k]] for k in ("status", "started_at", "duration_ms",
                                                      "exit_code"))
    out.append(f"{r[0]:<10} {status or '-':<10} {started or 0:>14.0f} {ms or 0:>9} "
               f"{'-' if code is None else code:>4} {bad.get(r[0], 0):>4} {nexts.get(r[0], '')}")
sys.stdout.write("\n".join(out) + "\n")
