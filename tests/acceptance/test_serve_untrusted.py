"""``cronwrap serve`` treats every client as untrusted (issue 20 §4), through the real
executable: a token on loopback too, the ``?token=`` sign-in, ``--no-auth`` only where it is
safe (checked on the address actually bound), idle and slow sockets that cannot starve an
authorised request, a body refused before it is read, and answers that stay bounded on a long
history."""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import subprocess
import time
from urllib.parse import quote, urljoin

import pytest

from tests.acceptance.conftest import wait_for
from tests.acceptance import dashboard
from tests.acceptance.dashboard import HOURLY, Server
from tests.needs import missing

filled, server = dashboard.filled, dashboard.server  # the fixtures of test_serve.py too


def port_of(server: Server) -> int:
    return int(server.url.rstrip("/").rpartition(":")[2])


def connect(server: Server, source: str = "127.0.0.1") -> socket.socket:
    return socket.create_connection(("127.0.0.1", port_of(server)), timeout=10,
                                    source_address=(source, 0))


def closed_by_server(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except ConnectionError:
        return True
    finally:
        sock.setblocking(True)


def answer(sock: socket.socket, timeout: float = 20) -> bytes:
    """One answer with a Content-Length, header and body, as the server sends it."""
    sock.settimeout(timeout)
    data = b""
    while True:
        head, sep, body = data.partition(b"\r\n\r\n")
        length = re.search(rb"\r\nContent-Length: (\d+)\r\n", head + b"\r\n")
        if sep and length and len(body) >= int(length.group(1)):
            return data
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk


# -- a token on every address, loopback included -----------------------------------------------

def test_by_default_every_request_needs_the_token_made_at_start(filled):
    running = Server(filled)
    try:
        token, kept = running.token, running.token_file
        assert kept is not None and kept.parent == filled.home / "serve"
        assert stat.S_IMODE(kept.stat().st_mode) == 0o600
        assert stat.S_IMODE(kept.parent.stat().st_mode) == 0o700
        assert kept.read_text() == f"{token}\n" and len(token) >= 40
        assert running.token_url == f"{running.url}?token={token}"
        for path in ("", "metrics", "healthz", "api/status", f"api/jobs/{HOURLY}/history",
                     f"jobs/{HOURLY}", "nothing"):
            refused = running.fetch(running.url + path, auth=False)
            assert refused.status == 401, path
            assert refused.headers["WWW-Authenticate"].startswith("Bearer") and token not in refused.text
        assert running.fetch(running.url + "api/status").status == 200
        assert running.fetch(running.url + "metrics", headers={"Authorization": f"bearer {token}"},
                             auth=False).status == 200  # the scheme's case does not matter
    finally:
        out, err = running.stop()
    assert token not in err and out.count(token) == 1  # once: in the URL printed at start
    assert not kept.exists()  # removed when serve ends


@pytest.mark.parametrize("planted", ["symlink", "hard link"])
def test_the_token_file_is_never_written_through_a_link(cw, tmp_path, planted):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    place = cw.home / "serve" / f"127.0.0.1-{port}.token"
    place.parent.mkdir(parents=True, mode=0o700)
    place.symlink_to(victim) if planted == "symlink" else os.link(victim, place)
    running = Server(cw, listen=f"127.0.0.1:{port}")
    try:
        assert running.token_file == place and not place.is_symlink()
        assert place.stat().st_nlink == 1 and place.read_text() == f"{running.token}\n"
        assert victim.read_text() == "keep me\n"
    finally:
        running.stop()
    assert victim.read_text() == "keep me\n"


def test_the_token_once_in_the_url_signs_a_browser_in(filled):
    running = Server(filled)
    try:
        token = running.token
        reply = running.fetch(f"{running.url}jobs/{HOURLY}?before=60&token={token}", auth=False)
        assert reply.status == 303 and reply.headers["Location"] == f"./{HOURLY}?before=60"
        cookie = reply.headers["Set-Cookie"]
        pair, *attributes = [part.strip() for part in cookie.split(";")]
        assert {a.lower() for a in attributes} == {"path=/", "httponly", "samesite=strict"}
        assert token not in cookie and token not in reply.text
        signed_in = {"Cookie": f"theme=dark; {pair}"}
        page = running.fetch(f"{running.url}jobs/{HOURLY}", headers=signed_in, auth=False)
        assert page.status == 200 and f"<h1>{HOURLY}</h1>" in page.text
        name = pair.partition("=")[0]
        assert running.fetch(running.url, headers={"Cookie": f"{name}={token}"},
                             auth=False).status == 401  # the cookie is not the token
        assert running.fetch(f"{running.url}?token={token}", auth=False).headers["Location"] == "./"
        wrong = running.fetch(f"{running.url}?token=not-{token}", auth=False)
        assert wrong.status == 401 and "Set-Cookie" not in wrong.headers
    finally:
        out, err = running.stop()
    assert out.count(token) == 1 and token not in err


def test_no_auth_serves_loopback_only_and_says_so_everywhere(filled):
    running = Server(filled, "--no-auth")
    try:
        assert "no authentication (--no-auth)" in running.line and running.token is None
        assert running.fetch(running.url + "api/status").status == 200
        for path in ("", f"jobs/{HOURLY}", "nothing"):
            assert 'id="no-auth"' in running.fetch(running.url + path).text, path
        health = running.fetch(running.url + "healthz").text
        assert health.startswith("ok\n") and "No authentication" in health
    finally:
        running.stop()
    both = filled("serve", "--no-auth", "--token-file", "/dev/null", timeout=20)
    assert both.returncode == 125 and len(both.stderr.splitlines()) == 1


def hosts_say_localhost_is(address: str, tmp_path):
    """A runner of cronwrap in a mount namespace of its own whose /etc/hosts says
    ``ADDRESS localhost`` (tests run as root; elsewhere, this test cannot be made)."""
    probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True)
    if probe.returncode != 0:
        missing(f"unshare --mount is not permitted here: {probe.stderr.decode().strip()}",
                "the /etc/hosts tests of serve")
    hosts = tmp_path / "hosts"
    hosts.write_text(f"{address} localhost\n")
    return ["unshare", "--mount", "sh", "-c", 'mount --bind "$0" /etc/hosts && exec "$@"',
            str(hosts)]


