"""The shared ledger: PostgreSQL through psycopg 3, for several hosts carrying one crontab.

This is the only module that imports psycopg (about 100 ms): the runner imports it only for a
PostgreSQL URL. It holds persistence only; the claim protocol is ``SqlLedger``'s. Every driver
error becomes a ``LedgerError`` here, and no message leaves this module with the password in it.
"""

from __future__ import annotations

import itertools
import math
import os
import random
import re
import threading
import time
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Iterator

import psycopg
from psycopg import conninfo, errors
from psycopg.rows import dict_row

from cronwrap.errors import LedgerError
from cronwrap.ledger import sql
from cronwrap.ledger.sqlcore import SqlLedger
from cronwrap.model import DURATION_BUCKETS, Claim, ClaimRequest, Finish, Reason, Run
from cronwrap.redact.redactor import url as redact_url

if TYPE_CHECKING:
    from cronwrap.ledger.sqlcore import Row

# pg_advisory_xact_lock key for schema creation: the bytes of "cronwrap" as a bigint. Advisory
# locks are per database, so two ledgers on one cluster never wait for each other.
SCHEMA_LOCK = int.from_bytes(b"cronwrap", "big")
STATEMENT_TIMEOUT_MS = 15_000  # a hung server or a held lock cannot hang a cron job forever
# A session idle inside a transaction (its wrapper SIGSTOPped mid-claim) is ended by the
# server, releasing the job's row lock before the hosts waiting for it reach their statement
# timeout; cronwrap's own transactions never pause between statements.
IDLE_IN_TRANSACTION_MS = 10_000
# A server that stops answering without closing the connection (a partition, a hung proxy)
# would block a statement forever: statement_timeout runs on the server, keepalives only see
# a dead peer. Past this, the connection's socket is shut down by the watchdog thread, so the
# call fails and the heartbeat's lease check (or the outbox) takes over.
TRANSACTION_TIMEOUT_S = 20.0
CONNECT_HINT = "check --db / CRONWRAP_DB, or use --on-db-error run-unrecorded"
# Detect a vanished server (no RST, e.g. a partition) in ~30 s instead of the kernel's hours.
TCP_SETTINGS = {"keepalives": "1", "keepalives_idle": "10", "keepalives_interval": "5",
                "keepalives_count": "3", "tcp_user_timeout": "30000"}

# Where libpq looks for pg_service.conf when PGSYSCONFDIR is not set is fixed when it is built:
# this directory for Debian's libpq and for the one psycopg-binary bundles.
SERVICE_SYSCONFDIR = "/etc/postgresql-common"
_C_BLANKS = " \t\n\r\f\v"  # C's isspace(), as libpq strips the lines of a service file

_URL_SCHEMES = ("postgresql://", "postgres://")
_KV_PASSWORD = re.compile(r"(\b(?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*(?:'|$)|\S*)",
                          re.IGNORECASE)
_QUERY_PASSWORD = re.compile(r"([?&](?:ssl)?password=)[^&]*", re.IGNORECASE)
# One keyword of a key=value string, with its value if it has one (quoted values may hold
# blanks and \' escapes; an unterminated quote runs to the end).
_KV_ITEM = re.compile(r"\s*([^\s=']+)\s*(=\s*(?:'(?:[^'\\]|\\.)*(?:'|$)|(?:[^\s'\\]|\\.)*))?")


