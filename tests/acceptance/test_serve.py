"""``cronwrap serve`` over HTTP, as a person (or Prometheus, or a script) uses it: the real
executable serving a real SQLite ledger, asked with urllib."""

from __future__ import annotations

import json
import os
import re
import socket
import threading
from urllib.parse import quote, urljoin

import pytest

from tests.acceptance.conftest import wait_for
from tests.acceptance import dashboard
from tests.acceptance.dashboard import HOURLY, SCRIPT_NAME, Server

filled, server = dashboard.filled, dashboard.server  # fixtures


def job_url(server: Server, name: str) -> str:
    return f"{server.url}jobs/{quote(name, safe='')}"


# -- pages -------------------------------------------------------------------------------------

def test_overview_shows_every_job_critical_first(server):
    reply = server.fetch(server.url)
    assert reply.status == 200 and reply.headers["Content-Type"].startswith("text/html")
    rows = re.findall(r'<tr data-health="(\w+)"><td><a href="([^"]+)">', reply.text)
    healths, names = [health for health, _ in rows], [href for _, href in rows]
    assert healths[:2] == ["critical", "critical"] and healths[2] in ("ok", "warning")
    assert set(names) == {"jobs/demo", f"jobs/{quote(SCRIPT_NAME, safe='')}", f"jobs/{HOURLY}"}
    assert names[-1] == "jobs/demo"  # the one job that is not critical comes last
    assert '<meta http-equiv="refresh" content="30">' in reply.text  # refreshes without JS
    assert "hello from demo" not in reply.text and "<script" not in reply.text
    assert re.search(r"late: [23] slots passed without a run", reply.text)  # last slot 3 h ago


def test_overview_shows_last_run_and_strip(server):
    text = server.fetch(server.url).text
    row = next(r for r in text.split("<tr ") if 'href="jobs/hourly-report"' in r)
    assert '<span class="s-magenta">timeout</span>' in row and "<td>124</td>" in row
    assert "<td>host-a</td>" in row and " ago</span>" in row and ">in " in row  # when, next due
    strip = re.sub("<[^>]+>", "", re.search(r'<span class="strip">(.*?)</td>', row).group(1))
    assert len(strip) == 30 and strip[-1] == "T" and "○" in strip and "✗" in strip
    assert strip.count("✓") == 27


def test_overview_shows_what_runs_now(filled):
    job = filled.popen("run", "-n", "slow", "--", "sleep", "60")
    try:
        def running() -> bool:  # before its first claim the job is unknown: history exits 125
            proc = filled("history", "slow", "--json")
            return proc.returncode == 0 and any(r["status"] == "running"
                                                for r in json.loads(proc.stdout))

        wait_for(running, 30, "the run")
        running = Server(filled)
        try:
            text = running.fetch(running.url).text
        finally:
            running.stop()
    finally:
        job.terminate()
        job.communicate(timeout=30)
    row = next(r for r in text.split("<tr ") if 'href="jobs/slow"' in r)
    assert re.search(r"<td>[^<\s]+ \(lease \d+m\d+s left\)</td>", row), row
    assert '<span class="s-cyan">running</span>' in row and "▶" in row


def test_job_page_explains_schedule_charts_and_pages_runs(server):
    reply = server.fetch(job_url(server, HOURLY))
    assert reply.status == 200
    text = reply.text
    assert "<code>0 * * * *</code> in UTC: At the start of every hour" in text
    assert text.count('<li class="mono">') == 5  # the next fire times
    assert '<svg id="chart"' in text and 'data-status="missed"' in text
    assert 'data-status="failed"' in text and '<rect class="late"' in text
    assert 'id="late"' in text and re.search("[23] slots passed without a run", text)
    runs = re.findall(r'<a href="../jobs/hourly-report/runs/(\d+)">', text.split('id="runs"')[1])
    assert len(runs) == 50 and runs == sorted(runs, key=int, reverse=True)
    assert f'rel="next" href="../jobs/hourly-report?before={runs[-1]}"' in text  # by run id
    assert 'rel="prev"' not in text
    second = server.fetch(job_url(server, HOURLY) + f"?before={runs[-1]}").text
    older = re.findall(r'<a href="../jobs/hourly-report/runs/(\d+)">', second.split('id="runs"')[1])
    assert older and int(older[0]) < int(runs[-1]) and 'rel="next"' not in second
    assert 'rel="prev" href="../jobs/hourly-report"' in second  # the newest runs again


