"""Process identity: a PID alone can be reused, so cronwrap always keeps PID + start time, and
says which machine boot and which PID namespace the PID belongs to (the runner identity)."""

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


def boot_id() -> str:
    """This boot of this machine (a new value at every boot); "" when the kernel hides it."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


def pid_namespace() -> int:
    """The inode of this process's PID namespace: two containers sharing a host name have
    different ones, and a PID means something only inside its own namespace. 0: unknown."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


class Runner:
    """Where a PID can be checked: the host name, the boot and the PID namespace.

    Another runner's PID may be looked up here only when all three are the same and known;
    otherwise (another container with the same host name, a reboot) nothing can be concluded
    from this host's process table."""

    __slots__ = ("host", "boot_id", "pid_ns")

    def __init__(self, host: str, boot: str | None = None, pid_ns: int | None = None) -> None:
        self.host = host
        self.boot_id = boot_id() if boot is None else boot
        self.pid_ns = pid_namespace() if pid_ns is None else pid_ns

    def same_namespace(self, boot: str | None, pid_ns: int | None) -> bool:
        """A PID recorded with ``boot`` and ``pid_ns`` can be looked up in /proc here."""
        return bool(self.boot_id) and boot == self.boot_id and bool(self.pid_ns) \
            and pid_ns == self.pid_ns

    def can_check(self, host: str | None, boot: str | None, pid_ns: int | None) -> bool:
        """A process recorded by runner (host, boot, pid_ns) is one of this runner's."""
        return host == self.host and self.same_namespace(boot, pid_ns)
