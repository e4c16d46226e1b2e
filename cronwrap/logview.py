"""``cronwrap logs``: copy a run's captured output to stdout, optionally following it."""

from __future__ import annotations

import os
import sys
import time

from cronwrap.errors import UsageError
from cronwrap.ledger import base

FOLLOW_POLL = 0.5


def show(ledger: base.Ledger, job: str, run_id: int | None, follow: bool) -> int:
    run = _find(ledger, job, run_id)
    if not run.log_path and run.status != base.RUNNING:
        raise UsageError(f"{job}: run {run.run_id} has no captured output ({run.status})")
    path = run.log_path or _guess_path(run)
    offset = _copy(path, 0)
    while follow and _still_running(ledger, run):
        time.sleep(FOLLOW_POLL)
        offset = _copy(path, offset)
    if follow:
        _copy(path, offset)
    return 0


def _find(ledger: base.Ledger, job: str, run_id: int | None) -> base.Run:
    if run_id is None:
        runs = [r for r in ledger.runs(job, 20) if r.status != base.SKIPPED]
        if not runs:
            raise UsageError(f"{job}: no runs recorded (check the name with cronwrap status)")
        return runs[0]
    run = ledger.get_run(job, run_id)
    if run is None:
        raise UsageError(f"{job}: no run {run_id} (see cronwrap history {job})")
    return run


def _guess_path(run: base.Run) -> str:
    from cronwrap.paths import resolve_dirs
    from cronwrap.runlog import output_path

    return str(output_path(resolve_dirs(os.environ).logs, run.job, run.run_id, run.attempt))


def _still_running(ledger: base.Ledger, run: base.Run) -> bool:
    current = ledger.get_run(run.job, run.run_id)
    return current is not None and current.status == base.RUNNING and current.fence == run.fence


def _copy(path: str, offset: int) -> int:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            while chunk := f.read(1 << 20):
                sys.stdout.buffer.write(chunk)
                offset += len(chunk)
    except FileNotFoundError:
        return offset
    sys.stdout.buffer.flush()
    return offset
