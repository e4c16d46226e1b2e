"""Bad input and damaged files (issue 20 §6), end to end through the installed executable.

Each test here failed on b9ec9f4: an endless crontab was read until memory ran out, a damaged
schema version was an internal error, hard links were written through, and a non-UTF-8 locale
made the read commands fail. (The catch-up count of §6 is in test_schedule.py.)
"""

from __future__ import annotations

import sqlite3

import pytest

from tests.acceptance.test_hardening_input import refused


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
