"""Retries of transient failures: which ends are transient, how long to wait, whether it fits.

Pure: the runner passes the clock and a source of random numbers (``Uniform``). Without
``--retry-on`` every failure and timeout is transient except exit 126 and 127 (the shell's and
GNU ``timeout``'s "found but cannot run" and "not found": another attempt fails the same way).
Two limits apply together:
``--retries N`` extra attempts within one invocation, and ``--max-attempts N`` for a slot
across invocations (the ledger's attempt counter). A retry never runs past the next slot of
the schedule: the next firing is the better retry (a manual run: never longer after it began
than the schedule's interval, ``retry_deadline``).
"""

from __future__ import annotations

from cronwrap.model import Status
from cronwrap.record import TYPE_CHECKING

if TYPE_CHECKING:
    from datetime import datetime
    from typing import Protocol

    class Uniform(Protocol):
        """What a retry's backoff and ``--jitter`` need of ``random.Random``."""

        def uniform(self, a: float, b: float) -> float: ...

TIMEOUT = Status.TIMEOUT.value  # the member of a retry-on set that stands for "the run timed out"
EX_TEMPFAIL = 75  # sysexits.h: "temporary failure, try again later"
CANNOT_RUN = frozenset({126, 127})  # never retried without --retry-on: the command cannot run
RETRYABLE_STATUSES = (Status.FAILED, Status.TIMEOUT)  # never killed: a signal from outside, or a lost lease
_MAX_DOUBLINGS = 60  # 2**60 × any sane base is beyond any cap; keeps the float finite


def should_retry(status: str, exit_code: int | None, retry_on: frozenset[int | str] | None,
                 attempt: int, retries: int, max_attempts: int | None, *,
                 first_attempt: int = 1) -> bool:
    """Whether the run that just ended as ``status``/``exit_code`` gets another attempt now.

    ``retry_on``: the transient exit statuses (and ``TIMEOUT``); None, as without
    ``--retry-on``: every failure and timeout but ``CANNOT_RUN``.
    ``attempt``: the ledger's attempt number of that run (1, 2, …, counted across
    invocations); ``first_attempt``: the attempt number this invocation started with, so
    ``attempt - first_attempt`` retries were already spent here, out of ``retries``.
    ``max_attempts``: the per-slot cap across invocations, None for none."""
    if retry_on is None:
        transient = status in RETRYABLE_STATUSES and exit_code not in CANNOT_RUN
    elif status == Status.TIMEOUT:
        transient = TIMEOUT in retry_on
    else:
        transient = status in RETRYABLE_STATUSES and exit_code in retry_on
    if not transient or attempt - first_attempt >= retries:
        return False
    return max_attempts is None or attempt < max_attempts


def backoff(attempt: int, base: float, cap: float, rng: Uniform) -> float:
    """Seconds to wait before retry number ``attempt`` (1 for the first retry): exponential
    with full jitter, uniform(0, min(cap, base × 2^(attempt-1))). ``cap`` 0 means no cap."""
    ceiling = base * 2.0 ** min(max(attempt - 1, 0), _MAX_DOUBLINGS)
    if cap > 0:
        ceiling = min(cap, ceiling)
    return rng.uniform(0.0, ceiling) if ceiling > 0 else 0.0


def retry_deadline(scheduled_at: datetime | None, next_slot: datetime | None,
                   began: datetime | None = None) -> datetime | None:
    """When a retry must have ended: the schedule's ``next_slot`` after the run's slot. For a
    manual run (``began``: when its first attempt started) the next slot after an old slot is
    long past, so the same interval counts from when it began instead: a re-run of last
    month's daily slot may retry for a day. None: no schedule, no limit."""
    if next_slot is None or scheduled_at is None:
        return None
    return next_slot if began is None else began + (next_slot - scheduled_at)


def fits_before_next_slot(now: datetime, delay: float, deadline: datetime | None,
                          expected_duration: float) -> bool:
    """Whether a retry started ``delay`` seconds after ``now`` and lasting
    ``expected_duration`` seconds ends before ``deadline`` (``retry_deadline``; None: no
    schedule, always fits).

    ``expected_duration``: the caller's bound on the attempt, e.g. ``--timeout`` when set,
    else the attempt that just failed took."""
    if deadline is None:
        return True
    return (deadline - now).total_seconds() > delay + max(expected_duration, 0.0)
