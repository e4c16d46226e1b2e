"""The dashboard in a real browser: Debian's chromium, headless, as a separate process, loads
the overview, a failing job's page and a run page from a real ``cronwrap serve``; what it
shows is checked and screenshots saved: at 1400 px, at a phone's 390 px, and in dark mode.
Signing in is a browser's too: the URL printed at start (``?token=``) is opened, and the
browser, driven over the DevTools protocol, keeps the cookie and uses it. tests/run.sh
installs chromium when it is missing; under CI=true a missing browser fails the test instead
of skipping it.

Dark mode: Debian's chromium (156) answers ``prefers-color-scheme: dark`` under
``--force-dark-mode`` (headless too); the test compares a pixel of the two screenshots, so a
chromium that stopped honouring it fails here rather than leaving README a light picture.

TEST_SCREENSHOTS=DIR also copies README's screenshots there (README_SHOTS: docs/)."""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import struct
import subprocess
import time
import zlib
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.needs import missing

from tests.acceptance.dashboard import HOURLY, SCRIPT_NAME, Server, fill_ledger

PNG = b"\x89PNG\r\n\x1a\n"
README_SHOTS = ("serve.png", "serve-narrow.png", "serve-dark.png")  # README shows these (docs/)


@pytest.fixture(scope="module")
def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        missing("no chromium (Debian's chromium package; tests/run.sh installs it)",
                "browser tests")
    return found


