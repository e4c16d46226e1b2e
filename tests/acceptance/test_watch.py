"""cronwrap watch (issue 23 §1) through the installed executable, on a SQLite file and on a real
PostgreSQL: a slot that passes with no firing is told once through each notifier (a shell
command, a webhook recorded by a local HTTP server, mail through a stand-in sendmail on PATH)
and once more as recovered after the next good run; failing streaks, stuck runs, warnings;
paused jobs told nothing; secrets kept out of every notification; two watchers on one
PostgreSQL ledger tell each alert once.

Time: the firings and the watcher run at wall-clock times set from outside (libfaketime), as in
test_schedule, so nothing waits for a slot to pass.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import threading
import time
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.acceptance.conftest import wait_for
from tests.acceptance.test_schedule import faketime_lib
from tests.conftest import CW

EVERY_5 = ["--schedule", "*/5 * * * *", "--tz", "UTC"]
SECRET = "hunter2-very-secret"


class Recorder:
    """A webhook receiver on 127.0.0.1: every POST's JSON body, in order."""

    def __init__(self) -> None:
        bodies = self.bodies = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's spelling)
                length = int(self.headers.get("Content-Length", 0))
                bodies.append({"body": json.loads(self.rfile.read(length)),
                               "path": self.path, "auth": self.headers.get("Authorization")})
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/T0/B0/{SECRET}"

    def kinds(self) -> list[tuple[str, str]]:
        return [(b["body"]["kind"], b["body"]["job"]) for b in self.bodies]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Watched(CW):
    """A host whose firings and watcher run at set times, with three notifiers wired up."""

    def __init__(self, home: Path, tmp: Path, db: str | None, hook: Recorder) -> None:
        super().__init__(home)
        self.tmp, self.db, self.hook = tmp, db, hook
        self.bin = tmp / "bin"
        self.bin.mkdir(exist_ok=True)
        sendmail = self.bin / "sendmail"  # cron's own mail goes the same way
        sendmail.write_text(f'#!/bin/sh\necho "ARGS $*" >> {tmp}/mail.txt\n'
                            f'cat >> {tmp}/mail.txt\necho "--END--" >> {tmp}/mail.txt\n')
        sendmail.chmod(sendmail.stat().st_mode | stat.S_IXUSR)

    def env(self, extra=None):
        env = super().env(extra)
        env["PATH"] = f"{self.bin}:{env['PATH']}"
        if self.db:
            env["CRONWRAP_DB"] = self.db
        return env

    def at(self, when: str, *args: str, env: dict | None = None, check_rc: int | None = None):
        utc = datetime.fromisoformat(when).astimezone(timezone.utc)
        fake = {"LD_PRELOAD": faketime_lib(), "FAKETIME": "@" + utc.strftime("%Y-%m-%d %H:%M:%S"),
                "DONT_FAKE_MONOTONIC": "1", "TZ": "UTC", **(env or {})}
        return self(*args, env=fake, check_rc=check_rc)

    def notifiers(self) -> list[str]:
        return ["--notify", f'echo "$CRONWRAP_ALERT|$CRONWRAP_JOB|$CRONWRAP_ALERT_TEXT|'
                            f'$(printf %s "$CRONWRAP_ALERT_DETAIL" | tr "\\n" " ")" '
                            f'>> {self.tmp}/notify.txt',
                "--notify-webhook", self.hook.url, "--notify-mail", "ops@example.org"]

    def watch(self, when: str, *more: str, env: dict | None = None):
        proc = self.at(when, "watch", "--once", *self.notifiers(), *more, env=env)
        assert proc.returncode == 0, proc.stderr
        assert SECRET.encode() not in proc.stdout + proc.stderr
        return proc

    def told(self) -> list[str]:
        path = self.tmp / "notify.txt"
        return path.read_text().splitlines() if path.exists() else []

    def mails(self) -> list[str]:
        path = self.tmp / "mail.txt"
        return path.read_text().split("--END--\n")[:-1] if path.exists() else []


@pytest.fixture
def hook():
    recorder = Recorder()
    yield recorder
    recorder.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def host(request, home, tmp_path, hook) -> Watched:
    db = request.getfixturevalue("pg_dsn") if request.param == "postgres" else None
    return Watched(home, tmp_path, db, hook)


