"""The worked examples of examples/, end to end, with the cronwrap of today.

examples/reconciliation is the seed's daily reconciliation (SEED §7) done properly. Against a
real PostgreSQL, with "hosts" simulated as in test_multihost.py (each a cronwrap with its own
CRONWRAP_HOME and CRONWRAP_HOST, all sharing one CRONWRAP_DB), these tests prove the seed's
verification table (§7.4):

  并发触发 concurrent triggers      test_three_hosts_firing_together_settle_once
  中途 kill killed midway           test_runner_killed_midway_is_taken_over_after_its_lease_without_doubling
                                    (and resumed at the first unfinished batch: cronwrap step)
                                    test_job_crashing_midway_is_completed_by_a_rerun_without_doubling
  重复执行 running the day again    test_running_the_day_again_never_duplicates_differences
  下游超时 downstream timeout       test_downstream_timeout_is_recorded
                                    (transient, exit 75: test_statement_timeout_is_a_transient_failure_exit_75)
                                    (bounded retries, then failed: test_downstream_timeout_is_retried_a_bounded_number_of_times_then_failed)
  结果查询 result query             test_status_history_and_logs_show_state_duration_and_differences

The business tables and cronwrap's ledger share the test's database (cronwrap's tables are
cronwrap_*), as they may in production.

Every option of every example line must be in `cronwrap run --help`; a line is run with its
CLOCK_OPTIONS removed (see today_argv), since the test fires it now, not at its slot.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from datetime import date, datetime
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.acceptance.conftest import same_minute, wait_for
from tests.acceptance.hosts import Host as BaseHost, kill_runner
from tests.conftest import REPO, cronwrap_argv

EXAMPLES = REPO / "examples"
RECON = EXAMPLES / "reconciliation"
SETTLE = str(RECON / "settle.py")
SEED_DATA = str(RECON / "seed-data.py")
ORDERS, DIFFERENCES, BATCHES = 5000, 37, 5
# Without --schedule a firing's slot is its minute: a test whose firings must share a slot
# calls same_minute(margin) first, with a margin of about twice as long as its firings take
# in a clean-clone run (measured: the span from same_minute to the test's end), which a test
# of many firings keeps short by settling the day in fewer batches (SETTLE_BATCH_SIZE).

# Options whose effect depends on the wall clock (schedules, catch-up, manual slots) or on a
# real downstream (retries, hooks, pings). The example lines are run as written with these
# dropped (today_argv): `--schedule '30 1 * * *'` maps a firing to the 01:30 Asia/Shanghai
# slot, which a test firing "now" cannot be. Their behaviour is proven where the clock is set
# from outside: tests/acceptance/test_schedule.py (libfaketime) and test_operations.py; the
# bounded-retries row of the seed's table is test_downstream_timeout_is_retried_a_bounded_…
# below. backup/crontab and poller/crontab run exactly as written.
CLOCK_OPTIONS = {
    "--schedule": 4, "--tz": 4, "--key": 4, "--date": 4, "--at": 4,
    "--catchup": 4, "--catchup-window": 4, "--max-catchup": 4,
    "--retries": 5, "--retry-delay": 5, "--retry-max-delay": 5, "--retry-on": 5,
    "--max-attempts": 5, "--on-failure": 5, "--on-success": 5, "--ping": 5, "--alert-after": 5,
}


# -- helpers ---------------------------------------------------------------------------------

def job_path_env() -> dict[str, str]:
    """settle.py and seed-data.py start with `#!/usr/bin/env python3`: let that be this
    interpreter (the one with psycopg), as the venv's bin on PATH does under tests/run.sh."""
    return {"PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}


class Host(BaseHost):
    """A host whose jobs find this interpreter (and psycopg) first on PATH."""

    def env(self, extra=None):
        return super().env({**job_path_env(), **(extra or {})})


def local_today() -> date:
    """CRONWRAP_BIZ_DATE without --schedule: the firing minute's date in the local zone."""
    return datetime.now().astimezone().date()


class Recon:
    """examples/reconciliation on one test database."""

    def __init__(self, root: Path, dsn: str) -> None:
        import psycopg

        self.root, self.dsn = root, dsn
        self.env_file = root / "settle.env"
        # As settle.env.example, with the test's database.
        self.env_file.write_text(f"# test copy of settle.env.example\nSETTLE_DSN='{dsn}'\n")
        self.db = psycopg.connect(dsn, autocommit=True)

    def close(self) -> None:
        self.db.close()

    def hosts(self, *names: str) -> list[Host]:
        return [Host(self.root, n, self.dsn) for n in names]

    def seed(self, orders: int = ORDERS, differences: int = DIFFERENCES) -> date:
        """Schema + one day of data, for the day the next firing will see."""
        day = local_today()
        proc = subprocess.run([SEED_DATA, "--dsn", self.dsn, "--date", day.isoformat(),
                               "--orders", str(orders), "--differences", str(differences)],
                              capture_output=True, env={**os.environ, **job_path_env()}, timeout=60)
        assert proc.returncode == 0, proc.stderr.decode()
        assert proc.stdout.decode().startswith(f"seeded {day}: {orders} orders, {differences} differences")
        return day

    def run_args(self, *extra: str) -> list[str]:
        """The 01:30 line of examples/reconciliation/crontab, with today's options only, the
        test's env file and the checkout's settle.py; extra options go before `--`."""
        (line, *_) = crontab_commands(RECON / "crontab")
        argv = today_argv(line, {"/etc/settle/settle.env": str(self.env_file),
                                 "/opt/settle/settle.py": SETTLE})
        cut = argv.index("--")
        return [*argv[:cut], *extra, *argv[cut:]]

    def expected(self, day: date) -> set[tuple[str, Decimal, Decimal | None]]:
        """The differences, computed independently of settle.py."""
        rows = self.db.execute(
            "SELECT o.order_id, o.amount, p.amount FROM orders o LEFT JOIN payments p USING (order_id) "
            "WHERE o.biz_date = %s AND p.amount IS DISTINCT FROM o.amount", (day,)).fetchall()
        return set(rows)

    def diff_rows(self, run_key: str | None = None) -> list[tuple]:
        return self.db.execute(
            "SELECT order_id, expected, actual, fence, run_key FROM settlement_diffs "
            "WHERE %(k)s::text IS NULL OR run_key = %(k)s ORDER BY order_id", {"k": run_key}).fetchall()

    def diffs(self, run_key: str) -> set[tuple]:
        return {r[:3] for r in self.diff_rows(run_key)}

    def settlement(self) -> list[dict]:
        from psycopg.rows import dict_row

        with self.db.cursor(row_factory=dict_row) as cur:
            return cur.execute("SELECT * FROM settlement_report ORDER BY started_at").fetchall()

    def batches_committed(self) -> int:
        row = self.db.execute("SELECT max(batches) FROM settlement_runs").fetchone()
        return row[0] or 0

    def identity_env(self, run: dict, day: date) -> dict[str, str]:
        """What cronwrap handed to the attempt of ``run`` (for replaying a stale writer)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("CRONWRAP_")}
        env.update(job_path_env(), SETTLE_DSN=self.dsn, CRONWRAP_BIZ_DATE=day.isoformat(),
                   CRONWRAP_RUN_KEY=run["run_key"], CRONWRAP_RUN_ID=str(run["run_id"]),
                   CRONWRAP_FENCE=str(run["fence"]), CRONWRAP_ATTEMPT=str(run["attempt"]),
                   CRONWRAP_HOST=run["host"])
        return env


@pytest.fixture
def recon(tmp_path, pg_dsn):
    r = Recon(tmp_path, pg_dsn)
    yield r
    r.close()


def summary(day: date, differences: int = DIFFERENCES, batches: int = BATCHES) -> bytes:
    return f"settled {day}: {ORDERS} orders, {differences} differences, {batches} batches".encode()


# -- example lines ---------------------------------------------------------------------------

def crontab_commands(path: Path) -> list[str]:
    """The command of each job line of a crontab (5 time fields or @keyword), from `cronwrap`."""
    commands = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or re.match(r"^[A-Za-z_][A-Za-z0-9_]*\s*=", line):
            continue
        fields = line.split(None, 1 if line.startswith("@") else 5)
        command = fields[-1]
        commands.append(command[command.index("cronwrap "):])
    return commands


_TODAY: set[str] | None = None


def todays_options() -> set[str]:
    """The long options `cronwrap run --help` lists now."""
    global _TODAY
    if _TODAY is None:
        out = subprocess.run([*cronwrap_argv(), "run", "--help"], capture_output=True,
                             timeout=30).stdout.decode()
        _TODAY = set(re.findall(r"(?m)^\s*(?:-\w, )?(--[a-z][a-z-]*)", out)) | {"--help"}
        assert {"--timeout", "--lease", "--env-file", "--force"} <= _TODAY, out
    return _TODAY


def today_argv(command: str, paths: dict[str, str]) -> list[str]:
    """An example's `cronwrap run …` line as argv for CW (without `cronwrap`): the
    CLOCK_OPTIONS are dropped with their values, and the production paths are replaced by the
    test's."""
    words = shlex.split(command)
    assert words[:2] == ["cronwrap", "run"], words
    cut = words.index("--")
    options, job = words[2:cut], words[cut + 1:]
    kept, i = [], 0
    while i < len(options):
        word = options[i]
        name = word.split("=", 1)[0]
        if name in CLOCK_OPTIONS:
            i += 1 if "=" in word else 2
            continue
        kept.append(paths.get(word, word))
        i += 1
    return ["run", *kept, "--", *(paths.get(w, w) for w in job)]


def example_option_uses() -> list[tuple[str, str]]:
    """(file, --option) for every option of every `cronwrap run` line in examples/: crontabs,
    systemd units, READMEs and the CronJob's args."""
    uses = []
    for path in sorted(EXAMPLES.rglob("*")):
        if path.suffix in (".sh", ".py", ".sql") or not path.is_file():
            continue
        text = path.read_text().replace("\\\n", " ")
        rel = str(path.relative_to(EXAMPLES))
        if path.suffix == ".yaml":
            block = re.search(r"args:\n((?:\s+- .*\n)+)", text)
            assert block, rel
            items = [i.strip()[2:].strip().strip('"') for i in block.group(1).splitlines()]
            assert items[0] == "run" and "--" in items, items
            segments = [" ".join(items[1:items.index("--")])]
        else:
            segments = [m.group(1) for m in re.finditer(r"cronwrap run((?:(?! -- ).)*)", text)]
        for segment in segments:
            uses += [(rel, o) for o in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", segment)]
    return uses


def test_example_lines_use_only_real_options():
    uses = example_option_uses()
    files = {f for f, _ in uses}
    assert {"reconciliation/crontab", "reconciliation/settle.service", "reconciliation/cronjob.yaml",
            "reconciliation/README.md", "backup/crontab", "poller/crontab",
            "retries-and-alerts/crontab"} <= files, files
    unknown = sorted({(f, o) for f, o in uses if o not in todays_options()})
    assert not unknown, f"options not in `cronwrap run --help`: {unknown}"
    # The production lines of the three hosts are one line, with the settings the README names.
    daily, at_boot = crontab_commands(RECON / "crontab")
    assert at_boot == daily
    for needed in ("--schedule '30 1 * * *'", "--tz Asia/Shanghai", "--timeout", "--kill-after",
                   "--retries", "--catchup latest", "--catchup-window 6h"):
        assert needed in daily, needed


def test_settle_refuses_to_run_outside_cronwrap():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CRONWRAP_", "SETTLE_"))}
    proc = subprocess.run([SETTLE], env={**env, **job_path_env()}, capture_output=True, timeout=30)
    assert proc.returncode == 64 and b"run me under cronwrap" in proc.stderr
    # An unrecorded run (--on-db-error run-unrecorded) has fence 0: nothing to fence with.
    env.update(job_path_env(), SETTLE_DSN="postgresql://nowhere.invalid/x", CRONWRAP_BIZ_DATE="2026-10-28",
               CRONWRAP_RUN_KEY="k", CRONWRAP_RUN_ID="0", CRONWRAP_FENCE="0", CRONWRAP_ATTEMPT="1")
    proc = subprocess.run([SETTLE], env=env, capture_output=True, timeout=30)
    assert proc.returncode == 64 and b"fence 0" in proc.stderr


# -- the verification table (SEED §7.4) ------------------------------------------------------

@pytest.mark.postgres
def test_three_hosts_firing_together_settle_once(recon):
    """并发触发 → 只有一个实例执行: three hosts fire the same minute; one settles the day, once."""
    fleet = recon.hosts("app1", "app2", "app3")
    same_minute(20)  # 5.9 s in a clean-clone run
    day = recon.seed()
    procs = [h.popen(*recon.run_args()) for h in fleet]
    results = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], results
    assert results == [(b"", b"")] * 3  # --output on-failure: nothing to mail

    (run,) = fleet[0].json("history", "settle", "--json")
    settled = [run["host"]]
    assert (run["status"], run["attempt"]) == ("succeeded", 1)
    assert run["error_tail"].rstrip().endswith(summary(day).decode())
    started = [h.name for h in fleet if any(e["event"] == "start" for e in h.events())]
    assert started == settled
    (row,) = recon.settlement()
    assert (row["run_key"], row["run_id"], row["fence"], row["host"]) == (
        run["run_key"], run["run_id"], run["fence"], settled[0])
    assert (row["biz_date"], row["status"], row["diff_count"], row["attempts"]) == (
        day, "succeeded", DIFFERENCES, 1)
    assert (row["orders_count"], row["batches"]) == (ORDERS, BATCHES)
    # Each batch a step of the slot (cronwrap step), done once, by the one host.
    assert [(s["step"], s["attempt"], s["host"], s["status"]) for s in run["steps"]] == [
        (f"batch-{n:04d}", 1, settled[0], "succeeded") for n in range(1, BATCHES + 1)]
    assert recon.diffs(run["run_key"]) == recon.expected(day)
    assert len(recon.diff_rows()) == DIFFERENCES
    assert {r[3] for r in recon.diff_rows()} == {run["fence"]}
    others = [h for h in fleet if h.name != settled[0]]
    for h in others:
        (skip,) = [e for e in h.events() if e["event"] == "skip"]
        assert skip["run_key"] == run["run_key"]
        assert not [e for e in h.events() if e["event"] == "start"]


@pytest.mark.postgres
def test_runner_killed_midway_is_taken_over_after_its_lease_without_doubling(recon):
    """中途 kill → 锁过期后可接管: app1's wrapper and job are SIGKILLed after two committed
    batches; app2 takes the slot over once the lease ran out (attempt 2, larger fence) and the
    differences end up exactly once. The dead runner's fence is refused from then on."""
    a, b = recon.hosts("app1", "app2")
    same_minute(30)  # a 6 s lease: long enough that a loaded machine still sees it held
    day = recon.seed()
    runner = a.popen(*recon.run_args("--lease", "6"), env={"SETTLE_DOWNSTREAM_DELAY": "0.5"})
    wait_for(lambda: recon.batches_committed() >= 2, timeout=20, what="two committed batches")
    kill_runner(a, "settle", signal.SIGKILL)
    runner.wait(10)
    killed_at = time.monotonic()
    (first,) = a.json("history", "settle", "--json")
    partial = recon.diff_rows()
    assert 0 < len(partial) < DIFFERENCES
    assert {r[3] for r in partial} == {first["fence"]}

    # The lease is still held: app2 skips; once it has run out, app2 takes the slot over.
    attempt = b(*recon.run_args("--lease", "6", "--skip-exit-code", "99"))
    assert attempt.returncode == 99
    while attempt.returncode == 99:
        assert time.monotonic() - killed_at < 20, "never taken over"
        time.sleep(0.1)
        attempt = b(*recon.run_args("--lease", "6", "--skip-exit-code", "99"))
    assert attempt.returncode == 0, attempt.stdout
    (run,) = b.json("history", "settle", "--json")
    assert summary(day).decode() in run["error_tail"]
    assert (run["host"], run["attempt"], run["status"], run["run_key"]) == (
        "app2", 2, "succeeded", first["run_key"])
    assert run["fence"] > first["fence"]

    # It resumed at the first unfinished batch: the batches app1 had done (cronwrap step
    # recorded them) were not done again; app2 did the rest, each batch once.
    steps = [(s["step"], s["attempt"], s["host"], s["status"]) for s in run["steps"]]
    done_first = sum(1 for _, attempt, _, _ in steps if attempt == 1)
    assert 1 <= done_first < BATCHES
    assert steps == [(f"batch-{n:04d}", 1 if n <= done_first else 2,
                      "app1" if n <= done_first else "app2", "succeeded")
                     for n in range(1, BATCHES + 1)]
    assert f"({done_first} done by an earlier attempt)" in run["error_tail"]
    assert f"batch {done_first + 1}: " in run["error_tail"] and "batch 1: " not in run["error_tail"]

    (row,) = recon.settlement()
    assert (row["host"], row["fence"], row["attempts"], row["status"], row["diff_count"]) == (
        "app2", run["fence"], 2, "succeeded", DIFFERENCES)
    assert (row["orders_count"], row["batches"]) == (ORDERS, BATCHES)
    rows = recon.diff_rows()
    assert len(rows) == DIFFERENCES  # not DIFFERENCES + the partial batches
    assert {r[:3] for r in rows} == recon.expected(day)
    assert {r[3] for r in rows} <= {first["fence"], run["fence"]}  # each batch's own writer

    # The first runner "wakes up" (as a paused VM would) with its old identity: refused.
    stale = subprocess.run([SETTLE], env=recon.identity_env(first, day), capture_output=True, timeout=60)
    assert stale.returncode == 3 and b"fenced out" in stale.stderr, stale.stderr
    assert recon.diff_rows() == rows and recon.settlement()[0]["fence"] == run["fence"]
    # Any write with the old fence, even of a brand-new row, is rejected by the database.
    import psycopg

    with pytest.raises(psycopg.Error) as raised:
        recon.db.execute("INSERT INTO settlement_diffs (run_key, order_id, expected, actual, fence) "
                         "VALUES (%s, 'zzz', 1, 2, %s)", (first["run_key"], first["fence"]))
    assert raised.value.sqlstate == "SF001"
    with pytest.raises(psycopg.Error) as raised:
        recon.db.execute("UPDATE settlement_runs SET fence = %s, status = 'running'",
                         (first["fence"],))
    assert raised.value.sqlstate == "SF001"


@pytest.mark.postgres
def test_job_crashing_midway_is_completed_by_a_rerun_without_doubling(recon):
    """中途 kill, the job alone: settle.py dies (SIGKILL) after two batches while its wrapper
    lives. cronwrap records `killed`; the slot's partial rows stay; re-running the slot
    completes it with one set of differences."""
    (a,) = recon.hosts("app1")
    same_minute(30)  # 13.5 s in a clean-clone run
    day = recon.seed()
    proc = a(*recon.run_args(), env={"SETTLE_FAIL_AFTER_BATCHES": "2"})
    assert proc.returncode == 128 + signal.SIGKILL, proc.stdout
    assert b"crashing after batch 2" in proc.stdout  # replayed: --output on-failure
    (run,) = a.json("history", "settle", "--json")
    assert (run["status"], run["signal"], run["attempt"]) == ("killed", signal.SIGKILL, 1)
    assert b"crashing after batch 2" in run["error_tail"].encode()
    (row,) = recon.settlement()
    assert (row["status"], row["batches"]) == ("running", 2)  # the crash left no word of its own
    assert 0 < len(recon.diff_rows()) < DIFFERENCES

    # A person re-runs the slot (--force); --retries does it within one firing (test below).
    a(*recon.run_args("--force"), check_rc=0)
    (rerun,) = a.json("history", "settle", "--json")
    assert summary(day).decode() in rerun["error_tail"]
    assert (rerun["status"], rerun["attempt"], rerun["run_id"]) == ("succeeded", 2, run["run_id"])
    assert rerun["fence"] > run["fence"]
    rows = recon.diff_rows()
    assert len(rows) == DIFFERENCES and {r[:3] for r in rows} == recon.expected(day)
    assert {r[3] for r in rows} == {rerun["fence"]}


@pytest.mark.postgres
def test_running_the_day_again_never_duplicates_differences(recon):
    """重复执行 → 差异数不翻倍: the slot again is a no-op; --force re-settles the same keys,
    reflects a payment corrected meanwhile, and never adds a row."""
    a, b = recon.hosts("app1", "app2")
    # Four firings of one slot: the day in two batches, not five (27.5 s in a clean-clone run
    # with five, against the 12 s margin it had).
    halves = {"SETTLE_BATCH_SIZE": str(ORDERS // 2)}
    same_minute(30)
    day = recon.seed()
    a(*recon.run_args(), env=halves, check_rc=0)
    (first,) = a.json("history", "settle", "--json")
    assert summary(day, batches=2).decode() in first["error_tail"]

    # Fired again (another host, a duplicate crontab entry): the slot is done, nothing runs.
    b(*recon.run_args(), env=halves, check_rc=0)
    assert a.json("history", "settle", "--json") == [first]
    assert not [e for e in b.events() if e["event"] == "start"]

    # A person re-runs the day after finance corrected one payment.
    fixed = next(r for r in recon.diff_rows() if r[2] is not None)
    recon.db.execute("UPDATE payments SET amount = %s WHERE order_id = %s", (fixed[1], fixed[0]))
    b(*recon.run_args("--force"), env=halves, check_rc=0)
    (run,) = a.json("history", "settle", "--json")
    assert (run["host"], run["attempt"]) == ("app2", 2)
    assert summary(day, DIFFERENCES - 1, batches=2).decode() in run["error_tail"]
    # And once more, with nothing changed.
    a(*recon.run_args("--force"), env=halves, check_rc=0)

    (run,) = a.json("history", "settle", "--json")
    assert summary(day, DIFFERENCES - 1, batches=2).decode() in run["error_tail"]
    assert (run["attempt"], run["run_key"], run["status"]) == (3, first["run_key"], "succeeded")
    rows = recon.diff_rows()
    assert len(rows) == DIFFERENCES - 1
    assert len({r[0] for r in rows}) == len(rows)
    assert {r[:3] for r in rows} == recon.expected(day)
    assert {r[3] for r in rows} == {run["fence"]}  # the corrected order's stale row is gone
    (row,) = recon.settlement()
    assert (row["diff_count"], row["attempts"], row["fence"]) == (DIFFERENCES - 1, 3, run["fence"])


@pytest.mark.postgres
def test_downstream_timeout_is_recorded(recon):
    """下游超时: a payments query that never answers is ended by cronwrap --timeout (recorded
    `timeout`, the query cancelled in the server, the day marked failed)."""
    (a,) = recon.hosts("app1")
    recon.seed()
    # The downstream would take a minute. --timeout leaves the job room on a loaded machine:
    # its driver imports psycopg (5-6 s at load 30) and must register the day before TERM, or
    # there is no row to mark failed. After TERM the batch, cronwrap step and the driver end in
    # turn, the batch and the driver recording the day failed over a new connection: 2-3 s at
    # load 9, which outlasted --kill-after 2 in a loaded clean-clone run (137). What this test
    # says is that TERM is enough (no KILL), not how soon.
    start = time.monotonic()
    proc = a(*recon.run_args("--timeout", "15", "--kill-after", "30"),
             env={"SETTLE_DOWNSTREAM_DELAY": "60"})
    took = time.monotonic() - start
    assert proc.returncode == 124, proc.stdout  # TERM was enough: no KILL (137) needed
    assert b"terminated by signal 15" in proc.stdout  # replayed: --output on-failure
    assert took < 50  # not the downstream's 60 s
    (run,) = a.json("history", "settle", "--json")
    assert (run["status"], run["timed_out"], run["attempt"]) == ("timeout", True, 1)
    (row,) = recon.settlement()
    assert (row["status"], row["batches"], row["last_error"]) == ("failed", 0, "terminated by signal 15")
    assert recon.diff_rows() == []
    # psycopg cancelled the query on the way out: no backend still sleeping for us.
    wait_for(lambda: not recon.db.execute(
        "SELECT 1 FROM pg_stat_activity WHERE application_name LIKE 'settle %%' AND state = 'active'"
    ).fetchall(), timeout=5, what="the downstream query to be cancelled")


@pytest.mark.postgres
def test_statement_timeout_is_a_transient_failure_exit_75(recon):
    """The same slow downstream, cut by statement_timeout: a transient failure, exit 75, what
    --retry-on 75,timeout retries (test_downstream_timeout_is_retried_a_bounded_number_of_times_
    then_failed). A test of its own: as the second firing of the test above it had to fall in
    that firing's minute (its slot), which a loaded run's first firing could use up."""
    (a,) = recon.hosts("app1")
    recon.seed()
    proc = a(*recon.run_args("--timeout", "1m"),
             env={"SETTLE_DOWNSTREAM_DELAY": "30", "SETTLE_STATEMENT_TIMEOUT": "300ms"})
    assert proc.returncode == 75, proc.stdout
    assert b"transient" in proc.stdout and b"statement timeout" in proc.stdout
    (run,) = a.json("history", "settle", "--json")
    assert (run["status"], run["exit_code"], run["attempt"]) == ("failed", 75, 1)
    (row,) = recon.settlement()
    assert row["status"] == "failed" and "statement timeout" in row["last_error"]
    assert row["attempts"] == 1 and row["fence"] == run["fence"]


@pytest.mark.postgres
def test_status_history_and_logs_show_state_duration_and_differences(recon):
    """结果查询 → 状态与耗时可见: cronwrap status/history/logs and the settlement_report view."""
    (a,) = recon.hosts("app1")
    same_minute(15)  # 5.9 s in a clean-clone run
    day = recon.seed()
    a(*recon.run_args(), check_rc=0)
    line = summary(day).decode()

    (job,) = a.json("status", "--json")
    last = job["last_run"]
    assert (job["job"], job["health"], job["counts"].get("succeeded")) == ("settle", "ok", 1)
    assert job["last_success_at"] == last["finished_at"] and job["running"] == []
    assert (last["status"], last["exit_code"], last["host"], last["attempt"]) == ("succeeded", 0, "app1", 1)
    assert last["duration_ms"] > 0 and last["started_at"] and last["finished_at"]
    assert last["error_tail"].rstrip().endswith(line)  # the job's own summary: 37 differences

    (run,) = a.json("history", "settle", "--json")
    assert run["run_id"] == last["run_id"] and run["duration_ms"] == last["duration_ms"]
    logs = a("logs", "settle", "--last", check_rc=0).stdout.decode()
    assert line in logs and f"run {run['run_id']}, attempt 1, fence {run['fence']}" in logs
    table = a("status", check_rc=0).stdout.decode()
    assert "settle" in table and "succeeded" in table

    (row,) = recon.settlement()
    assert (row["biz_date"], row["status"], row["diff_count"], row["run_id"]) == (
        day, "succeeded", DIFFERENCES, run["run_id"])
    assert row["duration"].total_seconds() > 0 and row["finished_at"] > row["started_at"]


# -- short examples --------------------------------------------------------------------------

@pytest.mark.postgres
def test_backup_example(cw, tmp_path, pg_dsn):
    """examples/backup/crontab as written: silent on success, the output on failure, a
    previous backup of the day kept when a re-run fails."""
    import shutil

    out = tmp_path / "backups"
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("hello\n")
    env_file = tmp_path / "backup.env"
    database = pg_dsn if shutil.which("pg_dump") else ""
    env_file.write_text(f"BACKUP_DIR={out}\nBACKUP_DATABASE='{database}'\nBACKUP_PATHS={data}\n")
    (line,) = crontab_commands(EXAMPLES / "backup" / "crontab")
    argv = today_argv(line, {"/etc/backup/backup.env": str(env_file),
                             "/usr/local/lib/backup/backup.sh": str(EXAMPLES / "backup" / "backup.sh")})
    # Nothing dropped: the line runs as written.
    assert [w for w in argv if w.startswith("--")] == [
        "--timeout", "--kill-after", "--output", "--env-file", "--"]
    same_minute(6)
    proc = cw(*argv)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"" and proc.stderr == b""  # --output on-failure: a good night is quiet
    (day,) = [p for p in out.iterdir() if not p.name.startswith(".")]
    assert day.name == local_today().isoformat()
    names = sorted(p.name for p in day.iterdir())
    assert names == sorted(["SHA256SUMS", "files.tar.gz"] + (["database.dump"] if database else []))
    subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=day, check=True)
    first = (day / "files.tar.gz").read_bytes()

    # The same night again, but a path has gone: fails, shows why, keeps the good backup.
    env_file.write_text(env_file.read_text().replace(f"BACKUP_PATHS={data}", "BACKUP_PATHS=/nonexistent-dir"))
    proc = cw(*argv[:1], "--force", *argv[1:])
    assert proc.returncode != 0
    assert b"Cannot stat" in proc.stdout + proc.stderr  # replayed: on-failure
    assert (day / "files.tar.gz").read_bytes() == first
    assert [p.name for p in out.iterdir()] == [day.name]  # no partial directory left
    (run,) = cw.json("history", "backup", "--json")
    assert (run["status"], run["attempt"]) == ("failed", 2)


def handler_script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "handler"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def poller_argv(tmp_path: Path, handler: str) -> tuple[list[str], Path]:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    env_file = tmp_path / "poller.env"
    env_file.write_text(f"POLL_INBOX={inbox}\nPOLL_DONE={tmp_path / 'done'}\nPOLL_HANDLER={handler}\n")
    (line,) = crontab_commands(EXAMPLES / "poller" / "crontab")
    argv = today_argv(line, {"/etc/poller/poller.env": str(env_file),
                             "/usr/local/lib/poller/poll.sh": str(EXAMPLES / "poller" / "poll.sh")})
    return argv, inbox


def test_poller_example_skips_a_firing_while_a_poll_runs(cw, tmp_path):
    """examples/poller/crontab as written: a firing during a slow poll does nothing (overlap
    skip), and every file is handled exactly once."""
    log = tmp_path / "handled.log"
    argv, inbox = poller_argv(tmp_path, handler_script(
        tmp_path, f'sleep 0.5; echo "$(basename "$1")" >> {log}\n'))
    for n in range(3):
        (inbox / f"m{n}.json").write_text("{}\n")
        os.utime(inbox / f"m{n}.json", (1_000_000 + n, 1_000_000 + n))
    same_minute(8)
    first = cw.popen(*argv)
    wait_for(log.exists, what="the first file handled")
    start = time.monotonic()
    second = cw(*argv)
    assert second.returncode == 0 and time.monotonic() - start < 5
    assert first.wait(30) == 0
    assert log.read_text().split() == ["m0.json", "m1.json", "m2.json"]
    assert sorted(p.name for p in (tmp_path / "done").iterdir()) == ["m0.json", "m1.json", "m2.json"]
    assert list(inbox.iterdir()) == []
    events = [json.loads(l) for l in (cw.home / "logs" / "events.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events if e["event"] in ("start", "skip")] == ["start", "skip"]
    (run,) = [r for r in cw.json("history", "inbox-poller", "--json") if r["status"] != "skipped"]
    assert run["status"] == "succeeded"


def test_poller_example_gives_a_failed_file_back(cw, tmp_path):
    argv, inbox = poller_argv(tmp_path, handler_script(tmp_path, "echo cannot import >&2; exit 1\n"))
    (inbox / "bad.json").write_text("{}\n")
    proc = cw(*argv)
    assert proc.returncode == 75
    assert b"stays in the inbox" in proc.stdout + proc.stderr  # replayed: --output on-failure
    assert [p.name for p in inbox.iterdir()] == ["bad.json"]
    (run,) = cw.json("history", "inbox-poller", "--json")
    assert (run["status"], run["exit_code"]) == ("failed", 75)


class _Api(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self):
        body = b'{"CNY": 1}\n' if self.status == 200 else b"busy\n"
        self.send_response(self.status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_retries_example_script_exit_codes(cw, tmp_path):
    """retries-and-alerts: the line without its future options (today) runs fetch-rates.sh,
    whose exit status tells transient (75, what --retry-on 75 retries) from permanent (1)."""
    import shutil

    if not shutil.which("curl"):
        pytest.skip("fetch-rates.sh needs curl")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Api)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        out = tmp_path / "rates.json"
        env_file = tmp_path / "rates.env"
        env_file.write_text(f"RATES_URL=http://127.0.0.1:{server.server_port}/v1/rates\n"
                            f"RATES_OUT={out}\nRATES_MAX_TIME=5\n")
        (line,) = crontab_commands(EXAMPLES / "retries-and-alerts" / "crontab")
        argv = today_argv(line, {"/etc/rates/rates.env": str(env_file),
                                 "/usr/local/lib/rates/fetch-rates.sh":
                                     str(EXAMPLES / "retries-and-alerts" / "fetch-rates.sh")})
        assert not {w for w in argv if w in CLOCK_OPTIONS}
        assert {"--retries", "--retry-on", "--on-failure", "--ping"} <= set(shlex.split(line))
        outcomes = []
        for status in (503, 429, 404, 200):
            _Api.status = status
            proc = cw(*argv[:1], "--force", *argv[1:])
            outcomes.append(proc.returncode)
        assert outcomes == [75, 75, 1, 0]
        assert json.loads(out.read_text()) == {"CNY": 1}
        server.shutdown()
        server.server_close()
        proc = cw(*argv[:1], "--force", *argv[1:])  # connection refused: transient
        assert proc.returncode == 75 and b"transient network error" in proc.stdout + proc.stderr
        assert json.loads(out.read_text()) == {"CNY": 1}  # a failed fetch never clobbers the file
        (run,) = cw.json("history", "fx-rates", "--json")
        assert (run["status"], run["exit_code"]) == ("failed", 75)
    finally:
        server.server_close()


# 下游超时 → 有限重试后标记失败: the downstream times out on every attempt.
@pytest.mark.postgres
def test_downstream_timeout_is_retried_a_bounded_number_of_times_then_failed(recon):
    (a,) = recon.hosts("app1")
    same_minute(25)
    recon.seed()
    # Every attempt's payments query outlasts statement_timeout: exit 75, three times. (An
    # attempt starts three interpreters that import psycopg before its first batch's query:
    # the driver, cronwrap step, the batch. A 6 s --timeout cut the third attempt of a loaded
    # clean-clone run; the statement_timeout, not --timeout, is what ends each attempt here.)
    proc = a(*recon.run_args("--timeout", "1m", "--kill-after", "1", "--retries", "2",
                             "--retry-delay", "0.2s", "--retry-on", "75,timeout"),
             env={"SETTLE_DOWNSTREAM_DELAY": "30", "SETTLE_STATEMENT_TIMEOUT": "300ms"})
    assert proc.returncode == 75
    (run,) = a.json("history", "settle", "--json")
    assert (run["status"], run["attempt"], run["exit_code"]) == ("failed", 3, 75)
    retries = [e for e in a.events() if e["event"] == "retry"]
    assert [e["attempt"] for e in retries] == [1, 2]
    (row,) = recon.settlement()
    assert (row["status"], row["attempts"], row["fence"]) == ("failed", 3, run["fence"])
    assert "statement timeout" in row["last_error"] and recon.diff_rows() == []
