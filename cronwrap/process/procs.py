"""Processes, in one place: who a process is, the job's tree, signals, ending a tree, spawning
and reaping. Nothing else in cronwrap reads the process table or signals a PID.

Identity. A PID alone can be reused, so cronwrap keeps PID + start time (``ProcessId``), and
looks a recorded PID up only where it means something: the same boot and the same PID
namespace (``Runner``). A process is signalled only if it is still the one that was seen: its
start time is checked through a pidfd where the OS has them, so a PID recycled between the
check and the kill is never hit.

The process table has two implementations of one interface: ``ProcTable`` reads Linux's /proc;
``PsutilTable`` is the portable one (macOS, the BSDs), importing psutil on first use (why not
psutil on Linux too: see ``table()``). Start times are clock ticks since boot on Linux (so a
boot ID goes with them) and microseconds since the epoch elsewhere; each is compared only with
start times taken on the same host by the same implementation. A zombie (state Z or X) has
ended and holds nothing, whoever fails to reap it: it is never alive, but its children are.

The job's tree (``Tree``) is found afresh at every look: every live descendant of the wrapper
(which, as a child subreaper, becomes the parent of every orphan of the job: ``Subreaper``),
and every live member of the job's process group or session and their descendants. Where the
OS has no subreaper, the job starts a session of its own, which still finds the orphans of an
exited shell.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
import time

import _signal  # type: ignore[import-not-found]  # signal's C half, untyped: set_handler
from cronwrap.record import TYPE_CHECKING, Record

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any
    from subprocess import Popen

LINUX = sys.platform.startswith("linux")
POLL = 0.05  # seconds between looks while a tree is being ended by a blocking caller
_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37
_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class ProcessId(Record):
    """A process by PID and start time: it stays identified after its PID is reused. A
    start_time of 0 means unknown (the PID alone is then all there is to check)."""

    pid: int
    start_time: int


class Proc(Record):
    """One row of the process table. live: False for a zombie."""

    pid: int
    ppid: int
    pgid: int
    sid: int
    start: int
    live: bool


# ---- the process table ---------------------------------------------------------------------


class ProcTable:
    """The process table read from Linux's /proc."""

    def read(self, pid: int) -> Proc | None:
        try:
            fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            data = os.read(fd, 4096)
        except OSError:
            return None
        finally:
            os.close(fd)
        # The command name (field 2) is in parentheses and may itself contain ") ".
        fields = data[data.rfind(b")") + 2:].split()
        if len(fields) < 20:
            return None
        return Proc(pid, int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]),
                    fields[0] not in (b"Z", b"X"))

    def all(self) -> list[Proc]:
        try:
            names = os.listdir("/proc")
        except OSError:
            return []
        return [proc for name in names if name.isdigit() and (proc := self.read(int(name)))]

    def usage(self, pid: int) -> tuple[int, float] | None:
        """A live process's resident memory (bytes) and CPU time (seconds: its own user and
        system time, and that of the children it has reaped); None when it is gone."""
        try:
            with open(f"/proc/{self._proc_path_pid(pid)}/stat", "rb") as f:
                data = f.read(4096)
        except (OSError, ValueError):
            return None
        fields = data[data.rfind(b")") + 2:].split()
        if len(fields) < 22:
            return None
        ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime
        return int(fields[21]) * _PAGE_SIZE, ticks / _CLOCK_TICKS

    def _proc_path_pid(self, pid: int) -> int:
        return pid

    def boot_id(self) -> str:
        """This boot of this machine (a new value at every boot); "" when the kernel hides it."""
        try:
            with open("/proc/sys/kernel/random/boot_id") as f:
                return f.read().strip()
        except OSError:
            return ""

    def pid_namespace(self) -> int:
        """The inode of this process's PID namespace: two containers sharing a host name have
        different ones, and a PID means something only inside its own namespace. 0: unknown."""
        try:
            return os.stat("/proc/self/ns/pid").st_ino
        except OSError:
            return 0

    def same_start(self, recorded: int, actual: int) -> bool:
        return recorded == actual


