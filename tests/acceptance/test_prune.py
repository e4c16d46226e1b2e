"""``cronwrap prune`` on a ledger of 100,000 runs."""

from __future__ import annotations

import sqlite3
import time

from cronwrap.ledger.sqlite import SqliteLedger


def build(home, jobs: int, per_job: int, now: float) -> None:
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    SqliteLedger(home / "ledger.db").close()
    db = sqlite3.connect(home / "ledger.db")
    with db:
        db.executemany("INSERT INTO jobs (name, fence, first_seen, last_seen, settings) VALUES (?, ?, ?, ?, ?)",
                       [(f"j{j}", per_job, now - 400 * 86400, now,
                         '{"catchup": "all", "catchup_window": 864000}' if j == 0 else None) for j in range(jobs)])
        rows = []
        for j in range(jobs):
            for i in range(per_job):
                t = now - (per_job - i) * 3600 + 1800  # hourly, oldest first, off the cutoff
                status = "running" if (j == 1 and i == 0) else "succeeded"
                rows.append((f"j{j}", f"k{i}", t, "schedule", status, 1, t, t + 1 if status != "running" else None, t, i + 1))
        db.executemany("INSERT INTO runs (job, run_key, scheduled_at, trigger, status, attempts, started_at, "
                       "finished_at, created_at, fence) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)


def test_prune_100000_runs_leaves_the_right_rows(cw, home):
    now = time.time()
    build(home, jobs=50, per_job=2000, now=now)  # 100,000 runs over 83 days
    start = time.monotonic()
    proc = cw("prune", "--older-than", "30d", "--keep-last", "10", check_rc=0)
    took = time.monotonic() - start
    assert took < 30, took  # the budget is 5 s (bench/ reports the figure); this is a sanity bound
    db = sqlite3.connect(home / "ledger.db")
    counts = dict(db.execute("SELECT job, count(*) FROM runs GROUP BY job").fetchall())
    # 30 days of hourly runs remain (720), and more for j0 whose 10-day catch-up window is
    # inside those 30 days anyway; j1 also keeps its ancient running row.
    assert counts["j5"] == 720 and counts["j1"] == 721 and counts["j0"] == 720
    assert db.execute("SELECT count(*) FROM runs WHERE status = 'running'").fetchone()[0] == 1
    assert b"removed 63999 runs" in proc.stdout  # 100,000 - 50 x 720 - the running row


def test_prune_keep_last_and_bad_input(cw, home):
    now = time.time()
    build(home, jobs=2, per_job=100, now=now - 100 * 86400)  # all runs are old
    cw("prune", "--older-than", "1d", "--keep-last", "5", check_rc=0)
    db = sqlite3.connect(home / "ledger.db")
    assert db.execute("SELECT count(*) FROM runs WHERE job = 'j0'").fetchone()[0] == 5
    assert db.execute("SELECT count(*) FROM runs WHERE job = 'j1'").fetchone()[0] == 6  # + its running row
    bad = cw("prune", "--older-than", "soon")
    assert bad.returncode == 125 and b"--older-than" in bad.stderr


def test_settings_that_are_not_json_do_not_stop_prune(cw, home):
    """Anyone who can write a shared ledger can put anything in jobs.settings."""
    now = time.time()
    build(home, 2, 10, now)
    db = sqlite3.connect(home / "ledger.db")
    with db:
        db.execute("UPDATE jobs SET settings = '{not json' WHERE name = 'j0'")
    proc = cw("prune", "--older-than", "5h")
    assert proc.returncode == 0, proc.stderr
    assert b"removed" in proc.stdout
    assert (home / "ledger.db").exists()
