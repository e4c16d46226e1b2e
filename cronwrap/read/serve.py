"""``cronwrap serve``: a read-only web dashboard over the ledger, on waitress (WSGI).

The ledger is opened per request, in a worker thread with a deadline: a slow or unreachable
ledger gives a page that says so, never a hang, and a PostgreSQL server that comes back is
used again without a restart. One more ledger object is held open only to ask the ledger's
change token (``Ledger.change_token``) on each request: the overview and /metrics are kept
between requests while it is the same, for at most KEEP_FOR seconds (``Kept``). Facts come from the functions behind ``status --json``,
``history --json``, ``status --format prometheus``, ``explain``, ``logs`` and ``why`` (report.py,
monitor.py, schedule/, logview.py, why.py through ``reads.why_story``); pages.py draws them.

Every client is untrusted, on loopback too (another user of the host is a client): every
request needs the token (``Auth``), sent as ``Authorization: Bearer TOKEN`` or, once, as
``?token=TOKEN``, which answers with a redirect that sets a session cookie, so a person can
open the URL printed at start (Jupyter's convention). The token is read from ``--token-file``
or made at start into a private file; tokens are compared in constant time and never logged
or shown, but in the URL printed for a token made at start. Only ``--no-auth`` serves without
one, and only on loopback addresses, checked on the sockets actually bound (a name can
resolve to anything), and every page says so. No endpoint writes; any method but GET and
HEAD is refused (405), and a request body before anything else (webserver.py, with the
guards against idle and slow connections). Every page carries a Content-Security-Policy that
allows no script and no fetch (a form only to the dashboard itself: the overview's filter is a
GET form, and so is the why page's), and nosniff. Answers are bounded: at most HISTORY_MAX runs a
request, pages of PAGE_SIZE runs read by run id (keyset), long JSON streamed.

waitress is imported only by :func:`serve`: ``run`` never imports this module.
"""

from __future__ import annotations

import gzip
import hmac
import ipaddress
import json
import os
import stat
import sys
import threading
import time
from collections import OrderedDict
from datetime import datetime, timedelta, timezone, tzinfo
from pathlib import Path
from urllib.parse import parse_qs, unquote, unquote_plus

from cronwrap import schedule as sched
from cronwrap.commands import default
from cronwrap.errors import CronwrapError, PathError, UsageError
from cronwrap.model import (JobSummary, Run, RunAttempt, Status, Step, job_host, ledger_job,
                            shown_job)
from cronwrap.options.durations import parse_duration
from cronwrap.paths import ensure_private_dir, file_name, open_private, resolve_dirs
from cronwrap.read import pages
from cronwrap.read import monitoring as monitor, reads, report
from cronwrap.read.logs import open_below
from cronwrap.record import TYPE_CHECKING, Record
from cronwrap.run.runlog import output_path, read_events
from cronwrap.schedule.explanation import in_words

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence
    from typing import TypeVar
    from wsgiref.types import StartResponse, WSGIEnvironment

    from cronwrap.ledger import base
    from cronwrap.read.report import JobReport
    from cronwrap.read.why import Story
    from cronwrap.schedule import Explanation

    T = TypeVar("T")

# The window of counts and missed slots: status's, its --since default.
SINCE = timedelta(seconds=parse_duration(default("status", "since"), "--since"))
LEDGER_DEADLINE = 10.0  # seconds a request waits for the ledger before saying it did not answer
# /api/jobs/NAME/history?limit=N: runs a request (history --limit's default; a request over the
# cap is refused, not cut short, so a script never takes a part for the whole).
HISTORY_LIMIT: int = default("history", "limit")
HISTORY_MAX = 1000
PAGE_SIZE = 50
CHART_RUNS = 200
QUERY_MAX = 200  # characters of ?q= and ?host= on the overview
HEALTHS = (report.CRITICAL, report.WARNING, report.OK)
JSON_BATCH = 100  # items encoded a chunk at a time in a streamed JSON answer
OUTPUT_LIMIT = 256 * 1024  # bytes of a captured output file shown (its end)
TOKEN_MAX = 4096
TOKEN_BYTES = 32  # of randomness in a token made at start
THREADS = 4
# The overview and /metrics are kept, drawn, between requests (``Kept``): served again while
# the ledger's change token is the same and they are younger than KEEP_FOR seconds (what only
# time changes: "3s ago", late slots, leases running out, pauses ending). An older one, of an
# unchanged ledger, is served up to STALE_FOR seconds more while one request's thread draws
# the next; a changed ledger is never shown as it was: the requests wait for the new drawing.
KEEP_FOR = 1.0
STALE_FOR = 10.0
KEPT_MAX = 16  # answers kept (each filter of the overview is one)
GZIP_LEVEL = 1  # a kept answer compressed once a drawing (6: 20% smaller, 3-5x the time)

HEADERS = [
    ("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; "
                                "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-store"),
]
HTML, JSON, TEXT = "text/html; charset=utf-8", "application/json", "text/plain; charset=utf-8"
PROMETHEUS = "text/plain; version=0.0.4; charset=utf-8"
REASONS = {200: "OK", 303: "See Other", 400: "Bad Request", 401: "Unauthorized",
           404: "Not Found", 405: "Method Not Allowed", 500: "Internal Server Error",
           503: "Service Unavailable"}
