"""Secrets never stored or sent (issue 16 §1), through the installed executable: what a job
prints is redacted in every file under CRONWRAP_HOME (the ledger included), in `logs`,
`history`, a hook's CRONWRAP_* variables and a ping's body; passthrough is left alone."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from tests.acceptance.conftest import wait_for

PASSWORD = "Tr0ub4dor-horse-staple"  # from --env-file, as DB_PASSWORD
URL_PASSWORD = "hunter2-in-url"
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
BEARER = "abc.def-bearer-9876"
CUSTOM = "ACME-123456"  # matched by --redact
SPLIT = "split-s3cret-42"  # written in two writes, 0.3 s apart
ALL = (PASSWORD, URL_PASSWORD, AWS_KEY, BEARER, CUSTOM, SPLIT)

JOB = f"""
echo "connecting with $DB_PASSWORD to postgresql://app:{URL_PASSWORD}@db.internal/x"
echo "aws: key {AWS_KEY} denied" >&2
echo "> Authorization: Bearer {BEARER}"
echo "order {CUSTOM} shipped"
printf 'retry postgresql://app:split-s3'
sleep 0.3
printf 'cret-42@db.internal/y\\n'
echo "end of job"
exit 3
"""
KEPT = ("connecting with *** to postgresql://app:***@db.internal/x", "aws: key *** denied",
        "> Authorization: Bearer ***", "order *** shipped",
        "retry postgresql://app:***@db.internal/y", "end of job")


class Pings(BaseHTTPRequestHandler):
    bodies: list[bytes] = []

    def do_GET(self):  # noqa: N802
        self.send_response(200)
        self.end_headers()

    def do_POST(self):  # noqa: N802
        self.bodies.append(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def ping_url():
    Pings.bodies = []
    server = HTTPServer(("127.0.0.1", 0), Pings)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/ping"
    server.shutdown()


def every_file(home: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in home.rglob("*") if p.is_file()}


def assert_no_secret(where: str, data: bytes | str) -> None:
    raw = data.encode() if isinstance(data, str) else data
    found = [s for s in ALL if s.encode() in raw]
    assert not found, f"{found} found in {where}"


def run_job(cw, script, tmp_path, *options: str, ping: str | None = None):
    env_file = tmp_path / "job.env"
    env_file.write_text(f"DB_PASSWORD={PASSWORD}\n")
    hook_out = tmp_path / "hook.json"
    hook = (f"python3 -c \"import os, json; json.dump({{k: v for k, v in os.environ.items() "
            f"if k.startswith('CRONWRAP_')}}, open('{hook_out}', 'w'))\"")
    job = script("leaky.sh", JOB)
    ping_args = ("--ping", ping) if ping else ()
    proc = cw("run", "-n", "leaky", "--env-file", str(env_file), "--redact", "ACME-[0-9]{6}",
              "--on-failure", hook, *ping_args, *options, "--", job)
    return proc, hook_out


def test_no_secret_is_stored_or_sent_and_the_text_around_is_kept(cw, script, tmp_path,
                                                                   ping_url):
    proc, hook_out = run_job(cw, script, tmp_path, ping=ping_url)
    assert proc.returncode == 3
    # passthrough: cron's stdout/stderr get the job's output as it wrote it
    assert PASSWORD.encode() in proc.stdout and AWS_KEY.encode() in proc.stderr
    for path, data in every_file(cw.home).items():  # ledger.db, its WAL, events, the capture
        assert_no_secret(path, data)
    log = cw("logs", "leaky").stdout.decode()
    assert_no_secret("logs", log)
    assert all(line in log for line in KEPT), log
    history = cw("history", "leaky").stdout.decode() + cw("history", "leaky", "--json").stdout.decode()
    assert_no_secret("history", history)
    tail = cw.json("history", "leaky", "--json")[0]["error_tail"]
    assert "order *** shipped" in tail and "end of job" in tail
    hook_env = json.loads(hook_out.read_text())
    assert_no_secret("the hook's CRONWRAP_* variables", json.dumps(hook_env))
    assert "Bearer ***" in hook_env["CRONWRAP_OUTPUT_TAIL"]
    wait_for(lambda: Pings.bodies, what="the finish ping")
    assert_no_secret("the ping's body", Pings.bodies[0])
    assert b"order *** shipped" in Pings.bodies[0]
    assert_no_secret("status --json", cw("status", "--json").stdout)


def test_output_on_failure_prints_the_redacted_capture(cw, script, tmp_path):
    proc, _ = run_job(cw, script, tmp_path, "--output", "on-failure")
    assert proc.returncode == 3
    assert_no_secret("--output on-failure", proc.stdout + proc.stderr)
    assert b"postgresql://app:***@db.internal/x" in proc.stdout


def test_a_long_output_is_redacted_in_its_head_and_its_tail(cw, script, tmp_path):
    filler = tmp_path / "filler"
    filler.write_bytes(b"0123456789 " * 95 + b"\n" * 1)  # ~1 KiB lines
    job = script("long.sh", f"""
