"""The domain's words: statuses, triggers, reasons and run-log events, and the records the
core passes around — a slot-run from plan to ledger, a mark, a run, a claim and its answer.

Pure: no I/O, nothing but the standard library's ``enum`` and ``datetime``. The ledger stores
these words (its strings are the enums' values, unchanged since the first release), the run
log writes them, ``status`` shows them; STATUS_MEANINGS and EVENT_MEANINGS are the registries
the docs are made from.
"""

from __future__ import annotations

from cronwrap.record import TYPE_CHECKING, Record, Words

if TYPE_CHECKING:
    from datetime import datetime
    from typing import Callable

# Checked by hand rather than with re: compiling patterns is import time on every firing.
ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_NAME_CHARS = ALNUM | frozenset("._-")


def valid_name(text: str) -> bool:
    """``[A-Za-z0-9][A-Za-z0-9._-]{0,127}``: a job name, safe as a file name."""
    return 0 < len(text) <= 128 and text[0] in ALNUM and _NAME_CHARS.issuperset(text)


SCOPES = ("fleet", "host")
# Between a host-scoped job's name and its host in the ledger's name for that host's runs: a
# character no job name and no host name holds (both are printable), so no fleet job's name
# can ever be one host's share of a host-scoped job.
HOST_SEPARATOR = "\x1f"


def ledger_job(name: str, host: str | None) -> str:
    """The ledger's name for a job: NAME for a fleet job (host None), whose slots the whole
    fleet shares, and NAME + HOST_SEPARATOR + HOST for one host's runs of a host-scoped job,
    which are a job of their own to the ledger: their own slots, lease, fence and history."""
    return name if host is None else f"{name}{HOST_SEPARATOR}{host}"


def job_host(job: str) -> tuple[str, str | None]:
    """(name, host) of a ledger's job name; host None for a fleet job."""
    name, _, host = job.partition(HOST_SEPARATOR)
    return name, host or None


def shown_job(job: str) -> str:
    """A ledger's job name as a person reads it: NAME, or NAME@HOST for a host's runs of a
    host-scoped job (written as cronwrap's read commands accept it, NAME --host HOST)."""
    name, host = job_host(job)
    return name if host is None else f"{name}@{host}"


class Status(Words):
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
    PENDING = "pending"  # a new slot's row inside the claim that takes it: never committed


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
                   "the lease. A runner that lost its lease may no longer act for that slot. "
                   "With reason `memory` or `cpu`, the job's tree went over `--max-memory` or "
                   "`--max-cpu`.",
    Status.SKIPPED: "Not run: reason `overlap` (another run of the job was live), `too_late` "
                    "(a missed slot older than `--catchup-window`) or `paused` (the job was "
                    "paused: `cronwrap pause`). The slot stays claimable.",
    Status.MISSED: "A slot of `--schedule` that never ran. Claimable.",
    Status.ABANDONED: "Shown, never stored: a `running` row whose lease has expired because its "
                      "wrapper is gone. Claimable again.",
    Status.PENDING: "Never seen: a new slot's row inside the transaction that claims it, "
                    "`running` by the time that transaction ends.",
}

# A stored status that ends a run (RUNNING and PENDING do not; ABANDONED is never stored).
FINAL_STATUSES = (Status.SUCCEEDED, Status.WARNING, Status.FAILED, Status.TIMEOUT,
                  Status.KILLED, Status.SKIPPED, Status.MISSED)
# The upper bounds (seconds) of the duration histogram, cronwrap_run_duration_seconds: from a
# second to a day, about three to a decade. The ledger counts each end under one of them as it
# is written (ledger/sql, migration "Counters"): changing them needs a migration.
DURATION_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0,
                    14400.0, 43200.0, 86400.0)
# The slot is done: claiming it again is a duplicate without --force.
DONE_STATUSES = (Status.SUCCEEDED, Status.WARNING)
# The run did not succeed: health critical, and the slot is retryable.
BAD_STATUSES = (Status.FAILED, Status.TIMEOUT, Status.KILLED)


class Trigger(Words):
    """Why a run ran: cron fired it for its slot, for a slot that was missed, for a slot whose
    runner died (its run abandoned), or a person did."""

    SCHEDULE = "schedule"
    CATCHUP = "catchup"
    TAKEOVER = "takeover"
    MANUAL = "manual"