def test_a_slot_that_passes_unfired_is_told_once_by_each_notifier_then_recovered(host):
    host.at("2026-12-04T10:00:02Z", "run", "-n", "settle", *EVERY_5, "--", "true", check_rc=0)
    host.watch("2026-12-04T10:05:20Z")  # 20 s after the 10:05 slot: within its 30 s of grace
    assert host.told() == [] and host.hook.bodies == [] and host.mails() == []

    host.watch("2026-12-04T10:05:40Z")  # no firing came: late
    host.watch("2026-12-04T10:07:00Z")  # still late: nothing more
    (line,) = host.told()
    kind, job, text, _ = line.split("|")
    assert (kind, job) == ("late", "settle")
    assert "2026-12-04T10:05:00+00:00" in text and "no run" in text
    assert host.hook.kinds() == [("late", "settle")]
    body = host.hook.bodies[0]["body"]
    assert body["text"].startswith("[cronwrap] settle: late") and body["host"] is None
    assert body["slot"] == "2026-12-04T10:05:00.000+00:00" and body["scope"] == "fleet"
    (mail,) = host.mails()
    assert "ARGS -oi -t" in mail and "To: ops@example.org" in mail
    assert "Subject: [cronwrap] late: settle" in mail and "Auto-Submitted: auto-generated" in mail
    # status shows the open alert (as serve does: the same report)
    (row,) = host.json("status", "--json")
    assert [a["kind"] for a in row["alerts"]] == ["late"]
    assert "alerted: late" in host("status", check_rc=0).stdout.decode()

    # cron comes back: the next slot runs, the late one is recovered, once
    host.at("2026-12-04T10:10:01Z", "run", "-n", "settle", *EVERY_5, "--", "true", check_rc=0)
    host.watch("2026-12-04T10:10:30Z")
    host.watch("2026-12-04T10:11:00Z")
    assert [l.split("|")[0] for l in host.told()] == ["late", "recovered"]
    assert host.hook.kinds() == [("late", "settle"), ("recovered", "settle")]
    assert len(host.mails()) == 2 and "Subject: [cronwrap] recovered: settle" in host.mails()[1]
    assert host.json("status", "--json")[0]["alerts"] == []


def test_a_failing_streak_is_told_from_its_alert_after_th_failure_with_its_output_redacted(host):
    fail = ["run", "-n", "report", *EVERY_5, "--alert-after", "2", "--", "sh", "-c",
            f"echo connecting with password={SECRET}; exit 3"]
    host.at("2026-12-04T10:00:01Z", *fail, env={"API_TOKEN": SECRET})
    host.watch("2026-12-04T10:01:00Z")
    assert host.told() == []  # one failure of --alert-after 2: not yet
    host.at("2026-12-04T10:05:01Z", *fail, env={"API_TOKEN": SECRET})
    host.watch("2026-12-04T10:06:00Z")
    host.watch("2026-12-04T10:07:00Z")
    (line,) = host.told()
    kind, job, text, detail = line.split("|")
    assert (kind, job) == ("failing", "report") and "2 failed slots in a row" in text
    assert "exit 3" in text and "password=" in detail
    everything = "\n".join([*host.told(), *host.mails(),
                            json.dumps([b["body"] for b in host.hook.bodies])])
    assert SECRET not in everything
    host.at("2026-12-04T10:10:01Z", "run", "-n", "report", *EVERY_5, "--alert-after", "2", "--",
            "true", check_rc=0)
    host.watch("2026-12-04T10:11:00Z")
    assert [l.split("|")[0] for l in host.told()] == ["failing", "recovered"]


def test_a_warning_run_is_told(host):
    host.at("2026-12-04T10:00:01Z", "run", "-n", "tidy", *EVERY_5, "--warning-exit", "3", "--",
            "sh", "-c", "exit 3", check_rc=3)
    host.watch("2026-12-04T10:01:00Z")
    (line,) = host.told()
    assert line.startswith("warning|tidy|tidy: warning: run 1 ended warning (exit 3)")


def test_a_paused_job_is_told_nothing(host):
    host.at("2026-12-04T10:00:01Z", "run", "-n", "quiet", *EVERY_5, "--", "false")
    host("pause", "quiet", check_rc=0)
    host.watch("2026-12-04T10:01:00Z")
    host.watch("2026-12-04T10:09:00Z")  # its 10:05 slot passed too: still nothing
    assert host.told() == [] and host.hook.bodies == []
    host("resume", "quiet", check_rc=0)
    host.watch("2026-12-04T10:09:30Z")
    assert sorted(l.split("|")[0] for l in host.told()) == ["failing", "late"]


def test_dry_run_prints_and_claims_nothing(host):
    host.at("2026-12-04T10:00:01Z", "run", "-n", "dry", *EVERY_5, "--", "false")
    out = host.at("2026-12-04T10:01:00Z", "watch", "--once", "--dry-run", check_rc=0)
    assert out.stdout.decode().startswith("would open: dry: failing")
    host.watch("2026-12-04T10:01:10Z")
    assert [l.split("|")[0] for l in host.told()] == ["failing"]


def test_a_failed_delivery_is_tried_again_and_never_stops_the_watcher(host):
    host.at("2026-12-04T10:00:01Z", "run", "-n", "flaky", *EVERY_5, "--", "false")
    broken = host.at("2026-12-04T10:01:00Z", "watch", "--once", "--notify", "exit 7",
                     "--notify", f"echo $CRONWRAP_ALERT >> {host.tmp}/ok.txt")
    assert broken.returncode == 0
    assert b"could not send failing of flaky via notify exit" in broken.stderr
    assert b"exited 7" in broken.stderr and b"trying again in 30s" in broken.stderr
    assert (host.tmp / "ok.txt").read_text() == "failing\n"  # the other notifier got it
    fixed = f"echo $CRONWRAP_ALERT >> {host.tmp}/later.txt; exit 0"
    # the same notifier (same command) again: before its backoff nothing, after it the send
    host.at("2026-12-04T10:01:10Z", "watch", "--once", "--notify", "exit 7", check_rc=0)
    assert not (host.tmp / "later.txt").exists()


