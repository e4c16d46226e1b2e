"""``cronwrap serve``: a read-only web dashboard over the ledger, on waitress (WSGI).

The ledger is opened per request, in a worker thread with a deadline: a slow or unreachable
ledger gives a page that says so, never a hang, and a PostgreSQL server that comes back is
used again without a restart. Facts come from the functions behind ``status --json``,
``history --json``, ``status --format prometheus``, ``explain`` and ``logs`` (report.py,
monitor.py, schedule/, logview.py); pages.py draws them.

Safe by default: loopback only unless ``--token-file`` is given; with a token, every request
needs ``Authorization: Bearer TOKEN`` (compared in constant time), and the token is never
logged or shown. No endpoint writes; any method but GET and HEAD is refused (405). Every page
carries a Content-Security-Policy that allows no script and no fetch, and nosniff.

waitress is imported only by :func:`serve`: ``run`` never imports this module.
"""

from __future__ import annotations

import ipaddress
import json
import os
import stat
import sys
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import parse_qs, unquote

from cronwrap import pages
from cronwrap.errors import CronwrapError, PathError, UsageError
from cronwrap.ledger import base
from cronwrap.record import TYPE_CHECKING, Record

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

DEFAULT_LISTEN = "127.0.0.1:8080"
SINCE = timedelta(days=7)  # the window of status's counts and missed slots (its --since default)
LEDGER_DEADLINE = 10.0  # seconds a request waits for the ledger before saying it did not answer
HISTORY_LIMIT, HISTORY_MAX = 20, 100000  # /api/jobs/NAME/history?limit=N, as history --limit
PAGE_SIZE, MAX_PAGE = 50, 2000
CHART_RUNS = 200
OUTPUT_LIMIT = 256 * 1024  # bytes of a captured output file shown (its end)
TOKEN_MAX = 4096
THREADS = 4

HEADERS = [
    ("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; "
                                "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-store"),
]
HTML, JSON, TEXT = "text/html; charset=utf-8", "application/json", "text/plain; charset=utf-8"
PROMETHEUS = "text/plain; version=0.0.4; charset=utf-8"
REASONS = {200: "OK", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed",
           500: "Internal Server Error", 503: "Service Unavailable"}


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
    """127.0.0.0/8, ::1 and the name localhost: reachable from this host only."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # another name: it may resolve to anything


def read_token(path: str) -> str:
    """The token in ``path``: a regular file of yours, not a symlink, readable by you alone."""
    from cronwrap.paths import open_private

    file = Path(path)
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


def check_listen(listen: Listen, token_file: str | None) -> str | None:
    """The token to require, or None; refuses a non-loopback address without a token."""
    if token_file is None:
        if not is_loopback(listen.host):
            raise UsageError(f"--listen {listen.host}: not a loopback address; give "
                             "--token-file PATH so that every request needs its token")
        return None
    return read_token(token_file)


class Deadline(Exception):
    """The ledger did not answer in time."""


def within(seconds: float, work: Callable[[], object]) -> object:
    """``work()`` in a daemon thread, waited for at most ``seconds``: a ledger that hangs
    holds its thread, not the request (nor the server's exit)."""
    box: dict[str, object] = {}
    done = threading.Event()

    def target() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:  # handed to the request thread, raised there
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=target, daemon=True, name="cronwrap-ledger").start()
    if not done.wait(seconds):
        raise Deadline(f"the ledger did not answer within {seconds:g}s")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]


class Response(Record):
    status: int
    body: bytes
    content_type: str
    extra: list[tuple[str, str]]
    _defaults = dict(content_type=HTML, extra=[])


def html(status: int, text: str) -> Response:
    return Response(status, text.encode("utf-8"), HTML, [])