class Unshared:
    """``cw`` run under ``prefix``."""

    def __init__(self, cw, prefix: list[str]) -> None:
        self.cw, self.prefix = cw, prefix

    def popen(self, *args: str, env=None, **kw) -> subprocess.Popen:
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        return subprocess.Popen([*self.prefix, *self.cw.argv, *args], env=self.cw.env(env), **kw)


def test_localhost_is_what_it_resolves_to(cw, tmp_path):
    """With ``0.0.0.0 localhost`` in /etc/hosts, --listen localhost binds 0.0.0.0: --no-auth is
    refused (the address bound is checked, not the name), and by default every request on it
    needs the token."""
    prefix = hosts_say_localhost_is("0.0.0.0", tmp_path)
    refused = subprocess.run([*prefix, *cw.argv, "serve", "--listen", "localhost:0", "--no-auth"],
                             env=cw.env(), capture_output=True, timeout=30)
    lines = refused.stderr.decode().splitlines()
    assert refused.returncode == 125 and refused.stdout == b"", (refused.returncode, lines)
    assert len(lines) == 1 and "--no-auth" in lines[0] and "bound http://0.0.0.0:" in lines[0]
    running = Server(Unshared(cw, prefix), listen="localhost:0")
    try:
        assert running.url.startswith("http://0.0.0.0:")
        url = f"http://127.0.0.1:{port_of(running)}/api/status"
        assert running.fetch(url, auth=False).status == 401
        assert running.fetch(url).status == 200
    finally:
        running.stop()


# -- connections that never finish a request ---------------------------------------------------

def test_idle_and_half_sent_connections_do_not_starve_an_authorised_request(server):
    """100 idle connections from one address and 100 that sent half a header from the
    authorised client's own address: /healthz is answered within 2 s, and each crowd is cut
    down to the per-address limit."""
    idle = [connect(server, "127.0.0.2") for _ in range(100)]
    half = []
    for _ in range(100):
        sock = connect(server)
        sock.sendall(b"GET /api/status HTTP/1.1\r\nHost: dashboard\r\nX-Slow: ")
        half.append(sock)
    try:
        started = time.monotonic()
        reply = server.fetch(server.url + "healthz", timeout=2)
        took = time.monotonic() - started
        assert (reply.status, reply.text) == (200, "ok\n") and took < 2, took
        for crowd in (idle, half):
            wait_for(lambda: sum(map(closed_by_server, crowd)) >= 80, 30, "the crowd cut to 20")
    finally:
        for sock in idle + half:
            sock.close()