class ForeignProcTable(ProcTable):
    """A /proc mounted for another PID namespace than this process's: a container started
    with ``unshare --pid --fork`` but no ``--mount-proc`` sees the host's /proc, where its own
    PIDs are other numbers (its PID 1 is the host's PID 4711, and the host's PID 1 is init).
    Read as it is, the job's tree would be the host's processes. So only the processes of this
    namespace are seen, and their numbers translated to it through the ``NSpid`` line of
    /proc/PID/status (Linux 4.1); a parent, group or session outside it reads as 0.
    Slower than ProcTable (one more file per process), and used only in such a container."""

    def __init__(self) -> None:
        self._namespace = os.stat("/proc/self/ns/pid").st_ino
        self._proc_pid: dict[int, int] = {}  # this namespace's PID -> /proc's, at the last look

    def read(self, pid: int) -> Proc | None:
        if pid not in self._proc_pid:
            self.all()
        outer = self._proc_pid.get(pid)
        if outer is None or self._own_pid(outer) != pid:
            return None
        row = ProcTable.read(self, outer)
        return None if row is None else self._translate(row)

    def all(self) -> list[Proc]:
        try:
            names = os.listdir("/proc")
        except OSError:
            return []
        rows = []
        own: dict[int, int] = {}
        for name in names:
            if name.isdigit() and (pid := self._own_pid(int(name))) is not None:
                row = ProcTable.read(self, int(name))
                if row is not None:
                    own[row.pid] = pid
                    rows.append(row)
        self._proc_pid = {pid: outer for outer, pid in own.items()}
        return [self._translate(row, own) for row in rows]

    def _proc_path_pid(self, pid: int) -> int:
        outer = self._proc_pid.get(pid)
        if outer is None:
            raise ValueError(f"PID {pid} is not in this namespace")
        return outer

    def _translate(self, row: Proc, own: dict[int, int] | None = None) -> Proc:
        if own is None:
            own = {outer: pid for pid, outer in self._proc_pid.items()}
        return Proc(own.get(row.pid, 0), own.get(row.ppid, 0), own.get(row.pgid, 0),
                    own.get(row.sid, 0), row.start, row.live)

    def _own_pid(self, outer: int) -> int | None:
        """The PID in this namespace of /proc's process ``outer``; None when it is not in it."""
        try:
            if os.stat(f"/proc/{outer}/ns/pid").st_ino != self._namespace:
                return None
            with open(f"/proc/{outer}/status", "rb") as f:
                line = next((line for line in f if line.startswith(b"NSpid:")), b"")
        except OSError:
            return None
        fields = line.split()
        return int(fields[-1]) if len(fields) > 1 else None


def proc_is_foreign() -> bool:
    """/proc shows another PID namespace than this process's own (see ForeignProcTable)."""
    try:
        return int(os.readlink("/proc/self")) != os.getpid()
    except (OSError, ValueError):
        return False


