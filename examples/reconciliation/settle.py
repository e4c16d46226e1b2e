#!/usr/bin/env python3
"""settle: reconcile one day's orders against payments (the seed's §7 job), under cronwrap.

    cronwrap run -n settle --schedule '30 1 * * *' --tz Asia/Shanghai \
        --env-file /etc/settle/settle.env … -- /opt/settle/settle.py

cronwrap has already decided that this process may act for the slot: it took the local lock,
claimed the slot in its ledger (one run per slot across every host), holds a renewed lease
and will kill this process on --timeout. settle.py cuts the day into batches of 1000 orders
and runs each as a step of the slot, `cronwrap step batch-0003 -- settle.py --batch …`: a
batch that succeeded in an earlier attempt of the slot (a retry, a takeover by another host,
a re-run with --date) is not done again, so an attempt resumes at the first unfinished batch;
and a batch of an attempt whose slot was taken over is refused by cronwrap (exit 123) before
it starts. What cronwrap hands over, and what settle.py does with it:

  CRONWRAP_BIZ_DATE   the day to settle (the slot's date, also for catch-up and manual runs)
  CRONWRAP_RUN_KEY    the slot: every row written is keyed by it, so a retry, a re-run or a
                      takeover rewrites the same rows instead of adding new ones
  CRONWRAP_FENCE      strictly increasing per claim: written with every row, and a writer
                      whose fence is smaller than the one registered for the key is refused
  CRONWRAP_RUN_ID     cronwrap's ledger row, kept so the result page links to `cronwrap logs`
  CRONWRAP_ATTEMPT    1, 2, … (recorded)
  CRONWRAP_LEDGER     where cronwrap step records the batches (never printed); the
                      cronwrap on PATH runs them
  SETTLE_DSN          the business database (from the env file; never printed)

Optional settings (environment):
  SETTLE_BATCH_SIZE          orders per batch and per transaction (default 1000)
  SETTLE_STATEMENT_TIMEOUT   PostgreSQL statement_timeout (default 5min): a downstream query
                             slower than this is a transient failure (exit 75)
  SETTLE_LOCK_TIMEOUT        PostgreSQL lock_timeout (default 30s)
Test knobs, never set in production:
  SETTLE_DOWNSTREAM_DELAY    seconds the downstream (payments) query of each batch takes
  SETTLE_FAIL_AFTER_BATCHES  crash (SIGKILL itself) once this many batches are done

Exit status (cronwrap's --retry-on decides which are retried; 75 is its default):
  0   settled (the summary line is the last line of output: `cronwrap logs settle --last`)
  3   fenced out: a newer attempt owns this slot (the database's fence, or cronwrap step's
      refusal); nothing more was written
  64  not started by cronwrap (or with an unrecorded run): refuses to settle
  70  any other error (a bug, bad data): not worth retrying blindly
  75  EX_TEMPFAIL: transient downstream trouble (statement_timeout, lock_timeout, lost
      connection, serialization failure, database restarting): retry later
  128+N  ended by signal N (cronwrap's --timeout sends TERM; the query in flight is cancelled)
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import time
from datetime import date

import psycopg
from psycopg import errors

EX_OK, EX_FENCED, EX_USAGE, EX_SOFTWARE, EX_TEMPFAIL = 0, 3, 64, 70, 75
EX_SUPERSEDED = 123  # cronwrap step: the slot is no longer this attempt's
FENCE_SQLSTATE = "SF001"  # raised by the fence triggers of schema.sql

# Errors that say "try again later", not "this is wrong".
TRANSIENT = (
    errors.QueryCanceled,          # statement_timeout (or a cancel by an operator)
    errors.LockNotAvailable,       # lock_timeout
    errors.SerializationFailure,
    errors.DeadlockDetected,
    errors.AdminShutdown, errors.CrashShutdown, errors.CannotConnectNow,
    psycopg.OperationalError,      # connection refused / lost, server closed the connection
)


class UsageError(Exception):
    """Not started the way settle.py must be started (exit 64)."""


class Fenced(Exception):
    """A newer attempt (larger CRONWRAP_FENCE) owns this run key."""


class Terminated(SystemExit):
    """TERM/INT/HUP. A SystemExit, so psycopg cancels the query in flight before it unwinds
    (it does so for KeyboardInterrupt and SystemExit): the server stops working for us and the
    batch transaction, and its row lock, go away at once instead of when the query ends."""


def on_signal(signum, frame):
    # The first signal starts the end; another one (cronwrap's keeper signals the whole tree,
    # and cronwrap step passes its own on to the batch) must not cut the recording short.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    raise Terminated(128 + signum)


def say(message: str) -> None:
    print(f"settle: {message}", flush=True)


def job_identity(env) -> dict:
    """What cronwrap handed over; refuse to run without a real claim."""
    missing = [k for k in ("CRONWRAP_BIZ_DATE", "CRONWRAP_RUN_KEY", "CRONWRAP_RUN_ID",
                           "CRONWRAP_FENCE", "CRONWRAP_ATTEMPT", "SETTLE_DSN") if not env.get(k)]
    if missing:
        raise UsageError(f"missing {', '.join(missing)}: run me under cronwrap with "
                         "--env-file holding SETTLE_DSN (see settle.env.example)")
    try:
        biz_date = date.fromisoformat(env["CRONWRAP_BIZ_DATE"])
        fence, run_id, attempt = (int(env[k]) for k in
                                  ("CRONWRAP_FENCE", "CRONWRAP_RUN_ID", "CRONWRAP_ATTEMPT"))
    except ValueError as exc:
        raise UsageError(f"bad cronwrap variable: {exc}") from None
    if fence <= 0 or run_id <= 0:
        # cronwrap --on-db-error run-unrecorded runs with id 0 and fence 0: no claim, no lease,
        # nothing to fence with. Settlement must not run twice, so it does not run at all.
        raise UsageError("this run is not recorded in cronwrap's ledger (fence 0): "
                         "refusing to settle without a claim")
    return dict(biz_date=biz_date, run_key=env["CRONWRAP_RUN_KEY"], run_id=run_id,
                fence=fence, attempt=attempt, host=env.get("CRONWRAP_HOST") or os.uname().nodename)


def connect(dsn: str, env) -> psycopg.Connection:
    conn = psycopg.connect(dsn, connect_timeout=10, autocommit=True,
                           application_name=f"settle {env.get('CRONWRAP_RUN_KEY', '')}"[:63])
    for name, value in (("statement_timeout", env.get("SETTLE_STATEMENT_TIMEOUT", "5min")),
                        ("lock_timeout", env.get("SETTLE_LOCK_TIMEOUT", "30s")),
                        ("idle_in_transaction_session_timeout", "10min")):
        conn.execute("SELECT set_config(%s, %s, false)", (name, value))
    if conn.info.server_version >= 140000:
        # A backend whose client died (SIGKILL, lost host) notices within a second and rolls
        # back, instead of finishing a long query while holding our row lock.
        conn.execute("SET client_connection_check_interval = '1s'")
    return conn


# -- the protocol, one statement each ---------------------------------------------------------

# Register this attempt as the owner of the run key. A new key inserts; a retry, a re-run or a
# takeover (larger fence) resets the progress columns; a writer with a smaller fence than the
# registered one updates nothing and learns it was fenced out.
REGISTER = """
INSERT INTO settlement_runs AS r (run_key, biz_date, run_id, fence, attempts, host, status, started_at)
VALUES (%(run_key)s, %(biz_date)s, %(run_id)s, %(fence)s, %(attempt)s, %(host)s, 'running', now())
ON CONFLICT (run_key) DO UPDATE SET
  biz_date = EXCLUDED.biz_date, run_id = EXCLUDED.run_id, fence = EXCLUDED.fence,
  attempts = EXCLUDED.attempts, host = EXCLUDED.host, status = 'running',
  started_at = now(), finished_at = NULL, heartbeat_at = NULL, last_error = NULL,
  orders_count = 0, batches = 0, last_order_id = NULL