class Reason(Words):
    """Why a slot was not run, why a run was ended, or why it was recorded ``warning``
    (kept in the ledger's ``skip_reason``)."""

    OVERLAP = "overlap"
    DUPLICATE = "duplicate"
    TOO_LATE = "too_late"
    LEASE_LOST = "lease_lost"
    SUPERSEDED = "superseded"  # an attempt whose slot another runner took over (attempts only)
    TOO_FAST = "too_fast"  # a success faster than --min-duration: recorded warning
    PAUSED = "paused"  # a firing of a paused job (cronwrap pause): recorded skipped
    MEMORY = "memory"  # the tree went over --max-memory: recorded killed
    CPU = "cpu"  # the tree went over --max-cpu: recorded killed


class Event(Words):
    """The run log's events; EVENT_MEANINGS says what each records (the docs read it)."""

    START = "start"
    FINISH = "finish"
    TIMEOUT = "timeout"
    SKIP = "skip"
    MISSED = "missed"
    CATCHUP = "catchup"
    RETRY = "retry"
    RETRY_SKIPPED = "retry_skipped"
    HOOK = "hook"
    PING_FAILED = "ping_failed"
    REPLACE = "replace"
    STALE_LOCK = "stale_lock"
    LEASE_LOST = "lease_lost"
    SPOOLED = "spooled"
    UNRECORDED = "unrecorded"
    OUTBOX_DELIVERED = "outbox_delivered"
    OUTBOX_QUARANTINED = "outbox_quarantined"
    LEDGER_UNREACHABLE = "ledger_unreachable"
    WARNING = "warning"


# The version of cronwrap's machine formats: every row of status --json, history --json and
# /api/*, and every line of the run log, carries it as "format"; cronwrap/schemas/ holds their
# JSON Schemas. It moves only when a field changes meaning or goes away (added fields do not).
FORMAT_VERSION = 1

# The run log's "level" of each event (the logrus/supercronic convention); a finish or timeout
# takes its run's: error when it failed, warning when it warned (event_level).
EVENT_LEVELS = {
    "warning": ("timeout", "missed", "retry", "retry_skipped", "ping_failed", "stale_lock",
                "lease_lost", "spooled", "unrecorded", "outbox_quarantined", "warning"),
    "error": ("ledger_unreachable",),
}


def event_level(event: str, status: object = None) -> str:
    if status in BAD_STATUSES:
        return "error"
    if status == Status.WARNING:
        return "warning"
    return next((level for level, events in EVENT_LEVELS.items() if event in events), "info")


def event_message(event: str, fields: dict[str, object]) -> str:
    """The run log's "msg": the event in a few words, for a log viewer's one line."""
    parts = [f"{fields.get('job', 'cronwrap')}: {event}"]
    for key, word in (("run_id", "run"), ("status", ""), ("skip_reason", "reason"),
                      ("exit_code", "exit"), ("duration_ms", "ms")):
        value = fields.get(key)
        if value is not None and value != "":
            parts.append(f"{value} {word}" if key == "duration_ms" else
                         f"{word} {value}".strip())
    return " ".join(parts[:1]) + (" (" + ", ".join(parts[1:]) + ")" if parts[1:] else "")


EVENT_MEANINGS = {
    Event.START: "a run claimed its slot and its job was spawned (`fence`, `took_over`, "
                 "`recorded`)",
    Event.FINISH: "the run ended (`status`, `exit_code`, `duration_ms`, `signal`, `orphans`, "
                  "`forwarded`, `output_bytes`, `output_dropped`, `passthrough_error`, the "
                  "wrapper's own CPU and memory)",
    Event.TIMEOUT: "as `finish`, for a run that reached `--timeout`",
    Event.SKIP: "nothing ran for a slot (`skip_reason`: `overlap`, `duplicate`, `too_late`, "
                "`paused`; the run in the way, or the pause's `paused_until` and "
                "`pause_reason`)",
    Event.MISSED: "catch-up recorded a slot that never ran",
    Event.CATCHUP: "a missed slot is about to run",
    Event.RETRY: "a failed attempt is retried after `delay_s`",
    Event.RETRY_SKIPPED: "no retry (`reason`, `deadline`): it would run past the next slot "
                         "(a manual run: more than the schedule's interval after it began), "
                         "or the run is unrecorded; a manual run says so on stderr too",
    Event.HOOK: "a hook ran (`hook`, `exit_code`, `timed_out`, `alert`)",
    Event.PING_FAILED: "a ping could not be sent",
    Event.REPLACE: "`--overlap replace` is ending the run that holds the lock",
    Event.STALE_LOCK: "a PID lock whose holder was gone was taken over",
    Event.LEASE_LOST: "the slot was taken over: this runner's record was not written",
    Event.SPOOLED: "the end of a run could not be recorded and waits in the outbox",
    Event.UNRECORDED: "the end of a run could be neither recorded nor spooled",
    Event.OUTBOX_DELIVERED: "a result from the outbox was recorded",
    Event.OUTBOX_QUARANTINED: "an outbox entry that is not a result was moved to outbox/bad/",
    Event.LEDGER_UNREACHABLE: "the ledger could not be reached; the job ran unrecorded",
    Event.WARNING: "something a person should check (a host clock far off a slot; a run that "
                   "succeeded faster than `--min-duration`, `skip_reason` `too_fast`)",
}


