"""``cronwrap prune``: ledger rows and log files past their retention.

Rows go first (the ledger decides which: never a running run, never a slot inside its job's
catch-up window, always each job's newest ``--keep-last``); then the captured output of the
removed runs, then any output file and rotated run log older than the cutoff. Only files
inside the log directory are ever removed, whatever path a ledger row names.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

from cronwrap.ledger import base
from cronwrap.record import Record
from cronwrap.runlog import prune_event_logs, prune_outputs


class Pruned(Record):
    __slots__ = ("runs", "files")


def prune(ledger: base.Ledger, log_dir: Path, age: float, keep_last: int, now: float) -> Pruned:
    cutoff = datetime.fromtimestamp(now - age, timezone.utc)
    removed = ledger.prune(cutoff, keep_last)
    files = sum(_remove_inside(log_dir, path) for _, _, path in removed if path)
    try:
        job_dirs = [e.path for e in os.scandir(log_dir) if e.is_dir(follow_symlinks=False)]
    except OSError:
        job_dirs = []
    files += sum(prune_outputs(Path(d), age, now) for d in job_dirs)
    prune_event_logs(log_dir, age, now)
    return Pruned(len(removed), files)


def _remove_inside(log_dir: Path, path: str) -> int:
    root = os.path.realpath(log_dir)
    target = os.path.realpath(path)
    if os.path.commonpath([root, target]) != root or os.path.islink(path):
        return 0
    try:
        os.unlink(target)
        return 1
    except OSError:
        return 0
