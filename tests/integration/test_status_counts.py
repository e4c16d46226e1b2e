"""``status`` counts each job's runs by status in the window (issue 15 §1: SQLite groups only
the runs that did not succeed, and counts a job's successes as its runs less those)."""

from __future__ import annotations

import random
import sqlite3
from collections import Counter
from datetime import datetime, timezone

import pytest

from cronwrap.ledger.sqlcore import KEPT_ENDS
from cronwrap.ledger.sqlite import SqliteLedger

NOW = 1_780_000_000.0
STATUSES = ["succeeded"] * 6 + ["failed", "timeout", "skipped", "running", "missed", "killed",
                                "warning", "from-a-newer-cronwrap"]


def test_counts_by_status_match_the_rows(tmp_path):
    path = tmp_path / "ledger.db"
    SqliteLedger(path).close()  # the schema
    rng = random.Random(15)
    rows, expected = [], Counter()
    since = NOW - 7 * 86400
    jobs = [f"job-{j}" for j in range(30)]
    for job in jobs:
        kinds = rng.choice([STATUSES, ["succeeded"], ["failed", "skipped"], STATUSES[6:]])
        for n in range(rng.randint(0, 60)):
            status, created = rng.choice(kinds), NOW - rng.uniform(0, 14 * 86400)
            rows.append((job, f"k{n}", "schedule", status, created))
            if created >= since:
                expected[job, status] += 1
    with sqlite3.connect(path) as conn:
        conn.executemany("INSERT INTO jobs (name, first_seen, last_seen) VALUES (?, ?, ?)",
                         [(job, NOW, NOW) for job in jobs])
        conn.executemany("INSERT INTO runs (job, run_key, trigger, status, created_at) "
                         "VALUES (?, ?, ?, ?, ?)", rows)
    ledger = SqliteLedger(path, read_only=True)
    try:
        summaries = ledger.summaries(datetime.fromtimestamp(since, timezone.utc))
    finally:
        ledger.close()
    assert [s.job for s in summaries] == sorted(jobs)
    for s in summaries:
        assert s.counts == {status: n for (job, status), n in expected.items() if job == s.job}
    assert any("succeeded" not in s.counts and s.counts for s in summaries)
    assert any(set(s.counts) == {"succeeded"} for s in summaries)


# -- expansion 7: the window's counts kept by triggers (issue 24 §3) ---------------------------

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z
DAY = 86400
ENDS = ["succeeded", "succeeded", "succeeded", "failed", "timeout", "killed", "warning",
        "from-a-newer-cronwrap"]


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> float:
        return self.t


def _at(t: float) -> datetime:
    return datetime.fromtimestamp(t, timezone.utc)


class Direct:
    """The rows of the ledger counted straight from its runs table, and the day counts it
    keeps, over a connection of its own (SQLite file or PostgreSQL)."""

    def __init__(self, backend: str, where) -> None:
        self.backend = backend
        if backend == "sqlite":
            self.conn = sqlite3.connect(where)
            self.runs, self.days, self.p = "runs", "day_counts", "?"
            self.day = "CAST(created_at / 86400 AS INTEGER)"
        else:
            import psycopg

            self.conn = psycopg.connect(where, autocommit=True)
            self.runs, self.days, self.p = "cronwrap_runs", "cronwrap_day_counts", "%s"
            self.day = "((created_at AT TIME ZONE 'UTC')::date - DATE '1970-01-01')"

    def _t(self, t: float):
        return t if self.backend == "sqlite" else _at(t)

    def window(self, since: float) -> dict[str, dict[str, int]]:
        found: dict[str, dict[str, int]] = {}
        for job, status, n in self.conn.execute(
                f"SELECT job, status, count(*) FROM {self.runs} WHERE created_at >= {self.p} "
                "GROUP BY job, status", (self._t(since),)).fetchall():
            found.setdefault(job, {})[status] = n
        return found

    def by_day(self) -> set[tuple]:
        return set(self.conn.execute(
            f"SELECT {self.day}, job, status, count(*) FROM {self.runs} "
            "WHERE status NOT IN ('running', 'pending') GROUP BY 1, 2, 3").fetchall())

    def kept(self) -> set[tuple]:
        """(day, job, status, runs) of every count kept, of a known end's column or another
        status's row; a day kept with nothing counted fails."""
        day = "day" if self.backend == "sqlite" else "(day - DATE '1970-01-01')"
        found = set()
        for row in self.conn.execute(f"SELECT {day}, job, {', '.join(KEPT_ENDS)} "
                                     f"FROM {self.days}").fetchall():
            assert any(row[2:]) and min(row[2:]) >= 0, row
            found |= {(row[0], row[1], status, n) for status, n in zip(KEPT_ENDS, row[2:]) if n}
        others = self.days.replace("day_counts", "day_other_counts")
        for row in self.conn.execute(f"SELECT {day}, job, status, runs FROM {others}").fetchall():
            assert row[3] > 0, row
            found.add(tuple(row))
        return found

    def close(self) -> None:
        self.conn.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def kept_ledger(request, tmp_path):
    """(a ledger with an injected clock, Direct over the same database, the clock)."""
    clock = Clock()
    if request.param == "sqlite":
        path = tmp_path / "ledger.db"
        ledger = SqliteLedger(path, clock=clock)
        direct = Direct("sqlite", path)
    else:
        from cronwrap.ledger.postgres import PostgresLedger

        dsn = request.getfixturevalue("pg_dsn")
        ledger = PostgresLedger(dsn, clock=clock)
        direct = Direct("postgres", dsn)
    yield ledger, direct, clock
    ledger.close()
    direct.close()


