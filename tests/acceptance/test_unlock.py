"""``cronwrap unlock NAME`` and the job's local lock on this host: it says who holds it (the
wrapper's and the job's PIDs, alive or gone), never breaks a lock a live process holds, and
releases a PID lock whose holder is gone by removing cronwrap's holder record."""

from __future__ import annotations

import fcntl
import os
import signal
from pathlib import Path

import pytest

from tests.acceptance.conftest import alive, wait_for
from tests.acceptance.test_faults import events, kill_job, lock_busy
from tests.conftest import lock_holder

BOOT = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
PID_NS = os.stat("/proc/self/ns/pid").st_ino


def record_of(home: Path, lock: Path) -> Path:
    info = os.stat(lock)
    return home / "locks" / "holders" / f"{info.st_dev}-{info.st_ino}"


def holder(home: Path, job: str, lock: Path | None = None) -> list[int] | None:
    """WRAPPER_PID WRAPPER_START JOB_PID JOB_START once the job has started, else None."""
    try:
        found = lock_holder(home, job, lock)
    except (FileNotFoundError, ValueError):
        return None
    return found if found[2] else None


def unlock(cw, *args: str, env: dict[str, str] | None = None) -> list[str]:
    return cw("unlock", *args, env=env, check_rc=0).stdout.decode().splitlines()


@pytest.fixture
def waiting_job(script, tmp_path):
    """A job that runs until the test touches its stop file (at most a minute)."""
    stop = tmp_path / "stop"
    job = script("wait.sh", f"i=0\nwhile [ ! -e {stop} ] && [ $i -lt 600 ]; do\n"
                            "  sleep 0.1; i=$((i + 1))\ndone\n")
    yield job
    stop.touch()


def start(cw, home: Path, waiting_job: str, *args: str, lock: Path | None = None):
    wrapper = cw.popen("run", "-n", "j", *args, "--", waiting_job)
    found = wait_for(lambda: holder(home, "j", lock), what="the job to start")
    return wrapper, found[0], found[2]


def test_a_running_jobs_flock_is_reported_and_never_broken(cw, home, waiting_job, tmp_path):
    wrapper, wrapper_pid, job_pid = start(cw, home, waiting_job)
    lock = home / "locks" / "j.lock"
    lines = unlock(cw, "j")
    assert lines[-1] == (f"j: lock {lock} is held (flock) by wrapper pid {wrapper_pid} (alive), "
                         f"job pid {job_pid} (alive); left alone: a live process holds it"), lines
    assert lock_busy(lock) and alive(job_pid) and wrapper.poll() is None
    assert cw("run", "-n", "j", "--skip-exit-code", "9", "--", "true").returncode == 9
    (tmp_path / "stop").touch()
    assert wrapper.wait(60) == 0


def test_a_stale_pid_lock_is_released_and_the_next_firing_needs_no_takeover(cw, home,
                                                                              waiting_job):
    wrapper, wrapper_pid, job_pid = start(cw, home, waiting_job, "--lock", "pid")
    job_start = holder(home, "j")[3]
    lock = home / "locks" / "j.lock"
    record = record_of(home, lock)
    os.kill(wrapper_pid, signal.SIGKILL)
    wrapper.wait(30)
    kill_job(job_pid, job_start)  # unless the job's keeper ended it first
    wait_for(lambda: not alive(job_pid), what="the job to be gone")
    assert record.exists()
    lines = unlock(cw, "j")
    assert lines[-1] == (f"j: lock {lock} is free: its last holder (wrapper pid {wrapper_pid}, "
                         f"job pid {job_pid}) is gone; removed its holder record (for a PID "
                         "lock, that releases it)"), lines
    assert not record.exists() and lock.exists()
    assert cw("run", "-n", "j", "--lock", "pid", "--skip-exit-code", "9", "--", "true").returncode == 0
    assert "stale_lock" not in [e["event"] for e in events(home / "logs")]
    assert unlock(cw, "j")[-1] == f"j: lock {lock} is free"


def test_a_live_pid_lock_is_reported_and_left_alone(cw, home, waiting_job, tmp_path):
    wrapper, wrapper_pid, job_pid = start(cw, home, waiting_job, "--lock", "pid")
    lock = home / "locks" / "j.lock"
    lines = unlock(cw, "j")
    assert lines[-1] == (f"j: lock {lock} is held (PID lock) by wrapper pid {wrapper_pid} "
                         f"(alive), job pid {job_pid} (alive); left alone: its holder lives")
    assert record_of(home, lock).exists()
    assert cw("run", "-n", "j", "--lock", "pid", "--skip-exit-code", "9", "--", "true").returncode == 9
    (tmp_path / "stop").touch()
    assert wrapper.wait(60) == 0


