"""One client of the burst row of bench/run.py: COUNT claims of distinct jobs, one after another.

    python burst_client.py ledger URL FIRST COUNT RUN_KEY OUT
    python burst_client.py floor  URL FIRST COUNT RUN_KEY OUT
    python burst_client.py writes URL FIRST COUNT RUN_KEY OUT
    python burst_client.py lean   URL FIRST COUNT RUN_KEY OUT
    python burst_client.py fn     URL FIRST COUNT RUN_KEY OUT

Run with bench/.venv's python, 50 of them at once. Each sets up (``ledger``: cronwrap's own
``PostgresLedger(URL)``, as installed, nothing patched; ``floor``: one psycopg connection in
autocommit), prints ``ready``, and waits for a line on stdin: the bench releases all clients
together once every one is ready. Then it claims job-FIRST … job-(FIRST+COUNT-1) for RUN_KEY:

- ``ledger``: ``claim()`` of a ClaimRequest as a firing makes it (timed alone);
- ``floor``: ``INSERT INTO burst_floor … ON CONFLICT DO NOTHING RETURNING id`` — the least any
  claim can cost on this server, one statement and its commit;
- ``writes`` (on a cronwrap ledger): the rows a claim must write and nothing else, as one
  statement — the job's row upserted with its fence raised, the slot's row inserted running
  under that fence — with none of the protocol's reads, checks or decisions: what any claim
  that keeps cronwrap's tables costs at least (the bound on the ratio to the floor);
- ``lean`` (on a cronwrap ledger, an experiment): ``claim_lean.claim`` — the one-statement
  claim of claim_lean.py, the pinned function behind it — on a psycopg connection, with the
  parameters ``ledger`` sends (no cronwrap client code: its least cost);
- ``fn`` (the same, without the lean statement): the pinned function as ``ledger`` calls it,
  on a bare psycopg connection — what the server costs without cronwrap's client code.

A claim that raises is recorded with its error and the client goes on. OUT gets one JSON
object: {"setup_ms", "claims": [[start epoch s, ms, claimed, error or null], …]}.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime, timezone


def ledger_claimer(url: str, run_key: str):
    from cronwrap.ledger.postgres import PostgresLedger
    from cronwrap.model import ClaimRequest, JobInfo
    from cronwrap.process import procs

    pid, pid_start = procs.self_identity()
    slot = datetime.strptime(run_key, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    ledger = PostgresLedger(url)

    def claim(job: str) -> bool:
        return ledger.claim(ClaimRequest(
            job=JobInfo(job), run_key=run_key, scheduled_at=slot, trigger="schedule",
            host="burst", pid=pid, pid_start=pid_start, lease=120.0, overlap_skip=True,
            force=False, is_gone=lambda p, s: not procs.is_alive(p, s))).run is not None

    return claim


def floor_claimer(url: str, run_key: str):
    import psycopg

    # No server-side prepared statements: PgBouncer 1.18 in transaction mode cannot keep them.
    conn = psycopg.connect(url, autocommit=True, prepare_threshold=None, connect_timeout=10)

    def claim(job: str) -> bool:
        row = conn.execute("INSERT INTO burst_floor (job, run_key) VALUES (%s, %s) "
                           "ON CONFLICT DO NOTHING RETURNING id", (job, run_key)).fetchone()
        return row is not None

    return claim


def writes_claimer(url: str, run_key: str):
    import psycopg

    conn = psycopg.connect(url, autocommit=True, prepare_threshold=None, connect_timeout=10)
    slot = datetime.strptime(run_key, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)

    def claim(job: str) -> bool:
        row = conn.execute(
            "WITH j AS (INSERT INTO cronwrap_jobs AS j (name, fence, first_seen, last_seen, "
            "last_slot) VALUES (%(job)s, 1, now(), now(), %(slot)s) ON CONFLICT (name) DO UPDATE SET "
            "last_seen = excluded.last_seen, fence = j.fence + 1 RETURNING fence) "
            "INSERT INTO cronwrap_runs (job, run_key, scheduled_at, trigger, status, attempts, "
            "host, pid, pid_start, locked_by, locked_until, fence, started_at, created_at) "
            "SELECT %(job)s, %(key)s, %(slot)s, 'schedule', 'running', 1, 'burst', 1, 1, "
            "'burst', now() + interval '120 s', fence, now(), now() FROM j "
            "ON CONFLICT DO NOTHING RETURNING id",
            {"job": job, "key": run_key, "slot": slot}).fetchone()
        return row is not None

    return claim


def lean_claimer(url: str, run_key: str, lean: bool = True):
    import os

    import psycopg
    from psycopg.rows import dict_row

    import claim_lean

    conn = psycopg.connect(url, autocommit=True, prepare_threshold=None, connect_timeout=10,
                           row_factory=dict_row)
    slot = datetime.strptime(run_key, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    base = dict(schedule=None, tz=None, key_template=None, settings=None, run_key=run_key,
                scheduled_at=slot, trigger="schedule", host="burst", pid=os.getpid(),
                pid_start=1, boot_id=None, pid_ns=None, lease=120.0, overlap_skip=True,
                force=False, max_attempts=1, skew_ms=None, now=None, gone=[], checked=False,
                schema=claim_lean.schema_version())

    def claim(job: str) -> bool:
        return claim_lean.claim(conn, {**base, "job": job}, lean=lean)[0] == "claimed"

    return claim


def main() -> int:
    mode, url, first, count, run_key, out = sys.argv[1:7]
    first, count = int(first), int(count)
    t0 = time.perf_counter()
    claims = []
    try:
        claimer = {"ledger": ledger_claimer, "floor": floor_claimer, "writes": writes_claimer,
                   "lean": lean_claimer,
                   "fn": lambda url, key: lean_claimer(url, key, lean=False)}
        claim = claimer[mode](url, run_key)
    except Exception as exc:  # a client that cannot even set up is reported, not hidden
        claim = None
        claims.append([time.time(), 0.0, False, f"setup: {one_line(exc)}"])
    setup_ms = (time.perf_counter() - t0) * 1000
    print("ready", flush=True)
    sys.stdin.readline()
    for n in range(first, first + count if claim else first):
        started = time.time()
        t1 = time.perf_counter()
        try:
            ok, error = claim(f"job-{n}"), None
        except Exception as exc:
            ok, error = False, one_line(exc)
        claims.append([started, (time.perf_counter() - t1) * 1000, ok, error])
    with open(out, "w") as f:
        json.dump({"setup_ms": setup_ms, "claims": claims}, f)
    return 0


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


if __name__ == "__main__":
    sys.exit(main())