class PsutilTable:
    """The process table through psutil, where there is no /proc (macOS, the BSDs).

    Start times are wall-clock times, which no later boot repeats, so the boot needs no ID of
    its own; there is one PID space per host (no PID namespaces). FreeBSD recomputes a start
    time from the boot time, which moves when the clock is stepped: start times within
    START_SLACK are the same process (a PID reused within a second of its first owner's start
    then counts as alive, the safe side).
    """

    BOOT_ID = "wallclock"
    PID_NAMESPACE = 1
    START_SLACK = 1_000_000  # microseconds

    def __init__(self) -> None:
        import psutil

        self._psutil = psutil
        self._gone = (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)

    def read(self, pid: int) -> Proc | None:
        psutil = self._psutil
        try:
            process = psutil.Process(pid)
            with process.oneshot():
                return self._row(pid, process.ppid(), process.status(), process.create_time())
        except psutil.ZombieProcess:
            return Proc(pid, 0, 0, 0, 0, False)
        except psutil.Error:
            return None

    def all(self) -> list[Proc]:
        rows = []
        for process in self._psutil.process_iter(["ppid", "status", "create_time"]):
            info = process.info  # None where access was denied
            if info["ppid"] is not None and info["create_time"] is not None:
                rows.append(self._row(process.pid, info["ppid"], info["status"],
                                      info["create_time"]))
        return rows

    def usage(self, pid: int) -> tuple[int, float] | None:
        """As ProcTable.usage."""
        psutil = self._psutil
        try:
            process = psutil.Process(pid)
            with process.oneshot():
                times = process.cpu_times()
                return process.memory_info().rss, (times.user + times.system
                                                   + times.children_user + times.children_system)
        except psutil.Error:
            return None

    def _row(self, pid: int, ppid: int, status: str, created: float) -> Proc:
        return Proc(pid, ppid, _quietly(os.getpgid, pid), _quietly(os.getsid, pid),
                    round(created * 1_000_000), status not in self._gone)

    def boot_id(self) -> str:
        return self.BOOT_ID

    def pid_namespace(self) -> int:
        return self.PID_NAMESPACE

    def same_start(self, recorded: int, actual: int) -> bool:
        return abs(recorded - actual) <= self.START_SLACK


def _quietly(call: Callable[[int], int], pid: int) -> int:
    try:
        return call(pid)
    except OSError:
        return 0


_TABLE: ProcTable | PsutilTable | None = None


def table() -> ProcTable | PsutilTable:
    """This OS's process table.

    Linux keeps /proc rather than psutil, which reads the same files: measured here (2 cores,
    Python 3.11, psutil 7.2, 60 interleaved firings), importing psutil on every firing took
    ``cronwrap run -n x --force -- true`` from 58.9 to 68.5 ms median, 1.50x to 1.74x the
    stdlib floor wrapper (39.4 ms) where the budget (ARCHITECTURE.md §9) is 1.5x. So psutil is the portable
    implementation, and is not imported on Linux.
    """
    global _TABLE
    if _TABLE is None:
        if not LINUX:
            _TABLE = PsutilTable()
        else:
            _TABLE = ForeignProcTable() if proc_is_foreign() else ProcTable()
    return _TABLE


# ---- identity ------------------------------------------------------------------------------


def start_time(pid: int) -> int | None:
    """The start time of ``pid`` while it is alive (not a zombie), else None."""
    proc = table().read(pid)
    return proc.start if proc is not None and proc.live else None


def identify(pid: int) -> ProcessId:
    """``pid`` with its start time, even if it has just ended (an unreaped child); 0 when
    it cannot be read."""
    proc = table().read(pid)
    return ProcessId(pid, proc.start if proc is not None else 0)


def is_alive(pid: int | None, started: int | None) -> bool:
    """True when ``pid`` is a live process that started at ``started`` (not a reused PID)."""
    if not pid or pid <= 0:
        return False
    actual = start_time(pid)
    return actual is not None and (started is None or table().same_start(started, actual))


def self_identity() -> tuple[int, int]:
    pid = os.getpid()
    return pid, start_time(pid) or 0


def boot_id() -> str:
    return table().boot_id()


def pid_namespace() -> int:
    return table().pid_namespace()


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


# ---- signals -------------------------------------------------------------------------------


def tree_usage(members: Iterable[Proc]) -> tuple[int, float]:
    """What the live ``members`` of a tree hold now: resident memory (bytes, summed over them:
    a page two of them share counts twice) and CPU time (seconds, with what each has reaped
    of its own children). The keeper adds what it reaped itself (getrusage)."""
    rss, cpu = 0, 0.0
    procs = table()
    for proc in members:
        found = procs.usage(proc.pid)
        if found is not None:
            rss, cpu = rss + found[0], cpu + found[1]
    return rss, cpu


