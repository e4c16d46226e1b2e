"""The ledger contract: one logical schema, several back ends (SQLite, PostgreSQL).

Back ends hold only persistence; the claim protocol below is the same everywhere and is
proved by one contract test suite (tests/integration/test_ledger_contract.py) run on each.

Times cross this interface as timezone-aware UTC datetimes. ``now`` in a back end is the
database's clock (SQLite: this host's), unless the ledger was built with a ``clock`` for tests.
"""

from __future__ import annotations

from datetime import datetime, timezone
from enum import StrEnum

from cronwrap.record import TYPE_CHECKING, Record

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Callable, Protocol
else:
    Protocol = object  # the contract is for readers and type checkers; nothing to import at run time

class Status(StrEnum):
    """A run's status, as the ledger stores it (ABANDONED is only ever shown)."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    WARNING = "warning"
    FAILED = "failed"
    TIMEOUT = "timeout"
    KILLED = "killed"
    SKIPPED = "skipped"
    MISSED = "missed"
    ABANDONED = "abandoned"  # shown, never stored: a running row whose lease has expired


STATUS_MEANINGS = {  # the registry the docs are made from (cronwrap(1) LEDGER, README)
    Status.RUNNING: "Claimed; the job is running and its wrapper renews the run's lease "
                    "(`--lease`) every lease/3.",
    Status.SUCCEEDED: "The job exited with status 0, or with another status of "
                      "`--success-exit`.",
    Status.WARNING: "Done, but look at it: the job exited with a status of `--warning-exit`, "
                    "or, with reason `too_fast`, succeeded in less than `--min-duration`. The "
                    "slot is done, as a succeeded one is: no retry, no catch-up, and a manual "
                    "run needs `--force`. Health is `warning`; `--on-warning` runs.",
    Status.FAILED: "The job exited with another status, or was not found or not executable.",
    Status.TIMEOUT: "The job reached `--timeout` and was ended; never `failed`, even when it "
                    "needed KILL.",
    Status.KILLED: "A signal ended the job (a forwarded TERM, `--overlap replace`), or, with "
                   "reason `lease_lost`, cronwrap ended it because the lease was lost: another "
                   "runner took the slot over, or the ledger stayed unreachable for longer than "
                   "the lease. A runner that lost its lease may no longer act for that slot.",
    Status.SKIPPED: "Not run: reason `overlap` (another run of the job was live) or `too_late` "
                    "(a missed slot older than `--catchup-window`). The slot stays claimable.",
    Status.MISSED: "A slot of `--schedule` that never ran. Claimable.",
    Status.ABANDONED: "Shown, never stored: a `running` row whose lease has expired because its "
                      "wrapper is gone. Claimable again.",
}


class Trigger(StrEnum):
    """Why a run ran: cron fired it for its slot, for a slot that was missed, or a person did."""

    SCHEDULE = "schedule"
    CATCHUP = "catchup"
    MANUAL = "manual"


class Reason(StrEnum):
    """Why a slot was not run, why a run was ended, or why it was recorded ``warning``
    (kept in the ledger's ``skip_reason``)."""

    OVERLAP = "overlap"
    DUPLICATE = "duplicate"
    TOO_LATE = "too_late"
    LEASE_LOST = "lease_lost"
    TOO_FAST = "too_fast"  # a success faster than --min-duration: recorded warning


class SlotRun(Record):
    """One run of one slot, from plan to ledger: the slot's run key, its original time (in the
    job's zone), why it runs, and how far the firing was from it (milliseconds, positive:
    late; None unless this is the firing's own slot and the firing was off it). catchup plans
    them, the runner runs them, and a ClaimRequest is one with its claimer and policy."""

    run_key: str
    scheduled_at: datetime
    trigger: str
    skew_ms: int | None
    _defaults = dict(skew_ms=None)


class Mark(Record):
    """A slot recorded without running it: ``missed`` (reason None), or ``skipped`` with
    reason ``too_late``."""

    run_key: str
    scheduled_at: datetime
    status: str
    reason: str | None


# The names the code has always used; each is the enum member itself, not a second spelling.
RUNNING, SUCCEEDED, WARNING, FAILED, TIMEOUT, KILLED, SKIPPED, MISSED, ABANDONED = Status
FINAL_STATUSES = (SUCCEEDED, WARNING, FAILED, TIMEOUT, KILLED, SKIPPED, MISSED)
DONE_STATUSES = (SUCCEEDED, WARNING)  # the slot is done: a claim is a duplicate without --force
BAD_STATUSES = (FAILED, TIMEOUT, KILLED)  # the run did not succeed: health critical, retryable
OVERLAP, DUPLICATE, TOO_LATE, LEASE_LOST, TOO_FAST = Reason

UTC = timezone.utc
NO_RUN_ID = 2**62  # above every run id: "before" it is every run


def iso(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat(timespec="milliseconds")


class Run(Record):
    """One row of ``runs``: a slot of a job and the latest attempt at it (times are UTC)."""

    run_id: int
    job: str
    run_key: str
    scheduled_at: datetime | None
    trigger: str
    status: str
    skip_reason: str | None
    attempt: int
    host: str | None
    pid: int | None
    pid_start: int | None
    locked_until: datetime | None
    fence: int | None
    started_at: datetime | None
    finished_at: datetime | None
    duration_ms: int | None
    exit_code: int | None
    signal: int | None
    timed_out: bool
    error_tail: str | None
    log_path: str | None
    skew_ms: int | None
    boot_id: str | None
    pid_ns: int | None
    _defaults = dict(skip_reason=None, attempt=0, host=None, pid=None, pid_start=None,
                     locked_until=None, fence=None, started_at=None, finished_at=None,
                     duration_ms=None, exit_code=None, signal=None, timed_out=False,
                     error_tail=None, log_path=None, skew_ms=None, boot_id=None, pid_ns=None)

    def shown_status(self, now: datetime) -> str:
        if self.status == RUNNING and (self.locked_until is None or self.locked_until <= now):
            return ABANDONED
        return self.status

    def lease_left(self, now: datetime) -> float | None:
        if self.status != RUNNING or self.locked_until is None:
            return None
        return (self.locked_until - now).total_seconds()

    def to_json(self, now: datetime) -> dict:
        data = self.asdict()
        for key in ("scheduled_at", "locked_until", "started_at", "finished_at"):
            data[key] = iso(data[key])
        data["status"] = self.shown_status(now)
        return data


def _never_gone(pid: int | None, start: int | None) -> bool:
    return False


class JobInfo(Record):
    """What a firing tells the ledger about its job (kept in ``jobs``)."""

    name: str
    schedule: str | None
    tz: str | None
    key_template: str | None
    settings: str | None
    _defaults = dict(schedule=None, tz=None, key_template=None, settings=None)


class ClaimRequest(SlotRun):
    """A firing asking for ``(job, run_key)``: the slot-run, who asks, and on what terms.

    lease: seconds; overlap_skip: step 2 (a live run of
    the job anywhere means skip); force: run a slot that already succeeded; max_attempts: a
    failed slot is claimable again while attempts < this; is_gone(pid, start): is a process of
    this runner gone (step 0: this runner's dead wrappers are abandoned at once); skew_ms is
    kept on the run (status warns about a host far off). host, boot_id, pid_ns: the runner identity (procs.Runner). A running row's pid is looked
    up with is_gone only when the row has this very identity: two containers with one host
    name (or a row from an earlier boot, or one written before boot IDs were recorded) wait
    for the lease instead.
    """

    job: JobInfo
    host: str
    pid: int
    pid_start: int
    lease: float
    overlap_skip: bool
    force: bool
    max_attempts: int
    is_gone: Callable[[int | None, int | None], bool]
    boot_id: str
    pid_ns: int
    _defaults = dict(overlap_skip=True, force=False, max_attempts=1, is_gone=_never_gone,
                     skew_ms=None, boot_id="", pid_ns=0)

    def same_runner(self, row: Run) -> bool:
        """``row`` was claimed by this runner (host, boot, PID namespace): its pid means
        something here."""
        return (row.host == self.host and bool(self.boot_id) and row.boot_id == self.boot_id
                and bool(self.pid_ns) and row.pid_ns == self.pid_ns)


class Claim(Record):
    """The answer to a claim: ``run`` when claimed, else ``skip_reason`` and the row in the way.

    took_over: the claimed row had been abandoned by an earlier runner."""

    run: Run | None
    skip_reason: str | None
    blocking: Run | None
    took_over: bool
    _defaults = dict(skip_reason=None, blocking=None, took_over=False)


class Finish(Record):
    """The end of a run, as recorded."""

    status: str
    duration_ms: int | None
    exit_code: int | None
    signal: int | None
    timed_out: bool
    error_tail: str | None
    log_path: str | None
    skip_reason: str | None
    _defaults = dict(skip_reason=None)


class JobSummary(Record):
    """What ``status`` shows for one job."""

    job: str
    schedule: str | None
    tz: str | None
    key_template: str | None
    first_seen: datetime | None
    last_seen: datetime | None
    last_slot: datetime | None
    last_run: Run | None
    last_success_at: datetime | None
    running: list[Run]
    counts: dict[str, int]
    settings: str | None  # the job's recorded settings (JSON): --slow-factor, for status
    _defaults = dict(settings=None)


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

    def preview(self, req: ClaimRequest) -> Claim:
        """What ``claim(req)`` would answer now, reading only: ``run`` is None; skip_reason
        None means it would claim (``blocking``: the existing row it would take, if any,
        ``took_over`` when that row is abandoned), else the reason and the row in the way."""

    def record_skip(self, req: ClaimRequest, reason: str) -> Claim:
        """The local lock is busy: record ``skipped``/``reason`` for a new key, or report
        ``duplicate`` with the existing row. Never takes a row."""

    def job_info(self, job: str) -> JobInfo | None:
        """What the job's firings recorded (schedule, zone, key template, settings), or None
        for a job the ledger has not seen."""

    def slot_history(self, job: str, since: datetime) -> tuple[datetime | None, set[str]]:
        """The newest scheduled slot seen for ``job`` (None: none yet; manual runs do not
        count), and its run keys of slots scheduled since ``since`` (for catch-up planning)."""

    def record_marks(self, req: ClaimRequest, marks: Sequence[Mark]) -> int:
        """Record slots that will not run where the slot has no row yet; how many were."""

    def heartbeat(self, run: Run, lease: float, wait: float | None = None) -> bool:
        """Extend the lease of ``run`` if its row is still this claim's — same id, fence, job,
        run key and claimer (host, pid, pid start), so that a ledger recreated or restored
        under a running job can never have another run's row renewed; False when lost.
        ``wait``: seconds a full or restarting server is waited for (default: the ledger's)."""

    def finish(self, run: Run, result: Finish, wait: float | None = None) -> bool:
        """Record the end of ``run`` if its row is still this claim's (as ``heartbeat``);
        False when the lease was lost (another runner took the slot over: its record stands)."""

    def runs(self, job: str, limit: int = 50, since: datetime | None = None,
             before: int | None = None) -> list[Run]:
        """Runs of ``job``, newest first, at most ``limit``: those created since ``since``, or
        those whose id is below ``before`` (keyset paging: the last run_id of the page before;
        no more rows are read than returned, however long the job's history). Not both."""

    def runs_after(self, job: str, after: int, limit: int) -> list[Run]:
        """The ``limit`` runs of ``job`` whose ids come right after ``after``, oldest first
        (the page newer than a page of ``runs(before=…)``)."""

    def get_run(self, job: str, run_id: int) -> Run | None: ...

    def summaries(self, since: datetime, jobs: list[str] | None = None) -> list[JobSummary]:
        """One summary per known job (or the named ones), counts over runs since ``since``."""

    def prune(self, cutoff: datetime, keep_last: int) -> list[tuple[int, str, str | None]]:
        """Delete finished rows older than ``cutoff`` beyond each job's newest ``keep_last``;
        never a running row, nor a slot inside its job's catch-up window. Returns (id, job,
        log_path) of each row removed."""

    def unlock(self, job: str) -> list[Run]:
        """Expire every running lease of ``job`` (rows become abandoned and claimable)."""

    def idle(self) -> None:
        """From now on hold no server resource between operations: the runner calls it once
        the job is claimed, so a running job costs a PostgreSQL server no connection
        between its lease renewals (each of which connects for its own length)."""

    def now(self) -> datetime:
        """The ledger's clock."""

    def close(self) -> None: ...
