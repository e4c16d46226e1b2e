"""Operations end to end: retries, hooks, pings, --check, Prometheus, config files."""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.acceptance.conftest import wait_for
from tests.conftest import until_exists


def events(home: Path) -> list[dict]:
    return [json.loads(l) for l in (home / "logs" / "events.jsonl").read_text().splitlines()]


def flaky(script, tmp_path, fails: int, code: int = 75) -> str:
    """A job that exits ``code`` the first ``fails`` times, then succeeds."""
    counter = tmp_path / "count"
    return script("flaky.sh", f"n=$(cat {counter} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {counter}\n"
                              f"echo attempt $n; [ $n -gt {fails} ] || exit {code}\n")


# -- retries ---------------------------------------------------------------------------------

def test_fails_with_75_twice_then_succeeds(cw, script, tmp_path):
    job = flaky(script, tmp_path, fails=2)
    proc = cw("run", "-n", "f", "--retries", "3", "--retry-delay", "0.1", "--", job)
    assert proc.returncode == 0, proc.stderr
    (run,) = cw.json("history", "f", "--json")
    assert (run["status"], run["attempt"]) == ("succeeded", 3)
    retries = [e for e in events(cw.home) if e["event"] == "retry"]
    assert [e["attempt"] for e in retries] == [1, 2] and all(e["exit_code"] == 75 for e in retries)
    starts = [e["attempt"] for e in events(cw.home) if e["event"] == "start"]
    assert starts == [1, 2, 3]


def test_retries_are_bounded_then_failed(cw, script, tmp_path):
    job = flaky(script, tmp_path, fails=10)
    proc = cw("run", "-n", "f", "--retries", "2", "--retry-delay", "0.05", "--", job)
    assert proc.returncode == 75
    (run,) = cw.json("history", "f", "--json")
    assert (run["status"], run["attempt"], run["exit_code"]) == ("failed", 3, 75)


def test_a_permanent_failure_is_not_retried(cw, script, tmp_path):
    """Under --retry-on 75 an exit status of 2 is permanent (issue 22 §7: without --retry-on
    every failure but 126 and 127 is retried)."""
    job = flaky(script, tmp_path, fails=10, code=2)
    assert cw("run", "-n", "p", "--retries", "3", "--retry-on", "75", "--retry-delay", "0.05",
              "--", job).returncode == 2
    assert cw.json("history", "p", "--json")[0]["attempt"] == 1


def test_timeout_is_retried_when_listed(cw, tmp_path, script):
    marker = tmp_path / "once"
    job = script("slow-once.sh", f"[ -e {marker} ] && exit 0\ntouch {marker}\nexec sleep 30\n")
    proc = cw("run", "-n", "t", "--timeout", "0.3", "--retries", "1", "--retry-on", "75,timeout",
              "--retry-delay", "0.05", "--", job)
    assert proc.returncode == 0
    assert cw.json("history", "t", "--json")[0]["attempt"] == 2


def test_max_attempts_lets_a_later_firing_retry_the_slot(cw, script, tmp_path):
    from tests.acceptance.conftest import same_minute

    same_minute(15)
    job = flaky(script, tmp_path, fails=1)
    assert cw("run", "-n", "m", "--max-attempts", "3", "--", job).returncode == 75
    assert cw("run", "-n", "m", "--max-attempts", "3", "--", job).returncode == 0
    assert cw.json("history", "m", "--json")[0]["attempt"] == 2


def test_a_retry_never_runs_past_the_next_slot(cw, script, tmp_path):
    job = flaky(script, tmp_path, fails=1)
    proc = cw("run", "-n", "n", "--schedule", "* * * * *", "--retries", "3", "--retry-delay", "10m",
              "--retry-max-delay", "10m", "--", job)
    # the backoff is random up to 10 min: either it fits before the next minute (and is tiny),
    # or it is not attempted; never a retry scheduled beyond the next slot
    skipped = [e for e in events(cw.home) if e["event"] == "retry_skipped"]
    retried = [e for e in events(cw.home) if e["event"] == "retry"]
    assert skipped or (retried and retried[0]["delay_s"] < 60)
    assert proc.returncode in (0, 75)


