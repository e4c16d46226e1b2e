"""The outbox when two firings of one host deliver it at once: a result the other firing
delivered (and removed) first is nobody's problem, not a bad entry (seen in bench/'s fleet
row: 'cannot open …: No such file or directory' quarantined, and said on cron's stderr)."""

from __future__ import annotations

from datetime import datetime, timezone

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
    ledger.race = lambda: (second if first < second else first).unlink()

    delivered = outbox.deliver(state, None, ledger, lambda event, **fields: events.append(event))

    assert delivered == 1 and events == [Event.OUTBOX_DELIVERED], events
    assert not (state / "outbox" / outbox.QUARANTINE).exists()
    assert capfd.readouterr().err == ""
    assert outbox.pending(state, None) == []
    ledger.close()
