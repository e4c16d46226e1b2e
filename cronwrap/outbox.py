"""The local outbox: results that could not be recorded wait here for the next invocation.

Once a job has run, a failure to record its end never changes cronwrap's exit status (DESIGN
§3 step 6). The result is written to ``STATE/outbox/`` as one JSON file per run, and every
later invocation on this host delivers what is waiting before it claims anything. Delivery
is conditioned on the claim's fence like any finish: a slot taken over by another host in
the meantime keeps that host's record. Each entry names its ledger by a hash of the URL (never
the URL: it may hold a password), so it is only ever delivered to the ledger it belongs to.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from cronwrap.errors import LedgerError
from cronwrap.ledger import base
from cronwrap.ledger.base import Finish
from cronwrap.paths import ensure_private_dir, open_private


def ledger_id(url: str | None) -> str:
    import hashlib  # only when there is something to spool or deliver: not on every firing

    return hashlib.sha256((url or "embedded").encode()).hexdigest()[:16]


def spool(state_dir: Path, url: str | None, run: base.Run, result: Finish) -> Path:
    """Write the result atomically (temp file + rename) and return its path."""
    box = ensure_private_dir(state_dir / "outbox")
    entry = {"ledger": ledger_id(url), "job": run.job, "run_id": run.run_id, "fence": run.fence,
             "run_key": run.run_key, "finish": result.asdict()}
    final = box / f"{ledger_id(url)}-{run.run_id}-{run.fence}.json"
    temp = final.with_suffix(".tmp")
    fd = open_private(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        os.write(fd, json.dumps(entry).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp, final)
    return final


def pending(state_dir: Path, url: str | None) -> list[Path]:
    box = state_dir / "outbox"
    try:
        names = os.listdir(box)
    except FileNotFoundError:
        return []
    if not names:
        return []
    prefix = ledger_id(url) + "-"
    return sorted(box / n for n in names if n.startswith(prefix) and n.endswith(".json"))


def deliver(state_dir: Path, url: str | None, ledger: base.Ledger, emit) -> int:
    """Deliver waiting results; each is removed once the ledger has answered for it."""
    delivered = 0
    for path in pending(state_dir, url):
        try:
            entry = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        try:
            recorded = ledger.finish(entry["run_id"], entry["fence"], Finish(**entry["finish"]))
        except LedgerError:
            return delivered  # still unreachable: try again next time
        emit("outbox_delivered", job=entry["job"], run_id=entry["run_id"],
             run_key=entry["run_key"], status=entry["finish"]["status"], recorded=recorded)
        path.unlink(missing_ok=True)
        delivered += 1
    return delivered
