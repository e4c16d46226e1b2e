"""The ledger contract: one logical schema, several back ends (SQLite, PostgreSQL).

``Ledger`` is an abstract base class with one abstract method per operation (APScheduler 4's
``abc.DataStore`` is the model): a back end that lacks one fails when it is built, not when a
firing first needs it. Back ends hold only persistence; the claim protocol (ARCHITECTURE.md
§3) is the same everywhere and is proved by one contract test suite
(tests/integration/test_ledger_contract.py) run on each. The records that cross this
interface (``ClaimRequest``, ``Claim``, ``Run``, …) are the domain's, in model.py.

Times cross this interface as timezone-aware UTC datetimes. ``now`` in a back end is the
database's clock (SQLite: this host's), unless the ledger was built with a ``clock`` for tests.
``abc`` costs the ``run`` path nothing: the interpreter has imported it before any of cronwrap.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from cronwrap.record import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime

    from cronwrap.model import (Alert, AlertState, Claim, ClaimRequest, Finish, JobInfo,
                                JobSummary, Mark, Pause, Run, RunAttempt, RunTally, SlotHistory,
                                Step, StepStart)


class Ledger(ABC):
    """The operations every back end implements; each is one transaction.

    Every operation that fails raises ``errors.LedgerError`` (never a driver's exception, and
    never with a password in its text). Two of its flags tell a caller what it may do next:

    - ``connection_lost``: the connection broke (a server restart, a network cut, an idle
      session ended). The next call connects again, so one retry is worth it; the operation
      may have committed with only its answer lost, which is why each write below says what
      its retry answers.
    - ``unreachable``: no connection could be made, after waiting as long as allowed (the
      ledger's ``wait``, or the call's): another try now would only wait again.

    Neither flag: the ledger is busy past its timeout, damaged, refused (a schema newer than
    this cronwrap, a read-only file), or the statement failed: retrying will not help.
    """

    @abstractmethod
    def claim(self, req: ClaimRequest) -> Claim:
        """Claim ``(job, run_key)`` (ARCHITECTURE.md §3). Records the job (schedule, zone,
        key template, settings, last seen, newest slot; a manual run only touches last seen),
        expires the leases of this runner's rows whose wrapper ``req.is_gone`` says is gone,
        and under ``overlap_skip`` answers ``overlap`` with the live run of another slot in
        the way (recording a ``skipped``/``overlap`` row for a new key). Otherwise it inserts
        the key if new and takes the row if it is new, abandoned (expired lease), skipped,
        missed, retryable (failed, timeout or killed with attempts < ``max_attempts``, or any
        of them by a manual run), or done (succeeded, warning) with ``force``. Taking sets
        status running, ``attempts + 1``, trigger, scheduled time, the claimer (host, pid, pid
        start, boot id, PID namespace), ``locked_until = now + lease``, ``fence`` = the job's
        next fence value, started at now, and clears the previous attempt's end; ``took_over``
        says the row was abandoned. Else it answers ``duplicate`` and the row in the way.

        A firing that is not a manual run, of a job with a pause in force (``pause``: the
        job's own, or for ``NAME@HOST`` NAME's), takes nothing: after recording the job it
        records ``skipped``/``paused`` for a new key and answers ``paused``, the slot's row
        (new or already there) as ``blocking`` and the pause as ``pause``.

        :raises LedgerError: nothing was claimed, unless ``connection_lost``: then the claim
            may have committed with its answer lost. One retry on a fresh connection tells:
            if it had committed, the retry answers ``duplicate`` with this very runner's
            running row in the way (runner.ours takes that row as its claim). A schema newer
            than this cronwrap is refused here too (a host upgraded since the ledger was
            opened).
        """

    @abstractmethod
    def preview(self, req: ClaimRequest) -> Claim:
        """What ``claim(req)`` would answer now, reading only (``--dry-run``): ``run`` is
        None; skip_reason None means it would claim (``blocking``: the existing row it would
        take, if any, ``took_over`` when that row is abandoned), else the reason and the row
        in the way (``paused`` with the pause, as ``claim``). Sets nothing.

        :raises LedgerError: nothing was read.
        """

    @abstractmethod
    def record_skip(self, req: ClaimRequest, reason: str) -> Claim:
        """The local lock is busy: record the job (as ``claim``) and ``skipped``/``reason``
        for a new key, or answer ``duplicate`` with the existing row. Never takes a row.

        :raises LedgerError: nothing known to be recorded; a retry is safe (a skip that did
            commit answers ``duplicate`` the second time).
        """

    @abstractmethod
    def job_info(self, job: str) -> JobInfo | None:
        """What the job's firings recorded (schedule, zone, key template, settings), or None
        for a job the ledger has not seen.

        :raises LedgerError: nothing was read; a retry is safe.
        """

    @abstractmethod
    def job_names(self) -> list[str]:
        """Every job the ledger has seen, by its ledger name, sorted.

        :raises LedgerError: nothing was read; a retry is safe.
        """

    @abstractmethod
    def jobs_named(self, name: str) -> list[str]:
        """The ledger's jobs that ``name`` names, sorted: the job itself (fleet scope) and
        each host's share of it (host scope, ``model.ledger_job``); empty for a name it has not
        seen.

        :raises LedgerError: nothing was read; a retry is safe.
        """

    @abstractmethod
    def slot_history(self, job: str, since: datetime) -> SlotHistory:
        """The newest scheduled slot seen for ``job`` (None: none yet; manual runs do not
        count), its runs of slots scheduled since ``since`` that are abandoned at the ledger's
        now (running, lease expired), and ``known`` (``known_keys`` of the job): for catch-up
        and takeover planning. It reads the job's running rows, not its window's.

        :raises LedgerError: nothing was read; a retry is safe.
        """

    @abstractmethod
    def known_keys(self, job: str, keys: set[str]) -> set[str]:
        """Those of ``keys`` that ``job`` has a row for (any status, any trigger).

        :raises LedgerError: nothing was read; a retry is safe.
        """

    @abstractmethod
    def record_marks(self, req: ClaimRequest, marks: Sequence[Mark]) -> int:
        """Record slots that will not run (``missed``, or ``skipped``/``too_late``: trigger
        schedule) where the slot has no row yet, and the job with the newest of them as its
        newest slot; how many were recorded.

        :raises LedgerError: nothing known to be recorded; a retry is safe (a slot recorded
            already is left as it is).
        """

    @abstractmethod
    def heartbeat(self, run: Run, lease: float, wait: float | None = None) -> bool:
        """Set ``locked_until = now + lease`` on ``run``'s row if it is still this claim's —
        same id, fence, job, run key, claimer (host, pid, pid start) and status running, so
        that a ledger recreated or restored under a running job can never have another run's
        row renewed; False when it is not (the lease was lost). ``wait``: seconds a full or
        restarting server is waited for (default: the ledger's).

        :raises LedgerError: the lease was not renewed, and stands as it was: the caller
            tries at the next renewal, and ends the job itself once a whole lease has passed
            without one (lease.Heartbeat). ``unreachable`` after ``wait``.
        """

    @abstractmethod
    def finish(self, run: Run, result: Finish, wait: float | None = None) -> bool:
        """Record the end of ``run`` if its row is still this claim's (as ``heartbeat``):
        sets its status, skip reason, exit code, signal, timed out, duration, error tail and
        log path from ``result``, finished at now, and clears ``locked_until``. False when the
        row is no longer this claim's (another runner took the slot over: its record stands).

        :raises LedgerError: the end was not recorded, or its answer was lost
            (``connection_lost``). A retry is safe: an end that did commit matches nothing
            the second time and answers False. ``unreachable``: no connection within
            ``wait`` — the caller spools the result to the outbox rather than wait again
            (attempt.record_finish).
        """

    @abstractmethod
    def record_superseded(self, run: Run, result: Finish, wait: float | None = None) -> None:
        """Keep ``result`` as the end of ``run``'s attempt (``run.attempt``) in the slot's
        attempts, after ``finish`` answered False (the slot was taken over): its status,
        reason (``superseded`` when ``result`` has none), exit code, signal, duration, and
        finished at ``run.started_at`` + its duration (when the job really ended, which may
        be long before its wrapper could say so). Written over the ``abandoned`` record the
        takeover left for that attempt, never over one of another fence; the slot's row is
        left as it is (its new runner's record stands). ``wait`` as for ``finish``.

        :raises LedgerError: the end was not kept. A retry is safe (the same end is written
            again); the caller gives up after one, the exit status does not change.
        """

    @abstractmethod
    def attempts(self, runs: Sequence[Run], now: datetime) -> dict[int, list[RunAttempt]]:
        """Every attempt of each of ``runs`` the ledger kept, oldest first, by run id, with
        the row's own latest attempt as it stands at ``now`` (an ``abandoned`` one shown as
        such) last: the earlier ones recorded since the ledger was expanded for them (a
        ledger that no cronwrap of this release has written to has only the latest).

        :raises LedgerError: nothing was read.
        """

    @abstractmethod
    def with_usage(self, runs: Sequence[Run]) -> list[Run]:
        """``runs``, each with what its latest attempt's job tree used (``USAGE_KEYS``:
        CPU time, peak memory), read in one go (expansion 6); a run without a record of it,
        or any run of a ledger without the expansion, as it is.

        :raises LedgerError: nothing was read.
        """

    @abstractmethod
    def runs(self, job: str, limit: int = 50, since: datetime | None = None,
             before: int | None = None) -> list[Run]:
        """Runs of ``job``, newest first, at most ``limit``: those created since ``since``
        (newest by creation), or those whose id is below ``before`` (keyset paging: the last
        run_id of the page before; by id). Either way a page reads one page of rows, however
        long the job's history or the window. Not both (ValueError).

        :raises LedgerError: nothing was read.
        """

    @abstractmethod
    def runs_after(self, job: str, after: int, limit: int) -> list[Run]:
        """The ``limit`` runs of ``job`` whose ids come right after ``after``, oldest first
        (the page newer than a page of ``runs(before=…)``).

        :raises LedgerError: nothing was read.
        """

    @abstractmethod
    def get_run(self, job: str, run_id: int) -> Run | None:
        """Run ``run_id`` of ``job``; None when the job has no such run.

        :raises LedgerError: nothing was read.
        """

    @abstractmethod
    def run_by_key(self, job: str, run_key: str) -> Run | None:
        """The row of ``job``'s slot ``run_key`` (one look-up along the unique key); None
        when the slot has none (``why``).

        :raises LedgerError: nothing was read.
        """

    @abstractmethod
    def summaries(self, since: datetime, jobs: list[str] | None = None) -> list[JobSummary]:
        """One summary per known job (or the named ones), counts over runs since ``since``.

        :raises LedgerError: nothing was read.
        """

    @abstractmethod
    def change_token(self) -> str | None:
        """A short text that differs from every earlier one of this same object whenever
        anything was committed to the ledger since (by any connection, any host): equal
        tokens mean nothing read from it can have changed, so what was drawn from it may be
        kept (``serve``). It may change without a change that matters (never the other way).
        None when this object can no longer tell (its SQLite file was replaced): open the
        ledger again. One cheap statement: ``serve`` asks it on every request.

        :raises LedgerError: nothing was read.
        """

    @abstractmethod
    def tallies(self, jobs: list[str] | None = None) -> dict[str, RunTally]:
        """The counts of every job's ends (or the named jobs'), by job; a job with none is
        left out. Counted by the ledger as each row is written, never less than at the last
        call: the counters and the duration histogram of ``status --format prometheus``.

        :raises LedgerError: nothing was read.
        """

    @abstractmethod
    def alerts(self, since: datetime) -> list[AlertState]:
        """The open alerts of ``cronwrap watch``, and those closed since ``since``, oldest
        first, each with the sends it has had; none from a ledger without them yet.

        :raises LedgerError: nothing was read; a retry is safe.
        """

    @abstractmethod
    def record_alerts(self, opened: Sequence[Alert], closed: Sequence[str], by: str,
                      forget_before: datetime) -> None:
        """In one transaction: open each alert of ``opened`` that no watcher has opened
        (one already open or closed under its key is left as it is), close the open alerts
        whose keys are in ``closed``, and delete the alerts closed before ``forget_before``.

        :raises LedgerError: connection_lost: it may have committed; a retry does the same.
        """

    @abstractmethod
    def claim_send(self, key: str, notifier: str, phase: str, by: str,
                   lease: float) -> int | None:
        """Claim one send of an alert for watcher ``by``, for ``lease`` seconds by the
        ledger's clock: the tries it has had when it is ``by``'s now (new, or unsent with its
        claim lapsed and its backoff over), else None (sent, claimed, or waiting to retry).

        :raises LedgerError: connection_lost: the claim may have been made; it lapses after
            ``lease``, and another watcher (or this one) sends it then.
        """

    @abstractmethod
    def send_result(self, key: str, notifier: str, phase: str, by: str, error: str | None,
                    retry_in: float) -> None:
        """Record ``by``'s send: done (``error`` None), or failed, to be tried again once
        ``retry_in`` seconds have passed, by whichever watcher comes first.

        :raises LedgerError: the send's claim lapses and it is sent again: at least once.
        """

    @abstractmethod
    def prune(self, cutoff: datetime, keep_last: int) -> list[tuple[int, str, str | None]]:
        """Delete finished rows older than ``cutoff`` beyond each job's newest ``keep_last``;
        never a running row, nor a slot inside its job's catch-up window, and refresh the
        planner's statistics (``analyze``) in the same transaction. Returns (id, job,
        log_path) of each row removed.

        :raises LedgerError: nothing was deleted (one transaction).
        """

    @abstractmethod
    def analyze(self) -> None:
        """Refresh the database's statistics of the runs and jobs tables, which its query
        planner reads to pick an index (SQLite's ANALYZE within a bounded sample, PostgreSQL's
        ANALYZE): ``db upgrade``, prune and every migration or expansion run it.

        :raises LedgerError: the statistics are as they were.
        """

    @abstractmethod
    def unlock(self, job: str) -> list[Run]:
        """Expire every running lease of ``job`` (``locked_until = now``: the rows become
        abandoned and claimable); returns those rows.

        :raises LedgerError: no lease was expired (one transaction).
        """

    @abstractmethod
    def pause(self, job: str, until: datetime | None, reason: str | None,
              paused_by: str) -> Pause:
        """Pause ``job`` (a job name, or ``NAME@HOST``) until ``until`` (None: until
        ``resume``), replacing a pause it had: sets its reason, who paused it (a host name)
        and paused at now. Returns the pause as recorded.

        :raises LedgerError: nothing was changed; a retry is safe (it writes the same pause).
        """

    @abstractmethod
    def resume(self, job: str) -> Pause | None:
        """Remove ``job``'s pause (that very name's: ``NAME@HOST`` is another); the pause
        removed, or None when it had none (an expired pause is removed too, and returned).

        :raises LedgerError: nothing was changed; a retry is safe (it answers None).
        """

    @abstractmethod
    def pauses(self) -> dict[str, Pause]:
        """Every pause recorded, by job, expired ones too (``model.active_pause`` tells which
        is in force at a time); none from a ledger without them yet (before expansion 3).

        :raises LedgerError: nothing was read.
        """

    # -- steps (cronwrap step, expansion 5)

    @abstractmethod
    def begin_step(self, run_id: int, run_key: str, fence: int, key: str, host: str,
                   pid: int, force: bool, since: int) -> StepStart:
        """Start step ``key`` of the run ``run_id`` (whose run key must be ``run_key``) for
        the attempt holding ``fence``, in one transaction that no takeover can enter:
        ``model.step_action`` decides from the run row and the step as recorded, and only
        STEP_RUN records the step ``running`` (attempt, fence, ``host``, ``pid``, started
        now), and only while the run's fence is still ``fence``.

        :raises LedgerError: nothing was recorded; a retry is safe (it starts it again).
        """

    @abstractmethod
    def end_step(self, run: Run, key: str, status: str, exit_code: int | None,
                 signal: int | None, duration_ms: int) -> tuple[bool, Run | None]:
        """Record how step ``key`` begun by ``run``'s attempt ended, over that start only
        (never over a newer attempt's start of the same step). Returns whether it was
        recorded, and the run row as it is now (None: gone), to tell whether the slot is
        still the attempt's.

        :raises LedgerError: nothing was recorded; a retry is safe.
        """

    @abstractmethod
    def step_state(self, run_id: int, run_key: str, key: str) -> tuple[Run | None, Step | None]:
        """The run row and step ``key`` of it as recorded (``cronwrap step --done``).

        :raises LedgerError: nothing was read.
        """

    @abstractmethod
    def steps(self, runs: Sequence[Run]) -> dict[int, list[Step]]:
        """The steps of each run, by run id, in the order they started; none from a ledger
        without them yet (before expansion 5).

        :raises LedgerError: nothing was read.
        """

    @abstractmethod
    def idle(self) -> None:
        """From now on hold no server resource between operations: the runner calls it once
        the job is claimed, so a running job costs a PostgreSQL server no connection
        between its lease renewals (each of which connects for its own length).

        Raises nothing: there is nothing a caller could do about a connection it gives up.
        """

    @abstractmethod
    def init_schema(self) -> None:
        """``cronwrap db init``: bring the schema to this cronwrap's version (as opening the
        ledger to write already does), and create its server-side functions again even when
        the version is current (PostgreSQL: ``cronwrap_claim``, ``cronwrap_settings``; SQLite
        has none), which repairs a ledger whose function was dropped or replaced by hand.

        :raises LedgerError: nothing changed (one transaction): the schema is newer than this
            cronwrap, its version is damaged, or the ledger could not be reached.
        """

    @abstractmethod
    def now(self) -> datetime:
        """The ledger's clock.

        :raises LedgerError: the clock could not be read.
        """

    @abstractmethod
    def close(self) -> None:
        """Give back the connection; the ledger is not used again.

        :raises LedgerError: the connection could not be closed cleanly (what was committed
            stays committed).
        """
