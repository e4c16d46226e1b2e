"""Hooks against a real /bin/sh, pings against a real local HTTP server (and dead ones).

Timing assertions are generous bounds ("killed within timeout + 3 s"), never benchmarks.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from cronwrap.errors import UsageError
from cronwrap.redact.redactor import parse_ping_url
from cronwrap.run.hooks import HOOK_VARIABLES, TAIL_BYTES, Pinger, hook_env, ping_url, redact, run_hook

BASE_ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "CRONWRAP_JOB": "settle",
            "CRONWRAP_RUN_ID": "42", "CRONWRAP_ATTEMPT": "1"}
DUMP_ENV = f"{sys.executable} -c 'import json, os, sys; json.dump(dict(os.environ), open(sys.argv[1], \"w\"))'"


def gone(pid: int) -> bool:
    """No such process, or only a zombie waiting for its reaper."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):  # gone before the open, or the read
        return True


# -- hook_env ----------------------------------------------------------------------------------

def test_hook_env_adds_the_runs_outcome():
    env = hook_env(BASE_ENV, "failed", 3, 1234.7, "boom\n")
    assert env["CRONWRAP_STATUS"] == "failed"
    assert env["CRONWRAP_EXIT_CODE"] == "3"
    assert env["CRONWRAP_DURATION_MS"] == "1234"
    assert env["CRONWRAP_OUTPUT_TAIL"] == "boom\n"
    assert env["CRONWRAP_JOB"] == "settle" and "CRONWRAP_STATUS" not in BASE_ENV


def test_hook_env_unknowns_are_empty():
    env = hook_env(BASE_ENV, "timeout", None, None, None)
    assert env["CRONWRAP_EXIT_CODE"] == "" and env["CRONWRAP_DURATION_MS"] == ""
    assert env["CRONWRAP_OUTPUT_TAIL"] == ""


def test_hook_env_tail_is_bounded_nul_free_and_whole_characters():
    tail = ("é" * 5000 + "\0end").encode()
    text = hook_env(BASE_ENV, "failed", 1, 1, tail)["CRONWRAP_OUTPUT_TAIL"]
    assert len(text.encode()) <= TAIL_BYTES
    assert "\0" not in text and text.endswith("end") and "\ufffd" not in text


def test_hook_env_sets_exactly_the_registered_variables():
    base = {"CRONWRAP_JOB": "settle", "PATH": "/bin"}
    plain = hook_env(base, "failed", 3, 12.5, b"boom")
    always = [k for k in HOOK_VARIABLES if k != "CRONWRAP_ALERT"]
    assert [k for k in plain if k not in base] == always
    alerted = hook_env(base, "failed", 3, 12.5, b"boom", alert="failing")
    assert [k for k in alerted if k not in base] == list(HOOK_VARIABLES)
    assert alerted["CRONWRAP_ALERT"] == "failing" and alerted["CRONWRAP_DURATION_MS"] == "12"


def test_every_hook_variable_says_what_it_means():
    assert all(name.startswith("CRONWRAP_") and meaning.strip()
               for name, meaning in HOOK_VARIABLES.items())


# -- run_hook ----------------------------------------------------------------------------------

def test_a_hook_sees_the_runs_environment(tmp_path):
    out = tmp_path / "env.json"
    env = hook_env(BASE_ENV, "failed", 75, 2000, "line 1\nline 2\n")
    result = run_hook(f"{DUMP_ENV} {out}", env, 10)
    assert result.exit_code == 0 and not result.timed_out and result.ok
    seen = json.loads(out.read_text())
    assert seen["CRONWRAP_STATUS"] == "failed" and seen["CRONWRAP_EXIT_CODE"] == "75"
    assert seen["CRONWRAP_DURATION_MS"] == "2000"
    assert seen["CRONWRAP_OUTPUT_TAIL"] == "line 1\nline 2\n"
    assert seen["CRONWRAP_RUN_ID"] == "42"


def test_a_failing_hook_returns_its_code_and_output():
    result = run_hook("echo to stdout; echo to stderr >&2; exit 7", BASE_ENV, 10)
    assert result.exit_code == 7 and not result.timed_out and not result.ok
    assert result.output_tail == "to stdout\nto stderr\n"