def iso(t: datetime | None) -> str | None:
    """A time as the run log, ``status --json`` and the dashboard write it."""
    return None if t is None else t.isoformat(timespec="milliseconds")


# -- the records ------------------------------------------------------------------------------

class SlotRun(Record):
    """One run of one slot, from plan to ledger: the slot's run key, its original time (in the
    job's zone), why it runs, and how far the firing was from it (milliseconds, positive:
    late; None unless this is the firing's own slot and the firing was off it). catchup plans
    them, the runner runs them, and a ClaimRequest is one with its claimer and policy."""

    run_key: str
    scheduled_at: datetime
    trigger: Trigger
    skew_ms: int | None
    _defaults = dict(skew_ms=None)


class SlotHistory(Record):
    """What a scheduled firing plans from: the job's newest slot seen (None: none yet);
    ``known``, which of some run keys have a row (the ledger is asked only for the keys of the
    slots the plan looks at, missed ones, never for the job's whole window); and the runs
    abandoned since the window's start (running, their lease expired: their runner died),
    by run key, with their slot's time."""

    last_slot: datetime | None
    known: Callable[[set[str]], set[str]]
    abandoned: dict[str, datetime]


def none_known(keys: set[str]) -> set[str]:
    """``SlotHistory.known`` of a ledger that has no row (or no ledger)."""
    return set()


class Mark(Record):
    """A slot recorded without running it: ``missed`` (reason None), or ``skipped`` with
    reason ``too_late``."""

    run_key: str
    scheduled_at: datetime
    status: Status
    reason: Reason | None


class Run(Record):
    """One row of ``runs``: a slot of a job and the latest attempt at it (times are UTC).
    ``status``, ``trigger`` and ``skip_reason`` are the stored strings, as the enums spell
    them (a row written by another release may hold one this release does not know)."""

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
    cpu_user_ms: int | None  # USAGE_KEYS: read from expansion 6's table, beside the row
    cpu_system_ms: int | None
    max_rss_kb: int | None
    _defaults = dict(skip_reason=None, attempt=0, host=None, pid=None, pid_start=None,
                     locked_until=None, fence=None, started_at=None, finished_at=None,
                     duration_ms=None, exit_code=None, signal=None, timed_out=False,
                     error_tail=None, log_path=None, skew_ms=None, boot_id=None, pid_ns=None,
                     cpu_user_ms=None, cpu_system_ms=None, max_rss_kb=None)

    def shown_status(self, now: datetime) -> str:
        if self.status == Status.RUNNING and (self.locked_until is None
                                              or self.locked_until <= now):
            return Status.ABANDONED
        return self.status

    def lease_left(self, now: datetime) -> float | None:
        if self.status != Status.RUNNING or self.locked_until is None:
            return None
        return (self.locked_until - now).total_seconds()

    def to_json(self, now: datetime) -> dict[str, object]:
        data = self.asdict()
        for key in ("scheduled_at", "locked_until", "started_at", "finished_at"):
            data[key] = iso(data[key])
        data["status"] = self.shown_status(now)
        data["job"] = job_host(self.job)[0]  # a host-scoped job's host is the run's own
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


