"""Jobs that belong to one host (issue 22 §1): ``--scope host`` runs once per slot on each
host sharing the ledger, each host's runs a job of their own (slots, overlap, catch-up,
health); ``status``, ``history``, ``logs``, ``--check``, Prometheus and ``serve`` show them
as NAME@HOST and filter by ``--host``. ``--scope fleet`` (the default) stays one run per slot.

Three simulated hosts (their own CRONWRAP_HOST and CRONWRAP_HOME) share one ledger: a SQLite
file, then a real PostgreSQL.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.acceptance.hosts import Host
from tests.conftest import until_exists

HOSTS = ("web1", "web2", "web3")
# One slot per hour, so that three firings in a row share it whatever minute each starts in.
HOURLY = ["--schedule", "* * * * *", "--tz", "UTC", "--key", "%Y-%m-%dT%H"]


def same_hour(margin: float = 120) -> None:
    left = 3600 - time.time() % 3600
    if left < margin:
        time.sleep(left + 0.1)


@pytest.fixture(params=["sqlite", "postgres"])
def fleet(request, tmp_path: Path) -> dict[str, Host]:
    dsn = (request.getfixturevalue("pg_dsn") if request.param == "postgres"
           else f"sqlite:///{tmp_path / 'shared.db'}")
    return {name: Host(tmp_path, name, dsn) for name in HOSTS}


def fire(fleet: dict[str, Host], tmp_path: Path, name: str, *options: str,
         env: dict[str, dict[str, str]] | None = None) -> None:
    """Each host fires the job once: it appends its host to ran-NAME, and fails on web2."""
    out = tmp_path / f"ran-{name}"
    for host in fleet.values():
        host("run", "-n", name, *HOURLY, *options, "--", "sh", "-c",
             f'echo "$CRONWRAP_HOST $CRONWRAP_JOB" >> {out}; echo output of $CRONWRAP_HOST; '
             'test "$CRONWRAP_HOST" != web2', env=(env or {}).get(host.name), check_rc=None)


def ran(tmp_path: Path, name: str) -> list[str]:
    path = tmp_path / f"ran-{name}"
    return sorted(path.read_text().splitlines()) if path.exists() else []


def test_a_host_scoped_job_runs_once_per_slot_on_every_host_a_fleet_job_once(fleet, tmp_path):
    same_hour()
    fire(fleet, tmp_path, "rotate", "--scope", "host",
         env={"web3": {}})  # the option on every host
    fire(fleet, tmp_path, "settle")  # the default scope: fleet
    # CRONWRAP_SCOPE does what --scope does
    out = tmp_path / "ran-cleanup"
    for host in fleet.values():
        host("run", "-n", "cleanup", *HOURLY, "--", "sh", "-c", f"echo $CRONWRAP_HOST >> {out}",
             env={"CRONWRAP_SCOPE": "host"}, check_rc=0)

    assert ran(tmp_path, "rotate") == ["web1 rotate", "web2 rotate", "web3 rotate"]
    assert len(ran(tmp_path, "settle")) == 1  # one host of three ran the fleet job's slot
    assert ran(tmp_path, "cleanup") == ["web1", "web2", "web3"]

    rows = {(r["job"], r["host"]): r for r in fleet["web1"].json("status", "--json")}
    assert set(rows) == {("rotate", h) for h in HOSTS} | {("cleanup", h) for h in HOSTS} \
        | {("settle", None)}
    assert rows[("settle", None)]["scope"] == "fleet"
    assert {rows[("rotate", h)]["scope"] for h in HOSTS} == {"host"}
    assert rows[("rotate", "web2")]["last_run"]["status"] == "failed"
    assert rows[("rotate", "web1")]["last_run"]["status"] == "succeeded"
    assert rows[("rotate", "web1")]["last_run"]["host"] == "web1"
    assert rows[("rotate", "web2")]["health"] == "critical"
    assert rows[("rotate", "web3")]["health"] == "ok"

    table = fleet["web1"]("status", check_rc=0).stdout.decode()
    for h in HOSTS:
        assert f"rotate@{h}" in table
    assert "\\x1f" not in table and "\x1f" not in table

    # --host: only that host's rows of host-scoped jobs (fleet jobs belong to no one host)
    only = fleet["web1"].json("status", "--json", "--host", "web3")
    assert sorted((r["job"], r["host"]) for r in only) == [("cleanup", "web3"), ("rotate", "web3")]
    assert [r["host"] for r in fleet["web1"].json("status", "rotate", "--json")] == list(HOSTS)


def test_check_history_logs_and_metrics_per_host(fleet, tmp_path):
    same_hour()
    fire(fleet, tmp_path, "rotate", "--scope", "host")
    web1, web3 = fleet["web1"], fleet["web3"]

    # a per-host --check: each host's Nagios asks about its own runs
    ok = web1("status", "--check", "--host", "web1")
    assert ok.returncode == 0, ok.stdout
    assert ok.stdout.startswith(b"CRONWRAP OK - 1 ok")
    bad = web1("status", "--check", "--host", "web2")
    assert bad.returncode == 2, bad.stdout
    assert b"rotate@web2 " in bad.stdout and b"web1" not in bad.stdout
    assert web1("status", "--check", "rotate").returncode == 2  # every host's, web2's failed

    # history and logs: this host's runs by default, another's with --host
    mine = web3.json("history", "rotate", "--json")
    assert [(r["job"], r["host"], r["status"]) for r in mine] == [("rotate", "web3", "succeeded")]
    theirs = web3.json("history", "rotate", "--json", "--host", "web2")
    assert [(r["job"], r["host"], r["status"]) for r in theirs] == [("rotate", "web2", "failed")]
    assert web1("logs", "rotate", check_rc=0).stdout == b"output of web1\n"
    assert web1("logs", "rotate", "--host", "web1", check_rc=0).stdout == b"output of web1\n"

    # a host where the job has not run: it must be told which
    admin = Host(tmp_path, "admin", web1.dsn)
    lost = admin("history", "rotate")
    assert lost.returncode == 125
    assert lost.stderr.decode().count("\n") == 1
    assert "--host" in lost.stderr.decode() and "web1, web2, web3" in lost.stderr.decode()
    nowhere = admin("history", "rotate", "--host", "db9")
    assert nowhere.returncode == 125 and b"no runs on host 'db9'" in nowhere.stderr

    # --host of a fleet job is refused: its runs are every host's
    fire(fleet, tmp_path, "settle")
    refused = web1("history", "settle", "--host", "web1")
    assert refused.returncode == 125 and b"fleet job" in refused.stderr

    # Prometheus: one series per host, labelled host
    metrics = web1("status", "--format", "prometheus", check_rc=0).stdout.decode()
    for h, health in (("web1", 0), ("web2", 2), ("web3", 0)):
        assert f'cronwrap_health{{cronjob="rotate",host="{h}"}} {health}' in metrics
    assert 'cronwrap_runs_total{cronjob="rotate",host="web2",status="failed"} 1' in metrics
    assert 'cronwrap_health{cronjob="settle"}' in metrics  # a fleet job's series has no host


def test_a_host_s_share_is_a_job_of_its_own_overlap_and_slots(fleet, tmp_path):
    """A long run on web1 does not make web2's firing an overlap, and web1's next firing in
    the slot is a duplicate only of web1's own run."""
    same_hour()
    web1, web2 = fleet["web1"], fleet["web2"]
    gate = tmp_path / "gate"
    long = web1.popen("run", "-n", "backup", "--scope", "host", *HOURLY, "--", "sh", "-c",
                      until_exists(gate))
    try:
        deadline = time.time() + 30
        while not [r for r in web1.json("status", "--json") if r["running"]]:
            assert time.time() < deadline and long.poll() is None, long.stderr.read()
            time.sleep(0.1)
        other = web2("run", "-n", "backup", "--scope", "host", *HOURLY, "--", "true")
        assert other.returncode == 0
        again = web1("run", "-n", "backup", "--scope", "host", *HOURLY, "--", "true")
        assert again.returncode == 0  # skipped: web1's own run holds the slot
    finally:
        gate.touch()
        long.wait(30)
    by_host = {r["host"]: r for r in web1.json("status", "--json", "backup")}
    assert by_host["web2"]["last_run"]["status"] == "succeeded"
    assert by_host["web1"]["last_run"]["status"] == "succeeded"
    assert by_host["web1"]["counts"].get("succeeded") == 1


