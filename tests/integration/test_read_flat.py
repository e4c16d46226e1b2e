"""The read side flat in runs (issue 24): a page of a job's runs reads one page of rows, on both
back ends, however long the job; and the planner's statistics are refreshed where the ledger
says (a migration, ``db upgrade``, prune; SQLite's PRAGMA optimize when a writer closes).

Rows read are counted, never timed: on SQLite by the virtual machine's steps (a progress
handler) against the same page of a job of 100 runs, and by EXPLAIN QUERY PLAN; on PostgreSQL
by EXPLAIN (ANALYZE, FORMAT JSON), every scan of cronwrap_runs' rows.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timezone

import pytest

BIG, SMALL = 200_000, 100
PAGE = 50
T0 = 1_800_000_000.0  # the first run of each job, one a minute after it


def _sqlite_fill(path) -> None:
    """A job ``big`` of 200,000 runs and ``small`` of 100, one a minute, straight into the
    tables cronwrap made (as bench/ledger_data.py does), interleaved as two jobs' runs are."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO jobs (name, fence, first_seen, last_seen) VALUES (?, 0, ?, ?)",
                     [("big", T0, T0), ("small", T0, T0)])
    conn.execute(f"""
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {BIG})
        INSERT INTO runs (job, run_key, scheduled_at, trigger, status, attempts, fence,
                          started_at, finished_at, duration_ms, exit_code, created_at)
        SELECT CASE WHEN i % ({BIG} / {SMALL}) = 0 THEN 'small' ELSE 'big' END, 'k' || i,
               {T0} + i * 60, 'schedule', 'succeeded', 1, i, {T0} + i * 60, {T0} + i * 60 + 1,
               1000, 0, {T0} + i * 60
        FROM n""")
    conn.execute(f"""
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {SMALL})
        INSERT INTO runs (job, run_key, trigger, status, created_at)
        SELECT 'big', 'x' || i, 'schedule', 'skipped', {T0} + ({BIG} + i) * 60 FROM n""")
    conn.execute("COMMIT")
    conn.close()


