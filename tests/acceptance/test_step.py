"""``cronwrap step KEY -- CMD`` (issue 26 §1), through the installed executable, on a SQLite
ledger and on PostgreSQL: a step that succeeded is skipped by a later attempt of its slot,
recorded with its attempt, fence and host; a step of an attempt whose slot was taken over is
refused (exit 123); outside a run, one line and 125.

Each "host" is a cronwrap with its own CRONWRAP_HOME and CRONWRAP_HOST sharing one ledger.
"""

from __future__ import annotations

import os
import signal

import pytest

from cronwrap.errors import EXIT_CRONWRAP, EXIT_SUPERSEDED

from tests.acceptance.conftest import wait_for
from tests.acceptance.hosts import Host
from tests.conftest import until_exists

SLOT = ("--schedule", "30 1 * * *", "--tz", "UTC", "--date", "2026-10-28")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def ledger(request, tmp_path) -> str:
    if request.param == "postgres":
        return request.getfixturevalue("pg_dsn")
    return f"sqlite:///{tmp_path / 'shared.db'}"


def script(path, text: str) -> str:
    path.write_text("#!/bin/sh\n" + text)
    path.chmod(0o755)
    return str(path)


def test_a_step_done_is_skipped_by_the_next_attempt_and_recorded(tmp_path, ledger):
    app1, app2 = Host(tmp_path, "app1", ledger), Host(tmp_path, "app2", ledger)
    done = tmp_path / "done"
    job = script(tmp_path / "job.sh", f"""
cronwrap step extract -- sh -c 'echo extract $CRONWRAP_ATTEMPT >> {done}' || exit $?
cronwrap step --done extract; echo "asked $?" >> {done}
cronwrap step --done load; echo "asked load $?" >> {done}
cronwrap step load -- sh -c 'echo load $CRONWRAP_ATTEMPT >> {done}; [ -e {tmp_path}/fixed ]'
""")
    first = app1("run", "-n", "etl", *SLOT, "--", job)
    assert first.returncode == 1, first.stderr
    (tmp_path / "fixed").touch()
    second = app2("run", "-n", "etl", *SLOT, "--", job)  # the failed slot again, another host
    assert second.returncode == 0, second.stderr
    assert done.read_text().splitlines() == [
        "extract 1", "asked 0", "asked load 1", "load 1",
        "asked 0", "asked load 1", "load 2"]  # extract ran once, load again
    skipped = [l for l in second.stderr.decode().splitlines() if "extract" in l]
    assert len(skipped) == 1 and "already succeeded in this slot (attempt 1 on app1" in skipped[0]
    (run,) = app1.json("history", "etl", "--json")
    steps = {s["step"]: s for s in run["steps"]}
    assert [s["step"] for s in run["steps"]] == ["extract", "load"]
    assert {k: steps["extract"][k] for k in ("status", "attempt", "host", "exit_code")} == \
        {"status": "succeeded", "attempt": 1, "host": "app1", "exit_code": 0}
    assert {k: steps["load"][k] for k in ("status", "attempt", "host", "exit_code", "fence")} == \
        {"status": "succeeded", "attempt": 2, "host": "app2", "exit_code": 0,
         "fence": run["fence"]}
    assert steps["load"]["finished_at"] >= steps["load"]["started_at"]
    table = app1("history", "etl", check_rc=0).stdout.decode()
    assert "step extract" in table and "step load" in table

    # --force on the step runs it again; run --force runs every step again.
    third = app1("run", "-n", "etl", *SLOT, "--force", "--", "sh", "-c",
                 f"cronwrap step extract -- sh -c 'echo forced $CRONWRAP_ATTEMPT >> {done}' && "
                 f"cronwrap step extract --force -- sh -c 'echo again >> {done}'")
    assert third.returncode == 0, third.stderr
    assert done.read_text().splitlines()[-2:] == ["forced 3", "again"]


def test_step_outside_a_run_and_bad_words_fail_with_one_line(cw, tmp_path):
    outside = cw("step", "a", "--", "touch", str(tmp_path / "ran"))
    assert outside.returncode == EXIT_CRONWRAP and not (tmp_path / "ran").exists()
    assert outside.stderr.decode().count("\n") == 1 and "not inside a run" in outside.stderr.decode()
    for words in (["--done", "a", "--", "true"], ["a"], ["bad\tkey", "--", "true"]):
        proc = cw("step", *words)
        assert proc.returncode == EXIT_CRONWRAP, (words, proc.stderr)
        assert proc.stderr.decode().count("\n") == 1, proc.stderr
    asked = cw("run", "-n", "q", "--", "cronwrap", "step", "--done", "never")
    assert asked.returncode == 1