UNAUTHORIZED = (b"401 Unauthorized: send Authorization: Bearer TOKEN, or open once the URL "
                b"with ?token=TOKEN that cronwrap serve printed at start\n")


class Listen(Record):
    host: str
    port: int


def parse_listen(text: str) -> Listen:
    """``HOST:PORT`` or ``[IPv6]:PORT``; a one-line UsageError otherwise."""
    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isascii() or not port.isdigit() or int(port) > 65535:
        raise UsageError(f"--listen: {text!r} is not HOST:PORT (e.g. 127.0.0.1:8080, "
                         "[::1]:8080, 0.0.0.0:8080)")
    return Listen(host, int(port))


def is_loopback(host: str) -> bool:
    """127.0.0.0/8 and ::1: reachable from this host only. (A name is not: even localhost
    resolves to what /etc/hosts says.)"""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_token(path: str) -> str:
    """The token in ``path``: a regular file of yours, not a symlink, readable by you alone."""
    file = path
    try:
        fd = open_private(file, os.O_RDONLY)
    except PathError as exc:
        raise UsageError(f"--token-file: {exc}") from None
    try:
        info = os.fstat(fd)
        if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise UsageError(f"--token-file {path} is open to other users (mode "
                             f"{stat.S_IMODE(info.st_mode):04o}): run chmod 600 {path}")
        data = os.read(fd, TOKEN_MAX + 1)
    finally:
        os.close(fd)
    token = data.decode("utf-8", "replace").strip()
    if not token or len(data) > TOKEN_MAX or not token.isprintable() or " " in token:
        raise UsageError(f"--token-file {path}: put one token in it, 1-{TOKEN_MAX} printable "
                         "characters without spaces (e.g. from: openssl rand -hex 32)")
    return token


def token_for(listen: Listen, token_file: str | None, no_auth: bool) -> tuple[str | None, bool]:
    """The token every request must carry and whether it was made now (to be kept in a file
    once the port is known); (None, False) for ``--no-auth``, refused beyond loopback."""
    import secrets

    if no_auth:
        if token_file is not None:
            raise UsageError("--no-auth and --token-file: give one of them")
        if not (is_loopback(listen.host) or listen.host.lower() == "localhost"):
            raise UsageError(f"--no-auth: --listen {listen.host} is not a loopback address "
                             "(127.0.0.1, ::1, localhost); without --no-auth every request "
                             "needs the token")
        return None, False
    if token_file is not None:
        return read_token(token_file), False
    return secrets.token_urlsafe(TOKEN_BYTES), True


def same(given: str, expected: bytes) -> bool:
    """Constant time, whatever ``given`` holds."""
    return hmac.compare_digest(given.encode("utf-8", "replace"), expected)


class Auth:
    """Who may read: a request with ``Authorization: Bearer TOKEN``, or with the session
    cookie that a request with ``?token=TOKEN`` sets. The cookie holds an HMAC of the token,
    not the token; its name is derived from the token too, so two dashboards on one host
    (cookies do not tell ports apart) do not overwrite each other's, and one whose token
    changed does not receive a stale one."""

    def __init__(self, token: str) -> None:
        self.token = token.encode("utf-8")
        self.session = hmac.new(self.token, b"cronwrap serve session", "sha256").hexdigest()
        tag = hmac.new(self.token, b"cronwrap serve cookie", "sha256").hexdigest()[:12]
        self.cookie = f"cronwrap-{tag}"

    def admits(self, environ: WSGIEnvironment) -> bool:
        scheme, _, given = environ.get("HTTP_AUTHORIZATION", "").partition(" ")
        if scheme.lower() == "bearer" and same(given.strip(), self.token):
            return True
        cookie = cookie_value(environ.get("HTTP_COOKIE", ""), self.cookie)
        return cookie is not None and same(cookie, self.session.encode())

    def set_cookie(self, path: str) -> str:
        """``Secure`` is left out: the server speaks plain HTTP (a TLS proxy may add it)."""
        return f"{self.cookie}={self.session}; Path={path}; HttpOnly; SameSite=Strict"


def cookie_value(header: str, name: str) -> str | None:
    for part in header.split(";"):
        key, sep, value = part.strip().partition("=")
        if sep and key == name:
            return value.strip().strip('"')
    return None