class _Watchdog:
    """Shuts a connection's socket down once its statement or transaction has outlived
    TRANSACTION_TIMEOUT_S: one daemon thread for the whole process, started at the first
    statement, instead of a timer thread per statement (a thread's start and end cost more
    than a claim's own client work). ``arm`` and ``disarm`` only write a dict under a lock:
    the thread is never woken for them. Every deadline is now + the same timeout, so none is
    earlier than the thread's next wake-up, which it never sleeps past: it wakes at the
    earliest deadline armed, or a timeout from now when none is."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.lock = threading.Lock()
        self.armed: dict[int, tuple[float, psycopg.Connection[Row]]] = {}
        self.tokens = itertools.count()
        self.thread: threading.Thread | None = None
        os.register_at_fork(after_in_child=self._forked)

    def arm(self, conn: psycopg.Connection[Row]) -> int:
        token = next(self.tokens)
        with self.lock:
            self.armed[token] = (time.monotonic() + self.seconds, conn)
            if self.thread is None:
                self.thread = threading.Thread(target=self._watch, name="cronwrap-pg-watchdog",
                                               daemon=True)
                self.thread.start()
        return token

    def disarm(self, token: int) -> None:
        with self.lock:
            self.armed.pop(token, None)

    def _forked(self) -> None:
        """A forked child has none of its parent's threads, nor its statements."""
        self.lock = threading.Lock()
        self.armed = {}
        self.thread = None

    def _watch(self) -> None:
        while True:
            now = time.monotonic()
            with self.lock:
                late = [t for t, (deadline, _) in self.armed.items() if deadline <= now]
                for token in late:
                    _shut_down(self.armed.pop(token)[1])
                nearest = min((d for d, _ in self.armed.values()), default=now + self.seconds)
            time.sleep(max(nearest - now, 0.01))


def _shut_down(conn: psycopg.Connection[Row]) -> None:
    """Shut the connection's socket down under libpq, so the call blocked on it fails."""
    import socket

    try:
        sock = socket.socket(fileno=os.dup(conn.fileno()))
    except (OSError, psycopg.Error):
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        sock.close()


_WATCHDOG = _Watchdog(TRANSACTION_TIMEOUT_S)


def redact_dsn(dsn: str) -> str:
    """``dsn`` with its password replaced by ``***``, in URL or key=value form.

    A URL goes through ``redact.url``, the one redaction of URLs (everything up to its last
    ``@``: a password holding a raw ``@`` or ``/`` is still hidden whole); ``?password=`` is
    hidden too.
    """
    if dsn.lower().startswith(_URL_SCHEMES):
        return _QUERY_PASSWORD.sub(r"\1***", redact_url(dsn))
    return _KV_PASSWORD.sub(r"\1***", dsn)


def _keywords(dsn: str) -> list[str]:
    """The keywords of a key=value string, its values (quoted or not) skipped; a word with no
    ``=`` after it may be a misplaced value and is left out."""
    keys, pos = [], 0
    while (match := _KV_ITEM.match(dsn, pos)) and match.end() > pos:
        if match.group(2) is not None:
            keys.append(match.group(1))
        pos = match.end()
    return keys


def _invalid_dsn(dsn: str, exc: psycopg.Error) -> LedgerError:
    """libpq's parse errors quote what they could not read, which may be the password: name
    the URL without its user info, or a key=value string by its keywords only, and keep a
    quoted word of the reason only when it is a keyword."""
    if dsn.lower().startswith(_URL_SCHEMES):
        label, shown = redact_dsn(dsn), set()
    else:
        keys = _keywords(dsn)
        label, shown = " ".join(f"{key}=***" for key in keys) or "(no key=value pair)", set(keys)
    shown |= {o.keyword.decode() for o in psycopg.pq.Conninfo.get_defaults()} | {"=", "]"}
    reason = re.sub(r'"([^"]*)"', lambda m: m.group(0) if m.group(1) in shown else '"***"',
                    _reason(exc, dsn))
    return LedgerError(f"ledger {label}: invalid connection string: {reason} "
                       "(check --db / CRONWRAP_DB)")


def _passwords(dsn: str) -> list[str]:
    """Every spelling of the password a driver message might echo: as written and as parsed."""
    found = [os.environ.get("PGPASSWORD", "")]
    try:
        parsed = conninfo.conninfo_to_dict(dsn)
        found += [str(parsed.get("password") or ""), str(parsed.get("sslpassword") or "")]
    except psycopg.Error:
        pass
    if dsn.lower().startswith(_URL_SCHEMES):
        userinfo = dsn.partition("://")[2].rpartition("@")[0]
        found.append(userinfo.partition(":")[2])
    found += [m.group(2).strip("'") for m in _KV_PASSWORD.finditer(dsn)]
    # The longest first, so a password containing another is not left half-replaced.
    return sorted({p for p in found if p}, key=len, reverse=True)


def scrub(text: str, dsn: str) -> str:
    for password in _passwords(dsn):
        text = text.replace(password, "***")
    return text