def _sinces(rng: random.Random, now: float) -> list[float]:
    """Windows that start at a day's first second, just before and after one, in each half of
    a day, before every run and after the last."""
    day = (now // DAY) * DAY
    return [day, day - 1, day + 1, day - 3 * DAY + 3600, day - 2 * DAY + 20 * 3600,
            now - 7 * DAY, now - rng.uniform(0, 10 * DAY), T0 - DAY, now + 1]


def _check(ledger, direct: Direct, rng: random.Random) -> int:
    """The kept counts equal the rows' (their number returned), and so do status's."""
    kept = direct.kept()
    assert kept == direct.by_day()
    for since in _sinces(rng, ledger.clock()):
        expected = direct.window(since)
        found = {s.job: s.counts for s in ledger.summaries(_at(since)) if s.counts}
        assert found == expected, since
    return len(kept)


def test_the_kept_counts_equal_the_rows_over_random_claims_retries_takeovers_and_prunes(
        kept_ledger):
    """Claims (new slots, overlap skips), finishes with every end, retries and forced runs
    (an end rewritten to running), takeovers of expired leases, skips, missed slots marked by
    catch-up, manual runs and prunes, in a random order over a fortnight: after each step the
    day counts equal a direct count of the runs, and status's counts for windows starting
    anywhere in a day equal the rows of the window."""
    from cronwrap.model import ClaimRequest, Finish, JobInfo, Mark, Status

    ledger, direct, clock = kept_ledger
    rng = random.Random(24)
    jobs = [JobInfo(f"job-{j}") for j in range(4)]
    running: list = []
    ended: dict[tuple[str, str], str] = {}  # (job, key) -> status, of every ended slot
    keys = iter(range(10**6))
    most = 0

    def request(job, key, **kw):
        return ClaimRequest(job=job, run_key=key, scheduled_at=_at(clock.t), trigger="schedule",
                            host=rng.choice(["h1", "h2"]), pid=rng.randint(2, 99999),
                            pid_start=1, lease=600.0, **kw)

    for step in range(160):
        clock.t += rng.choice([0, 60, 3600, 5 * 3600, 11 * 3600])
        op = rng.choice(["claim", "claim", "finish", "finish", "retry", "takeover", "skip",
                         "missed", "manual", "prune"])
        if op == "claim":
            claim = ledger.claim(request(rng.choice(jobs), f"k{next(keys)}",
                                         overlap_skip=rng.random() < 0.5))
            if claim.run is not None:
                running.append(claim.run)
        elif op == "finish" and running:
            run = running.pop(rng.randrange(len(running)))
            status = rng.choice(ENDS)
            if ledger.finish(run, Finish(status=status, duration_ms=5, exit_code=0, signal=None,
                                         timed_out=False, error_tail=None, log_path=None)):
                ended[run.job, run.run_key] = status
        elif op == "retry" and ended:
            (job, key), status = rng.choice(sorted(ended.items()))
            claim = ledger.claim(request(JobInfo(job), key, force=True, max_attempts=5,
                                         overlap_skip=False))
            if claim.run is not None:
                del ended[job, key]
                running.append(claim.run)
        elif op == "takeover" and running:
            old = rng.choice(running)
            clock.t += 700  # past the lease
            claim = ledger.claim(request(JobInfo(old.job), old.run_key, overlap_skip=False))
            if claim.run is not None:
                running = [r for r in running if r.run_id != old.run_id] + [claim.run]
        elif op == "skip":
            ledger.record_skip(request(rng.choice(jobs), f"k{next(keys)}"), "too_late")
        elif op == "missed":
            job = rng.choice(jobs)
            marks = [Mark(f"m{next(keys)}", _at(clock.t - 60 * i), Status.MISSED, None)
                     for i in range(rng.randint(1, 3))]
            ledger.record_marks(request(job, "unused"), marks)
        elif op == "manual":
            claim = ledger.claim(ClaimRequest(
                job=rng.choice(jobs), run_key=f"manual-{next(keys)}", scheduled_at=None,
                trigger="manual", host="h1", pid=rng.randint(2, 99999), pid_start=1,
                lease=600.0, overlap_skip=False))
            if claim.run is not None:
                running.append(claim.run)
        elif op == "prune":
            gone = ledger.prune(_at(clock.t - rng.uniform(0, 6 * DAY)), keep_last=rng.randint(0, 5))
            ids = {run_id for run_id, _, _ in gone}
            ended = {k: v for k, v in ended.items() if ledger.run_by_key(*k) is not None}
            assert not ids & {r.run_id for r in running}
        if step % 8 == 7:
            most = max(most, _check(ledger, direct, rng))
    _check(ledger, direct, rng)
    assert most > 10  # the sequence made counts of several statuses on many days


def test_an_expansion_counts_the_rows_already_there(tmp_path):
    """A ledger whose runs were written before expansion 7 (by the previous release) has them
    counted once by the expansion itself."""
    path = tmp_path / "ledger.db"
    SqliteLedger(path).close()
    conn = sqlite3.connect(path)
    with conn:
        for name in ("runs_day_inserted", "runs_day_left", "runs_day_entered",
                     "runs_day_pruned"):
            conn.execute(f"DROP TRIGGER {name}")
        conn.execute("DROP VIEW day_moves")  # and its trigger
        conn.execute("DROP TABLE day_counts")
        conn.execute("DROP TABLE day_other_counts")
        conn.execute("UPDATE meta SET value = '6' WHERE key = 'expansion'")
        conn.execute("INSERT INTO jobs (name, first_seen, last_seen) VALUES ('j', 0, 0)")
        conn.executemany("INSERT INTO runs (job, run_key, trigger, status, created_at) "
                         "VALUES ('j', ?, 'schedule', ?, ?)",
                         [(f"k{i}", ENDS[i % len(ENDS)] if i % 5 else "running",
                           T0 + i * 3600.0) for i in range(100)])
    conn.close()
    since = _at(T0 + 30 * 3600 + 1800)
    old = SqliteLedger(path, read_only=True)
    try:
        assert old.expanded == 6
        before = {s.job: s.counts for s in old.summaries(since)}  # counted from runs
    finally:
        old.close()
    SqliteLedger(path).close()  # a writer brings it to expansion 7
    direct = Direct("sqlite", path)
    reader = SqliteLedger(path, read_only=True)
    try:
        assert reader.expanded >= 7
        assert direct.kept() == direct.by_day() and direct.kept()
        assert {s.job: s.counts for s in reader.summaries(since)} == before \
            == direct.window(since.timestamp())
    finally:
        reader.close()
        direct.close()


def _vm_steps(ledger, since: datetime) -> int:
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    ledger.conn.set_progress_handler(count, 100)
    try:
        ledger.summaries(since)
    finally:
        ledger.conn.set_progress_handler(None, 0)
    return steps[0] * 100


def test_status_reads_a_bounded_number_of_runs_whatever_the_window(tmp_path):
    """With the counts kept by day, status's work is the days of its window and at most half
    a day of each job's runs: a window of a year over a job of a run a minute costs about what
    a window of two days costs (counted in SQLite's virtual machine steps, never timed);
    counting the window's rows, as a ledger without expansion 7 does, grows with it."""
    path = tmp_path / "ledger.db"
    SqliteLedger(path).close()
    conn = sqlite3.connect(path)
    minutes = 366 * 24 * 60
    with conn:
        conn.execute("INSERT INTO jobs (name, first_seen, last_seen) VALUES ('busy', 0, 0)")
        conn.execute(f"""
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {minutes})
            INSERT INTO runs (job, run_key, trigger, status, created_at)
            SELECT 'busy', 'k' || i, 'schedule',
                   CASE WHEN i % 17 = 0 THEN 'failed' ELSE 'succeeded' END, {T0} + i * 60
            FROM n""")
    conn.close()
    end = T0 + minutes * 60
    ledger = SqliteLedger(path, read_only=True)
    try:
        year = _vm_steps(ledger, _at(end - 365 * DAY + 5 * 3600))
        days = _vm_steps(ledger, _at(end - 2 * DAY + 5 * 3600))
        counted = {s.job: s.counts for s in ledger.summaries(_at(end - 365 * DAY + 5 * 3600))}
        ledger.expanded = 6  # the query of a ledger without the kept counts
        unkept = _vm_steps(ledger, _at(end - 365 * DAY + 5 * 3600))
        assert counted == {s.job: s.counts
                           for s in ledger.summaries(_at(end - 365 * DAY + 5 * 3600))}
    finally:
        ledger.close()
    # half a day of runs is 720 rows; a year is 525,600
    assert year < 2 * days + 20_000, (year, days)
    assert unkept > 20 * year, (unkept, year)


@pytest.mark.postgres
def test_postgres_status_reads_at_most_half_a_day_of_a_job_s_runs(pg_dsn):
    """The same on PostgreSQL, by EXPLAIN (ANALYZE, FORMAT JSON) of the very statement status
    runs: over a job of a run a minute for 60 days, every window (two days, two months,
    starting early or late in a day) reads at most half a day of the job's rows (720), and
    the counts equal the rows."""
    import json

    import psycopg

    from cronwrap.ledger import sql
    from cronwrap.ledger.postgres import PostgresLedger

    PostgresLedger(pg_dsn).close()  # the schema
    minutes = 60 * 24 * 60
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")  # as bench/ledger_data.py
        conn.execute("INSERT INTO cronwrap_jobs (name, first_seen, last_seen) "
                     "VALUES ('busy', now(), now())")
        conn.execute(f"""
            INSERT INTO cronwrap_runs (job, run_key, trigger, status, created_at)
            SELECT 'busy', 'k' || i, 'schedule',
                   CASE WHEN i % 17 = 0 THEN 'failed' ELSE 'succeeded' END,
                   to_timestamp({T0} + i * 60)
            FROM generate_series(1, {minutes}) AS i""")
        conn.execute("SET session_replication_role = DEFAULT")
        conn.execute(sql.load("postgres")["expansion_7"])  # its own count of the rows there
        conn.execute("ANALYZE cronwrap_runs, cronwrap_day_counts")
    direct = Direct("postgres", pg_dsn)
    ledger = PostgresLedger(pg_dsn, read_only=True)
    end = T0 + minutes * 60
    try:
        for since in (end - 2 * DAY + 5 * 3600, end - 59 * DAY + 5 * 3600,
                      end - 59 * DAY + 17 * 3600):
            with psycopg.connect(pg_dsn) as conn:
                ((plan,),) = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) "
                                          + ledger.q["window_counts"],
                                          ledger._window(_at(since))).fetchall()
            plan = json.loads(plan) if isinstance(plan, str) else plan
            read = 0

            def walk(node: dict) -> None:
                nonlocal read
                if node.get("Relation Name") == "cronwrap_runs":
                    read += (node["Actual Rows"] + node.get("Rows Removed by Filter", 0)) \
                        * node["Actual Loops"]
                for child in node.get("Plans", []):
                    walk(child)

            walk(plan[0]["Plan"])
            assert 0 < read <= 720, (since, read)
            assert {s.job: s.counts for s in ledger.summaries(_at(since))} == \
                direct.window(since)
    finally:
        ledger.close()
        direct.close()
