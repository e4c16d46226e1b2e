"""The claim protocol of ARCHITECTURE.md §3, written once over named SQL blocks.

A dialect (sqlite.py, postgres.py) supplies the connection, the transaction, the clock and
the conversion of times; this class holds the logic, as procrastinate's JobManager does.
"""

from __future__ import annotations

import threading
from abc import abstractmethod
from contextlib import contextmanager
from datetime import date, datetime, timedelta, timezone
from functools import partial

from cronwrap.errors import LedgerError
from cronwrap.ledger.base import Ledger
from cronwrap.model import (DONE_STATUSES, Alert, AlertState, Claim, ClaimRequest, Finish,
                            JobInfo, JobSummary, Pause, Reason, Run, RunAttempt, RunTally,
                            SlotHistory, Status, Step, StepStart, Trigger, STEP_RUN, USAGE_KEYS,
                            none_known, step_action)
from cronwrap.record import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, Iterator

    from cronwrap.model import Mark

    Row = dict[str, Any]  # a row by column name, values as the driver gives them

_TIME_COLUMNS = ("scheduled_at", "locked_until", "started_at", "finished_at")
NO_RUN_ID = 2**62  # above every run id: "before" it is every run
PAUSES = 3  # the expansion that holds the pauses (cronwrap pause)
STEPS = 5  # the expansion that holds the steps (cronwrap step)
USAGE = 6  # the expansion that holds what each attempt's tree used (CPU, memory)
DAY_COUNTS = 7  # the expansion that keeps the window's counts per job, day and status
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
DAY = 86400  # seconds: the days of day_counts are UTC days since the epoch


def _version_number(value: object) -> int | None:
    """A stored schema version as a number; None when it is not a whole number from 0 (a
    damaged value: text, NULL, negative, or too long to be one)."""
    if isinstance(value, str):
        value = value.strip()
        return int(value) if value.isascii() and value.isdigit() and len(value) <= 9 else None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def decide(row: Run, req: ClaimRequest, now: datetime) -> str | None:
    """None when ``row`` may be claimed by ``req``, else the skip reason."""
    if row.status == Status.RUNNING:
        expired = row.locked_until is None or row.locked_until <= now
        return None if expired else Reason.DUPLICATE  # never steal a live lease, even with --force
    if row.status in (Status.SKIPPED, Status.MISSED, Status.PENDING) or req.force:
        return None
    if row.status in DONE_STATUSES:
        return Reason.DUPLICATE
    if req.trigger == Trigger.MANUAL or row.attempt < req.max_attempts:
        return None
    return Reason.DUPLICATE


# The ends day_counts keeps a column of (expansion 7), in window_counts' order.
KEPT_ENDS = ("succeeded", "warning", "failed", "timeout", "killed", "skipped", "missed")


def _window_counts(rows: list[Row]) -> dict[str, dict[str, int]]:
    """Each job's counts by status from ``window_counts``' rows: a job's whole days and its
    first day's part (``n``: 1 or -1) by column, other statuses one row each (``n`` of
    them); a status counted 0 is left out, as a count of the rows leaves it. In all_counts'
    order (on SQLite): the other statuses by name, then succeeded."""
    import json

    sums: dict[str, dict[str, int]] = {}
    for r in rows:
        job = sums.setdefault(r["job"], {})
        if r["status"] is not None:
            job[r["status"]] = job.get(r["status"], 0) + int(r["n"])
            continue
        sign = 1 if r["n"] is None else int(r["n"])
        for status in KEPT_ENDS:
            if r[status]:
                job[status] = job.get(status, 0) + sign * int(r[status])
        others = r["others"]
        if others is not None and others != "[]":
            for status in (json.loads(others) if isinstance(others, str) else others):
                job[status] = job.get(status, 0) + sign
    return {name: kept for name, job in sums.items()
            if (kept := {k: job[k] for k in sorted(job, key=_count_order) if job[k] > 0})}


def _count_order(status: str) -> tuple[bool, str]:
    return status == "succeeded", status


