"""Pure catch-up planning: a firing + its schedule + what the ledger knows + the policy
become the runs to make and the slots to record (ARCHITECTURE.md §2 step 4).

No clock and no I/O: ``now`` is an argument, the ledger's knowledge comes in as
``last_seen`` and ``known_keys`` (the ledger's answer to which of some run keys it has, asked
for the keys of the slots looked at, CHUNK at a time), and the runner carries out the plan.

Decisions recorded here (the spec is silent on them):

* A firing that maps to no slot (host clock or ``--tz`` far off, an ``@reboot`` line, a
  person running the job by hand) falls back to the most recent slot, with a warning. That
  slot runs with trigger ``catchup`` whatever the policy: somebody did fire the job, and a
  wrapper that stopped running a job because of a zone typo would be worse than one that
  runs the right slot late. The ledger's unique run key still makes it once per slot.
  Only when that slot is older than ``--catchup-window`` is it recorded ``skipped``
  (``too_late``) instead.
* Slots that share a run key (``--key %Y-%m-%d`` on an hourly schedule) are one slot: the
  earliest of them inside the window stands for the key, since its firing would have
  claimed it. A slot sharing the current slot's key is not missed.
* The look-back is bounded: at most ``MAX_MARKS`` distinct missed keys plus the ones the
  policy runs (none: 0, latest: 1, all: ``max_catchup``), newest first, are considered; what
  lies beyond is counted (up to ``COUNT_LIMIT``) and reported as "N older slots not listed",
  never recorded. So every slot a warning counts as recorded is recorded, and no slot between
  the ones run and the ones recorded is left without a row.
"""

from __future__ import annotations

from datetime import timedelta
from itertools import chain, islice

from cronwrap.errors import UsageError
from cronwrap.model import Mark, Reason, SlotRun, Status, Trigger
from cronwrap.options.durations import format_duration
from cronwrap.options.spec import MAX_SLOTS
from cronwrap.record import TYPE_CHECKING
from cronwrap.schedule import (
    DEFAULT_TOLERANCE,
    Frozen,
    parse_date,
    parse_timestamp,
    run_key,
    seconds_between,
    shifted,
)

if TYPE_CHECKING:
    from collections.abc import Iterator
    from datetime import date as Date
    from datetime import datetime
    from typing import Callable

    from cronwrap.schedule import Schedule, Slots

    KnownKeys = Callable[[set[str]], set[str]]

POLICIES = ("none", "latest", "all")
MAX_MARKS = 1000
COUNT_LIMIT = 10_000
CHUNK = 256  # slots whose run keys the ledger is asked about at once


class Plan(Frozen):
    """Runs in the order to make them (catch-ups oldest first, then the firing's own slot),
    slots to record, and warnings for the run log. ``skew_seconds`` is the firing's distance
    from its slot (positive: late); ``matched`` is False when that was beyond the tolerance
    and the plan fell back to the most recent slot: the runner should say so loudly."""

    __slots__ = ("runs", "marks", "warnings", "skew_seconds", "matched")
    _defaults = {"skew_seconds": 0.0, "matched": True}
    runs: list[SlotRun]
    marks: list[Mark]
    warnings: list[str]
    skew_seconds: float
    matched: bool


class _Missed(Frozen):
    __slots__ = ("slot", "run_key", "too_late")
    slot: datetime
    run_key: str
    too_late: bool


