"""Where a claim's server time goes, statement by statement (issue 24 §2, an experiment):

    python claim_lean_bench.py URL ROUNDS CALLS

URL: a cronwrap ledger (``cronwrap db init``). One client, raw psycopg (no cronwrap client
code), a held connection per kind, ROUNDS rounds of CALLS calls of each kind interleaved, a new
job each call (every call claims); then calls 1 / 2 / 3 on a new connection, ROUNDS × 5
connections per kind. Kinds:

- ``floor``: the bare ``INSERT … ON CONFLICT DO NOTHING RETURNING id`` (burst_client's floor);
- ``writes``: the claim's writes alone, one statement (burst_client's writes);
- ``writes + R…``: the same statement guarded by the reads a claim needs, each added to the
  one before (the guard in a CTE the job's upsert selects from): the job's live running rows
  (overlap and this runner's own), the job's fence (the lean statement's race check), the
  pause, the schema version, the slot's row — what any exact claim reads, planned per call;
- ``function``: ``cronwrap_claim_unless_paused()``, as cronwrap sends it (plans cached after
  the first call on a connection);
- ``lean``: claim_lean.py's one statement (exact; planned per call, nothing compiled).

Then the server's phases of one call (parse, parse analysis, rewrite, plan: the server's own
``log_parser_stats`` and ``log_planner_stats``, sent back as notices; elapsed ms, medians; the
counting itself adds a little to each) for the floor, the writes, the function and the lean
statement, on a warm connection. Run it under ``PGOPTIONS='-c synchronous_commit=off'`` to
leave the disk's flush out (the server's CPU alone) and without it. Medians in ms (wall) and
the client's CPU, printed.
"""

from __future__ import annotations

import re
import statistics
import sys
import time
from datetime import datetime, timezone

import psycopg
from psycopg.rows import dict_row

import claim_lean

FLOOR = ("INSERT INTO burst_floor (job, run_key) VALUES (%(job)s, 'k') ON CONFLICT DO NOTHING "
         "RETURNING id")
GUARDED = """WITH s AS MATERIALIZED (SELECT {guards}),
j AS (INSERT INTO cronwrap_jobs AS j (name, fence, first_seen, last_seen, last_slot)
  SELECT %(job)s, 1, now(), now(), %(scheduled_at)s FROM s
  ON CONFLICT (name) DO UPDATE SET last_seen = excluded.last_seen, fence = j.fence + 1
  RETURNING fence)
INSERT INTO cronwrap_runs (job, run_key, scheduled_at, trigger, status, attempts, host, pid,
  pid_start, locked_by, locked_until, fence, started_at, created_at)
SELECT %(job)s, %(run_key)s, %(scheduled_at)s, 'schedule', 'running', 1, 'burst', 1, 1, 'burst',
  now() + interval '120 s', j.fence, now(), now() FROM j
ON CONFLICT DO NOTHING RETURNING id"""
READS = {
    "live rows": "EXISTS (SELECT FROM cronwrap_runs r WHERE r.job = %(job)s AND r.status = "
                 "'running' AND r.locked_until > now()) AS live",
    "fence": "(SELECT fence FROM cronwrap_jobs WHERE name = %(job)s) AS fence",
    "pause": "EXISTS (SELECT FROM cronwrap_pauses p WHERE p.job IN (%(job)s, "
             "split_part(%(job)s, chr(31), 1)) AND (p.until IS NULL OR p.until > now())) AS paused",
    "schema": "(SELECT value::integer FROM cronwrap_meta WHERE key = 'schema_version') AS schema",
    "slot": "(SELECT r FROM cronwrap_runs r WHERE r.job = %(job)s AND r.run_key = %(run_key)s) "
            "AS slot",
}
SLOT = datetime(2026, 1, 1, tzinfo=timezone.utc)


def params(job: str) -> dict:
    return dict(job=job, schedule=None, tz=None, key_template=None, settings=None,
                run_key="k", scheduled_at=SLOT, trigger="schedule", host="m", pid=1,
                pid_start=1, boot_id="b", pid_ns=1, lease=120.0, overlap_skip=True,
                force=False, max_attempts=1, skew_ms=None, now=None, gone=[], checked=False,
                schema=claim_lean.schema_version())


