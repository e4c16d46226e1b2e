"""Hardening of what cronwrap reads back and shows (issue 11: items 10, 12 and 13).

- ``logs --follow`` ends once the run it follows is abandoned (its wrapper died, its lease
  expired) instead of polling forever.
- ``logs`` reads captured output only below the log directories configured on this host,
  never the ``log_path`` a ledger row names, never through a symlink, never a FIFO.
- Terminal control sequences from a job's output or from a shared ledger reach the operator's
  terminal as text (``\\x1b``), and rich markup in a name is shown as written; ``logs`` piped
  and ``logs --raw`` stay byte for byte.

The writer of a shared ledger is played by editing rows with sqlite3 or psycopg.
"""

from __future__ import annotations

import os
import pty
import shutil
import signal
import sqlite3
import subprocess
import tty
from pathlib import Path

import pytest

from tests.acceptance.conftest import wait_for

SECRET = b"root-only secret\n"
OUTPUT = b"the job's own output\n"
# title change, screen clear, OSC 52 (write the clipboard), and a C1 CSI (U+009B) in UTF-8
ESCAPES = "\x1b]0;OWNED\x07\x1b[2J\x1b]52;c;cm0gLXJmIH4=\x07\u009b31m"
CONTROL_BYTES = (b"\x1b", b"\x07", "\u009b".encode())


def printf_job(text: str, exit_code: int) -> list[str]:
    """A job that prints ``text`` exactly (through printf's %b, so the shell sees no escape)."""
    octal = "".join(f"\\0{b:03o}" for b in text.encode())
    return ["--", "sh", "-c", f"printf '%b' '{octal}'; exit {exit_code}"]


def assert_no_controls(data: bytes, *visible: bytes) -> None:
    for byte in CONTROL_BYTES:
        assert byte not in data, (byte, data)
    for text in visible:
        assert text in data, (text, data)


# -- item 10: logs --follow on an abandoned run -----------------------------------------------

def children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except FileNotFoundError:
        return []