def plan_firing(
    schedule: Slots,
    now: datetime,
    *,
    key_template: str | None,
    last_seen: datetime | None,
    known_keys: KnownKeys,
    policy: str,
    window: float,
    max_catchup: int,
    tolerance: timedelta = DEFAULT_TOLERANCE,
    abandoned: dict[str, datetime] | None = None,
    cron_tz_ignored_in: str | None = None,
) -> Plan:
    """Plan one scheduled firing at ``now``.

    ``last_seen`` is the last time the ledger saw this job (None: first invocation, which
    never invents a backlog); ``known_keys`` which run keys the ledger already has a row for
    (a function of a set of keys: those of them it has);
    ``window`` the catch-up window in seconds (0 = unlimited; a slot exactly ``window``
    old is still inside it); ``abandoned`` the slots whose run was abandoned (its runner
    died), by run key: each one inside the window and before this firing's slot is run again
    (trigger ``takeover``) whatever ``policy`` says, which is about slots that never started.
    ``cron_tz_ignored_in``: the system zone, when ``CRON_TZ`` gave the schedule its zone; a
    firing off the schedule but on time for it in that zone is named as cron ignoring
    ``CRON_TZ``.
    """
    window = _check(policy, window, max_catchup)
    warnings: list[str] = []
    slot, skew = schedule.slot_for_firing(now, tolerance)
    trigger = Trigger.SCHEDULE
    if slot is None:
        slot, trigger = schedule.prev_at_or_before(now), Trigger.CATCHUP
        warnings.append(_off_slot_warning(schedule, now, slot, skew, tolerance,
                                          cron_tz_ignored_in))
    key = run_key(slot, key_template)
    runs: list[SlotRun] = []
    marks: list[Mark] = []
    if last_seen is not None:
        runs, marks = _plan_backlog(schedule, now, slot, key, key_template, last_seen,
                                    known_keys, policy, window, max_catchup, warnings)
    if abandoned:  # by the instant: a fall-back night's wall times compare out of order
        runs = sorted(runs + _takeovers(schedule, abandoned, now, slot, key, window),
                      key=lambda run: run.scheduled_at.timestamp())
    if trigger == Trigger.CATCHUP and _too_late(now, slot, window):
        warnings.append(f"slot {slot.isoformat()} is older than --catchup-window: not run")
        if key not in known_keys({key}):
            marks.append(Mark(key, slot, Status.SKIPPED, Reason.TOO_LATE))
    else:
        runs.append(SlotRun(key, slot, trigger))
    return Plan(runs, marks, warnings, skew, trigger == Trigger.SCHEDULE)


def _takeovers(schedule: Slots, abandoned: dict[str, datetime], now: datetime, slot: datetime,
               key: str, window: float) -> list[SlotRun]:
    """The abandoned slots this firing re-runs: before its own, inside the window. Its own
    slot, abandoned, is taken over by its own claim."""
    return [SlotRun(other, schedule.local(at), Trigger.TAKEOVER)
            for other, at in abandoned.items()
            if other != key and at.timestamp() < slot.timestamp() and not _too_late(now, at, window)]


def _check(policy: str, window: float | timedelta, max_catchup: int) -> float:
    if policy not in POLICIES:
        raise UsageError(f"--catchup: {policy!r} is not a policy (one of: none, latest, all)")
    if isinstance(window, timedelta):
        window = window.total_seconds()
    if window < 0:
        raise UsageError(f"--catchup-window: {window} is negative (0 means unlimited)")
    if max_catchup < 0:
        raise UsageError(f"--max-catchup: {max_catchup} is negative (example: 10)")
    return float(window)


def _too_late(now: datetime, slot: datetime, window: float) -> bool:
    return window > 0 and seconds_between(now, slot) > window


def _off_slot_warning(schedule: Slots, now: datetime, slot: datetime, skew: float,
                      tolerance: timedelta, cron_tz_ignored_in: str | None) -> str:
    direction = "after" if skew >= 0 else "before"
    cause = "check this host's clock, the crontab line and --tz"
    host = cron_tz_ignored_in
    if host is not None and _on_time_in(schedule, host, now, tolerance):
        # The offset is the zones' difference: cron fired the line's times in the system zone.
        cause = (f"it is on time for {schedule.expr!r} in the system zone {host}, so this "
                 f"host's cron most likely ignores CRON_TZ={schedule.zone_name} (Debian's "
                 f"cron does, and fires every line in the system zone): remove CRON_TZ and "
                 f"give the times in {host}, or pass --tz {host}")
    return (
        f"this firing at {now.isoformat()} is {format_duration(abs(skew))} {direction} the"
        f" nearest fire time of {schedule.expr!r} in {schedule.zone_name}, outside the"
        f" {format_duration(tolerance.total_seconds())} tolerance: {cause}; using the most"
        f" recent slot, {slot.isoformat()}"
    )


