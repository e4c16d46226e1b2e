"""What only the PostgreSQL ledger has to prove: many hosts at once, connection strings and
passwords, unreachable servers. Real server, real processes; the claim protocol itself is
covered by test_ledger_contract.py."""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cronwrap.errors import LedgerError
from cronwrap.ledger import sql
from cronwrap.ledger import postgres as pg_module
from cronwrap.ledger.postgres import PostgresLedger, redact_dsn
from cronwrap.model import ClaimRequest, Finish, JobInfo, Reason
from tests.tcpproxy import FreezableProxy

pytestmark = pytest.mark.postgres

REPO = Path(__file__).resolve().parents[2]

# One "host": build the ledger, say ready, wait for the word, claim each slot in turn.
WORKER = r"""
import json, os, sys
from cronwrap.ledger.postgres import PostgresLedger
from cronwrap.model import ClaimRequest, Finish, JobInfo

args = json.loads(sys.argv[1])
ledger = PostgresLedger(args["dsn"]) if not args["open_after_go"] else None
print("ready", flush=True)
sys.stdin.readline()
ledger = ledger or PostgresLedger(args["dsn"])
out = []
for key in args["keys"]:
    claim = ledger.claim(ClaimRequest(
        job=JobInfo(args["job"]), run_key=key, scheduled_at=None, trigger="schedule",
        host=args["host"], pid=os.getpid(), pid_start=1, lease=60.0,
        overlap_skip=args["overlap_skip"]))
    if claim.run is None:
        out.append({"key": key, "outcome": claim.skip_reason})
        continue
    out.append({"key": key, "outcome": "claimed", "fence": claim.run.fence,
                "run_id": claim.run.run_id})
    ledger.finish(claim.run, Finish(
        status="succeeded", duration_ms=1, exit_code=0, signal=None, timed_out=False,
        error_tail=None, log_path=None))
ledger.close()
print(json.dumps(out))
"""


