"""``cronwrap why NAME --at WHEN`` (issue 26 §3) through the installed executable, on a SQLite
file and on a real PostgreSQL: the ledger is filled by real ``cronwrap run`` firings at faked
times (libfaketime, as cron would start them then), and ``why`` tells a slot that ran, one a
second firing skipped as a duplicate, one that no host fired (missed), and one in a DST gap;
``--json`` is valid against cronwrap/schemas/why.json; a bad WHEN is one line, exit 125; the
ledger is not written; ``serve`` tells the same at /jobs/NAME/why behind its token."""

from __future__ import annotations

import json
import re
from importlib import resources

import pytest
from jsonschema import Draft202012Validator

from tests.acceptance.dashboard import Server
from tests.acceptance.test_schedule import Clocked

NIGHTLY = ["--schedule", "30 1 * * *", "--tz", "Europe/Berlin"]
GAP = ["--schedule", "30 2 * * *", "--tz", "Europe/Berlin"]  # 02:30 is skipped on 2026-03-29
NOW = "2026-12-05T10:00:00+01:00"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def fired(request, home) -> Clocked:
    """settle ran on the 3rd (and a second firing of that slot was a duplicate), was fired by
    no host on the 4th, ran on the 5th; gap ran at the spring-forward's 03:00."""
    cw = Clocked(home)
    if request.param == "postgres":
        dsn = request.getfixturevalue("pg_dsn")
        base = cw.env
        cw.env = lambda extra=None: {**base(extra), "CRONWRAP_DB": dsn}
    for at in ("2026-12-03T01:30:02+01:00", "2026-12-03T01:30:04+01:00",
               "2026-12-05T01:30:01+01:00"):
        assert cw.at(at, "run", "-n", "settle", *NIGHTLY, "--", "true").returncode == 0
    assert cw.at("2026-03-29T03:00:02+02:00", "run", "-n", "gap", *GAP, "--", "true"
                 ).returncode == 0
    return cw


def why(cw: Clocked, *args: str) -> str:
    proc = cw.at(NOW, "why", *args)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.decode()


def why_json(cw: Clocked, *args: str) -> dict:
    data = json.loads(why(cw, *args, "--json"))
    loaded = json.loads(resources.files("cronwrap").joinpath("schemas", "why.json").read_text())
    errors = list(Draft202012Validator(loaded).iter_errors(data))
    assert not errors, [e.message for e in errors[:3]]
    return data


def history(cw: Clocked, name: str) -> list[dict]:
    return json.loads(cw.at(NOW, "history", name, "--json").stdout)


def test_why_tells_a_slot_that_ran_a_duplicate_a_missed_one_and_one_in_a_dst_gap(fired):
    """And serve's /jobs/NAME/why page and /api/jobs/NAME/why (one ledger filled for both)."""
    before = history(fired, "settle")
    host = before[0]["host"]

    ran = why(fired, "settle", "--at", "2026-12-03T01:30")
    assert "settle: schedule '30 1 * * *' in Europe/Berlin." in ran
    assert "2026-12-03 01:30 CET is one of its slots (2d8h ago)." in ran
    # (started: by the ledger's clock, which libfaketime does not move on a PostgreSQL server)
    assert f"It ran on {host}: cron fired it for its slot, started " in ran
    assert "it ended succeeded after" in ran and "(exit 0)." in ran
    # the second firing of that slot: only its host's run log knows it
    assert f"From the run log of this host ({host}):" in ran
    # (libfaketime's clock runs on from the time given: a loaded machine adds seconds)
    assert re.search(rf"A firing on {host} at 2026-12-03 01:30:\d\d CET \(pid \d+\) was skipped as "
                     rf"a duplicate: run 1 \(succeeded on {host}\) had already claimed the slot\.",
                     ran), ran
    data = why_json(fired, "settle", "--at", "2026-12-03")
    assert (data["verdict"], data["status"], data["matched"]) == ("ran", "succeeded", True)
    assert data["run"]["run_id"] == 1 and data["run_key"] == "2026-12-03T00:30:00Z"
    assert [(e["event"], e.get("skip_reason")) for e in data["events"]] == \
        [("start", None), ("finish", None), ("skip", "duplicate")]

    missed = why(fired, "settle", "--at", "2026-12-04")
    assert "Its slot on 2026-12-04 is 2026-12-04 01:30 CET (1d8h ago)." in missed
    assert "Missed: no host fired it in time. A later firing found it had never run and " \
        "recorded it missed" in missed
    data = why_json(fired, "settle", "--at", "2026-12-04T00:30Z")
    assert (data["verdict"], data["status"]) == ("missed", "missed")
    assert [e["event"] for e in data["events"]] == ["missed"]  # the 5th's firing recorded it
    assert re.search(rf"The firing on {host} at 2026-12-05 01:30:\d\d CET \(pid \d+\) found it "
                     "had never run and recorded it missed.", missed), missed
    nothing = why_json(fired, "settle", "--at", "2026-12-02")  # before any firing: no row
    assert (nothing["verdict"], nothing["status"], nothing["run"]) == ("missed", None, None)
    assert any("This is before the ledger first saw settle" in line for line in nothing["story"])

    gap = why(fired, "gap", "--at", "2026-03-29T02:30")
    assert ("2026-03-29 02:30 does not exist in Europe/Berlin (the clocks jump over it); read as "
            "cron reads it: 2026-03-29 03:00 CEST") in gap
    assert "the run at 02:30 happens once, at 03:00, right after the jump" in gap
    assert f"It ran on {host}: cron fired it for its slot" in gap
    assert why_json(fired, "gap", "--at", "2026-03-29")["verdict"] == "ran"

    upcoming = why_json(fired, "settle")  # no --at: the next slot
    assert (upcoming["slot"], upcoming["verdict"]) == ("2026-12-06T01:30:00+01:00", "upcoming")

    for bad, word in (("yesterday", "is not a timestamp"), ("2026-12-01..2026-12-04", "range")):
        proc = fired.at(NOW, "why", "settle", "--at", bad)
        lines = proc.stderr.decode().splitlines()
        assert proc.returncode == 125 and len(lines) == 1 and word in lines[0], proc.stderr
    proc = fired.at(NOW, "why", "nosuch")
    assert proc.returncode == 125 and b"nosuch: no such job" in proc.stderr
    assert history(fired, "settle") == before  # read only

    # serve tells the same at /jobs/NAME/why, behind its token
    server = Server(fired)
    try:
        page = server.fetch(server.url + "jobs/settle/why?at=2026-12-03T01%3A30")
        assert page.status == 200, page.text
        assert '<p id="verdict"><span class="s-green">ran</span></p>' in page.text
        assert "was skipped as a duplicate: run 1 (succeeded on" in page.text
        assert 'href="../../jobs/settle/runs/1"' in page.text
        assert server.fetch(server.url + "jobs/settle/why", auth=False).status == 401
        api = server.fetch(server.url + "api/jobs/settle/why?at=2026-12-03")
        assert api.status == 200 and json.loads(api.text)["run"]["run_id"] == 1
        hostile = server.fetch(server.url + "jobs/settle/why?at=%3Cscript%3Ealert(1)%3C/script%3E")
        assert hostile.status == 400 and "<script>" not in hostile.text
        assert server.fetch(server.url + "jobs/nosuch/why").status == 404
        job = server.fetch(server.url + "jobs/settle")
        assert 'action="../jobs/settle/why"' in job.text
    finally:
        server.stop()
