"""The ledger contract: one logical schema, several back ends (SQLite, PostgreSQL).

Back ends hold only persistence; the claim protocol below is the same everywhere and is
proved by one contract test suite (tests/integration/test_ledger_contract.py) run on each.
The records that cross this interface (``ClaimRequest``, ``Claim``, ``Run``, …) are the
domain's, in model.py.

Times cross this interface as timezone-aware UTC datetimes. ``now`` in a back end is the
database's clock (SQLite: this host's), unless the ledger was built with a ``clock`` for tests.
"""

from __future__ import annotations

from cronwrap.record import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime
    from typing import Protocol

    from cronwrap.model import Claim, ClaimRequest, Finish, JobInfo, JobSummary, Mark, Run
else:
    Protocol = object  # the contract is for readers and type checkers; nothing to import at run time


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