def test_follow_ends_when_the_run_is_abandoned(cw, home):
    wrapper = cw.popen("run", "-n", "j", "--lease", "3s", "--", "sh", "-c", "echo hi; sleep 100",
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        output = home / "logs" / "j" / "1.1.log"
        wait_for(lambda: output.exists() and output.read_bytes() == b"hi\n", what="the job's output")
        (job,) = wait_for(lambda: children(wrapper.pid), what="the job's process")
        assert os.getpgid(job) == job  # the job leads its own process group
        wrapper.kill()  # SIGKILL: no result recorded, the row stays running until its lease ends
        wrapper.wait(10)
        try:
            os.killpg(job, signal.SIGKILL)  # what the wrapper's death signal left of the job
        except ProcessLookupError:
            pass
    finally:
        wrapper.kill()
        wrapper.wait(10)
    (row,) = cw.json("history", "j", "--json")
    assert row["status"] in ("running", "abandoned")
    shown = cw("logs", "j", "--follow", timeout=20)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == b"hi\n"
    err = shown.stderr.decode()
    assert len(err.splitlines()) == 1 and "abandoned" in err, err


# -- item 12: logs reads only below the configured log directories ----------------------------

def set_log_path(db: str | None, home: Path, path: str) -> None:
    """What a writer of the shared ledger can do: point every run's log_path anywhere."""
    if db is None:
        with sqlite3.connect(home / "ledger.db") as conn:
            conn.execute("UPDATE runs SET log_path = ?", (path,))
        return
    import psycopg

    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("UPDATE cronwrap_runs SET log_path = %s", (path,))


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_db(request) -> str | None:
    """None: the embedded SQLite ledger; else a fresh PostgreSQL database URL."""
    return request.getfixturevalue("pg_dsn") if request.param == "postgresql" else None


def test_logs_never_reads_the_path_a_ledger_row_names(cw, home, tmp_path, ledger_db):
    db = ["--db", ledger_db] if ledger_db else []
    cw("run", "-n", "j", *db, "--", "printf", OUTPUT.decode(), check_rc=0)
    secret = tmp_path / "secret"
    secret.write_bytes(SECRET)
    set_log_path(ledger_db, home, str(secret))
    shown = cw("logs", "j", *db)
    assert SECRET not in shown.stdout
    assert (shown.returncode, shown.stdout) == (0, OUTPUT), shown.stderr
    (home / "logs" / "j" / "1.1.log").unlink()  # now only the ledger names a file
    missing = cw("logs", "j", *db)
    err = missing.stderr.decode()
    assert missing.returncode == 125 and missing.stdout == b"", err
    assert len(err.splitlines()) == 1 and str(home / "logs") in err and "j/1.1.log" in err, err
    assert SECRET.strip() not in missing.stderr


def test_logs_finds_output_in_the_log_dir_this_host_configured(cw, tmp_path):
    """--log-dir on the crontab line: CRONWRAP_LOG_DIR or the config file says where."""
    logs = tmp_path / "elsewhere"
    cw("run", "-n", "j", "--log-dir", str(logs), "--", "printf", OUTPUT.decode(), check_rc=0)
    assert cw("logs", "j").returncode == 125
    assert cw("logs", "j", env={"CRONWRAP_LOG_DIR": str(logs)}).stdout == OUTPUT
    config = tmp_path / "config.toml"
    config.write_text(f'[jobs.j]\nlog-dir = "{logs}"\n')
    os.chmod(config, 0o600)
    assert cw("logs", "j", env={"CRONWRAP_CONFIG": str(config)}).stdout == OUTPUT


@pytest.mark.parametrize("where", ["logs/j/1.1.log", "logs/j"])
def test_a_symlink_below_the_log_dir_is_refused(cw, home, tmp_path, where):
    cw("run", "-n", "j", "--", "printf", OUTPUT.decode(), check_rc=0)
    planted = home / where
    target = tmp_path / "target"
    if where.endswith(".log"):
        target.write_bytes(SECRET)
        planted.unlink()
    else:  # a whole job directory elsewhere, holding the file logs will look for
        target.mkdir()
        (target / "1.1.log").write_bytes(SECRET)
        shutil.rmtree(planted)
    planted.symlink_to(target)
    shown = cw("logs", "j")
    err = shown.stderr.decode()
    assert shown.returncode == 125 and SECRET.strip() not in shown.stdout, shown.stdout
    assert len(err.splitlines()) == 1 and "symlink" in err and str(planted) in err, err


def test_a_fifo_at_the_output_path_does_not_hang_logs(cw, home):
    cw("run", "-n", "j", "--", "printf", OUTPUT.decode(), check_rc=0)
    output = home / "logs" / "j" / "1.1.log"
    output.unlink()
    os.mkfifo(output, 0o600)
    shown = cw("logs", "j", timeout=20)
    err = shown.stderr.decode()
    assert shown.returncode == 125 and "not a regular file" in err and str(output) in err, err


# -- item 13: terminal escapes and markup are shown as text -----------------------------------

def tamper_run(home: Path, **fields: str) -> None:
    with sqlite3.connect(home / "ledger.db") as conn:
        for column, value in fields.items():
            conn.execute(f"UPDATE runs SET {column} = ?", (value,))


def test_escapes_from_output_and_ledger_are_shown_as_text(cw, home):
    cw("run", "-n", "j", *printf_job(f"before {ESCAPES} after\n", 3), check_rc=3)
    tamper_run(home, host=f"h{ESCAPES}", run_key=f"k{ESCAPES}", trigger=f"t{ESCAPES}",
               skip_reason=f"r{ESCAPES}")
    for args in (["history", "j"], ["status", "j"]):
        shown = cw(*args, check_rc=0).stdout
        assert_no_controls(shown, b"before \\x1b]0;OWNED\\x07\\x1b[2J", b"after", b"h\\x1b",
                           b"k\\x1b", b"t\\x1b", b"r\\x1b", b"\\x9b31m")
    table = cw("status", check_rc=0).stdout
    assert_no_controls(table, b"failed (r\\x1b]0;OWNED\\x07", b"critical")
    (run,) = cw.json("history", "j", "--json")  # JSON stays exact
    assert run["host"] == f"h{ESCAPES}" and f"before {ESCAPES} after" in run["error_tail"]
    tamper_run(home, status="running")
    assert_no_controls(cw("unlock", "j", check_rc=0).stdout, b"(k\\x1b]0;OWNED", b"held by h\\x1b")


def test_markup_in_names_and_output_is_shown_as_written(cw):
    names = ["[red]x", "[/]", "[bold]b[/bold]", ":smile:"]
    for name in names:
        cw("run", "-n", name, *printf_job("out [/] [red]in[/red] :smile:\n", 2), check_rc=2)
    table = cw("status", check_rc=0).stdout.decode()
    for name in names:
        assert f"\n {name} " in table, table
    runs = cw("status", "[red]x", check_rc=0).stdout.decode()
    assert "out [/] [red]in[/red] :smile:" in runs, runs


def in_a_terminal(argv: list[str], env: dict[str, str]) -> bytes:
    """stdout of ``argv`` run with a pseudo-terminal as its stdout (raw mode: no CRLF)."""
    master, slave = pty.openpty()
    tty.setraw(slave)
    try:
        proc = subprocess.Popen(argv, stdout=slave, stderr=subprocess.PIPE, env=env)
    finally:
        os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every holder of the slave has closed it
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return out


def test_logs_escapes_controls_on_a_terminal_only(cw):
    text = f"before {ESCAPES} after\r\n\tnext\n"
    cw("run", "-n", "j", *printf_job(text, 3), check_rc=3)
    assert cw("logs", "j", check_rc=0).stdout == text.encode()  # piped: byte for byte
    shown = in_a_terminal([*cw.argv, "logs", "j"], cw.env())
    assert_no_controls(shown, b"before \\x1b]0;OWNED\\x07\\x1b[2J", b"\\x9b31m after\r\n\tnext\n")
    assert in_a_terminal([*cw.argv, "logs", "j", "--raw"], cw.env()) == text.encode()
