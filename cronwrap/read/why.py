"""``cronwrap why NAME --at WHEN``: the story of one slot, told from what is known of it.

Pure: the schedule, the time asked about, the slot's row and attempts in the ledger, the
pauses, the job's first and newest slots, this host's run-log events for the slot and ``now``
come in as arguments; nothing here asks the clock or reads a file. reads.py and serve.py
gather those and print or draw the answer.

The questions, in order: which slot the time names (``question``: a time that is a fire time,
the first fire time of a date, or, for neither, the slot before it), what DST does to it, and
then what happened to it (``tell``): not come yet; ran (how it ended, after how many
attempts, on which host); running or abandoned; skipped and why (``overlap``, ``paused``,
``too_late``; a ``duplicate`` is recorded nowhere but in the run log of the host whose firing
it was); missed (recorded by a later firing's catch-up, or no row at all: no host fired it).
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

from cronwrap.errors import UsageError
from cronwrap.model import (
    FORMAT_VERSION,
    Reason,
    Status,
    Trigger,
    iso,
    job_host,
    pause_names,
    shown_job,
)
from cronwrap.options.durations import format_duration
from cronwrap.record import TYPE_CHECKING, Record
from cronwrap.schedule import parse_date, parse_timestamp, run_key, seconds_between, shifted
from cronwrap.schedule.explanation import dst_text
from cronwrap.schedule.notes import dst_notes

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from cronwrap.model import Pause, Run, RunAttempt
    from cronwrap.schedule import Schedule

UTC = timezone.utc
#: The verdicts of ``why --json`` ("verdict"), each with what it means (the docs read it).
VERDICT_MEANINGS = {
    "upcoming": "the slot has not come yet",
    "ran": "a run of the slot ended (`status`: succeeded, warning, failed, timeout, killed)",
    "running": "a run of the slot is running now",
    "abandoned": "the slot's run lost its runner (its lease expired): the next firing takes "
                 "it over",
    "skipped": "the slot was recorded skipped (`reason`: overlap, paused, too_late)",
    "missed": "nothing ran: a later firing recorded the slot missed, or no host fired it at all",
    "no_slot": "the schedule has no fire time at or before the time asked about",
}
#: A start this long after its slot is said to be late (cron starts a job within seconds).
LATE = 60.0
#: How late a firing may still be on its way: a slot younger than this with no row is "due".
DUE = timedelta(minutes=2)


class Question(Record):
    """The slot a ``why`` is about. ``slot``: in the schedule's zone (None: the schedule has
    no fire time at or before the time asked). ``matched``: the time asked is a fire time (a
    date: has one; no time asked: the next slot). ``asked``: the time asked (None: the next
    slot); ``day``: the date asked, when WHEN was a date. ``notes``: how WHEN was read (a wall
    time a DST change skips or repeats). ``nearest``: the fire times around a time asked
    that is none, before and after."""

    slot: datetime | None
    matched: bool
    asked: datetime | None
    day: date | None
    notes: list[str]
    nearest: tuple[datetime | None, datetime | None]
    _defaults = dict(asked=None, day=None, nearest=(None, None))
    _factories = dict(notes=list)


def question(schedule: Schedule, when: str | None, now: datetime,
             option: str = "--at") -> Question:
    """The slot that WHEN names: a timestamp (as ``run --at`` reads it: ISO 8601, a time
    without an offset in the schedule's zone, read as cron reads it) or a date (its first
    fire time, as ``run --date``); None: the next slot after ``now``. A bad WHEN is a
    UsageError naming ``option``."""
    if when is None:
        return Question(_fire(schedule.next_after, now), True)
    text = when.strip()
    if ".." in text:
        raise UsageError(f"{option}: {when!r} is a range; why tells one slot: give one time "
                         "(2026-10-28T01:30) or one date (2026-10-28)")
    if len(text) == 10 and text[4:5] == "-" and "T" not in text:
        return _on_date(schedule, parse_date(text, option))
    asked = parse_timestamp(text, schedule.zone, option)
    notes = _wall_notes(schedule, text, asked)
    slot = _fire(schedule.prev_at_or_before, asked)
    if slot is not None and slot.timestamp() == asked.timestamp():
        return Question(slot, True, asked, notes=notes)
    after = _fire(schedule.next_after, asked)
    return Question(slot, False, asked, notes=notes, nearest=(slot, after))


def _fire(find: Callable[[datetime], datetime], t: datetime) -> datetime | None:
    try:
        return find(t)
    except UsageError:  # no fire time within 50 years
        return None


def _on_date(schedule: Schedule, day: date) -> Question:
    midnight = schedule.midnight(day)
    first = _fire(schedule.next_after, shifted(midnight, -1))
    if first is not None and first.date() == day:
        return Question(first, True, midnight, day)
    before = _fire(schedule.prev_at_or_before, shifted(midnight, -1))
    return Question(before, False, midnight, day, nearest=(before, first))


def _wall_notes(schedule: Schedule, text: str, asked: datetime) -> list[str]:
    """What a wall time without an offset means on a DST night."""
    try:
        wall = datetime.fromisoformat(text)
    except ValueError:
        return []
    if wall.tzinfo is not None:
        return []
    zone, name = schedule.zone, schedule.zone_name
    if asked.replace(tzinfo=None) != wall:
        return [f"{wall:%Y-%m-%d %H:%M} does not exist in {name} (the clocks jump over it); "
                f"read as cron reads it: {clock(asked)}"]
    other = wall.replace(tzinfo=zone, fold=1)
    if other.utcoffset() != wall.replace(tzinfo=zone, fold=0).utcoffset():
        later = other.astimezone(UTC).astimezone(zone)
        return [f"{wall:%Y-%m-%d %H:%M} happens twice in {name} (the clocks go back); read as "
                f"its first occurrence, {clock(asked)} (the second is {clock(later)}: give "
                f"the offset, {later.isoformat(timespec='minutes')}, to ask about it)"]
    return []


def clock(t: datetime) -> str:
    """A time as the story says it: ``2026-12-05 01:30 CET`` (seconds when it has them)."""
    seconds = f":{t.second:02d}" if t.second else ""
    return f"{t:%Y-%m-%d %H:%M}{seconds} {t.tzname() or t.strftime('%z')}"


def _duration(seconds: float) -> str:
    return format_duration(abs(seconds))


def _relative(t: datetime, now: datetime) -> str:
    seconds = seconds_between(now, t)
    return f"{_duration(seconds)} ago" if seconds >= 0 else f"in {_duration(seconds)}"


class Facts(Record):
    """What is known of the slot: ``job`` (the ledger's name), its schedule and key
    template; ``row`` the ledger's row of the slot's run key (None: none) and its
    ``attempts`` (oldest first); ``pauses`` (the ledger's, by job); the job's
    ``first_seen`` and newest scheduled slot (``last_slot``) in the ledger; ``events``: this
    host's run-log lines about the slot, oldest first; ``here``: this host's name;
    ``notes``: more to say about the schedule (where it came from)."""

    job: str
    schedule: Schedule
    key_template: str | None
    row: Run | None
    attempts: list[RunAttempt]
    pauses: dict[str, Pause]
    first_seen: datetime | None
    last_slot: datetime | None
    events: list[dict[str, Any]]
    here: str
    notes: list[str]
    _defaults = dict(key_template=None, row=None, first_seen=None, last_slot=None, here="")
    _factories = dict(attempts=list, pauses=dict, events=list, notes=list)


class Story(Record):
    """The answer: ``verdict`` (VERDICT_MEANINGS), the slot's ``status`` and ``reason`` as
    the ledger has them (None: no row), and ``lines``, the story in words."""

    verdict: str
    status: str | None
    reason: str | None
    lines: list[str]
    question: Question
    facts: Facts
    now: datetime

    @property
    def text(self) -> str:
        return "\n".join(self.lines) + "\n"

    def to_json(self) -> dict[str, object]:
        """``why --json`` and serve's ``/jobs/NAME/why?format=json``: cronwrap/schemas/why.json."""
        q, f = self.question, self.facts
        name, host = job_host(f.job)
        slot = q.slot
        pause = _pause_at(f, slot or self.now, self.now)
        return {
            "format": FORMAT_VERSION, "job": name, "scope": "fleet" if host is None else "host",
            "host": host, "schedule": f.schedule.expr, "tz": f.schedule.zone_name,
            "asked": iso(q.asked), "slot": None if slot is None else slot.isoformat(),
            "run_key": None if slot is None else run_key(slot, f.key_template),
            "matched": q.matched, "future": slot is not None and slot > self.now,
            "verdict": self.verdict, "status": self.status, "reason": self.reason,
            "run": None if f.row is None else _run_json(f.row, self.now),
            "attempts": [a.to_json() for a in f.attempts],
            "pause": None if pause is None else pause.to_json(),
            "events": [_event_json(e) for e in f.events],
            "dst": _dst_lines(f.schedule, slot, q.asked),
            "story": list(self.lines), "now": iso(self.now),
        }


def _run_json(run: Run, now: datetime) -> dict[str, object]:
    data = run.to_json(now)
    for key in ("pid_start", "boot_id", "pid_ns", "error_tail", "log_path"):
        data.pop(key, None)  # the story's: the output is logs's, the runner's identity unlock's
    return data


_EVENT_KEYS = ("ts", "event", "host", "pid", "run_id", "attempt", "trigger", "status",
               "skip_reason", "exit_code", "blocking_run_id", "blocking_host", "message")


def _event_json(event: dict[str, Any]) -> dict[str, object]:
    return {k: event.get(k) for k in _EVENT_KEYS if event.get(k) is not None}


def _dst_lines(schedule: Schedule, *times: datetime | None) -> list[str]:
    """The DST notes of the local days of ``times`` (explain's words)."""
    days = sorted({t.astimezone(schedule.zone).date() for t in times if t is not None})
    if not days:
        return []
    start = datetime(days[0].year, days[0].month, days[0].day, tzinfo=UTC) - timedelta(days=1)
    span = (days[-1] - days[0]).days + 3
    return [dst_text(schedule, note) for note in dst_notes(schedule, start, span)
            if note.day in days]


def _pause_at(facts: Facts, at: datetime, now: datetime) -> Pause | None:
    """The pause that covers the job at ``at`` as far as the ledger can tell: for a slot to
    come, one in force now that lasts past it; for a past one, one made before it that had
    not ended by it (a pause replaced or resumed since is gone from the ledger)."""
    for name in pause_names(facts.job):
        found = facts.pauses.get(name)
        if found is None or (found.until is not None and found.until <= at):
            continue
        if at > now or found.paused_at is None or found.paused_at <= at:
            return found
    return None


# -- the story ---------------------------------------------------------------------------------

def tell(q: Question, facts: Facts, now: datetime) -> Story:
    """The story of the slot ``q`` names, from ``facts``, at ``now``."""
    schedule = facts.schedule
    lines = [f"{shown_job(facts.job)}: schedule {schedule.expr!r} in {schedule.zone_name}.",
             *facts.notes, *q.notes]
    slot = q.slot
    lines.append(_which_slot(q, schedule, now))
    lines += _dst_lines(schedule, slot, q.asked)
    if slot is None:
        return Story("no_slot", None, None, lines, q, facts, now)
    key = run_key(slot, facts.key_template)
    row = facts.row
    if row is not None and row.scheduled_at is not None \
            and row.scheduled_at.timestamp() != slot.timestamp():
        lines.append(f"Its run key {key} is shared with the slot "
                     f"{clock(row.scheduled_at.astimezone(schedule.zone))} (--key): that slot's "
                     "run stands for both.")
    if slot > now and row is None:
        verdict, status, reason = "upcoming", None, None
        lines += _upcoming(facts, slot, now)
    elif row is None:
        verdict, status, reason = "missed", None, None
        lines += _no_row(facts, slot, now)
    else:
        verdict, status, reason = _verdict(row, now), row.shown_status(now), row.skip_reason
        lines += _with_row(facts, row, slot, now)
    lines += _events(facts, slot)
    return Story(verdict, status, reason, lines, q, facts, now)


def _which_slot(q: Question, schedule: Schedule, now: datetime) -> str:
    slot = q.slot
    if q.asked is None:
        assert slot is not None
        return f"Its next slot is {clock(slot)} ({_relative(slot, now)})."
    if q.matched and q.day is not None:
        assert slot is not None
        return f"Its slot on {q.day.isoformat()} is {clock(slot)} ({_relative(slot, now)})."
    if q.matched:
        assert slot is not None
        return f"{clock(slot)} is one of its slots ({_relative(slot, now)})."
    before, after = q.nearest
    if q.day is not None:
        head = f"It does not fire on {q.day.isoformat()} (a {q.day:%A}) in {schedule.zone_name}"
    else:
        assert q.asked is not None
        head = f"{clock(q.asked)} is not one of its fire times"
    around = [f"{clock(t)} ({side})" for t, side in ((before, "before"), (after, "after")) if t]
    head += "; the nearest are " + " and ".join(around) if around else ""
    if slot is None:
        return head + ". It has no slot at or before that time."
    return head + f". The slot before it, {clock(slot)} ({_relative(slot, now)}):"


def _upcoming(facts: Facts, slot: datetime, now: datetime) -> list[str]:
    lines = ["It has not come yet."]
    pause = _pause_at(facts, slot, now)
    if pause is not None:
        lines.append(f"{shown_job(pause.job)} is {pause.describe()}: its firing then will be "
                     f"skipped (recorded skipped, reason paused) unless it is resumed first "
                     f"(cronwrap resume {shown_job(pause.job)}).")
    return lines


def _no_row(facts: Facts, slot: datetime, now: datetime) -> list[str]:
    """No row for the slot: no firing reached the ledger for it."""
    name = shown_job(facts.job)
    if seconds_between(now, slot) < DUE.total_seconds():
        return ["It is due just now: no firing has reached the ledger for it yet."]
    lines = []
    if facts.first_seen is not None and slot < facts.first_seen:
        lines.append(f"This is before the ledger first saw {name} "
                     f"({clock(facts.first_seen.astimezone(slot.tzinfo))}): it has nothing "
                     "on it.")
        return lines
    ran_here = [e for e in facts.events if e.get("event") in ("start", "finish", "timeout",
                                                            "unrecorded", "spooled")]
    if ran_here:
        lines.append("The ledger has no row for it, but this host's run log says a run of it "
                     "started here (the ledger was unreachable: see below).")
        return lines
    lines.append("Missed: no host fired it. The ledger has no row for this slot, so no "
                 "`cronwrap run` of it reached the ledger (cron did not start it: the host was "
                 "down or asleep, cron was not running, or the crontab line was missing or "
                 "fires at other times).")
    pause = _pause_at(facts, slot, now)
    if pause is not None:
        lines.append(f"{name} was {pause.describe()} then; a paused firing records its skip, "
                     "and none did.")
    if facts.last_slot is not None and facts.last_slot < slot:
        lines.append(f"No scheduled firing of {name} has reached the ledger since its slot "
                     f"{clock(facts.last_slot.astimezone(slot.tzinfo))} "
                     f"({_relative(facts.last_slot, now)}).")
    elif facts.last_slot is not None:
        lines.append(f"Later firings did reach the ledger (its newest slot: "
                     f"{clock(facts.last_slot.astimezone(slot.tzinfo))}), yet none recorded "
                     "this one missed: its row was pruned, or it lay beyond what a firing looks "
                     "back over (--catchup-window, a host clock stepped back).")
    return lines


def _verdict(row: Run, now: datetime) -> str:
    shown = row.shown_status(now)
    if shown in (Status.RUNNING, Status.PENDING):
        return "running"
    if shown == Status.ABANDONED:
        return "abandoned"
    if shown == Status.SKIPPED:
        return "skipped"
    if shown == Status.MISSED:
        return "missed"
    return "ran"


_TRIGGERS: dict[str, str] = {Trigger.SCHEDULE: "cron fired it for its slot",
             Trigger.CATCHUP: "a later firing caught it up",
             Trigger.TAKEOVER: "a firing took it over after its runner had died",
             Trigger.MANUAL: "a person ran it by hand (run --date/--at)"}


def _with_row(facts: Facts, row: Run, slot: datetime, now: datetime) -> list[str]:
    zone = slot.tzinfo
    shown = row.shown_status(now)
    if shown == Status.MISSED:
        return ["Missed: no host fired it in time. A later firing found it had never run and "
                "recorded it missed (under --catchup none, or beyond --max-catchup, a missed "
                "slot is recorded, not run; cronwrap run --at runs it by hand)."]
    if shown == Status.SKIPPED:
        return [_skipped(facts, row, slot, now)]
    lines = []
    on = f" on {row.host}" if row.host else ""
    trigger = _TRIGGERS.get(row.trigger, f"trigger {row.trigger}")
    started = row.started_at
    when = ""
    if started is not None:
        late = seconds_between(started, slot)
        when = f", started {clock(started.astimezone(zone))}"
        if late >= LATE:
            when += f", {_duration(late)} after the slot"
    if row.skew_ms is not None:
        direction = "after" if row.skew_ms >= 0 else "before"
        lines.append(f"The firing that ran it came {_duration(row.skew_ms / 1000)} {direction} "
                     "the slot, off its schedule (a host clock or the crontab line off: see "
                     "status).")
    head = f"It ran{on}: {trigger}{when}"
    if shown in (Status.RUNNING, Status.PENDING):
        left = row.lease_left(now)
        lines.insert(0, f"{head}; it is still running (pid {row.pid}, lease "
                        f"{_duration(left or 0)} left).")
        return lines + _earlier(row, facts.attempts)
    if shown == Status.ABANDONED:
        lines.insert(0, f"{head}; its runner is gone: abandoned (its lease expired "
                        f"{_relative(row.locked_until, now) if row.locked_until else ''}). "
                        "The job's next firing takes it over.")
        return lines + _earlier(row, facts.attempts)
    lines.insert(0, f"{head}; it ended {_ending(row)}.")
    return lines + _earlier(row, facts.attempts)


def _ending(row: Run) -> str:
    """``succeeded after 4.2s (exit 0)``: how a run ended."""
    took = f" after {_duration(row.duration_ms / 1000)}" if row.duration_ms is not None else ""
    code = row.exit_code
    if row.status == Status.TIMEOUT:
        return f"timeout{took}: it reached --timeout and was ended (exit {code})"
    if row.skip_reason == Reason.LEASE_LOST:
        return (f"killed{took}: its lease was lost (another runner took the slot over, or the "
                "ledger was unreachable for longer than the lease)")
    if row.signal is not None:
        import signal

        try:
            name = signal.Signals(row.signal).name
        except ValueError:
            name = f"signal {row.signal}"
        return f"{row.status}{took}: ended by {name} (exit {code})"
    if row.skip_reason == Reason.TOO_FAST:
        return f"warning{took}: it succeeded faster than --min-duration"
    return f"{row.status}{took} (exit {code})"


def _earlier(row: Run, attempts: list[RunAttempt]) -> list[str]:
    """The attempts before the row's own, when there were any."""
    earlier = [a for a in attempts if a.attempt != row.attempt]
    if not earlier:
        return [] if row.attempt <= 1 else [f"It was attempt {row.attempt} (the ledger kept "
                                            "no record of the earlier ones)."]
    parts = []
    for a in earlier:
        on = f" on {a.host}" if a.host else ""
        why = f", {a.reason}" if a.reason else ""
        code = f", exit {a.exit_code}" if a.exit_code is not None else ""
        parts.append(f"attempt {a.attempt}{on} {a.status}{why}{code}")
    return [f"It took {row.attempt} attempts: " + "; ".join(parts) + "."]


def _skipped(facts: Facts, row: Run, slot: datetime, now: datetime) -> str:
    reason = row.skip_reason
    on = f" on {row.host}" if row.host else ""
    if reason == Reason.PAUSED:
        pause = _pause_at(facts, slot, now)
        still = f" ({shown_job(pause.job)} is {pause.describe()})" if pause is not None and \
            pause.active(now) else ""
        return (f"Skipped: the job was paused when a firing{on} came for it, so nothing ran"
                f"{still}. A manual run (cronwrap run --at) runs it now.")
    if reason == Reason.OVERLAP:
        return (f"Skipped (overlap): when a firing{on} came for it, another run of the job "
                "was still live, and --overlap skip skips a slot rather than run two at once.")
    if reason == Reason.TOO_LATE:
        return (f"Skipped (too late): a firing{on} came for it only after --catchup-window "
                "had passed, so it was recorded and not run.")
    return f"Skipped{on} ({reason})."


def _events(facts: Facts, slot: datetime) -> list[str]:
    """What this host's run log adds: firings that did nothing for the slot (a duplicate,
    the local lock busy, a pause), off-slot firings, retries, a lost lease, an end that the
    ledger could not take."""
    where = f"this host ({facts.here})" if facts.here else "this host"
    zone = slot.tzinfo
    lines = []
    for e in facts.events:
        kind = e.get("event")
        at = _event_time(e, zone)
        pid = f" (pid {e['pid']})" if e.get("pid") is not None else ""
        host = e.get("host") or facts.here or "?"
        if kind == "skip" and e.get("skip_reason") == Reason.DUPLICATE:
            held = e.get("blocking_run_id")
            status = e.get("blocking_status")
            what = f"run {held}" + (f" ({status}" + (f" on {e['blocking_host']}"
                                                    if e.get("blocking_host") else "") + ")"
                                   if status else "")
            lines.append(f"A firing on {host} at {at}{pid} was skipped as a duplicate: "
                         f"{what if held else 'another firing'} had already claimed the slot.")
        elif kind == "skip" and e.get("skip_reason") == Reason.OVERLAP:
            held = e.get("blocking_run_id")
            lines.append(f"A firing on {host} at {at}{pid} was skipped (overlap): "
                         + (f"run {held} was still live." if held else
                            "another firing on that host held the job's lock."))
        elif kind == "skip" and e.get("skip_reason") == Reason.PAUSED:
            lines.append(f"A firing on {host} at {at}{pid} was skipped: the job was paused.")
        elif kind == "warning" and e.get("skew_s") is not None:
            lines.append(f"A firing on {host} at {at}{pid} was off its slot: "
                         f"{e.get('message', '')}")
        elif kind == "missed":
            lines.append(f"The firing on {host} at {at}{pid} found it had never run and "
                         "recorded it missed.")
        elif kind == "skip" and e.get("skip_reason") == Reason.TOO_LATE:
            lines.append(f"The firing on {host} at {at}{pid} found it older than "
                         "--catchup-window and recorded it skipped (too late).")
        elif kind == "catchup":
            lines.append(f"The firing on {host} at {at}{pid} ran it as a catch-up.")
        elif kind == "retry":
            lines.append(f"On {host}, attempt {e.get('attempt')} ended {e.get('status')} and "
                         f"was retried after {e.get('delay_s')} s.")
        elif kind == "lease_lost":
            lines.append(f"On {host}, run {e.get('run_id')} lost its lease at {at}: another "
                         "runner took the slot over.")
        elif kind in ("spooled", "unrecorded"):
            lines.append(f"On {host}, the end of run {e.get('run_id')} could not be recorded at "
                         f"{at} ({kind}: "
                         + ("it waits in that host's outbox)." if kind == "spooled" else
                            "it was lost).")
                         )
    if lines:
        lines.insert(0, f"From the run log of {where}:")
    return lines


def _event_time(event: dict[str, Any], zone: Any) -> str:
    try:
        return clock(datetime.fromisoformat(str(event.get("ts"))).astimezone(zone))
    except ValueError:
        return str(event.get("ts"))


def slot_events(events: list[dict[str, Any]], name: str, host: str | None, key: str,
                slot: datetime) -> list[dict[str, Any]]:
    """The run-log lines about the slot: the job's (``name``; a host-scoped job's, that
    host's) with its run key, and its off-slot warnings that fell back to it."""
    shown = slot.isoformat()
    found = []
    for e in events:
        if not isinstance(e, dict) or e.get("job") != name:
            continue
        if host is not None and e.get("host") != host:
            continue
        if e.get("run_key") == key or (e.get("event") == "warning" and e.get("skew_s") is not None
                                       and shown in str(e.get("message", ""))):
            found.append(e)
    return found