class Dashboard:
    """The WSGI application. ``open_ledger()`` opens the ledger read-only (the same
    resolution as every command); ``log_dirs(job)`` are this host's trusted log directories
    for the job (``logs``'s); ``clock()`` is now, in UTC; ``label`` names the ledger on pages
    (passwords redacted)."""

    def __init__(self, open_ledger: Callable[[], base.Ledger],
                 log_dirs: Callable[[str], list[Path]], token: str | None = None,
                 label: str = "", clock: Callable[[], datetime] | None = None,
                 deadline: float = LEDGER_DEADLINE) -> None:
        self.open_ledger = open_ledger
        self.log_dirs = log_dirs
        self.token = token
        self.label = label
        self.clock = clock or (lambda: datetime.now(timezone.utc))
        self.deadline = deadline
        self.strips = Strips()

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        try:
            response = self.respond(environ, method)
        except Exception as exc:  # one line on stderr, never a traceback with a URL in it
            sys.stderr.write(f"cronwrap serve: {type(exc).__name__} while answering a request\n")
            response = html(500, pages.problem_page(500, "Internal error",
                                                    "cronwrap could not draw this page."))
        headers = [("Content-Type", response.content_type),
                   ("Content-Length", str(len(response.body))), *HEADERS, *response.extra]
        start_response(f"{response.status} {REASONS.get(response.status, '')}", headers)
        return [b"" if method == "HEAD" else response.body]

    def respond(self, environ: dict, method: str) -> Response:
        if self.token is not None and not self.authorized(environ.get("HTTP_AUTHORIZATION", "")):
            return Response(401, b"401 Unauthorized: send Authorization: Bearer TOKEN\n", TEXT,
                            [("WWW-Authenticate", 'Bearer realm="cronwrap"')])
        if method not in ("GET", "HEAD"):
            return Response(405, b"405 Method Not Allowed: cronwrap serve is read-only\n", TEXT,
                            [("Allow", "GET, HEAD")])
        raw = environ.get("REQUEST_URI") or environ.get("PATH_INFO", "/")
        path, _, query = raw.partition("?")
        segments = [unquote(s) for s in path.split("/")[1:]]
        params = {k: v[-1] for k, v in parse_qs(query or environ.get("QUERY_STRING", "")).items()}
        root = "../" * (len(segments) - 1) or "./"  # pages link relatively (any proxy prefix)
        try:
            return self.route(segments, params, root)
        except Deadline as exc:
            return self.unavailable(str(exc), root)
        except CronwrapError as exc:  # LedgerError and kin: one line, passwords redacted
            return self.unavailable(f"the ledger did not answer: {exc}", root)

    def authorized(self, header: str) -> bool:
        import hmac

        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(given.strip().encode(), self.token.encode())  # type: ignore[union-attr]

    def route(self, seg: list[str], params: dict[str, str], root: str) -> Response:
        if seg == [""]:
            return self.overview()
        if seg == ["metrics"]:
            return self.metrics()
        if seg == ["healthz"]:
            return self.healthz()
        if seg == ["api", "status"]:
            return self.api_status()
        # A job name is one segment (its "/" encoded), or several when a proxy decoded it.
        if len(seg) >= 4 and seg[:2] == ["api", "jobs"] and seg[-1] == "history":
            return self.api_history("/".join(seg[2:-1]), params)
        if len(seg) >= 4 and seg[0] == "jobs" and seg[-2] == "runs":
            return self.run("/".join(seg[1:-2]), seg[-1], root)
        if len(seg) >= 2 and seg[0] == "jobs" and any(seg[1:]):
            return self.job("/".join(seg[1:]), params, root)
        return self.not_found("No such page", "See the list of all jobs.", root)

    # -- reading the ledger

    def read(self, work: Callable[[base.Ledger, datetime], object]) -> object:
        now = self.clock()

        def task() -> object:
            ledger = self.open_ledger()
            try:
                return work(ledger, now)
            finally:
                ledger.close()

        return within(self.deadline, task)

    def reports(self, ledger: base.Ledger, now: datetime, names: list[str] | None = None):
        from cronwrap import report

        return report.job_reports(ledger, now - SINCE, names, now)

    # -- endpoints

    def overview(self) -> Response:
        def work(ledger: base.Ledger, now: datetime) -> str:
            reports = self.reports(ledger, now)
            return pages.overview(reports, self.strips.get(ledger, reports, now), now, self.label)

        return html(200, self.read(work))  # type: ignore[arg-type]

    def metrics(self) -> Response:
        from cronwrap import monitor

        text = self.read(lambda ledger, now: monitor.prometheus(self.reports(ledger, now), now))
        return Response(200, str(text).encode("utf-8"), PROMETHEUS, [])

    def healthz(self) -> Response:
        self.read(lambda ledger, now: ledger.job_info(""))  # a query the ledger must answer
        return Response(200, b"ok\n", TEXT, [])

    def api_status(self) -> Response:
        from cronwrap import report

        def work(ledger: base.Ledger, now: datetime) -> list:
            return [report.report_json(r, now) for r in self.reports(ledger, now)]

        return self.json(self.read(work))

    def api_history(self, name: str, params: dict[str, str]) -> Response:
        limit = params.get("limit", str(HISTORY_LIMIT))
        if not (limit.isascii() and limit.isdigit() and 1 <= int(limit) <= HISTORY_MAX):
            return Response(400, f"limit: 1 to {HISTORY_MAX}\n".encode(), TEXT, [])

        def work(ledger: base.Ledger, now: datetime) -> list | None:
            runs = ledger.runs(name, int(limit))
            if not runs and ledger.job_info(name) is None:
                return None
            return [r.to_json(now) for r in runs]

        found = self.read(work)
        if found is None:
            return Response(404, b"[]\n", JSON, [])
        return self.json(found)

    def json(self, data: object) -> Response:
        return Response(200, (json.dumps(data, indent=2) + "\n").encode("utf-8"), JSON, [])

    def job(self, name: str, params: dict[str, str], root: str = "../") -> Response:
        text = params.get("page", "1")
        page = int(text) if text.isascii() and text.isdigit() and 0 < int(text) <= MAX_PAGE else 1

        def work(ledger: base.Ledger, now: datetime) -> str | None:
            runs = ledger.runs(name, max(page * PAGE_SIZE + 1, CHART_RUNS))
            if not runs and ledger.job_info(name) is None:
                return None
            reports = self.reports(ledger, now, [name])
            rep = reports[0] if reports else None
            explanation, words = explain(rep, now)
            shown = runs[(page - 1) * PAGE_SIZE:page * PAGE_SIZE]
            return pages.job_page(rep, name, shown, runs[:CHART_RUNS], explanation, words, page,
                                  len(runs) > page * PAGE_SIZE, now, self.label, root)

        text_page = self.read(work)
        if text_page is None:
            return self.not_found("No such job", f"The ledger has no job named {name!r}.", root)
        return html(200, text_page)  # type: ignore[arg-type]

    def run(self, name: str, run_id: str, root: str = "../../../") -> Response:
        if not (run_id.isascii() and run_id.isdigit() and 0 < len(run_id) < 19):
            return self.not_found("No such run", "A run id is a number.", root)

        def work(ledger: base.Ledger, now: datetime) -> tuple | None:
            run = ledger.get_run(name, int(run_id))
            return None if run is None else (run, now)

        found = self.read(work)
        if found is None:
            return self.not_found("No such run", f"The job {name!r} has no run {run_id}.", root)
        run, now = found  # type: ignore[misc]
        dirs = self.log_dirs(name)
        output, source = captured_output(run, dirs)
        return html(200, pages.run_page(run, run_events(run, dirs), output, source, now,
                                        self.label, root))

    def not_found(self, title: str, detail: str, root: str = "./") -> Response:
        return html(404, pages.problem_page(404, title, detail, root))

    def unavailable(self, detail: str, root: str = "./") -> Response:
        return html(503, pages.problem_page(503, "The ledger is not answering", detail, root))


