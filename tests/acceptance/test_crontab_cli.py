"""``cronwrap wrap`` and ``cronwrap lint`` on real files and standard input."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.crontab_corpus import SYSTEM_CRONTAB, USER_CRONTAB


CRONTAB = """MAILTO=ops@example.com
CRON_TZ=Asia/Shanghai
30 1 * * * /usr/local/bin/settle.sh >> /var/log/settle.log 2>&1
*/5 * * * * cd /srv && ./poll.sh
@reboot /usr/local/bin/warm-cache
"""


def test_wrap_prefixes_every_job_and_unwrap_restores_it(cw, tmp_path):
    path = tmp_path / "crontab"
    path.write_text(CRONTAB)
    wrapped = cw("wrap", str(path), "--cronwrap", "/opt/bin/cronwrap", "--", "--timeout", "25m",
                 check_rc=0).stdout.decode()
    lines = wrapped.splitlines()
    assert lines[:2] == CRONTAB.splitlines()[:2]
    assert lines[2].startswith("30 1 * * * /opt/bin/cronwrap run -n settle --schedule '30 1 * * *' --timeout 25m -- ")
    assert lines[2].endswith("/usr/local/bin/settle.sh >> /var/log/settle.log 2>&1")
    assert lines[4] == "@reboot /usr/local/bin/warm-cache"  # a daemon starter: left alone
    again = cw("wrap", "-", "--cronwrap", "/opt/bin/cronwrap", input=wrapped.encode(), check_rc=0)
    assert again.stdout.decode() == wrapped  # wrapping twice changes nothing
    restored = cw("wrap", "--unwrap", "-", input=wrapped.encode(), check_rc=0)
    assert restored.stdout.decode() == CRONTAB


def test_wrap_diff_shows_the_change(cw, tmp_path):
    path = tmp_path / "crontab"
    path.write_text(CRONTAB)
    out = cw("wrap", str(path), "--diff", check_rc=0).stdout.decode()
    assert out.startswith("--- a/") and "+30 1 * * *" in out and "-30 1 * * *" in out


def test_wrap_refuses_bad_run_options_with_125(cw, tmp_path):
    path = tmp_path / "crontab"
    path.write_text(CRONTAB)
    proc = cw("wrap", str(path), "--", "--timeout", "5x")
    assert proc.returncode == 125 and b"--timeout" in proc.stderr and proc.stdout == b""
    assert cw("wrap", str(tmp_path / "missing")).returncode == 125


def test_lint_reports_line_severity_and_fix_and_exits_1_on_errors(cw, tmp_path):
    path = tmp_path / "crontab"
    path.write_text("0 0 1 * 1 backup.sh\n61 * * * * /bin/true\n")
    proc = cw("lint", str(path))
    assert proc.returncode == 1
    lines = proc.stdout.decode().splitlines()
    assert any(l.startswith(f"{path}:2:1: error: E001") and "fix:" in l for l in lines)
    assert any(":1:" in l and "W002" in l for l in lines)
    clean = tmp_path / "clean"
    clean.write_text("PATH=/usr/local/bin:/usr/bin:/bin\nMAILTO=ops@example.com\n"
                     "17 3 * * * /usr/local/bin/cronwrap run -n x --timeout 1h -- /usr/local/bin/x >> /var/log/x 2>&1\n")
    assert cw("lint", str(clean)).returncode == 0


def test_system_crontab_user_field_is_kept(cw, tmp_path):
    text = "SHELL=/bin/sh\n17 * * * * root cd / && run-parts --report /etc/cron.hourly\n"
    out = cw("wrap", "--system", "-", input=text.encode(), check_rc=0).stdout.decode()
    assert out.splitlines()[1].startswith("17 * * * * root ")
    assert cw("wrap", "--system", "--unwrap", "-", input=out.encode(), check_rc=0).stdout.decode() == text


def test_the_corpus_round_trips_through_the_executable(cw):
    for text, mode in ((USER_CRONTAB, "--user"), (SYSTEM_CRONTAB, "--system")):
        wrapped = cw("wrap", mode, "-", input=text.encode(), check_rc=0).stdout
        assert wrapped != text.encode()
        assert cw("wrap", mode, "--unwrap", "-", input=wrapped, check_rc=0).stdout == text.encode()


def test_wrap_writes_the_path_it_was_started_by_when_cronwrap_is_not_on_path(tmp_path):
    """A virtualenv's cronwrap run by its full path: the lines name that program, not a
    cronwrap on PATH (or one that does not exist)."""
    program = Path(sys.executable).parent / "cronwrap"
    if not program.exists():
        pytest.skip("no cronwrap executable beside this Python")
    crontab = tmp_path / "crontab"
    crontab.write_text("30 1 * * * /usr/local/bin/settle.sh\n")
    env = {"PATH": "/usr/bin:/bin", "CRONWRAP_HOME": str(tmp_path / "home")}
    for argv0 in (str(program), os.path.relpath(program, tmp_path)):
        proc = subprocess.run([argv0, "wrap", str(crontab)], env=env, cwd=tmp_path,
                              capture_output=True, check=True)
        assert proc.stdout.decode().startswith(f"30 1 * * * {program} run -n settle ")
    module = subprocess.run([sys.executable, "-m", "cronwrap", "wrap", str(crontab)], env=env,
                            cwd=tmp_path, capture_output=True, check=True)
    assert module.stdout.decode().startswith(f"30 1 * * * {program} run ")  # beside python


def test_wrap_warns_on_each_wrapped_line_lint_reports_an_error_for(cw, tmp_path):
    crontab = tmp_path / "crontab"
    crontab.write_text("MAILTO=ops@example.com\n"
                       "0 2 * * * /usr/bin/tar czf /backup/$(date +%F).tgz /srv\n"
                       "61 * * * * /bin/true\n"  # a bad field: left as it is, lint's to report
                       "0 3 * * * /usr/local/bin/settle.sh\n")
    proc = cw("wrap", str(crontab), "--cronwrap", "/opt/bin/cronwrap", check_rc=0)
    lines = proc.stdout.decode().splitlines()
    assert "/opt/bin/cronwrap run -n tar" in lines[1] and lines[2] == "61 * * * * /bin/true"
    warnings = proc.stderr.decode().splitlines()
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(f"cronwrap: wrap: line 2 is wrapped, but lint reports an "
                                  f"error on it: {crontab}:2:")
    assert "E005" in warnings[0]
    clean = cw("wrap", "-", input=b"0 3 * * * /usr/local/bin/settle.sh\n", check_rc=0)
    assert clean.stderr == b""


def test_lint_warns_on_cron_tz_where_the_cron_daemon_ignores_it(cw, tmp_path):
    crontab = tmp_path / "crontab"
    crontab.write_text("MAILTO=ops@example.com\nCRON_TZ=Asia/Kolkata\n"
                       "0 2 * * * /usr/local/bin/settle.sh\n")
    from cronwrap.schedule import system_zone_name

    if (system_zone_name() or "UTC") == "Asia/Kolkata":
        pytest.skip("the system zone is CRON_TZ's: nothing to warn about")
    debian = cw("lint", str(crontab), env={"CRONWRAP_CRON_DAEMON": "debian"}, check_rc=0)
    said = debian.stdout.decode()
    assert f"{crontab}:2:1: warning: W012 CRON_TZ=Asia/Kolkata is ignored by this host's cron " \
           "(Debian's cron; CRONWRAP_CRON_DAEMON=debian)" in said
    assert "I002" not in said and "as cron does" not in said
    cronie = cw("lint", str(crontab), env={"CRONWRAP_CRON_DAEMON": "cronie"}, check_rc=0)
    assert "W012" not in cronie.stdout.decode()
    assert "I002" in cronie.stdout.decode() and "cronie honours CRON_TZ" in cronie.stdout.decode()
    bad = cw("lint", str(crontab), env={"CRONWRAP_CRON_DAEMON": "vixie"})
    assert bad.returncode == 125 and bad.stdout == b""
    assert bad.stderr.decode().count("\n") == 1 and "one of: debian, cronie" in bad.stderr.decode()
