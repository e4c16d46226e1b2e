"""Time ``PostgresLedger.claim()`` as one host's cron firings would call it (bench/run.py race).

    python claim_timer.py URL HOST JOBS START_AT OUT [ledger|floor|lean]

Run with bench/.venv's python, one process per "host", all started with the same START_AT
(epoch seconds). From START_AT each process does, for job-0 … job-(JOBS-1) in the same order
as the other hosts (so the hosts contend for the same job rows at the same moment), what
``cronwrap run -n job-N -- true`` does with the ledger: open a fresh ``PostgresLedger``
(connect + schema check), ``claim()`` the minute's slot, ``finish()`` it when claimed, close.
Only the ledger calls are timed; Python start-up and the job are left out. One JSON line per
claim goes to OUT: {"job", "connect_ms", "claim_ms", "claimed", "skip_reason"}.

``floor`` (issue 24 §2's reference for the race's p95): the same connections and order, but
the "claim" is one ``INSERT … ON CONFLICT DO NOTHING RETURNING id`` into a bare table
(``race_floor``, created by the bench), on a fresh psycopg connection as the firing's is.

``lean`` (an experiment): the same connections and order, the claim by ``claim_lean.claim``
(claim_lean.py's one statement, the pinned function behind it) on a fresh psycopg connection,
the finish one UPDATE as cronwrap's.

cronwrap itself records no claim timing, and this helper changes nothing in it: it calls the
installed package's own classes.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime, timezone

from cronwrap.ledger.postgres import PostgresLedger
from cronwrap.model import ClaimRequest, Finish, JobInfo
from cronwrap.process import procs


def main() -> int:
    url, host, jobs, start_at, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
    if sys.argv[6:] == ["floor"]:
        return floor(url, jobs, start_at, out)
    if sys.argv[6:] == ["lean"]:
        return lean(url, host, jobs, start_at, out)
    pid, pid_start = procs.self_identity()
    slot, run_key = minute(start_at)
    results = []
    wait_for(start_at)
    for n in range(jobs):
        t0 = time.perf_counter()
        ledger = PostgresLedger(url)
        t1 = time.perf_counter()
        claim = ledger.claim(ClaimRequest(
            job=JobInfo(f"job-{n}"), run_key=run_key, scheduled_at=slot, trigger="schedule",
            host=host, pid=pid, pid_start=pid_start, lease=120.0, overlap_skip=True, force=False,
            is_gone=lambda p, s: not procs.is_alive(p, s)))
        t2 = time.perf_counter()
        if claim.run is not None:
            ledger.finish(claim.run, Finish(
                status="succeeded", duration_ms=1, exit_code=0, signal=None, timed_out=False,
                error_tail=None, log_path=None))
        ledger.close()
        results.append({"job": n, "connect_ms": (t1 - t0) * 1000, "claim_ms": (t2 - t1) * 1000,
                        "claimed": claim.run is not None, "skip_reason": claim.skip_reason})
    return write(out, results)


def minute(start_at: float) -> tuple[datetime, str]:
    """The slot of START_AT's minute and its run key, as runner.minute_slot."""
    slot = datetime.fromtimestamp(start_at - start_at % 60, timezone.utc)
    return slot, slot.strftime("%Y-%m-%dT%H:%M:%SZ")


def wait_for(start_at: float) -> None:
    delay = start_at - time.time()
    if delay > 0:
        time.sleep(delay)


def write(out: str, results: list[dict]) -> int:
    with open(out, "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in results))
    return 0


def floor(url: str, jobs: int, start_at: float, out: str) -> int:
    import psycopg

    _, run_key = minute(start_at)
    results = []
    wait_for(start_at)
    for n in range(jobs):
        t0 = time.perf_counter()
        conn = psycopg.connect(url, autocommit=True, prepare_threshold=None)
        t1 = time.perf_counter()
        row = conn.execute("INSERT INTO race_floor (job, run_key) VALUES (%s, %s) "
                           "ON CONFLICT DO NOTHING RETURNING id", (f"job-{n}", run_key)).fetchone()
        t2 = time.perf_counter()
        conn.close()
        results.append({"job": n, "connect_ms": (t1 - t0) * 1000, "claim_ms": (t2 - t1) * 1000,
                        "claimed": row is not None, "skip_reason": None if row else "duplicate"})
    return write(out, results)


def lean(url: str, host: str, jobs: int, start_at: float, out: str) -> int:
    import os

    import psycopg
    from psycopg.rows import dict_row

    import claim_lean

    slot, run_key = minute(start_at)
    pid, pid_start = procs.self_identity()
    base = dict(schedule=None, tz=None, key_template=None, settings=None, run_key=run_key,
                scheduled_at=slot, trigger="schedule", host=host, pid=pid, pid_start=pid_start,
                boot_id=None, pid_ns=None, lease=120.0, overlap_skip=True, force=False,
                max_attempts=1, skew_ms=None, now=None, gone=[], checked=False,
                schema=claim_lean.schema_version())
    results = []
    wait_for(start_at)
    for n in range(jobs):
        t0 = time.perf_counter()
        conn = psycopg.connect(url, autocommit=True, prepare_threshold=None, row_factory=dict_row)
        t1 = time.perf_counter()
        outcome, _, run, sent = claim_lean.claim(conn, {**base, "job": f"job-{n}"})
        t2 = time.perf_counter()
        if outcome == "claimed":
            conn.execute("UPDATE cronwrap_runs SET status = 'succeeded', finished_at = now(), "
                         "duration_ms = 1, exit_code = 0, locked_until = NULL WHERE id = %s AND "
                         "fence = %s AND status = 'running'", (run["id"], run["fence"]))
        conn.close()
        results.append({"job": n, "connect_ms": (t1 - t0) * 1000, "claim_ms": (t2 - t1) * 1000,
                        "claimed": outcome == "claimed",
                        "skip_reason": None if outcome == "claimed" else outcome,
                        "statements": sent, "pid": os.getpid()})
    return write(out, results)


if __name__ == "__main__":
    sys.exit(main())