class Strips:
    """The overview's strip of each job (its newest ``pages.STRIP`` runs, drawn), kept
    between requests while the job's summary is unchanged: a firing, a mark, a finish, a
    renewed or released lease or a prune changes it (``fingerprint``), and only then are the
    job's runs read again. 500 jobs are 500 queries and 15,000 runs to decode and draw: about
    1 s on a million-run ledger, against a few milliseconds for the jobs that changed."""

    def __init__(self) -> None:
        self.kept: dict[str, tuple[tuple, list[base.Run], str | None]] = {}
        self.lock = threading.Lock()

    def get(self, ledger: base.Ledger, reports: list, now: datetime) -> dict[str, str]:
        with self.lock:
            kept = dict(self.kept)
        fresh: dict[str, tuple[tuple, list[base.Run], str | None]] = {}
        drawn: dict[str, str] = {}
        for rep in reports:
            job, key = rep.summary.job, fingerprint(rep.summary)
            entry = kept.get(job)
            if entry is None or entry[0] != key:
                runs = ledger.runs(job, pages.STRIP, now - SINCE)  # status NAME's window
                settled = all(r.status != base.RUNNING for r in runs)  # drawn the same later
                entry = (key, runs, pages.strip_html(runs, now) if settled else None)
            fresh[job] = entry
            drawn[job] = entry[2] if entry[2] is not None else pages.strip_html(entry[1], now)
        with self.lock:
            self.kept = fresh  # every job of the ledger: the ones gone are dropped
        return drawn


