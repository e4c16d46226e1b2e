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


def _spawned(tmp_path, argv, env, pass_fds=(), keep=(), session=True):
    """Run ``procs.spawn_job`` in a child, as the keeper does (it changes the caller's
    directory and descriptors), holding 0-2, ``pass_fds`` and ``keep`` only: the job's exit
    status and what it wrote, or the error."""
    out = tmp_path / "out"
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC)
            procs.keep_only_fds(0, 1, 2, write_end, fd, *pass_fds, *keep)
            try:
                job = procs.spawn_job(argv, env, stdout=fd, stderr=fd, pass_fds=pass_fds,
                                      session=session)
            except OSError as exc:
                os.write(write_end, f"{type(exc).__name__}".encode())
                os._exit(0)
            os.write(write_end, str(os.waitstatus_to_exitcode(os.waitpid(job, 0)[1])).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    with os.fdopen(read_end) as f:
        result = f.read()
    return result, out.read_text() if out.exists() else ""


def test_spawning_the_job_searches_the_jobs_path_as_execvp_does(tmp_path):
    """A file found but not executable is passed over for a later directory's; a script
    without "#!" runs with /bin/sh; not found and not executable stay apart (127, 126)."""
    refused, found = tmp_path / "a", tmp_path / "b"
    refused.mkdir()
    found.mkdir()
    (refused / "job").write_text("echo refused\n")  # not executable
    (found / "job").write_text("echo found \"$1\" $$\n")
    (found / "job").chmod(0o755)
    env = {"PATH": f"{refused}:{found}:/usr/bin:/bin"}
    status, out = _spawned(tmp_path, ["job", "one"], env)
    assert status == "0" and out.startswith("found one ")
    assert _spawned(tmp_path, ["nosuchjob-xyz"], env)[0] == "FileNotFoundError"
    assert _spawned(tmp_path, [str(refused / "job")], env)[0] == "PermissionError"
    assert _spawned(tmp_path, ["job"], {"PATH": str(refused)})[0] == "PermissionError"


def test_the_job_gets_its_own_session_default_sigpipe_and_only_its_descriptors(tmp_path):
    """Python ignores SIGPIPE in the caller; the job gets it back at its default."""
    kept = os.open(tmp_path, os.O_RDONLY)  # non-inheritable, as every descriptor Python opens
    other = os.open(tmp_path, os.O_RDONLY)
    env = {"PATH": "/usr/bin:/bin"}
    try:
        listed = _spawned(tmp_path, ["ls", "/proc/self/fd"], env, pass_fds=(kept,), keep=(other,))
        ignored = _spawned(tmp_path, ["grep", "SigIgn", "/proc/self/status"], env)
        stat = _spawned(tmp_path, ["cat", "/proc/self/stat"], env)
    finally:
        os.close(kept)
        os.close(other)
    assert listed[0] == ignored[0] == stat[0] == "0"
    assert sorted(map(int, listed[1].split())) == [0, 1, 2, 3, kept]  # 3: ls reading the list
    assert not int(ignored[1].split()[1], 16) & (1 << (signal.SIGPIPE - 1))
    fields = stat[1][stat[1].rindex(")") + 2:].split()
    assert fields[3] == stat[1].split()[0]  # the session's ID is its own PID


def test_a_job_spawned_without_a_session_leads_a_process_group_in_its_spawners(tmp_path):
    """What the keeper asks for where it is the subreaper: setsid is dear (procs.spawn_job)."""
    status, stat = _spawned(tmp_path, ["cat", "/proc/self/stat"], {"PATH": "/usr/bin:/bin"},
                            session=False)
    assert status == "0"
    pid, (group, session) = stat.split()[0], stat[stat.rindex(")") + 2:].split()[2:4]
    assert group == pid  # a group of its own: the keeper signals it whole
    assert session == str(os.getsid(0))  # the spawner's (_spawned forks this process)