WHERE r.fence <= EXCLUDED.fence
RETURNING fence
"""

# First statement of every batch transaction: still ours? Takes the row lock, so a takeover's
# REGISTER waits for this batch to commit, and after it this matches nothing.
STILL_OURS = """
UPDATE settlement_runs SET heartbeat_at = now()
WHERE run_key = %(run_key)s AND fence <= %(fence)s AND status = 'running'
RETURNING fence
"""

# The batch boundaries, computed by the driver: the next BATCH order ids after a keyset position
# (an index-only scan of (biz_date, order_id)). A day that is being settled no longer changes,
# so batch N covers the same orders in every attempt.
BATCH_IDS = """
SELECT order_id FROM orders
WHERE biz_date = %(biz_date)s AND order_id > %(last)s
ORDER BY order_id
LIMIT %(limit)s
"""

ORDERS_BATCH = """
SELECT order_id, amount FROM orders
WHERE biz_date = %(biz_date)s AND order_id > %(after)s AND order_id <= %(through)s
ORDER BY order_id
"""

# The downstream: the payment side of the batch (in real life often another service or a
# replica). SETTLE_DOWNSTREAM_DELAY makes it slow, so statement_timeout / --timeout can be shown.
PAYMENTS_OF = """
SELECT p.order_id, p.amount FROM payments p, pg_sleep(%(delay)s)
WHERE p.order_id = ANY(%(ids)s)
"""

# A batch rewrites its own range: rows of an earlier attempt of the key in it (a forced re-run,
# or a batch whose attempt died before cronwrap recorded it done) that this one does not see
# again (a payment corrected since) go; the rest are upserted.
DROP_STALE_IN_BATCH = """
DELETE FROM settlement_diffs
WHERE run_key = %(run_key)s AND order_id > %(after)s AND order_id <= %(through)s
  AND fence < %(fence)s