def write_record(home: Path, job: str, line: str) -> Path:
    """A lock file and a holder record, as a wrapper of ``--lock pid`` leaves them."""
    locks = home / "locks"
    (locks / "holders").mkdir(parents=True, mode=0o700)
    home.chmod(0o700)
    locks.chmod(0o700)
    lock = locks / f"{job}.lock"
    lock.touch(0o600)
    record = record_of(home, lock)
    record.write_text(line)
    record.chmod(0o600)
    return record


def test_a_pid_lock_of_an_earlier_boot_is_released(cw, home):
    record = write_record(home, "b", f"{os.getpid()} 1 0 0 {'0' * 32} {PID_NS}\n")
    assert "its last holder (wrapper pid" in unlock(cw, "b")[-1] and not record.exists()


def test_a_holder_in_another_pid_namespace_is_left_alone(cw, home):
    record = write_record(home, "n", f"4242 1 4343 1 {BOOT} {PID_NS + 1}\n")
    assert unlock(cw, "n")[-1] == (
        f"n: lock {home / 'locks' / 'n.lock'} is held (PID lock) by wrapper pid 4242 (cannot be "
        "checked here: another PID namespace), job pid 4343 (cannot be checked here: another "
        "PID namespace); left alone: its holder lives")
    assert record.exists()


def test_a_free_lock_is_said_free(cw, home):
    cw("run", "-n", "f", "--lock", "pid", "--", "true", check_rc=0)  # a PID lock leaves no record
    assert unlock(cw, "f") == ["f: no running run holds a lease",
                               f"f: lock {home / 'locks' / 'f.lock'} is free"]


def test_a_flock_no_process_of_cronwrap_holds(cw, home):
    lock = home / "locks" / "o.lock"
    lock.parent.mkdir(parents=True, mode=0o700)
    fd = os.open(lock, os.O_RDONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # flock(1) on the file, say
        assert unlock(cw, "o")[-1] == (f"o: lock {lock} is held (flock) by a process cronwrap "
                                       "has no record of; left alone: a live process holds it")
        assert lock_busy(lock)
    finally:
        os.close(fd)


def test_a_job_without_a_lock_file(cw, home):
    assert unlock(cw, "never") == ["never: no running run holds a lease",
                                   f"never: no lock file {home / 'locks' / 'never.lock'} on this host"]
    assert not (home / "locks").exists()  # inspecting creates nothing


@pytest.mark.parametrize("how", ["--lock-file", "CRONWRAP_LOCK_FILE", "config"])
def test_the_jobs_own_lock_file(cw, home, waiting_job, tmp_path, how):
    lock = tmp_path / "my.lock"
    wrapper, wrapper_pid, job_pid = start(cw, home, waiting_job, "--lock-file", str(lock),
                                          lock=lock)
    assert unlock(cw, "j")[-1] == f"j: no lock file {home / 'locks' / 'j.lock'} on this host"
    args, env = [], None
    if how == "--lock-file":
        args = ["--lock-file", str(lock)]
    elif how == "CRONWRAP_LOCK_FILE":
        env = {how: str(lock)}
    else:
        config = tmp_path / "config.toml"
        config.write_text(f'[jobs.j]\nlock-file = "{lock}"\n')
        config.chmod(0o600)
        env = {"CRONWRAP_CONFIG": str(config)}
    line = unlock(cw, "j", *args, env=env)[-1]
    assert line.startswith(f"j: lock {lock} is held (flock) by wrapper pid {wrapper_pid} (alive)")
    (tmp_path / "stop").touch()
    assert wrapper.wait(60) == 0


def test_a_symlinked_lock_file_is_not_followed(cw, home, tmp_path):
    target = tmp_path / "target"
    target.write_text("keep")
    link = tmp_path / "link.lock"
    link.symlink_to(target)
    line = unlock(cw, "j", "--lock-file", str(link))[-1]
    assert line == f"j: lock not inspected: {link} is a symlink; cronwrap refuses to follow it"
    assert target.read_text() == "keep"


def test_a_bad_lock_file_changes_nothing(cw, home, waiting_job, tmp_path):
    wrapper, _, _ = start(cw, home, waiting_job)
    bad = cw("unlock", "j", "--lock-file", "")
    assert bad.returncode == 125 and bad.stdout == b"" and b"--lock-file" in bad.stderr
    (run,) = cw.json("history", "j", "--json")
    assert run["status"] == "running"  # its lease was not expired
    (tmp_path / "stop").touch()
    assert wrapper.wait(60) == 0