def test_a_step_of_a_taken_over_attempt_is_refused(tmp_path, ledger):
    """app1's wrapper is stopped mid-job (it cannot renew its lease); app2 takes the slot over
    and does the step app1 had not done; app1's job, going on, is refused that step (123)."""
    app1, app2 = Host(tmp_path, "app1", ledger), Host(tmp_path, "app2", ledger)
    out, go = tmp_path / "out", tmp_path / "go"
    job = script(tmp_path / "job.sh", f"""
cronwrap step one -- sh -c 'echo one $CRONWRAP_HOST >> {out}' || exit $?
[ "$CRONWRAP_HOST" = app1 ] && {until_exists(go)}
cronwrap step two -- sh -c 'echo two $CRONWRAP_HOST >> {out}'
status=$?
echo "$CRONWRAP_HOST step two: $status" >> {out}
exit $status
""")
    # 3 s, not 1 s: app1 must keep its lease, renewed from a thread, while its job starts
    # `cronwrap step one` on a loaded machine, until the test stops its wrapper.
    runner = app1.popen("run", "-n", "settle", *SLOT, "--lease", "3s", "--", job)
    wait_for(lambda: out.exists() and "one app1" in out.read_text(), what="step one")
    wrapper = app1.lock_holder("settle")[0]
    os.kill(wrapper, signal.SIGSTOP)  # no more renewals: the lease runs out
    try:
        wait_for(lambda: app2.json("history", "settle", "--json")[0]["status"] == "abandoned",
                 timeout=20, what="the lease to run out")
        taken = app2("run", "-n", "settle", *SLOT, "--", job)
        assert taken.returncode == 0, taken.stderr
        go.touch()
        wait_for(lambda: "app1 step two" in out.read_text(), what="app1's refused step")
    finally:
        os.kill(wrapper, signal.SIGCONT)
    assert runner.wait(30) == EXIT_SUPERSEDED
    lines = out.read_text().splitlines()
    assert lines == ["one app1", "two app2", "app2 step two: 0", f"app1 step two: {EXIT_SUPERSEDED}"]
    err = runner.stderr.read().decode()
    refusal = [l for l in err.splitlines() if "step two" in l]
    assert len(refusal) == 1 and "taken over by attempt 2 on app2" in refusal[0], err
    (run,) = app2.json("history", "settle", "--json")
    assert [(s["step"], s["attempt"], s["host"], s["status"]) for s in run["steps"]] == [
        ("one", 1, "app1", "succeeded"), ("two", 2, "app2", "succeeded")]


@pytest.mark.postgres
def test_the_ledgers_password_reaches_the_job_and_nothing_cronwrap_keeps_or_prints(cw, tmp_path, pg_dsn):
    """CRONWRAP_LEDGER carries the URL as given, password included (the server trusts the
    test, so it is only carried): the job's steps can use it, and no output cronwrap keeps or
    replays, no run log, no message of cronwrap's shows it."""
    secret = "s3cret-Passw0rd"
    url = pg_dsn.replace("@", f":{secret}@", 1)
    job = script(tmp_path / "job.sh", """
cronwrap step a -- sh -c 'echo "the ledger: $CRONWRAP_LEDGER"'
CRONWRAP_RUN_KEY=another cronwrap step b -- true
exit 4
""")
    proc = cw("run", "-n", "pw", "--db", url, "--output", "on-failure", "--", job)
    assert proc.returncode == 4
    shown = proc.stdout.decode() + proc.stderr.decode()
    assert "the ledger: postgresql://" in shown and "no run" in shown
    kept = [shown, cw("history", "pw", "--json", "--db", url, check_rc=0).stdout.decode(),
            cw("logs", "pw", "--db", url, check_rc=0).stdout.decode()]
    kept += [p.read_text(errors="replace") for p in (tmp_path / "cwhome").rglob("*") if p.is_file()
             and p.suffix != ".db"]
    assert not [text for text in kept if secret in text]
