"""What a job cost, and a limit (issue 26 §2), through the installed executable on SQLite and
PostgreSQL: each attempt records its tree's CPU time and peak memory, daemons that left the
session included; --max-memory and --max-cpu end the tree, recorded killed with their reason.
The figures are checked against what the job was made to do, with wide bounds (no timing)."""

from __future__ import annotations

import sys

import pytest

from tests.conftest import CW

MIB = 1024

# A double-forked daemon: the job's shell exits at once; its grandchild leaves the session
# (setsid), allocates and touches 120 MiB, burns ~0.4 s of CPU, writes a mark, exits.
DAEMON = r"""
import os, sys, time
if os.fork():
    os._exit(0)
os.setsid()
if os.fork():
    os._exit(0)
block = bytearray(120 * 1024 * 1024)
for i in range(0, len(block), 4096):
    block[i] = 1
start = time.process_time()
while time.process_time() - start < 0.4:
    pass
open(sys.argv[1], "w").write("done")
"""

# Allocates 10 MiB at a time, touched, until something stops it (at most ~2 GiB).
GROW = r"""
import time
held = []
for _ in range(200):
    block = bytearray(10 * 1024 * 1024)
    for i in range(0, len(block), 4096):
        block[i] = 1
    held.append(block)
    time.sleep(0.02)
"""


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def ledger_cw(request, cw: CW) -> CW:
    if request.param == "postgres":
        dsn = request.getfixturevalue("pg_dsn")
        base = cw.env
        cw.env = lambda extra=None: {**base(extra), "CRONWRAP_DB": dsn}
    return cw


def last(cw: CW, job: str) -> dict:
    runs = cw.json("history", job, "--json")
    return runs[0]


def test_a_tree_with_a_daemonised_grandchild_records_its_cpu_and_memory(ledger_cw, tmp_path):
    cw = ledger_cw
    mark = tmp_path / "mark"
    # The job's shell starts the daemon (which re-parents to the keeper, the tree's
    # subreaper, and is reaped by it) and waits for its mark: the daemon's usage is the tree's.
    script = '"$0" -c "$1" "$2"; until [ -f "$2" ]; do sleep 0.05; done; sleep 0.2'
    cw("run", "-n", "daemon", "--", "sh", "-c", script, sys.executable, DAEMON, str(mark),
       check_rc=0)
    cw("run", "-n", "small", "--", "true", check_rc=0)
    run = last(cw, "daemon")
    if run["max_rss_kb"] is None:
        pytest.fail(f"no usage recorded: {run}")
    assert mark.read_text() == "done"  # the daemon ran to its end under the keeper
    assert run["cpu_user_ms"] + run["cpu_system_ms"] >= 350, run
    assert 120 * MIB <= run["max_rss_kb"] < 400 * MIB, run
    small = last(cw, "small")
    assert small["max_rss_kb"] < 100 * MIB and small["cpu_user_ms"] < 350, small
    # status NAME and history show them; status --json's last run and the metrics carry them
    shown = cw("history", "daemon", check_rc=0).stdout.decode()
    assert "MiB" in shown and "CPU+SYS MEM" in shown
    status = {r["job"]: r for r in cw.json("status", "--json")}
    assert status["daemon"]["last_run"]["max_rss_kb"] == run["max_rss_kb"]
    metrics = cw("status", "--format", "prometheus", check_rc=0).stdout.decode()
    assert f'cronwrap_last_run_max_rss_bytes{{cronjob="daemon"}} {run["max_rss_kb"] * 1024}' \
        in metrics
    assert 'cronwrap_last_run_cpu_seconds{cronjob="daemon",mode="user"}' in metrics


def test_max_memory_ends_a_job_that_allocates_past_it(ledger_cw):
    cw = ledger_cw
    proc = cw("run", "-n", "grow", "--max-memory", "150M", "--kill-after", "2s", "--",
              sys.executable, "-c", GROW)
    assert proc.returncode == 143, (proc.returncode, proc.stderr)  # ended by TERM: 128+15
    assert b"over --max-memory 150.0 MiB" in proc.stderr
    run = last(cw, "grow")
    assert (run["status"], run["skip_reason"], run["exit_code"]) == ("killed", "memory", 143)
    assert 150 * MIB <= run["max_rss_kb"] < 1024 * MIB, run  # it went over, not far over
    status = {r["job"]: r for r in cw.json("status", "--json")}
    assert status["grow"]["health"] == "critical"


def test_max_cpu_ends_a_job_that_burns_past_it_and_kill_follows_a_trapped_term(ledger_cw):
    cw = ledger_cw
    # The shell ignores TERM: KILL follows after --kill-after, and the status says it (137).
    proc = cw("run", "-n", "burn", "--max-cpu", "0.5", "--kill-after", "0.5", "--",
              "sh", "-c", "trap '' TERM; while :; do :; done")
    assert proc.returncode == 137, (proc.returncode, proc.stderr)
    assert b"over --max-cpu 0.5s" in proc.stderr
    run = last(cw, "burn")
    assert (run["status"], run["skip_reason"], run["exit_code"]) == ("killed", "cpu", 137)
    assert run["cpu_user_ms"] + run["cpu_system_ms"] >= 500, run


def test_limits_refuse_bad_values(cw):
    for args, message in ((("--max-memory", "lots"), b"--max-memory: 'lots' is not a size"),
                          (("--max-cpu", "soon"), b"--max-cpu: "),
                          (("--memory-factor", "0.5"), b"--memory-factor: '0.5' is not a factor")):
        proc = cw("run", "-n", "bad", *args, "--", "true")
        assert proc.returncode == 125 and message in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1


def test_memory_factor_flags_a_run_whose_peak_is_over_f_times_its_usual(cw):
    small = [sys.executable, "-c", "pass"]
    daily = ("-n", "mem", "--memory-factor", "3", "--schedule", "0 3 * * *", "--tz", "UTC")
    for day in range(1, 6):  # five slots, each a run of its own
        cw("run", *daily, "--date", f"2026-03-0{day}", "--", *small, check_rc=0)
    report = {r["job"]: r for r in cw.json("status", "--json")}["mem"]
    assert report["health"] == "ok", report
    big = [sys.executable, "-c", "b = bytearray(300 * 1024 * 1024)\n"
           "for i in range(0, len(b), 4096): b[i] = 1"]
    cw("run", *daily, "--date", "2026-03-06", "--", *big, check_rc=0)
    report = {r["job"]: r for r in cw.json("status", "--json")}["mem"]
    assert report["health"] == "warning" and report["why"].startswith("memory: peak "), report
    assert "more than 3x its usual p95" in report["why"]
