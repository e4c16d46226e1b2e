"""The runner's decisions, pure: what a run's end is recorded as, whether and when it is
retried, which hook hears about it, and what a firing of several slots exits with.

No clock and no I/O (ARCHITECTURE.md, "the pure core"): the time, the random source and what
the ledger knows come in as arguments, so that tests/unit/test_policy.py can try every case.
"""

from __future__ import annotations

from cronwrap.model import BAD_STATUSES, Reason, Status
from cronwrap.record import TYPE_CHECKING
from cronwrap.run import retry

if TYPE_CHECKING:
    from collections.abc import Iterable, Set
    from datetime import datetime
    from typing import Protocol

    from cronwrap.model import Run
    from cronwrap.options.spec import JobSpec
    from cronwrap.run.retry import Uniform

    class Outcome(Protocol):
        """How a supervised job ended (supervise.Outcome has these and more)."""

        exit_code: int | None
        signal: int | None
        timed_out: bool
        spawn_error: str | None
        stop_reason: str | None
        duration: float
        limit: str | None


def ended_as(outcome: Outcome, lease_lost: bool, success: Set[int] = frozenset({0}),
             warning: Set[int] = frozenset(), min_duration: float = 0.0
             ) -> tuple[Status, Reason | None]:
    """The status a run's end is recorded with, and its reason. ``success``/``warning``: the
    exit statuses of --success-exit/--warning-exit; any other status is a failure. A timeout,
    a signal or a job that could not be started is never a success, whatever its code. A
    success (after --success-exit) faster than ``min_duration`` seconds is a warning,
    ``too_fast``; a warning exit stays a warning of its own."""
    if lease_lost or outcome.stop_reason == Reason.LEASE_LOST:
        return Status.KILLED, Reason.LEASE_LOST
    if outcome.limit is not None:  # --max-memory, --max-cpu
        return Status.KILLED, Reason(outcome.limit)
    if outcome.timed_out:
        return Status.TIMEOUT, None
    code = outcome.exit_code or 0
    if outcome.spawn_error or (code not in success and code not in warning):
        return Status.FAILED, None
    if outcome.signal is not None:
        return Status.KILLED, None
    if code in warning:
        return Status.WARNING, None
    if outcome.duration < min_duration:
        return Status.WARNING, Reason.TOO_FAST
    return Status.SUCCEEDED, None


PAST_NEXT_SLOT = "would run past the next slot"
PAST_INTERVAL = "would end more than the schedule's interval after this manual run began"
UNRECORDED = "would need the ledger to claim the slot again, and this run is unrecorded"


def retry_delay(spec: JobSpec, status: str, exit_code: int | None, duration_ms: int | None,
                attempt: int, first: int, deadline: datetime | None, now: datetime,
                rng: Uniform, *, manual: bool = False) -> tuple[float | None, str | None]:
    """(seconds to wait before the slot's next attempt, None) — or (None, None) when this one
    is final (not transient under --retry-on, or retries spent), or (None, why) when a retry
    is given up because it would not end by ``deadline`` (retry.retry_deadline):
    PAST_NEXT_SLOT, the next firing is the better retry; PAST_INTERVAL for a ``manual`` run.
    ``attempt``: the ledger's attempt number of the run that ended; ``first``: the one this
    invocation began with."""
    if spec.retries == 0 or not retry.should_retry(status, exit_code, spec.retry_on, attempt,
                                                   spec.retries, spec.max_attempts,
                                                   first_attempt=first):
        return None, None
    delay = retry.backoff(attempt - first + 1, spec.retry_delay, spec.retry_max_delay, rng)
    expected = spec.timeout or (duration_ms or 0) / 1000
    if not retry.fits_before_next_slot(now, delay, deadline, expected):
        return None, PAST_INTERVAL if manual else PAST_NEXT_SLOT
    return delay, None


def failure_streak(runs: Iterable[Run]) -> int:
    """Failed slots in a row, newest first (``runs`` newest first); a success just recorded
    is passed over, so that a recovery sees the streak it ends. Warnings, like skips, neither
    count nor end a streak: --alert-after counts failures, and a job that fails and warns by
    turns has not recovered."""
    finished = [r for r in runs if r.status in (Status.SUCCEEDED, *BAD_STATUSES)]
    if finished and finished[0].status == Status.SUCCEEDED:
        finished = finished[1:]
    streak = 0
    for run in finished:
        if run.status == Status.SUCCEEDED:
            break
        streak += 1
    return streak


def choose_hook(spec: JobSpec, status: str, streak: int) -> tuple[str | None, str | None]:
    """The hook to run and CRONWRAP_ALERT. A warning runs --on-warning, always. Under
    --alert-after N, --on-failure runs from the N-th failed slot in a row on ("failing"), and
    once more ("recovered") at the success that ends such a streak — the channel that was
    paged hears it is over."""
    if status == Status.WARNING:
        return spec.on_warning, None
    ok = status == Status.SUCCEEDED
    if spec.alert_after <= 1:
        return (spec.on_success if ok else spec.on_failure), None
    if not ok:
        return (spec.on_failure, "failing") if streak >= spec.alert_after else (None, None)
    if streak >= spec.alert_after and spec.on_failure:
        return spec.on_failure, "recovered"
    return spec.on_success, None


def firing_status(statuses: list[int]) -> int:
    """A firing of several slots exits with the first run's status that is not 0, otherwise
    the last one's: a failed catch-up is not hidden by a good current slot."""
    return next((s for s in statuses if s != 0), statuses[-1] if statuses else 0)


def stops_here(spec: JobSpec, ran_and_failed: bool) -> bool:
    """A --date/--at range stops at the first slot that ran and did not succeed (a warning
    is done: the range goes on), unless --keep-going; a firing's catch-ups all run."""
    return ran_and_failed and (spec.date is not None or spec.at is not None) \
        and not spec.keep_going


def max_attempts(spec: JobSpec, retry_of: int | None) -> int:
    """The claim's attempts cap: --max-attempts (1), raised to let this invocation retake the
    slot it just failed when it is retrying (other firings still need --max-attempts)."""
    cap = spec.max_attempts or 1
    return cap if retry_of is None else max(cap, retry_of + 1)
