"""``cronwrap run --dry-run``: what a firing would do, with nothing claimed, run or written.

The same planning as a real firing (firing.plan_firing: catch-up, manual slots and ranges),
then for each slot the answer the ledger's claim would give now (``Ledger.preview``, a read).
The ledger is opened read-only; no lock is taken, no event logged, no outbox delivered. It is
also how an operator asks "what will the next firing do?".
"""

from __future__ import annotations

import sys

from cronwrap.errors import LedgerError
from cronwrap.ledger.url import open_ledger
from cronwrap.model import DONE_STATUSES, Reason, SlotRun, Status, Trigger
from cronwrap.options.spec import JobSpec
from cronwrap.process import locks
from cronwrap.record import TYPE_CHECKING
from cronwrap.run.firing import Timing, needs_recorded_schedule, plan_firing, resolve_timing
from cronwrap.run.invocation import Invocation
from cronwrap.run.runner import history, real_world, recorded_job

if TYPE_CHECKING:
    from cronwrap.ledger import base


def run(spec: JobSpec, environ: dict[str, str]) -> int:
    """``cronwrap run --dry-run``: print the plan; exit status 0."""
    world = real_world()
    timing = None if needs_recorded_schedule(spec) else resolve_timing(spec, environ)
    return show(Invocation(spec, environ, world.clock(), timing, world), timing)


def show(inv: Invocation, timing: Timing | None) -> int:
    ledger, problem = None, None
    try:
        ledger = open_ledger(inv.spec.db, inv.dirs, read_only=True)
    except LedgerError as exc:
        problem = str(exc)
    try:
        if timing is None:
            timing = inv.timing = resolve_timing(inv.spec, inv.environ, recorded_job(inv, ledger))
        plan = plan_firing(inv.spec, timing, inv.now, history(inv, ledger))
        lines = [header(inv, timing), *lock_lines(inv)]
        if problem:
            lines.append(f"  the ledger cannot be read ({problem}): a real firing would "
                         + ("run unrecorded" if inv.spec.on_db_error != "fail" else "fail (125)"))
        lines += [slot_line(slot, verdict(inv, ledger, slot)) for slot in plan.slots]
        lines += [slot_line(SlotRun(m.run_key, m.scheduled_at, Trigger.CATCHUP),
                            f"record {m.status}" + (f" ({m.reason})" if m.reason else ""))
                  for m in plan.marks]
        lines += [f"  warning: {w}" for w in plan.warnings]
    finally:
        if ledger is not None:
            ledger.close()
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def header(inv: Invocation, timing: Timing) -> str:
    what = (f"schedule {timing.expr!r} in {timing.zone_name}"
            + (f", key {timing.key!r}" if timing.key else "")) if timing.schedule else \
        "no schedule: the slot is the minute it fires in"
    return f"dry run of {inv.spec.name}, {what}; nothing is claimed, run or written:"


def lock_lines(inv: Invocation) -> list[str]:
    """The local lock, looked at without taking it: a real firing skips while it is held."""
    spec = inv.spec
    if spec.lock == "none" or spec.overlap == "allow":
        return []
    state = locks.inspect(spec.lock_file or locks.default_lock_file(inv.dirs.locks, spec.name),
                          inv.dirs.locks)
    busy = state.held if spec.lock == "flock" else state.live
    if state.problem:
        return [f"  the local lock cannot be used: {state.problem}"]
    if not busy:
        return []
    who = (f" by pid {state.holder.pid} (job pid {state.holder.job_pid})"
           if state.holder is not None else "")
    then = "wait for it" if spec.overlap == "wait" else \
        "replace its run" if spec.overlap == "replace" else "skip (overlap)"
    return [f"  the local lock is held{who}: a real firing would {then}"]


def slot_line(slot: SlotRun, text: str) -> str:
    return f"  {slot.scheduled_at.isoformat()}  {slot.run_key}  {slot.trigger:<8} {text}"


def verdict(inv: Invocation, ledger: base.Ledger | None, slot: SlotRun) -> str:
    """run / run again / take over / skip, and why, as the claim would decide now."""
    if ledger is None:
        return "run (the ledger cannot tell what ran)"
    answer = ledger.preview(inv.request(slot))
    row = answer.blocking
    if answer.pause is not None:
        return (f"skip ({answer.pause.describe()}; cronwrap resume {answer.pause.job} runs it "
                "again)")
    if answer.skip_reason is not None:
        assert row is not None, "a skip names the row in the way (Ledger.preview)"
        if answer.skip_reason == Reason.OVERLAP:
            return (f"skip (overlap): run {row.run_id} of slot {row.run_key} is running on "
                    f"{row.host} (pid {row.pid})")
        if row.status == Status.RUNNING:
            return f"skip: running now on {row.host} (run {row.run_id}, pid {row.pid})"
        return (f"skip: already ran (run {row.run_id}, {row.status})"
                + ("; --force runs it again" if row.status in DONE_STATUSES else
                   "; no attempts left: --max-attempts, or --date/--at by hand, runs it"))
    if row is None:
        return "run (attempt 1)"
    if answer.took_over:
        return f"take over run {row.run_id} (abandoned by {row.host}), attempt {row.attempt + 1}"
    return f"run again (attempt {row.attempt + 1}; run {row.run_id} {row.status})"