def test_beyond_20_waiting_connections_of_an_address_its_oldest_are_closed(server):
    """Room is made from the crowd's own address, oldest first; another address keeps its
    connections."""
    others = [connect(server, "127.0.0.3") for _ in range(5)]
    crowd = [connect(server, "127.0.0.2") for _ in range(30)]
    try:
        wait_for(lambda: all(map(closed_by_server, crowd[:10])), 8, "the oldest 10 closed")
        assert not any(map(closed_by_server, crowd[10:] + others))  # long before the deadline
    finally:
        for sock in crowd + others:
            sock.close()


def test_a_header_sent_byte_by_byte_meets_its_deadline(server):
    """A connection must finish its header within 10 s however it trickles (waitress's own
    timeout restarts at every byte)."""
    sock = connect(server)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: dashboard\r\n")
    started, closed = time.monotonic(), False
    try:
        while not closed and time.monotonic() - started < 60:
            try:
                sock.sendall(b"X")
            except ConnectionError:
                closed = True
            closed = closed or closed_by_server(sock)
            time.sleep(0.5)
    finally:
        sock.close()
    assert closed, "the trickling connection was still open after 60 s"


# -- no request body ---------------------------------------------------------------------------

@pytest.mark.parametrize("authorised", [False, True])
@pytest.mark.parametrize("framing", ["Content-Length: 1000000000", "Transfer-Encoding: chunked",
                                     "Content-Length: 1000000000\r\nExpect: 100-continue"])
def test_a_body_is_refused_before_it_is_read(filled, tmp_path, authorised, framing):
    spool = tmp_path / "spool"
    spool.mkdir()
    running = Server(filled, env={"TMPDIR": str(spool)})
    sock = connect(running)
    try:
        auth = f"Authorization: Bearer {running.token}\r\n" if authorised else ""
        sock.sendall(f"POST /api/status HTTP/1.1\r\nHost: dashboard\r\n{auth}{framing}\r\n\r\n"
                     .encode())
        said = answer(sock)  # before a byte of the body is sent
        assert said.startswith(b"HTTP/1.1 413 Content Too Large\r\n"), said[:200]
        assert b"100 Continue" not in said and b"Connection: close" in said
        assert said.endswith(b"\r\n\r\n413 Content Too Large: cronwrap serve takes no request body\n")
        with pytest.raises((BrokenPipeError, ConnectionResetError)):  # closed: the rest refused
            for _ in range(1024):
                sock.sendall(b"x" * 65536)  # up to 64 MiB
        files = [os.readlink(f"/proc/{running.proc.pid}/fd/{fd}")
                 for fd in os.listdir(f"/proc/{running.proc.pid}/fd")]
        assert not [f for f in files if str(spool) in f or "(deleted)" in f], files
        assert running.fetch(running.url + "healthz").status == 200
    finally:
        sock.close()
        running.stop()


# -- bounded answers on a long history ---------------------------------------------------------

RUNS = 200_000


def peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmHWM:\s+(\d+) kB", f.read()).group(1)) / 1024


def test_answers_stay_bounded_on_a_job_of_200000_runs(cw):
    """The issue's figures: history?limit=100000 took 1.25 GB, /jobs/j?page=2000 443 MB.
    Now: a capped limit (400 above it, with how to page), keyset pages by run id (50 rows,
    near the oldest runs too), and the server's peak RSS stays small."""
    from bench.ledger_data import build_sqlite

    cw.home.mkdir(mode=0o700)
    build_sqlite(str(cw.home / "ledger.db"), 1, RUNS, time.time())
    running = Server(cw)
    try:
        base = f"{running.url}api/jobs/job-000/history"
        too_many = running.fetch(f"{base}?limit=100000")
        assert too_many.status == 400 and len(too_many.text.splitlines()) == 1
        assert "1 to 1000" in too_many.text and "before=RUN_ID" in too_many.text
        first = running.fetch(f"{base}?limit=1000")
        ids = [r["run_id"] for r in json.loads(first.body)]
        assert ids == list(range(RUNS, RUNS - 1000, -1))
        link = re.fullmatch(r'<([^>]+)>; rel="next"', first.headers["Link"]).group(1)
        second = running.fetch(urljoin(f"{base}?limit=1000", link))
        assert [r["run_id"] for r in json.loads(second.body)] == list(range(RUNS - 1000, RUNS - 2000, -1))
        old_link = running.fetch(f"{running.url}jobs/job-000?page=2000")
        assert old_link.status == 303 and old_link.headers["Location"] == "./job-000"
        deep = running.fetch(f"{running.url}jobs/job-000?before=60").text
        rows = [int(i) for i in re.findall(r'<a href="../jobs/job-000/runs/(\d+)">',
                                           deep.split('id="runs"')[1])]
        assert rows == list(range(59, 9, -1))
        assert 'rel="next" href="../jobs/job-000?before=10"' in deep
        assert 'rel="prev" href="../jobs/job-000?before=110"' in deep
        last = running.fetch(f"{running.url}jobs/job-000?before=10").text
        assert len(re.findall(r'/runs/\d+">', last.split('id="runs"')[1])) == 9
        assert 'rel="next"' not in last
        assert running.fetch(f"{running.url}jobs/job-000?before=x").status == 400
        peak = peak_rss_mb(running.proc.pid)
    finally:
        running.stop()
    assert peak < 150, f"serve's peak RSS was {peak:.0f} MB"


