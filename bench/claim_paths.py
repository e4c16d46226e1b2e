"""Where a claim's time goes on the server, and why it stays a server-side function
(bench/run.py claims; issue 24 §2). Run with bench/.venv's python on a fresh cronwrap ledger:

    python claim_paths.py URL ROUNDS OUT

1. Calls 1, 2 and 3 on a new connection (ms, medians over ROUNDS connections, interleaved) of:
   the claim as this cronwrap sends it (``cronwrap_claim_unless_paused()``, plpgsql); the same
   statements the function runs for a new slot, sent as plain SQL in one simple-protocol
   message (parsed and planned on every call, no function compiled: what a client-side
   claim would cost, were it correct); claim_lean.py's one statement (an experiment: exact,
   planned on every call); the bare ``INSERT … ON CONFLICT`` (the floor); and
   ``DO $$ BEGIN END $$`` (loading the plpgsql language into the session, which the firing's
   finish pays anyway: its triggers are plpgsql). ``synchronous_commit=off`` on these
   sessions, so that the disk's flush (shared with other work on the machine) leaves the
   server's CPU work visible.
2. Whether one plain statement could hold the claim: host A takes the job's row (step 1) and
   writes the slot's row running; host B's claim as one statement (a CTE) waits on A's lock;
   A commits. B's statement returns what it sees of the slot: nothing, since its snapshot was
   taken before the wait (READ COMMITTED), though the row is there — it could not answer
   "duplicate". In cronwrap_claim() each statement takes a new snapshot, after the lock.

OUT gets one JSON object.
"""

from __future__ import annotations

import json
import statistics
import sys
import threading
import time

import psycopg
from psycopg.rows import dict_row

import claim_lean
from cronwrap.ledger import sql

SLOT = "2026-01-01T00:00:00Z"
FLOOR = "INSERT INTO burst_floor (job, run_key) VALUES (%s, %s) ON CONFLICT DO NOTHING RETURNING id"


def params(job: str, schema: int) -> dict:
    return dict(job=job, schedule=None, tz=None, key_template=None, settings=None, run_key="k",
                scheduled_at=SLOT, trigger="schedule", host="m", pid=1, pid_start=1, boot_id="b",
                pid_ns=1, lease=120.0, overlap_skip=True, force=False, max_attempts=1,
                skew_ms=None, now=None, gone=[], checked=False, schema=schema)


def plain(job: str) -> str:
    """cronwrap_claim_unless_paused()'s statements for a new slot, as literals."""
    return f"""BEGIN;
SELECT * FROM cronwrap_pauses p WHERE p.job IN ('{job}', split_part('{job}', chr(31), 1))
  AND (p.until IS NULL OR p.until > now()) ORDER BY p.job = '{job}' DESC LIMIT 1;
SELECT set_config('lock_timeout', '15s', true);
SELECT value::integer FROM cronwrap_meta WHERE key = 'schema_version';
INSERT INTO cronwrap_jobs AS j (name, schedule, tz, key_template, settings, first_seen, last_seen,
  last_slot) VALUES ('{job}', NULL, NULL, NULL, NULL, now(), now(), '{SLOT}')
ON CONFLICT (name) DO UPDATE SET schedule = excluded.schedule, tz = excluded.tz,
  settings = excluded.settings, key_template = excluded.key_template,
  last_seen = excluded.last_seen, last_slot = GREATEST(j.last_slot, excluded.last_slot);
UPDATE cronwrap_runs SET locked_until = now() WHERE job = '{job}' AND status = 'running'
  AND id = ANY('{{}}'::bigint[]) AND host = 'm' AND boot_id = 'b' AND pid_ns = 1;
SELECT 'check'::text, false, to_jsonb(r) FROM cronwrap_runs r WHERE r.job = '{job}'
  AND r.status = 'running' AND r.locked_until > now() AND r.host = 'm' AND r.boot_id = 'b'
  AND r.pid_ns = 1 ORDER BY r.id;
SELECT * FROM cronwrap_runs r WHERE r.job = '{job}' AND r.status = 'running'
  AND r.locked_until > now() AND r.run_key <> 'k' ORDER BY r.id LIMIT 1;
INSERT INTO cronwrap_runs (job, run_key, scheduled_at, trigger, status, host, created_at)
VALUES ('{job}', 'k', '{SLOT}', 'schedule', 'pending', 'm', now())
ON CONFLICT (job, run_key) DO NOTHING RETURNING *;
UPDATE cronwrap_jobs SET fence = fence + 1 WHERE name = '{job}' RETURNING fence;
UPDATE cronwrap_runs SET status = 'running', trigger = 'schedule', scheduled_at = '{SLOT}',
  skip_reason = NULL, attempts = attempts + 1, host = 'm', pid = 1, pid_start = 1,
  boot_id = 'b', pid_ns = 1, locked_by = 'm', locked_until = now() + make_interval(secs => 120),
  fence = 1, started_at = now(), finished_at = NULL, duration_ms = NULL, exit_code = NULL,
  signal = NULL, timed_out = false, error_tail = NULL, log_path = NULL, skew_ms = NULL
WHERE job = '{job}' AND run_key = 'k' RETURNING 'claimed', false, to_jsonb(cronwrap_runs.*);
COMMIT;"""