class SqlLedger(Ledger):
    """The ``Ledger`` over named SQL blocks; subclasses provide ``close`` and the dialect
    hooks at the bottom."""

    def __init__(self, queries: dict[str, str]) -> None:
        self.q = queries
        self._mutex = threading.Lock()  # the heartbeat thread shares the connection
        # The schema this code writes: its newest numbered migration (one place for the fact).
        self.schema_version = max(int(name.rpartition("_")[2]) for name in queries
                                  if name.startswith("migration_"))
        # Its newest expansion, and the one the ledger had when opened (or has since been
        # brought to): tallies need expansion 1.
        self.expansion_level = max(int(name.rpartition("_")[2]) for name in queries
                                   if name.startswith("expansion_"))
        self.expanded = 0

    def stored_version(self, found: object, label: object) -> int:
        """The schema version as the dialect stores it (an integer, or PostgreSQL's text), as
        a number; a damaged one (not a whole number from 0) is refused with where it is and
        what to do."""
        version = _version_number(found)
        if version is None:
            shown = "missing (NULL)" if found is None else repr(found)[:40]
            raise LedgerError(f"ledger {label}: its schema version ({self._version_at}) is "
                              f"{shown}, not a version number: the ledger is damaged; "
                              f"{self._repair_hint(label)}")
        return version

    def check_version(self, found: int, label: object) -> None:
        """A ledger written by a newer cronwrap is refused, never written by an older one."""
        if found > self.schema_version:
            raise LedgerError(f"ledger {label} has schema version {found}, newer than this "
                              f"cronwrap knows ({self.schema_version}): upgrade cronwrap on "
                              "this host (the ledger is left as it is)")

    # -- the protocol --------------------------------------------------------------------

    def claim(self, req: ClaimRequest) -> Claim:
        with self._tx() as cur:
            now = self._db_now(cur)
            self._upsert_job(cur, req, now)
            pause = self._pause_of(cur, req, now)
            if pause is not None:
                row, _ = self._insert_or_get(cur, req, Status.SKIPPED, Reason.PAUSED, now)
                return Claim(run=None, skip_reason=Reason.PAUSED, blocking=row, pause=pause)
            live = self._live_runs(cur, req, now)
            others = [r for r in live if r.run_key != req.run_key]
            if req.overlap_skip and others:
                return self._insert_skip(cur, req, Reason.OVERLAP, now, blocking=others[0])
            row, new = self._insert_or_get(cur, req, Status.PENDING, None, now)
            reason = None if new else decide(row, req, self._time(now))
            if reason:
                return Claim(run=None, skip_reason=reason, blocking=row)
            took_over = row.status == Status.RUNNING
            fence = self._the(cur, "next_fence", job=req.job.name)["fence"]
            claimed = self._the(
                cur, "claim_run", id=row.run_id, trigger=req.trigger, host=req.host,
                scheduled_at=self._to_db(req.scheduled_at), pid=req.pid,
                pid_start=req.pid_start, now=now, lease=self._lease(req.lease), fence=fence,
                skew_ms=req.skew_ms, boot_id=req.boot_id or None, pid_ns=req.pid_ns or None,
            )
            return Claim(run=self._run(claimed), took_over=took_over)

    def preview(self, req: ClaimRequest) -> Claim:
        with self._tx(write=False) as cur:
            now = self._db_now(cur)
            pause = self._pause_of(cur, req, now)
            if pause is not None:
                found = self._one(cur, "run_by_key", job=req.job.name, run_key=req.run_key)
                return Claim(run=None, skip_reason=Reason.PAUSED, pause=pause,
                             blocking=None if found is None else self._run(found))
            live = self._live_runs(cur, req, now, expire=False)
            others = [r for r in live if r.run_key != req.run_key]
            if req.overlap_skip and others:
                return Claim(run=None, skip_reason=Reason.OVERLAP, blocking=others[0])
            found = self._one(cur, "run_by_key", job=req.job.name, run_key=req.run_key)
        if found is None:
            return Claim(run=None)
        row = self._run(found)
        if row.status == Status.RUNNING and all(r.run_id != row.run_id for r in live):
            row = row.replace(locked_until=self._time(now))  # the claim would expire it
        reason = decide(row, req, self._time(now))
        return Claim(run=None, skip_reason=reason, blocking=row,
                     took_over=reason is None and row.status == Status.RUNNING)

    def record_skip(self, req: ClaimRequest, reason: str) -> Claim:
        with self._tx() as cur:
            now = self._db_now(cur)
            self._upsert_job(cur, req, now)
            return self._insert_skip(cur, req, reason, now, blocking=None)

    def slot_history(self, job: str, since: datetime) -> SlotHistory:
        with self._tx(write=False) as cur:
            row = self._one(cur, "job_by_name", job=job)
            if row is None or row["last_slot"] is None:
                return SlotHistory(None, none_known, {})
            rows = self._all(cur, "abandoned_since", job=job, since=self._to_db(since),
                             now=self._db_now(cur))
        return SlotHistory(self._from_db(row["last_slot"]), partial(self.known_keys, job),
                           {r["run_key"]: self._time(r["scheduled_at"]) for r in rows})

    def known_keys(self, job: str, keys: set[str]) -> set[str]:
        if not keys:
            return set()
        with self._tx(write=False) as cur:
            return {r["run_key"] for r in self._all(cur, "keys_known", job=job,
                                                      keys=self._ids(sorted(keys)))}

    def job_info(self, job: str) -> JobInfo | None:
        with self._tx(write=False) as cur:
            row = self._one(cur, "job_by_name", job=job)
        if row is None:
            return None
        return JobInfo(row["name"], row["schedule"], row["tz"], row["key_template"],
                       row["settings"])

    def job_names(self) -> list[str]:
        with self._tx(write=False) as cur:
            return [row["name"] for row in self._all(cur, "job_names")]

    def jobs_named(self, name: str) -> list[str]:
        with self._tx(write=False) as cur:
            return [row["name"] for row in self._all(cur, "jobs_named", job=name)]

    def record_marks(self, req: ClaimRequest, marks: Sequence[Mark]) -> int:
        recorded = 0
        with self._tx() as cur:
            now = self._db_now(cur)
            self._upsert_job(cur, req, now, max((m.scheduled_at for m in marks), default=None))
            for mark in marks:
                recorded += self._one(
                    cur, "insert_run", job=req.job.name, run_key=mark.run_key,
                    scheduled_at=self._to_db(mark.scheduled_at), trigger=Trigger.SCHEDULE,
                    status=mark.status, skip_reason=mark.reason, host=req.host,
                    now=now) is not None
        return recorded

    def heartbeat(self, run: Run, lease: float, wait: float | None = None) -> bool:
        with self._tx() as cur:
            now = self._db_now(cur)
            return self._exec(cur, "heartbeat", **self._owner(run), now=now,
                              lease=self._lease(lease)) == 1

    def finish(self, run: Run, result: Finish, wait: float | None = None) -> bool:
        with self._tx() as cur:
            now = self._db_now(cur)
            done = self._exec(
                cur, "finish", **self._owner(run), now=now, status=result.status,
                skip_reason=result.skip_reason, duration_ms=result.duration_ms,
                exit_code=result.exit_code, signal=result.signal,
                timed_out=self._bool(result.timed_out), error_tail=result.error_tail,
                log_path=result.log_path,
            ) == 1
            if done and self.expanded >= USAGE:  # in the finish's transaction (expansion 6)
                self._exec(cur, "record_usage", id=run.run_id, attempt=run.attempt,
                           cpu_user_ms=result.cpu_user_ms, cpu_system_ms=result.cpu_system_ms,
                           max_rss_kb=result.max_rss_kb)
            return done

    def record_superseded(self, run: Run, result: Finish, wait: float | None = None) -> None:
        with self._tx() as cur:
            self._exec(cur, "attempt_superseded", **self._superseded(run, result))

    def _superseded(self, run: Run, result: Finish) -> dict[str, Any]:
        """The parameters of ``attempt_superseded``."""
        ended = None
        if run.started_at is not None and result.duration_ms is not None:
            ended = run.started_at + timedelta(milliseconds=result.duration_ms)
        return dict(id=run.run_id, attempt=run.attempt, status=result.status,
                    reason=result.skip_reason or Reason.SUPERSEDED, host=run.host,
                    fence=run.fence, started_at=self._to_db(run.started_at),
                    finished_at=self._to_db(ended), duration_ms=result.duration_ms,
                    exit_code=result.exit_code, signal=result.signal)

    def attempts(self, runs: Sequence[Run], now: datetime) -> dict[int, list[RunAttempt]]:
        rows: list[Row] = []
        used: dict[tuple[int, int], Row] = {}
        if self.expanded >= 2 and any(r.attempt > 1 for r in runs):
            with self._tx(write=False) as cur:
                ids = self._ids([r.run_id for r in runs if r.attempt > 1])
                rows = self._all(cur, "attempts_of_runs", ids=ids)
                if self.expanded >= USAGE:
                    used = {(u["run_id"], u["attempt"]): u
                            for u in self._all(cur, "usage_of_runs", ids=ids)}
        found: dict[int, list[RunAttempt]] = {r.run_id: [] for r in runs}
        latest = {r.run_id: r.attempt for r in runs}
        for row in rows:
            if row["attempt"] < latest.get(row["run_id"], 0):
                usage = used.get((row["run_id"], row["attempt"]), {})
                found[row["run_id"]].append(RunAttempt(
                    row["run_id"], row["attempt"], row["status"], row["reason"], row["host"],
                    row["fence"], self._from_db(row["started_at"]),
                    self._from_db(row["finished_at"]), row["duration_ms"], row["exit_code"],
                    row["signal"], *(usage.get(k) for k in USAGE_KEYS)))
        for run in runs:
            if run.attempt > 0:
                found[run.run_id].append(RunAttempt.of_run(run, now))
        return found

    def with_usage(self, runs: Sequence[Run]) -> list[Run]:
        """``runs`` with what their latest attempts' trees used (expansion 6); as they are
        from a ledger without it. One read for them all."""
        if self.expanded < USAGE or not runs:
            return list(runs)
        with self._tx(write=False) as cur:
            rows = self._all(cur, "usage_of_runs", ids=self._ids([r.run_id for r in runs]))
        used = {(row["run_id"], row["attempt"]): row for row in rows}
        return [r.replace(**{k: row[k] for k in USAGE_KEYS})
                if (row := used.get((r.run_id, r.attempt))) is not None else r for r in runs]

    def runs(self, job: str, limit: int = 50, since: datetime | None = None,
             before: int | None = None) -> list[Run]:
        if since is not None and before is not None:
            raise ValueError("runs: give since or before, not both")
        with self._tx(write=False) as cur:
            if since is not None:
                rows = self._all(cur, "runs_of_job", job=job, since=self._to_db(since), limit=limit)
            else:
                rows = self._all(cur, "runs_before", job=job, limit=limit,
                                 before=NO_RUN_ID if before is None else before)
        return [self._run(r) for r in rows]

    def runs_after(self, job: str, after: int, limit: int) -> list[Run]:
        with self._tx(write=False) as cur:
            rows = self._all(cur, "runs_after", job=job, after=after, limit=limit)
        return [self._run(r) for r in rows]

    def get_run(self, job: str, run_id: int) -> Run | None:
        with self._tx(write=False) as cur:
            row = self._one(cur, "run_by_id", job=job, id=run_id)
        return self._run(row) if row else None

    def run_by_key(self, job: str, run_key: str) -> Run | None:
        with self._tx(write=False) as cur:
            row = self._one(cur, "run_by_key", job=job, run_key=run_key)
        return self._run(row) if row else None

    def summaries(self, since: datetime, jobs: list[str] | None = None) -> list[JobSummary]:
        """Three queries whatever the number of jobs (a query per job was 2,000 round trips):
        each job with its last run's row, the running rows, the window's counts."""
        with self._tx(write=False) as cur:
            rows = [r for r in self._all(cur, "overview") if jobs is None or r["name"] in jobs]
            running: dict[str, list[Run]] = {}
            for r in sorted(self._all(cur, "all_running"), key=lambda r: r["id"]):
                running.setdefault(r["job"], []).append(self._run(r))
            if self.expanded >= DAY_COUNTS:
                counts = _window_counts(self._all(cur, "window_counts", **self._window(since)))
            else:  # a ledger without expansion 7: every row of the window, counted now
                counts = {}
                for r in self._all(cur, "all_counts", since=self._to_db(since)):
                    counts.setdefault(r["job"], {})[r["status"]] = int(r["n"])
        return [self._summary(r, None if r["id"] is None else self._run(r),
                              running.get(r["name"], []), counts.get(r["name"], {}))
                for r in rows]

    def _window(self, since: datetime) -> dict[str, Any]:
        """The parameters of ``window_counts``: the whole days after the window's first from
        day_counts; of that first day, the runs inside the window are added (sign 1) or,
        when the window starts in the day's first half, the day's runs before it are taken
        from its count (sign -1), so that at most half a day of each job's runs is read. The
        range is a second wider than the day (the day itself is the triggers' expression)."""
        first = self._day_of(since)
        start = EPOCH + timedelta(days=first)
        if since - start <= timedelta(seconds=DAY / 2):
            lo, hi, sign, from_day = start - timedelta(seconds=1), since, -1, first
        else:
            lo, hi, sign = since, start + timedelta(days=1, seconds=1), 1
            from_day = first + 1
        return dict(since=self._to_db(since), lo=self._to_db(lo), hi=self._to_db(hi),
                    sign=sign, from_day=self._day(from_day), edge_day=self._day(first))

    def _day_of(self, t: datetime) -> int:
        """The day of day_counts a row created at ``t`` is counted on (whole UTC days)."""
        return (t - EPOCH).days

    def _day(self, number: int) -> Any:
        """A day of day_counts as the dialect stores it: a date."""
        return date(1970, 1, 1) + timedelta(days=number)

    def change_token(self) -> str | None:
        with self._tx(write=False) as cur:
            row = self._one(cur, "change_token")
        assert row is not None  # one row, whatever the ledger holds
        return str(row["token"])

    def tallies(self, jobs: list[str] | None = None) -> dict[str, RunTally]:
        """Nothing (not an error) from a ledger that no cronwrap of this release has opened
        for writing yet: it has no counters yet, and a read never adds them."""
        if self.expanded < 1:
            return {}
        with self._tx(write=False) as cur:
            ends, timed = self._all(cur, "tallies"), self._all(cur, "duration_tallies")
        found: dict[str, RunTally] = {}
        for r in ends:
            if jobs is None or r["job"] in jobs:
                tally = found.setdefault(r["job"], RunTally(r["job"], {}, 0, 0, {}))
                tally.ends[r["status"]] = int(r["runs"])
                tally.timed += int(r["timed"])
                tally.duration_ms += int(r["duration_ms"])
        for r in timed:
            if r["job"] in found:
                found[r["job"]].buckets[int(r["le_ms"])] = int(r["runs"])
        return found

    # -- alerts (cronwrap watch)

    ALERTS_EXPANSION = 4

    def alerts(self, since: datetime) -> list[AlertState]:
        if self.expanded < self.ALERTS_EXPANSION:
            return []
        with self._tx(write=False) as cur:
            rows = self._all(cur, "alerts_since", since=self._to_db(since))
        found: dict[str, AlertState] = {}
        for r in rows:
            state = found.get(r["key"])
            if state is None:
                alert = Alert(r["key"], r["kind"], r["job"], r["text"], r["detail"] or "",
                              self._from_db(r["slot"]), r["run_id"])
                state = found[r["key"]] = AlertState(alert, self._time(r["opened_at"]),
                                                     self._from_db(r["closed_at"]))
            if r["notifier"] is not None:
                state.sent.add((r["notifier"], r["phase"]))
        return list(found.values())

    def record_alerts(self, opened: Sequence[Alert], closed: Sequence[str], by: str,
                      forget_before: datetime) -> None:
        with self._tx() as cur:
            now = self._db_now(cur)
            for a in opened:
                self._exec(cur, "open_alert", key=a.key, kind=a.kind, job=a.job, text=a.text,
                           detail=a.detail or None, slot=self._to_db(a.slot), run_id=a.run_id,
                           now=now, by=by)
            for key in closed:
                self._exec(cur, "close_alert", key=key, now=now)
            self._exec(cur, "forget_alerts", before=self._to_db(forget_before))

    def claim_send(self, key: str, notifier: str, phase: str, by: str,
                   lease: float) -> int | None:
        with self._tx() as cur:
            now = self._time(self._db_now(cur))
            row = self._one(cur, "claim_send", key=key, notifier=notifier, phase=phase, by=by,
                            now=self._to_db(now),
                            until=self._to_db(now + timedelta(seconds=lease)))
        return None if row is None else int(row["tries"])

    def send_result(self, key: str, notifier: str, phase: str, by: str, error: str | None,
                    retry_in: float) -> None:
        with self._tx() as cur:
            now = self._time(self._db_now(cur))
            if error is None:
                self._exec(cur, "send_done", key=key, notifier=notifier, phase=phase, by=by,
                           now=self._to_db(now))
            else:
                self._exec(cur, "send_failed", key=key, notifier=notifier, phase=phase, by=by,
                           error=error, retry_at=self._to_db(now + timedelta(seconds=retry_in)))

    def prune(self, cutoff: datetime, keep_last: int) -> list[tuple[int, str, str | None]]:
        with self._tx() as cur:
            rows = self._all(cur, "prune", cutoff=self._to_db(cutoff), keep=keep_last,
                             now=self._db_now(cur))
            self._exec(cur, "analyze")  # prune is the ledger's periodic upkeep: its statistics too
        return [(r["id"], r["job"], r["log_path"]) for r in rows]

    def analyze(self) -> None:
        with self._tx() as cur:
            self._exec(cur, "analyze")

    def unlock(self, job: str) -> list[Run]:
        with self._tx() as cur:
            rows = self._all(cur, "unlock", job=job, now=self._db_now(cur))
        return [self._run(r) for r in rows]

    def pause(self, job: str, until: datetime | None, reason: str | None,
              paused_by: str) -> Pause:
        with self._tx() as cur:
            row = self._the(cur, "pause_job", job=job, until=self._to_db(until), reason=reason,
                            paused_by=paused_by, now=self._db_now(cur))
        return self._pause(row)

    def resume(self, job: str) -> Pause | None:
        with self._tx() as cur:
            row = self._one(cur, "resume_job", job=job)
        return None if row is None else self._pause(row)

    def pauses(self) -> dict[str, Pause]:
        """Nothing (not an error) from a ledger without the pauses' expansion: a read never
        adds it, and nothing can be paused there."""
        if self.expanded < PAUSES:
            return {}
        with self._tx(write=False) as cur:
            rows = self._all(cur, "pauses")
        return {r["job"]: self._pause(r) for r in rows}

    # -- steps (cronwrap step)

    def begin_step(self, run_id: int, run_key: str, fence: int, key: str, host: str,
                   pid: int, force: bool, since: int) -> StepStart:
        with self._tx() as cur:
            now = self._db_now(cur)
            run, step = self._step_state(cur, run_id, run_key, key)
            action = step_action(run, step, fence, force, since, self._time(now))
            if action == STEP_RUN:
                self._exec(cur, "step_begin", run_id=run_id, fence=fence, step=key, host=host,
                           pid=pid, now=now)
        return StepStart(action, run, step)

    def end_step(self, run: Run, key: str, status: str, exit_code: int | None,
                 signal: int | None, duration_ms: int) -> tuple[bool, Run | None]:
        with self._tx() as cur:
            now = self._db_now(cur)
            found = self._one(cur, "step_run", run_id=run.run_id, run_key=run.run_key)
            recorded = self._exec(cur, "step_end", job=run.job, run_key=run.run_key, step=key,
                                  fence=run.fence, status=status, exit_code=exit_code,
                                  signal=signal, duration_ms=duration_ms, now=now) == 1
        return recorded, None if found is None else self._run(found)

    def step_state(self, run_id: int, run_key: str, key: str) -> tuple[Run | None, Step | None]:
        with self._tx(write=False) as cur:
            return self._step_state(cur, run_id, run_key, key, lock=False)

    def steps(self, runs: Sequence[Run]) -> dict[int, list[Step]]:
        found: dict[int, list[Step]] = {r.run_id: [] for r in runs}
        if self.expanded < STEPS or not runs:
            return found
        with self._tx(write=False) as cur:
            rows = self._all(cur, "steps_of_runs", ids=self._ids([r.run_id for r in runs]))
        for row in rows:
            found.setdefault(row["run_id"], []).append(self._step(row))
        return found

    def _step_state(self, cur: Any, run_id: int, run_key: str, key: str,
                    lock: bool = True) -> tuple[Run | None, Step | None]:
        """The run row (held to the transaction's end, PostgreSQL: FOR SHARE) and its step."""
        row = self._one(cur, "step_run" if lock else "step_run_read", run_id=run_id,
                        run_key=run_key)
        if row is None:
            return None, None
        run = self._run(row)
        if self.expanded < STEPS:
            return run, None
        step = self._one(cur, "step_of_run" if lock else "step_of_run_read", job=run.job,
                         run_key=run.run_key, step=key)
        return run, None if step is None else self._step(step)

    def _step(self, row: Row) -> Step:
        return Step(row["job"], row["run_key"], row["step"], row["run_id"], row["status"],
                    row["attempt"], row["fence"], row["host"], row["pid"],
                    self._time(row["started_at"]), self._from_db(row["finished_at"]),
                    row["duration_ms"], row["exit_code"], row["signal"])

    def idle(self) -> None:
        """An embedded ledger has nothing to give back (PostgresLedger has a connection)."""

    def now(self) -> datetime:
        with self._tx(write=False) as cur:
            return self._time(self._db_now(cur))

    # -- steps ---------------------------------------------------------------------------

    @staticmethod
    def _owner(run: Run) -> dict[str, Any]:
        """What a later update of a claimed row must match (ARCHITECTURE.md §3 step 4)."""
        return dict(id=run.run_id, fence=run.fence, job=run.job, run_key=run.run_key,
                    host=run.host, pid=run.pid, pid_start=run.pid_start)

    def _upsert_job(self, cur: Any, req: ClaimRequest, now: Any,
                    last_slot: datetime | None = None) -> None:
        job = req.job
        if req.trigger == Trigger.MANUAL:  # a manual run is not the schedule: what cron recorded stays
            self._exec(cur, "touch_job", job=job.name, schedule=job.schedule, tz=job.tz,
                       key_template=job.key_template, settings=job.settings, now=now)
            return
        self._exec(cur, "upsert_job", job=job.name, schedule=job.schedule, tz=job.tz,
                   key_template=job.key_template, settings=job.settings, now=now,
                   last_slot=self._to_db(last_slot or req.scheduled_at))

    def _pause_of(self, cur: Any, req: ClaimRequest, now: Any) -> Pause | None:
        """The pause in force for a firing of ``req``'s job; never for a person's (manual)."""
        if req.trigger == Trigger.MANUAL or self.expanded < PAUSES:
            return None
        row = self._one(cur, "pause_of_job", job=req.job.name, now=now)
        return None if row is None else self._pause(row)

    def _live_runs(self, cur: Any, req: ClaimRequest, now: Any, expire: bool = True) -> list[Run]:
        """Running rows with a live lease; this runner's rows whose wrapper is gone expire now
        (``expire`` False: they are only left out)."""
        live = []
        now_dt = self._time(now)
        for row in map(self._run, self._all(cur, "running_of_job", job=req.job.name)):
            if req.same_runner(row) and req.is_gone(row.pid, row.pid_start):
                if expire:
                    self._exec(cur, "expire_lease", id=row.run_id, now=now)
                continue
            if row.locked_until is not None and row.locked_until > now_dt:
                live.append(row)
        return live

    def _insert_or_get(self, cur: Any, req: ClaimRequest, status: str, reason: str | None,
                       now: Any) -> tuple[Run, bool]:
        inserted = self._one(
            cur, "insert_run", job=req.job.name, run_key=req.run_key,
            scheduled_at=self._to_db(req.scheduled_at), trigger=req.trigger, status=status,
            skip_reason=reason, host=req.host, now=now,
        )
        if inserted:
            return self._run(inserted), True
        return self._run(self._the(cur, "run_by_key", job=req.job.name, run_key=req.run_key)), False

    def _insert_skip(self, cur: Any, req: ClaimRequest, reason: str, now: Any,
                     blocking: Run | None) -> Claim:
        row, new = self._insert_or_get(cur, req, Status.SKIPPED, reason, now)
        if new:
            return Claim(run=None, skip_reason=reason, blocking=blocking)
        return Claim(run=None, skip_reason=Reason.DUPLICATE if blocking is None else reason,
                     blocking=blocking or row)

    def _summary(self, job: Row, last: Run | None, running: list[Run],
                 counts: dict[str, int]) -> JobSummary:
        return JobSummary(
            job=job["name"], schedule=job["schedule"], tz=job["tz"],
            key_template=job["key_template"], first_seen=self._from_db(job["first_seen"]),
            last_seen=self._from_db(job["last_seen"]), last_slot=self._from_db(job["last_slot"]),
            last_run=last,
            last_success_at=self._from_db(job["last_success_at"]), running=running,
            counts=counts, settings=job["settings"],
        )

    # -- rows ----------------------------------------------------------------------------

    def _run(self, row: Row) -> Run:
        times = {k: self._from_db(row[k]) for k in _TIME_COLUMNS}
        return Run(
            run_id=row["id"], job=row["job"], run_key=row["run_key"], trigger=row["trigger"],
            status=row["status"], skip_reason=row["skip_reason"], attempt=row["attempts"],
            host=row["host"], pid=row["pid"], pid_start=row["pid_start"], fence=row["fence"],
            duration_ms=row["duration_ms"], exit_code=row["exit_code"], signal=row["signal"],
            timed_out=bool(row["timed_out"]), error_tail=row["error_tail"],
            log_path=row["log_path"], skew_ms=row["skew_ms"], boot_id=row.get("boot_id"),
            pid_ns=row.get("pid_ns"), **times,
        )

    def _pause(self, row: Row) -> Pause:
        return Pause(row["job"], self._from_db(row["until"]), row["reason"], row["paused_by"],
                     self._from_db(row["paused_at"]))

    def _one(self, cur: Any, name: str, **params: Any) -> Row | None:
        self._exec(cur, name, **params)
        return self._fetchone(cur)

    def _the(self, cur: Any, name: str, **params: Any) -> Row:
        """The row of a statement that always returns one (in the transaction's locks)."""
        row = self._one(cur, name, **params)
        assert row is not None, name
        return row

    def _all(self, cur: Any, name: str, **params: Any) -> list[Row]:
        self._exec(cur, name, **params)
        return self._fetchall(cur)

    @contextmanager
    def _tx(self, write: bool = True) -> Iterator[Any]:
        with self._mutex, self._transaction(write) as cur:
            yield cur

    # -- dialect hooks -------------------------------------------------------------------

    @abstractmethod
    def _transaction(self, write: bool) -> Any:
        ...

    @abstractmethod
    def _exec(self, cur: Any, name: str, **params: Any) -> int:
        """Run the named block; the number of rows it changed."""

    @abstractmethod
    def _fetchone(self, cur: Any) -> Row | None:
        ...

    @abstractmethod
    def _fetchall(self, cur: Any) -> list[Row]:
        ...

    @abstractmethod
    def _db_now(self, cur: Any) -> Any:
        ...

    @abstractmethod
    def _to_db(self, t: datetime | None) -> Any:
        ...

    @abstractmethod
    def _time(self, value: Any) -> datetime:
        """A time as the dialect stores it (never NULL), as an aware datetime."""

    def _from_db(self, value: Any) -> datetime | None:
        return None if value is None else self._time(value)

    _version_at = "the schema version"  # where the dialect keeps it, as a person finds it

    def _repair_hint(self, label: object) -> str:
        """What to do about a damaged schema version."""
        return "restore it from a backup"

    def _ids(self, ids: Sequence[int] | Sequence[str]) -> Any:
        """A list of ids (or run keys) as one query parameter."""
        return ids

    def _lease(self, seconds: float) -> Any:
        return seconds

    def _bool(self, value: bool) -> Any:
        return value