def test_wrap_writes_the_scope_into_every_line(cw):
    crontab = b"0 3 * * * /usr/local/bin/backup --full\n*/5 * * * * find /tmp -delete\n"
    out = cw("wrap", "-", "--", "--scope", "host", input=crontab, check_rc=0).stdout.decode()
    lines = [l for l in out.splitlines() if l and not l.startswith("#")]
    assert len(lines) == 2 and all("--scope host" in l for l in lines), out


def test_a_scope_that_is_not_one_is_refused(cw):
    bad = cw("run", "-n", "x", "--scope", "hosts", "--", "true")
    assert bad.returncode == 125
    assert bad.stderr.decode().strip() == \
        "cronwrap: --scope: 'hosts' is not one of fleet, host"


def test_serve_shows_and_filters_by_host(fleet, tmp_path):
    """serve's API and metrics: a host's share as its own row; ?host=HOST filters."""
    from tests.acceptance.dashboard import Server

    same_hour()
    fire(fleet, tmp_path, "rotate", "--scope", "host")
    board = Server(fleet["web1"])
    try:
        def get(path: str) -> str:
            reply = board.fetch(board.url + path)
            assert reply.status == 200, (path, reply.status, reply.text[:500])
            return reply.text

        rows = json.loads(get("api/status"))
        assert sorted((r["job"], r["host"]) for r in rows) == [("rotate", h) for h in HOSTS]
        only = json.loads(get("api/status?host=web2"))
        assert [(r["job"], r["host"], r["health"]) for r in only] == [("rotate", "web2", "critical")]
        assert 'host="web1"' not in get("metrics?host=web2")
        assert 'cronwrap_health{cronjob="rotate",host="web2"} 2' in get("metrics")
        history = json.loads(get("api/jobs/rotate/history?host=web2"))
        assert [(r["host"], r["status"]) for r in history] == [("web2", "failed")]
        page = get("")
        assert "rotate@web2" in page and "jobs/rotate%1Fweb2" in page
        assert "<h1>rotate@web3</h1>" in get("jobs/rotate%1Fweb3")
        assert "<h1>rotate@web3</h1>" in get("jobs/rotate?host=web3")
    finally:
        board.stop()
