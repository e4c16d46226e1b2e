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



# -- issue 20 §5: the shapes the documentation promises to hide ------------------------------

SHAPES = (  # (what the job prints, the parts of its secret that must not be kept, what is)
    ("postgresql://app:pa/ss99word@db/x", ("pa/ss", "ss99word"), "postgresql://app:***@db/x"),
    ("postgresql://app:pa@ss88word@db/x", ("ss88word",), "postgresql://app:***@db/x"),
    ('{"password": "correct horse battery"}', ("correct", "horse", "battery"),
     '{"password": "***"}'),
    ('password: "two words"', ("two", "words"), 'password: "***"'),
    ("mysql --password hunter2xyz", ("hunter2xyz",), "mysql --password ***"),
    ("mysql -phunter5xyz", ("hunter5xyz",), "mysql -p***"),
    ("curl -u admin:hunter6xyz https://x", ("hunter6xyz",), "curl -u admin:*** https://x"),
    ("password => 'hunter3xyz'", ("hunter3xyz",), "password => '***'"),
)


def test_every_shape_the_docs_promise_to_hide_is_hidden_in_the_capture_and_the_ledger(cw, tmp_path):
    printed = tmp_path / "printed.txt"
    printed.write_text("".join(f"{text}\n" for text, _, _ in SHAPES))
    proc = cw("run", "-n", "shapes", "--output", "quiet", "--", "sh", "-c",
              f"cat {printed}; exit 4")
    assert proc.returncode == 4
    parts = [p.encode() for _, secret, _ in SHAPES for p in secret]
    for path, data in every_file(cw.home).items():  # the capture, the ledger, the run log
        assert not [p for p in parts if p in data], path
    log = cw("logs", "shapes").stdout.decode()
    tail = cw.json("history", "shapes", "--json")[0]["error_tail"]
    for _, _, kept in SHAPES:
        assert kept in log and kept in tail, (kept, log)


# -- issue 20 §1: the operator's patterns get a budget ---------------------------------------

def test_a_redact_pattern_that_can_take_exponential_time_is_refused_with_one_line(cw, tmp_path):
    proc = cw("run", "-n", "x", "--redact", "(x+x+)+y", "--", "true")
    assert proc.returncode == 125 and proc.stdout == b""
    lines = proc.stderr.decode().splitlines()
    assert len(lines) == 1 and "--redact: '(x+x+)+y' could take exponential time" in lines[0]
    assert "possessive" in lines[0]
    config = tmp_path / "config.toml"
    config.write_text('[jobs.x]\nredact = ["ACME-[0-9]{6}", "(a|aa)*b"]\n')
    config.chmod(0o600)
    proc = cw("run", "-n", "x", "--", "true", env={"CRONWRAP_CONFIG": str(config)})
    assert proc.returncode == 125 and b"'(a|aa)*b' could take exponential" in proc.stderr
    assert not (cw.home / "logs" / "x").exists()  # nothing ran


def test_a_pattern_that_runs_away_costs_a_bounded_cpu_and_never_leaks(cw, script):
    """A pattern the static check lets through (polynomial: hours on a line of 3000 spaces)
    is stopped by its CPU budget: the line it could not finish is hidden, the others are
    redacted as usual; once the run's budget is spent, the rest is hidden. The job's own exit
    status passes through, and passthrough is the job's output as it wrote it."""
    job = script("runaway.sh", """
echo "order ACME-123456"
spaces=$(printf '%3000s' '')
echo "${spaces}!"
echo "then ACME-234567"
i=0; while [ $i -lt 150 ]; do echo "${spaces}!"; i=$((i+1)); done
echo "late ACME-345678"
exit 3
""")
    proc = cw("run", "-n", "runaway", "--redact", r"ACME-[0-9]{6}|\s*\s*\s*\s*#", "--", job,
              timeout=40)
    assert proc.returncode == 3 and b"late ACME-345678" in proc.stdout
    log = cw("logs", "runaway").stdout
    assert log.startswith(b"order ***\n***[cronwrap: a --redact pattern ran out of time on "
                          b"this line]\nthen ***\n"), log[:300]
    assert log.endswith(b"[cronwrap: --redact patterns used up their CPU budget; the rest is "
                        b"hidden]\n") and b"345678" not in log
    for path, data in every_file(cw.home).items():
        assert b"ACME-" not in data, path
    finish = [e for e in map(json.loads, (cw.home / "logs" / "events.jsonl").read_text()
                             .splitlines()) if e["event"] == "finish"][0]
    assert finish["wrapper_cpu_ms"] < 10_000  # the budget: 2 s of CPU, with ample room