def first_signals(signum: int) -> tuple[int, ...]:
    """What ending starts with: ``signum``, then CONT, since a stopped process cannot act on
    the first signal (GNU timeout sends CONT after it as well)."""
    return (signum,) if signum in (signal.SIGKILL, signal.SIGCONT) else (signum, signal.SIGCONT)


def send(process: ProcessId | Proc, signum: int) -> bool:
    """Signal ``process`` only if it is still the one that was seen (same start time).
    False when it was not signalled: gone, or another process by now."""
    pid = process.pid
    start = process.start if isinstance(process, Proc) else process.start_time
    pidfd = open_pidfd(pid)
    if pidfd is None:
        # No pidfds here: a PID reused between the check and the kill is a far smaller risk
        # than leaving a process of the job running.
        return _still(pid, start) and _ignore_gone(os.kill, pid, signum)
    try:
        return _still(pid, start) and _ignore_gone(signal.pidfd_send_signal, pidfd, signum)
    finally:
        os.close(pidfd)


def signal_group(pgid: int, signum: int) -> bool:
    """Signal a process group. Only for a group whose leader the caller has not reaped yet,
    so that its ID cannot have been reused."""
    return pgid > 1 and _ignore_gone(os.killpg, pgid, signum)  # 0 would be our own group


def _still(pid: int, start: int) -> bool:
    proc = table().read(pid) if pid > 0 else None  # never 0 or -1: those signal groups
    return proc is not None and proc.live and (not start or table().same_start(start, proc.start))


def _ignore_gone(send: Callable[[int, int], None], target: int, signum: int) -> bool:
    # ESRCH: the process ended between the look and the kill. EPERM: it exec'd a set-uid
    # program we may not signal; nothing more can be done about it from here.
    try:
        send(target, signum)
    except (ProcessLookupError, PermissionError):
        return False
    return True


# ---- the tree of a job ---------------------------------------------------------------------


class Tree:
    """The live processes of one job (or hook), found afresh at every look.

    leader: the job's main process, which started a process group of its own, or a session
    (``spawn_job``); the members of its group or session and their descendants belong to the
    tree. Neither ID is reused while a member lives (POSIX); one that another process now
    leads (same PID, other start time) is not the job's. root: a process whose descendants
    all belong to the tree (the wrapper, their subreaper); with_root: the root itself is a
    member too (a holder wrapper that ``--overlap replace`` ends with its job). group: the
    caller has not reaped the leader, so the group ID is still the leader's and a signal can
    go to the whole group.
    """

    def __init__(self, leader: ProcessId, root: ProcessId | None = None, group: bool = False,
                 with_root: bool = False) -> None:
        self.leader, self.root = leader, root
        self.group, self.with_root = group, with_root

    def members(self) -> list[Proc]:
        procs = table().all()
        by_pid = {proc.pid: proc for proc in procs}
        children: dict[int, list[Proc]] = {}
        for proc in procs:
            children.setdefault(proc.ppid, []).append(proc)
        pending = []
        root = self.root
        if root is not None and root.pid > 0 and _is(by_pid.get(root.pid), root):
            pending = list(children.get(root.pid, ()))
            if self.with_root and root.pid in by_pid:
                pending.append(by_pid[root.pid])
        if self.leader.pid > 0 and _is(by_pid.get(self.leader.pid), self.leader):
            pending += [proc for proc in procs if self.leader.pid in (proc.sid, proc.pgid)]
        found: dict[int, Proc] = {}
        while pending:
            proc = pending.pop()
            if proc.pid not in found and proc.pid != os.getpid():
                found[proc.pid] = proc
                pending.extend(children.get(proc.pid, ()))
        return [proc for proc in found.values() if proc.live]

    def signal(self, *signums: int, also: Iterable[Proc] = ()) -> list[Proc]:
        """Each signal once to every member, and to each process of ``also`` (processes seen
        in the tree before) that is still the one that was seen; returns them all.

        The look comes first and the group signal second, so that a process forked in between
        still gets it through its group; members of the group are skipped one by one because
        a job that traps TERM must see it once, not twice.
        """
        members = self.members()
        found = {proc.pid for proc in members}
        members += [now for proc in also if proc.pid not in found
                    and (now := _current(proc)) is not None]
        group = self.leader.pid if self.group else None
        for signum in signums:
            if group is not None:
                signal_group(group, signum)
            for proc in members:
                if proc.pgid != group:
                    send(proc, signum)
        return members

    def end(self, signum: int, grace: float, give_up: float | None = None,
            monotonic: Callable[[], float] = time.monotonic) -> bool:
        """End the tree as a timeout would: ``signum`` (and CONT) to every member, then KILL
        after ``grace`` seconds to whatever is left, again at every look until nothing is.
        Every process seen in the tree stays in it: one that left the session and lost its
        parent (re-parented to init, out of reach of a look) still gets its KILL. Gives up
        ``give_up`` seconds (default: ``grace``) after the first KILL, for a process in
        uninterruptible sleep. True when nothing is left."""
        seen: dict[int, Proc] = {}

        def look(*signums: int) -> list[Proc]:
            found = self.signal(*signums, also=list(seen.values()))
            seen.update((proc.pid, proc) for proc in found)
            return found

        look(*first_signals(signum))
        deadline = monotonic() + grace
        while look():
            if monotonic() >= deadline:
                break
            time.sleep(POLL)
        else:
            return True
        deadline = monotonic() + (grace if give_up is None else give_up)
        while look(signal.SIGKILL):
            if monotonic() >= deadline:
                return False
            time.sleep(POLL)
        return True