def kinds() -> dict[str, str]:
    out = {"floor": FLOOR, "writes": GUARDED.format(guards="1 AS one")}
    guards: list[str] = []
    for name, read in READS.items():
        guards.append(read)
        out[f"writes + {name}" if len(guards) == 1 else f"  + {name}"] = \
            GUARDED.format(guards=", ".join(guards))
    out["function"] = claim_lean.FULL
    out["lean"] = claim_lean.STATEMENT
    return out


def connect(url: str) -> psycopg.Connection:
    return psycopg.connect(url, autocommit=True, prepare_threshold=None, row_factory=dict_row)


def main() -> int:
    url, rounds, calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    setup = connect(url)
    setup.execute("CREATE TABLE IF NOT EXISTS burst_floor (id bigserial PRIMARY KEY, job text "
                  "NOT NULL, run_key text NOT NULL, UNIQUE (job, run_key))")
    print("synchronous_commit", setup.execute("SHOW synchronous_commit").fetchone())
    setup.close()
    statements = kinds()
    conns = {k: connect(url) for k in statements}
    stamp = time.time()
    wall: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    for r in range(rounds):
        for kind, statement in statements.items():
            conn = conns[kind]
            for n in range(calls):
                p = params(f"{kind}-{stamp}-{r}-{n}")
                t, c = time.perf_counter(), time.process_time()
                rows = conn.execute(statement, p).fetchall()
                cpu.setdefault(kind, []).append((time.process_time() - c) * 1000)
                wall.setdefault(kind, []).append((time.perf_counter() - t) * 1000)
                assert rows and (rows[0].get("outcome", "claimed") == "claimed"), (kind, rows)
    floor = statistics.median(wall["floor"])
    for kind, ms in wall.items():
        print(f"held {kind:20s} p50 {statistics.median(ms):.3f} ms = "
              f"{statistics.median(ms) / floor:.2f}x the floor; client CPU "
              f"{statistics.median(cpu[kind]):.3f} ms")
    first: dict[str, list[float]] = {}
    for r in range(rounds * 5):
        for kind in ("floor", "writes", "  + slot", "function", "lean"):
            conn = connect(url)
            for n in range(3):
                p = params(f"first-{kind}-{stamp}-{r}-{n}")
                t = time.perf_counter()
                conn.execute(statements[kind], p).fetchall()
                first.setdefault(kind, []).append((time.perf_counter() - t) * 1000)
            conn.close()
    for kind, ms in first.items():
        print(f"new connection, calls 1 / 2 / 3: {kind.strip():10s} "
              + " / ".join(f"{statistics.median(ms[n::3]):.3f}" for n in range(3)) + " ms")
    phases(url, statements, rounds * calls)
    return 0


def phases(url: str, statements: dict[str, str], calls: int) -> None:
    elapsed = re.compile(r"([\d.]+) s elapsed")
    conn = connect(url)
    notes: list[tuple[str, str]] = []
    conn.add_notice_handler(lambda d: notes.append((d.message_primary or "",
                                                    d.message_detail or "")))
    conn.execute("SET client_min_messages = log")
    for kind in ("floor", "writes", "function", "lean"):
        for n in range(20):  # warm: the function compiled, the caches loaded
            conn.execute(statements[kind], params(f"warm-{kind}-{time.time()}-{n}")).fetchall()
        got: dict[str, list[float]] = {}
        for setting in ("log_parser_stats", "log_planner_stats"):
            conn.execute(f"SET {setting} = on")
            for n in range(calls):
                notes.clear()
                conn.execute(statements[kind], params(f"ph-{kind}-{time.time()}-{n}")).fetchall()
                for what, detail in notes:
                    found = elapsed.search(detail)
                    if found and what.endswith(" STATISTICS"):
                        got.setdefault(what[:-11].lower(), []).append(float(found.group(1)) * 1000)
            conn.execute(f"SET {setting} = off")
        print(f"phases of one call, {kind:8s}: " + ", ".join(
            f"{what} {statistics.median(ms):.3f}" for what, ms in got.items()) + " ms")
    conn.close()


if __name__ == "__main__":
    sys.exit(main())