"""

# Idempotent, fenced: the same (run_key, order_id) is rewritten, never doubled, and only by a
# writer whose fence is not smaller than the one that wrote it (the trigger also checks the
# run key's registered fence, which covers brand-new rows).
UPSERT_DIFF = """
INSERT INTO settlement_diffs AS d (run_key, order_id, expected, actual, fence)
VALUES (%s, %s, %s, %s, %s)
ON CONFLICT (run_key, order_id) DO UPDATE SET
  expected = EXCLUDED.expected, actual = EXCLUDED.actual, fence = EXCLUDED.fence,
  recorded_at = now()
WHERE d.fence <= EXCLUDED.fence
"""

PROGRESS = """
UPDATE settlement_runs SET batches = greatest(batches, %(n)s), last_order_id = %(through)s,
  orders_count = greatest(orders_count, %(orders)s)
WHERE run_key = %(run_key)s AND fence = %(fence)s
"""

# After the last batch: rows beyond it (orders gone from the day since an earlier pass).
DROP_BEYOND = """
DELETE FROM settlement_diffs WHERE run_key = %(run_key)s AND order_id > %(last)s
  AND fence < %(fence)s
"""

SUCCEED = """
UPDATE settlement_runs SET status = 'succeeded', finished_at = now(), last_error = NULL,
  orders_count = %(orders)s, batches = %(batches)s, last_order_id = %(last)s,
  diff_count = (SELECT count(*) FROM settlement_diffs WHERE run_key = %(run_key)s)
