"""What a firing acts for, decided before anything is claimed: the job's schedule resolved
(--schedule/--tz/--key, or what the ledger recorded for a manual run), and the slots it runs
and records. Pure: the time and the ledger's history come in as arguments."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone, tzinfo

from cronwrap.errors import UsageError
from cronwrap.model import SlotHistory, SlotRun, Trigger, none_known
from cronwrap.record import TYPE_CHECKING, Record

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Callable

    from cronwrap.model import JobInfo, Mark
    from cronwrap.options.spec import JobSpec
    from cronwrap.schedule import Slots
    from cronwrap.schedule.table import ZoneInputs

    FindTable = Callable[[str, ZoneInputs], Slots | None]


class Timing(Record):
    """The job's schedule resolved: the Schedule (None without one), its zone's name and its
    run key template, from --schedule/--tz/--key or, for a manual run without --schedule,
    as the ledger recorded them when cron fired the job. ``system_zone``: the host's zone
    name when ``CRON_TZ`` (not --tz) gave the schedule a zone other than it, which a cron
    that ignores CRON_TZ (Debian's) fires the lines in."""

    schedule: Slots | None
    zone_name: str | None
    key: str | None
    system_zone: str | None
    _defaults = dict(schedule=None, zone_name=None, key=None, system_zone=None)

    @property
    def expr(self) -> str | None:
        return None if self.schedule is None else self.schedule.expr


class FiringPlan(Record):
    """What a firing will do, before it does any of it: the slots to run in order, the slots
    to record without running (catch-up marks), and warnings (printed unless ``quiet``)."""

    slots: list[SlotRun]
    marks: Sequence[Mark]
    warnings: Sequence[str]
    skew: float
    quiet: bool
    _defaults = dict(marks=(), warnings=(), skew=0.0, quiet=False)


def minute_slot(now: float) -> SlotRun:
    """Without a schedule a firing's slot is its minute (cron's own granularity)."""
    start = datetime.fromtimestamp(now - now % 60, timezone.utc)
    return SlotRun(start.strftime("%Y-%m-%dT%H:%M:%SZ"), start.astimezone(), Trigger.SCHEDULE)


def is_manual(spec: JobSpec) -> bool:
    return spec.date is not None or spec.at is not None


def needs_recorded_schedule(spec: JobSpec) -> bool:
    """A manual run without --schedule takes the job's schedule from the ledger."""
    return spec.schedule is None and is_manual(spec)


def resolve_timing(spec: JobSpec, environ: dict[str, str], recorded: JobInfo | None = None,
                   find_table: FindTable | None = None) -> Timing:
    """Validate --schedule/--tz/--key/--date/--at before anything runs. ``recorded``: what
    the ledger knows of the job, for a manual run without --schedule (--tz and --key still
    win over what was recorded). ``find_table``: the slot table a firing kept for the
    schedule (run/tables.py), read instead of the engine when one holds; not for a manual
    run, whose slots can lie anywhere."""
    expr, tz, key = spec.schedule, spec.tz, spec.key
    if expr is None and is_manual(spec) and recorded is not None and recorded.schedule:
        expr, tz = recorded.schedule, tz or recorded.tz
        key = key if key is not None else recorded.key_template
    if expr is None:
        option = "date" if spec.date is not None else "at" if spec.at is not None else "key"
        if option != "key":
            raise UsageError(f"--{option}: no schedule is recorded for {spec.name!r} (cron has "
                             "not run it with --schedule yet): pass --schedule EXPR, and --tz "
                             "and --key as the crontab line has them")
        if key is not None:
            raise UsageError("--key needs --schedule (the slots come from it)")
        return Timing()
    from cronwrap import schedule as sched

    system = sched.system_zone_name()
    setting = sched.zone_setting(environ)
    if key is not None:
        sched.validate_key_template(key)
    if spec.date is not None and spec.at is not None:
        raise UsageError("--date and --at both name a slot: give one of them")
    found = find_table(expr, (tz, setting, system)) \
        if find_table is not None and not is_manual(spec) else None
    if found is None:
        zone, zone_name = sched.choose_zone(tz, setting, system)
        found = sched.Schedule.parse(expr, zone, zone_name)
    from_cron_tz = tz is None and (setting or ("",))[0] == "CRON_TZ"
    return Timing(found, found.zone_name, key,
                  system if from_cron_tz and system != found.zone_name else None)


def history_since(spec: JobSpec, now: float) -> datetime:
    """How far back plan_firing takes over abandoned runs: the catch-up window (400 days
    when unlimited)."""
    return datetime.fromtimestamp(now, timezone.utc) - timedelta(
        seconds=spec.catchup_window or 400 * 86400.0)


def plan_firing(spec: JobSpec, timing: Timing, now: float,
                history: SlotHistory | None) -> FiringPlan:
    """The slots this firing runs, in order (catch-ups oldest first, then its own slot), and
    what catch-up records. ``history``: the ledger's newest slot of the job, which run keys
    it has, and its runs abandoned since ``history_since`` (None: the ledger is not there; a
    scheduled firing without it plans as the job's first)."""
    if timing.schedule is None:
        return FiringPlan([minute_slot(now)])
    from cronwrap.run import catchup

    if is_manual(spec):
        from cronwrap.schedule import Schedule

        assert isinstance(timing.schedule, Schedule)  # a manual run's is never a table
        runs = catchup.plan_manual(timing.schedule, date=spec.date, at=spec.at,
                                   key_template=timing.key, max_slots=spec.max_slots)
        if not spec.force:
            refuse_future(spec, runs, now)
        return FiringPlan(runs)
    at = datetime.fromtimestamp(now, timezone.utc)
    history = history or SlotHistory(None, none_known, {})
    last_seen = history.last_slot
    plan = catchup.plan_firing(
        timing.schedule, at, key_template=timing.key, last_seen=last_seen,
        known_keys=history.known, policy=spec.catchup, window=spec.catchup_window,
        max_catchup=spec.max_catchup, abandoned=history.abandoned,
        cron_tz_ignored_in=timing.system_zone)
    if last_seen is not None and plan.runs and plan.runs[-1].scheduled_at < last_seen:
        plan.warnings.append(
            f"this firing's slot {plan.runs[-1].scheduled_at.isoformat()} is older than the "
            f"newest slot already seen ({timing.schedule.local(last_seen).isoformat()}): this "
            "host's clock is behind, or was stepped back; check it")
    # A firing far from any slot is a wrong clock (loudly: cron mails stderr), unless it is
    # hours off under a catch-up policy: then it is an @reboot-style catch-up firing.
    deliberate = not plan.matched and abs(plan.skew_seconds) >= 3600 and spec.catchup != "none"
    own = plan.runs[-1] if plan.runs and not deliberate else None
    if own is not None and not plan.matched:  # only a firing off its slot is news
        plan.runs[-1] = own.replace(skew_ms=int(plan.skew_seconds * 1000))
    return FiringPlan(plan.runs, plan.marks, plan.warnings, plan.skew_seconds, deliberate)


def refuse_future(spec: JobSpec, runs: Sequence[SlotRun], now: float) -> None:
    """A manual slot that has not come yet is a typo more often than a wish (``--date
    2027-01-05`` for 2026): run now, it would use up that night's slot. --force runs it."""
    latest = runs[-1].scheduled_at
    if latest.timestamp() > now:
        option, value = ("--date", spec.date) if spec.date is not None else ("--at", spec.at)
        raise UsageError(f"{option} {value}: the slot {latest.isoformat()} is in the future; "
                         "check the date (add --force to run it now and use it up)")


def cron_zone(environ: dict[str, str]) -> tzinfo | None:
    """Without --schedule the job's zone is still CRON_TZ when the crontab sets it (read as
    the schedule engine reads zones), else the local zone, which honours TZ."""
    key = environ.get("CRON_TZ")
    if not key:
        return None
    from cronwrap.schedule import find_zone, zone_key  # as in resolve_timing

    name = zone_key(key)
    return find_zone(name) if name else None