def keep_token(token: str, listen: Listen, port: int,
               environ: dict[str, str] | os._Environ[str] = os.environ) -> Path:
    """A token made at start, kept for its user (to paste, or for curl) in STATE/serve/
    HOST-PORT.token: a private directory (0700, yours), a new file (0600, O_EXCL and
    O_NOFOLLOW: never through a link) renamed into place."""
    try:
        directory = Path(ensure_private_dir(os.path.join(resolve_dirs(environ).state, "serve")))
        path = directory / file_name(f"{listen.host}-{port}.token")
        temporary = directory / f".{path.name}.{os.getpid()}"
        temporary.unlink(missing_ok=True)
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, f"{token}\n".encode())
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except (OSError, PathError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else str(exc)
        raise UsageError(f"serve: cannot keep the token it made: {reason}; give --token-file "
                         "FILE (a token of yours), or set CRONWRAP_HOME") from None
    return path


class Deadline(Exception):
    """The ledger did not answer in time."""


def within(seconds: float, work: Callable[[], T]) -> T:
    """``work()`` in a daemon thread, waited for at most ``seconds``: a ledger that hangs
    holds its thread, not the request (nor the server's exit)."""
    value: list[T] = []
    error: list[BaseException] = []
    done = threading.Event()

    def target() -> None:
        try:
            value.append(work())
        except BaseException as exc:  # handed to the request thread, raised there
            error.append(exc)
        finally:
            done.set()

    threading.Thread(target=target, daemon=True, name="cronwrap-ledger").start()
    if not done.wait(seconds):
        raise Deadline(f"the ledger did not answer within {seconds:g}s")
    if error:
        raise error[0]
    return value[0]


class Response(Record):
    """``body``: bytes, or chunks of bytes streamed as they are made (no Content-Length)."""

    status: int
    body: bytes | Iterable[bytes]
    content_type: str
    extra: list[tuple[str, str]]
    _defaults = dict(content_type=HTML, extra=[])


def html(status: int, text: str) -> Response:
    return Response(status, text.encode("utf-8"), HTML, [])


def text(status: int, line: str, extra: list[tuple[str, str]] | None = None) -> Response:
    return Response(status, f"{status} {REASONS[status]}: {line}\n".encode(), TEXT, extra or [])


def unauthorized() -> Response:
    return Response(401, UNAUTHORIZED, TEXT, [("WWW-Authenticate", 'Bearer realm="cronwrap"')])


def is_run_id(text: str) -> bool:
    return text.isascii() and text.isdigit() and 0 < len(text) < 19


def here(path: str, query: str = "") -> str:
    """A link to the page at ``path`` (as requested, encoded) with ``query``, relative to
    itself: it holds behind a proxy that serves the dashboard under a prefix."""
    return "./" + path.rpartition("/")[2] + (f"?{query}" if query else "")


def json_array(items: Sequence[T], encode: Callable[[T], dict[str, object]]) -> Iterator[bytes]:
    """``json.dumps([encode(i) for i in items], indent=2)`` and a newline, a batch of items at
    a time: the answer's text is never whole in memory."""
    if not items:
        yield b"[]\n"
        return
    for start in range(0, len(items), JSON_BATCH):
        batch = ",\n".join("  " + json.dumps(encode(i), indent=2).replace("\n", "\n  ")
                           for i in items[start:start + JSON_BATCH])
        yield (("[\n" if start == 0 else ",\n") + batch).encode("utf-8")
    yield b"\n]\n"


def streamed(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """``chunks``, made while waitress sends them, after ``respond`` returned: a failure there
    is one line on stderr too (the answer ends short), never waitress's traceback."""
    try:
        yield from chunks
    except Exception as exc:
        sys.stderr.write(f"cronwrap serve: {type(exc).__name__} while answering a request\n")


def accepts_gzip(environ: WSGIEnvironment) -> bool:
    """Does the client take a gzip body (``Accept-Encoding``, as browsers and Prometheus send
    it)? ``gzip;q=0`` is a no."""
    for item in environ.get("HTTP_ACCEPT_ENCODING", "").split(","):
        name, _, weight = item.partition(";")
        if name.strip().lower() in ("gzip", "x-gzip"):
            q = weight.strip().lower().removeprefix("q=")
            return not q or q.strip("0.") != ""
    return False


class Answer(Record):
    """A drawn answer kept by ``Kept``: the ledger's change token read before it was drawn,
    and the time then (the dashboard's clock); its body, and gzipped (None: never sent so)."""

    token: str
    read_at: datetime
    body: bytes
    packed: bytes | None
    content_type: str

    def response(self, packed: bool) -> Response:
        if packed and self.packed is not None:
            return Response(200, self.packed, self.content_type,
                            [("Content-Encoding", "gzip"), ("Vary", "Accept-Encoding")])
        return Response(200, self.body, self.content_type, [("Vary", "Accept-Encoding")])


class Kept:
    """Answers drawn once and served to every request until the ledger changes (its change
    token, asked on every request: ``probe()``, None when it cannot tell) or time has changed
    them (KEEP_FOR). 500 jobs over a million runs cost ~100 ms of queries and ~100 ms of
    drawing an answer; a kept one costs the token's one statement. A changed token is never
    served from what was kept: requests wait for one drawing (the others that arrive
    meanwhile take it). An answer only older than KEEP_FOR is served, up to STALE_FOR more,
    while one background thread draws the next (a page of "3s ago" is not wrong for a
    moment; a person or a scraper waiting for it every second would be slow). Only answers
    of 200 whole in memory are kept, at most KEPT_MAX (the least recently used go)."""

    def __init__(self, probe: Callable[[], str | None], clock: Callable[[], datetime],
                 keep_for: float = KEEP_FOR, stale_for: float = STALE_FOR,
                 limit: int = KEPT_MAX) -> None:
        self.probe, self.clock = probe, clock
        self.keep_for, self.stale_for, self.limit = keep_for, stale_for, limit
        self.answers: OrderedDict[tuple[str, ...], Answer] = OrderedDict()
        self.lock = threading.Lock()
        self.drawing = [threading.Lock() for _ in range(8)]  # one drawing of a key at a time

    def get(self, key: tuple[str, ...], draw: Callable[[], Response], packed: bool,
            pack: bool = True) -> Response:
        """The answer of ``key``, kept or drawn by ``draw()``; gzipped for a client that takes
        it (``packed``) if ``pack`` (False: it echoes the request, as a filter does)."""
        arrived = self.clock()
        token = self.probe()
        if token is None:
            return draw()
        kept = self.find(key)
        if kept is not None and kept.token == token:
            age = (arrived - kept.read_at).total_seconds()
            if 0 <= age < self.keep_for:
                return kept.response(packed)
            if 0 <= age < self.keep_for + self.stale_for:
                self.redraw_later(key, draw, pack)
                return kept.response(packed)
        with self.drawing[hash(key) % len(self.drawing)]:
            kept = self.find(key)  # drawn while this one waited, of the ledger it found?
            if kept is not None and kept.token == token \
                    and 0 <= (arrived - kept.read_at).total_seconds() < self.keep_for:
                return kept.response(packed)
            return self.draw(key, token, arrived, draw, pack, packed)

    def find(self, key: tuple[str, ...]) -> Answer | None:
        with self.lock:
            return self.answers.get(key)

    def draw(self, key: tuple[str, ...], token: str, read_at: datetime,
             draw: Callable[[], Response], pack: bool, packed: bool = False) -> Response:
        response = draw()
        if response.status != 200 or not isinstance(response.body, bytes):
            return response
        gz = gzip.compress(response.body, GZIP_LEVEL, mtime=0) if pack else None
        answer = Answer(token, read_at, response.body, gz, response.content_type)
        with self.lock:
            self.answers[key] = answer
            self.answers.move_to_end(key)
            while len(self.answers) > self.limit:
                self.answers.popitem(last=False)
        return answer.response(packed)

    def redraw_later(self, key: tuple[str, ...], draw: Callable[[], Response], pack: bool) -> None:
        lock = self.drawing[hash(key) % len(self.drawing)]
        if not lock.acquire(blocking=False):
            return  # being drawn already

        def redraw() -> None:
            try:
                read_at, token = self.clock(), self.probe()
                if token is not None:
                    self.draw(key, token, read_at, draw, pack)
            except Exception:  # noqa: BLE001 (any failure: the next request draws it and says so)
                pass
            finally:
                lock.release()

        threading.Thread(target=redraw, daemon=True, name="cronwrap-redraw").start()


class Dashboard:
    """The WSGI application. ``open_ledger()`` opens the ledger read-only (the same
    resolution as every command); ``log_dirs(job)`` are this host's trusted log directories
    for the job (``logs``'s); ``auth`` who may read (None: anyone, ``--no-auth``); ``clock()``
    is now, in UTC; ``label`` names the ledger on pages (passwords redacted)."""

    def __init__(self, open_ledger: Callable[[], base.Ledger],
                 log_dirs: Callable[[str], list[str]], auth: Auth | None,
                 label: str = "", clock: Callable[[], datetime] | None = None,
                 deadline: float = LEDGER_DEADLINE) -> None:
        self.open_ledger = open_ledger
        self.log_dirs = log_dirs
        self.auth = auth
        self.label = label
        self.clock = clock or (lambda: datetime.now(timezone.utc))
        self.deadline = deadline
        self.strips = Strips()
        self.kept = Kept(self.change_token, lambda: self.clock())
        self.prober: base.Ledger | None = None  # held open: its change token is per object
        self.probing = threading.Lock()

    @property
    def site(self) -> pages.Site:
        return pages.Site(ledger=self.label, open=self.auth is None)

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        try:
            response = self.respond(environ, method)
        except Exception as exc:  # one line on stderr, never a traceback with a URL in it
            sys.stderr.write(f"cronwrap serve: {type(exc).__name__} while answering a request\n")
            response = html(500, pages.problem_page(500, "Internal error",
                                                    "cronwrap could not draw this page.",
                                                    self.site))
        headers = [("Content-Type", response.content_type), *HEADERS, *response.extra]
        body = response.body
        if isinstance(body, bytes):
            headers.insert(1, ("Content-Length", str(len(body))))
            body = [body]
        else:
            body = streamed(body)
        start_response(f"{response.status} {REASONS.get(response.status, '')}", headers)
        return [] if method == "HEAD" else body

    def respond(self, environ: WSGIEnvironment, method: str) -> Response:
        raw = environ.get("REQUEST_URI") or environ.get("PATH_INFO", "/")
        path, _, query = raw.partition("?")
        query = query or environ.get("QUERY_STRING", "")
        params = {k: v[-1] for k, v in parse_qs(query).items()}
        if self.auth is not None:
            if "token" in params:
                return self.sign_in(self.auth, params["token"], path, query, environ)
            if not self.auth.admits(environ):
                return unauthorized()
        if method not in ("GET", "HEAD"):
            return text(405, "cronwrap serve is read-only", [("Allow", "GET, HEAD")])
        segments = [unquote(s) for s in path.split("/")[1:]]
        root = "../" * (len(segments) - 1) or "./"  # pages link relatively (any proxy prefix)
        try:
            return self.route(segments, params, root, path, accepts_gzip(environ))
        except Deadline as exc:
            return self.unavailable(str(exc), root)
        except CronwrapError as exc:  # LedgerError and kin: one line, passwords redacted
            return self.unavailable(f"the ledger did not answer: {exc}", root)

    def sign_in(self, auth: Auth, given: str, path: str, query: str,
                environ: WSGIEnvironment) -> Response:
        """``?token=TOKEN``: a redirect to the same page without it, setting the session
        cookie, so the token leaves the address bar at once."""
        if not same(given, auth.token):
            return unauthorized()
        kept = "&".join(p for p in query.split("&")
                        if p and unquote_plus(p.partition("=")[0]) != "token")
        cookie = auth.set_cookie(environ.get("SCRIPT_NAME", "") + "/")
        return text(303, "signed in", [("Location", here(path, kept)), ("Set-Cookie", cookie)])

    def route(self, seg: list[str], params: dict[str, str], root: str, path: str,
              packed: bool = False) -> Response:
        host = params.get("host") or None  # ?host=HOST: only that host's host-scoped jobs
        if seg == [""]:
            return self.overview(params, packed)
        if seg == ["metrics"]:
            return self.kept.get(("metrics", host or ""), lambda: self.metrics(host), packed)
        if seg == ["healthz"]:
            return self.healthz()
        if seg == ["api", "status"]:
            return self.api_status(host)
        # A job name is one segment (its "/" encoded), or several when a proxy decoded it; a
        # host's share of a host-scoped job is its name with ?host=HOST, or its ledger name.
        def job(words: list[str]) -> str:
            return ledger_job("/".join(words), host)

        if len(seg) >= 4 and seg[:2] == ["api", "jobs"] and seg[-1] == "history":
            return self.api_history(job(seg[2:-1]), params)
        if len(seg) >= 4 and seg[:2] == ["api", "jobs"] and seg[-1] == "why":
            return self.why(job(seg[2:-1]), params, root, as_json=True)
        if len(seg) >= 3 and seg[0] == "jobs" and seg[-1] == "why" and any(seg[1:-1]):
            return self.why(job(seg[1:-1]), params, root)
        if len(seg) >= 4 and seg[0] == "jobs" and seg[-2] == "runs":
            return self.run(job(seg[1:-2]), seg[-1], root)
        if len(seg) >= 2 and seg[0] == "jobs" and any(seg[1:]):
            if "page" in params:  # the numbered pages of earlier versions: the newest runs
                return text(303, "runs are paged by run id now", [("Location", here(path))])
            return self.job(job(seg[1:]), params, root)
        return self.not_found("No such page", "See the list of all jobs.", root)

    # -- reading the ledger

    def read(self, work: Callable[[base.Ledger, datetime], T]) -> T:
        now = self.clock()

        def task() -> T:
            ledger = self.open_ledger()
            try:
                return work(ledger, now)
            finally:
                ledger.close()

        return within(self.deadline, task)

    def change_token(self) -> str | None:
        """The ledger's change token (``Ledger.change_token``), from a ledger held open for
        it; None when it cannot be had (the request then reads the ledger, and says what
        failed)."""
        def probe() -> str | None:
            if not self.probing.acquire(timeout=self.deadline):
                raise Deadline("the ledger's change token is still being read")
            try:
                for _ in range(2):  # None: its file was replaced, open it again
                    if self.prober is None:
                        self.prober = self.open_ledger()
                    token = self.prober.change_token()
                    if token is not None:
                        return token
                    self.forget_prober()
                return None
            except CronwrapError:
                self.forget_prober()
                raise
            finally:
                self.probing.release()

        try:
            return within(self.deadline, probe)
        except (Deadline, CronwrapError):
            return None

    def forget_prober(self) -> None:
        prober, self.prober = self.prober, None
        if prober is not None:
            try:
                prober.close()
            except CronwrapError:
                pass  # a broken connection: it is dropped all the same

    def reports(self, ledger: base.Ledger, now: datetime, names: list[str] | None = None,
                host: str | None = None) -> list[JobReport]:
        """``host``: only the rows of host-scoped jobs for that host (status --host)."""
        reports = report.job_reports(ledger, now - SINCE, names, now)
        return reports if host is None else [r for r in reports
                                             if job_host(r.summary.job)[1] == host]

    # -- endpoints

    def overview(self, params: dict[str, str], packed: bool = False) -> Response:
        """``?health=H&host=HOST&q=TEXT``: the jobs of that health, that host's rows of
        host-scoped jobs, whose shown name holds TEXT (any case). The ledger is read as for
        every job (the summaries are read whole anyway); only the rows shown are drawn."""
        chosen = pages.Filter(health=params.get("health", ""), host=params.get("host", ""),
                              q=params.get("q", "").strip())
        if chosen.health and chosen.health not in HEALTHS:
            return text(400, f"health: one of {', '.join(HEALTHS)}")
        if len(chosen.q) > QUERY_MAX or len(chosen.host) > QUERY_MAX:
            return text(400, f"q, host: at most {QUERY_MAX} characters")

        def work(ledger: base.Ledger, now: datetime) -> str:
            every = self.reports(ledger, now)
            hosts = sorted({host for r in every if (host := job_host(r.summary.job)[1])})
            matched = [r for r in every if chosen.matches(r.summary.job)]
            shown = [r for r in matched if not chosen.health or r.health == chosen.health]
            strips, failures = self.strips.get(ledger, shown, now, [r.summary.job for r in every])
            selection = pages.Selection(filter=chosen, counts=pages.tally(matched), hosts=hosts,
                                        total=len(every))
            return pages.overview(shown, strips, now, self.site, failures, selection)

        # gzip only for the page that echoes nothing of the request (no secret ever sits
        # beside text a client chose in a compressed answer)
        site = self.site  # the banner of --no-auth, the ledger's label: part of what is kept
        return self.kept.get(("overview", site.ledger, str(site.open), chosen.health,
                              chosen.host, chosen.q),
                             lambda: html(200, self.read(work)), packed,
                             pack=not (chosen.host or chosen.q))

    def metrics(self, host: str | None) -> Response:
        exposition = self.read(lambda ledger, now: monitor.prometheus(
            self.reports(ledger, now, host=host), now, ledger.tallies()))
        return Response(200, str(exposition).encode("utf-8"), PROMETHEUS, [])

    def healthz(self) -> Response:
        self.read(lambda ledger, now: ledger.job_info(""))  # a query the ledger must answer
        note = b"" if self.auth else f"warning: {pages.OPEN_BANNER}\n".encode()
        return Response(200, b"ok\n" + note, TEXT, [])

    def api_status(self, host: str | None) -> Response:
        reports, now = self.read(lambda ledger, now: (self.reports(ledger, now, host=host), now))
        return self.json(reports, lambda r: report.report_json(r, now))

    def api_history(self, name: str, params: dict[str, str]) -> Response:
        limit, before = params.get("limit", str(HISTORY_LIMIT)), params.get("before")
        if not (limit.isascii() and limit.isdigit() and 1 <= int(limit) <= HISTORY_MAX):
            return text(400, f"limit: 1 to {HISTORY_MAX} runs a request; for older runs add "
                        "before=RUN_ID, the last run_id of an answer (its Link header)")
        if before is not None and not is_run_id(before):
            return text(400, "before: a run id (a positive number)")
        count = int(limit)

        def work(ledger: base.Ledger, now: datetime
                 ) -> tuple[list[Run], dict[int, list[RunAttempt]], dict[int, list[Step]],
                            datetime] | None:
            runs = ledger.runs(name, count + 1, before=None if before is None else int(before))
            runs = ledger.with_usage(runs[:count]) + runs[count:]
            if not runs and ledger.job_info(name) is None:
                return None
            return runs, ledger.attempts(runs[:count], now), ledger.steps(runs[:count]), now

        found = self.read(work)
        if found is None:
            return Response(404, b"[]\n", JSON, [])
        runs, attempts, steps, now = found
        extra = []
        if len(runs) > count:  # older runs: the next page's URL, relative to this one
            runs = runs[:count]
            extra.append(("Link", f'<history?limit={count}&before={runs[-1].run_id}>; rel="next"'))
        return self.json(runs, lambda r: report.history_json(r, attempts[r.run_id], now,
                                                             steps[r.run_id]), extra)

    def json(self, items: Sequence[T], encode: Callable[[T], dict[str, object]],
             extra: list[tuple[str, str]] | None = None) -> Response:
        return Response(200, json_array(items, encode), JSON, extra or [])

    def job(self, name: str, params: dict[str, str], root: str = "../") -> Response:
        """The job's page: its newest runs, or (``?before=RUN_ID``) the PAGE_SIZE runs below
        that id; either way a few hundred rows are read, however long the job's history."""
        given = params.get("before")
        if given is not None and not is_run_id(given):
            return text(400, "before: a run id (a positive number)")
        before = None if given is None else int(given)

        def work(ledger: base.Ledger, now: datetime
                 ) -> tuple[JobReport | None, list[Run], list[Run], list[Run] | None,
                            datetime] | None:
            chart = ledger.runs(name, CHART_RUNS)
            if not chart and ledger.job_info(name) is None:
                return None
            if before is None:
                shown, newer = chart[:PAGE_SIZE + 1], None
            else:
                shown = ledger.runs(name, PAGE_SIZE + 1, before=before)
                above = shown[0].run_id if shown else before - 1
                newer = ledger.runs_after(name, above, PAGE_SIZE + 1)
            shown = ledger.with_usage(shown[:PAGE_SIZE]) + shown[PAGE_SIZE:]
            reports = self.reports(ledger, now, [name])
            return (reports[0] if reports else None), chart, shown, newer, now

        found = self.read(work)
        if found is None:
            return self.not_found("No such job", f"The ledger has no job named {name!r}.", root)
        rep, chart, shown, newer, now = found
        explanation, words = explain(rep, now)
        zone = zone_of(rep.summary.tz if rep else None)
        failed = report.last_failure(chart)
        failure = None
        if failed is not None and rep is not None and rep.health != report.OK:
            failure = failed, captured_output(failed, self.log_dirs(job_host(name)[0]))
        return html(200, pages.job_page(rep, name, shown[:PAGE_SIZE], chart, explanation, words,
                                        pager(shown, newer), now, self.site, root, zone, failure))

    def run(self, name: str, run_id: str, root: str = "../../../") -> Response:
        if not is_run_id(run_id):
            return self.not_found("No such run", "A run id is a number.", root)

        def work(ledger: base.Ledger, now: datetime
                 ) -> tuple[Run, list[RunAttempt], list[Step], str | None, datetime] | None:
            run = ledger.get_run(name, int(run_id))
            if run is None:
                return None
            run = ledger.with_usage([run])[0]
            info = ledger.job_info(name)
            earlier = ledger.attempts([run], now).get(run.run_id, [])[:-1]
            steps = ledger.steps([run]).get(run.run_id, [])
            return run, earlier, steps, info.tz if info else None, now

        found = self.read(work)
        if found is None:
            return self.not_found("No such run", f"The job {shown_job(name)!r} has no run {run_id}.",
                                  root)
        run, earlier, steps, tz, now = found
        dirs = self.log_dirs(job_host(name)[0])
        return html(200, pages.run_page(run, run_events(run, dirs), captured_output(run, dirs),
                                        now, self.site, root, zone_of(tz), earlier, steps))

    def why(self, name: str, params: dict[str, str], root: str = "../../",
            as_json: bool = False) -> Response:
        """``why NAME --at WHEN`` (``?at=WHEN``; none: the next slot), as a page or, under
        /api/, as ``why --json``'s object."""
        at = params.get("at", "").strip() or None
        if at is not None and len(at) > QUERY_MAX:
            return text(400, f"at: at most {QUERY_MAX} characters")

        def work(ledger: base.Ledger, now: datetime) -> Story | str | None:
            if ledger.job_info(name) is None and not ledger.runs(name, 1):
                return None
            try:
                return reads.why_story(ledger, name, at, now, self.log_dirs(job_host(name)[0]))
            except UsageError as exc:  # a bad ?at=, or a job without a schedule: one line
                return str(exc)

        found = self.read(work)
        if found is None:
            if as_json:
                return Response(404, b"{}\n", JSON, [])
            return self.not_found("No such job", f"The ledger has no job named {name!r}.", root)
        if isinstance(found, str):  # never the client's own text echoed back
            return text(400, "at: a time (2026-10-28T01:30 in the job's zone, or with an "
                        "offset or Z) or a date (2026-10-28)" if found.startswith("--at")
                        else found)
        if as_json:
            return Response(200, (json.dumps(found.to_json(), indent=2) + "\n").encode(), JSON, [])
        return html(200, pages.why_page(found, at, self.site, root))

    def not_found(self, title: str, detail: str, root: str = "./") -> Response:
        return html(404, pages.problem_page(404, title, detail, self.site, root))

    def unavailable(self, detail: str, root: str = "./") -> Response:
        return html(503, pages.problem_page(503, "The ledger is not answering", detail,
                                            self.site, root))


def pager(shown: list[Run], newer: list[Run] | None) -> pages.Pager:
    """The links beside a page of runs: ``shown`` (PAGE_SIZE + 1 read, newest first) and
    ``newer``, up to PAGE_SIZE + 1 runs just above it, oldest first (None: this is the page of
    the newest runs). A page is named by the run id it starts below."""
    if not newer:
        newer_query = None
    elif len(newer) > PAGE_SIZE:
        newer_query = f"?before={newer[PAGE_SIZE].run_id}"
    else:
        newer_query = ""  # the newest runs: the job's page itself
    older = f"?before={shown[PAGE_SIZE - 1].run_id}" if len(shown) > PAGE_SIZE else None
    return pages.Pager(newer=newer_query, older=older)


class Strips:
    """The overview's strip of each job (its newest ``pages.STRIP`` runs, drawn), kept
    between requests while the job's summary is unchanged: a firing, a mark, a finish, a
    renewed or released lease or a prune changes it (``fingerprint``), and only then are the
    job's runs read again. 500 jobs are 500 queries and 15,000 runs to decode and draw: about
    1 s on a million-run ledger, against a few milliseconds for the jobs that changed."""

    def __init__(self) -> None:
        self.kept: dict[str, tuple[tuple[object, ...], list[Run], str | None]] = {}
        self.lock = threading.Lock()

    def get(self, ledger: base.Ledger, reports: list[JobReport], now: datetime,
            jobs: list[str] | None = None) -> tuple[dict[str, str], dict[str, Run]]:
        """The strips of ``reports``' jobs, and the last failure among each one's runs (its
        line on the overview: no query of its own). ``jobs``: every job of the ledger, whose
        kept strips stay kept while a filter hides them (default: those of ``reports``)."""
        with self.lock:
            kept = dict(self.kept)
        fresh: dict[str, tuple[tuple[object, ...], list[Run], str | None]] = {}
        drawn: dict[str, str] = {}
        failures: dict[str, Run] = {}
        for rep in reports:
            job, key = rep.summary.job, fingerprint(rep.summary)
            entry = kept.get(job)
            if entry is None or entry[0] != key:
                runs = ledger.runs(job, pages.STRIP, now - SINCE)  # status NAME's window
                settled = all(r.status != Status.RUNNING for r in runs)  # drawn the same later
                entry = (key, runs, pages.strip_html(runs, now) if settled else None)
            fresh[job] = entry
            drawn[job] = entry[2] if entry[2] is not None else pages.strip_html(entry[1], now)
            failure = report.last_failure(entry[1])
            if failure is not None:
                failures[job] = failure
        names = set(fresh) if jobs is None else set(jobs)
        with self.lock:  # every job of the ledger: the ones gone are dropped
            self.kept = {**{j: e for j, e in kept.items() if j in names}, **fresh}
        return drawn, failures


def fingerprint(s: JobSummary) -> tuple[object, ...]:
    """What changes when any run of the job is added or changes (its status, its lease)."""
    last = s.last_run
    return (s.last_seen, s.last_slot, s.last_success_at, tuple(sorted(s.counts.items())),
            None if last is None else (last.run_id, last.status, last.fence, last.finished_at),
            tuple((r.run_id, r.fence, r.locked_until) for r in s.running))


def explain(rep: JobReport | None, now: datetime) -> tuple[Explanation | None, str]:
    """``explain``'s next fire times and notes for the job's recorded schedule, and the
    schedule in words; (None, "") when there is none or this version cannot read it."""
    s = None if rep is None else rep.summary
    if s is None or not s.schedule:
        return None, ""
    try:
        zone = sched.load_zone(s.tz or "UTC")
        result = sched.explain(s.schedule, zone, s.tz or "UTC", sched.system_zone_name(), now, 5)
        return result, in_words(s.schedule, zone)
    except CronwrapError:
        return None, ""


def run_events(run: Run, log_dirs: list[str]) -> list[dict[str, object]]:
    """The run's events in this host's run logs (the log directories ``logs`` reads)."""
    found: list[dict[str, object]] = []
    for directory in log_dirs:
        try:
            events = read_events(directory)
        except (OSError, ValueError):
            continue
        found += [e for e in events if isinstance(e, dict) and e.get("job") == job_host(run.job)[0]
                  and e.get("run_id") == run.run_id]
    return found


def captured_output(run: Run, log_dirs: list[str]) -> pages.Output:
    """The end of the run's output file (read as ``logs`` reads it: below a trusted log
    directory, no symlink), else the ledger's tail of it."""
    relative = output_path("", run.job, run.run_id, run.attempt)
    for directory in log_dirs:
        try:
            fd = open_below(directory, relative)
        except PathError:
            continue
        if fd is None:
            continue
        try:
            size = os.fstat(fd).st_size
            data = os.pread(fd, OUTPUT_LIMIT, max(size - OUTPUT_LIMIT, 0))
        finally:
            os.close(fd)
        cut = f" (its last {OUTPUT_LIMIT // 1024} KiB of {size} bytes)" if size > OUTPUT_LIMIT else ""
        return pages.Output(data.decode("utf-8", "backslashreplace"),
                            f"from {os.path.join(directory, relative)}{cut}")
    if run.error_tail:
        return pages.Output(run.error_tail, "the ledger's tail of the output (the output file is "
                            "not on this host)")
    return pages.Output(None, "")


def zone_of(tz: str | None) -> tzinfo:
    """The zone a job's times are shown in: its schedule's, else (none recorded, or one this
    host's tz database lacks) UTC."""
    return (sched.find_zone(tz) if tz else None) or timezone.utc


# glibc's malloc (mallopt(3)): M_MMAP_THRESHOLD fixed (its dynamic threshold climbs to the
# largest block freed, so each drawing's 1.3 MB /metrics text and its copies then come from a
# heap that never gives them back) and M_ARENA_MAX 2 (one heap per thread, up to 8 a core, each
# keeping what its thread freed). Measured by bench/run.py's serve row over 1M runs / 500 jobs,
# after a warm-up of each load and then ~60,000-78,000 more requests: VmRSS 81.7 -> 94.4 MiB
# (+16 %) as glibc's defaults are, 66.6 -> 65.5 MiB with these two (bench/results.md, issue 24).
M_MMAP_THRESHOLD, M_ARENA_MAX, MMAP_THRESHOLD, ARENAS = -3, -8, 128 * 1024, 2


def steady_heap() -> None:
    """Keep a long-running server's memory flat (above); nothing where malloc is not glibc's."""
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):  # musl, or no libc to load
        return
    mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    mallopt(M_ARENA_MAX, ARENAS)


def serve(app: Dashboard, listen: Listen, made: bool = False, threads: int = THREADS) -> int:
    """Serve ``app`` until interrupted (SIGINT or SIGTERM). ``made``: its token was made at
    start, to be kept in a file (removed at the end) and printed in a URL. One line says
    where it listens and how it is protected."""
    import signal

    steady_heap()
    try:
        from cronwrap.read import webserver  # waitress, loaded only to serve
    except ImportError:
        raise UsageError("serve needs the waitress package: reinstall cronwrap "
                         "(pip install .) to get its dependencies") from None
    try:
        server, bound = webserver.create(app, listen.host, listen.port, threads)
    except (OSError, ValueError) as exc:  # waitress: ValueError for a name that does not resolve
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else \
            "no address of that name here" if isinstance(exc, ValueError) else str(exc)
        raise UsageError(f"--listen {listen.host}:{listen.port}: {reason}") from None
    kept = opener = None
    try:
        urls = [f"http://{f'[{host}]' if ':' in host else host}:{port}/" for host, port in bound]
        if app.auth is None:
            beyond = [url for (host, _), url in zip(bound, urls) if not is_loopback(host)]
            if beyond:  # the name resolved to more than loopback: /etc/hosts, DNS
                raise UsageError(f"--no-auth: --listen {listen.host} bound {beyond[0]}, not a "
                                 "loopback address; without --no-auth every request needs "
                                 "the token")
            how = "no authentication (--no-auth): every user of this host can read it"
        elif made:
            kept = keep_token(app.auth.token.decode(), listen, bound[0][1])
            how = f"token in {kept}"
            opener = f"cronwrap serve: open {urls[0]}?token={app.auth.token.decode()}"
        else:
            how = "token from --token-file"
        ledger = f" (ledger {app.label})" if app.label else ""
        print(f"cronwrap serve: listening on {' and '.join(urls)}{ledger}; {how}", flush=True)
        if opener is not None:
            print(opener, flush=True)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # SystemExit ends run() cleanly
        server.run()  # returns on KeyboardInterrupt or SystemExit
    finally:
        server.close()
        if kept is not None:
            kept.unlink(missing_ok=True)
    return 0