# -- what a job wrote, shown as text (issue 23 §2) -----------------------------------------------

HOSTILE = "\"><img src=x onerror=alert(7)>'<svg/onload=alert(8)>"
HOSTILE_SHOWN = "&quot;&gt;&lt;img src=x onerror=alert(7)&gt;&#x27;&lt;svg/onload=alert(8)&gt;"
LAST_LINE = "</pre></span><script>alert(9)</script>\x1b]0;retitled\x07 \"q\" &amp; 'a'"
LAST_SHOWN = ("&lt;/pre&gt;&lt;/span&gt;&lt;script&gt;alert(9)&lt;/script&gt;\\x1b]0;retitled"
              "\\x07 &quot;q&quot; &amp;amp; &#x27;a&#x27;")


def raw_markup(text: str) -> list[str]:
    """Elements a page should never hold: any made of what the job wrote."""
    return [m for m in ("<script", "<img", "<svg/", "onerror=alert(7)>", "\x1b", "\x07")
            if m in text]


def test_a_failures_output_and_the_filter_stay_text(filled):
    filled("run", "-n", HOSTILE, "--", "sh", "-c", 'printf "%s\\n" "$FIRST" "$LAST"; exit 4',
           env={"FIRST": "<b>first</b>", "LAST": LAST_LINE})
    (run,) = filled.json("history", HOSTILE, "--json")
    running = Server(filled)
    job = f"jobs/{quote(HOSTILE, safe='')}"
    try:
        overview = running.fetch(running.url).text
        page = running.fetch(f"{running.url}{job}").text
        run_page = running.fetch(f"{running.url}{job}/runs/{run['run_id']}").text
        filtered = running.fetch(f"{running.url}?q={quote(HOSTILE)}&host={quote(HOSTILE)}"
                                 "&health=critical")
        by_name = running.fetch(f"{running.url}?q={quote(HOSTILE[:6])}").text
    finally:
        running.stop()
    for text in (overview, page, run_page, filtered.text, by_name):
        assert not raw_markup(text), raw_markup(text)
    row = next(r for r in overview.split("<tr ") if f'href="{job}"' in r)
    assert f">{HOSTILE_SHOWN}</a>" in row
    assert re.search(rf"failed \(exit 4\) \S+ ago: {re.escape(LAST_SHOWN)}</span>", row), row
    output = f"&lt;b&gt;first&lt;/b&gt;\n{LAST_SHOWN}\n"
    assert f'<pre id="failure-output">{output}</pre>' in page
    assert f'<pre id="output">{output}</pre>' in run_page
    assert f"<tr><th>error_tail</th><td class=\"mono\"><pre>{output}</pre></td></tr>" in run_page
    assert '<p id="verdict"><span class="s-red">failed</span>: the job exited with status 4</p>' \
        in run_page
    # the filter says back what it was given, as text: in the form, the menu and the links
    assert filtered.status == 200
    assert f'<input type="search" name="q" value="{HOSTILE_SHOWN}"' in filtered.text
    assert f'<option value="{HOSTILE_SHOWN}" selected>{HOSTILE_SHOWN}</option>' in filtered.text
    assert 'href="./?health=critical&amp;host=%22%3E%3Cimg' in filtered.text
    assert re.findall(r'<tr data-health="\w+"><td><a href="([^"]+)">', by_name) == [job]
