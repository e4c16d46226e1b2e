"""procs.py's pure parts, and what a forked helper keeps: the process table against real
processes is in tests/integration/test_supervise.py."""

from __future__ import annotations

import os
import signal

import pytest

from cronwrap.process import procs


@pytest.mark.parametrize(("first", "sent"), [
    (signal.SIGTERM, (signal.SIGTERM, signal.SIGCONT)),
    (signal.SIGINT, (signal.SIGINT, signal.SIGCONT)),
    (0, (0, signal.SIGCONT)),  # --signal 0 sends nothing, but a stopped job is still woken
    (signal.SIGKILL, (signal.SIGKILL,)),
    (signal.SIGCONT, (signal.SIGCONT,)),
])
def test_ending_starts_with_the_signal_then_cont(first, sent):
    assert procs.first_signals(first) == sent


def test_the_portable_table_takes_start_times_within_its_slack_as_one_process():
    table = procs.PsutilTable()
    start = 1_700_000_000_000_000
    assert table.same_start(start, start + procs.PsutilTable.START_SLACK)
    assert not table.same_start(start, start + procs.PsutilTable.START_SLACK + 1)
    linux = procs.ProcTable()
    assert linux.same_start(start, start) and not linux.same_start(start, start + 1)


def test_the_portable_table_names_one_boot_and_one_pid_space():
    """Wall-clock start times never repeat after a reboot, so the boot needs no ID: a constant
    one lets a holder's PID be checked (a Runner with "" could check nothing)."""
    table = procs.PsutilTable()
    assert table.boot_id() and table.pid_namespace()
    here = procs.Runner("h", table.boot_id(), table.pid_namespace())
    assert here.same_namespace(table.boot_id(), table.pid_namespace())


def test_keeping_only_some_descriptors_never_closes_them():
    """os.closerange(0, 0) closes every descriptor (Python 3.11): the keeper keeps 0-2."""
    pid = os.fork()
    if pid == 0:
        try:
            procs.keep_only_fds(0, 1, 2)
            os._exit(0 if all(os.fstat(fd) for fd in (0, 1, 2)) else 1)
        finally:
            os._exit(2)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def test_nothing_is_signalled_by_pid_0_or_a_group_0():
    """PID 0 is what a holder record says before its job started: kill(0) or killpg(0)
    would signal cronwrap's own process group."""
    assert procs.send(procs.ProcessId(0, 0), signal.SIGTERM) is False
    assert procs.signal_group(0, signal.SIGTERM) is False
    assert procs.Tree(procs.ProcessId(0, 0)).members() == []
