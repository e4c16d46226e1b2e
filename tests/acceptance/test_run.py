"""``cronwrap run`` end to end: the installed executable against real scripts."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import stat
import time
from pathlib import Path

import pytest

from tests.acceptance.conftest import alive, same_minute, wait_for
from tests.conftest import until_exists


def history(cw, name):
    return cw.json("history", name, "--json")


def events(home):
    path = home / "logs" / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


# -- exec and exit status --------------------------------------------------------------------

def test_exit_status_passes_through_and_is_recorded(cw):
    proc = cw("run", "-n", "x", "--", "sh", "-c", "echo out; echo err >&2; exit 33")
    assert proc.returncode == 33
    assert proc.stdout == b"out\n" and proc.stderr == b"err\n"
    (run,) = history(cw, "x")
    assert (run["status"], run["exit_code"], run["attempt"], run["trigger"]) == ("failed", 33, 1, "schedule")
    assert "out" in run["error_tail"] and "err" in run["error_tail"]


def test_argv_is_preserved_without_a_shell(cw, tmp_path):
    out = tmp_path / "argv"
    proc = cw("run", "-n", "argv", "--", "python3", "-c",
              "import sys, json; open(sys.argv[1], 'w').write(json.dumps(sys.argv[2:]))",
              str(out), "a b", "$HOME", "*", "'q'", "")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text()) == ["a b", "$HOME", "*", "'q'", ""]


def test_command_words_after_options_need_no_double_dash(cw):
    assert cw("run", "-n", "t", "true").returncode == 0
    assert cw("run", "--name=f", "false").returncode == 1


def test_not_found_is_127_and_recorded(cw):
    proc = cw("run", "-n", "nf", "--", "/nonexistent/cmd")
    assert proc.returncode == 127
    assert b"not found" in proc.stderr
    (run,) = history(cw, "nf")
    assert (run["status"], run["exit_code"]) == ("failed", 127)


def test_not_executable_is_126(cw, tmp_path):
    plain = tmp_path / "plain.sh"
    plain.write_text("echo hi\n")
    assert cw("run", "-n", "ne", "--", str(plain)).returncode == 126


def test_death_by_signal_is_128_plus_n(cw):
    proc = cw("run", "-n", "sig", "--", "sh", "-c", "kill -USR1 $$")
    assert proc.returncode == 128 + signal.SIGUSR1
    (run,) = history(cw, "sig")
    assert (run["status"], run["signal"]) == ("killed", signal.SIGUSR1)


# -- timeouts --------------------------------------------------------------------------------

def test_timeout_is_124_and_recorded_as_timeout(cw):
    start = time.monotonic()
    proc = cw("run", "-n", "slow", "--timeout", "0.5", "--", "sleep", "30")
    assert proc.returncode == 124 and time.monotonic() - start < 25  # not the job's 30 s
    (run,) = history(cw, "slow")
    assert run["status"] == "timeout" and run["timed_out"] is True
    assert [e["event"] for e in events(cw.home)][-1] == "timeout"


def test_job_ignoring_term_gets_kill_and_137(cw, script):
    job = script("stubborn.sh", "trap '' TERM\nwhile :; do sleep 0.1; done\n")
    start = time.monotonic()
    proc = cw("run", "-n", "stubborn", "--timeout", "0.5", "--kill-after", "0.5", "--", job)
    assert proc.returncode == 137
    assert 1.0 <= time.monotonic() - start < 40  # the job never ends by itself: cw waits 60 s
    assert history(cw, "stubborn")[0]["status"] == "timeout"


def test_preserve_status_returns_the_jobs_own_status(cw, script):
    job = script("polite.sh", "trap 'exit 7' TERM\nsleep 30 & wait\n")
    assert cw("run", "-n", "p", "--timeout", "0.5", "--preserve-status", "--", job).returncode == 7


def test_custom_signal_is_sent_at_timeout(cw, script):
    job = script("hup.sh", "trap 'exit 9' HUP\nsleep 30 & wait\n")
    proc = cw("run", "-n", "h", "--timeout", "0.3", "-s", "HUP", "--preserve-status", "--", job)
    assert proc.returncode == 9


def test_setsid_grandchild_is_gone_after_a_timeout(cw, script, tmp_path):
    pidfile = tmp_path / "gc.pid"
    job = script("escape.sh", f"setsid sh -c 'echo $$ > {pidfile}; trap \"\" TERM; sleep 1000' &\nsleep 1000\n")
    proc = cw("run", "-n", "esc", "--timeout", "1", "--kill-after", "0.5", "--", job)
    assert proc.returncode in (124, 137)
    pid = int(pidfile.read_text())
    assert not alive(pid), "the setsid grandchild survived the timeout"


def test_grandchild_holding_the_output_pipe_does_not_delay_the_timeout(cw, script):
    job = script("holder.sh", "(trap '' TERM; exec sleep 30) &\nexec sleep 30\n")
    start = time.monotonic()
    proc = cw("run", "-n", "pipe", "--timeout", "0.5", "--kill-after", "0.5", "--", job)
    assert proc.returncode in (124, 137) and time.monotonic() - start < 25  # not the 30 s


def test_orphans_of_an_exited_shell_are_ended(cw, tmp_path):
    pidfile = tmp_path / "orphan.pid"
    proc = cw("run", "-n", "orph", "--", "sh", "-c", f"sleep 1000 & echo $! > {pidfile}; exit 0")
    assert proc.returncode == 0
    assert not alive(int(pidfile.read_text()))
    finish = [e for e in events(cw.home) if e["event"] == "finish"][-1]
    assert finish["orphans"] == 1


def test_leave_orphans_keeps_them(cw, tmp_path):
    pidfile = tmp_path / "orphan.pid"
    proc = cw("run", "-n", "keep", "--leave-orphans", "--", "sh", "-c",
              f"sleep 1000 >/dev/null 2>&1 & echo $! > {pidfile}; exit 0")
    assert proc.returncode == 0
    pid = int(pidfile.read_text())
    try:
        assert alive(pid)
    finally:
        os.kill(pid, signal.SIGKILL)


# -- signals ---------------------------------------------------------------------------------

@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1])
def test_signals_to_cronwrap_reach_a_job_that_traps_them(cw, script, tmp_path, sig):
    ready = tmp_path / "ready"
    name = signal.Signals(sig).name[3:]
    job = script("trap.sh", f"trap 'echo got {name}; exit 3' {name}\ntouch {ready}\n"
                 "while :; do sleep 0.05; done\n")
    proc = cw.popen("run", "-n", "trap", "--", job)
    wait_for(ready.exists, what="job start")
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 3 and f"got {name}".encode() in out


def test_forwarded_term_kills_an_untrapping_job_with_143(cw, script, tmp_path):
    ready = tmp_path / "ready"
    job = script("plain.sh", f"touch {ready}\nexec sleep 30\n")
    proc = cw.popen("run", "-n", "plain", "--", job)
    wait_for(ready.exists, what="job start")
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=10)
    assert proc.returncode == 143
    assert history(cw, "plain")[0]["status"] == "killed"


# -- overlap ---------------------------------------------------------------------------------

def test_two_concurrent_invocations_one_runs_one_skips(cw, script, tmp_path):
    same_minute()
    ready = tmp_path / "ready"
    job = script("long.sh", f"touch {ready}\nsleep 2\necho done\n")
    first = cw.popen("run", "-n", "long", "--", job)
    wait_for(ready.exists, what="first run")
    second = cw("run", "-n", "long", "--", job)
    assert second.returncode == 0 and second.stdout == b""
    assert first.wait(10) == 0
    skips = [e for e in events(cw.home) if e["event"] == "skip"]
    assert len(skips) == 1 and skips[0]["skip_reason"] in ("overlap", "duplicate")
    assert [r["status"] for r in history(cw, "long")] == ["succeeded"]


def test_skip_exit_code(cw, script, tmp_path):
    ready = tmp_path / "ready"
    job = script("long.sh", f"touch {ready}\nsleep 2\n")
    first = cw.popen("run", "-n", "long", "--", job)
    wait_for(ready.exists, what="first run")
    assert cw("run", "-n", "long", "--skip-exit-code", "75", "--", job).returncode == 75
    first.wait(10)


def test_a_run_of_another_slot_is_skipped_and_recorded(cw, script, tmp_path):
    """Different minutes are different slots: the overlap skip gets a row of its own."""
    ready, done = tmp_path / "ready", tmp_path / "done"
    # The first run lasts until the second has fired (a fixed sleep ended first under load).
    job = script("long.sh", f"touch {ready}\n{until_exists(done)}\n")
    first = cw.popen("run", "-n", "long", "--", job)
    wait_for(ready.exists, what="first run")
    try:
        # A forced run of the same job: the lock is busy, so it is recorded as an overlap skip.
        proc = cw("run", "-n", "long", "--lock", "none", "--force", "--", "true")
    finally:
        done.touch()
    assert proc.returncode == 0
    first.wait(10)
    assert [e["skip_reason"] for e in events(cw.home) if e["event"] == "skip"] == ["duplicate"]


def test_overlap_wait_runs_after_the_first(cw, script, tmp_path):
    ready = tmp_path / "ready"
    log = tmp_path / "order"
    job = script("w.sh", f"touch {ready}\necho start $1 >> {log}\nsleep 1\necho end $1 >> {log}\n")
    first = cw.popen("run", "-n", "w", "--force", "--", job, "a")
    wait_for(ready.exists, what="first run")
    second = cw("run", "-n", "w", "--overlap", "wait", "--wait-timeout", "20", "--force", "--", job, "b")
    assert first.wait(10) == 0 and second.returncode == 0
    assert log.read_text().split("\n")[:4] == ["start a", "end a", "start b", "end b"]


def test_overlap_wait_gives_up_after_wait_timeout(cw, script, tmp_path):
    ready, done = tmp_path / "ready", tmp_path / "done"
    job = script("w.sh", f"touch {ready}\n{until_exists(done)}\n")
    first = cw.popen("run", "-n", "w", "--", job)
    wait_for(ready.exists, what="first run")
    try:
        start = time.monotonic()
        proc = cw("run", "-n", "w", "--overlap", "wait", "--wait-timeout", "0.5",
                  "--skip-exit-code", "3", "--", job)
        took = time.monotonic() - start
    finally:
        done.touch()  # the first run lasts until the second has given up
    assert proc.returncode == 3 and took < 15  # a bound on a hang: a loaded start takes seconds
    first.wait(10)


def test_overlap_replace_ends_the_running_instance(cw, script, tmp_path):
    ready = tmp_path / "ready"
    job = script("r.sh", f"touch {ready}\nexec sleep 30\n")
    first = cw.popen("run", "-n", "r", "--", job)
    wait_for(ready.exists, what="first run")
    start = time.monotonic()
    second = cw("run", "-n", "r", "--overlap", "replace", "--force", "--", "echo", "replaced")
    assert second.returncode == 0 and second.stdout == b"replaced\n"
    assert first.wait(10) == 143 and time.monotonic() - start < 8


def test_overlap_allow_runs_concurrently(cw, script, tmp_path):
    ready = tmp_path / "ready"
    job = script("a.sh", f"touch {ready}\nsleep 2\n")
    first = cw.popen("run", "-n", "a", "--overlap", "allow", "--", job)
    wait_for(ready.exists, what="first run")
    second = cw("run", "-n", "a", "--overlap", "allow", "--force", "--", "echo", "also")
    # same minute: the same slot is still held by the first run, so even allow does not run it
    # twice; a different slot would run. --force never steals a live lease.
    assert second.returncode == 0
    first.wait(10)


def test_pid_lock_takes_over_a_stale_lock_and_logs_it(cw, home):
    locks = home / "locks"
    (locks / "holders").mkdir(parents=True, mode=0o700)
    home.chmod(0o700)
    locks.chmod(0o700)
    lock = locks / "pl.lock"
    lock.touch(0o600)
    info = lock.stat()
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    pid_ns = os.stat("/proc/self/ns/pid").st_ino
    record = locks / "holders" / f"{info.st_dev}-{info.st_ino}"
    record.write_text(f"999999 1 0 0 {boot} {pid_ns}\n")  # a dead holder of this very boot
    record.chmod(0o600)
    assert cw("run", "-n", "pl", "--lock", "pid", "--", "true").returncode == 0
    event = [e for e in events(home) if e["event"] == "stale_lock"][0]
    assert event["stale_pid"] == 999999


def test_pid_lock_blocks_while_the_holder_lives(cw, script, tmp_path):
    ready = tmp_path / "ready"
    job = script("p.sh", f"touch {ready}\nsleep 2\n")
    first = cw.popen("run", "-n", "p", "--lock", "pid", "--", job)
    wait_for(ready.exists, what="first run")
    assert cw("run", "-n", "p", "--lock", "pid", "--skip-exit-code", "4", "--", "true").returncode == 4
    assert first.wait(10) == 0


# -- slots -----------------------------------------------------------------------------------

def test_same_minute_runs_once_and_force_runs_again(cw):
    same_minute()
    assert cw("run", "-n", "once", "--", "true").returncode == 0
    assert cw("run", "-n", "once", "--", "true").returncode == 0
    assert len(history(cw, "once")) == 1
    assert cw("run", "-n", "once", "--force", "--", "true").returncode == 0
    (run,) = history(cw, "once")
    assert run["attempt"] == 2 and run["fence"] == 2


def test_sigkilled_wrapper_never_blocks_the_next_firing(cw, script, tmp_path):
    same_minute(15)
    ready, done, pid = tmp_path / "ready", tmp_path / "done", tmp_path / "pid"
    # It outlives the wrapper, until the test has fired again (a fixed sleep ended first).
    job = script("k.sh", f"trap '' TERM\necho $$ > {pid}\ntouch {ready}\n"
                 f"{until_exists(done)}\n")
    victim = cw.popen("run", "-n", "k", "--kill-after", "30", "--", job)
    wait_for(ready.exists, what="job start")
    victim.kill()
    victim.wait()
    try:
        # The job keeps the inherited flock until it exits, so nothing overlaps it ...
        assert cw("run", "-n", "k", "--skip-exit-code", "9", "--", "true").returncode == 9
    finally:
        done.touch()
    wait_for(lambda: not alive(int(pid.read_text())), what="the job's end")
    # ... and afterwards the dead wrapper's row is abandoned at once and taken over.
    assert cw("run", "-n", "k", "--", "true").returncode == 0
    (run,) = history(cw, "k")
    assert (run["status"], run["attempt"], run["fence"]) == ("succeeded", 2, 2)


# -- output ----------------------------------------------------------------------------------

def test_binary_and_invalid_utf8_pass_through_exactly(cw, tmp_path):
    data = bytes(range(256)) * 64 + b"\xff\xfe\xc3"
    src = tmp_path / "bin"
    src.write_bytes(data)
    proc = cw("run", "-n", "bin", "--", "cat", str(src))
    assert proc.stdout == data
    log = cw("logs", "bin", "--last")
    assert log.stdout == data


def test_one_gib_of_output_passes_through_byte_exact_with_bounded_capture(cw, home):
    gib = 1 << 30
    job = ("import sys,hashlib\nblock=bytes(range(256))*4096\nh=hashlib.sha256()\n"
           "out=sys.stdout.buffer\nfor i in range(%d):\n b=block[i%%7:]+block[:i%%7]\n"
           " out.write(b); h.update(b)\nsys.stderr.write(h.hexdigest())\n" % (gib // len(bytes(range(256)) * 4096)))
    proc = cw.popen("run", "-n", "big", "--", "python3", "-c", job)
    digest, total = hashlib.sha256(), 0
    while chunk := proc.stdout.read(1 << 20):
        digest.update(chunk)
        total += len(chunk)
    err = proc.stderr.read().decode()
    assert proc.wait(120) == 0
    assert total == gib and digest.hexdigest() == err
    (run,) = history(cw, "big")
    size = os.path.getsize(run["log_path"])
    assert size < 12 * 1024 * 1024, "captured output must be bounded"
    assert b"bytes omitted" in open(run["log_path"], "rb").read()


def test_on_failure_prints_only_when_the_run_failed(cw):
    ok = cw("run", "-n", "c1", "--output", "on-failure", "--", "sh", "-c", "echo fine")
    assert ok.returncode == 0 and ok.stdout == b""
    bad = cw("run", "-n", "c2", "--output", "on-failure", "--", "sh", "-c", "echo broken; exit 2")
    assert bad.returncode == 2 and b"broken" in bad.stdout


def test_quiet_captures_without_printing(cw):
    proc = cw("run", "-n", "q", "--output", "quiet", "--", "sh", "-c", "echo secret-ish; exit 1")
    assert proc.stdout == b"" and proc.returncode == 1
    assert cw("logs", "q").stdout == b"secret-ish\n"


# -- environment -----------------------------------------------------------------------------

def test_the_job_sees_its_run_in_the_environment(cw, tmp_path):
    out = tmp_path / "env.json"
    proc = cw("run", "-n", "envy", "--host", "web-1", "--", "python3", "-c",
              "import os, json, sys; json.dump({k: v for k, v in os.environ.items() "
              "if k.startswith('CRONWRAP_')}, open(sys.argv[1], 'w'))", str(out))
    assert proc.returncode == 0
    env = json.loads(out.read_text())
    (run,) = history(cw, "envy")
    assert env["CRONWRAP_JOB"] == "envy" and env["CRONWRAP_HOST"] == "web-1"
    assert env["CRONWRAP_RUN_ID"] == str(run["run_id"]) and env["CRONWRAP_RUN_KEY"] == run["run_key"]
    assert env["CRONWRAP_ATTEMPT"] == "1" and env["CRONWRAP_TRIGGER"] == "schedule"
    assert env["CRONWRAP_FENCE"] == str(run["fence"])
    assert env["CRONWRAP_SCHEDULED_AT"][:16] == run["run_key"][:16] or "+" in env["CRONWRAP_SCHEDULED_AT"]
    assert len(env["CRONWRAP_BIZ_DATE"]) == 10
    assert run["host"] == "web-1"


def test_env_file_values_reach_the_job_and_never_the_logs(cw, tmp_path, home):
    envfile = tmp_path / "job.env"
    envfile.write_text("# comment\nexport PATH=/usr/bin:/bin\nTOKEN='s3cr3t-value'\n\nEMPTY=\n")
    out = tmp_path / "token"
    proc = cw("run", "-n", "tok", "--env-file", str(envfile), "--", "sh", "-c", f"printf %s \"$TOKEN\" > {out}")
    assert proc.returncode == 0
    assert out.read_text() == "s3cr3t-value"
    for path in home.rglob("*"):
        if path.is_file():
            assert b"s3cr3t-value" not in path.read_bytes(), path


def test_cronwrap_home_holds_private_files(cw, home):
    assert cw("run", "-n", "perm", "--", "true").returncode == 0
    for path in [home, *home.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        assert not mode & 0o022, (path, oct(mode))
        if path.is_file() and path.parent != home.parent:
            assert not mode & 0o077, (path, oct(mode))


def test_jitter_delays_within_bounds(cw):
    start = time.monotonic()
    assert cw("run", "-n", "j", "--jitter", "0.3", "--", "true").returncode == 0
    assert time.monotonic() - start < 5


def test_options_from_the_environment(cw):
    proc = cw("run", "-n", "e", "--", "sleep", "30", env={"CRONWRAP_TIMEOUT": "0.3"})
    assert proc.returncode == 124


# -- bad input -------------------------------------------------------------------------------

@pytest.mark.parametrize("args, words", [
    (["--timeout", "5x"], "--timeout: '5x' is not a duration"),
    (["--kill-after", "-1"], "--kill-after"),
    (["--signal", "NOPE"], "--signal: 'NOPE' is not a signal"),
    (["-n", "x" * 129], "is not a job name"),
    (["-n", "tab\tname"], "is not a job name"),
    (["--overlap", "sometimes"], "--overlap"),
    (["--lock", "mutex"], "--lock"),
    (["--output", "loud"], "--output"),
    (["--skip-exit-code", "300"], "--skip-exit-code"),
    (["--frobnicate"], "unknown option --frobnicate"),
    (["--env-file", "/nonexistent/env"], "--env-file"),
    (["--db", "mysql://x"], "--db"),
    (["--lease", "0.5"], "--lease"),
    (["--timeout"], "needs a value"),
])
def test_bad_input_is_one_line_exit_125_and_nothing_runs(cw, tmp_path, args, words):
    marker = tmp_path / "ran"
    proc = cw("run", "-n", "bad", *args, "--", "touch", str(marker)) if args[-1] != "--timeout" \
        else cw("run", "-n", "bad", *args)
    assert proc.returncode == 125, proc.stderr
    lines = proc.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and words in lines[0], lines
    assert not marker.exists()
    assert not (cw.home / "ledger.db").exists() or cw("history", "bad").returncode == 125


def test_bad_env_file_line_names_the_line_not_the_value(cw, tmp_path):
    envfile = tmp_path / "bad.env"
    envfile.write_text("GOOD=1\nthis is password=hunter2 oops\n")
    proc = cw("run", "-n", "b", "--env-file", str(envfile), "--", "true")
    assert proc.returncode == 125
    assert b"bad.env:2" in proc.stderr and b"hunter2" not in proc.stderr


def test_no_command_is_an_error(cw):
    proc = cw("run", "-n", "x")
    assert proc.returncode == 125 and b"no command" in proc.stderr


def test_a_symlinked_lock_file_is_refused(cw, tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("")
    link = tmp_path / "link.lock"
    link.symlink_to(target)
    proc = cw("run", "-n", "s", "--lock-file", str(link), "--", "true")
    assert proc.returncode == 125 and b"symlink" in proc.stderr


# -- reading back ----------------------------------------------------------------------------

def test_status_json_has_the_contract_fields(cw):
    cw("run", "-n", "s1", "--", "true")
    cw("run", "-n", "s2", "--", "false")
    jobs = {j["job"]: j for j in cw.json("status", "--json")}
    assert set(jobs) == {"s1", "s2"}
    for key in ("job", "schedule", "tz", "last_run", "last_success_at", "next_due_at",
                "running", "missed", "counts", "health"):
        assert key in jobs["s1"]
    assert jobs["s1"]["health"] == "ok" and jobs["s2"]["health"] == "critical"
    assert jobs["s1"]["counts"] == {"succeeded": 1} and jobs["s2"]["last_success_at"] is None
    for key in ("run_id", "job", "run_key", "scheduled_at", "trigger", "status", "skip_reason",
                "attempt", "host", "pid", "started_at", "finished_at", "duration_ms",
                "exit_code", "signal", "fence"):
        assert key in jobs["s1"]["last_run"]


def test_status_table_and_history_render(cw):
    cw("run", "-n", "t1", "--", "sh", "-c", "echo boom; exit 4")
    table = cw("status", check_rc=0).stdout.decode()
    assert "t1" in table and "failed" in table and "critical" in table
    runs = cw("status", "t1", check_rc=0).stdout.decode()
    assert "boom" in runs
    assert "failed" in cw("history", "t1", check_rc=0).stdout.decode()


def test_logs_of_a_run_by_id(cw):
    cw("run", "-n", "l", "--force", "--", "echo", "one")
    run_id = history(cw, "l")[0]["run_id"]
    assert cw("logs", "l", str(run_id)).stdout == b"one\n"
    bad = cw("logs", "l", "999")
    assert bad.returncode == 125 and b"no run 999" in bad.stderr


def test_status_running_run_shows_host_pid_lease_and_fence(cw, script, tmp_path):
    ready, done = tmp_path / "ready", tmp_path / "done"
    # The job runs until status has been read (a fixed sleep ended first under load).
    job = script("r.sh", f"touch {ready}\n{until_exists(done)}\n")
    proc = cw.popen("run", "-n", "live", "--host", "box", "--", job)
    wait_for(ready.exists, what="job start")
    try:
        (job_status,) = cw.json("status", "live", "--json")
    finally:
        done.touch()
    (running,) = job_status["running"]
    assert running["host"] == "box" and running["fence"] == 1 and running["lease_left_s"] > 60
    assert running["pid"] == proc.pid
    proc.wait(10)


def test_a_name_full_of_quotes_slashes_and_unicode_stays_inside_cronwrap_home(cw, home, tmp_path):
    name = "../o'brien \"x\"; DROP TABLE runs; --/ü"
    proc = cw("run", "-n", name, "--", "sh", "-c", "echo $CRONWRAP_JOB")
    assert proc.returncode == 0 and proc.stdout.decode().strip() == name
    (run,) = history(cw, name)
    assert run["job"] == name and run["status"] == "succeeded"
    assert cw("logs", name, "--last").stdout.decode().strip() == name
    for path in home.rglob("*"):
        assert home in path.resolve().parents, path
    assert not (tmp_path / "o'brien \"x\"; DROP TABLE runs; --").exists()


def test_without_a_schedule_the_job_time_is_in_cron_tz(cw, tmp_path):
    out = tmp_path / "t"
    env = {"CRON_TZ": "Asia/Shanghai", "TZ": "UTC"}
    assert cw("run", "-n", "tz", "--", "sh", "-c", f"echo $CRONWRAP_SCHEDULED_AT > {out}", env=env).returncode == 0
    assert out.read_text().strip().endswith("+08:00")