WHERE run_key = %(run_key)s AND fence = %(fence)s
RETURNING diff_count
"""

FAIL = """
UPDATE settlement_runs SET status = 'failed', finished_at = now(), last_error = %(error)s
WHERE run_key = %(run_key)s AND fence <= %(fence)s AND status = 'running'
"""


class Signals:
    """TERM/INT/HUP while a batch runs: the batch (its own process, in the job's process group)
    gets the signal too and ends on its own, recording why; the driver waits for it, then ends."""

    caught: int | None = None

    @classmethod
    def note(cls, signum, frame):
        cls.caught = signum


def settle(conn: psycopg.Connection, job: dict, env) -> tuple[int, int, int, int]:
    """The driver: register, then each batch as a step of the slot. Returns orders, differences,
    batches and how many of those an earlier attempt had done."""
    batch_size = int(env.get("SETTLE_BATCH_SIZE") or 1000)
    fail_after = int(env.get("SETTLE_FAIL_AFTER_BATCHES") or 0)

    with conn.transaction():
        if conn.execute(REGISTER, job).fetchone() is None:
            raise Fenced("registration refused")

    last, orders, batches, earlier = "", 0, 0, 0
    while True:
        ids = [r[0] for r in conn.execute(BATCH_IDS, dict(job, last=last, limit=batch_size))]
        if not ids:
            break
        batches += 1
        orders += len(ids)
        done = run_batch(batches, last, ids[-1], orders)
        earlier += not done
        last = ids[-1]
        if fail_after and batches >= fail_after:
            say(f"SETTLE_FAIL_AFTER_BATCHES={fail_after}: crashing after batch {batches}")
            os.kill(os.getpid(), signal.SIGKILL)
        if len(ids) < batch_size:
            break

    with conn.transaction():
        if conn.execute(STILL_OURS, job).fetchone() is None:
            raise Fenced("before finishing")
        conn.execute(DROP_BEYOND, dict(job, last=last))
        (diff_count,) = conn.execute(SUCCEED, dict(job, orders=orders, batches=batches,
                                                   last=last or None)).fetchone()
    return orders, diff_count, batches, earlier


def run_batch(n: int, after: str, through: str, orders: int) -> bool:
    """Batch ``n`` (orders after ``after`` through ``through``) as step batch-NNNN of the slot:
    True when it ran now, False when an earlier attempt of the slot had done it (cronwrap step
    said so on stderr and ran nothing)."""
    argv = ["cronwrap", "step", f"batch-{n:04d}", "--", sys.executable, os.path.abspath(__file__),
            "--batch", str(n), "--after", after, "--through", through, "--orders", str(orders)]
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, Signals.note)
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE)
        out = proc.communicate()[0].decode()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, on_signal)
    sys.stdout.write(out)
    sys.stdout.flush()
    if Signals.caught is not None:
        raise Terminated(128 + Signals.caught)
    if proc.returncode == EX_SUPERSEDED:
        raise Fenced(f"cronwrap step refused batch {n}")
    if proc.returncode != 0:
        raise BatchFailed(proc.returncode)
    return bool(out)


class BatchFailed(Exception):
    """A batch ended with this exit status (it said why, and recorded the day failed)."""


def settle_batch(conn: psycopg.Connection, job: dict, env, n: int, after: str, through: str,
                 orders: int) -> None:
    """One batch, one transaction: fenced, compared, its range's differences rewritten."""
    delay = float(env.get("SETTLE_DOWNSTREAM_DELAY") or 0)
    batch = dict(job, n=n, after=after, through=through, orders=orders)
    with conn.transaction():
        if conn.execute(STILL_OURS, job).fetchone() is None:
            raise Fenced(f"before batch {n}")
        rows = conn.execute(ORDERS_BATCH, batch).fetchall()
        paid = dict(conn.execute(PAYMENTS_OF, {"delay": delay,
                                                "ids": [r[0] for r in rows]}).fetchall())
        diffs = [(job["run_key"], order_id, amount, paid.get(order_id), job["fence"])
                 for order_id, amount in rows if paid.get(order_id) != amount]
        conn.execute(DROP_STALE_IN_BATCH, batch)
        if diffs:
            with conn.cursor() as cur:
                cur.executemany(UPSERT_DIFF, diffs)
        conn.execute(PROGRESS, batch)
    print(f"batch {n}: {len(rows)} orders, {len(diffs)} differences", flush=True)


def record_failure(dsn: str, env, job: dict, error: str) -> None:
    """Best effort, on a fresh connection (the first may be broken): the result page must not
    show `running` for an attempt that is gone (seed: 不要让异常直接冒泡而不落状态)."""
    try:
        with psycopg.connect(dsn, connect_timeout=3, autocommit=True) as conn:
            conn.execute("SET statement_timeout = '5s'")
            conn.execute(FAIL, dict(job, error=error[:2000]))
    except psycopg.Error:
        pass


def describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return re.sub(r"://[^@/\s]*@", "://***@", text)  # never print a password from a DSN


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Reconcile CRONWRAP_BIZ_DATE's orders and "
                                     "payments; with --batch, one batch (what the driver runs "
                                     "through cronwrap step).")
    parser.add_argument("--batch", type=int, help="the batch's number (1, 2, …)")
    parser.add_argument("--after", default="", help="its orders come after this order id")
    parser.add_argument("--through", help="… up to this one, included")
    parser.add_argument("--orders", type=int, default=0, help="orders up to its end, in all")
    args = parser.parse_args(argv)
    if args.batch is not None and args.through is None:
        parser.error("--batch needs --through")
    return args


