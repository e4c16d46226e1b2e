"""The embedded ledger: one SQLite file, WAL mode, busy timeout; zero set-up, one host."""

from __future__ import annotations

import os
import sqlite3
import time
from contextlib import contextmanager
from datetime import datetime, timezone

from cronwrap import jsontext
from cronwrap.errors import LedgerError
from cronwrap.errors import PathError
from cronwrap.ledger import sql
from cronwrap.ledger.sqlcore import DAY, SqlLedger
from cronwrap.model import DURATION_BUCKETS
from cronwrap.paths import check_existing, open_private
from cronwrap.record import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, Callable, Iterator

    from cronwrap.ledger.sqlcore import Row

BUSY_TIMEOUT_S = 10.0
SIDECARS = ("-wal", "-shm", "-journal")  # the files SQLite keeps next to a database
# Rows of each index ANALYZE samples: a million-run ledger is analysed in milliseconds, and the
# statistics still tell the planner which index finds a job's runs.
ANALYSIS_LIMIT = 1000


def ledger_message(path: object, exc: Exception) -> str:
    text = str(exc)
    if "not a database" in text or "disk image is malformed" in text:
        return (f"ledger {path}: {text}: the file is damaged; move it aside (mv {path} "
                f"{path}.broken) and cronwrap starts a new ledger")
    return f"ledger {path}: {text}"


def _statements(script: str) -> list[str]:
    """A migration's statements: split at each semicolon that ends one, which
    ``sqlite3.complete_statement`` tells (a trigger's body has semicolons of its own)."""
    done, statement = [], ""
    for part in script.split(";"):
        statement += part + ";"
        if sqlite3.complete_statement(statement):
            done.append(statement)
            statement = ""
    return [s for s in done if s.strip(" \n;")]