# -- hooks -----------------------------------------------------------------------------------

def test_failure_hook_sees_the_run_and_never_changes_the_exit_status(cw, tmp_path):
    out = tmp_path / "hook.json"
    hook = (f"python3 -c \"import os, json; json.dump({{k: v for k, v in os.environ.items() "
            f"if k.startswith('CRONWRAP_')}}, open('{out}', 'w'))\"; exit 9")
    proc = cw("run", "-n", "h", "--on-failure", hook, "--", "sh", "-c", "echo boom-output; exit 3")
    assert proc.returncode == 3
    env = json.loads(out.read_text())
    assert env["CRONWRAP_STATUS"] == "failed" and env["CRONWRAP_EXIT_CODE"] == "3"
    assert "boom-output" in env["CRONWRAP_OUTPUT_TAIL"] and int(env["CRONWRAP_DURATION_MS"]) >= 0
    assert env["CRONWRAP_JOB"] == "h" and env["CRONWRAP_RUN_ID"] and env["CRONWRAP_FENCE"] == "1"
    hook_event = [e for e in events(cw.home) if e["event"] == "hook"][0]
    assert hook_event["exit_code"] == 9


def test_success_hook_and_hook_timeout(cw, tmp_path):
    marker = tmp_path / "ok"
    assert cw("run", "-n", "s", "--on-success", f"touch {marker}", "--", "true").returncode == 0
    assert marker.exists()
    start = time.monotonic()
    proc = cw("run", "-n", "slowhook", "--on-success", "sleep 30", "--hook-timeout", "1", "--", "true")
    assert proc.returncode == 0 and time.monotonic() - start < 20  # not the hook's 30 s
    hook_event = [e for e in events(cw.home) if e["event"] == "hook" and e["job"] == "slowhook"][0]
    assert hook_event["timed_out"] is True


def test_alert_after_n_failed_slots_then_recovery(cw, tmp_path):
    log = tmp_path / "alerts"
    hook = f"echo $CRONWRAP_ALERT $CRONWRAP_STATUS >> {log}"
    # one slot per day, run by hand: fail, fail (alert), succeed (recovered), fail (no alert yet)
    for code, day in ((1, "01"), (1, "02"), (0, "03"), (1, "04")):
        cw("run", "-n", "a", "--schedule", "@daily", "--at", f"2026-01-{day}T00:00",
           "--alert-after", "2", "--on-failure", hook, "--", "sh", "-c", f"exit {code}")
    assert log.read_text().splitlines() == ["failing failed", "recovered succeeded"]


# -- pings -----------------------------------------------------------------------------------

class Recorder(BaseHTTPRequestHandler):
    seen: list = []
    answer_headers: dict[str, str] = {}

    def do_GET(self):  # noqa: N802
        self.seen.append(("GET", self.path, b""))
        self.answer()

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.seen.append(("POST", self.path, body))
        self.answer()

    def answer(self) -> None:
        self.send_response(200)
        for name, value in self.answer_headers.items():
            self.send_header(name, value)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def ping_server():
    Recorder.seen, Recorder.answer_headers = [], {}
    server = HTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/ping/abc", Recorder.seen
    server.shutdown()


def test_pings_start_and_exit_status_with_the_output_tail(cw, ping_server):
    url, seen = ping_server
    assert cw("run", "-n", "p", "--ping", url, "--", "sh", "-c", "echo all-good").returncode == 0
    wait_for(lambda: len(seen) >= 2, what="pings")
    assert (seen[0][0], path(seen[0])) == ("GET", "/ping/abc/start")
    assert (seen[1][0], path(seen[1])) == ("POST", "/ping/abc/0") and b"all-good" in seen[1][2]
    assert cw("run", "-n", "q", "--ping", url, "--", "sh", "-c", "exit 4").returncode == 4
    wait_for(lambda: len(seen) >= 4, what="pings")
    assert path(seen[3]) == "/ping/abc/4"
    rids = [rid(request) for request in seen]
    assert rids[0] == rids[1] != rids[2] == rids[3]  # one run ID per run, a UUID
    assert all(uuid.UUID(r).version == 4 for r in rids)