def main(argv: list[str] | None = None, env=os.environ) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    try:
        job = job_identity(env)
    except UsageError as exc:
        print(f"settle: {exc}", file=sys.stderr)
        return EX_USAGE
    dsn = env["SETTLE_DSN"]
    if args.batch is None:
        say(f"{job['biz_date']} run key {job['run_key']} (run {job['run_id']}, attempt "
            f"{job['attempt']}, fence {job['fence']}, host {job['host']})")
    started = time.monotonic()
    try:
        with connect(dsn, env) as conn:
            if args.batch is not None:
                settle_batch(conn, job, env, args.batch, args.after, args.through, args.orders)
                return EX_OK
            orders, diffs, batches, earlier = settle(conn, job, env)
    except Fenced as exc:
        print(f"settle: fenced out ({exc}): a newer attempt owns run key {job['run_key']}; "
              "stopped before writing more", file=sys.stderr)
        return EX_FENCED
    except BatchFailed as exc:  # the batch said why and recorded the day failed
        return exc.args[0]
    except Terminated as exc:
        record_failure(dsn, env, job, f"terminated by signal {exc.code - 128}")
        print(f"settle: terminated by signal {exc.code - 128}; the batch in flight was "
              "rolled back", file=sys.stderr)
        return exc.code
    except psycopg.Error as exc:
        if getattr(exc, "sqlstate", None) == FENCE_SQLSTATE:
            print(f"settle: fenced out: {describe(exc)}", file=sys.stderr)
            return EX_FENCED
        transient = isinstance(exc, TRANSIENT)
        message = f"{type(exc).__name__}: {describe(exc)}"
        record_failure(dsn, env, job, message)
        print(f"settle: {'transient' if transient else 'failed'}: {message}", file=sys.stderr)
        return EX_TEMPFAIL if transient else EX_SOFTWARE
    except Exception as exc:  # a bug or bad data: recorded, not retried (exit 70)
        import traceback

        traceback.print_exc()
        record_failure(dsn, env, job, f"{type(exc).__name__}: {describe(exc)}")
        return EX_SOFTWARE
    say(f"took {time.monotonic() - started:.2f}s")
    resumed = f" ({earlier} done by an earlier attempt)" if earlier else ""
    print(f"settled {job['biz_date']}: {orders} orders, {diffs} differences, {batches} "
          f"batches{resumed}", flush=True)
    return EX_OK


if __name__ == "__main__":
    sys.exit(main())
