"""A ledger by its URL: ``sqlite:///PATH``, the embedded default, or PostgreSQL."""

from __future__ import annotations

from cronwrap.errors import UsageError
from cronwrap.paths import Dirs, check_parent, ensure_private_dir
from cronwrap.record import TYPE_CHECKING

if TYPE_CHECKING:
    from cronwrap.ledger.base import Ledger

ADMIN_DB_WAIT = 5.0  # status, history, … wait this long for a full or restarting server


def open_ledger(url: str | None, dirs: Dirs, exiting: bool = False,
                read_only: bool = False, wait: float = ADMIN_DB_WAIT,
                upgrade: bool = False) -> Ledger:
    """exiting: the process exits right after (a cron firing): skip SQLite's close-time
    checkpoint. read_only: for commands that only read; nothing is created or migrated.
    wait: seconds a full or restarting PostgreSQL server is waited for (--db-wait).
    upgrade: apply this release's migrations to an existing PostgreSQL ledger (``db init``,
    ``db upgrade``); without it only an empty database gets a schema. A SQLite ledger is one
    host's: it is migrated on first use."""
    if url and not url.startswith("sqlite:///"):
        try:
            from cronwrap.ledger.postgres import PostgresLedger  # psycopg only for PostgreSQL
        except ImportError as exc:
            raise without_psycopg(exc) from None
        return PostgresLedger(url, read_only=read_only, wait=wait, upgrade=upgrade)
    from cronwrap.ledger.sqlite import SqliteLedger

    if url:
        file = url[len("sqlite://"):]
        check_parent(file)
    elif read_only:
        file = dirs.ledger_file
    else:
        ensure_private_dir(dirs.state)
        file = dirs.ledger_file
    return SqliteLedger(file, checkpoint_on_close=not exiting, read_only=read_only)


def without_psycopg(exc: ImportError) -> ImportError | UsageError:
    """PostgreSQL support is the wheel's ``postgres`` extra (a SQLite-only host does not carry
    psycopg-binary): its absence is an install to fix, told in one line (exit 125), never a
    traceback. psycopg without a libpq wrapper raises a plain ImportError that names none."""
    name = exc.name or ""
    if name.split(".")[0] in ("psycopg", "psycopg_binary", "psycopg_c") or "libpq" in str(exc):
        return UsageError("a PostgreSQL ledger needs psycopg, which this installation lacks: "
                          "install cronwrap with its postgres extra (from the checkout: pip "
                          "install '.[postgres]'), or use the Debian package or the "
                          "self-contained build, which bundle it")
    return exc
