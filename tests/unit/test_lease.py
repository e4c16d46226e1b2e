"""The lease's heartbeat (run/lease.py): one thread for a job that ends soon, the watchdog
beside it from its first look on, and a lost row seen by a real (in-memory SQLite) ledger."""

from __future__ import annotations

import time

from cronwrap.ledger.sqlite import SqliteLedger
from cronwrap.model import Reason, Run
from cronwrap.run.lease import Heartbeat


class Stops:
    """What the heartbeat asks of its supervisor: the reasons it was asked to stop for."""

    def __init__(self) -> None:
        self.reasons: list[str] = []

    def request_stop(self, reason: str) -> None:
        self.reasons.append(reason)


def a_run() -> Run:  # a claimed row's identity that no row of the ledger has
    return Run(run_id=1, job="x", run_key="2026-12-06T00:00:00Z", scheduled_at=None,
               trigger="schedule", status="running", attempt=1, fence=1, host="h", pid=1)


def test_a_job_that_ends_before_the_watchdog_s_first_look_makes_one_thread():
    stops = Stops()
    heartbeat = Heartbeat(SqliteLedger(None), a_run(), 30.0, stops)
    assert heartbeat.look_every == 1.0
    heartbeat.start()
    time.sleep(0.05)
    heartbeat.stop()
    renewer, watchdog = heartbeat.threads
    assert renewer.ident is not None and not renewer.is_alive()
    assert watchdog.ident is None  # never started
    assert stops.reasons == [] and not heartbeat.lost


def test_the_watchdog_starts_before_the_first_renewal_which_finds_the_row_gone():
    """lease 0.6 s: the watchdog from 0.06 s, the first renewal at 0.2 s after the claim; the
    ledger has no such row (taken over), so the lease is lost and the job asked to stop."""
    stops = Stops()
    heartbeat = Heartbeat(SqliteLedger(None), a_run(), 0.6, stops)
    heartbeat.start()
    deadline = time.monotonic() + 10
    while not stops.reasons and time.monotonic() < deadline:
        time.sleep(0.01)
    renewer, watchdog = heartbeat.threads
    assert watchdog.ident is not None
    assert stops.reasons == [Reason.LEASE_LOST] and heartbeat.lost
    assert time.monotonic() - heartbeat.claimed >= 0.2  # not before the renewal was due
    heartbeat.stop()
