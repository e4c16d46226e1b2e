"""The embedded ledger: one SQLite file, WAL mode, busy timeout; zero set-up, one host."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from cronwrap.errors import LedgerError
from cronwrap.ledger import sql
from cronwrap.ledger.sqlcore import SqlLedger
from cronwrap.record import TYPE_CHECKING
from cronwrap.errors import PathError
from cronwrap.paths import open_private

if TYPE_CHECKING:
    from typing import Any, Callable, Iterator

SCHEMA_VERSION = 1
BUSY_TIMEOUT_S = 10.0


def ledger_message(path: object, exc: Exception) -> str:
    text = str(exc)
    if "not a database" in text or "malformed" in text:
        return (f"ledger {path}: {text}: the file is damaged; move it aside (mv {path} "
                f"{path}.broken) and cronwrap starts a new ledger")
    return f"ledger {path}: {text}"


class SqliteLedger(SqlLedger):
    """``path=None`` gives an in-memory ledger (the unit tests' ledger)."""

    def __init__(self, path: Path | None, clock: Callable[[], float] | None = None,
                 busy_timeout: float = BUSY_TIMEOUT_S, checkpoint_on_close: bool = True) -> None:
        super().__init__(sql.load("sqlite"))
        self.checkpoint_on_close = checkpoint_on_close
        self.path = path or ":memory:"
        self.clock = clock or time.time
        self.busy_timeout = busy_timeout
        if path is not None:
            try:
                os.close(open_private(path))  # 0600, no symlink; WAL files inherit the mode
            except PathError as exc:
                if not isinstance(exc.__cause__, OSError):
                    raise  # unsafe (symlink, another user's file): refused, never run around
                raise LedgerError(f"ledger {path}: {exc}") from exc  # read-only, full, …
        try:
            self.conn = sqlite3.connect(self.path, timeout=busy_timeout, isolation_level=None,
                                        check_same_thread=False)
            self.conn.row_factory = sqlite3.Row
            self.conn.execute("PRAGMA synchronous = NORMAL")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise LedgerError(ledger_message(path, exc)) from exc

    def _migrate(self) -> None:
        if self.conn.execute("PRAGMA user_version").fetchone()[0] >= SCHEMA_VERSION:
            return
        mode = self.conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if mode != "wal" and self.path != ":memory:":
            raise LedgerError(f"ledger {self.path}: cannot switch to WAL mode")
        with self._transaction(write=True):
            version = self.conn.execute("PRAGMA user_version").fetchone()[0]
            for number in range(version + 1, SCHEMA_VERSION + 1):
                for statement in self.q[f"migration_{number}"].split(";"):
                    if statement.strip():
                        self.conn.execute(statement)
            self.conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    @contextmanager
    def _transaction(self, write: bool) -> Iterator[Any]:
        try:
            # BEGIN IMMEDIATE takes the write lock up front: step 1 of the claim protocol.
            self.conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield self.conn.cursor()
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise LedgerError(ledger_message(self.path, exc)) from exc

    def _exec(self, cur: sqlite3.Cursor, name: str, **params: Any) -> None:
        cur.execute(self.q[name], params)

    def _fetchone(self, cur: sqlite3.Cursor) -> dict | None:
        row = cur.fetchone()
        return dict(row) if row is not None else None

    def _fetchall(self, cur: sqlite3.Cursor) -> list[dict]:
        return [dict(r) for r in cur.fetchall()]

    def _db_now(self, cur: Any) -> float:
        return self.clock()

    def _to_db(self, t: datetime | None) -> float | None:
        return None if t is None else t.timestamp()

    def _from_db(self, value: Any) -> datetime | None:
        return None if value is None else datetime.fromtimestamp(value, timezone.utc)

    def _ids(self, ids: list[int]) -> str:
        return json.dumps(ids)  # read back with json_each: SQLite has no array parameters

    def _bool(self, value: bool) -> int:
        return int(value)

    def close(self) -> None:
        # The last connection to close checkpoints the WAL (two fsyncs, ~15 ms). A cron firing
        # that exits right after may skip that: the next connection or SQLite's automatic
        # checkpoint every 1000 pages does it, and committed transactions are safe in the WAL.
        if self.checkpoint_on_close:
            self.conn.close()