def run_hosts(argsets: list[dict], timeout: float = 120) -> list[list[dict]]:
    """Start one process per argset; release them together once all are ready."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, json.dumps(a)], env=env, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) for a in argsets]
    try:
        for p in procs:
            line = p.stdout.readline()
            assert line.strip() == "ready", p.communicate(timeout=timeout)[1]
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        results = []
        for p in procs:
            out, err = p.communicate(timeout=timeout)
            assert p.returncode == 0, err
            results.append(json.loads(out))
        return results
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def admin(dsn: str):
    return psycopg.connect(dsn, autocommit=True)


def claim_req(key: str, job: str = "settle", host: str = "h1", **kw) -> ClaimRequest:
    fields = dict(job=JobInfo(job), run_key=key, scheduled_at=datetime.now(timezone.utc),
                  trigger="schedule", host=host, pid=os.getpid(), pid_start=1, lease=60.0)
    fields.update(kw)
    return ClaimRequest(**fields)


def done(tail: str | None = None, log_path: str | None = None) -> Finish:
    return Finish(status="succeeded", duration_ms=3, exit_code=0, signal=None, timed_out=False,
                  error_tail=tail, log_path=log_path)


@pytest.fixture
def pg_ledger(pg_dsn):
    led = PostgresLedger(pg_dsn)  # no clock: the server's now()
    yield led
    led.close()


# -- schema ----------------------------------------------------------------------------------

def test_schema_creation_raced_by_eight_hosts_creates_one_schema(pg_dsn):
    hosts = [dict(dsn=pg_dsn, job="settle", host=f"host{i}", keys=["2027-01-15"],
                  overlap_skip=True, open_after_go=True) for i in range(8)]
    outcomes = [r[0]["outcome"] for r in run_hosts(hosts)]
    assert sorted(outcomes) == ["claimed"] + ["duplicate"] * 7
    with admin(pg_dsn) as conn:
        tables = conn.execute("SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n "
                              "ON n.oid = c.relnamespace WHERE c.relkind = 'r' AND "
                              "c.relname LIKE 'cronwrap%' ORDER BY 2").fetchall()
        meta = conn.execute("SELECT key, value FROM cronwrap_meta").fetchall()
    assert tables == [("public", "cronwrap_alert_sends"), ("public", "cronwrap_alerts"),
                      ("public", "cronwrap_attempts"), ("public", "cronwrap_day_counts"),
                      ("public", "cronwrap_day_other_counts"),
                      ("public", "cronwrap_duration_buckets"),
                      ("public", "cronwrap_duration_tallies"), ("public", "cronwrap_jobs"),
                      ("public", "cronwrap_meta"), ("public", "cronwrap_pauses"),
                      ("public", "cronwrap_runs"), ("public", "cronwrap_steps"),
                      ("public", "cronwrap_tallies"), ("public", "cronwrap_usage")]
    newest = {kind: str(max(int(n.split("_")[1]) for n in sql.load("postgres")
                            if n.startswith(f"{kind}_"))) for kind in ("migration", "expansion")}
    assert sorted(meta) == [("expansion", newest["expansion"]),
                            ("schema_version", newest["migration"])]


def test_migrations_are_idempotent(pg_dsn, pg_ledger):
    run = pg_ledger.claim(claim_req("k1")).run
    assert pg_ledger.migrate() == pg_ledger.schema_version  # current: nothing to do
    PostgresLedger(pg_dsn).close()  # a second host starting up
    with admin(pg_dsn) as conn:  # as if migration 1 had not been recorded: it runs again
        conn.execute("UPDATE cronwrap_meta SET value = '0'")  # the expansion's too
    assert pg_ledger.migrate() == 0
    assert pg_ledger.migrate() == pg_ledger.schema_version
    with admin(pg_dsn) as conn:
        meta = conn.execute("SELECT key, value FROM cronwrap_meta ORDER BY key").fetchall()
    assert meta == [("expansion", str(pg_ledger.expansion_level)),
                    ("schema_version", str(pg_ledger.schema_version))]
    assert pg_ledger.get_run("settle", run.run_id).status == "running"


def test_session_settings_and_an_operators_own_options(pg_dsn):
    def setting(led, name):
        with led._tx(write=False) as cur:
            cur.execute(f"SHOW {name}")
            return next(iter(cur.fetchone().values()))

    led = PostgresLedger(pg_dsn)
    names = ("statement_timeout", "idle_in_transaction_session_timeout", "application_name",
             "jit")
    assert [setting(led, n) for n in names] == ["15s", "10s", "cronwrap", "off"]
    with led._connection() as conn:  # set for each transaction only: nothing left in the session
        assert conn.execute("SHOW statement_timeout").fetchone()["statement_timeout"] == "0"
    led.close()
    led = PostgresLedger(pg_dsn + "?options=-c%20statement_timeout%3D42s&application_name=ops")
    assert (setting(led, "statement_timeout"), setting(led, "application_name")) == ("42s", "ops")
    led.close()


def test_upsert_of_the_job_is_the_claims_lock_and_a_paused_holder_is_ended(pg_dsn):
    """Step 1 of the claim: a second claimer waits on the job row the first one upserted; a
    holder paused inside its transaction is ended by the server (here after 1 s)."""
    holder = PostgresLedger(pg_dsn + "?options=-c%20idle_in_transaction_session_timeout%3D1s")
    claimer = PostgresLedger(pg_dsn)
    holder.conn.autocommit = False  # a transaction left open: the holder paused inside it
    holder.conn.execute(holder.q["upsert_job"], dict(
        job="settle", schedule=None, tz=None, key_template=None, now=datetime.now(timezone.utc), last_slot=None, settings=None))
    result = {}
    waiter = threading.Thread(target=lambda: result.update(claim=claimer.claim(claim_req("k1"))))
    started = time.monotonic()
    waiter.start()
    waiter.join(0.5)
    assert waiter.is_alive(), "the claim did not wait for the job's row lock"
    waiter.join(10)
    assert result["claim"].run is not None and time.monotonic() - started < 5
    with pytest.raises(LedgerError):  # the holder's session was ended: it learns on next use
        holder.heartbeat(result["claim"].run.replace(fence=0), 60)
    claimer.close()
    holder.close()


# -- connection strings ----------------------------------------------------------------------

def test_key_value_dsn_and_pg_variables_both_work(pg_dsn, monkeypatch):
    conn = psycopg.conninfo.conninfo_to_dict(pg_dsn)
    kv = " ".join(f"{k}={v}" for k, v in conn.items())
    PostgresLedger(kv).close()
    for key, var in [("host", "PGHOST"), ("port", "PGPORT"), ("user", "PGUSER"),
                     ("dbname", "PGDATABASE")]:
        monkeypatch.setenv(var, conn[key])
    led = PostgresLedger("")
    assert led.claim(claim_req("k1")).run.fence == 1
    led.close()
    led = PostgresLedger(kv)
    assert led.claim(claim_req("k1", host="h2")).skip_reason == Reason.DUPLICATE
    led.close()


REDACTIONS = [  # a URL: everything up to the last @ (user names too)
    ("postgresql://user:secret@host/db", "postgresql://***@host/db"),
    ("postgres://user:secret@host:5432/db?sslmode=require",
     "postgres://***@host:5432/db?sslmode=require"),
    ("postgresql://user@host/db", "postgresql://***@host/db"),
    ("postgresql://host/db", "postgresql://host/db"),
    ("postgresql://", "postgresql://"),
    ("postgresql://u:p@ss:w/rd@host/db", "postgresql://***@host/db"),
    ("postgresql://u:p%40ss@h1:5432,h2:5433/db", "postgresql://***@h1:5432,h2:5433/db"),
    ("postgresql://u:@host/db", "postgresql://***@host/db"),
    ("postgresql://u@h/db?password=secret&sslmode=require",
     "postgresql://***@h/db?password=***&sslmode=require"),
    ("postgresql://u@h/db?sslpassword=secret", "postgresql://***@h/db?sslpassword=***"),
    ("host=db password=secret user=app", "host=db password=*** user=app"),
    ("password=secret", "password=***"),
    ("host=db password = secret", "host=db password = ***"),
    (r"host=db password='se cret\' x' user=app", "host=db password=*** user=app"),
    ("host=db password='unterminated secret", "host=db password=***"),
    ("host=db PASSWORD=secret", "host=db PASSWORD=***"),
    ("host=db sslpassword=secret", "host=db sslpassword=***"),
    ("host=db passfile=/root/.pgpass", "host=db passfile=/root/.pgpass"),
    ("", ""),
]


@pytest.mark.parametrize(("dsn", "shown"), REDACTIONS)
def test_redact_dsn(dsn, shown):
    assert redact_dsn(dsn) == shown
    for secret in ("secret", "p@ss:w/rd", "p%40ss"):
        assert secret not in redact_dsn(dsn)


@pytest.mark.parametrize("dsn", [
    "postgresql://app:hunter2-secret@127.0.0.1:1/jobs",
    "host=127.0.0.1 port=1 user=app password=hunter2-secret dbname=jobs",
])
def test_refused_connection_is_one_clear_line_without_the_password(dsn):
    started = time.monotonic()
    with pytest.raises(LedgerError) as info:
        PostgresLedger(dsn, connect_timeout=10)
    assert time.monotonic() - started < 5  # refused at once, not waited out
    message = str(info.value)
    assert "\n" not in message and "hunter2" not in message
    assert "cannot connect: connection refused" in message and "***" in message
    assert message.endswith("(check --db / CRONWRAP_DB, or use --on-db-error run-unrecorded)")
    assert "hunter2" not in str(info.value.__cause__)


def test_silent_server_gives_up_at_the_connect_timeout():
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # the kernel completes the handshake; nobody ever answers
    port = silent.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(LedgerError, match="cannot connect: connection timeout expired") as info:
        PostgresLedger(f"postgresql://app:hunter2-secret@127.0.0.1:{port}/jobs", connect_timeout=2)
    assert time.monotonic() - started < 2 + 10  # the timeout, not a hang
    assert "hunter2" not in str(info.value)
    silent.close()


def test_pg_variables_password_never_shown(monkeypatch):
    monkeypatch.setenv("PGHOST", "127.0.0.1")
    monkeypatch.setenv("PGPORT", "1")
    monkeypatch.setenv("PGPASSWORD", "hunter2-secret")
    shown = r"^ledger postgresql \(PGHOST=127.0.0.1 PGPORT=1[^)]*\): cannot connect"
    with pytest.raises(LedgerError, match=shown) as info:
        PostgresLedger("")
    assert "hunter2" not in str(info.value)


def test_driver_message_echoing_the_password_is_scrubbed():
    with pytest.raises(LedgerError, match="invalid connection string") as info:
        PostgresLedger("postgresql://app:s3 cr3t-pw@127.0.0.1/db")
    assert "cr3t" not in str(info.value) and "cr3t" not in str(info.value.__cause__)


def test_a_dropped_connection_fails_one_call_and_the_next_reconnects(pg_dsn, pg_ledger):
    run = pg_ledger.claim(claim_req("k1")).run
    with admin(pg_dsn) as conn:
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                     "WHERE application_name = 'cronwrap' AND datname = current_database()")
    with pytest.raises(LedgerError, match="query failed"):
        pg_ledger.heartbeat(run, 60)
    assert pg_ledger.heartbeat(run, 60)



def test_a_server_that_stops_answering_fails_the_call_from_one_watchdog_thread(pg_dsn,
                                                                                monkeypatch):
    """A statement that never gets an answer (a hung server or proxy: the connection stays
    open) fails once it outlives the watchdog's limit, and the next call reconnects; every
    statement of the process is watched by the same one thread, none started per statement."""
    watchdog = pg_module._Watchdog(0.5)  # TRANSACTION_TIMEOUT_S (20 s) would slow the suite
    monkeypatch.setattr(pg_module, "_WATCHDOG", watchdog)
    url = urlsplit(pg_dsn)
    proxy = FreezableProxy(url.hostname, url.port or 5432)
    led = PostgresLedger(f"postgresql://{url.username}@127.0.0.1:{proxy.port}{url.path}")
    try:
        run = led.claim(claim_req("w1", job="watched")).run
        assert run is not None
        thread = watchdog.thread
        before = threading.active_count()
        for n in range(20):
            assert led.heartbeat(run, 60)
        assert watchdog.thread is thread and thread is not None and thread.is_alive()
        assert threading.active_count() == before
        proxy.frozen.set()
        failed: list[BaseException] = []

        def renew() -> None:
            try:
                led.heartbeat(run, 60)
            except LedgerError as exc:
                failed.append(exc)

        caller = threading.Thread(target=renew, daemon=True)
        caller.start()
        caller.join(30)  # without the watchdog the call would wait for ever
        assert not caller.is_alive(), "the unanswered statement was never ended"
        assert len(failed) == 1 and "query failed" in str(failed[0]), failed
        proxy.frozen.clear()
        assert led.heartbeat(run, 60)  # a new connection
        assert not watchdog.armed
    finally:
        proxy.frozen.clear()
        led.close()
        proxy.close()


# -- data ------------------------------------------------------------------------------------

awkward = st.lists(
    st.one_of(st.sampled_from(["'", '"', "%", "%s", "%(job)s", "\\", "\\'", ";", "--", "ü",
                               "日本", "😀", "\n", "\t", "$1", "?"]),
              st.characters(exclude_categories=("Cs",), exclude_characters="\x00")),
    min_size=1, max_size=40,
).map("".join)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(job=awkward, key=awkward, host=awkward)
def test_awkward_names_and_keys_round_trip(pg_ledger, job, key, host):
    claim = pg_ledger.claim(claim_req(key, job=job, host=host))
    if claim.run is None:  # this (job, key) came up in an earlier example
        assert claim.skip_reason == Reason.DUPLICATE
        assert (claim.blocking.job, claim.blocking.run_key) == (job, key)
        return
    assert pg_ledger.finish(claim.run, done(tail=job + key, log_path=key))
    row = pg_ledger.get_run(job, claim.run.run_id)
    assert (row.job, row.run_key, row.host) == (job, key, host)
    assert (row.error_tail, row.log_path) == (job + key, key)
    assert pg_ledger.runs(job)[0].run_key == key
    assert job in [s.job for s in pg_ledger.summaries(datetime(2000, 1, 1, tzinfo=timezone.utc))]


# -- many hosts, the same slots --------------------------------------------------------------

SLOTS = [f"2027-01-{day:02d}" for day in range(1, 21)]


@pytest.mark.parametrize("round_", range(5))
def test_eight_hosts_racing_for_twenty_slots_claim_each_once(pg_dsn, round_):
    PostgresLedger(pg_dsn).close()  # the schema exists: the race is for the slots
    job = f"race{round_}"
    hosts = []
    for i in range(8):
        keys = SLOTS[:]
        random.Random(f"{round_}/{i}").shuffle(keys)
        hosts.append(dict(dsn=pg_dsn, job=job, host=f"host{i}", keys=keys, overlap_skip=False,
                          open_after_go=False))
    results = run_hosts(hosts)
    claims = [c for host in results for c in host if c["outcome"] == "claimed"]
    assert sorted(c["key"] for c in claims) == SLOTS  # every slot exactly once
    assert sum(c["outcome"] == "duplicate" for host in results for c in host) == 8 * 20 - 20
    for host in results:  # each host saw its fences grow
        fences = [c["fence"] for c in host if c["outcome"] == "claimed"]
        assert fences == sorted(set(fences))
    # Rows are inserted under the job's lock, so id order is claim order.
    by_claim_order = sorted(claims, key=lambda c: c["run_id"])
    assert [c["fence"] for c in by_claim_order] == list(range(1, 21))


@pytest.mark.parametrize("round_", range(5))
def test_eight_hosts_racing_under_overlap_skip_never_run_a_slot_twice(pg_dsn, round_):
    PostgresLedger(pg_dsn).close()
    job = f"skip{round_}"
    hosts = [dict(dsn=pg_dsn, job=job, host=f"host{i}", overlap_skip=True, open_after_go=False,
                  keys=random.Random(f"{round_}/{i}").sample(SLOTS, len(SLOTS)))
             for i in range(8)]
    results = run_hosts(hosts)
    outcomes = [c for host in results for c in host]
    assert {c["outcome"] for c in outcomes} <= {"claimed", "duplicate", "overlap"}
    claimed = [c["key"] for c in outcomes if c["outcome"] == "claimed"]
    assert len(claimed) == len(set(claimed)) >= 1
    led = PostgresLedger(pg_dsn)
    rows = led.runs(job, limit=100)
    led.close()
    assert sorted(r.run_key for r in rows) == sorted({c["key"] for c in outcomes})
    assert sorted(r.run_key for r in rows if r.status == "succeeded") == sorted(claimed)
    assert all((r.status, r.skip_reason) == ("skipped", "overlap")
               for r in rows if r.status != "succeeded")
    assert sorted(r.fence for r in rows if r.fence) == list(range(1, len(claimed) + 1))


def test_run_path_does_not_import_psycopg():
    code = ("import sys, cronwrap.cli, cronwrap.admin, cronwrap.run.runner, cronwrap.ledger.sqlite; "
            "sys.exit('psycopg' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr or "psycopg imported on the run path"