def _current(seen: Proc) -> Proc | None:
    """The process ``seen`` as it is now (its group or session may have changed), while it is
    alive and still the same process."""
    proc = table().read(seen.pid)
    if proc is None or not proc.live or not table().same_start(seen.start, proc.start):
        return None
    return proc


def _is(proc: Proc | None, seen: ProcessId) -> bool:
    """``proc`` (the process now at ``seen.pid``, if any) is not another process than ``seen``;
    None, or a zombie, counts (a session outlives its leader)."""
    return proc is None or not proc.live or not seen.start_time \
        or table().same_start(seen.start_time, proc.start)


# ---- spawning and reaping ------------------------------------------------------------------


def spawn(argv: list[str], env: dict[str, str], *, stdout: int, stderr: int,
          stdin: int | None = None, cwd: str | None = None, pass_fds: tuple[int, ...] = ()
          ) -> Popen[bytes]:
    """Start ``argv`` (no shell; PATH looked up in ``env``) in a session of its own, with no
    descriptor but 0-2 and ``pass_fds``, and default signal dispositions. A script without a
    "#!" line runs with /bin/sh, as execvp(3) and GNU timeout do."""
    import subprocess

    def start(args: list[str]) -> Popen[bytes]:
        return subprocess.Popen(args, stdin=stdin, stdout=stdout, stderr=stderr, env=env,
                                cwd=cwd, close_fds=True, pass_fds=pass_fds,
                                start_new_session=True, restore_signals=True)

    try:
        return start(argv)
    except OSError as exc:
        if exc.errno != errno.ENOEXEC:
            raise
        script = find_executable(argv[0], env.get("PATH", os.defpath))
        if script is None:
            raise
        return start(["/bin/sh", script, *argv[1:]])


# os.posix_spawn on Linux; elsewhere (and with a libc whose posix_spawn cannot setsid: glibc
# before 2.26) spawn_job uses subprocess, keeping its Popen objects.
POSIX_SPAWN = LINUX and hasattr(os, "posix_spawn")
_SPAWNED: list[object] = []


