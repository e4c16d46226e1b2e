"""Build a big ledger for the ``status`` measurement of bench/run.py (the status budget, bench/README.md: 1,000,000 runs,
500 jobs), straight into the back end's tables.

    python ledger_data.py sqlite PATH JOBS RUNS NOW
    python ledger_data.py postgres URL JOBS RUNS NOW

Run with bench/.venv's python. The schema is cronwrap's own: the ledger class is opened once
to create it (``SqliteLedger(path)`` / ``PostgresLedger(url)``), then rows are bulk-inserted —
SQLite: executemany in one transaction; PostgreSQL: COPY into a temporary table of epoch
seconds, then one INSERT … SELECT to_timestamp(…), then VACUUM ANALYZE (what autovacuum does to
a real ledger). Both back ends get the same rows, from ``rows()`` below.

The data: job-000 … job-(JOBS-1), each on an hourly schedule at minute N % 60, with RUNS runs
one per hour going back from the last full hour before NOW (2000 runs ≈ 83 days), inserted in
time order (ids follow time, as in a real ledger); no run ends after NOW. Statuses by a fixed
hash of (job, hour): ~94 % succeeded, 3 % failed (exit 1, an error tail), 1 % timeout
(SIGTERM), 2 % skipped (overlap: no attempt, no times, no fence), and the newest run of every
job N % 100 == 7 still ``running`` with a 120 s lease (job-002 of a ledger of few jobs and
many runs is what bench/run.py's history row reads: 20,000 or 200,000 runs). created_at = started_at = slot + lateness, finished_at =
started_at + duration; fence = the hour's index + 1 for runs that ran (increasing per job); the
job's own fence column is its highest, and ``last_slot`` (where the schema has it) its newest
slot. Prints a JSON summary.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from pathlib import Path

GENERATOR = 3  # bump when rows() changes: bench/run.py keys its cache on it
HOSTS = ("host-a", "host-b", "host-c")
DURATIONS_MS = (350, 2_400, 18_000, 140_000)
TAIL = ("Traceback (most recent call last):\n  File \"/srv/jobs/{job}.py\", line 88, in main\n"
        "    rows = fetch(upstream)\nRuntimeError: upstream returned 503 for batch {s}\n")
RUN_COLUMNS = ("job", "run_key", "scheduled_at", "trigger", "status", "skip_reason", "attempts",
               "host", "pid", "pid_start", "locked_by", "locked_until", "fence", "started_at",
               "finished_at", "duration_ms", "exit_code", "signal", "timed_out", "error_tail",
               "log_path", "created_at")
JOB_COLUMNS = ("name", "schedule", "tz", "key_template", "settings", "fence", "first_seen",
               "last_seen")
TIMES = {"scheduled_at", "locked_until", "started_at", "finished_at", "created_at",
         "first_seen", "last_seen"}


def name_of(j: int) -> str:
    return f"job-{j:03d}"


def status_of(j: int, s: int, runs: int) -> tuple[str, int]:
    h = (j * 7919 + s * 104729 + 12345) % 1000
    if s == runs - 1 and j % 100 == 7:
        return "running", h
    if h < 20:
        return "skipped", h
    if h < 50:
        return "failed", h
    if h < 60:
        return "timeout", h
    return "succeeded", h


def run_row(j: int, s: int, runs: int, top: float, run_id: int, now: float) -> tuple:
    """Run s (0 = oldest) of job j, as a tuple in RUN_COLUMNS order; times are epoch seconds."""
    name = name_of(j)
    scheduled = top - (runs - 1 - s) * 3600 + (j % 60) * 60
    status, h = status_of(j, s, runs)
    created = scheduled + 0.05 + (h % 40) / 100
    run_key = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(scheduled))
    host = HOSTS[(j + s) % 3]
    if status == "skipped":
        return (name, run_key, scheduled, "schedule", status, "overlap", 0, host, None, None,
                None, None, None, None, None, None, None, None, False, None, None, created)
    pid = 2000 + (j * 131 + s * 17) % 60000
    pid_start = 1_000_000 + s * 360_000 + j
    duration = DURATIONS_MS[j % 4] + (h * 13) % 1000
    exit_code, signal, timed_out, tail = 0, None, False, None
    if status == "failed":
        exit_code, tail = 1, TAIL.format(job=name, s=s)
    elif status == "timeout":
        duration, exit_code, signal, timed_out = 600_000, None, 15, True
        tail = "processed 18000/40000 rows\n"
    if status == "running":
        finished = duration = exit_code = None
        locked_until = created + 120
    else:
        finished, locked_until = min(created + duration / 1000, now - 1), None
        duration = int((finished - created) * 1000)
    log_path = f"/var/log/cronwrap/{name}/{run_id}.1.log" if j % 3 == 0 or tail else None
    return (name, run_key, scheduled, "schedule", status, None, 1, host, pid, pid_start, host,
            locked_until, s + 1, created, finished, duration, exit_code, signal, timed_out, tail,
            log_path, created)


def order(jobs: int) -> list[int]:
    """Jobs in the order they fire within an hour (minute N % 60)."""
    return sorted(range(jobs), key=lambda j: (j % 60, j))


def last_top(now: float) -> float:
    """The hour of the newest runs: the last full hour (a run that would end after now is cut)."""
    return now - now % 3600 - 3600


def rows(jobs: int, runs: int, now: float):
    top = last_top(now)
    run_id = 0
    fired = order(jobs)
    for s in range(runs):
        for j in fired:
            run_id += 1
            yield run_row(j, s, runs, top, run_id, now)


def job_rows(jobs: int, runs: int, now: float) -> list[tuple]:
    top = last_top(now)
    result = []
    for j in range(jobs):
        first = run_row(j, 0, runs, top, 0, now)
        last = run_row(j, runs - 1, runs, top, 0, now)
        fence = next(s + 1 for s in range(runs - 1, -1, -1) if status_of(j, s, runs)[0] != "skipped")
        result.append((name_of(j), f"{j % 60} * * * *", "UTC" if j % 2 else None, None, None,
                       fence, first[-1], last[-1]))
    return result


def build_sqlite(path: str, jobs: int, runs: int, now: float) -> None:
    from cronwrap.ledger import sql
    from cronwrap.ledger.sqlite import SqliteLedger

    SqliteLedger(Path(path)).close()  # cronwrap creates its schema (WAL, user_version)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("PRAGMA cache_size = -1000000")
    conn.execute("BEGIN")
    # Expansion 7's triggers count each run as it is inserted (an upsert a row): off for the
    # bulk insert, then its own script again, which counts the rows already there in one pass.
    kept = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = "
                                             "'trigger' AND name LIKE 'runs_day_%'")]
    for name in kept:
        conn.execute(f"DROP TRIGGER {name}")
    conn.executemany(f"INSERT INTO jobs ({', '.join(JOB_COLUMNS)}) VALUES "
                     f"({', '.join('?' * len(JOB_COLUMNS))})", job_rows(jobs, runs, now))
    conn.executemany(f"INSERT INTO runs ({', '.join(RUN_COLUMNS)}) VALUES "
                     f"({', '.join('?' * len(RUN_COLUMNS))})", rows(jobs, runs, now))
    if "last_slot" in {r[1] for r in conn.execute("PRAGMA table_info(jobs)")}:
        conn.execute("UPDATE jobs SET last_slot = (SELECT max(scheduled_at) FROM runs "
                     "WHERE runs.job = jobs.name)")
    if kept:
        from cronwrap.ledger.sqlite import _statements

        for statement in _statements(sql.load("sqlite")["expansion_7"]):
            conn.execute(statement)
    conn.execute("COMMIT")
    conn.close()  # checkpoints the WAL into the file


def _copy_text(value) -> str:
    if value is None:
        return "\\N"
    if value is True or value is False:
        return "t" if value else "f"
    if isinstance(value, str):
        return value.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t")
    return repr(value)


def _pg_types(columns: tuple[str, ...], conn, table: str) -> dict[str, str]:
    rows = conn.execute("SELECT column_name, data_type FROM information_schema.columns "
                        "WHERE table_name = %s", (table,)).fetchall()
    return {name: kind for name, kind in rows if name in columns}


def _copy(conn, table: str, real: str, columns: tuple[str, ...], data) -> None:
    """COPY ``data`` into a temporary table (times as epoch seconds), then into ``real``."""
    types = _pg_types(columns, conn, real)
    staged = ", ".join(f"{c} {'float8' if c in TIMES else types[c]}" for c in columns)
    conn.execute(f"CREATE TEMP TABLE {table} (ord bigserial, {staged})")
    with conn.cursor().copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        batch = []
        for row in data:
            batch.append("\t".join(map(_copy_text, row)))
            if len(batch) >= 20_000:
                copy.write("\n".join(batch) + "\n")
                batch = []
        if batch:
            copy.write("\n".join(batch) + "\n")
    select = ", ".join(f"to_timestamp({c})" if c in TIMES else c for c in columns)
    conn.execute(f"INSERT INTO {real} ({', '.join(columns)}) SELECT {select} FROM {table} ORDER BY ord")


# What cronwrap_count_end() (postgres.sql, expansion_1) adds for each run inserted with an end.
TALLIES = """
INSERT INTO cronwrap_tallies (job, status, runs, timed, duration_ms)
SELECT job, status, count(*), count(duration_ms), coalesce(sum(duration_ms), 0)
FROM cronwrap_runs WHERE status NOT IN ('running', 'pending') GROUP BY job, status;
INSERT INTO cronwrap_duration_tallies (job, le_ms, runs)
SELECT r.job, b.le_ms, count(*) FROM cronwrap_runs r
CROSS JOIN LATERAL (SELECT min(le_ms) AS le_ms FROM cronwrap_duration_buckets
                    WHERE le_ms >= r.duration_ms) b
