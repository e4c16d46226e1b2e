"""The outbox when two firings of one host deliver it at once: a result the other firing
delivered (and removed) first is nobody's problem, not a bad entry (seen in bench/'s fleet
row: 'cannot open …: No such file or directory' quarantined, and said on cron's stderr)."""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone

from cronwrap.ledger.sqlite import SqliteLedger
from cronwrap.model import ClaimRequest, Event, Finish, JobInfo
from cronwrap.run import outbox

T0 = datetime(2026, 10, 28, 10, 0, tzinfo=timezone.utc)


class RacedLedger(SqliteLedger):
    """A real SQLite ledger; while it records the first result, another firing of the host
    delivers the second and removes its file (what ``race`` does)."""

    race = None

    def finish(self, run, result):
        recorded = super().finish(run, result)
        if self.race is not None:
            self.race()
            self.race = None
        return recorded


def claimed(ledger, job: str):
    claim = ledger.claim(ClaimRequest(job=JobInfo(job), run_key="2026-10-28T10:00:00Z",
                                      scheduled_at=T0, trigger="schedule", host="h1", pid=4242,
                                      pid_start=1, lease=60.0, boot_id="b", pid_ns=1))
    assert claim.run is not None
    return claim.run


def test_a_result_delivered_by_another_firing_meanwhile_is_skipped_quietly(tmp_path, capfd):
    ledger = RacedLedger(tmp_path / "ledger.db", clock=lambda: T0.timestamp() + 5)
    result = Finish(status="succeeded", duration_ms=5, exit_code=0, signal=None,
                    timed_out=False, error_tail=None, log_path=None)
    state = tmp_path / "home"
    first = outbox.spool(state, None, claimed(ledger, "a"), result)
    second = outbox.spool(state, None, claimed(ledger, "b"), result)
    events = []
    ledger.race = lambda: os.unlink(second if first < second else first)

    delivered = outbox.deliver(state, None, ledger, lambda event, **fields: events.append(event))

    assert delivered == 1 and events == [Event.OUTBOX_DELIVERED], events
    assert not (state / "outbox" / outbox.QUARANTINE).exists()
    assert capfd.readouterr().err == ""
    assert outbox.pending(state, None) == []
    ledger.close()


def test_a_result_delivered_after_a_takeover_is_kept_among_the_slot_s_attempts(tmp_path):
    """The wrapper could not record its end (spooled); meanwhile its lease expired and another
    host took the slot over. Delivery must not touch the new attempt's row, and the first
    attempt's real end (the job ran to its end) is kept among the slot's attempts."""
    clock = [T0.timestamp() + 5]
    ledger = SqliteLedger(tmp_path / "ledger.db", clock=lambda: clock[0])
    first = claimed(ledger, "settle")
    result = Finish(status="failed", duration_ms=30_000, exit_code=3, signal=None,
                    timed_out=False, error_tail=None, log_path=None)
    state = tmp_path / "home"
    outbox.spool(state, None, first, result)
    clock[0] += 120  # the lease (60 s) is over: the next firing elsewhere takes the slot
    second = ledger.claim(ClaimRequest(job=JobInfo("settle"), run_key=first.run_key,
                                       scheduled_at=T0, trigger="takeover", host="h2", pid=7,
                                       pid_start=1, lease=60.0, boot_id="c", pid_ns=1)).run
    assert second is not None and second.attempt == 2

    events = []
    assert outbox.deliver(state, None, ledger, lambda event, **f: events.append(f)) == 1

    assert events[0]["recorded"] is False
    run = ledger.runs("settle", 5)[0]
    assert (run.status, run.attempt, run.host) == ("running", 2, "h2")  # untouched
    kept = ledger.attempts([run], ledger.now())[run.run_id]
    assert [(a.attempt, a.status, a.host, a.exit_code) for a in kept] == [
        (1, "failed", "h1", 3), (2, "running", "h2", None)]
    assert kept[0].finished_at == first.started_at + timedelta(seconds=30)
    ledger.close()