def browse(chromium: str, tmp_path: Path, url: str, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / "chromium-profile"
    argv = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-proxy-server",
            "--no-first-run", "--hide-scrollbars", f"--user-data-dir={profile}", *args, url]
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    proc = subprocess.run(argv, capture_output=True, timeout=180, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def screenshot(chromium: str, tmp_path: Path, url: str, name: str, size: str = "1400,900",
               *args: str) -> Path:
    file = tmp_path / name
    browse(chromium, tmp_path, url, f"--screenshot={file}", f"--window-size={size}", *args)
    data = file.read_bytes()
    assert data.startswith(PNG) and len(data) > 10_000, len(data)  # a page, not a blank
    keep = os.environ.get("TEST_SCREENSHOTS")
    if keep and name in README_SHOTS:
        shutil.copyfile(file, Path(keep) / name)
    return file


@pytest.fixture
def server(cw):
    fill_ledger(cw)
    cw("run", "-n", "nightly-backup", "--schedule", "30 2 * * *", "--tz", "Europe/Berlin",
       "--", "sh", "-c", "echo dumping shop; echo 'pg_dump: error: connection to server failed: "
       "FATAL: password authentication failed for user \"backup\"' >&2; exit 1")
    running = Server(cw)
    yield running
    running.stop()


def signed_in(server, url: str) -> str:
    """``url`` with the token, as a person opens the URL printed at start: the browser is
    sent on to ``url`` itself."""
    return f"{url}{'&' if '?' in url else '?'}token={server.token}"


def test_overview_in_a_browser(chromium, server, tmp_path):
    dom = browse(chromium, tmp_path, server.token_url, "--dump-dom").stdout.decode()
    rows = re.findall(r'<tr data-health="(\w+)"><td><a href="jobs/([^"]+)">([^<]*)</a>', dom)
    assert [(h, n) for h, n, _ in rows][:3] == sorted([(h, n) for h, n, _ in rows][:3])
    assert {h for h, _, _ in rows[:3]} == {"critical"} and rows[3][1] == "demo"
    shown = {text for _, _, text in rows}
    assert shown == {"&lt;script&gt;alert(1)&lt;/script&gt;", "demo", HOURLY, "nightly-backup"}
    assert "<script" not in dom  # the name stayed text: no element was made of it
    assert '<span class="s-magenta">timeout</span>' in dom
    assert "refreshes every 30s" in dom
    screenshot(chromium, tmp_path, server.token_url, "serve.png")


def test_job_page_in_a_browser(chromium, server, tmp_path):
    url = signed_in(server, f"{server.url}jobs/{HOURLY}")
    dom = browse(chromium, tmp_path, url, "--dump-dom").stdout.decode()
    assert "At the start of every hour" in dom and '<svg id="chart"' in dom
    assert len(re.findall(r"<circle ", dom)) >= 60  # a dot per run that has a duration
    assert len(re.findall(r'<a href="../jobs/hourly-report/runs/\d+">', dom.split('id="runs"')[1])) == 50
    screenshot(chromium, tmp_path, url, "serve-job.png")
    script_page = browse(chromium, tmp_path,
                         signed_in(server, f"{server.url}jobs/{quote(SCRIPT_NAME, safe='')}"),
                         "--dump-dom").stdout.decode()
    assert "<h1>&lt;script&gt;alert(1)&lt;/script&gt;</h1>" in script_page
    assert "<script" not in script_page


WALL = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (CET|CEST)")  # a time in Europe/Berlin
FAILURE = 'FATAL: password authentication failed for user "backup"'


def test_a_failure_reads_as_words_output_and_times(chromium, server, tmp_path):
    """What a person sees (innerText: only what is rendered): the overview's line for the
    failing job, its page with the failure's output and times in its zone, and the run page
    that says what happened, with the ledger's fields folded away."""
    browser = DevTools(chromium, tmp_path / "profile")
    try:
        browser.navigate(server.token_url)
        row = browser.evaluate("[...document.querySelectorAll('#jobs tr')].find(tr => "
                               "tr.textContent.includes('nightly-backup')).innerText")
        assert "critical" in row and FAILURE in row and "failed (exit 1)" in row, row
        browser.navigate(f"{server.url}jobs/nightly-backup")
        failure = browser.evaluate("document.querySelector('#failure-output').innerText")
        assert failure == f"dumping shop\npg_dump: error: connection to server failed: {FAILURE}\n"
        assert WALL.search(browser.evaluate("document.querySelector('#failure').innerText"))
        started = browser.evaluate("document.querySelector('#runs tr:nth-child(2) "
                                   "td:nth-child(7)').innerText")
        assert WALL.match(started) and started.endswith(" ago"), started  # absolute, relative
        assert browser.evaluate("document.querySelector('#runs th:nth-child(7)').innerText") == \
            "started (Europe/Berlin)"
        run = browser.evaluate("document.querySelector('#runs td a').getAttribute('href')")
        screenshot(chromium, tmp_path, signed_in(server, f"{server.url}jobs/nightly-backup"),
                   "serve-dark.png", "1400,900", "--force-dark-mode")
        browser.navigate(f"{server.url}jobs/nightly-backup/{run.rpartition('/jobs/nightly-backup/')[2]}")
        text = browser.evaluate("document.body.innerText")
        assert "failed: the job exited with status 1" in text
        assert re.search(r"trigger\t(catchup|schedule) \(", text)
        assert WALL.search(text) and FAILURE in text
        assert "boot_id" not in text and "pid_start" not in text  # folded: not rendered
        assert browser.evaluate("document.querySelector('#details').open") is False
        browser.evaluate("document.querySelector('#details').open = true")
        assert "boot_id" in browser.evaluate("document.body.innerText")
    finally:
        browser.close()


def test_a_phone_keeps_job_health_last_run_and_next_due(chromium, server, tmp_path):
    """At 390 px the overview's rows are cards: job, health (and the failure's line), last
    run with when, next due; nothing is cut off at the right (no horizontal scrolling)."""
    browser = DevTools(chromium, tmp_path / "profile")
    try:
        browser.call("Emulation.setDeviceMetricsOverride", width=390, height=844,
                     deviceScaleFactor=1, mobile=True)
        browser.navigate(server.token_url)
        assert browser.evaluate("innerWidth") == 390
        assert browser.evaluate("document.documentElement.scrollWidth") <= 390
        cells = browser.evaluate(
            "[...document.querySelectorAll('#jobs tr[data-health]')].map(tr => [1, 2, 3, 7, 8]"
            ".map(n => { const td = tr.children[n - 1], r = td.getBoundingClientRect(); "
            "return [r.left, r.right, r.width, getComputedStyle(td).display, td.innerText]; }))")
        assert len(cells) == 4
        for row in cells:
            for left, right, width, display, text in row:
                assert display != "none" and width > 0 and text.strip(), row
                assert 0 <= left and right <= 390, row
        texts = browser.evaluate("[...document.querySelectorAll('#jobs tr[data-health]')]"
                                 ".map(tr => tr.innerText)")
        backup = next(t for t in texts if t.startswith("nightly-backup"))
        assert FAILURE in backup and re.search(r"\nfailed\s*\S+ ago\s*in \d", backup), backup
        labels = browser.evaluate("[3, 8].map(n => getComputedStyle(document.querySelector("
                                  "`#jobs tr[data-health] td:nth-child(${n})`), '::before').content)")
        assert labels == ['"last run "', '"next due "']
    finally:
        browser.close()
    screenshot(chromium, tmp_path, server.token_url, "serve-narrow.png", "390,844")


def first_pixel(png: bytes) -> tuple[int, int, int]:
    """The top left pixel of an 8-bit RGB(A) PNG: the first pixel of the first row is stored as
    it is whatever the row's filter (its neighbours are taken as zero)."""
    at, data = 8, b""
    while at < len(png):
        length, kind = struct.unpack(">I4s", png[at:at + 8])
        if kind == b"IHDR":
            depth, colour = png[at + 16], png[at + 17]
            assert depth == 8 and colour in (2, 6), (depth, colour)
        elif kind == b"IDAT":
            data += png[at + 8:at + 8 + length]
        at += 12 + length
    row = zlib.decompressobj().decompress(data, 4)
    return row[1], row[2], row[3]


def test_dark_mode_follows_the_browsers_preference(chromium, server, tmp_path):
    url = server.token_url
    light = first_pixel(screenshot(chromium, tmp_path, url, "light.png", "800,600").read_bytes())
    dark = first_pixel(screenshot(chromium, tmp_path, url, "dark.png", "800,600",
                                  "--force-dark-mode").read_bytes())
    assert light == (0xff, 0xff, 0xff) and dark == (0x0d, 0x11, 0x17), (light, dark)


class DevTools:
    """Headless chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe:
    the browser reads commands on its fd 3 and writes answers and events on its fd 4, each
    message JSON ended by a NUL), attached to one page."""

    def __init__(self, chromium: str, profile: Path) -> None:
        # bash puts the pipes at fds 3 and 4 (dash reads only one-digit fd numbers)
        to_browser, self._commands = os.pipe()
        self._answers, from_browser = os.pipe()
        argv = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-proxy-server",
                "--no-first-run", f"--user-data-dir={profile}", "--remote-debugging-pipe",
                "about:blank"]
        env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
        self.proc = subprocess.Popen(
            ["bash", "-c", f'exec "$@" 3<&{to_browser} 4>&{from_browser}', "bash", *argv],
            pass_fds=(to_browser, from_browser), env=env, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(to_browser)
        os.close(from_browser)
        self.buffer, self.events, self.ids = b"", [], iter(range(1, 1 << 30))
        self.session: str | None = None
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Page.enable")
        self.call("Network.enable")

    def _message(self, deadline: float) -> dict:
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._answers], [], [], left)[0]:
                raise AssertionError("the browser did not answer in time")
            chunk = os.read(self._answers, 1 << 20)
            if not chunk:
                raise AssertionError("the browser closed its DevTools pipe")
            self.buffer += chunk
        raw, _, self.buffer = self.buffer.partition(b"\0")
        return json.loads(raw)

    def call(self, method: str, timeout: float = 60, **params) -> dict:
        number = next(self.ids)
        message = {"id": number, "method": method, "params": params}
        if self.session:
            message["sessionId"] = self.session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            got = self._message(deadline)
            if got.get("id") == number:
                assert "error" not in got, (method, got["error"])
                return got["result"]
            self.events.append(got)

    def navigate(self, url: str, timeout: float = 60) -> None:
        self.events.clear()
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            self.events.append(self._message(deadline))

    def evaluate(self, expression: str):
        return self.call("Runtime.evaluate", expression=expression,
                         returnByValue=True)["result"].get("value")

    def close(self) -> None:
        try:
            os.write(self._commands, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
            self.proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        os.close(self._commands)
        os.close(self._answers)


def test_the_url_printed_at_start_signs_a_browser_in(chromium, server, tmp_path):
    """Open the printed URL: the browser is redirected to the page without the token, keeps
    an HttpOnly, SameSite=Strict cookie (out of reach of the page's scripts), and then goes
    anywhere on the dashboard without the token in any URL."""
    browser = DevTools(chromium, tmp_path / "devtools-profile")
    try:
        browser.navigate(server.token_url)
        sent = [e["params"] for e in browser.events if e.get("method") == "Network.requestWillBeSent"]
        redirect = [p["redirectResponse"] for p in sent if "redirectResponse" in p]
        assert [r["status"] for r in redirect] == [303], redirect
        assert browser.evaluate("location.href") == server.url  # the token left the address bar
        assert browser.evaluate("document.cookie") == ""  # HttpOnly: no script can read it
        assert browser.evaluate("document.querySelectorAll('#jobs tr[data-health]').length") == 4
        (cookie,) = browser.call("Network.getCookies", urls=[server.url])["cookies"]
        assert (cookie["httpOnly"], cookie["sameSite"], cookie["path"]) == (True, "Strict", "/")
        assert server.token not in json.dumps(cookie)
        browser.navigate(f"{server.url}jobs/{HOURLY}")  # no token in this URL
        answers = [e["params"]["response"] for e in browser.events
                   if e.get("method") == "Network.responseReceived"]
        assert [a["status"] for a in answers if a["url"] == f"{server.url}jobs/{HOURLY}"] == [200]
        assert browser.evaluate("document.querySelector('h1').textContent") == HOURLY
        assert browser.evaluate("document.querySelectorAll('#runs tr').length") == 51
        assert all(server.token not in a["url"] for a in answers)
    finally:
        browser.close()