echo "first postgresql://app:{URL_PASSWORD}@db/x"
i=0; while [ $i -lt 10000 ]; do cat {filler}; i=$((i+1)); done
echo "last line with key {AWS_KEY}"
exit 1
""")
    proc = cw("run", "-n", "long", "--output", "quiet", "--", job)
    assert proc.returncode == 1
    for path, data in every_file(cw.home).items():
        assert_no_secret(path, data)
    log = cw("logs", "long").stdout
    assert b"first postgresql://app:***@db/x" in log and b"last line with key ***" in log
    assert b"bytes omitted" in log
    assert "last line with key ***" in cw.json("history", "long", "--json")[0]["error_tail"]


def test_redact_patterns_from_the_config_file(cw, script, tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[jobs.cfg]\nredact = ["ACME-[0-9]{6}", "internal-[a-z]+"]\n')
    config.chmod(0o600)
    env = {"CRONWRAP_CONFIG": str(config)}
    cw("run", "-n", "cfg", "--", "sh", "-c", "echo ACME-654321 and internal-secret; exit 1",
       env=env)
    tail = cw.json("history", "cfg", "--json", env=env)[0]["error_tail"]
    assert tail == "*** and ***\n"
    bad = tmp_path / "bad.toml"
    bad.write_text('[defaults]\nredact = ["("]\n')
    bad.chmod(0o600)
    proc = cw("run", "-n", "cfg", "--", "true", env={"CRONWRAP_CONFIG": str(bad)})
    assert proc.returncode == 125 and b"redact: '(' is not a regular expression" in proc.stderr


def test_no_secret_reaches_a_postgresql_ledger(cw, script, tmp_path, pg_dsn):
    import psycopg

    proc, _ = run_job(cw, script, tmp_path, "--db", pg_dsn)
    assert proc.returncode == 3
    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute("SELECT * FROM cronwrap_runs").fetchall()
        jobs = conn.execute("SELECT * FROM cronwrap_jobs").fetchall()
    assert rows and "order *** shipped" in str(rows)
    assert_no_secret("the PostgreSQL ledger", repr(rows) + repr(jobs))
    for path, data in every_file(cw.home).items():
        assert_no_secret(path, data)


def test_a_secret_across_the_cuts_of_a_long_output_is_hidden(cw, script):
    """The capture keeps the first 8 MiB and the last 1 MiB: a password that straddles either
    cut is found with what lies beyond it, and its kept part hidden."""
    head, tail = 8 << 20, 1 << 20
    pw_head, pw_tail = "straddle-head-pw", "straddle-tail-pw"
    job = script("cuts.sh", f"""exec python3 - <<'PY'
import sys
out = sys.stdout.buffer
out.write(b"a" * ({head} - 25) + b" postgresql://app:{pw_head}@db/x\\n")
out.write((b"b" * 1023 + b"\\n") * 2048)
m = {tail} - {len(pw_tail)} + 1
out.write(b"x token={pw_tail} y\\n" + b"c" * m + b"\\n")
sys.exit(2)
PY
""")
    proc = cw("run", "-n", "cuts", "--output", "quiet", "--", job)
    assert proc.returncode == 2
    for path, data in every_file(cw.home).items():
        assert pw_head.encode() not in data and b"head-pw" not in data, path
        assert b"-tail-pw" not in data, path
    log = cw("logs", "cuts").stdout
    assert b" postgresql://app:***\n[cronwrap: " in log  # the head ends inside the password
    assert b"bytes omitted" in log and b"]\n***" in log  # the tail begins inside the other

