"""The ledger through a real PgBouncer in transaction pooling mode, as many fleets run it.

Each transaction may go to another server connection, so cronwrap may send no startup
parameter PgBouncer refuses (``options``), keep no session state from one transaction to the
next and prepare no statement on the server. The PgBouncer (tests/conftest.py) has Debian's
defaults otherwise, and no ignore_startup_parameters. The installed executable is run, as in
tests/acceptance; each Host has its own CRONWRAP_HOST and CRONWRAP_HOME.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import psycopg
import pytest

from tests.acceptance import test_multihost as multihost
from tests.acceptance.conftest import wait_for
from tests.acceptance.hosts import Host
from tests.acceptance.test_fleet import (HOURLY_SLOT, SECRET, assert_each_slot_ran_once,
                                         fire_together, refused_at_once, run_all_at_once,
                                         same_hour)
from tests.conftest import PGBOUNCER_PASSWORD

pytestmark = pytest.mark.postgres


@pytest.fixture
def hosts(tmp_path, pgbouncer_dsn):
    def make(*names):
        return [Host(tmp_path, n, pgbouncer_dsn) for n in names]
    return make


def test_db_init_through_pgbouncer_creates_the_schema_and_again_changes_nothing(hosts, pg_dsn):
    (a,) = hosts("a")
    a("db", "init", check_rc=0)
    a("db", "init", check_rc=0)  # current: nothing to do
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE tablename LIKE 'cronwrap%' ORDER BY 1")]
        (version,) = conn.execute(
            "SELECT value FROM cronwrap_meta WHERE key = 'schema_version'").fetchone()
    assert tables == ["cronwrap_alert_sends", "cronwrap_alerts", "cronwrap_attempts",
                      "cronwrap_day_counts", "cronwrap_day_other_counts",
                      "cronwrap_duration_buckets",
                      "cronwrap_duration_tallies", "cronwrap_jobs", "cronwrap_meta",
                      "cronwrap_pauses", "cronwrap_runs", "cronwrap_steps", "cronwrap_tallies",
                      "cronwrap_usage"]
    assert int(version) >= 1


def test_three_hosts_race_through_pgbouncer_and_each_slot_runs_once(hosts, tmp_path):
    fleet = hosts("a", "b", "c")
    jobs = [f"race{j}" for j in range(8)]
    results = fire_together(fleet, jobs, tmp_path)
    assert [rc for rc, _ in results] == [0] * len(results), [e[-300:] for rc, e in results if rc]
    assert_each_slot_ran_once(fleet, jobs, tmp_path)


def test_sigkilled_holder_is_taken_over_through_pgbouncer(hosts, tmp_path):
    """After the lease, by another host: attempt 2, a larger fence."""
    multihost.test_sigkilled_runner_is_taken_over_after_its_lease(hosts, tmp_path)


def test_heartbeats_through_pgbouncer_keep_a_job_longer_than_its_lease(hosts, tmp_path):
    """--lease 3s, a job of 5 s and more: renewed every second, never lost, never taken."""
    a, b = hosts("a", "b")
    past_lease, release = tmp_path / "past-lease", tmp_path / "release"
    same_hour()
    runner = a.popen("run", "-n", "hb", "--lease", "3s", *HOURLY_SLOT, "--", "sh", "-c",
                     f"sleep 4.5; touch {past_lease}; n=0; until [ -e {release} ]; do "
                     f"n=$((n + 1)); [ $n -le 600 ] || exit 3; sleep 0.1; done")
    try:
        wait_for(lambda: past_lease.exists() or runner.poll() is not None, timeout=60,
                 what="the job running past its first lease")
        assert runner.poll() is None, runner.communicate()
        (job,) = b.json("status", "hb", "--json")
        (running,) = job["running"]
        assert running["host"] == "a" and running["lease_left_s"] > 0
        taken = b("run", "-n", "hb", "--lease", "3s", *HOURLY_SLOT, "--skip-exit-code", "99",
                  "--", "true")
        assert taken.returncode == 99, taken.stderr
    finally:
        release.touch()
    assert runner.wait(60) == 0, runner.communicate()
    (run,) = b.json("history", "hb", "--json")
    assert (run["status"], run["host"], run["attempt"], run["skip_reason"]) == (
        "succeeded", "a", 1, None)
    assert not [e for e in a.events() if e["event"] == "lease_lost"]


def test_status_and_history_read_through_pgbouncer(hosts, tmp_path):
    """A running run of one host, seen by another: its lease and fence."""
    multihost.test_status_shows_running_runs_across_hosts(hosts, tmp_path)
    (b,) = hosts("b")
    (run,) = b.json("history", "live", "--json")
    assert (run["status"], run["host"], run["fence"]) == ("succeeded", "a", 1)
    (job,) = b.json("status", "--json")
    assert job["job"] == "live" and job["last_run"]["run_id"] == run["run_id"]


def test_24_jobs_run_at_once_behind_a_pgbouncer_of_4_clients(start_pgbouncer, pg_dsn, tmp_path):
    """max_client_conn = 4: a wrapper is a PgBouncer client only while it talks to the
    ledger, and one turned away ("no more connections allowed") waits and comes back."""
    bouncer = start_pgbouncer(max_client_conn=4, default_pool_size=2)
    run_all_at_once(Host(tmp_path, "a", bouncer.url(urlsplit(pg_dsn).path.lstrip("/"))), 24,
                    tmp_path)


@pytest.mark.parametrize(("password", "dbname", "said"), [
    (SECRET.decode(), None, "password authentication failed"),
    (PGBOUNCER_PASSWORD, "no_such_db", 'database "no_such_db" does not exist'),
], ids=["wrong_password", "unknown_database"])
def test_a_login_pgbouncer_refuses_fails_at_once_with_one_line(pgbouncer, pg_dsn, tmp_path,
                                                                password, dbname, said):
    dsn = pgbouncer.url(dbname or urlsplit(pg_dsn).path.lstrip("/"), password=password)
    refused_at_once(Host(tmp_path, "a", dsn), said, password)


# -- nothing left on the pooled server connection --------------------------------------------

# Startup parameters PgBouncer itself sets on a server connection to match each client's.
PGBOUNCER_TRACKED = {"client_encoding", "DateStyle", "IntervalStyle", "TimeZone",
                     "standard_conforming_strings", "application_name"}


def leftovers(conn: psycopg.Connection) -> dict:
    """What a previous client of this server connection may have left behind."""
    def names(query: str) -> list[str]:
        return sorted(r[0] for r in conn.execute(query))

    return {
        "prepared statements": names("SELECT name FROM pg_prepared_statements"),
        "settings": [n for n in names("SELECT name FROM pg_settings WHERE source = 'session'")
                     if n not in PGBOUNCER_TRACKED],
        "advisory locks": names("SELECT objid::text FROM pg_locks WHERE locktype = 'advisory' "
                                "AND pid = pg_backend_pid()"),
        "listens": names("SELECT pg_listening_channels()"),
        "temp tables": names("SELECT relname FROM pg_class WHERE relpersistence = 't'"),
    }


def test_no_session_state_or_prepared_statement_is_left_for_the_next_client(
        start_pgbouncer, pg_dsn, tmp_path):
    """A pool of one server connection: every cronwrap transaction runs on the connection
    this test then inspects, through the same PgBouncer."""
    bouncer = start_pgbouncer(default_pool_size=1)
    dsn = bouncer.url(urlsplit(pg_dsn).path.lstrip("/"))

    def probe() -> tuple[int, dict]:
        with psycopg.connect(dsn, autocommit=True, prepare_threshold=None) as conn:
            return conn.execute("SELECT pg_backend_pid()").fetchone()[0], leftovers(conn)

    backend, before = probe()
    a = Host(tmp_path, "a", dsn)
    for i in range(3):
        # A lease of 3 s is renewed every second: jobs of 2 and 4 s renew it.
        a("run", "-n", f"state{i}", "--lease", "3s", "--", "sleep", str(i * 2), check_rc=0)
    a.json("status", "--json")
    a.json("history", "state2", "--json")
    after_backend, after = probe()
    assert after_backend == backend, "the pool of one lost its server connection"
    assert after == before == {k: [] for k in before}, after