def test_a_retried_run_pings_each_start_under_one_run_id(cw, ping_server):
    url, seen = ping_server
    proc = cw("run", "-n", "r", "--retries", "1", "--retry-on", "3", "--retry-delay", "0",
              "--ping", url + "?create=1", "--", "sh", "-c", "exit 3")
    assert proc.returncode == 3
    wait_for(lambda: len(seen) >= 3, what="pings")
    assert [path(request) for request in seen] == ["/ping/abc/start"] * 2 + ["/ping/abc/3"]
    assert len({rid(request) for request in seen}) == 1
    assert all(parse_qs(urlsplit(request[1]).query)["create"] == ["1"] for request in seen)


def test_the_servers_ping_body_limit_bounds_the_output_sent(cw, ping_server):
    url, seen = ping_server
    Recorder.answer_headers = {"Ping-Body-Limit": "9"}
    assert cw("run", "-n", "b", "--ping", url, "--", "sh", "-c",
              "echo first; echo last-line").returncode == 0
    wait_for(lambda: len(seen) >= 2, what="pings")
    assert seen[1][2] == b"last-line\n"[-9:]


def path(request: tuple[str, str, bytes]) -> str:
    return urlsplit(request[1]).path


def rid(request: tuple[str, str, bytes]) -> str:
    return parse_qs(urlsplit(request[1]).query)["rid"][0]


def test_a_dead_ping_server_does_not_delay_the_job(cw):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens: connections are refused
    start = time.monotonic()
    proc = cw("run", "-n", "d", "--ping", f"http://127.0.0.1:{port}/x", "--", "true")
    assert proc.returncode == 0 and time.monotonic() - start < 10
    assert any(e["event"] == "ping_failed" for e in events(cw.home))


def test_bad_ping_url_is_125(cw):
    proc = cw("run", "-n", "b", "--ping", "ftp://x", "--", "true")
    assert proc.returncode == 125 and b"--ping" in proc.stderr


# -- monitoring ------------------------------------------------------------------------------

def test_check_exit_codes_in_each_state(cw, script, tmp_path):
    assert cw("status", "--check").returncode == 3  # UNKNOWN: nothing recorded yet
    cw("run", "-n", "good", "--", "true")
    ok = cw("status", "--check")
    assert ok.returncode == 0 and ok.stdout.startswith(b"CRONWRAP OK") and b"|" in ok.stdout
    ready, done = tmp_path / "ready", tmp_path / "done"
    # The job runs until the check has seen it (a fixed sleep could end first under load).
    job = script("long.sh", f"touch {ready}\n{until_exists(done)}\n")
    long = cw.popen("run", "-n", "long", "--", job)
    wait_for(ready.exists, what="long job")
    time.sleep(0.6)
    try:
        warn = cw("status", "--check", "--warn-duration", "0.5s")
    finally:
        done.touch()
    assert warn.returncode == 1 and b"WARNING" in warn.stdout
    long.wait(10)
    cw("run", "-n", "bad", "--", "false")
    crit = cw("status", "--check")
    assert crit.returncode == 2 and b"CRITICAL" in crit.stdout and b"bad" in crit.stdout
    assert cw("status", "good", "--check").returncode == 0
    time.sleep(1.1)
    assert cw("status", "good", "--check", "--max-age", "1s").returncode == 2


