"""A ledger worth looking at, and a real ``cronwrap serve`` process in front of it, for the
dashboard's HTTP and browser tests (tests/acceptance/test_serve*.py)."""

from __future__ import annotations

import re
import subprocess
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from cronwrap.ledger.sqlite import SqliteLedger
from cronwrap.model import ClaimRequest, Finish, JobInfo, Mark

SCRIPT_NAME = "<script>alert(1)</script>"
HOURLY = "hourly-report"
HOURS = 70  # more than one page of runs (50)


def fill_ledger(cw) -> None:
    """Jobs as cron would leave them: ``demo`` (real firings, output on disk), a failing job
    named ``<script>alert(1)</script>`` whose output is markup, and ``hourly-report``: 70
    hourly slots written through the ledger's own claim protocol with a clock in the past
    (a failure, a timeout, missed slots), its last slot 3 hours ago (so some slots are late)."""
    cw("run", "-n", "demo", "--schedule", "*/5 * * * *", "--", "sh", "-c",
       "echo hello from demo; echo '<b>bold</b>'")
    cw("run", "-n", SCRIPT_NAME, "--", "sh", "-c",
       "echo '<script>alert(2)</script>'; echo '<img src=x onerror=alert(3)>' >&2; exit 3")
    hourly_history(cw.home / "ledger.db")


def hourly_history(path: Path) -> None:
    now = datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0)
    first = now - timedelta(hours=HOURS + 2)
    clock = [first.timestamp()]
    ledger = SqliteLedger(path, clock=lambda: clock[0])
    job = JobInfo(HOURLY, schedule="0 * * * *", tz="UTC")
    try:
        for i in range(HOURS):
            slot = first + timedelta(hours=i)
            clock[0] = slot.timestamp() + 2
            request = ClaimRequest(job=job, run_key=slot.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                   scheduled_at=slot, trigger="schedule", host="host-a",
                                   pid=4000 + i, pid_start=1, lease=60.0)
            if i % 23 == 5:
                ledger.record_marks(request, [Mark(request.run_key, slot, "missed", None)])
                continue
            claim = ledger.claim(request)
            status, code = ("failed", 1) if i % 17 == 3 else ("timeout", 124) if i == HOURS - 1 \
                else ("succeeded", 0)
            clock[0] += 30 + (i % 7) * 20
            ledger.finish(claim.run, Finish(status=status, duration_ms=(30 + (i % 7) * 20) * 1000,
                                            exit_code=code, signal=None, timed_out=code == 124,
                                            error_tail="boom\n" if code else None, log_path=None))
    finally:
        ledger.close()


@pytest.fixture
def filled(cw):
    """``cw`` over the ledger of ``fill_ledger``."""
    fill_ledger(cw)
    return cw


@pytest.fixture
def server(filled):
    """``cronwrap serve`` over it, as started by default (a token made at start)."""
    running = Server(filled)
    yield running
    running.stop()


class Server:
    """``cronwrap serve`` as a process; ``url`` once it said where it listens. ``token``: the
    one it made at start (read from the URL it printed), or the one given for --token-file;
    ``fetch`` sends it unless told not to."""

    def __init__(self, cw, *args: str, env: dict[str, str] | None = None,
                 listen: str = "127.0.0.1:0", token: str | None = None) -> None:
        self.proc = cw.popen("serve", "--listen", listen, *args, env=env, text=True)
        line = self.proc.stdout.readline()
        found = re.search(r"listening on (http://\S+/)", line)
        if not found:
            self.stop()
            raise AssertionError(f"serve did not start: {line!r} {self.proc.stderr.read()!r}")
        self.url = found.group(1)
        self.line = line
        self.token, self.token_url, self.token_file = token, None, None
        made = re.search(r"; token in (\S+)$", line)
        if made:
            self.token_file = Path(made.group(1))
            opened = self.proc.stdout.readline()
            self.line += opened
            self.token_url = re.search(r"open (http://\S+)", opened).group(1)
            self.token = self.token_url.partition("?token=")[2]

    def fetch(self, url: str, method: str = "GET", headers: dict[str, str] | None = None,
              timeout: float = 60, auth: bool = True, data: bytes | None = None) -> Reply:
        given = dict(headers or {})
        if auth and self.token:
            given.setdefault("Authorization", f"Bearer {self.token}")
        return fetch(url, method, given, timeout, data)

    def stop(self) -> tuple[str, str]:
        self.proc.terminate()
        try:
            out, err = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
        return self.line + (out or ""), err or ""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None  # a redirect is an answer of its own here (HTTPError with its status)


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect)  # no proxy


class Reply:
    def __init__(self, status: int, headers, body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body
        self.text = body.decode("utf-8")


def fetch(url: str, method: str = "GET", headers: dict[str, str] | None = None,
          timeout: float = 60, data: bytes | None = None) -> Reply:
    """One request, its answer whatever the status; redirects are not followed."""
    request = urllib.request.Request(url, method=method, headers=headers or {}, data=data)
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            return Reply(response.status, response.headers, response.read())
    except urllib.error.HTTPError as exc:
        return Reply(exc.code, exc.headers, exc.read())
