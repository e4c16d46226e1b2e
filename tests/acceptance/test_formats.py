"""Machine formats (issue 25 §3): what status --json, history --json, serve's /api/* and the
run log print is valid against the JSON Schemas that ship in the package (cronwrap/schemas/),
for runs of every kind, on SQLite and on a real PostgreSQL; the run log's lines carry level and
msg beside event."""

from __future__ import annotations

import json
import os
import re
import sys
from datetime import datetime, timezone
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


# -- logs --timestamps (issue 25 §3) -----------------------------------------------------------

STAMP = re.compile(rb"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z (.*)$", re.S)


def stamped_lines(text: bytes) -> list[tuple[datetime, bytes]]:
    """Each line of ``logs --timestamps`` as (its time, the line as the job wrote it)."""
    found = []
    for line in text.splitlines(keepends=True):
        match = STAMP.match(line)
        assert match, line[:80]
        found.append((datetime.fromisoformat(match[1].decode()).replace(tzinfo=timezone.utc),
                      match[2]))
    return found


def test_logs_timestamps_each_line_with_when_it_came_and_keeps_the_capture_exact(cw, home):
    """Lines written 0.3 s apart carry times that far apart, within the run; the capture and
    plain `logs` are the job's bytes; a line split across two writes has one time."""
    before = datetime.now(timezone.utc).replace(microsecond=0)
    job = "printf 'one\\n'; sleep 0.3; printf 'tw'; sleep 0.3; printf 'o\\nthree\\n\\n'; printf 'end'"
    cw("run", "-n", "ts", "--timestamps", "--", "sh", "-c", job, check_rc=0)
    after = datetime.now(timezone.utc)
    exact = b"one\ntwo\nthree\n\nend"
    assert cw("logs", "ts", check_rc=0).stdout == exact
    [capture] = (home / "logs" / "ts").glob("*.log")
    assert capture.read_bytes() == exact
    assert capture.with_suffix(".times").stat().st_mode & 0o077 == 0
    lines = stamped_lines(cw("logs", "ts", "-t", check_rc=0).stdout)
    assert b"".join(text for _, text in lines) == exact
    times = [t for t, _ in lines]
    assert times == sorted(times) and before <= times[0] and times[-1] <= after
    assert (times[1] - times[0]).total_seconds() >= 0.25  # "two" began 0.3 s after "one"
    assert times[2] - times[1] < (times[1] - times[0])  # "three" came with the end of "two"


def test_logs_timestamps_of_a_run_captured_without_them_is_one_line_125(cw):
    cw("run", "-n", "plain", "--", "echo", "hi", check_rc=0)
    proc = cw("logs", "plain", "--timestamps")
    assert proc.returncode == 125 and proc.stdout == b""
    assert proc.stderr.count(b"\n") == 1 and b"captured without --timestamps" in proc.stderr


def test_timestamps_cover_a_truncated_capture_s_tail_and_go_with_its_output(cw, home):
    """9 MiB of lines (past the 8 MiB head): the kept tail's lines are stamped too, one time a
    line; the environment turns it on; --keep-logs removes the times file with the capture."""
    job = ("import sys, time\n"
           "w = sys.stdout.buffer.write\n"
           "for i in range(90): w(b'%05d ' % i + b'x' * 104857 + b'\\n'); sys.stdout.flush()\n"
           "time.sleep(0.2)\n"
           "w(b'last\\n')\n")
    cw("run", "-n", "big", "--output", "quiet", "--", sys.executable, "-c", job,
       env={"CRONWRAP_TIMESTAMPS": "1"}, check_rc=0)
    lines = stamped_lines(cw("logs", "big", "-t", check_rc=0).stdout)
    assert lines[0][1].startswith(b"00000 ") and lines[-1][1] == b"last\n"
    assert any(b"bytes omitted" in text for _, text in lines)
    assert (lines[-1][0] - lines[-2][0]).total_seconds() >= 0.15  # the tail's own times
    [capture] = (home / "logs" / "big").glob("*.log")
    times = capture.with_suffix(".times")
    for old in (capture, times, capture.parent / ".oldest"):  # the marker: the oldest file's date
        os.utime(old, (0, 0))
    cw("run", "-n", "big", "--force", "--keep-logs", "1d", "--", "true", check_rc=0)
    assert not capture.exists() and not times.exists()


def test_a_times_file_planted_as_a_symlink_is_refused_and_the_output_still_captured(cw, home,
                                                                                     tmp_path):
    target = tmp_path / "precious"
    target.write_text("keep me\n")
    job_dir = home / "logs" / "ln"
    job_dir.mkdir(parents=True, mode=0o700)
    home.chmod(0o700)
    (home / "logs").chmod(0o700)
    (job_dir / "1.1.times").symlink_to(target)
    proc = cw("run", "-n", "ln", "--timestamps", "--", "echo", "still captured", check_rc=0)
    assert target.read_text() == "keep me\n"
    assert b"cannot record output timestamps" in proc.stderr and b"symlink" in proc.stderr
    assert cw("logs", "ln", check_rc=0).stdout == b"still captured\n"
