"""Machine formats (issue 25 §3): what status --json, history --json, serve's /api/* and the
run log print is valid against the JSON Schemas that ship in the package (cronwrap/schemas/),
for runs of every kind, on SQLite and on a real PostgreSQL; the run log's lines carry level and
msg beside event."""

from __future__ import annotations

import json
from importlib import resources

import pytest
from jsonschema import Draft202012Validator

from tests.acceptance.dashboard import Server
from tests.conftest import CW


def schema(name: str) -> Draft202012Validator:
    text = resources.files("cronwrap").joinpath("schemas", f"{name}.json").read_text()
    loaded = json.loads(text)
    Draft202012Validator.check_schema(loaded)
    return Draft202012Validator(loaded)


def valid(name: str, value: object) -> None:
    errors = sorted(schema(name).iter_errors(value), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:5])


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def busy(request, cw: CW) -> CW:
    """A ledger with runs of every kind: succeeded, failed, warning, timeout, skipped, missed,
    manual, a host job, a paused job, an open alert."""
    if request.param == "postgres":
        dsn = request.getfixturevalue("pg_dsn")
        base = cw.env
        cw.env = lambda extra=None: {**base(extra), "CRONWRAP_DB": dsn}
    cw("run", "-n", "ok", "--schedule", "* * * * *", "--", "true", check_rc=0)
    cw("run", "-n", "bad", "--", "sh", "-c", "echo boom; exit 3")
    cw("run", "-n", "warn", "--warning-exit", "4", "--", "sh", "-c", "exit 4")
    cw("run", "-n", "slow", "--timeout", "0.2", "--", "sleep", "5")
    cw("run", "-n", "ok", "--schedule", "* * * * *", "--", "true", check_rc=0)  # a duplicate
    cw("run", "-n", "daily", "--schedule", "30 1 * * *", "--date", "2026-11-01", "--", "true",
       check_rc=0)
    cw("run", "-n", "local", "--scope", "host", "--host", "web1", "--", "true", check_rc=0)
    cw("pause", "daily", "--reason", "holiday", check_rc=0)
    cw("watch", "--once", "--notify", "true", check_rc=0)  # opens bad's failing alert
    return cw


def test_status_and_history_json_are_valid(busy):
    rows = busy.json("status", "--json")
    valid("status", rows)
    assert {r["format"] for r in rows} == {1}
    assert any(r["alerts"] for r in rows) and any(r["paused"] for r in rows)
    for row in rows:
        args = ["--host", row["host"]] if row["host"] else []
        runs = busy.json("history", row["job"], "--json", *args)
        valid("history", runs)
        assert runs and {r["format"] for r in runs} == {1}


def test_the_run_log_is_valid_and_says_level_and_msg(busy):
    lines = [json.loads(l) for l in (busy.home / "logs" / "events.jsonl").read_text()
             .splitlines()]
    assert len(lines) > 10
    for line in lines:
        valid("event", line)
    levels = {(e["event"], e.get("job")): e["level"] for e in lines}
    assert levels[("finish", "ok")] == "info"
    assert levels[("finish", "bad")] == "error" and levels[("timeout", "slow")] == "error"
    assert levels[("finish", "warn")] == "warning"
    finish = next(e for e in lines if e["event"] == "finish" and e["job"] == "bad")
    assert finish["msg"].startswith("bad: finish (run ") and "failed" in finish["msg"] \
        and "exit 3" in finish["msg"]


def test_serve_s_api_is_valid(busy):
    server = Server(busy)
    try:
        reply = server.fetch(server.url + "api/status")
        assert reply.status == 200
        valid("status", json.loads(reply.text))
        reply = server.fetch(server.url + "api/jobs/bad/history")
        assert reply.status == 200
        valid("history", json.loads(reply.text))
    finally:
        server.stop()
