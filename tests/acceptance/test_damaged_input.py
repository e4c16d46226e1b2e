"""Bad input and damaged files (issue 20 §6), end to end through the installed executable.

Each test here failed on b9ec9f4: an endless crontab was read until memory ran out, a damaged
schema version was an internal error, hard links were written through, and a non-UTF-8 locale
made the read commands fail. (The catch-up count of §6 is in test_schedule.py.)
"""

from __future__ import annotations

import resource
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.acceptance.test_hardening_input import refused
from tests.needs import missing


# -- input without end -----------------------------------------------------------------------

MEMORY = 1 << 30  # the address space each cronwrap gets: reading without bound fails in seconds


def _bounded_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


@pytest.mark.parametrize("command", [["lint"], ["wrap"], ["wrap", "--diff"], ["wrap", "--unwrap"]])
def test_a_crontab_without_end_is_refused_after_1_mib(cw, command):
    proc = subprocess.run([*cw.argv, *command, "/dev/zero"], env=cw.env(), capture_output=True,
                          timeout=120, preexec_fn=_bounded_memory)
    err = refused(proc)
    assert "/dev/zero: more than 1 MiB" in err and "crontab" in err, err
    assert proc.stdout == b""  # nothing written, not a half of it


@pytest.mark.parametrize("command", [["lint", "-"], ["wrap", "-"]])
def test_an_endless_pipe_is_refused_after_1_mib(cw, command):
    with subprocess.Popen(["yes", "* * * * * /usr/bin/true"], stdout=subprocess.PIPE) as endless:
        proc = subprocess.run([*cw.argv, *command], env=cw.env(), stdin=endless.stdout,
                              capture_output=True, timeout=120, preexec_fn=_bounded_memory)
        endless.stdout.close()
        endless.kill()
    err = refused(proc)
    assert "<stdin>: more than 1 MiB" in err, err
    assert proc.stdout == b""