def test_job_page_notes_dst(filled):
    filled("run", "-n", "berlin", "--schedule", "30 2 * * *", "--tz", "Europe/Berlin", "--",
           "true")
    running = Server(filled)
    try:
        text = running.fetch(job_url(running, "berlin")).text
    finally:
        running.stop()
    assert "<code>30 2 * * *</code> in Europe/Berlin: At 02:30 every day" in text
    notes = re.findall(r'<p class="banner">([^<]*)</p>', text)
    assert any("does not exist in Europe/Berlin" in n for n in notes), notes  # spring forward
    assert any("happens twice in Europe/Berlin" in n for n in notes), notes  # fall back


def test_run_page_shows_fields_events_and_output(server, filled):
    (run,) = filled.json("history", "demo", "--json")
    reply = server.fetch(f"{job_url(server, 'demo')}/runs/{run['run_id']}")
    assert reply.status == 200
    text = reply.text
    for field in ("run_key", "fence", "started_at", "duration_ms", "exit_code", "boot_id",
                  "max_rss_kb"):
        assert f"<th>{field}</th>" in text
    # what the tree used (issue 26 §2), in words, and on the job page's table
    assert re.search(r"<th>used</th><td>CPU [0-9.]+s user, [0-9.]+s system; peak memory "
                     r"[0-9.]+ [KMG]iB</td>", text), text
    assert "<th>cpu+sys mem</th>" in server.fetch(job_url(server, "demo")).text
    assert '<table id="events">' in text and ">start<" in text and ">finish<" in text
    output = re.search(r'<pre id="output">(.*?)</pre>', text, re.S).group(1)
    assert output == "hello from demo\n&lt;b&gt;bold&lt;/b&gt;\n"


def test_run_page_falls_back_to_the_ledger_tail(server, filled):
    (run,) = filled.json("history", HOURLY, "--limit", "1", "--json")
    text = server.fetch(f"{job_url(server, HOURLY)}/runs/{run['run_id']}").text
    assert "the ledger&#x27;s tail" in text and '<pre id="output">boom\n</pre>' in text


def test_a_job_named_script_is_escaped_everywhere(server, filled):
    (run,) = filled.json("history", SCRIPT_NAME, "--json")
    for url in (server.url, job_url(server, SCRIPT_NAME),
                f"{job_url(server, SCRIPT_NAME)}/runs/{run['run_id']}"):
        reply = server.fetch(url)
        assert reply.status == 200, url
        assert "<script" not in reply.text and "<img" not in reply.text, url
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in reply.text, url
        assert "script-src" not in reply.headers["Content-Security-Policy"]  # none allowed
        assert reply.headers["Content-Security-Policy"].startswith("default-src 'none'")
        assert reply.headers["X-Content-Type-Options"] == "nosniff"
    run_page = server.fetch(f"{job_url(server, SCRIPT_NAME)}/runs/{run['run_id']}").text
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in run_page
    assert "&lt;img src=x onerror=alert(3)&gt;" in run_page


def test_control_characters_in_output_are_shown_escaped(filled):
    filled("run", "-n", "noisy", "--", "printf", "a\\033]0;retitled\\007b\\r\\n")
    (run,) = filled.json("history", "noisy", "--json")
    running = Server(filled)
    try:
        text = running.fetch(f"{job_url(running, 'noisy')}/runs/{run['run_id']}").text
    finally:
        running.stop()
    assert '<pre id="output">a\\x1b]0;retitled\\x07b\r\n</pre>' in text
    assert "\x1b" not in text and "\x07" not in text


# -- machine endpoints -------------------------------------------------------------------------

def without(lines: str, prefix: str) -> list[str]:
    return [line for line in lines.splitlines() if not line.startswith(prefix)]


def test_metrics_are_status_format_prometheus(server, filled):
    reply = server.fetch(server.url + "metrics")
    assert reply.status == 200 and reply.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    expected = filled("status", "--format", "prometheus", check_rc=0).stdout.decode()
    # the next due slot moves on at a slot boundary between the two reads: compared apart
    assert without(reply.text, "cronwrap_next_due") == without(expected, "cronwrap_next_due")
    assert f'cronwrap_health{{cronjob="{SCRIPT_NAME}"}} 2' in reply.text