def first_calls(url: str, rounds: int) -> dict[str, list[float]]:
    q = sql.load("postgres")
    schema = max(int(k.split("_")[1]) for k in q if k.startswith("migration_"))
    setup = psycopg.connect(url, autocommit=True)
    setup.execute("CREATE TABLE IF NOT EXISTS burst_floor (id bigserial PRIMARY KEY, job text "
                  "NOT NULL, run_key text NOT NULL, UNIQUE (job, run_key))")
    setup.close()
    kinds = {
        "function": lambda c, job: c.execute(q["claim"], params(job, schema)).fetchall(),
        "plain statements": lambda c, job: c.execute(plain(job)),
        "bare insert": lambda c, job: c.execute(FLOOR, (job, "k")).fetchall(),
        "lean statement": lambda c, job: c.execute(claim_lean.STATEMENT,
                                                   params(job, schema)).fetchall(),
        "DO (plpgsql load)": lambda c, job: c.execute("DO $$ BEGIN END $$"),
    }
    out: dict[str, list[float]] = {}
    for r in range(rounds):
        for kind, call in kinds.items():
            conn = psycopg.connect(url, autocommit=True, prepare_threshold=None,
                                   row_factory=dict_row, options="-c synchronous_commit=off")
            for n in range(3):
                job = f"{kind[:5]}-{r}-{n}-{time.time()}"
                start = time.perf_counter()
                call(conn, job)
                out.setdefault(f"{kind} {n + 1}", []).append((time.perf_counter() - start) * 1000)
            conn.close()
    return {k: round(statistics.median(v), 2) for k, v in out.items()}


def cte_race(url: str) -> dict:
    a = psycopg.connect(url)
    b = psycopg.connect(url, autocommit=True)
    job = f"cte-{time.time()}"
    a.execute("INSERT INTO cronwrap_jobs (name, first_seen, last_seen) VALUES (%s, now(), now()) "
              "ON CONFLICT (name) DO UPDATE SET last_seen = excluded.last_seen", (job,))
    a.execute("INSERT INTO cronwrap_runs (job, run_key, trigger, status, host, created_at, "
              "locked_until, attempts) VALUES (%s, 'k', 'schedule', 'running', 'A', now(), "
              "now() + interval '1 min', 1)", (job,))
    seen: dict = {}

    def host_b() -> None:
        seen["rows"] = b.execute("""
          WITH j AS (INSERT INTO cronwrap_jobs AS j (name, first_seen, last_seen)
                     VALUES (%(job)s, now(), now())
                     ON CONFLICT (name) DO UPDATE SET last_seen = excluded.last_seen
                     RETURNING fence),
               ins AS (INSERT INTO cronwrap_runs (job, run_key, trigger, status, host, created_at)
                       SELECT %(job)s, 'k', 'schedule', 'pending', 'B', now() FROM j
                       ON CONFLICT (job, run_key) DO NOTHING RETURNING status, host),
               existing AS (SELECT status, host FROM cronwrap_runs
                            WHERE job = %(job)s AND run_key = 'k')
          SELECT * FROM ins UNION ALL SELECT * FROM existing""", {"job": job}).fetchall()

    thread = threading.Thread(target=host_b)
    thread.start()
    time.sleep(0.5)  # B waits on A's lock of the job row
    a.commit()
    thread.join()
    table = b.execute("SELECT status, host FROM cronwrap_runs WHERE job = %s", (job,)).fetchall()
    a.close()
    b.close()
    return {"cte_saw": [list(r) for r in seen["rows"]], "table_holds": [list(r) for r in table]}


def main() -> int:
    url, rounds, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    result = {"calls": first_calls(url, rounds), **cte_race(url)}
    with open(out, "w") as f:
        json.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
