"""The dashboard in a real browser: Debian's chromium, headless, as a separate process, loads
the overview and a job page from a real ``cronwrap serve``; the DOM it built is checked and a
screenshot saved. tests/run.sh installs chromium when it is missing; under CI=true a missing
browser fails the test instead of skipping it.

TEST_SCREENSHOTS=DIR also copies the screenshots there (README's docs/serve.png)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
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


def test_overview_in_a_browser(chromium, server, tmp_path):
    dom = browse(chromium, tmp_path, server.url, "--dump-dom").stdout.decode()
    rows = re.findall(r'<tr data-health="(\w+)"><td><a href="jobs/([^"]+)">([^<]*)</a>', dom)
    assert [(h, n) for h, n, _ in rows][:2] == sorted([(h, n) for h, n, _ in rows][:2])
    assert {h for h, _, _ in rows[:2]} == {"critical"}
    shown = {text for _, _, text in rows}
    assert shown == {"&lt;script&gt;alert(1)&lt;/script&gt;", "demo", HOURLY, "nightly-backup"}
    assert "<script" not in dom  # the name stayed text: no element was made of it
    assert '<span class="s-magenta">timeout</span>' in dom
    assert "refreshes every 30s" in dom
    screenshot(chromium, tmp_path, server.url, "serve.png")


def test_job_page_in_a_browser(chromium, server, tmp_path):
    url = f"{server.url}jobs/{HOURLY}"
    dom = browse(chromium, tmp_path, url, "--dump-dom").stdout.decode()
    assert "At the start of every hour" in dom and '<svg id="chart"' in dom
    assert len(re.findall(r"<circle ", dom)) >= 60  # a dot per run that has a duration
    assert len(re.findall(r'<a href="../jobs/hourly-report/runs/\d+">', dom)) == 50
    screenshot(chromium, tmp_path, url, "serve-job.png")
    script_page = browse(chromium, tmp_path, f"{server.url}jobs/{quote(SCRIPT_NAME, safe='')}",
                         "--dump-dom").stdout.decode()
    assert "<h1>&lt;script&gt;alert(1)&lt;/script&gt;</h1>" in script_page
    assert "<script" not in script_page