def test_api_status_is_status_json(server, filled):
    reply = server.fetch(server.url + "api/status")
    assert reply.status == 200 and reply.headers["Content-Type"] == "application/json"
    served = {j["job"]: j for j in json.loads(reply.body)}
    shown = {j["job"]: j for j in filled.json("status", "--json")}
    assert served.keys() == shown.keys() == {"demo", SCRIPT_NAME, HOURLY}
    for name in shown:
        for key in ("last_run", "counts", "missed", "health", "schedule", "last_success_at"):
            assert served[name][key] == shown[name][key], (name, key)


def test_api_history_is_history_json(server, filled):
    served = server.fetch(f"{server.url}api/jobs/{HOURLY}/history?limit=7")
    assert served.status == 200
    assert json.loads(served.body) == filled.json("history", HOURLY, "--limit", "7", "--json")
    default = json.loads(server.fetch(f"{server.url}api/jobs/{quote(SCRIPT_NAME, safe='')}/history").body)
    assert default == filled.json("history", SCRIPT_NAME, "--json")
    assert server.fetch(f"{server.url}api/jobs/{HOURLY}/history?limit=0").status == 400


def test_healthz_answers_when_the_ledger_does(server):
    reply = server.fetch(server.url + "healthz")
    assert (reply.status, reply.text) == (200, "ok\n")


# -- refusals ----------------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
@pytest.mark.parametrize("path", ["", "metrics", "jobs/demo", "api/status", "healthz"])
def test_only_get_and_head(server, method, path):
    reply = server.fetch(server.url + path, method=method)
    assert reply.status == 405 and reply.headers["Allow"] == "GET, HEAD"
    with_body = server.fetch(server.url + path, method=method, data=b"x=1")
    assert with_body.status == 413 and with_body.text == "413 Content Too Large: cronwrap serve takes no request body\n"


def test_head_gives_headers_without_a_body(server):
    head, get = server.fetch(server.url, method="HEAD"), server.fetch(server.url)
    assert head.status == 200 and head.body == b""
    assert abs(int(head.headers["Content-Length"]) - len(get.body)) < 200  # "N s ago" may change


@pytest.mark.parametrize("path", ["jobs/nope", "jobs/demo/runs/999999", "jobs/demo/runs/x",
                                  "jobs/nope/runs/1", "api/jobs/nope/history", "nothing",
                                  "jobs/demo/extra/1"])
def test_unknown_job_run_or_page_is_404(server, path):
    assert server.fetch(server.url + path).status == 404


def test_a_run_of_another_job_is_404(server, filled):
    (run,) = filled.json("history", "demo", "--json")
    assert server.fetch(f"{job_url(server, HOURLY)}/runs/{run['run_id']}").status == 404


# -- listening safely --------------------------------------------------------------------------

@pytest.mark.parametrize("listen", ["0.0.0.0:0", "[::]:0", "192.0.2.1:8080", "example.com:80"])
def test_no_auth_beyond_loopback_is_refused(cw, listen):
    proc = cw("serve", "--listen", listen, "--no-auth", timeout=20)
    assert proc.returncode == 125 and proc.stdout == b""
    lines = proc.stderr.decode().splitlines()
    assert len(lines) == 1 and "--no-auth" in lines[0] and "not a loopback" in lines[0], lines


@pytest.mark.parametrize("listen", ["8080", "host:", "127.0.0.1:99999", ":80"])
def test_a_bad_listen_address_is_refused(cw, listen):
    proc = cw("serve", "--listen", listen, timeout=20)
    assert proc.returncode == 125 and len(proc.stderr.splitlines()) == 1
    assert b"--listen" in proc.stderr


def token_file(tmp_path, mode: int = 0o600, text: str = "s3cret-t0ken-value\n"):
    path = tmp_path / "token"
    path.write_text(text)
    os.chmod(path, mode)
    return path


