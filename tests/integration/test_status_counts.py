"""``status`` counts each job's runs by status in the window (issue 15 §1: SQLite groups only
the runs that did not succeed, and counts a job's successes as its runs less those)."""

from __future__ import annotations

import random
import sqlite3
from collections import Counter
from datetime import datetime, timezone

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