def test_prometheus_text_parses_and_the_textfile_is_written(cw, tmp_path):
    from prometheus_client.parser import text_string_to_metric_families

    cw("run", "-n", 'ok', "--", "true")
    cw("run", "-n", "fails", "--", "false")
    text = cw("status", "--format", "prometheus", check_rc=0).stdout.decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    health = {s.labels["cronjob"]: s.value for s in families["cronwrap_health"].samples}
    assert health == {"ok": 0, "fails": 2}
    exit_codes = {s.labels["cronjob"]: s.value for s in families["cronwrap_last_run_exit_code"].samples}
    assert exit_codes == {"ok": 0, "fails": 1}
    target = tmp_path / "textfile" / "cronwrap.prom"
    target.parent.mkdir()
    cw("status", "--textfile", str(target), check_rc=0)
    assert list(text_string_to_metric_families(target.read_text()))


# -- config ----------------------------------------------------------------------------------

def test_config_precedence_across_all_five_levels(cw, tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[defaults]\nhost = "from-defaults"\n\n[jobs.cfg]\nhost = "from-job"\n')
    config.chmod(0o600)
    base = {"CRONWRAP_CONFIG": str(config)}

    def host_of(*args, env=None):
        cw("run", "-n", "cfg", "--force", *args, "--", "true", env={**base, **(env or {})}, check_rc=0)
        return cw.json("history", "cfg", "--json")[0]["host"]

    assert host_of("--host", "from-cli", env={"CRONWRAP_HOST": "from-env"}) == "from-cli"
    assert host_of(env={"CRONWRAP_HOST": "from-env"}) == "from-env"
    assert host_of() == "from-job"
    config.write_text('[defaults]\nhost = "from-defaults"\n')
    assert host_of() == "from-defaults"
    config.write_text("")
    import os

    assert host_of() == os.uname().nodename


def test_config_job_section_applies_by_name(cw, tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[jobs.settle]\ntimeout = "0.3s"\n')
    config.chmod(0o600)
    proc = cw("run", "-n", "settle", "--", "sleep", "30", env={"CRONWRAP_CONFIG": str(config)})
    assert proc.returncode == 124


@pytest.mark.parametrize("text, words", [
    ('[defaults]\ntimeuot = "5m"\n', ":2: unknown key 'timeuot'"),
    ('[jobs.settle]\n\ntimeout = "5x"\n', ":3: [jobs.settle] timeout"),
    ("[defaults\n", "config.toml"),
])
def test_config_errors_name_file_line_and_key(cw, tmp_path, text, words):
    config = tmp_path / "config.toml"
    config.write_text(text)
    config.chmod(0o600)
    marker = tmp_path / "ran"
    proc = cw("run", "-n", "settle", "--", "touch", str(marker), env={"CRONWRAP_CONFIG": str(config)})
    assert proc.returncode == 125 and not marker.exists()
    line = proc.stderr.decode().strip()
    assert len(line.splitlines()) == 1 and words in line and str(config) in line, line


def test_check_says_unknown_when_it_cannot_tell(cw):
    bad = cw("status", "--check", "--max-age", "soon")
    assert bad.returncode == 3 and bad.stdout.startswith(b"CRONWRAP UNKNOWN - --max-age")
    down = cw("status", "--check", "--db", "postgresql://u:hunter2@127.0.0.1:1/x")
    assert down.returncode == 3 and b"UNKNOWN" in down.stdout and b"hunter2" not in down.stdout


def test_admin_commands_use_the_config_files_ledger(cw, tmp_path):
    other = tmp_path / "other.db"
    config = tmp_path / "config.toml"
    config.write_text(f'[defaults]\ndb = "sqlite:///{other}"\n')
    config.chmod(0o600)
    env = {"CRONWRAP_CONFIG": str(config)}
    assert cw("run", "-n", "c", "--", "true", env=env).returncode == 0
    assert other.exists()
    assert [j["job"] for j in cw.json("status", "--json", env=env)] == ["c"]
    assert cw.json("status", "--json") == []  # without the config: the embedded ledger