def spawn_job(argv: list[str], env: dict[str, str], *, stdout: int, stderr: int,
              cwd: str | None = None, pass_fds: tuple[int, ...] = (),
              session: bool = True) -> int:
    """``spawn`` for the keeper, which reaps its children itself: the job's PID. Through
    ``os.posix_spawn``, not subprocess: a firing then imports no subprocess (2.0 ms, issue 24:
    bench/results.md), and no child closes descriptors one by one: the keeper holds only
    0-2, ``pass_fds`` and close-on-exec ones (PEP 446, ``keep_only_fds``), and the job gets
    0-2 and ``pass_fds``. What ``spawn`` does, the same way: SIGPIPE and SIGXFSZ back to
    their defaults, ``argv[0]`` looked up in ``env``'s PATH as execvp(3) does (a file found
    but not executable is a PermissionError unless a later directory has one), a script
    without "#!" run by /bin/sh. ``cwd``: the calling process changes to it first (the
    keeper's own directory is nobody's concern), as the child would.

    ``session``: the job starts a session of its own, as ``spawn`` does; otherwise a process
    group of its own. A caller with a subreaper asks for the group: where the kernel's
    scheduler autogroups are on (most distributions' default), each session is a scheduling
    group of its own, and a new one waits its turn behind the host's busy ones. Measured
    beside 4 and 8 CPU-bound processes of another session, a firing (keeper and job each in a
    session) took 65 and 76 ms against 55 and 69 ms with process groups (0.85x and 0.92x,
    median of 60 pairs; bench/results.md); on an idle host, no difference (1.00x)."""
    if POSIX_SPAWN:
        try:
            return _posix_spawn(argv, env, stdout, stderr, cwd, pass_fds, session)
        except NotImplementedError:  # no POSIX_SPAWN_SETSID in this libc
            pass
    proc = spawn(argv, env, stdout=stdout, stderr=stderr, cwd=cwd, pass_fds=pass_fds)
    _SPAWNED.append(proc)  # kept, or its __del__ would waitpid() a PID the keeper reaped
    return proc.pid


def _posix_spawn(argv: list[str], env: dict[str, str], stdout: int, stderr: int,
                 cwd: str | None, pass_fds: tuple[int, ...], session: bool) -> int:
    if cwd is not None:
        os.chdir(cwd)
    for fd in pass_fds:
        os.set_inheritable(fd, True)
    actions = [(os.POSIX_SPAWN_DUP2, stdout, 1), (os.POSIX_SPAWN_DUP2, stderr, 2)]
    # (glibc's posix_spawn leaves its two internal signals, 32 and 33, below SIGRTMIN, ignored
    # in the job, as subprocess's own posix_spawn does; no glibc program can use them.)
    defaults = (signal.SIGPIPE, signal.SIGXFSZ)
    apart: dict[str, Any] = {"setsid": True} if session else {"setpgroup": 0}
    name = argv[0]
    candidates = [name] if "/" in name else [
        os.path.join(directory or ".", name) for directory in exec_path(env)]
    refused: OSError | None = None
    for candidate in candidates:
        if len(candidates) > 1 and not os.path.exists(candidate):
            continue
        try:
            return os.posix_spawn(candidate, argv, env, file_actions=actions,
                                  setsigdef=defaults, **apart)
        except OSError as exc:
            if exc.errno == errno.ENOEXEC:
                return os.posix_spawn("/bin/sh", ["/bin/sh", candidate, *argv[1:]], env,
                                      file_actions=actions, setsigdef=defaults, **apart)
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                continue
            if exc.errno != errno.EACCES or len(candidates) == 1:
                raise
            refused = refused or exc  # execvp(3): try the next directory, then report this
    if refused is not None:
        raise refused
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), name)


def controlling_terminal() -> bool:
    """Whether this process has a controlling terminal: opening /dev/tty fails with ENXIO when
    it has none (cron, systemd, a container without -t). True when that cannot be told."""
    try:
        os.close(os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK | os.O_CLOEXEC))
    except OSError as exc:
        return exc.errno != errno.ENXIO
    return True