class SqliteLedger(SqlLedger):
    """``path=None`` gives an in-memory ledger (the unit tests' ledger).

    ``read_only``: for the commands that only read (status, history, logs). The file is
    opened with SQLite's mode=ro, so they work on a read-only or full file system, when
    monitoring matters most; nothing is created or migrated (a missing ledger reads as an
    empty one, an older or newer schema as it is: rows are read by column name)."""

    def __init__(self, path: str | None, clock: Callable[[], float] | None = None,
                 busy_timeout: float = BUSY_TIMEOUT_S, checkpoint_on_close: bool = True,
                 read_only: bool = False) -> None:
        super().__init__(sql.load("sqlite"))
        self.checkpoint_on_close = checkpoint_on_close
        self.writing = not read_only
        self.clock = clock or time.time
        self.busy_timeout = busy_timeout
        self.file = path  # as named: change_token watches it (even while it does not exist)
        if read_only and path is not None and not os.path.lexists(path):
            path = None  # nothing recorded yet: an empty ledger, and no file is made for it
        self.path = path or ":memory:"
        reading_file = read_only and path is not None
        if path is not None:
            try:  # 0600, no symlink, a regular file (one name, to write it); WAL files inherit the mode
                os.close(open_private(path, os.O_RDONLY if read_only else os.O_RDWR | os.O_CREAT))
                for sidecar in SIDECARS:  # SQLite opens these itself: even a reader writes -shm
                    check_existing(f"{path}{sidecar}")
            except PathError as exc:
                if not isinstance(exc.__cause__, OSError):
                    raise  # unsafe (symlink, another user's file): refused, never run around
                raise LedgerError(f"ledger {path}: {exc}") from exc  # read-only, full, …
        self.opened = self._identity()
        try:
            self.conn = self._open(str(self.path), reading_file)
            if not reading_file:  # reading tolerates older and newer schemas: nothing to migrate
                self.conn.execute("PRAGMA synchronous = NORMAL")
                self.conn.execute(f"PRAGMA analysis_limit = {ANALYSIS_LIMIT}")
                self._migrate()
            else:
                self._version()  # but not a damaged one
                self.expanded = self._expansion()
        except sqlite3.DatabaseError as exc:
            raise LedgerError(ledger_message(path, exc)) from exc

    def _identity(self) -> tuple[int, int] | None:
        """The file this object reads (device, inode); None for none."""
        try:
            info = os.stat(self.file) if self.file is not None else None
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise LedgerError(f"ledger {self.file}: {exc.strerror}") from exc
        return None if info is None else (info.st_dev, info.st_ino)

    def change_token(self) -> str | None:
        """SQLite's data_version of this connection (another connection's commit changes it),
        as long as the name still leads to the file it opened: a ledger made since (none was
        there) or moved into place (a backup restored) is one this connection cannot see."""
        if self._identity() != self.opened:
            return None
        return super().change_token()

    def _open(self, path: str, read_only: bool) -> sqlite3.Connection:
        """mode=ro for a read-only open. If even that fails (its -shm file cannot be made on
        a full or read-only disk), and the WAL holds nothing, the file alone is the ledger:
        opened immutable, which needs no -shm (nobody can write it there anyway)."""
        if not read_only:
            return self._connect(path, uri=False)
        from urllib.parse import quote

        absolute = quote(os.path.abspath(path).lstrip("/"))  # "//x" would name a URI authority
        conn = self._connect(f"file:///{absolute}?mode=ro", uri=True)
        try:
            conn.execute("PRAGMA user_version").fetchone()
            return conn
        except sqlite3.OperationalError:
            conn.close()
            try:
                wal_empty = os.stat(f"{path}-wal").st_size == 0
            except FileNotFoundError:
                wal_empty = True
            if not wal_empty:
                raise
            return self._connect(f"file:///{absolute}?mode=ro&immutable=1", uri=True)

    def _connect(self, target: str, uri: bool) -> sqlite3.Connection:
        conn = sqlite3.connect(target, timeout=self.busy_timeout, isolation_level=None,
                               check_same_thread=False, uri=uri)
        conn.row_factory = sqlite3.Row
        return conn

    _version_at = "PRAGMA user_version"

    def _repair_hint(self, label: object) -> str:
        return (f"restore it from a backup, or move it aside (mv {label} {label}.broken) and "
                "cronwrap starts a new ledger")

    def _version(self) -> int:
        return self.stored_version(self.conn.execute("PRAGMA user_version").fetchone()[0],
                                   self.path)

    def _expansion(self) -> int:
        try:
            row = self.conn.execute(self.q["expansion"]).fetchone()
        except sqlite3.OperationalError:  # no meta table: no expansion yet
            return 0
        return int(row[0]) if row and str(row[0]).isdigit() else 0

    def _migrate(self) -> None:
        """Numbered migrations, then expansions, each applied once, all in one BEGIN IMMEDIATE
        transaction."""
        found = self._version()
        self.check_version(found, self.path)
        self.expanded = self._expansion()
        if found == self.schema_version and self.expanded >= self.expansion_level:
            return
        mode = self.conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if mode != "wal" and self.path != ":memory:":
            raise LedgerError(f"ledger {self.path}: cannot switch to WAL mode")
        with self._transaction(write=True):
            version = self._version()
            self.check_version(version, self.path)
            for number in range(version + 1, self.schema_version + 1):
                for statement in _statements(self.q[f"migration_{number}"]):
                    self.conn.execute(statement)
            expanded = self._expansion()
            for number in range(expanded + 1, self.expansion_level + 1):
                for statement in _statements(self.q[f"expansion_{number}"]):
                    self.conn.execute(statement)
            if expanded < self.expansion_level:
                for bound in DURATION_BUCKETS:
                    self.conn.execute(self.q["duration_bucket"], {"le_ms": round(bound * 1000)})
                self.conn.execute(self.q["set_expansion"], {"n": str(self.expansion_level)})
            self.conn.execute(f"PRAGMA user_version = {self.schema_version}")
            self.conn.execute(self.q["analyze"])  # what the schema change left, for the planner
        self.expanded = max(expanded, self.expansion_level)

    def init_schema(self) -> None:
        self._migrate()  # the open migrated already, unless another process has since

    @contextmanager
    def _transaction(self, write: bool) -> Iterator[sqlite3.Cursor]:
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

    def _exec(self, cur: sqlite3.Cursor, name: str, **params: Any) -> int:
        return cur.execute(self.q[name], params).rowcount

    def _fetchone(self, cur: sqlite3.Cursor) -> Row | None:
        row = cur.fetchone()
        return dict(row) if row is not None else None

    def _fetchall(self, cur: sqlite3.Cursor) -> list[Row]:
        # dict(row) asks each row for its keys and looks each value up by name: a third of
        # the time of 5,000 rows read for status; the names once, zipped with each row's values.
        rows = cur.fetchall()
        if not rows:
            return []
        names = rows[0].keys()
        return [dict(zip(names, r)) for r in rows]

    def _db_now(self, cur: sqlite3.Cursor) -> float:
        return self.clock()

    def _to_db(self, t: datetime | None) -> float | None:
        return None if t is None else t.timestamp()

    def _time(self, value: float) -> datetime:
        return datetime.fromtimestamp(value, timezone.utc)

    def _day_of(self, t: datetime) -> int:
        # The triggers' CAST(created_at / 86400 AS INTEGER), computed the same way.
        return int(t.timestamp() / DAY)

    def _day(self, number: int) -> int:
        return number

    def _ids(self, ids: Sequence[int] | Sequence[str]) -> str:
        return jsontext.dumps(ids)  # read back with json_each: SQLite has no array parameters

    def _bool(self, value: bool) -> int:
        return int(value)

    def close(self) -> None:
        # The last connection to close checkpoints the WAL (two fsyncs, ~15 ms). A cron firing
        # that exits right after may skip that: the next connection or SQLite's automatic
        # checkpoint every 1000 pages does it, and committed transactions are safe in the WAL.
        # A writer that closes (prune, pause, watch, db: not a firing) first lets SQLite
        # refresh the statistics its queries wanted (bounded by ANALYSIS_LIMIT; usually nothing).
        if self.checkpoint_on_close:
            if self.writing:
                try:
                    self.conn.execute("PRAGMA optimize")
                except sqlite3.Error:
                    pass  # statistics are an optimisation: a busy or full ledger closes as it is
            self.conn.close()