def _pg_fill(dsn: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        # autoanalyze must not refresh what the test says cronwrap refreshes
        conn.execute("ALTER TABLE cronwrap_runs SET (autovacuum_enabled = false)")
        conn.execute("ALTER TABLE cronwrap_jobs SET (autovacuum_enabled = false)")
        # the counters' triggers (expansion 1) update one row per run: 200,000 versions of it
        conn.execute("SET session_replication_role = replica")
        conn.execute("INSERT INTO cronwrap_jobs (name, fence, first_seen, last_seen) "
                     "VALUES ('big', 0, to_timestamp(%s), to_timestamp(%s)), "
                     "('small', 0, to_timestamp(%s), to_timestamp(%s))", (T0, T0, T0, T0))
        conn.execute(f"""
            INSERT INTO cronwrap_runs (job, run_key, scheduled_at, trigger, status, attempts,
                                       fence, started_at, finished_at, duration_ms, exit_code,
                                       created_at)
            SELECT CASE WHEN i % ({BIG} / {SMALL}) = 0 THEN 'small' ELSE 'big' END, 'k' || i,
                   to_timestamp({T0} + i * 60), 'schedule', 'succeeded', 1, i,
                   to_timestamp({T0} + i * 60), to_timestamp({T0} + i * 60 + 1), 1000, 0,
                   to_timestamp({T0} + i * 60)
            FROM generate_series(1, {BIG}) AS i""")


def _at(minute: int) -> datetime:
    return datetime.fromtimestamp(T0 + minute * 60, timezone.utc)


# Each way a page is asked for: (what, Ledger.runs's arguments or runs_after's).
PAGES = [
    ("the newest page (history NAME)", dict(limit=PAGE)),
    ("a page below a run id (serve's next page)", dict(limit=PAGE, before="middle")),
    ("the window's newest page, the whole job in it (status NAME, serve's strip)",
     dict(limit=PAGE, since=_at(0))),
    ("the window's newest page, a day in it", dict(limit=PAGE, since=_at(BIG - 1440))),
    ("the page above a run id (serve's newer page)", dict(limit=PAGE, after="middle")),
]


def _middle(ledger, job: str) -> int:
    """A run id in the middle of ``job``'s runs."""
    ids = [r.run_id for r in ledger.runs(job, 10_000)]
    return ids[len(ids) // 2]


def _page(ledger, job: str, args: dict) -> list:
    args = dict(args)
    if "after" in args:
        return ledger.runs_after(job, _middle(ledger, job) if args["after"] == "middle" else
                                 args["after"], args["limit"])
    if args.get("before") == "middle":
        args["before"] = _middle(ledger, job)
    return ledger.runs(job, **args)


# -- SQLite ----------------------------------------------------------------------------------

@pytest.fixture
def sqlite_big(tmp_path):
    from cronwrap.ledger.sqlite import SqliteLedger

    path = tmp_path / "ledger.db"
    SqliteLedger(path).close()
    _sqlite_fill(path)
    return path


def _steps(ledger, job: str, args: dict) -> tuple[int, int]:
    """(virtual machine steps, rows returned) of one page, the setup's reads not counted."""
    args = dict(args)
    for key in ("before", "after"):
        if args.get(key) == "middle":
            args[key] = _middle(ledger, job)
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    ledger.conn.set_progress_handler(count, 10)
    try:
        rows = _page(ledger, job, args)
    finally:
        ledger.conn.set_progress_handler(None, 0)
    return steps[0] * 10, len(rows)


@pytest.mark.parametrize("analysed", [False, True], ids=["no statistics", "analysed"])
@pytest.mark.parametrize("what,args", PAGES, ids=[p[0] for p in PAGES])
def test_sqlite_a_page_of_a_200000_run_job_reads_as_much_as_a_page_of_a_100_run_job(
        sqlite_big, what, args, analysed):
    from cronwrap.ledger.sqlite import SqliteLedger

    if analysed:
        SqliteLedger(sqlite_big).analyze()
    ledger = SqliteLedger(sqlite_big, read_only=True)
    try:
        big, big_rows = _steps(ledger, "big", args)
        page, page_rows = _steps(ledger, "small", dict(limit=PAGE))  # one page, 100 runs to read
    finally:
        ledger.close()
    assert big_rows == page_rows == PAGE
    # sorting the job's runs, or reading them to find a page, is millions of steps here
    assert big <= 3 * page, (what, big, page)


def test_sqlite_plans_read_the_job_along_an_index_without_sorting_it(sqlite_big):
    from cronwrap.ledger.sqlite import SqliteLedger

    ledger = SqliteLedger(sqlite_big, read_only=True)
    try:
        for name, params in [("runs_before", dict(job="big", before=2**62, limit=PAGE)),
                             ("runs_of_job", dict(job="big", since=T0, limit=PAGE)),
                             ("runs_after", dict(job="big", after=1, limit=PAGE))]:
            plan = [row[3] for row in ledger.conn.execute(f"EXPLAIN QUERY PLAN {ledger.q[name]}",
                                                          params)]
            assert any(step.startswith("SEARCH runs USING INDEX runs_job_") for step in plan), plan
            assert "USE TEMP B-TREE FOR ORDER BY" not in plan, (name, plan)
    finally:
        ledger.close()


def test_sqlite_a_firing_reads_as_much_history_of_a_200000_run_job_as_of_a_100_run_job(
        sqlite_big):
    """What a scheduled firing asks of its job's past (its newest slot, the abandoned runs of
    its catch-up window, whether its missed slots have rows) does not grow with the job's
    runs: a firing used to read every run key of its window (~70 ms a firing for 30 days of
    a minutely job)."""
    from cronwrap.ledger.sqlite import SqliteLedger

    conn = sqlite3.connect(sqlite_big)
    conn.execute("UPDATE jobs SET last_slot = ?", (T0 + BIG * 60,))
    conn.commit()
    conn.close()
    ledger = SqliteLedger(sqlite_big, read_only=True)
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    asked = {"k1", "k2000", f"k{BIG // 2 + 1}", f"k{BIG - 1}", "x1", "none"}  # k2000: small's
    found = {}
    try:
        for job in ("big", "small"):
            steps[0] = 0
            ledger.conn.set_progress_handler(count, 10)
            history = ledger.slot_history(job, _at(-10))  # the whole job in the window
            found[job] = history.known(asked)
            ledger.conn.set_progress_handler(None, 0)
            found[job + " steps"] = steps[0] * 10
    finally:
        ledger.close()
    assert found["big"] == {"k1", f"k{BIG // 2 + 1}", f"k{BIG - 1}", "x1"}
    assert found["small"] == {"k2000"}
    assert found["big steps"] <= 3 * found["small steps"], found


def _stat_rows(path) -> int:
    """The row count sqlite_stat1 holds for runs' (job, id) index; 0 without statistics."""
    conn = sqlite3.connect(path)
    try:
        found = conn.execute("SELECT stat FROM sqlite_stat1 WHERE idx = 'runs_job_id'").fetchone()
    except sqlite3.OperationalError:  # no sqlite_stat1: never analysed
        return 0
    finally:
        conn.close()
    return int(found[0].split()[0]) if found else 0


def test_sqlite_prune_refreshes_the_statistics(sqlite_big):
    from cronwrap.ledger.sqlite import SqliteLedger

    assert _stat_rows(sqlite_big) < BIG  # made empty and analysed then; filled since
    ledger = SqliteLedger(sqlite_big)
    try:
        ledger.prune(_at(-10), keep_last=10)  # nothing that old: statistics all the same
        stat = ledger.conn.execute("SELECT stat FROM sqlite_stat1 "
                                   "WHERE idx = 'runs_job_id'").fetchone()  # before the close's
    finally:
        ledger.close()
    assert stat is not None and int(stat[0].split()[0]) >= BIG


def test_sqlite_db_upgrade_refreshes_the_statistics(sqlite_big, cw):
    assert _stat_rows(sqlite_big) < BIG
    cw("db", "upgrade", env={"CRONWRAP_DB": f"sqlite:///{sqlite_big}"}, check_rc=0)
    assert _stat_rows(sqlite_big) >= BIG


def test_sqlite_an_expansion_refreshes_the_statistics(sqlite_big):
    """A ledger one expansion behind (as the previous release left it) is brought up by its
    first writer, which analyses what it found."""
    from cronwrap.ledger.sqlite import SqliteLedger

    conn = sqlite3.connect(sqlite_big)
    level = int(conn.execute("SELECT value FROM meta WHERE key = 'expansion'").fetchone()[0])
    conn.execute("UPDATE meta SET value = ? WHERE key = 'expansion'", (str(level - 1),))
    conn.commit()
    conn.close()
    assert _stat_rows(sqlite_big) < BIG
    SqliteLedger(sqlite_big, checkpoint_on_close=False).close()  # a firing's open
    assert _stat_rows(sqlite_big) >= BIG


def test_sqlite_a_writer_that_closes_refreshes_what_its_queries_wanted(sqlite_big):
    from cronwrap.ledger.sqlite import SqliteLedger

    conn = sqlite3.connect(sqlite_big)
    conn.execute("DELETE FROM sqlite_stat1")  # never analysed: what the planner wants
    conn.commit()
    conn.close()
    ledger = SqliteLedger(sqlite_big)
    ledger.summaries(_at(BIG - 60))
    ledger.close()
    assert _stat_rows(sqlite_big) >= BIG


# -- PostgreSQL ------------------------------------------------------------------------------

@pytest.fixture
def pg_big(pg_dsn):
    from cronwrap.ledger.postgres import PostgresLedger

    PostgresLedger(pg_dsn).close()
    _pg_fill(pg_dsn)
    return pg_dsn


def _runs_read(dsn: str, ledger, job: str, args: dict) -> tuple[int, list[str]]:
    """(rows of cronwrap_runs read, plan node types) of the page's query, from EXPLAIN
    (ANALYZE, FORMAT JSON) of the very block and parameters the ledger runs."""
    import psycopg

    args = dict(args)
    if "after" in args:
        name, params = "runs_after", dict(job=job, after=_middle(ledger, job), limit=args["limit"])
    elif "since" in args:
        name, params = "runs_of_job", dict(job=job, since=args["since"], limit=args["limit"])
    else:
        before = _middle(ledger, job) if args.get("before") == "middle" else 2**62
        name, params = "runs_before", dict(job=job, before=before, limit=args["limit"])
    return _rows_read(dsn, ledger.q[name], params)


def _rows_read(dsn: str, sql: str, params: dict) -> tuple[int, list[str]]:
    """(rows of cronwrap_runs read, plan node types) of ``sql`` with ``params``."""
    import psycopg

    with psycopg.connect(dsn) as conn:
        ((plan,),) = conn.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", params).fetchall()
    if isinstance(plan, str):
        plan = json.loads(plan)
    read, kinds = 0, []

    def walk(node: dict) -> None:
        nonlocal read
        kinds.append(node["Node Type"])
        if node.get("Relation Name") == "cronwrap_runs":
            read += node["Actual Rows"] * node["Actual Loops"]
            read += node.get("Rows Removed by Filter", 0) * node["Actual Loops"]
        for child in node.get("Plans", []):
            walk(child)

    walk(plan[0]["Plan"])
    return read, kinds


@pytest.mark.parametrize("analysed", [False, True], ids=["no statistics", "analysed"])
@pytest.mark.parametrize("what,args", PAGES, ids=[p[0] for p in PAGES])
def test_postgres_a_page_of_a_200000_run_job_reads_one_page_of_rows(pg_big, what, args,
                                                                    analysed):
    from cronwrap.ledger.postgres import PostgresLedger

    ledger = PostgresLedger(pg_big, read_only=True)
    try:
        if analysed:
            ledger.analyze()
        assert len(_page(ledger, "big", args)) == PAGE
        read, kinds = _runs_read(pg_big, ledger, "big", args)
    finally:
        ledger.close()
    assert read <= PAGE + 1, (what, read, kinds)


def test_postgres_a_firing_reads_its_missed_slots_and_running_rows_not_its_window(pg_big):
    """As on SQLite: a firing's slot history reads the job's running rows and the rows of the
    keys it asks about, never the window's (200,000 rows here)."""
    from cronwrap.ledger.postgres import PostgresLedger

    ledger = PostgresLedger(pg_big, read_only=True)
    try:
        assert ledger.known_keys("big", {"k1", "k2000", f"k{BIG - 1}", "nope"}) == \
            {"k1", f"k{BIG - 1}"}  # k2000 is the small job's
        abandoned, kinds = _rows_read(pg_big, ledger.q["abandoned_since"],
                                      dict(job="big", since=_at(-10), now=_at(BIG + 10)))
        known, kinds2 = _rows_read(pg_big, ledger.q["keys_known"],
                                   dict(job="big", keys=["k1", "k2000", f"k{BIG - 1}", "nope"]))
    finally:
        ledger.close()
    assert abandoned == 0 and known <= 4, (abandoned, kinds, known, kinds2)


def _reltuples(dsn: str) -> float:
    """cronwrap_runs' row count as the planner's statistics hold it (-1: never analysed)."""
    import psycopg

    with psycopg.connect(dsn) as conn:
        ((rows,),) = conn.execute("SELECT reltuples FROM pg_class "
                                  "WHERE relname = 'cronwrap_runs'").fetchall()
    return float(rows)


def test_postgres_prune_refreshes_the_statistics(pg_big):
    from cronwrap.ledger.postgres import PostgresLedger

    assert _reltuples(pg_big) < BIG
    ledger = PostgresLedger(pg_big)
    try:
        ledger.prune(_at(-10), keep_last=10)
    finally:
        ledger.close()
    assert _reltuples(pg_big) >= BIG * 0.9


def test_postgres_db_upgrade_refreshes_the_statistics(pg_big, cw):
    assert _reltuples(pg_big) < BIG
    cw("db", "upgrade", env={"CRONWRAP_DB": pg_big}, check_rc=0)
    assert _reltuples(pg_big) >= BIG * 0.9


def test_postgres_an_expansion_refreshes_the_statistics(pg_big, cw):
    import psycopg

    with psycopg.connect(pg_big, autocommit=True) as conn:
        ((level,),) = conn.execute("SELECT value FROM cronwrap_meta "
                                   "WHERE key = 'expansion'").fetchall()
        conn.execute("UPDATE cronwrap_meta SET value = %s WHERE key = 'expansion'",
                     (str(int(level) - 1),))
        conn.execute("DROP TABLE cronwrap_day_counts")  # what it adds
    assert _reltuples(pg_big) < BIG
    from cronwrap.ledger.postgres import PostgresLedger

    PostgresLedger(pg_big, upgrade=True).close()
    assert _reltuples(pg_big) >= BIG * 0.9