class Pause(Record):
    """A pause of a job (``cronwrap pause``, kept in the ledger's pauses: expansion 3): its
    firings are skipped (``skipped``/``paused``) until ``until`` (None: until ``resume``).
    ``job`` is a job name, or one host's share of a host-scoped job (``ledger_job``); times
    UTC."""

    job: str
    until: datetime | None
    reason: str | None
    paused_by: str | None
    paused_at: datetime | None
    _defaults = dict(until=None, reason=None, paused_by=None, paused_at=None)

    def active(self, now: datetime) -> bool:
        return self.until is None or self.until > now

    def describe(self) -> str:
        """``paused until 2026-12-05T10:00:00+00:00 (reason)``, ``paused`` without an end."""
        until = "" if self.until is None else \
            f" until {self.until.isoformat(timespec='seconds')}"
        return f"paused{until}" + (f" ({self.reason})" if self.reason else "")

    def to_json(self) -> dict[str, object]:
        name, host = job_host(self.job)  # host: the one host it pauses (None: every host)
        return {"job": name, "host": host, "until": iso(self.until), "reason": self.reason,
                "paused_by": self.paused_by, "paused_at": iso(self.paused_at)}


def pause_names(job: str) -> tuple[str, ...]:
    """The pauses that cover a firing of ledger job ``job``: its own, and for one host's runs
    of a host-scoped job (``ledger_job``) the pause of NAME on every host. The claim
    (ledger/sql) tests the same two names."""
    name, host = job_host(job)
    return (job,) if host is None else (job, name)


def active_pause(pauses: dict[str, Pause], job: str, now: datetime) -> Pause | None:
    """The pause in force for ``job`` at ``now`` (its own before its name's), or None."""
    for name in pause_names(job):
        found = pauses.get(name)
        if found is not None and found.active(now):
            return found
    return None


class Claim(Record):
    """The answer to a claim: ``run`` when claimed, else ``skip_reason`` and the row in the way.

    took_over: the claimed row had been abandoned by an earlier runner. pause: with
    skip_reason ``paused``, the pause in force (``blocking`` is then the slot's row: the
    ``skipped``/``paused`` one the claim recorded, or the one already there)."""

    run: Run | None
    skip_reason: str | None
    blocking: Run | None
    took_over: bool
    pause: Pause | None
    _defaults = dict(skip_reason=None, blocking=None, took_over=False, pause=None)


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
    # What the job's tree used (USAGE_KEYS, expansion 6); None: not known.
    cpu_user_ms: int | None
    cpu_system_ms: int | None
    max_rss_kb: int | None
    _defaults = dict(skip_reason=None, cpu_user_ms=None, cpu_system_ms=None, max_rss_kb=None)


# What one attempt's job tree used, as the ledger keeps it (expansion 6, `usage`): CPU time
# in milliseconds, user and system, and the peak resident memory of its largest process in
# KiB (getrusage of the keeper, the tree's subreaper: daemons that left the session count).
USAGE_KEYS = ("cpu_user_ms", "cpu_system_ms", "max_rss_kb")


def usage_text(used: Run | Finish | RunAttempt) -> str:
    """``1.2s+0.3s 240 MiB``: user+system CPU and the peak memory; ``-`` when not known."""
    if used.cpu_user_ms is None and used.max_rss_kb is None:
        return "-"
    cpu = "-" if used.cpu_user_ms is None else \
        f"{used.cpu_user_ms / 1000:g}s+{(used.cpu_system_ms or 0) / 1000:g}s"
    return f"{cpu} {memory_text(used.max_rss_kb)}"


def memory_text(kb: int | None) -> str:
    """KiB as a person reads them: ``740 KiB``, ``240 MiB``, ``1.5 GiB``."""
    if kb is None:
        return "-"
    if kb < 1024:
        return f"{kb} KiB"
    if kb < 1024 * 1024:
        return f"{kb / 1024:.0f} MiB"
    return f"{kb / 1024 / 1024:.1f} GiB"


class RunAttempt(Record):
    """One attempt at a slot, as the ledger kept it (expansion 2): a run row holds only its
    latest attempt. ``status`` is the attempt's end (``abandoned``, reason ``superseded``:
    its slot was taken over before its runner recorded an end; the runner's own end, if it
    came back to record one, with that reason kept when it had none). Times are UTC; an
    attempt whose end is unknown has no ``finished_at``."""

    run_id: int
    attempt: int
    status: str
    reason: str | None
    host: str | None
    fence: int | None
    started_at: datetime | None
    finished_at: datetime | None
    duration_ms: int | None
    exit_code: int | None
    signal: int | None
    cpu_user_ms: int | None
    cpu_system_ms: int | None
    max_rss_kb: int | None
    _defaults = dict(cpu_user_ms=None, cpu_system_ms=None, max_rss_kb=None)

    @classmethod
    def of_run(cls, run: Run, now: datetime) -> RunAttempt:
        """The run row's own (latest) attempt."""
        return cls(run.run_id, run.attempt, run.shown_status(now), run.skip_reason, run.host,
                   run.fence, run.started_at, run.finished_at, run.duration_ms, run.exit_code,
                   run.signal, run.cpu_user_ms, run.cpu_system_ms, run.max_rss_kb)

    def to_json(self) -> dict[str, object]:
        data = self.asdict()
        del data["run_id"]
        for key in ("started_at", "finished_at"):
            data[key] = iso(data[key])
        return data