def test_a_crontab_of_1_mib_is_still_read(cw, tmp_path):
    crontab = tmp_path / "crontab"
    line = b"*/5 * * * * /usr/local/bin/backup.sh >> /var/log/backup.log 2>&1\n"
    crontab.write_bytes(line * ((1 << 20) // len(line)))
    proc = cw("wrap", str(crontab), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count(b"\n") == (1 << 20) // len(line)
    assert b" run -n backup-2 " in proc.stdout  # names made unique in linear time


def test_one_long_crontab_line_is_linted_and_wrapped_in_linear_time(cw, tmp_path):
    """shlex splits a word in quadratic time: one 1 MiB line took 70 s to lint (and as long
    to wrap), where it now takes about 4 s on a loaded 2-core machine. The deadline is the
    test: 60 s, far above the linear time, far below the quadratic."""
    crontab = tmp_path / "crontab"
    crontab.write_bytes(b"* * * * * /usr/bin/" + b"x" * ((1 << 20) - 100) + b"\n")
    for command in ("lint", "wrap"):
        proc = cw(command, str(crontab), timeout=60)
        assert proc.returncode in (0, 1), proc.stderr


def test_a_config_file_without_end_is_refused(cw, tmp_path):
    big = tmp_path / "config.toml"
    big.write_bytes(b"# " + b"x" * (2 << 20) + b"\n")
    err = refused(cw("run", "-n", "j", "--", "true", env={"CRONWRAP_CONFIG": str(big)}))
    assert "more than 1 MiB" in err and "config" in err, err


# -- a damaged schema version ----------------------------------------------------------------

def _damage_postgres(dsn: str, value: str | None) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        if value is None:  # NOT NULL keeps it from happening by accident: a damaged table
            conn.execute("ALTER TABLE cronwrap_meta ALTER value DROP NOT NULL")
        conn.execute("UPDATE cronwrap_meta SET value = %s WHERE key = 'schema_version'", (value,))


@pytest.mark.parametrize("value", ["abc", "", "-1", None, "99999999999"])
@pytest.mark.parametrize("command", [["run", "-n", "j", "--", "true"], ["status"],
                                     ["history", "j"], ["db", "init"]])
def test_a_damaged_postgres_schema_version_is_one_line_naming_it(cw, pg_dsn, value, command):
    env = {"CRONWRAP_DB": pg_dsn}
    cw("run", "-n", "j", "--", "true", env=env, check_rc=0)
    _damage_postgres(pg_dsn, value)
    err = refused(cw(*command, env=env))
    assert "cronwrap_meta.schema_version" in err and "damaged" in err, err
    assert "UPDATE cronwrap_meta SET value" in err, err  # and what to do about it


@pytest.mark.parametrize("value", [-1, -2147483648])
@pytest.mark.parametrize("command", [["run", "-n", "j", "--", "true"], ["status"],
                                     ["history", "j"], ["db", "init"]])
def test_a_damaged_sqlite_schema_version_is_one_line_naming_it(cw, home, value, command):
    cw("run", "-n", "j", "--", "true", check_rc=0)
    with sqlite3.connect(home / "ledger.db") as db:
        db.execute(f"PRAGMA user_version = {value}")
    err = refused(cw(*command))
    assert "PRAGMA user_version" in err and "damaged" in err and "mv " in err, err


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_newer_schema_version_keeps_its_message_and_reads_still_work(cw, home, request,
                                                                      backend):
    env = {"CRONWRAP_DB": request.getfixturevalue("pg_dsn")} if backend == "postgres" else {}
    cw("run", "-n", "j", "--", "true", env=env, check_rc=0)
    if env:
        _damage_postgres(env["CRONWRAP_DB"], "99")
    else:
        with sqlite3.connect(home / "ledger.db") as db:
            db.execute("PRAGMA user_version = 99")
    err = refused(cw("run", "-n", "j", "--", "true", env=env))
    assert "newer than this cronwrap knows" in err and "upgrade cronwrap" in err, err
    cw("status", env=env, check_rc=0)  # a newer schema is read as it is


# -- hard links: cronwrap never writes through another name -------------------------------

def _victim(tmp_path, name="precious"):
    victim = tmp_path / name
    victim.write_bytes(b"the other name's data\n")
    return victim


def _quiet_ledger(home) -> None:
    """Checkpoint the WAL and close: SQLite removes -wal and -shm with the last connection."""
    db = sqlite3.connect(home / "ledger.db")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    assert not (home / "ledger.db-wal").exists()


def test_a_hard_link_at_the_capture_file_is_refused_and_the_job_still_runs(cw, home, tmp_path):
    import os

    victim = _victim(tmp_path)
    (home / "logs" / "j").mkdir(parents=True, mode=0o700)
    os.link(victim, home / "logs" / "j" / "1.1.log")  # the first run of j, its first attempt
    proc = cw("run", "-n", "j", "--", "echo", "job output")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"job output\n"  # the job ran, its output passed through
    err = proc.stderr.decode()
    assert "cannot capture output to" in err and "hard links" in err, err
    assert victim.read_bytes() == b"the other name's data\n"


def test_a_hard_link_at_the_run_log_is_refused_and_the_job_still_runs(cw, home, tmp_path):
    import os

    victim = _victim(tmp_path)
    (home / "logs").mkdir(parents=True, mode=0o700)
    os.link(victim, home / "logs" / "events.jsonl")
    proc = cw("run", "-n", "j", "--", "echo", "ran")
    assert proc.returncode == 0 and proc.stdout == b"ran\n", proc.stderr
    err = proc.stderr.decode()
    assert "events.jsonl has 2 hard links" in err and len(err.splitlines()) == 1, err
    assert victim.read_bytes() == b"the other name's data\n"


@pytest.mark.parametrize("name", ["ledger.db-wal", "ledger.db-shm", "ledger.db-journal",
                                  "ledger.db"])
def test_a_hard_link_at_the_ledger_or_its_sqlite_files_is_refused(cw, home, tmp_path, name):
    import os

    cw("run", "-n", "j", "--", "true", check_rc=0)
    _quiet_ledger(home)
    victim = _victim(tmp_path)
    if name == "ledger.db":  # the ledger itself, with another name elsewhere
        os.replace(home / name, victim)
        victim.chmod(0o600)
    before = victim.read_bytes()
    os.link(victim, home / name)
    marker = tmp_path / "ran"
    err = refused(cw("run", "-n", "j", "--force", "--", "touch", str(marker)), marker)
    assert f"{home / name} has 2 hard links" in err, err
    assert victim.read_bytes() == before
    if name != "ledger.db":  # a reader writes -shm as well; the ledger itself is only read
        err = refused(cw("status"))
        assert "hard links" in err, err
        assert victim.read_bytes() == before


# -- any locale ----------------------------------------------------------------------------
# In a locale whose charset is not UTF-8 every command works: what the charset lacks is drawn
# in ASCII (the marks and dashes as look-alikes, anything else as "?"); what a program reads
# (wrap's crontab, --format prometheus, --check, --json) is exact.

CRONTAB = ("# the café's jobs\n"
           "30 2 * * * /usr/local/bin/café.sh >> /var/log/café.log 2>&1\n"
           "*/5 * * * * /usr/bin/true # no lock — a warning\n").encode()


@pytest.fixture(scope="session")
def latin1_locale(tmp_path_factory) -> dict[str, str]:
    """An ISO-8859-1 locale built for the tests (localedef, from Debian's locales package)."""
    import shutil

    where = tmp_path_factory.mktemp("locales")
    if not shutil.which("localedef") or not Path("/usr/share/i18n/locales/en_US").exists():
        missing("localedef and /usr/share/i18n/locales (Debian: apt-get install locales) are "
                "needed to build an ISO-8859-1 locale", "ISO-8859-1 locale tests")
    built = subprocess.run(["localedef", "-i", "en_US", "-f", "ISO-8859-1",
                            str(where / "en_US.ISO-8859-1")], capture_output=True)
    if not (where / "en_US.ISO-8859-1").is_dir():  # localedef exits 1 for mere warnings
        missing(f"localedef failed: {built.stderr.decode(errors='replace')}",
                "ISO-8859-1 locale tests")
    return {"LOCPATH": str(where), "LC_ALL": "en_US.ISO-8859-1"}


@pytest.fixture(params=["C", "ISO-8859-1"])
def locale(request) -> tuple[dict[str, str], str]:
    """The environment of a non-UTF-8 locale, and the charset its terminal sends argv in."""
    forced = {"PYTHONUTF8": "0", "PYTHONIOENCODING": "", "PYTHONCOERCECLOCALE": "0"}
    if request.param == "C":
        return {**forced, "LC_ALL": "C"}, "utf-8"  # a UTF-8 terminal under LC_ALL=C
    return {**forced, **request.getfixturevalue("latin1_locale")}, "latin-1"


@pytest.fixture
def cafe(cw, tmp_path) -> None:
    """A job named café with a success and a failure whose output holds an é and a dash."""
    daily = ["--schedule", "30 2 * * *", "--tz", "Europe/Paris"]
    cw("run", "-n", "café", *daily, "--date", "2026-01-05", "--", "true", check_rc=0)
    cw("run", "-n", "café", *daily, "--date", "2026-01-06", "--", "sh", "-c",
       "echo 'é — fin'; exit 3", check_rc=3)


def _in(cw, locale, *args: str, rc: int | tuple = 0, stdin: bytes | None = None):
    env, charset = locale
    proc = subprocess.run([*cw.argv, *(a.encode(charset) for a in args)], env=cw.env(env),
                          input=stdin, capture_output=True, timeout=60)
    assert b"internal error" not in proc.stderr and b"Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in ((rc,) if isinstance(rc, int) else rc), (args, proc.stderr)
    return proc


def _shown(proc, locale) -> str:
    """What a person sees: stdout in the locale's charset, which it must be."""
    env, charset = locale
    text = proc.stdout.decode("ascii" if env["LC_ALL"] == "C" else "latin-1")
    assert "\u00c3" not in text  # no UTF-8 read as Latin-1 (mojibake)
    return text


def test_status_and_history_of_a_job_work_in_any_locale(cw, cafe, locale):
    env, _ = locale
    name = "caf?" if env["LC_ALL"] == "C" else "café"
    for args in (["status"], ["status", "café"], ["history", "café"]):
        shown = _shown(_in(cw, locale, *args), locale)
        if args == ["status"]:
            assert f" {name} " in shown, shown
        else:
            assert "+ 1 ok" in shown and "x 1 failed (exit 3)" in shown, shown  # ✓ and ✗
            assert f"{name[-1]} - fin" in shown, shown  # the output tail's é and dash
    assert _in(cw, locale, "logs", "café").stdout == "é — fin\n".encode()  # bytes as written
    assert f"{name}: no running run holds a lease" in _shown(_in(cw, locale, "unlock", "café"),
                                                              locale)


def test_explain_and_lint_work_in_any_locale(cw, tmp_path, locale):
    shown = _shown(_in(cw, locale, "explain", "30 2 * * *", "--tz", "Europe/Paris"), locale)
    assert "02:00-03:00 does not exist in Europe/Paris" in shown, shown  # an en dash, in ASCII
    crontab = tmp_path / "crontab"
    crontab.write_bytes(CRONTAB)
    shown = _shown(_in(cw, locale, "lint", str(crontab), rc=(0, 1)), locale)
    assert " - fix: " in shown, shown  # the em dash of each finding
    shown = _shown(_in(cw, locale, "lint", "-", rc=(0, 1), stdin=CRONTAB), locale)
    assert "<stdin>:3:" in shown, shown


def test_what_programs_read_is_exact_in_any_locale(cw, cafe, tmp_path, locale):
    crontab = tmp_path / "crontab"
    crontab.write_bytes(CRONTAB)
    utf8 = {"LC_ALL": "C.UTF-8"}
    for args in (["wrap", str(crontab)], ["wrap", "--diff", str(crontab)],
                 ["status", "--format", "prometheus"], ["status", "--json"],
                 ["history", "café", "--json"],
                 ["explain", "@daily", "--json", "--from", "2026-01-01T00:00:00Z"]):
        expected = cw(*args, env=utf8, check_rc=0).stdout
        got = _in(cw, locale, *args).stdout
        if args[0] == "status" or args[0] == "history":  # times move on: compare the names
            assert (b"caf\xc3\xa9" in got) == (b"caf\xc3\xa9" in expected), got
            assert "caf\\u00e9".encode() in got or b"caf\xc3\xa9" in got, got
        else:
            assert got == expected, args
    check = _in(cw, locale, "status", "--check", rc=(0, 1, 2))
    assert "'café_missed'".encode() in check.stdout, check.stdout  # perfdata names it exactly


def test_a_job_named_in_a_non_utf8_locale_is_the_same_job(cw, tmp_path, locale):
    """café typed in an ASCII (LC_ALL=C) or ISO-8859-1 terminal names the ledger's café."""
    seen = tmp_path / "seen"
    _in(cw, locale, "run", "-n", "café", "--", "sh", "-c", f'echo "$CRONWRAP_JOB" > {seen}')
    env, charset = locale
    assert seen.read_bytes() == "café\n".encode(charset)  # the job's locale, or UTF-8 bytes
    (job,) = cw.json("status", "--json")
    assert job["job"] == "café"
