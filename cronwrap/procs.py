"""Process identity: a PID alone can be reused, so cronwrap always keeps PID + start time."""

from __future__ import annotations

import os


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    fields = stat[stat.rfind(b")") + 2 :].split()
    if fields[0] in (b"Z", b"X"):
        return None  # a zombie has ended: it holds nothing, whoever fails to reap it
    return int(fields[19])


def is_alive(pid: int | None, started: int | None) -> bool:
    """True when ``pid`` is a live process that started at ``started`` (not a reused PID)."""
    if not pid or pid <= 0:
        return False
    actual = start_time(pid)
    return actual is not None and (started is None or actual == started)


def self_identity() -> tuple[int, int]:
    pid = os.getpid()
    return pid, start_time(pid) or 0
