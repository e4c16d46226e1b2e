"""Input hardening from issue 11, end to end: the installed executable against the inputs an
outside probe (GNU coreutils' tests/timeout suite through a shim, and a fuzzer) found wrong.

Each test here failed on release a4eefb6. Bad input is one line on stderr, exit 125, and
nothing runs; what GNU timeout accepts (exponents, signal 0, durations too large to keep) runs.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

DURATION_OPTIONS = ("--timeout", "--kill-after", "--wait-timeout", "--lease", "--keep-logs",
                    "--jitter", "--retry-delay", "--hook-timeout", "--catchup-window")


def events(home: Path) -> list[dict]:
    path = home / "logs" / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def refused(proc, marker: Path | None = None) -> str:
    """The one line a refused invocation printed; asserts 125 and that nothing ran."""
    err = proc.stderr.decode(errors="replace")
    assert proc.returncode == 125, (proc.returncode, err)
    assert len(err.strip().splitlines()) == 1, err
    assert "internal error" not in err and "Traceback" not in err, err
    assert marker is None or not marker.exists(), "the job ran"
    return err


def closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens: connections are refused
    return port


# -- 14: secrets are never echoed ------------------------------------------------------------

def test_a_ping_password_holding_a_slash_is_never_logged(cw, home):
    url = f"https://ops:hunter2/x@127.0.0.1:{closed_port()}/uuid"
    proc = cw("run", "-n", "pinged", "--ping", url, "--", "true")
    assert proc.returncode == 0, proc.stderr
    failed = [e for e in events(home) if e["event"] == "ping_failed"]
    assert failed and all("***@127.0.0.1" in e["error"] for e in failed), failed
    assert b"hunter2" not in proc.stdout + proc.stderr
    for path in home.rglob("*"):
        if path.is_file():
            assert b"hunter2" not in path.read_bytes(), path


def test_a_malformed_connection_string_never_echoes_its_secret(cw):
    for dsn in ("pass=S3cret", "host=x password", "password='S3cret", "host=x S3cret",
                "postgresql://u:S3cret@[bad", "postgresql://u:S3cret@h/d?x=%zz",
                "postgresql://h/db?password=S3cret&x", "postgresql://u:S3cret/x@h:y/db"):
        err = refused(cw("run", "-n", "db", "--db", dsn, "--", "true"))
        assert "S3cret" not in err, (dsn, err)
    refused(cw("run", "-n", "db", "--db", "password='unterminated", "--", "true"))
    err = refused(cw("run", "-n", "db", "--db", "pass=S3cret", "--", "true"))
    assert '"pass"' in err and "check --db" in err  # says which keyword is wrong


# -- 16: config errors are one line ----------------------------------------------------------

@pytest.mark.parametrize("text", [
    "a = " + "[" * 5000 + "]" * 5000 + "\n",
    "[defaults]\ntimeout = " + "[" * 5000 + "]" * 5000 + "\n",
    "a = " + "{b = " * 3000 + "1" + "}" * 3000 + "\n",
    "a = " + "[" * 5000 + "\n",
    '[jobs."a\\nb"]\ntimeout = "1m"\n',
    '[jobs."a\\u0007\\tb"]\n',
    'jobs = {"x\\ny" = {}}\n',
], ids=["nested-arrays", "nested-value", "nested-tables", "unclosed-arrays", "newline-name",
        "control-name", "inline-newline-name"])
def test_every_config_error_is_one_line_naming_the_file(cw, tmp_path, text):
    config = tmp_path / "config.toml"
    config.write_text(text)
    config.chmod(0o644)
    marker = tmp_path / "ran"
    proc = cw("run", "-n", "x", "--", "touch", str(marker), env={"CRONWRAP_CONFIG": str(config)})
    err = refused(proc, marker)
    assert err.startswith(f"cronwrap: {config}"), err
    assert err.strip().isprintable(), err


# -- 19: wrap and lint leave daemon starters alone -------------------------------------------

DAEMONS = """\
MAILTO=ops@example.com
@reboot /opt/agent/start-agent
*/5 * * * * /usr/local/bin/poll.sh >> /var/log/poll.log 2>&1 &
0 3 * * * /usr/local/bin/nightly.sh >> /var/log/nightly.log 2>&1 && /usr/bin/logger done
"""


def test_wrap_leaves_daemon_starters_alone_and_lint_warns_about_wrapped_ones(cw, tmp_path):
    path = tmp_path / "crontab"
    path.write_text(DAEMONS)
    wrapped = cw("wrap", str(path), "--cronwrap", "/usr/local/bin/cronwrap",
                 check_rc=0).stdout.decode()
    before, after = DAEMONS.splitlines(), wrapped.splitlines()
    assert after[:3] == before[:3]  # byte for byte, like comments
    assert after[3].startswith("0 3 * * * /usr/local/bin/cronwrap run -n nightly")  # && is no &
    assert cw("wrap", "--unwrap", "-", input=wrapped.encode(), check_rc=0).stdout.decode() == DAEMONS
    assert b"W011" not in cw("lint", str(path)).stdout

    by_hand = tmp_path / "by-hand"
    by_hand.write_text(
        "MAILTO=ops@example.com\n"
        "@reboot /usr/local/bin/cronwrap run -n agent -- /opt/agent/start-agent\n"
        "0 * * * * /usr/local/bin/cronwrap run -n a -- /bin/sh -c '/opt/a &' >> /var/log/a 2>&1\n"
        "0 * * * * /usr/local/bin/cronwrap run -n b -- /opt/b >&2\n"
        "@reboot /usr/local/bin/cronwrap run -n c --leave-orphans -- /opt/c\n")
    lines = cw("lint", str(by_hand)).stdout.decode().splitlines()
    warned = [line for line in lines if " W011 " in line]
    assert [line.split(":")[1] for line in warned] == ["2", "3"], lines
    assert all("--leave-orphans" in line and "unwrap" in line for line in warned)


# -- 20: --signal 0, as GNU timeout takes it -------------------------------------------------

def test_signal_0_sends_nothing_and_kill_after_ends_the_job(cw, tmp_path):
    proc = cw("run", "-n", "s0", "--signal", "0", "--timeout", "0.2", "--kill-after", "0.3",
              "--", "sleep", "10", timeout=8)
    assert proc.returncode == 137, proc.stderr
    (run,) = cw.json("history", "s0", "--json")
    assert (run["status"], run["signal"]) == ("timeout", 9)


def test_signal_0_without_kill_after_lets_the_job_end_and_says_it_timed_out(cw, tmp_path):
    proc = cw("run", "-n", "s0", "--signal", "0", "--timeout", "0.2", "--", "sleep", "2")
    assert proc.returncode == 124, proc.stderr
    (run,) = cw.json("history", "s0", "--json")
    assert (run["status"], run["signal"]) == ("timeout", None)  # it ended by itself


# -- 21: exponents, as GNU strtod reads them -------------------------------------------------

@pytest.mark.parametrize("value", ["2.34e+5", "1E2m", "6e1s", ".5e3", "1e-3d"])
def test_durations_in_exponent_notation_are_accepted(cw, value):
    proc = cw("run", "-n", "e", "--timeout", value, "--kill-after", value, "--", "true")
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr


def test_a_timeout_in_exponent_notation_times_out(cw):
    proc = cw("run", "-n", "e", "--timeout", "1e-3", "--", "sleep", "10", timeout=8)
    assert proc.returncode == 124, proc.stderr


def test_a_tiny_timeout_is_the_smallest_timeout_not_none(cw):
    proc = cw("run", "-n", "tiny", "--timeout", "1e-400", "--", "sleep", "10", timeout=8)
    assert proc.returncode == 124, proc.stderr


def test_what_gnu_refuses_and_python_reads_is_refused(cw, tmp_path):
    marker = tmp_path / "ran"
    for value in ("\u0663", "1\u0663", "\uff11e2", "nan", "1_000", "1e", "0x10", "1e3x", "+-1"):
        err = refused(cw("run", "-n", "r", "--timeout", value, "--", "touch", str(marker)), marker)
        assert "--timeout" in err and "is not a duration" in err, (value, err)


# -- 22: too large to keep: no limit for time limits, an error for the rest ------------------

@pytest.mark.parametrize("option", ["--timeout", "--kill-after", "--wait-timeout"])
@pytest.mark.parametrize("value", ["1e400", "inf", "4000d"])
def test_a_time_limit_too_large_runs_without_it_and_says_so_once(cw, option, value):
    proc = cw("run", "-n", "big", option, value, "--", "sh", "-c", "echo ran")
    assert proc.returncode == 0 and proc.stdout == b"ran\n", proc.stderr
    name = option.removeprefix("--")
    assert proc.stderr.decode() == (f"cronwrap: {option} {value}: too large; running without "
                                    f"a {name}\n")


def test_other_durations_too_large_are_refused_and_nothing_runs(cw, tmp_path):
    marker = tmp_path / "ran"
    for option in DURATION_OPTIONS[3:]:
        for value in ("1e400", "inf", "4000d"):
            err = refused(cw("run", "-n", "big", option, value, "--", "touch", str(marker)),
                          marker)
            assert option in err and "too large" in err, err


def test_a_too_large_timeout_from_the_environment_and_config_is_named_by_its_source(cw, tmp_path):
    proc = cw("run", "-n", "big", "--", "true", env={"CRONWRAP_TIMEOUT": "1e400"})
    assert proc.returncode == 0
    assert proc.stderr == b"cronwrap: CRONWRAP_TIMEOUT 1e400: too large; running without a timeout\n"
    config = tmp_path / "config.toml"
    config.write_text("[defaults]\nkill-after = 1e400\n")
    config.chmod(0o644)
    proc = cw("run", "-n", "big", "--", "true", env={"CRONWRAP_CONFIG": str(config)})
    assert proc.returncode == 0
    assert proc.stderr.decode() == (f"cronwrap: {config}:2: [defaults] kill-after inf: too "
                                    "large; running without a kill-after\n")