def test_a_stuck_run_is_told(host, tmp_path):
    """A wrapper killed while its job runs: its run is abandoned (lease over), and no firing
    has taken its slot over yet."""
    gate = tmp_path / "started"
    runner = host.popen("run", "-n", "hang", "--lease", "2s", "--", "sh", "-c",
                        f"touch {gate}; sleep 30")
    try:
        wait_for(gate.exists, what="the job's start")
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait(10)

        def told() -> bool:  # once its lease (2 s) and the grace (1 s) are over
            proc = host("watch", "--once", "--grace", "1s", *host.notifiers())
            assert proc.returncode == 0, proc.stderr
            return bool(host.told())

        wait_for(told, timeout=20, what="the stuck alert")
    finally:
        if runner.poll() is None:
            runner.kill()
    (line,) = host.told()
    assert line.startswith("stuck|hang|hang: stuck: run 1 abandoned")


def test_bad_settings_are_one_line_and_125(cw, tmp_path):
    for args, words in [((), b"no notifier"),
                        (("--notify-webhook", "ftp://x/y"), b"not an http:// or https:// URL"),
                        (("--notify-mail", "-oops"), b"not a mail address"),
                        (("--notify", "true", "--interval", "0s"), b"--interval"),
                        (("--notify", "true", "--interval", "30"), b"--interval")]:
        proc = cw("watch", "--once", *args)
        assert proc.returncode == 125, (args, proc)
        assert proc.stderr.count(b"\n") == 1 and words in proc.stderr, (args, proc.stderr)
    config = tmp_path / "config.toml"
    config.write_text('[watch]\nnotify_mail = ["a@example.org", 3]\n')
    config.chmod(0o600)
    proc = cw("watch", "--once", env={"CRONWRAP_CONFIG": str(config)})
    assert proc.returncode == 125 and b"[watch] notify_mail" in proc.stderr, proc.stderr


def test_the_config_file_s_watch_table_gives_the_notifiers(cw, tmp_path):
    out = tmp_path / "told.txt"
    config = tmp_path / "config.toml"
    config.write_text(f'[watch]\ninterval = "10s"\nnotify = ["echo $CRONWRAP_ALERT >> {out}"]\n')
    config.chmod(0o600)
    cw("run", "-n", "cfg", "--", "false")
    proc = cw("watch", "--once", env={"CRONWRAP_CONFIG": str(config)})
    assert proc.returncode == 0, proc.stderr
    assert out.read_text() == "failing\n"


@pytest.mark.postgres
def test_two_watchers_on_one_ledger_tell_each_alert_once(pg_dsn, tmp_path, hook):
    """Two `watch` processes (two hosts of the watcher's Deployment) over one PostgreSQL ledger,
    every 0.5 s for several intervals: each alert and its recovery reach each notifier once."""
    hosts = [Watched(tmp_path / f"w{i}", tmp_path, pg_dsn, hook) for i in (1, 2)]
    runner = hosts[0]
    runner("run", "-n", "nightly", "--", "false")  # failing now
    watchers = [h.popen("watch", "--interval", "0.5s", *h.notifiers()) for h in hosts]
    try:
        def first() -> bool:
            assert not [w for w in watchers if w.poll() is not None], \
                [w.stderr.read() for w in watchers if w.poll() is not None]
            return len(hook.bodies) >= 1

        wait_for(first, timeout=30, what="the failing alert")
        time.sleep(3)  # several more intervals of both
        runner("run", "-n", "nightly", "--force", "--", "true", check_rc=0)
        wait_for(lambda: len(hook.bodies) >= 2, timeout=30, what="the recovery")
        time.sleep(3)
    finally:
        for w in watchers:
            w.send_signal(signal.SIGTERM)
        codes = [w.wait(30) for w in watchers]
    assert codes == [0, 0], [w.stderr.read() for w in watchers]
    assert hook.kinds() == [("failing", "nightly"), ("recovered", "nightly")]
    assert [l.split("|")[0] for l in runner.told()] == ["failing", "recovered"]
    assert len(runner.mails()) == 2


def test_a_configured_job_that_never_fired_is_late(host, tmp_path):
    """The config file's [jobs.NAME] with a schedule, and no firing ever: its first slot after
    the file was written passes unfired (the crontab line was never added)."""
    config = tmp_path / "config.toml"
    config.write_text('[jobs.forgotten]\nschedule = "0 * * * *"\ntz = "UTC"\n')
    config.chmod(0o600)
    written = datetime(2026, 12, 4, 9, 30, tzinfo=timezone.utc).timestamp()
    os.utime(config, (written, written))
    env = {"CRONWRAP_CONFIG": str(config)}
    host.watch("2026-12-04T09:59:00Z", env=env)
    assert host.told() == []
    host.watch("2026-12-04T10:07:00Z", env=env)  # 10:00 passed, 6 min of grace gone
    (line,) = host.told()
    assert line.startswith("late|forgotten|forgotten: late: its slot 2026-12-04T10:00:00+00:00")
    assert "never run" in line