def fingerprint(s: base.JobSummary) -> tuple:
    """What changes when any run of the job is added or changes (its status, its lease)."""
    last = s.last_run
    return (s.last_seen, s.last_slot, s.last_success_at, tuple(sorted(s.counts.items())),
            None if last is None else (last.run_id, last.status, last.fence, last.finished_at),
            tuple((r.run_id, r.fence, r.locked_until) for r in s.running))


def explain(rep, now: datetime):
    """``explain``'s next fire times and notes for the job's recorded schedule, and the
    schedule in words; (None, "") when there is none or this version cannot read it."""
    from cronwrap import schedule as sched
    from cronwrap.schedule.explanation import in_words

    if rep is None or not rep.summary.schedule:
        return None, ""
    s = rep.summary
    try:
        zone = sched.load_zone(s.tz or "UTC")
        result = sched.explain(s.schedule, zone, s.tz or "UTC", sched.system_zone_name(), now, 5)
        return result, in_words(s.schedule, zone)
    except CronwrapError:
        return None, ""


def run_events(run: base.Run, log_dirs: list[Path]) -> list[dict]:
    """The run's events in this host's run logs (the log directories ``logs`` reads)."""
    from cronwrap.runlog import read_events

    found = []
    for directory in log_dirs:
        try:
            events = read_events(directory)
        except (OSError, ValueError):
            continue
        found += [e for e in events if isinstance(e, dict) and e.get("job") == run.job
                  and e.get("run_id") == run.run_id]
    return found


def captured_output(run: base.Run, log_dirs: list[Path]) -> tuple[str | None, str]:
    """The end of the run's output file (read as ``logs`` reads it: below a trusted log
    directory, no symlink), else the ledger's tail of it."""
    from cronwrap.logview import open_below
    from cronwrap.runlog import output_path

    relative = output_path(Path(), run.job, run.run_id, run.attempt)
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
        return data.decode("utf-8", "backslashreplace"), f"from {directory / relative}{cut}"
    if run.error_tail:
        return run.error_tail, "the ledger's tail of the output (the output file is not on this host)"
    return None, ""


def serve(app: Dashboard, listen: Listen, threads: int = THREADS) -> int:
    """Serve ``app`` until interrupted; one line says where."""
    try:
        from waitress.server import create_server
    except ImportError:
        raise UsageError("serve needs the waitress package: reinstall cronwrap "
                         "(pip install .) to get its dependencies") from None
    try:
        server = create_server(app, host=listen.host, port=listen.port, threads=threads,
                               ident="cronwrap", expose_tracebacks=False,
                               clear_untrusted_proxy_headers=True)
    except OSError as exc:
        raise UsageError(f"--listen {listen.host}:{listen.port}: {exc.strerror or exc}") from None
    host = getattr(server, "effective_host", listen.host)
    port = getattr(server, "effective_port", listen.port)
    shown = f"[{host}]" if ":" in str(host) else host
    print(f"cronwrap serve: listening on http://{shown}:{port}/"
          + (f" (ledger {app.label})" if app.label else ""), flush=True)
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0