class Step(Record):
    """One step of a slot (``cronwrap step KEY -- CMD``, expansion 5): the attempt, fence and
    host that last started it, and how it ended (``status``: running, succeeded or failed;
    ``finished_at`` None while running, or when its runner died). Times are UTC."""

    job: str
    run_key: str
    key: str
    run_id: int
    status: str
    attempt: int
    fence: int
    host: str | None
    pid: int | None
    started_at: datetime
    finished_at: datetime | None
    duration_ms: int | None
    exit_code: int | None
    signal: int | None

    def to_json(self) -> dict[str, object]:
        data = self.asdict()
        for key in ("job", "run_key", "run_id", "pid"):
            del data[key]
        data["step"] = data.pop("key")
        for key in ("started_at", "finished_at"):
            data[key] = iso(data[key])
        return data


class StepStart(Record):
    """What ``Ledger.begin_step`` found and did: ``action`` (``step_action``'s), the run row
    (None: no such run), and the step as it was before (None: never started in this slot)."""

    action: str
    run: Run | None
    step: Step | None


STEP_RUN, STEP_DONE, STEP_FENCED, STEP_GONE, STEP_LAPSED = "run", "done", "fenced", "gone", "lapsed"


def step_action(run: Run | None, step: Step | None, fence: int, force: bool, since: int,
                now: datetime) -> str:
    """Whether ``cronwrap step`` runs its command, for the attempt holding ``fence``:
    STEP_GONE when the run is not in the ledger (pruned, or another ledger's); STEP_FENCED
    when the slot is no longer this attempt's (taken over: a larger fence, or the run has
    ended); STEP_LAPSED when its lease ran out and nobody took it over yet (its wrapper could
    not renew it, and is ending the job); STEP_DONE when the step succeeded in this slot at
    or after fence ``since`` (0, or a forced run's first: ``run --force`` does every step
    again) and ``force`` is not given; else STEP_RUN."""
    if run is None:
        return STEP_GONE
    if run.status != Status.RUNNING or run.fence != fence:
        return STEP_FENCED
    if run.locked_until is not None and run.locked_until <= now:
        return STEP_LAPSED
    if step is not None and step.status == Status.SUCCEEDED and not force \
            and step.fence >= since:
        return STEP_DONE
    return STEP_RUN


class RunTally(Record):
    """What the ledger has counted of one job's ends (every status but running and pending
    written to a row: a finished attempt, a skip, a missed slot) since it was migrated to
    count them. Only ever grows: prune, a retry or a takeover leaves it as it is."""

    job: str
    ends: dict[str, int]  # by status
    timed: int  # the ends with a duration (attempts that ran)
    duration_ms: int  # the sum of their durations
    buckets: dict[int, int]  # timed ends by the smallest bound of DURATION_BUCKETS (ms) not below


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


class Alert(Record):
    """One breach ``cronwrap watch`` tells people about (watch/alerts.py). ``key``:
    ``KIND|JOB|WHAT`` (JOB: the ledger's name of the job; WHAT: the slot or run it is about);
    ``text``: one line for a person; ``detail``: more lines (a failure's output tail, as the
    run that kept it redacted it)."""

    key: str
    kind: str
    job: str
    text: str
    detail: str
    slot: datetime | None
    run_id: int | None
    _defaults = dict(detail="", slot=None, run_id=None)


class AlertState(Record):
    """An alert as the ledger holds it: open (``closed_at`` None) or closed, and the sends it
    has had, as (notifier, phase) pairs; phase: the alert's kind, or ``recovered``."""

    alert: Alert
    opened_at: datetime
    closed_at: datetime | None
    sent: set[tuple[str, str]]
    _factories = dict(sent=set)

