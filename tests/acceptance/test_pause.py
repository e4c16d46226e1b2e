"""cronwrap pause / resume (issue 22 §5) through the installed executable, on a SQLite file
and on a real PostgreSQL: a paused job's firings are recorded skipped/paused and run nothing,
no hook, exit 0; a manual run goes ahead; --until ends the pause by itself; status, --check,
--json and the metrics say so; --host pauses one host of a host-scoped job (NAME@HOST as
status shows it)."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone

import pytest

from tests.conftest import CW

EVERY_MINUTE = ["--schedule", "* * * * *", "--tz", "UTC"]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db(request, tmp_path) -> str:
    if request.param == "postgres":
        return request.getfixturevalue("pg_dsn")
    return f"sqlite://{tmp_path / 'ledger.db'}"


def fire(cw: CW, db: str, name: str, marker, *more: str, check_rc: int | None = None):
    """A scheduled firing whose command, and either hook, would leave a file."""
    hook = f"touch {marker}.hook"
    return cw("run", "--db", db, "-n", name, *EVERY_MINUTE, "--on-success", hook,
              "--on-failure", hook, *more, "--", "touch", str(marker), check_rc=check_rc)


def status(cw: CW, db: str) -> dict[str, dict]:
    return {job["job"]: job for job in cw.json("status", "--json", "--db", db)}


def metric(cw: CW, db: str, name: str, job: str) -> str:
    text = cw("status", "--format", "prometheus", "--db", db, check_rc=0).stdout.decode()
    return next(line.rpartition(" ")[2] for line in text.splitlines()
                if line.startswith(f'{name}{{cronjob="{job}"}}'))


def test_a_paused_job_is_skipped_recorded_and_shown_until_resumed(cw, db, tmp_path):
    ran, other = tmp_path / "ran", tmp_path / "other"
    # a first run (by hand, so that the minute's slot stays free): the ledger knows the job
    fire(cw, db, "settle", ran, "--at", "2026-01-04T03:00", check_rc=0)
    ran.unlink()
    (tmp_path / "ran.hook").unlink()
    out = cw("pause", "settle", "--reason", "bank holiday", "--db", db, check_rc=0)
    assert b"settle: paused (bank holiday)" in out.stdout and not out.stderr

    proc = fire(cw, db, "settle", ran, "--skip-exit-code", "75", "--catchup", "latest")
    assert proc.returncode == 0, proc.stderr  # a pause is no news: not --skip-exit-code
    assert not ran.exists() and not (tmp_path / "ran.hook").exists()
    newest = cw.json("history", "settle", "--json", "--db", db)[0]
    assert (newest["status"], newest["skip_reason"], newest["trigger"]) == \
        ("skipped", "paused", "schedule")
    skips = [e for e in map(json.loads, (cw.home / "logs" / "events.jsonl").read_text()
                            .splitlines()) if e["event"] == "skip"]
    assert skips[-1]["skip_reason"] == "paused" and skips[-1]["pause_reason"] == "bank holiday"
    fire(cw, db, "billing", other, check_rc=0)  # another job is not paused
    assert other.exists()

    jobs = status(cw, db)
    assert jobs["settle"]["paused"] is True and jobs["settle"]["health"] == "ok"
    assert jobs["settle"]["why"] == "paused (bank holiday)"
    assert jobs["settle"]["pause"]["reason"] == "bank holiday"
    assert jobs["settle"]["pause"]["until"] is None
    assert jobs["billing"]["paused"] is False and jobs["billing"]["pause"] is None
    check = cw("status", "--check", "--db", db)
    assert check.returncode == 0 and b"settle paused (bank holiday)" in check.stdout, check.stdout
    table = cw("status", "--db", db, check_rc=0).stdout
    assert b"paused (bank holiday)" in table
    assert metric(cw, db, "cronwrap_paused", "settle") == "1"
    assert metric(cw, db, "cronwrap_paused", "billing") == "0"

    # a person's run goes ahead
    manual = tmp_path / "manual"
    cw("run", "--db", db, "-n", "settle", *EVERY_MINUTE, "--at", "2026-01-05T03:00", "--",
       "touch", str(manual), check_rc=0)
    assert manual.exists()

    out = cw("resume", "settle", "--db", db, check_rc=0)
    assert b"settle: resumed (was paused (bank holiday))" in out.stdout
    fire(cw, db, "settle", ran, check_rc=0)  # this slot, or the next: either runs now
    assert ran.exists() and (tmp_path / "ran.hook").exists()
    assert status(cw, db)["settle"]["paused"] is False
    assert metric(cw, db, "cronwrap_paused", "settle") == "0"
    again = cw("resume", "settle", "--db", db, check_rc=0)
    assert again.stdout == b"settle: not paused; nothing to do\n"


@pytest.mark.parametrize("until", ["2020-01-01T00:00", "2020-01-01T00:00Z", "0s", "30",
                                   "soon", "2026-13-01"])
def test_an_until_not_in_the_future_or_not_a_time_is_refused(cw, db, until):
    proc = cw("pause", "settle", "--until", until, "--db", db)
    assert proc.returncode == 125, proc
    assert proc.stderr.count(b"\n") == 1 and b"--until" in proc.stderr, proc.stderr
    assert cw("resume", "settle", "--db", db, check_rc=0).stdout.endswith(
        b"not paused; nothing to do\n")


def test_a_pause_until_a_near_time_ends_by_itself(cw, db, tmp_path):
    ran = tmp_path / "ran"
    cw("pause", "settle", "--until", "3s", "--db", db, check_rc=0)
    fire(cw, db, "settle", ran, check_rc=0)
    assert not ran.exists(), "the firing ran while the job was paused"
    until = datetime.fromisoformat(status(cw, db)["settle"]["pause"]["until"])
    # until the pause's own end as the ledger holds it (the pause command may have started
    # seconds after the test asked, on a loaded machine), and no more
    time.sleep(max(0.0, (until - datetime.now(timezone.utc)).total_seconds()) + 0.2)
    fire(cw, db, "settle", ran, check_rc=0)
    assert ran.exists()
    assert status(cw, db)["settle"]["paused"] is False


def test_a_host_pause_covers_only_that_host_of_a_host_scoped_job(cw, db, tmp_path):
    """A host-scoped job's runs on each host are a job of their own to the ledger: ``--host``
    pauses one host's; the pause of NAME covers every host's; a fleet job of another name is
    not touched."""
    def fire_on(host: str, marker) -> None:
        fire(cw, db, "rotate", marker, "--scope", "host", "--host", host, check_rc=0)

    cw("pause", "rotate", "--host", "web1", "--db", db, check_rc=0)
    fire_on("web1", tmp_path / "web1")
    fire_on("web2", tmp_path / "web2")
    fire(cw, db, "rotate-all", tmp_path / "fleet", check_rc=0)
    assert [(tmp_path / n).exists() for n in ("web1", "web2", "fleet")] == [False, True, True]
    jobs = {(j["job"], j["host"]): j for j in cw.json("status", "--json", "--db", db)}
    assert (jobs[("rotate", "web1")]["paused"], jobs[("rotate", "web2")]["paused"],
            jobs[("rotate-all", None)]["paused"]) == (True, False, False)

    cw("pause", "rotate", "--db", db, check_rc=0)
    fire_on("web2", tmp_path / "web2-again")
    assert not (tmp_path / "web2-again").exists()
    out = cw("resume", "rotate", "--host", "web1", "--db", db, check_rc=0).stdout
    assert b"rotate@web1: still paused" in out and b"cronwrap resume rotate" in out
    cw("resume", "rotate", "--db", db, check_rc=0)
    fire_on("web1", tmp_path / "web1-again")
    assert (tmp_path / "web1-again").exists()


def test_pause_of_a_job_the_ledger_has_not_seen_is_kept_with_a_note(cw, db, tmp_path):
    proc = cw("pause", "newjob", "--db", db, check_rc=0)
    assert b"no record of this job yet" in proc.stderr and proc.stderr.count(b"\n") == 1
    fire(cw, db, "newjob", tmp_path / "ran", check_rc=0)
    assert not (tmp_path / "ran").exists()
    forged = cw("pause", "newjob", "--reason", "ok\nCRONWRAP OK - all fine", "--db", db)
    assert forged.returncode == 125 and b"--reason" in forged.stderr