def test_a_missing_command_is_127_from_the_shell():
    result = run_hook("no-such-command-here", BASE_ENV, 10)
    assert result.exit_code == 127 and "not found" in result.output_tail


def test_a_hook_that_cannot_start_is_a_result_not_an_exception():
    result = run_hook("echo hi", {**BASE_ENV, "BAD": "a\0b"}, 10)
    assert result.exit_code == 126 and result.output_tail.startswith("cannot run hook:")


def test_a_hook_that_sleeps_past_its_timeout_is_ended(tmp_path):
    started = time.monotonic()
    result = run_hook(f"echo $$ > {tmp_path}/pid; echo before; sleep 60", BASE_ENV, 1)
    elapsed = time.monotonic() - started
    assert result.timed_out and elapsed < 1 + 20  # not the hook's 60 s
    assert result.exit_code == 128 + 15 and result.output_tail == "before\n"


def test_a_hook_that_ignores_term_gets_kill_and_its_whole_group_goes(tmp_path):
    script = f"trap '' TERM; sleep 60 & echo $! > {tmp_path}/child; wait"
    started = time.monotonic()
    result = run_hook(script, BASE_ENV, 1)
    elapsed = time.monotonic() - started
    assert result.timed_out and result.exit_code == 128 + 9
    assert 1 + 2 - 0.5 < elapsed < 1 + 2 + 20  # TERM at 1 s, KILL 2 s later; never the 60 s
    child = int((tmp_path / "child").read_text())
    deadline = time.monotonic() + 2
    while not gone(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone(child)


def test_a_hook_that_ignores_term_loses_a_descendant_that_left_its_session_too(tmp_path):
    """The KILL goes to the hook's tree (procs.Tree), not only to its process group."""
    escaped = f"setsid sh -c 'trap \"\" TERM; echo $$ > {tmp_path}/child; exec sleep 60'"
    result = run_hook(f"trap '' TERM; {escaped} & wait", BASE_ENV, 1)
    assert result.timed_out and result.exit_code == 128 + 9
    child = int((tmp_path / "child").read_text())
    deadline = time.monotonic() + 2
    while not gone(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone(child)


def test_a_hook_that_closes_its_output_is_still_bounded():
    started = time.monotonic()
    result = run_hook("exec >/dev/null 2>&1; sleep 60", BASE_ENV, 1)
    assert result.timed_out and time.monotonic() - started < 1 + 20  # not the hook's 60 s


def test_a_background_child_holding_the_pipe_does_not_hold_the_hook():
    started = time.monotonic()
    result = run_hook("sleep 30 & echo done", BASE_ENV, 20)
    assert result.exit_code == 0 and not result.timed_out and result.output_tail == "done\n"
    assert time.monotonic() - started < 15  # not the child's 30 s, nor the hook's 20 s limit


def test_a_hook_runs_in_its_own_session_with_stdin_from_dev_null():
    code = "import os, sys; print(os.getsid(0) == os.getpid(), repr(sys.stdin.read()))"
    result = run_hook(f"exec {sys.executable} -c '{code}'", BASE_ENV, 10)
    assert result.output_tail == "True ''\n"


def test_a_chatty_hook_keeps_only_the_tail():
    result = run_hook("seq 1 200000", BASE_ENV, 20)
    assert result.exit_code == 0
    assert len(result.output_tail.encode()) <= TAIL_BYTES
    assert result.output_tail.endswith("199999\n200000\n")


# -- pings: URLs -------------------------------------------------------------------------------

def test_parse_ping_url():
    assert parse_ping_url("https://hc-ping.com/abc") == "https://hc-ping.com/abc"
    assert parse_ping_url("http://127.0.0.1:8000/x?create=1", "--ping")
    for bad in ("ftp://example.com/x", "hc-ping.com/abc", "https://", "https:///x",
                "http://a b/", "http://x/\n"):
        with pytest.raises(UsageError, match="^--ping: .* is not an http:// or https:// URL"):
            parse_ping_url(bad, "--ping")


def test_errors_about_a_url_redact_its_credentials():
    with pytest.raises(UsageError) as info:
        parse_ping_url("ftp://user:secret@example.com/x", "--ping")
    assert "secret" not in str(info.value) and "***@example.com" in str(info.value)
    assert redact("https://u:p@h:1/a@b") == "https://***@b"  # up to the last @: hide more
    assert redact("https://h/x") == "https://h/x"


def test_ping_urls_carry_the_run_id_after_the_query_string():
    assert ping_url("https://hc-ping.com/key/slug?create=1", "start", "R") == \
        "https://hc-ping.com/key/slug/start?create=1&rid=R"
    assert ping_url("https://hc-ping.com/uuid/#x", "0", "R") == "https://hc-ping.com/uuid/0?rid=R"


def test_ping_urls_keep_the_query_string():
    assert ping_url("https://hc-ping.com/key/slug?create=1", "start") == \
        "https://hc-ping.com/key/slug/start?create=1"
    assert ping_url("https://hc-ping.com/uuid/", "3") == "https://hc-ping.com/uuid/3"


# -- pings: a real server ----------------------------------------------------------------------

class Server:
    """A local HTTP server recording (method, path, body, headers); answers from ``codes``
    (one per request, then 200) after ``delays[path]`` seconds, with ``answer_headers``."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, bytes, dict]] = []
        self.codes: list[int] = []
        self.delays: dict[str, float] = {}
        self.answer_headers: dict[str, str] = {}
        server = self

        class Handler(BaseHTTPRequestHandler):
            def handle_any(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                time.sleep(server.delays.get(self.path.partition("?")[0], 0))
                server.requests.append((self.command, self.path, body, dict(self.headers)))
                code = server.codes.pop(0) if server.codes else 200
                self.send_response(code)
                for name, value in server.answer_headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"OK")

            do_GET = do_POST = do_HEAD = handle_any

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/ping/abc"
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def paths(self) -> list[str]:
        """The paths asked for, without their query strings."""
        return [path.partition("?")[0] for _, path, _, _ in self.requests]

    @property
    def queries(self) -> list[dict[str, list[str]]]:
        return [parse_qs(urlsplit(path).query) for _, path, _, _ in self.requests]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = Server()
    yield s
    s.close()


def test_start_and_success(server):
    pinger = Pinger(server.url)
    pinger.start("k")
    pinger.finish("k", "succeeded", 0, "all good\n")
    assert pinger.wait(5) == []
    assert server.paths == ["/ping/abc/start", "/ping/abc/0"]
    (m1, _, b1, _), (m2, _, b2, headers) = server.requests
    assert (m1, b1) == ("GET", b"") and (m2, b2) == ("POST", b"all good\n")
    assert headers["User-Agent"].startswith("cronwrap/")


def test_each_run_has_one_run_id_on_its_start_and_its_finish(server):
    pinger = Pinger(server.url + "?create=1")
    pinger.start("slot-1")
    pinger.start("slot-2")  # overlapping runs: healthchecks.io pairs them by rid
    pinger.finish("slot-2", "succeeded", 0, "")
    pinger.start("slot-1")  # a retry of slot-1: the same run
    pinger.finish("slot-1", "failed", 1, "")
    assert pinger.wait(5) == []
    assert server.paths == ["/ping/abc/start"] * 2 + ["/ping/abc/0", "/ping/abc/start",
                                                         "/ping/abc/1"]
    assert all(query["create"] == ["1"] for query in server.queries)
    rids = [query["rid"][0] for query in server.queries]
    assert rids[0] == rids[3] == rids[4] != rids[1] == rids[2]
    assert all(str(uuid.UUID(rid)) == rid and uuid.UUID(rid).version == 4 for rid in rids)


def test_the_servers_ping_body_limit_bounds_the_later_pings(server):
    server.answer_headers["Ping-Body-Limit"] = "7"
    pinger = Pinger(server.url)
    pinger.start("k")
    pinger.finish("k", "failed", 2, "first line\nlast wörds")
    assert pinger.wait(5) == []
    assert server.requests[1][2] == " wörds".encode()  # 7 bytes; "ö" is two


def test_a_failure_sends_its_exit_status_and_output_tail(server):
    pinger = Pinger(server.url)
    pinger.finish("k", "failed", 3, "x" * 20000 + "last words")
    assert pinger.wait(5) == []
    (_, _, body, _), = server.requests
    assert server.paths == ["/ping/abc/3"] and len(body) == 10 * 1024 and body.endswith(b"last words")


@pytest.mark.parametrize("status, code", [("timeout", None), ("killed", None), ("failed", 0)])
def test_a_failure_without_a_status_of_its_own_is_fail_never_success(server, status, code):
    pinger = Pinger(server.url)
    pinger.finish("k", status, code, "")
    assert pinger.wait(5) == []
    assert server.paths == ["/ping/abc/fail"]


def test_the_finish_waits_for_a_slow_start(server):
    server.delays["/ping/abc/start"] = 0.5
    pinger = Pinger(server.url)
    pinger.start("k")
    pinger.finish("k", "succeeded", 0, "")
    assert pinger.wait(5) == []
    assert server.paths == ["/ping/abc/start", "/ping/abc/0"]


def test_5xx_is_retried_briefly(server):
    server.codes = [503, 502]
    pinger = Pinger(server.url)
    started = time.monotonic()
    pinger.finish("k", "succeeded", 0, "")
    assert pinger.wait(10) == []
    assert server.paths == ["/ping/abc/0"] * 3
    assert 1.4 < time.monotonic() - started < 5  # 0.5 s then 1 s between attempts


def test_5xx_every_time_is_reported_once(server):
    server.codes = [500, 500, 500]
    pinger = Pinger(server.url)
    pinger.finish("k", "succeeded", 0, "")
    assert pinger.wait(10) == [f"ping {server.url}/0: HTTP 500 Internal Server Error"]
    assert len(server.requests) == 3


def test_4xx_is_not_retried(server):
    server.codes = [404]
    pinger = Pinger(server.url)
    pinger.start("k")
    assert pinger.wait(5) == [f"ping {server.url}/start: HTTP 404 Not Found"]
    assert len(server.requests) == 1


def test_credentials_in_the_url_go_in_a_header_and_never_in_errors(server):
    url = server.url.replace("http://", "http://ops:s3cret@")
    server.codes = [401]
    pinger = Pinger(url)
    pinger.start("k")
    errors = pinger.wait(5)
    (_, _, _, headers), = server.requests
    assert server.paths == ["/ping/abc/start"]
    assert headers["Authorization"] == "Basic " + base64.b64encode(b"ops:s3cret").decode()
    assert errors and all("s3cret" not in e and "***@127.0.0.1" in e for e in errors)


# -- pings: dead servers never hold the job up -------------------------------------------------

def closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def test_a_dead_port_does_not_block():
    pinger = Pinger(f"http://user:pw@127.0.0.1:{closed_port()}/x")
    started = time.monotonic()
    pinger.start("k")
    pinger.finish("k", "failed", 1, "tail")
    # blocking would take its 1.5 s of retries; 0.2 s was thin for GIL hand-offs under load
    assert time.monotonic() - started < 1
    errors = pinger.wait(2)
    assert time.monotonic() - started < 2.5
    assert errors and all(e.count("\n") == 0 and "pw" not in e for e in errors)
    assert any("refused" in e.lower() or "gave up" in e for e in errors)


def test_a_server_that_never_answers_is_given_up_on():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # accepted by the kernel, never answered
    try:
        pinger = Pinger(f"http://127.0.0.1:{listener.getsockname()[1]}/x")
        started = time.monotonic()
        pinger.start("k")
        pinger.finish("k", "succeeded", 0, "")
        errors = pinger.wait(2)
        assert time.monotonic() - started < 2.5
        assert errors == [f"ping http://127.0.0.1:{listener.getsockname()[1]}/x: 2 ping(s) "
                          "still unanswered after 2s; gave up"]
    finally:
        listener.close()


def test_pinging_imports_urllib_only_in_the_thread(tmp_path):
    code = ("import sys; from cronwrap.run import hooks; "
            "print('urllib.request' in sys.modules, 'subprocess' in sys.modules)")
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip() == "False False"