def test_with_a_token_every_request_needs_it(filled, tmp_path):
    path = token_file(tmp_path)
    running = Server(filled, "--token-file", str(path))
    try:
        for p in ("", "metrics", "healthz", "api/status", f"jobs/{HOURLY}", "nothing"):
            assert running.fetch(running.url + p).status == 401, p
            assert running.fetch(running.url + p, headers={"Authorization": "Bearer wrong"}).status == 401
            assert running.fetch(running.url + p, headers={"Authorization": "Basic czNjcmV0"}).status == 401
        missing = running.fetch(running.url)
        assert missing.headers["WWW-Authenticate"].startswith("Bearer")
        good = {"Authorization": "Bearer s3cret-t0ken-value"}
        bodies = [running.fetch(running.url + p, headers=good) for p in ("", "metrics", f"jobs/{HOURLY}")]
        assert [b.status for b in bodies] == [200, 200, 200]
        assert running.fetch(running.url, method="POST", headers=good).status == 405
        assert running.fetch(running.url, method="POST").status == 401
    finally:
        out, err = running.stop()
    assert all("s3cret" not in b.text for b in bodies)
    assert "s3cret" not in out + err


def test_a_token_lets_it_listen_beyond_loopback(filled, tmp_path):
    proc = filled.popen("serve", "--listen", "0.0.0.0:0", "--token-file",
                        str(token_file(tmp_path)), text=True)
    try:
        line = proc.stdout.readline()
        assert "listening on http://0.0.0.0:" in line and line.endswith("; token from --token-file\n")
    finally:
        proc.terminate()
        proc.communicate(timeout=10)


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660])
def test_a_token_file_others_can_read_is_refused(cw, tmp_path, mode):
    proc = cw("serve", "--token-file", str(token_file(tmp_path, mode)), timeout=20)
    assert proc.returncode == 125 and len(proc.stderr.splitlines()) == 1
    assert b"chmod 600" in proc.stderr and b"s3cret" not in proc.stderr


def test_a_token_file_symlink_or_empty_is_refused(cw, tmp_path):
    real = token_file(tmp_path)
    link = tmp_path / "link"
    link.symlink_to(real)
    for path in (link, token_file(tmp_path, text="\n"), tmp_path / "missing"):
        proc = cw("serve", "--token-file", str(path), timeout=20)
        assert proc.returncode == 125 and len(proc.stderr.splitlines()) == 1, path
        assert b"--token-file" in proc.stderr and b"s3cret" not in proc.stderr


# -- a ledger that does not answer --------------------------------------------------------------

def test_an_unreachable_ledger_gives_a_page_that_says_so(cw):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    running = Server(cw, "--db", f"postgresql://ops:hunter2pw@127.0.0.1:{port}/ledger")
    try:
        replies = [running.fetch(running.url + p) for p in ("", "healthz", "metrics", "jobs/x")]
    finally:
        out, err = running.stop()
    assert [r.status for r in replies] == [503] * 4
    assert "The ledger is not answering" in replies[0].text
    assert all("hunter2pw" not in r.text for r in replies) and "hunter2pw" not in out + err
    assert "ops:***@" not in out and "***@127.0.0.1" in out  # the label is redacted


