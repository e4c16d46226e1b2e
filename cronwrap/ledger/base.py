"""The ledger contract: one logical schema, several back ends (SQLite, PostgreSQL).

Back ends hold only persistence; the claim protocol below is the same everywhere and is
proved by one contract test suite (tests/integration/test_ledger_contract.py) run on each.

Times cross this interface as timezone-aware UTC datetimes. ``now`` in a back end is the
database's clock (SQLite: this host's), unless the ledger was built with a ``clock`` for tests.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Callable, Protocol

RUNNING = "running"
SUCCEEDED = "succeeded"
FAILED = "failed"
TIMEOUT = "timeout"
KILLED = "killed"
SKIPPED = "skipped"
MISSED = "missed"
ABANDONED = "abandoned"  # shown, never stored: a running row whose lease has expired
FINAL_STATUSES = (SUCCEEDED, FAILED, TIMEOUT, KILLED, SKIPPED, MISSED)

# skip reasons
OVERLAP = "overlap"
DUPLICATE = "duplicate"
TOO_LATE = "too_late"
LEASE_LOST = "lease_lost"

UTC = timezone.utc


def iso(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat(timespec="milliseconds")


@dataclass
class Run:
    """One row of ``runs``: a slot of a job and the latest attempt at it."""

    run_id: int
    job: str
    run_key: str
    scheduled_at: datetime | None
    trigger: str
    status: str
    skip_reason: str | None = None
    attempt: int = 0
    host: str | None = None
    pid: int | None = None
    pid_start: int | None = None
    locked_until: datetime | None = None
    fence: int | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    duration_ms: int | None = None
    exit_code: int | None = None
    signal: int | None = None
    timed_out: bool = False
    error_tail: str | None = None
    log_path: str | None = None

    def shown_status(self, now: datetime) -> str:
        if self.status == RUNNING and (self.locked_until is None or self.locked_until <= now):
            return ABANDONED
        return self.status

    def lease_left(self, now: datetime) -> float | None:
        if self.status != RUNNING or self.locked_until is None:
            return None
        return (self.locked_until - now).total_seconds()

    def to_json(self, now: datetime) -> dict:
        data = asdict(self)
        for key in ("scheduled_at", "locked_until", "started_at", "finished_at"):
            data[key] = iso(data[key])
        data["status"] = self.shown_status(now)
        return data


@dataclass(frozen=True)
class JobInfo:
    """What a firing tells the ledger about its job (kept in ``jobs``)."""

    name: str
    schedule: str | None = None
    tz: str | None = None
    key_template: str | None = None


@dataclass(frozen=True)
class ClaimRequest:
    job: JobInfo
    run_key: str
    scheduled_at: datetime | None
    trigger: str  # schedule | catchup | manual
    host: str
    pid: int
    pid_start: int
    lease: float  # seconds
    overlap_skip: bool = True  # step 2: a live run of the job anywhere means skip
    force: bool = False  # run a slot that already succeeded
    max_attempts: int = 1  # a failed slot is claimable again while attempts < this
    # Step 0 of a claim: is a process of this host gone? (PID, start time) -> bool
    is_gone: Callable[[int | None, int | None], bool] = field(default=lambda pid, start: False)


@dataclass(frozen=True)
class Claim:
    """The answer to a claim: ``run`` when claimed, else ``skip_reason`` and the row in the way."""

    run: Run | None
    skip_reason: str | None = None
    blocking: Run | None = None
    took_over: bool = False  # the claimed row was abandoned by an earlier runner


@dataclass(frozen=True)
class Finish:
    status: str
    duration_ms: int
    exit_code: int | None
    signal: int | None
    timed_out: bool
    error_tail: str | None
    log_path: str | None
    skip_reason: str | None = None


@dataclass
class JobSummary:
    """What ``status`` shows for one job."""

    job: str
    schedule: str | None
    tz: str | None
    key_template: str | None
    first_seen: datetime
    last_seen: datetime
    last_run: Run | None
    last_success_at: datetime | None
    running: list[Run]
    counts: dict[str, int]


class Ledger(Protocol):
    """The operations every back end implements; each is one transaction."""

    def claim(self, req: ClaimRequest) -> Claim:
        """Claim ``(job, run_key)``: lock the job, enforce ``overlap_skip`` (recording a
        ``skipped``/``overlap`` row for a new key), insert the key if new, and take the row if
        it is new, abandoned (expired lease, or this host's dead wrapper), skipped or missed,
        retryable (failed/timeout/killed with attempts < max_attempts, or any with trigger
        manual), or succeeded with ``force``. A claim sets status running, attempts + 1, host,
        pid, ``locked_until = now + lease`` and ``fence`` = the job's next fence value.
        Otherwise answers the skip reason (``overlap`` or ``duplicate``) and the row in the way."""

    def record_skip(self, req: ClaimRequest, reason: str) -> Claim:
        """The local lock is busy: record ``skipped``/``reason`` for a new key, or report
        ``duplicate`` with the existing row. Never takes a row."""

    def heartbeat(self, run_id: int, fence: int, lease: float) -> bool:
        """Extend the lease of a row still held with ``fence``; False when it was lost."""

    def finish(self, run_id: int, fence: int, result: Finish) -> bool:
        """Record the end of a run still held with ``fence``; False when the lease was lost
        (another runner took the slot over: its record stands)."""

    def runs(self, job: str, limit: int = 50, since: datetime | None = None) -> list[Run]:
        """Runs of ``job``, newest first."""

    def get_run(self, job: str, run_id: int) -> Run | None: ...

    def summaries(self, since: datetime, jobs: list[str] | None = None) -> list[JobSummary]:
        """One summary per known job (or the named ones), counts over runs since ``since``."""

    def unlock(self, job: str) -> list[Run]:
        """Expire every running lease of ``job`` (rows become abandoned and claimable)."""

    def now(self) -> datetime:
        """The ledger's clock."""

    def close(self) -> None: ...