def _reason(exc: BaseException, dsn: str) -> str:
    """The driver's message on one line, without libpq's preamble or the password."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[0] if lines else type(exc).__name__
    text = re.sub(r'^connection failed: ', "", text)
    text = re.sub(r'^connection to server (at|on) .*?failed: ', "", text)
    text = re.sub(r"^(FATAL|ERROR):\s+", "", text)
    if text[:1].isupper() and text[1:2].islower():
        text = text[0].lower() + text[1:]
    return scrub(text, dsn)


def _expansion(row: Row | None) -> int:
    """The expansions applied, from a ``schema_version`` row: none without the key."""
    value = row.get("expansion") if row else None
    return int(value) if isinstance(value, str) and value.isdigit() else 0


def _label(dsn: str) -> str:
    """How messages name the ledger: the redacted DSN, or the PG* variables that stand for it."""
    if dsn.strip():
        return redact_dsn(dsn)
    env = " ".join(f"{k}={os.environ[k]}" for k in ("PGHOST", "PGPORT", "PGDATABASE", "PGUSER")
                   if os.environ.get(k))
    return f"postgresql ({env or 'libpq defaults'})"


def with_session_settings(given: dict[str, str], connect_timeout: float) -> dict[str, str]:
    """The operator's connection parameters ``given`` plus cronwrap's own, each of those only
    where the operator set none: in the connection string, in the service it names, or in a
    PG* variable (libpq's order of precedence). cronwrap adds no ``options``: PgBouncer
    refuses that startup parameter; its session settings are set per transaction (see
    _SESSION_SETTINGS), and an operator's own ``options`` reach the server untouched."""
    theirs = {**service_settings(given), **given}
    params = {**{k: v for k, v in TCP_SETTINGS.items() if k not in theirs}, **given}
    # libpq counts whole seconds and treats anything below 2 as 2.
    if "connect_timeout" not in theirs and not os.environ.get("PGCONNECT_TIMEOUT"):
        params["connect_timeout"] = str(max(2, math.ceil(connect_timeout)))
    if "fallback_application_name" not in theirs:  # below application_name and PGAPPNAME
        params["fallback_application_name"] = "cronwrap"
    return params


def service_settings(given: dict[str, str]) -> dict[str, str]:
    """The parameters of the service the connection names (``service``, else PGSERVICE), from
    the first file that defines it, in libpq's order: ``servicefile``, PGSERVICEFILE or
    ~/.pg_service.conf, then pg_service.conf in PGSYSCONFDIR. libpq reads a service's value
    only for a keyword the connection string leaves out, so a parameter cronwrap adds would
    hide the service's own. Empty without a service, or when none is found (libpq then says
    so as it connects)."""
    service = given.get("service") or os.environ.get("PGSERVICE")
    if not service:
        return {}
    user_file = given.get("servicefile") or os.environ.get("PGSERVICEFILE")
    if user_file is None:
        user_file = os.path.join(os.path.expanduser("~"), ".pg_service.conf")
    system_dir = os.environ.get("PGSYSCONFDIR", SERVICE_SYSCONFDIR)
    for file in (user_file, os.path.join(system_dir, "pg_service.conf")):
        found = _service_section(file, service)
        if found is not None:
            return found
    return {}


def _service_section(file: str, service: str) -> dict[str, str] | None:
    """The ``keyword=value`` lines of the first ``[service]`` section of ``file`` as libpq
    reads them (blank and ``#`` lines skipped, no blanks around ``=``); None without one."""
    try:
        with open(file, encoding="utf-8") as handle:
            lines = handle.read().split("\n")
    except (OSError, UnicodeDecodeError):
        return None
    found: dict[str, str] | None = None
    for line in (raw.strip(_C_BLANKS) for raw in lines):
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            if found is not None:
                break  # the section ends at the next one
            found = {} if line[1:].startswith(service + "]") else None
        elif found is not None:
            keyword, _, value = line.partition("=")
            found[keyword] = value
    return found


class PostgresLedger(SqlLedger):
    """``dsn``: a ``postgresql://`` URL or libpq key=value string; empty uses the PG* variables.

    Built for fleets and for PgBouncer in transaction pooling mode: no startup parameter but
    the libpq basics (the session settings are set per transaction, with set_config(…, true)),
    no server-side prepared statement, nothing kept in the session between transactions. A
    claim, a lease renewal and a finish are one statement each, so one round trip.

    ``wait``: how long a server that is full ("too many connections"), starting up, shutting
    down or not answering is waited for, with full-jitter exponential backoff, before a
    connection attempt fails; an error that waiting cannot cure (authentication, an unknown
    database) fails at once. ``idle()`` closes the connection: from then on each operation
    connects for its own length, so a running job costs the server nothing between renewals.

    ``read_only``: for the commands that only read: an older or newer schema is read as it
    is (rows by column name), never migrated, so a monitoring role with SELECT rights only
    works; only a database without any schema gets one. Otherwise a newer schema is refused
    when the ledger is opened (one short read), and so is an older one, which only
    ``upgrade`` (``db init``, ``db upgrade``) migrates; the claim function refuses a newer
    schema too (a host upgraded in the meantime)."""

    def __init__(self, dsn: str, clock: Callable[[], float] | None = None,
                 connect_timeout: float = 5, read_only: bool = False, wait: float = 0.0,
                 upgrade: bool = False) -> None:
        super().__init__(sql.load("postgres"))
        self.dsn = dsn
        self.clock = clock
        self.connect_timeout = connect_timeout
        self.wait = wait
        self.label = _label(dsn)
        self.conn: psycopg.Connection[Row] | None = None
        self._hold = True
        self._tx_now: datetime | None = None
        self.conn = self._connect()
        found, self.expanded = self._current_version()
        if found is None or upgrade:
            self.migrate(found)  # an empty database gets its schema on first use
        elif not read_only:
            self.check_schema(found)

    def check_schema(self, found: int) -> None:
        """What a wrapper checks as it opens the ledger: a newer schema is refused, and one
        that lacks this release's migrations or expansions is left as it is, for
        ``cronwrap db upgrade`` to bring up: ``run`` never changes the schema of a shared
        ledger, so that one upgraded host never changes it under the rest of the fleet."""
        self.check_version(found, self.label)
        if found < self.schema_version or self.expanded < self.expansion_level:
            raise LedgerError(
                f"ledger {self.label} lacks this release's schema changes (version {found}, "
                f"expansion {self.expanded}; this cronwrap's: {self.schema_version}, "
                f"{self.expansion_level}): run `cronwrap db upgrade` once, with this release; "
                "the hosts still on the older release keep working on the upgraded ledger")

    # -- connection ----------------------------------------------------------------------

    def _conninfo(self) -> str:
        try:
            given = {k: str(v) for k, v in conninfo.conninfo_to_dict(self.dsn).items()
                     if v is not None}  # parsed from a string, the values are strings
        except psycopg.Error as exc:
            raise _invalid_dsn(self.dsn, exc) from None  # its text may hold the password
        return conninfo.make_conninfo("", **with_session_settings(given, self.connect_timeout))

    def _connect(self, wait: float | None = None) -> psycopg.Connection[Row]:
        """A new connection, waiting up to ``wait`` (default: the ledger's) for a server that
        is full or restarting."""
        info = self._conninfo()
        deadline = time.monotonic() + (self.wait if wait is None else wait)
        for attempt in itertools.count():
            try:
                conn = psycopg.connect(info, autocommit=True, row_factory=dict_row,
                                       prepare_threshold=None)
                return conn
            except psycopg.Error as exc:
                pause = backoff(attempt)
                if not transient(exc) or time.monotonic() + pause > deadline:
                    error = self._error("cannot connect", exc, hint=CONNECT_HINT)
                    error.unreachable = True
                    raise error from exc
            time.sleep(pause)
        raise AssertionError("unreachable")

    @contextmanager
    def _connection(self, wait: float | None = None) -> Iterator[psycopg.Connection[Row]]:
        """The held connection, opened again if it broke; after ``idle()`` a connection of
        its own for each operation, closed at its end."""
        if self.conn is None or self.conn.closed:
            self.conn = self._connect(wait)
        try:
            yield self.conn
        finally:
            if not self._hold and self.conn is not None:
                self.conn.close()
                self.conn = None

    def idle(self) -> None:
        """Hold no connection from now on but for the length of each operation; operations
        no longer share a connection, so they no longer wait for each other."""
        self._hold = False
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    @contextmanager
    def _tx(self, write: bool = True) -> Iterator[psycopg.Cursor[Row]]:
        with self._shared(), self._transaction(write) as cur:
            yield cur

    def _shared(self) -> AbstractContextManager[object]:
        """The mutex that keeps threads off a held connection; nothing after idle()."""
        return self._mutex if self._hold else nullcontext()

    def _error(self, what: str, exc: psycopg.Error, hint: str | None = None) -> LedgerError:
        # The driver's exception stays chained for the debug log: scrub it as well.
        exc.args = tuple(scrub(a, self.dsn) if isinstance(a, str) else a for a in exc.args)
        message = f"ledger {self.label}: {what}: {_reason(exc, self.dsn)}"
        return LedgerError(f"{message} ({hint})" if hint else message)

    # -- schema --------------------------------------------------------------------------

    _version_at = "cronwrap_meta.schema_version"

    def _repair_hint(self, label: object) -> str:
        return ("restore the database from a backup, or write the version its tables are at: "
                "UPDATE cronwrap_meta SET value = 'N' WHERE key = 'schema_version' (this "
                f"cronwrap's is {self.schema_version})")

    def migrate(self, found: int | None = -1, functions: bool = False) -> int:
        """Bring the schema to ``schema_version``; returns the version found before
        (``found``: the version just read, when the caller has read it).

        The usual case is one short read that finds the schema current. Otherwise the
        migrations run in one transaction under an advisory lock, so many hosts starting at
        once create the schema once, and a waiter re-reads the version its predecessor wrote.
        The functions (postgres.sql's ``*_function`` blocks) are created again at the end of
        that transaction whenever a migration ran, or when ``functions`` asks (``db init``):
        the one copy of each, as this cronwrap has it.
        """
        if found == -1:
            found, self.expanded = self._current_version()
        if found is not None:
            self.check_version(found, self.label)
            if found == self.schema_version and self.expanded >= self.expansion_level \
                    and not functions:
                return found
        with self._tx() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            self._exec(cur, "create_meta")
            row = self._one(cur, "schema_version")
            version = self.stored_version(row["value"], self.label) if row else 0
            self.check_version(version, self.label)
            for number in range(version + 1, self.schema_version + 1):
                cur.execute(self.q[f"migration_{number}"])
                self._exec(cur, "set_schema_version", version=str(number))
            expanded = _expansion(row)
            for number in range(expanded + 1, self.expansion_level + 1):
                cur.execute(self.q[f"expansion_{number}"])
                self._exec(cur, "set_expansion", n=str(number))
            if functions or version < self.schema_version or expanded < self.expansion_level:
                for name in sql.functions(self.q):
                    cur.execute(self.q[name])
                for bound in DURATION_BUCKETS:
                    self._exec(cur, "duration_bucket", le_ms=round(bound * 1000))
                self._exec(cur, "analyze")  # what the schema change left, for the planner
        self.expanded = max(expanded, self.expansion_level)
        return found or 0

    def init_schema(self) -> None:
        self.migrate(functions=True)

    def _current_version(self) -> tuple[int | None, int]:
        """The recorded schema version (None when there is no schema yet) and expansion, in
        one statement."""
        try:
            rows = self._single("schema_version")[1]
        except LedgerError as exc:
            if isinstance(exc.__cause__, errors.UndefinedTable):
                return None, 0
            raise
        if not rows:
            return 0, 0
        return self.stored_version(rows[0]["value"], self.label), _expansion(rows[0])

    # -- one statement, one round trip ---------------------------------------------------

    def _single(self, name: str, wait: float | None = None,
                **params: Any) -> tuple[int, list[Row]]:
        """A statement of its own (autocommit): the rows it affected and those it returned.
        ``wait``: for a full or restarting server, instead of the ledger's own."""
        with self._shared():
            try:
                with self._connection(wait) as conn:
                    token = _WATCHDOG.arm(conn)
                    try:
                        cur = conn.execute(self.q[name], params)
                        rows = cur.fetchall() if cur.description else []
                        return cur.rowcount, rows
                    finally:
                        _WATCHDOG.disarm(token)
            except psycopg.Error as exc:
                raise self._failed(exc) from exc

    def _failed(self, exc: psycopg.Error) -> LedgerError:
        if isinstance(exc, errors.FeatureNotSupported) and "newer than this cronwrap" in str(exc):
            return LedgerError(f"ledger {self.label}: {_reason(exc, self.dsn)}: upgrade cronwrap "
                               "on this host (the ledger is left as it is)")
        error = self._error("query failed", exc)
        if self.conn is not None and self.conn.broken:
            self.conn.close()
            self.conn = None
        error.connection_lost = transient(exc)
        return error

    def _clock_now(self) -> datetime | None:
        """The injected clock (tests), else None: the statement takes the server's now()."""
        return None if self.clock is None else datetime.fromtimestamp(self.clock(), timezone.utc)

    def claim(self, req: ClaimRequest) -> Claim:
        """ARCHITECTURE.md §3's claim as one call of cronwrap_claim_unless_paused()
        (postgres.sql's claim_unless_paused_function: a paused job's firing is answered
        'paused', any other is cronwrap_claim()'s), the same protocol as SqlLedger.claim. A
        live run of this very runner in the way comes back as 'check' first: its PID is looked
        up here, and the function is called once more saying which of them are gone."""
        gone: list[int] = []
        checked = False
        while True:
            rows = self._single("claim", **self._claim_params(req, gone, checked))[1]
            checks = [r for r in rows if r["outcome"] == "check"]
            if not checks:
                break
            gone = [r["run"]["id"] for r in checks
                    if req.is_gone(r["run"]["pid"], r["run"]["pid_start"])]
            checked = True
        (row,) = rows
        pause = row["run"].pop("pause", None)
        run = self._run(_json_row(row["run"]))
        if row["outcome"] == "claimed":
            return Claim(run=run, took_over=row["took_over"])
        if row["outcome"] == Reason.PAUSED and pause is not None:
            return Claim(run=None, skip_reason=Reason.PAUSED, blocking=run,
                         pause=self._pause(_json_row(pause)))
        return Claim(run=None, skip_reason=row["outcome"], blocking=run)

    def _claim_params(self, req: ClaimRequest, gone: list[int], checked: bool) -> dict[str, Any]:
        job = req.job
        return dict(job=job.name, schedule=job.schedule, tz=job.tz,
                    key_template=job.key_template, settings=job.settings, run_key=req.run_key,
                    scheduled_at=req.scheduled_at, trigger=req.trigger, host=req.host,
                    pid=req.pid, pid_start=req.pid_start, boot_id=req.boot_id or None,
                    pid_ns=req.pid_ns or None, lease=float(req.lease),
                    overlap_skip=req.overlap_skip, force=req.force,
                    max_attempts=req.max_attempts, skew_ms=req.skew_ms,
                    now=self._clock_now(), gone=gone, checked=checked,
                    schema=self.schema_version)

    def heartbeat(self, run: Run, lease: float, wait: float | None = None) -> bool:
        return self._single("heartbeat", wait, **self._owner(run), now=self._clock_now(),
                            lease=float(lease))[0] == 1

    def finish(self, run: Run, result: Finish, wait: float | None = None) -> bool:
        return self._single(
            "finish", wait, **self._owner(run), now=self._clock_now(), status=result.status,
            skip_reason=result.skip_reason, duration_ms=result.duration_ms,
            exit_code=result.exit_code, signal=result.signal, timed_out=result.timed_out,
            error_tail=result.error_tail, log_path=result.log_path,
            cpu_user_ms=result.cpu_user_ms, cpu_system_ms=result.cpu_system_ms,
            max_rss_kb=result.max_rss_kb)[0] == 1

    def record_superseded(self, run: Run, result: Finish, wait: float | None = None) -> None:
        self._single("attempt_superseded", wait, **self._superseded(run, result))

    # -- dialect hooks -------------------------------------------------------------------

    @contextmanager
    def _transaction(self, write: bool) -> Iterator[psycopg.Cursor[Row]]:
        """BEGIN … COMMIT on the connection; the session settings for this transaction only
        (set_config local: nothing outlives it, as PgBouncer's transaction pooling needs),
        fetched with the server's now() in the same round trip."""
        self._tx_now = None
        try:
            with self._connection() as conn:
                token = _WATCHDOG.arm(conn)
                try:
                    with conn.transaction():
                        cur = conn.cursor()
                        settings = cur.execute(_SESSION_SETTINGS).fetchone()
                        assert settings is not None  # a SELECT without FROM: one row
                        self._tx_now = settings["now"]
                        yield cur
                finally:
                    _WATCHDOG.disarm(token)
        except psycopg.Error as exc:
            raise self._failed(exc) from exc

    def _exec(self, cur: psycopg.Cursor[Row], name: str, **params: Any) -> int:
        return cur.execute(self.q[name], params or None).rowcount

    def _fetchone(self, cur: psycopg.Cursor[Row]) -> Row | None:
        return cur.fetchone()

    def _fetchall(self, cur: psycopg.Cursor[Row]) -> list[Row]:
        return cur.fetchall()

    def _db_now(self, cur: psycopg.Cursor[Row]) -> datetime:
        """The injected clock, or the server's ``now()`` (the transaction's start, constant
        within it), fetched with the transaction's settings and passed to each statement."""
        if self.clock is not None:
            return datetime.fromtimestamp(self.clock(), timezone.utc)
        assert self._tx_now is not None  # set as the transaction began
        return self._tx_now

    def _to_db(self, t: datetime | None) -> datetime | None:
        return t

    def _time(self, value: datetime) -> datetime:
        return value.astimezone(timezone.utc)

    def _lease(self, seconds: float) -> float:
        return float(seconds)

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except psycopg.Error as exc:
                raise self._error("close failed", exc) from exc


def _keep_or(name: str, value: int) -> str:
    """set_config for this transaction only: a value the operator set for the session
    (options, ALTER ROLE/DATABASE … SET) wins; cronwrap's applies where none is set (0)."""
    current = f"current_setting('{name}')"
    return f"set_config('{name}', CASE WHEN {current} = '0' THEN '{value}' ELSE {current} END, true)"


# jit off: cronwrap's statements are short, and the planner's cost of status's window counts
# over 5,000 jobs (expansion 7, one index range per job) crosses jit_above_cost, where
# compiling took ~40 ms of a ~90 ms statement (bench/results.md, issue 24 section 3).
_SESSION_SETTINGS = (f"SELECT {_keep_or('statement_timeout', STATEMENT_TIMEOUT_MS)}, "
                     f"{_keep_or('idle_in_transaction_session_timeout', IDLE_IN_TRANSACTION_MS)}, "
                     "set_config('jit', 'off', true), now() AS now")

# Connection failures worth waiting for, by what libpq or the server says (a failed connection
# carries no SQLSTATE in psycopg): a full server or pooler, one starting up, shutting down or
# in recovery, nothing listening yet, a connection cut. Anything else (authentication, an
# unknown database or role, a bad option) fails at once.
_TRANSIENT = re.compile(
    "too many (connections|clients)|remaining connection slots|no more connections allowed|"
    "is starting up|is shutting down|in recovery mode|not yet accepting connections|"
    "not accepting connections|connection refused|no such file or directory|timeout expired|"
    "server closed the connection|connection reset|could not receive data|"
    "could not send data|terminating connection|network is unreachable|"
    "cannot connect to server|server login has been failing|query_wait_timeout|"
    "ssl connection has been closed", re.IGNORECASE)
_TRANSIENT_STATES = {"53300", "57P01", "57P02", "57P03", "08000", "08003", "08006", "08001",
                     "08004"}
BACKOFF_BASE = 0.1
BACKOFF_CAP = 5.0


def transient(exc: BaseException) -> bool:
    """Whether waiting may cure ``exc``: the server is full, restarting or unreachable, or
    the connection broke."""
    state = getattr(exc, "sqlstate", None)
    return state in _TRANSIENT_STATES or bool(_TRANSIENT.search(str(exc)))


def backoff(attempt: int, rng: Callable[[], float] = random.random) -> float:
    """Full-jitter exponential backoff: uniform(0, min(cap, base × 2^attempt))."""
    return rng() * min(BACKOFF_CAP, BACKOFF_BASE * 2.0 ** min(attempt, 20))


def _json_row(row: Row) -> Row:
    """A runs row as cronwrap_claim() returns it, or a pauses row (to_jsonb): times back to
    datetimes."""
    for key in ("scheduled_at", "locked_until", "started_at", "finished_at", "created_at",
                "until", "paused_at"):
        if row.get(key) is not None:
            row[key] = datetime.fromisoformat(row[key])
    return row