WHERE r.status NOT IN ('running', 'pending') AND b.le_ms IS NOT NULL GROUP BY r.job, b.le_ms
"""


def build_postgres(url: str, jobs: int, runs: int, now: float) -> None:
    import psycopg

    from cronwrap.ledger import sql
    from cronwrap.ledger.postgres import PostgresLedger

    PostgresLedger(url).close()  # cronwrap creates its schema (migrations, cronwrap_meta)
    with psycopg.connect(url) as conn:
        conn.execute("SET synchronous_commit = off")
        conn.execute("SET maintenance_work_mem = '256MB'")
        _copy(conn, "stage_jobs", "cronwrap_jobs", JOB_COLUMNS, job_rows(jobs, runs, now))
        # cronwrap's row triggers tally each end as it is inserted, one upsert of a few hot
        # rows per run: over 10 minutes for 1,000,000 runs on 2 busy cores. Off for the bulk
        # insert (this session only), then the same tallies made in one pass each.
        conn.execute("SET session_replication_role = replica")
        _copy(conn, "stage_runs", "cronwrap_runs", RUN_COLUMNS, rows(jobs, runs, now))
        conn.execute("SET session_replication_role = DEFAULT")
        tallied = _pg_types(("job",), conn, "cronwrap_tallies")
        if tallied:
            conn.execute(TALLIES)
        if _pg_types(("job",), conn, "cronwrap_day_counts"):  # expansion 7: its own backfill
            conn.execute(sql.load("postgres")["expansion_7"])
        if "last_slot" in _pg_types(("last_slot",), conn, "cronwrap_jobs"):
            conn.execute("UPDATE cronwrap_jobs j SET last_slot = (SELECT max(scheduled_at) "
                         "FROM cronwrap_runs r WHERE r.job = j.name)")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE cronwrap_jobs")
        conn.execute("VACUUM ANALYZE cronwrap_runs")
        conn.execute("VACUUM ANALYZE cronwrap_tallies")
        conn.execute("VACUUM ANALYZE cronwrap_day_counts")


def main() -> int:
    kind, target, jobs, runs, now = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
    start = time.perf_counter()
    (build_sqlite if kind == "sqlite" else build_postgres)(target, jobs, runs, now)
    counts: dict[str, int] = {}
    for s in range(runs):
        for j in range(jobs):
            status = status_of(j, s, runs)[0]
            counts[status] = counts.get(status, 0) + 1
    print(json.dumps({"runs": jobs * runs, "jobs": jobs, "seconds": round(time.perf_counter() - start, 1),
                      "statuses": counts}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