def exec_path(env: dict[str, str]) -> list[str]:
    """The directories execvp(3) searches, from ``env``'s PATH: ``os.get_exec_path`` without
    its ``import warnings`` (0.5 ms of the keeper's, between its fork and the job's spawn)."""
    path = env.get("PATH")
    return (os.defpath if path is None else path).split(os.pathsep)


def find_executable(name: str, path: str) -> str | None:
    if "/" in name:
        return name
    for directory in path.split(os.pathsep):
        candidate = os.path.join(directory or ".", name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def pipe(nonblock: bool = False) -> tuple[int, int]:
    """A pipe whose ends no child inherits unasked (os.pipe2 where the OS has it: not macOS)."""
    if hasattr(os, "pipe2"):
        return os.pipe2(os.O_CLOEXEC | (os.O_NONBLOCK if nonblock else 0))
    ends = os.pipe()  # non-inheritable already (PEP 446)
    for end in ends:
        os.set_blocking(end, not nonblock)
    return ends


def fork(run: Callable[[], int]) -> int:
    """Call ``run`` in a child process, which exits with what it returns (125 if it raises:
    it never returns into its parent's frames, nor flushes its parent's buffers). The child's
    PID.

    What the child imports is imported here first: a module that another thread of this
    process (a ping's) is importing at the fork stays locked in the child for ever, since a
    fork copies the module's import lock but not the thread that would release it (the
    lease's heartbeat runs by then too). The keeper imports _ctypes (prctl, for
    ``Subreaper``), and subprocess only where it spawns the job without posix_spawn
    (``spawn_job``)."""
    import _ctypes  # noqa: F401  (see above)

    if not POSIX_SPAWN:
        import subprocess  # noqa: F401

    pid = os.fork()
    if pid == 0:
        status = 125
        try:
            status = run()
        except BaseException as exc:  # one line on the inherited stderr, never a traceback
            try:
                os.write(2, f"cronwrap: {type(exc).__name__}: {exc}\n".encode(errors="replace"))
            except OSError:
                pass
        finally:
            os._exit(status)
    return pid


def set_handler(signum: int, handler: Callable[[int, object], None] | int) -> object:
    """``signal.signal`` without its enum conversions of the number and of the previous
    handler (8 µs a call against 0.7 µs: a firing sets ~80 handlers between the wrapper and
    its keeper). The previous handler, as ``handler_of`` gives it."""
    return _signal.signal(signum, handler)


def handler_of(signum: int) -> object:
    """``signal.getsignal`` as a number (SIG_DFL 0, SIG_IGN 1), a function, or None."""
    return _signal.getsignal(signum)


def keep_only_fds(*keep: int) -> None:
    """Close every descriptor of this process but ``keep``: a forked helper must not hold the
    wrapper's ledger connection, lock files or output pipes open."""
    low = 0
    for fd in sorted(set(keep)):
        if low < fd:  # an empty range is not empty to os.closerange(0, 0): it closes them all
            os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))


def name_process(name: str) -> None:
    """What ``ps -e`` and ``top`` show for this process (Linux's /proc/self/comm, what
    PR_SET_NAME sets: 15 bytes; one write, no prctl through ctypes)."""
    if LINUX:
        try:
            fd = os.open("/proc/self/comm", os.O_WRONLY | os.O_CLOEXEC)
        except OSError:
            return
        try:
            os.write(fd, name.encode()[:15])
        except OSError:
            pass
        finally:
            os.close(fd)


def open_pidfd(pid: int) -> int | None:
    """A pidfd for ``pid`` (readable once it has exited); None where the OS has none (not
    Linux, a kernel before 5.3, a seccomp filter) or the process is gone."""
    try:
        return os.pidfd_open(pid)
    except (OSError, AttributeError):
        return None


