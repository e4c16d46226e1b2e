"""The local outbox: results that could not be recorded wait here for the next invocation.

Once a job has run, a failure to record its end never changes cronwrap's exit status
(ARCHITECTURE.md §3 step 6). The result is written to ``STATE/outbox/`` as one JSON file per run, and every
later invocation on this host delivers what is waiting before it claims anything. Delivery
is conditioned like any finish on the claim (id, fence, job, run key, claimer): a slot taken
over in the meantime keeps its new runner's record. Each entry names its ledger by a hash of
the URL (never the URL: it may hold a password), so it is only ever delivered to the ledger
it belongs to.

An entry that cannot be read back as a result (a torn write, another version's format, a
file someone put there) must never stop the jobs of the host: it is moved aside to
``outbox/bad/`` (kept for a person to look at), reported once, and the job runs.
"""

from __future__ import annotations

import errno
import os
from datetime import datetime

from cronwrap import jsontext
from cronwrap.errors import LedgerError
from cronwrap.model import FINAL_STATUSES, Event, Finish, Run, Status, iso
from cronwrap.paths import ensure_private_dir, open_private
from cronwrap.record import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any, Protocol

    from cronwrap.ledger import base

    class Emit(Protocol):
        """Where an event goes: the run log's ``EventLog.emit``."""

        def __call__(self, event: Event, **fields: Any) -> object: ...

QUARANTINE = "bad"
_OWNER = {"job": str, "run_id": int, "fence": int, "run_key": str, "host": str, "pid": int,
          "pid_start": int}


def ledger_id(url: str | None) -> str:
    import hashlib  # only when there is something to spool or deliver: not on every firing

    return hashlib.sha256((url or "embedded").encode()).hexdigest()[:16]


def spool(state_dir: str, url: str | None, run: Run, result: Finish) -> str:
    """Write the result atomically (temp file + rename) and return its path; on failure the
    temp file is removed and the error raised."""
    box = ensure_private_dir(os.path.join(state_dir, "outbox"))
    entry = {"ledger": ledger_id(url), "job": run.job, "run_id": run.run_id, "fence": run.fence,
             "run_key": run.run_key, "host": run.host, "pid": run.pid,
             "pid_start": run.pid_start, "attempt": run.attempt,
             "started_at": iso(run.started_at), "finish": result.asdict()}
    final = os.path.join(box, f"{ledger_id(url)}-{run.run_id}-{run.fence}.json")
    temp = final.removesuffix(".json") + ".tmp"
    try:
        fd = open_private(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            data = jsontext.dumps(entry).encode()
            if os.write(fd, data) != len(data):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, final)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
    return final


def pending(state_dir: str, url: str | None) -> list[str]:
    box = os.path.join(state_dir, "outbox")
    try:
        names = os.listdir(box)
    except (FileNotFoundError, NotADirectoryError):
        return []
    if not names:
        return []
    prefix = ledger_id(url) + "-"
    return sorted(os.path.join(box, n) for n in names if n.startswith(prefix) and n.endswith(".json"))


def read_entry(path: str) -> tuple[Run, Finish]:
    """The claim and the result an entry holds; ValueError when it is not a valid entry."""
    fd = open_private(path, os.O_RDONLY)  # no symlink, no FIFO, ours
    try:
        entry = jsontext.loads(os.read(fd, 1 << 20))
    finally:
        os.close(fd)
    if not isinstance(entry, dict) or not isinstance(entry.get("finish"), dict):
        raise ValueError("not a result")
    owner = {k: entry.get(k) for k in _OWNER}
    for key, kind in _OWNER.items():
        if type(owner[key]) is not kind:
            raise ValueError(f"{key} missing or not {kind.__name__}")
    try:
        result = Finish(**entry["finish"])
    except TypeError as exc:
        raise ValueError(str(exc)) from None
    if not isinstance(result.status, str) or result.status not in FINAL_STATUSES:
        raise ValueError("unknown status")
    # The attempt and its start (entries of releases before them have neither): for keeping
    # the attempt's end among the slot's attempts when the slot was taken over meanwhile.
    attempt, started = entry.get("attempt"), entry.get("started_at")
    run = Run(run_id=owner["run_id"], job=owner["job"], run_key=owner["run_key"],
              scheduled_at=None, trigger="", status=Status.RUNNING, fence=owner["fence"],
              host=owner["host"], pid=owner["pid"], pid_start=owner["pid_start"],
              attempt=attempt if type(attempt) is int and attempt > 0 else 0,
              started_at=_time(started))
    return run, result


def _time(text: object) -> datetime | None:
    try:
        found = datetime.fromisoformat(text) if isinstance(text, str) else None
    except ValueError:
        return None
    return found if found is not None and found.tzinfo is not None else None


def deliver(state_dir: str, url: str | None, ledger: base.Ledger, emit: Emit) -> int:
    """Deliver waiting results; each is removed once the ledger has answered for it."""
    delivered = 0
    for path in pending(state_dir, url):
        try:
            run, result = read_entry(path)
        except Exception as exc:  # not JSON, not a result; PathError: a symlink, not ours
            if isinstance(exc.__cause__ or exc, FileNotFoundError):
                continue  # another firing of this host delivered it first: nothing to say
            quarantine(path, exc, emit)
            continue
        try:
            recorded = ledger.finish(run, result)
            if not recorded and run.attempt:  # taken over meanwhile: keep the attempt's end
                ledger.record_superseded(run, result)
        except LedgerError:
            return delivered  # still unreachable: try again next time
        emit(Event.OUTBOX_DELIVERED, job=run.job, run_id=run.run_id, run_key=run.run_key,
             status=result.status, recorded=recorded)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        delivered += 1
    return delivered


def quarantine(path: str, reason: Exception, emit: Emit) -> None:
    """Move a bad entry to outbox/bad/ (kept, never deleted) and say so once."""
    box, name = os.path.split(path)
    target = os.path.join(box, QUARANTINE, name)
    try:
        ensure_private_dir(os.path.dirname(target))
        os.replace(path, target)
        where = f"moved to {target}"
    except Exception:  # OSError, PathError: leave it, but never let it stop the job
        where = "left in place (could not be moved)"
    message = f"outbox entry {name} is not a result cronwrap can deliver ({reason}); {where}"
    emit(Event.OUTBOX_QUARANTINED, file=path, error=str(reason), moved_to=target)
    os.write(2, f"cronwrap: {message}\n".encode(errors="replace"))