def test_a_ledger_that_hangs_gives_a_page_not_a_hang(cw):
    """A server that accepts the connection and never says a word: the page says so once
    the request's deadline passes, and the server answers other requests meanwhile."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        silent.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(silent.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    port = silent.getsockname()[1]
    running = Server(cw, "--db", f"postgresql://ops@127.0.0.1:{port}/ledger",
                     env={"PGCONNECT_TIMEOUT": "120"})
    try:
        reply = running.fetch(running.url, timeout=60)
    finally:
        running.stop()
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        silent.close()
    assert reply.status == 503 and "did not answer" in reply.text


def test_a_name_with_a_slash_has_its_pages_encoded_or_decoded_by_a_proxy(filled):
    filled("run", "-n", "db/backup", "--", "true")
    running = Server(filled)
    try:
        overview = running.fetch(running.url).text
        encoded, decoded = running.fetch(f"{running.url}jobs/db%2Fbackup"), running.fetch(f"{running.url}jobs/db/backup")
        run_id = re.search(r'<a href="../jobs/db%2Fbackup/runs/(\d+)">', encoded.text).group(1)
        run = running.fetch(f"{running.url}jobs/db/backup/runs/{run_id}")
        history = running.fetch(f"{running.url}api/jobs/db/backup/history")
        links = [urljoin(f"{running.url}jobs/db/backup", href) for href in
                 re.findall(r'href="([^"]+)"', decoded.text)]  # as a browser follows them
        followed = [running.fetch(link).status for link in links]
    finally:
        running.stop()
    assert 'href="jobs/db%2Fbackup"' in overview
    assert (encoded.status, decoded.status, run.status, history.status) == (200, 200, 200, 200)
    assert "<h1>db/backup</h1>" in decoded.text and json.loads(history.body)[0]["job"] == "db/backup"
    assert running.url in links and f"{running.url}jobs/db%2Fbackup/runs/{run_id}" in links
    assert followed == [200] * len(links)


@pytest.mark.postgres
def test_pointed_at_the_fleets_postgresql_it_shows_the_fleet(cw, pg_dsn):
    for host, job in (("web-1", "rotate-logs"), ("db-1", "vacuum")):
        cw("run", "-n", job, "--host", host, "--db", pg_dsn, "--", "true", check_rc=0)
    running = Server(cw, env={"CRONWRAP_DB": pg_dsn})
    try:
        overview, metrics = running.fetch(running.url).text, running.fetch(running.url + "metrics").text
        api = json.loads(running.fetch(running.url + "api/status").body)
    finally:
        running.stop()
    for host, job in (("web-1", "rotate-logs"), ("db-1", "vacuum")):
        row = next(r for r in overview.split("<tr ") if f'href="jobs/{job}"' in r)
        assert f"<td>{host}</td>" in row
        assert f'cronwrap_health{{cronjob="{job}"}} 0' in metrics
    assert {j["last_run"]["host"] for j in api} == {"web-1", "db-1"}


# -- the dashboard says why (issue 23 §2) --------------------------------------------------------

def row_of(text: str, href: str) -> str:
    return next(r for r in text.split("<tr ") if f'href="{href}"' in r)


def test_overview_gives_a_failing_jobs_last_output_line(server):
    text = server.fetch(server.url).text
    script = row_of(text, f"jobs/{quote(SCRIPT_NAME, safe='')}")
    tail = re.search(r'<span class="tail" id="tail-(\d+)">(.*?)</span>', script).group(2)
    assert re.fullmatch(r'<a href="jobs/%3Cscript%3Ealert%281%29%3C%2Fscript%3E/runs/\d+">run \d+</a> '
                        r"failed \(exit 3\) \S+ ago: &lt;img src=x onerror=alert\(3\)&gt;", tail), tail
    hourly = row_of(text, f"jobs/{HOURLY}")
    assert re.search(r"</a> timeout \(exit 124\) \S+ ago: boom</span>", hourly)
    assert 'class="tail"' not in row_of(text, "jobs/demo")  # ok: nothing to say


def test_a_failing_jobs_page_shows_its_last_output(server, filled):
    (run,) = filled.json("history", SCRIPT_NAME, "--json")
    text = server.fetch(job_url(server, SCRIPT_NAME)).text
    assert f'Last failure: <a href="../jobs/{quote(SCRIPT_NAME, safe="")}/runs/{run["run_id"]}">' in text
    assert re.search(r'<p id="failure"><span class="s-red">failed</span>: the job exited with '
                     r"status 3; <time ", text)
    output = re.search(r'<pre id="failure-output">(.*?)</pre>', text, re.S).group(1)
    assert output == "&lt;script&gt;alert(2)&lt;/script&gt;\n&lt;img src=x onerror=alert(3)&gt;\n"
    hourly = server.fetch(job_url(server, HOURLY)).text  # the file is not here: the ledger's tail
    assert "the ledger&#x27;s tail" in hourly and '<pre id="failure-output">boom\n</pre>' in hourly
    assert "timeout</span>: it reached its --timeout and was ended (exit 124)" in hourly
    assert 'id="failure' not in server.fetch(job_url(server, "demo")).text


def test_a_long_failure_shows_its_last_lines(filled):
    filled("run", "-n", "chatty", "--", "sh", "-c", "seq 1 100; exit 9")
    running = Server(filled)
    try:
        text = running.fetch(job_url(running, "chatty")).text
        overview = running.fetch(running.url).text
    finally:
        running.stop()
    output = re.search(r'<pre id="failure-output">(.*?)</pre>', text, re.S).group(1)
    assert output.splitlines() == [str(n) for n in range(61, 101)]
    assert "its last 40 of 100 lines" in text
    assert re.search(r"failed \(exit 9\) \S+ ago: 100</span>", row_of(overview, "jobs/chatty"))


def test_run_page_leads_with_what_happened(server, filled):
    (run,) = filled.json("history", HOURLY, "--limit", "1", "--json")
    text = server.fetch(f"{job_url(server, HOURLY)}/runs/{run['run_id']}").text
    verdict = re.search(r'<p id="verdict">(.*?)</p>', text).group(1)
    assert verdict == ('<span class="s-magenta">timeout</span>: it reached its --timeout and was '
                       "ended (exit 124)")
    what = dict(re.findall(r"<tr><th>(\w+)</th><td>(.*?)</td></tr>",
                           re.search(r'<table id="what">(.*?)</table>', text).group(1)))
    assert what["took"] == "2m30s" and what["exit"] == "124" and what["attempt"] == "1"
    assert what["host"] == f"host-a (pid {run['pid']})"
    assert what["trigger"] == "schedule (cron fired it for its slot)"
    slot = run["scheduled_at"].replace("T", " ")[:19]
    assert what["slot"].startswith(f'<time datetime="{run["scheduled_at"]}">{slot} UTC</time>')
    assert f'(run key <span class="mono">{run["run_key"]}</span>)' in what["slot"]
    # what happened, then the output, then the ledger's fields, folded
    order = [text.index(s) for s in ('id="verdict"', 'id="what"', 'id="output"',
                                     '<details id="details">', 'id="fields"')]
    assert order == sorted(order)
    assert "<tr><th>error_tail</th><td class=\"mono\"><pre>boom\n</pre></td></tr>" in text
    assert "\\x0a" not in text


def test_run_page_events_read_as_key_value(server, filled):
    (run,) = filled.json("history", "demo", "--json")
    text = server.fetch(f"{job_url(server, 'demo')}/runs/{run['run_id']}").text
    events = re.search(r'<table id="events">(.*?)</table>', text, re.S).group(1)
    assert "None" not in events and "False" not in events and "True" not in events
    def more(event: str) -> dict[str, str]:
        row = next(r for r in events.split("<tr>") if f"<td>{event}</td>" in r)
        return dict(p.split("=", 1) for p in re.findall(r"<td>([^<]*)</td>", row)[-1].split(" "))

    assert more("start")["fence"] == str(run["fence"]) and more("start")["took_over"] == "false"
    assert more("finish")["output_bytes"] == "28" and more("finish")["orphans"] == "0"


def test_runs_tables_give_times_in_the_jobs_zone(filled):
    from datetime import datetime
    from zoneinfo import ZoneInfo

    filled("run", "-n", "berlin", "--schedule", "30 2 * * *", "--tz", "Europe/Berlin", "--",
           "true")
    (run,) = filled.json("history", "berlin", "--json")
    running = Server(filled)
    try:
        job = running.fetch(job_url(running, "berlin")).text
        page = running.fetch(f"{job_url(running, 'berlin')}/runs/{run['run_id']}").text
        hourly = running.fetch(job_url(running, HOURLY)).text
    finally:
        running.stop()
    started = datetime.fromisoformat(run["started_at"]).astimezone(ZoneInfo("Europe/Berlin"))
    shown = f"{started:%Y-%m-%d %H:%M:%S %Z}"
    assert shown.endswith((" CET", " CEST"))
    assert "<th>started (Europe/Berlin)</th>" in job
    assert re.search(rf'<td><time datetime="{re.escape(run["started_at"])}">{shown}</time> '
                     r'<span class="muted">[^<]+ ago</span></td>', job)
    assert f">{shown}</time>" in page
    slot = datetime.fromisoformat(run["scheduled_at"]).astimezone(ZoneInfo("Europe/Berlin"))
    assert f">{slot:%Y-%m-%d} 02:30:00 {slot:%Z}</time>" in page
    assert "<th>started (UTC)</th>" in hourly  # a job in UTC


def test_overview_filters_by_health_and_name(server):
    every = server.fetch(server.url).text
    assert re.search(r'<a href="\./" class="" aria-current="page">all 3</a> · '
                     r'<a href="\./\?health=critical" class="sev-2">critical 2</a> · '
                     r'<a href="\./\?health=(ok|warning)" class="sev-[01]">(ok|warning) 1</a>', every)
    assert '<form method="get" action="./" role="search">' in every
    assert 'name="host"' not in every  # no host-scoped jobs: no host menu

    def names(url: str) -> list[str]:
        reply = server.fetch(server.url + url)
        assert reply.status == 200, url
        return re.findall(r'<tr data-health="\w+"><td><a href="jobs/([^"]+)">', reply.text)

    assert sorted(names("?health=critical")) == sorted([quote(SCRIPT_NAME, safe=""), HOURLY])
    assert names("?q=HOURLY-rep") == [HOURLY]
    assert names("?q=script&health=critical") == [quote(SCRIPT_NAME, safe="")]
    assert names("?q=nothing-like-it") == []
    assert 'No job matches this filter: <a href="./">show every job</a>' in server.fetch(
        server.url + "?q=nothing-like-it").text
    narrowed = server.fetch(server.url + "?q=demo").text
    assert "<h1>cronwrap: 1 of 3 jobs</h1>" in narrowed
    assert re.search(r'<a href="\./\?health=(ok|warning)&amp;q=demo" class="sev-[01]">\1 1</a>',
                     narrowed)  # the name kept
    assert '<input type="search" name="q" value="demo"' in narrowed
    bad = server.fetch(server.url + "?health=purple")
    assert bad.status == 400 and "critical, warning, ok" in bad.text
    assert server.fetch(server.url + "?q=" + "x" * 201).status == 400
    assert "form-action 'self'" in server.fetch(server.url).headers["Content-Security-Policy"]


def test_overview_filters_host_scoped_jobs_by_host(filled):
    for host in ("web1", "web2"):
        filled("run", "-n", "rotate", "--scope", "host", "--host", host, "--", "true", check_rc=0)
    running = Server(filled)
    try:
        every = running.fetch(running.url).text
        web1 = running.fetch(running.url + "?host=web1").text
        both = running.fetch(running.url + "?q=ROTATE@WEB2").text
    finally:
        running.stop()
    assert ('<select name="host" aria-label="host"><option value="">every host</option>'
            '<option value="web1">web1</option><option value="web2">web2</option></select>') in every
    shown = re.findall(r'<tr data-health="\w+"><td><a href="jobs/[^"]+">([^<]+)</a>', web1)
    assert shown == ["rotate@web1"]  # only that host's rows of host jobs, as status --host
    assert '<option value="web1" selected>' in web1
    assert re.findall(r'<tr data-health="\w+"><td><a href="jobs/[^"]+">([^<]+)</a>', both) == \
        ["rotate@web2"]


def test_the_chart_plots_a_backfill_by_slot(filled):
    filled("run", "-n", "settle", "--schedule", "30 1 * * *", "--date", "2026-10-20..2026-10-24",
           "--", "true", check_rc=0)
    running = Server(filled)
    try:
        text = running.fetch(job_url(running, "settle")).text
    finally:
        running.stop()
    xs = sorted(float(x) for x in re.findall(r'<circle [^>]*cx="([\d.]+)"', text))
    # a day apart, at their slots, weeks before now (by start time they all sat at "now")
    assert len(xs) == 5
    gaps = [b - a for a, b in zip(xs, xs[1:])]
    assert max(gaps) - min(gaps) < 0.5 and max(xs) < 900 - 36 - 100, xs
    assert re.search(r">slot 2026-10-20 01:30 \S+</text>", text)


def test_run_page_lists_the_slots_earlier_attempts(filled):
    filled("run", "-n", "flaky", "--retries", "1", "--retry-delay", "0", "--", "sh", "-c",
           "echo try; exit 75")
    (run,) = filled.json("history", "flaky", "--json")
    assert run["attempt"] == 2 and len(run["attempts"]) == 2
    running = Server(filled)
    try:
        text = running.fetch(f"{job_url(running, 'flaky')}/runs/{run['run_id']}").text
    finally:
        running.stop()
    what = dict(re.findall(r"<tr><th>(\w+)</th><td>(.*?)</td></tr>",
                           re.search(r'<table id="what">(.*?)</table>', text).group(1)))
    assert what["attempt"] == "2"
    assert re.fullmatch(r'attempt 1: <span class="s-red">failed</span>, exit 75 on [^,<]+, '
                        r'started <time datetime="[^"]+">[^<]+ UTC</time> <span class="muted">'
                        r"[^<]+ ago</span>", what["earlier"]), what["earlier"]