def _on_time_in(schedule: Slots, zone_name: str, now: datetime,
                tolerance: timedelta) -> bool:
    """A firing at ``now`` is on a slot of ``schedule``'s expression read in ``zone_name``."""
    there = schedule.elsewhere(zone_name)
    return there is not None and there.slot_for_firing(now, tolerance)[0] is not None


def _plan_backlog(schedule: Slots, now: datetime, slot: datetime, key: str,
                  key_template: str | None, last_seen: datetime, known: KnownKeys,
                  policy: str, window: float, max_catchup: int,
                  warnings: list[str]) -> tuple[list[SlotRun], list[Mark]]:
    """Catch-up runs and marks for the slots after ``last_seen`` and before ``slot``."""
    budget = MAX_MARKS + _runs_allowed(policy, max_catchup)
    missed, unlisted = _missed_slots(schedule, now, slot, key, key_template, last_seen,
                                     known, window, budget)
    in_window = [m for m in missed if not m.too_late]
    runs, marks = _apply_policy(in_window, policy, max_catchup, warnings)
    marks += [Mark(m.run_key, m.slot, Status.SKIPPED, Reason.TOO_LATE) for m in missed if m.too_late]
    marks.sort(key=lambda mark: mark.scheduled_at.timestamp())
    if len(marks) > MAX_MARKS:
        unlisted += len(marks) - MAX_MARKS
        marks = marks[-MAX_MARKS:]
    if unlisted:
        many = "more than " if unlisted > COUNT_LIMIT else ""
        warnings.append(f"{many}{_slots(min(unlisted, COUNT_LIMIT), 'older')} not listed"
                        " (neither run nor recorded)")
    return runs, marks


def _runs_allowed(policy: str, max_catchup: int) -> int:
    """How many missed slots ``policy`` may run: the look-back takes that many keys on top
    of the MAX_MARKS it may record (one more, and the oldest mark, which can be the slot just
    after the ones run, would be cut off while the warning counted it as recorded)."""
    return {"none": 0, "latest": 1}.get(policy, max_catchup)


def _missed_slots(schedule: Slots, now: datetime, slot: datetime, key: str,
                  key_template: str | None, last_seen: datetime, known: KnownKeys,
                  window: float, budget: int) -> tuple[list[_Missed], int]:
    """Slots in (last_seen, slot) whose key the ledger does not know, one per key, oldest
    first; and how many more lie beyond ``budget`` (counted up to COUNT_LIMIT + 1)."""
    groups: dict[str, _Missed] = {}
    keyed = ((s, run_key(s, key_template))
             for s in schedule.slots_between(last_seen, shifted(slot, -1), reverse=True))
    for chunk, found in _looked_up(keyed, known):
        for i, (earlier, earlier_key) in enumerate(chunk):
            if earlier_key == key or earlier_key in found:
                continue
            late = _too_late(now, earlier, window)
            group = groups.get(earlier_key)
            if group is None and len(groups) >= budget:
                return _oldest_first(groups), 1 + _count_unknown(chain(chunk[i + 1:], keyed),
                                                                 known)
            if group is None or group.too_late or not late:
                # Walking backwards: an older slot with the same key takes over as its
                # representative, unless it would drag an in-window key out of the window.
                groups[earlier_key] = _Missed(earlier, earlier_key, late)
    return _oldest_first(groups), 0


def _looked_up(keyed: Iterator[tuple[datetime, str]], known: KnownKeys
               ) -> Iterator[tuple[list[tuple[datetime, str]], set[str]]]:
    """(slot, key) pairs CHUNK at a time, each chunk with those of its keys the ledger has."""
    while chunk := list(islice(keyed, CHUNK)):
        yield chunk, known({k for _, k in chunk})


def _slots(count: int, adjective: str = "missed") -> str:
    return f"{count} {adjective} slot{'' if count == 1 else 's'}"