def reap_children(on_reaped: Callable[[int, int], None]) -> bool:
    """Reap every child that has ended, calling ``on_reaped(pid, wait status)`` for each;
    True while some child of this process is still alive."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True
        on_reaped(pid, status)


def reap(pid: int, timeout: float | None = None) -> bool:
    """Wait for the child ``pid`` to end and reap it (at most ``timeout`` seconds); True once
    it is reaped, or was already."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        try:
            done, _ = os.waitpid(pid, 0 if deadline is None else os.WNOHANG)
        except ChildProcessError:
            return True
        except InterruptedError:
            continue
        if done:
            return True
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(POLL / 5)


class Subreaper:
    """While active, orphans of the job re-parent to this process instead of PID 1 (Linux's
    PR_SET_CHILD_SUBREAPER); ``active`` says whether the OS made it so (not on macOS or the
    BSDs, where the job's session is what finds its orphans).

    The previous setting is restored afterwards, so that a long-lived caller (a test run, a
    process that supervises several jobs one after the other) does not collect the orphans
    of unrelated children between runs. ``fresh``: the caller is a child just forked (the
    keeper), whose setting is off (fork(2) does not pass it on): it is not read.
    """

    def __init__(self, fresh: bool = False) -> None:
        self.active = False
        self._was_subreaper = False
        self._fresh = fresh

    def __enter__(self) -> Subreaper:
        if not LINUX:
            return self
        self._was_subreaper = not self._fresh and _child_subreaper()
        if not self._was_subreaper:
            _set_child_subreaper(True)
        self.active = True
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.active and not self._was_subreaper:
            _set_child_subreaper(False)


_LIBC: list[Any] = []  # libc's prctl and C's int, made on the first prctl


def _libc() -> list[Any]:
    """prctl(2) and ``c_int`` through ``_ctypes``, the C half of ctypes: ctypes' own module
    (with struct and its type classes) costs a firing's start ~1.5 ms more (measured: a
    process that imports it and calls prctl once took 2.4 ms more than ``python -c pass``;
    this, 0.9 ms). What ctypes.CDLL(None, use_errno=True).prctl and ctypes.c_int are."""
    if not _LIBC:
        import _ctypes

        class Library:  # what CFuncPtr((name, library)) reads of a library: its handle
            _handle = _ctypes.dlopen(None, 0)  # type: ignore[arg-type]  # this process's

        class CInt(_ctypes._SimpleCData):  # type: ignore[type-arg]
            _type_ = "i"

        class Function(_ctypes.CFuncPtr):
            _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
            _restype_ = CInt

        _LIBC.extend((Function(("prctl", Library())), CInt))  # type: ignore[arg-type]
    return _LIBC


def _prctl(option: int, arg: object) -> None:
    import _ctypes

    prctl, _ = _libc()
    if prctl(option, arg, 0, 0, 0) != 0:
        code = _ctypes.get_errno()
        raise OSError(code, f"prctl({option}): {os.strerror(code)}")


def _child_subreaper() -> bool:
    import _ctypes

    flag = _libc()[1](0)
    _prctl(_PR_GET_CHILD_SUBREAPER, _ctypes.byref(flag))
    return bool(flag.value)


def _set_child_subreaper(on: bool) -> None:
    """Through ``_ctypes.call_function``, which makes no class: the three that ``_libc`` makes
    (to read errno, and an int to point at) were 0.7 ms of the keeper's between its fork and
    the job's spawn, against 0.14 (measured in a forked child). A failure is made again
    through ``_prctl``, for its errno."""
    import _ctypes

    if not _PRCTL:
        _PRCTL.append(_ctypes.dlsym(_ctypes.dlopen(None, 0), "prctl"))  # type: ignore[arg-type]
    if _ctypes.call_function(_PRCTL[0], (_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)) != 0:
        _prctl(_PR_SET_CHILD_SUBREAPER, int(on))


_PRCTL: list[int] = []  # prctl's address in this process
