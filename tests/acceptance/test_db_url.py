"""``--db`` takes any libpq connection string or URI (issue 12 §4), through the executable.

Each test runs a job with ``--db`` (or ``CRONWRAP_DB``), then reads it back with ``history
--json``. The wrapper is stopped right after its claim (CRONWRAP_FAILPOINT=after_claim), while
its connection is still open (it closes it before the job starts, so that a running job holds
no connection), and the test reads that session's application_name: which of the operator's
parameters reached the server. ``search_path`` shows the same for ``options``: the ledger's
tables are made in the schema it names.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import psycopg
import pytest

from tests.needs import missing
from psycopg import conninfo

pytestmark = pytest.mark.postgres

TABLES = {"cronwrap_jobs", "cronwrap_meta", "cronwrap_runs", "cronwrap_tallies",
          "cronwrap_duration_buckets", "cronwrap_duration_tallies", "cronwrap_attempts",
          "cronwrap_pauses", "cronwrap_alerts", "cronwrap_alert_sends", "cronwrap_steps",
          "cronwrap_usage", "cronwrap_day_counts", "cronwrap_day_other_counts"}


def server(pg_dsn: str) -> dict[str, str]:
    """host, port, user and dbname of the test's fresh database."""
    return conninfo.conninfo_to_dict(pg_dsn)


def keywords(pg_dsn: str) -> str:
    """The test database as libpq keyword=value pairs, as an operator writes them."""
    p = server(pg_dsn)
    return f"host={p['host']} port={p['port']} user={p['user']} dbname={p['dbname']}"


def sessions(pg_dsn: str) -> list[str]:
    """The application names of the other sessions on the test's database."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        return sorted(row[0] for row in conn.execute(
            "SELECT application_name FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()"))


def run_and_read(cw, db: str | None, name: str, pg_dsn: str,
                 env: dict[str, str] | None = None) -> list[str]:
    """Run one job on ledger ``db`` and read it back; the application names cronwrap's
    connection showed right after its claim."""
    from tests.acceptance.test_faults import kill_wrapper, stop_when_stopped

    given = ["--db", db] if db is not None else []
    wrapper = cw.popen("run", "-n", name, *given, "--", "true",
                       env={**(env or {}), "CRONWRAP_FAILPOINT": "after_claim"})
    try:
        stop_when_stopped(wrapper, "after_claim")
        names = sessions(pg_dsn)
        wrapper.send_signal(signal.SIGCONT)
        assert wrapper.wait(30) == 0, wrapper.stderr.read()
    finally:
        kill_wrapper(wrapper)
    runs = cw.json("history", name, "--json", *given, env=env)
    assert [(r["job"], r["status"], r["exit_code"]) for r in runs] == [(name, "succeeded", 0)]
    return names


def tables(pg_dsn: str) -> dict[str, str]:
    """cronwrap's tables in the test database, by name, with their schema."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        rows = conn.execute("SELECT table_name, table_schema FROM information_schema.tables "
                            "WHERE table_name LIKE 'cronwrap%'").fetchall()
    return dict(rows)


def create_schema(pg_dsn: str, schema: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")


def test_keyword_value_pairs_with_sslmode_and_application_name(cw, pg_dsn):
    db = f"{keywords(pg_dsn)} sslmode=disable application_name=cw_pairs"
    assert run_and_read(cw, db, "pairs", pg_dsn) == ["cw_pairs"]
    assert tables(pg_dsn) == dict.fromkeys(TABLES, "public")


def test_a_uri_with_query_parameters(cw, pg_dsn):
    create_schema(pg_dsn, "cwuri")
    db = (pg_dsn + "?sslmode=disable&connect_timeout=10&application_name=cw_uri"
          "&options=-c%20search_path%3Dcwuri")
    assert run_and_read(cw, db, "uri", pg_dsn) == ["cw_uri"]
    assert tables(pg_dsn) == dict.fromkeys(TABLES, "cwuri")


def socket_directory(pg_dsn: str) -> str:
    """The directory of the server's Unix socket (/var/run/postgresql on Debian's)."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        listed = conn.execute("SHOW unix_socket_directories").fetchone()[0]
        port = conn.execute("SHOW port").fetchone()[0]
    for directory in (d.strip() for d in listed.split(",")):
        if os.path.exists(os.path.join(directory, f".s.PGSQL.{port}")):
            return directory
    missing(f"the server has no Unix socket here (unix_socket_directories = {listed!r})",
            "PostgreSQL tests")


def test_a_socket_directory_as_host_from_the_environment(cw, pg_dsn):
    p = server(pg_dsn)
    db = f"host={socket_directory(pg_dsn)} port={p['port']} user={p['user']} dbname={p['dbname']}"
    env = {"CRONWRAP_DB": db}
    assert run_and_read(cw, None, "socket", pg_dsn, env=env) == ["cronwrap"]
    assert tables(pg_dsn) == dict.fromkeys(TABLES, "public")


def test_quoted_options_keep_the_operators_search_path(cw, pg_dsn):
    create_schema(pg_dsn, "cwtest")
    db = f"{keywords(pg_dsn)} options='-c search_path=cwtest'"
    assert run_and_read(cw, db, "quoted", pg_dsn) == ["cronwrap"]
    assert tables(pg_dsn) == dict.fromkeys(TABLES, "cwtest")


def test_a_service_keeps_its_own_options_and_application_name(cw, pg_dsn, tmp_path: Path):
    """libpq reads a service's parameters only where the connection string sets none: the
    options and application_name cronwrap adds must not hide the service's."""
    create_schema(pg_dsn, "cwsvc")
    p = server(pg_dsn)
    services = tmp_path / "pg_service.conf"
    services.write_text(
        "# written by the test\n[other]\noptions=-c search_path=nowhere\n\n"
        f"[cwsvc]\nhost={p['host']}\nport={p['port']}\nuser={p['user']}\n"
        f"dbname={p['dbname']}\noptions=-c search_path=cwsvc\napplication_name=cw_service\n")
    env = {"PGSERVICEFILE": str(services)}
    assert run_and_read(cw, "service=cwsvc", "service", pg_dsn, env=env) == ["cw_service"]
    assert tables(pg_dsn) == dict.fromkeys(TABLES, "cwsvc")
    # What the connection string says still wins over the service.
    db = "service=cwsvc application_name=cw_override"
    assert run_and_read(cw, db, "override", pg_dsn, env=env) == ["cw_override"]


@pytest.mark.parametrize("db", ["host=x password", "nonsense",
                                "host=x password='S3cret pw' port",
                                "password=S3cret-pw host='x"])
def test_a_bad_connection_string_is_one_line_without_its_values(cw, tmp_path: Path, db):
    marker = tmp_path / "ran"
    for args in (["run", "-n", "bad", "--db", db, "--", "touch", str(marker)],
                 ["history", "bad", "--json", "--db", db]):
        proc = cw(*args)
        err = proc.stderr.decode()
        assert proc.returncode == 125, (args, err)
        assert len(err.strip().splitlines()) == 1 and err.startswith("cronwrap: "), err
        assert "S3cret" not in err + proc.stdout.decode()
    assert not marker.exists()
