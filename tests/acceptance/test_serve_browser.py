"""The dashboard in a real browser: Debian's chromium, headless, as a separate process, loads
the overview and a job page from a real ``cronwrap serve``; the DOM it built is checked and a
screenshot saved. Signing in is a browser's too: the URL printed at start (``?token=``) is
opened, and the browser, driven over the DevTools protocol, keeps the cookie and uses it.
tests/run.sh installs chromium when it is missing; under CI=true a missing browser fails the
test instead of skipping it.

TEST_SCREENSHOTS=DIR also copies the screenshots there (README's docs/serve.png)."""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import subprocess
import time
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.needs import missing

from tests.acceptance.dashboard import HOURLY, SCRIPT_NAME, Server, fill_ledger

PNG = b"\x89PNG\r\n\x1a\n"


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


def screenshot(chromium: str, tmp_path: Path, url: str, name: str) -> Path:
    file = tmp_path / name
    browse(chromium, tmp_path, url, f"--screenshot={file}", "--window-size=1280,900")
    data = file.read_bytes()
    assert data.startswith(PNG) and len(data) > 10_000, len(data)  # a page, not a blank
    keep = os.environ.get("TEST_SCREENSHOTS")
    if keep:
        shutil.copyfile(file, Path(keep) / name)
    return file


@pytest.fixture
def server(cw):
    fill_ledger(cw)
    cw("run", "-n", "nightly-backup", "--schedule", "30 2 * * *", "--tz", "Europe/Berlin",
       "--", "true")
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
    assert [(h, n) for h, n, _ in rows][:2] == sorted([(h, n) for h, n, _ in rows][:2])
    assert {h for h, _, _ in rows[:2]} == {"critical"}
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