def _oldest_first(groups: dict[str, _Missed]) -> list[_Missed]:
    return sorted(groups.values(), key=lambda m: m.slot.timestamp())


def _count_unknown(keyed: Iterator[tuple[datetime, str]], known: KnownKeys) -> int:
    count = 0
    for chunk, found in _looked_up(keyed, known):
        for _, key in chunk:
            if key not in found:
                count += 1
                if count > COUNT_LIMIT:
                    return count
    return count


def _apply_policy(missed: list[_Missed], policy: str, max_catchup: int,
                  warnings: list[str]) -> tuple[list[SlotRun], list[Mark]]:
    """``none``: record all missed; ``latest``: run the newest; ``all``: run oldest first
    up to ``max_catchup`` and record the rest as missed."""
    if policy == "none":
        chosen: list[_Missed] = []
    elif policy == "latest":
        chosen = missed[-1:]
    else:
        chosen = missed[:max_catchup]
        if len(missed) > len(chosen):
            extra = len(missed) - len(chosen)
            warnings.append(f"{_slots(extra)} beyond --max-catchup {max_catchup}"
                            f" {'is' if extra == 1 else 'are'} recorded as missed, not run")
    runs = [SlotRun(m.run_key, m.slot, Trigger.CATCHUP) for m in chosen]
    run_keys = {m.run_key for m in chosen}
    marks = [Mark(m.run_key, m.slot, Status.MISSED, None) for m in missed if m.run_key not in run_keys]
    return runs, marks


RANGE = ".."


def plan_manual(
    schedule: Schedule,
    *,
    date: Date | str | None = None,
    at: datetime | str | None = None,
    key_template: str | None,
    max_slots: int = MAX_SLOTS,
) -> list[SlotRun]:
    """The runs of ``--date``/``--at``, oldest first. ``--date D``: the schedule's first fire
    time that day; ``--at T``: T, which must be a fire time. ``FROM..TO`` (either option,
    both ends inclusive): every slot in the range, slots that share a run key counted once
    (the earliest, as a firing would have claimed it), at most ``max_slots`` of them or a
    UsageError before anything runs. Strings are parsed as the options are; the ledger
    decides whether each slot already succeeded (``--force``)."""
    if (date is None) == (at is None):
        raise UsageError("--date/--at: give exactly one of them")
    option, value = ("--date", date) if date is not None else ("--at", at)
    if not isinstance(value, str) or RANGE not in value:
        if date is not None:
            slot = schedule.slot_on_date(parse_date(date) if isinstance(date, str) else date)
        else:
            assert at is not None
            slot = schedule.slot_at(parse_timestamp(at, schedule.zone) if isinstance(at, str)
                                    else at)
        return [SlotRun(run_key(slot, key_template), slot, Trigger.MANUAL)]
    start, end = _range_bounds(schedule, option, value)
    runs: list[SlotRun] = []
    keys: set[str] = set()
    for slot in schedule.slots_in(start, end):
        key = run_key(slot, key_template)
        if key in keys:
            continue
        if len(runs) == max_slots:
            raise UsageError(f"{option} {value}: more than {max_slots} slots of "
                             f"{schedule.expr!r}; narrow the range or raise --max-slots")
        keys.add(key)
        runs.append(SlotRun(key, slot, Trigger.MANUAL))
    if not runs:
        raise UsageError(f"{option} {value}: {schedule.expr!r} has no slot in that range in "
                         f"{schedule.zone_name}")
    return runs


def _range_bounds(schedule: Schedule, option: str, text: str) -> tuple[datetime, datetime]:
    """The first and last instant of ``FROM..TO``: whole local days for --date."""
    first, _, last = text.partition(RANGE)
    if option == "--date":
        start = schedule.midnight(parse_date(first, option))
        end = shifted(schedule.midnight(parse_date(last, option) + timedelta(days=1)), -1)
    else:
        start = parse_timestamp(first, schedule.zone, option)
        end = parse_timestamp(last, schedule.zone, option)
    if end < start:
        raise UsageError(f"{option}: {text!r} ends before it begins (write FROM..TO, the "
                         "older first)")
    return start, end
