"""After the run: ``--on-failure``/``--on-success``/``--on-warning`` hooks and
healthchecks-style ``--ping``.

Once the job has run, nothing here may change its exit status or hold cronwrap up for long:
``run_hook`` never raises and is bounded by its timeout; ``Pinger`` sends each ping from a
daemon thread and ``wait`` gives them a bounded chance before cronwrap exits. Failures come
back as results and one-line messages for the run log.

subprocess and urllib are imported only when a hook or ping is actually used (urllib.request
alone costs ~17 ms of import).
"""

from __future__ import annotations

import os
import signal
import threading
import time

from cronwrap import __version__
from cronwrap.errors import EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND, EXIT_SIGNAL_BASE
from cronwrap.model import DONE_STATUSES
from cronwrap.process import procs
from cronwrap.record import TYPE_CHECKING, Record
from cronwrap.redact.redactor import split_userinfo, url as redact
from cronwrap.run.jobenv import exec_values

if TYPE_CHECKING:
    from subprocess import Popen

TAIL_BYTES = 4096  # of a hook's output kept, and of the job's output given to a hook
PING_BODY_BYTES = 10 * 1024
KILL_GRACE = 2.0  # seconds between TERM and KILL for a hook that overstays its timeout
DRAIN_AFTER_EXIT = 0.5  # seconds to read what a hook's leftover children still write
PING_BACKOFF = (0.5, 1.0)  # pauses before the retries of a ping, then 1 s for any further one


# -- hooks -------------------------------------------------------------------------------------

class HookResult(Record):
    """exit_code: the shell's status (128+N when ended by signal N, 126/127 when it could not
    be started); timed_out: it overstayed its timeout and was ended; duration: seconds;
    output_tail: the last TAIL_BYTES of its stdout+stderr, as text."""

    exit_code: int
    timed_out: bool
    duration: float
    output_tail: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


# What a hook sees on top of the job's own variables (jobenv.JOB_VARIABLES): the registry the
# docs are made from. hook_env sets them, in this order; CRONWRAP_ALERT only when given.
HOOK_VARIABLES = {
    "CRONWRAP_STATUS": "the run's status: `succeeded`, `warning`, `failed`, `timeout` or "
                       "`killed`",
    "CRONWRAP_EXIT_CODE": "the status cronwrap exits with for the run (the job's own; 124, or "
                          "137 when KILL was needed, after a timeout; 128+*N* after signal "
                          "*N*); empty when unknown",
    "CRONWRAP_DURATION_MS": "how long the run took, in milliseconds; empty when unknown",
    "CRONWRAP_OUTPUT_TAIL": f"the last {TAIL_BYTES // 1024} KiB of the job's output, as text, "
                            "secrets replaced by `***` (see REDACTION), NUL bytes removed",
    "CRONWRAP_REASON": "why the run was recorded as it was: `too_fast` (a `warning` faster than "
                       "`--min-duration`), `lease_lost` (`killed`); empty otherwise",
    "CRONWRAP_ALERT": "only under `--alert-after` greater than 1: `failing` (the *N*th failure "
                      "in a row and every further one) or `recovered` (the first success after "
                      "such a streak)",
}


def hook_env(run_env: dict[str, str], status: str, exit_code: int | None,
             duration_ms: int | float | None, output_tail: str | bytes | None,
             alert: str | None = None, reason: str | None = None) -> dict[str, str]:
    """The job's environment (jobenv.JOB_VARIABLES) plus HOOK_VARIABLES for the run. Unknown
    values are empty strings; the output tail is cut to its last 4 KiB, NULs removed (an environment
    string cannot hold one)."""
    values: tuple[str, ...] = (
        status, "" if exit_code is None else str(exit_code),
        "" if duration_ms is None else str(int(duration_ms)),
        tail_text(output_tail or b"", TAIL_BYTES).replace("\0", ""), reason or "")
    if alert:
        values += (alert,)
    return {**run_env, **exec_values(dict(zip(HOOK_VARIABLES, values)))}


def tail_text(data: str | bytes, limit: int) -> str:
    """The last ``limit`` bytes of ``data`` as UTF-8 text, never starting mid-character."""
    raw = data.encode("utf-8", "replace") if isinstance(data, str) else data
    if len(raw) > limit:
        raw = raw[-limit:]
        skip = 0
        while skip < min(3, len(raw)) and raw[skip] & 0xC0 == 0x80:  # continuation bytes
            skip += 1
        raw = raw[skip:]
    return raw.decode("utf-8", "replace")


def run_hook(command: str, env: dict[str, str], timeout: float) -> HookResult:
    """Run ``/bin/sh -c command`` in a session of its own, stdin from /dev/null, stdout and
    stderr captured (last 4 KiB kept). At ``timeout`` seconds (0: none) its tree (procs.Tree:
    its session and their descendants) gets TERM and CONT, and KILL 2 s later. What it leaves
    running after exiting by itself is left alone. Never raises."""
    import subprocess

    started = time.monotonic()
    try:
        proc = procs.spawn(["/bin/sh", "-c", command], env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the command or environment
        code = EXIT_NOT_FOUND if isinstance(exc, FileNotFoundError) else EXIT_NOT_EXECUTABLE
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return HookResult(code, False, time.monotonic() - started, f"cannot run hook: {reason}")
    output = proc.stdout
    assert output is not None  # stdout=PIPE
    watch = _HookWatch(proc, output.fileno(), started + timeout if timeout > 0 else None)
    try:
        watch.collect()
    except Exception as exc:  # a bug here must not become the job's failure: end the hook
        watch.tree.signal(signal.SIGKILL)
        watch.tail += f"\ncronwrap: hook supervision failed: {type(exc).__name__}: {exc}".encode()
        proc.poll()
    finally:
        output.close()
    code = proc.returncode
    if code is None:  # unkillable (uninterruptible sleep): leave it, report what KILL means
        code = EXIT_SIGNAL_BASE + signal.SIGKILL
    elif code < 0:
        code = EXIT_SIGNAL_BASE - code
    return HookResult(code, watch.timed_out, time.monotonic() - started,
                      tail_text(bytes(watch.tail), TAIL_BYTES))


class _HookWatch:
    """Reads a hook's output into a bounded tail while enforcing its deadline."""

    def __init__(self, proc: Popen[bytes], fd: int, deadline: float | None) -> None:
        self.proc, self.fd, self.deadline = proc, fd, deadline
        self.tree = procs.Tree(procs.identify(proc.pid), group=True)
        self.tail = bytearray()
        self.timed_out = False
        self.kill_at: float | None = None
        self.give_up_at: float | None = None  # after KILL, or after exit while draining

    def collect(self) -> None:
        import selectors

        fd = self.fd
        eof = False
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while not self._done(eof):
                wait = self._next_wait()
                if eof:
                    self._wait_exit(wait)
                elif sel.select(wait):
                    eof = not self._read(fd)

    def _done(self, eof: bool) -> bool:
        now = time.monotonic()
        if self.proc.poll() is not None:
            self.tree.group = False  # reaped: its PID, the group's ID, may be reused
            if eof:
                return True
            if self.give_up_at is None:  # leftover children may hold the pipe open
                self.give_up_at = now + DRAIN_AFTER_EXIT
            return now >= self.give_up_at
        if self.deadline is not None and now >= self.deadline and not self.timed_out:
            self.timed_out, self.kill_at = True, now + KILL_GRACE
            self.tree.signal(*procs.first_signals(signal.SIGTERM))
        elif self.kill_at is not None and now >= self.kill_at:
            self.kill_at, self.give_up_at = None, now + 1.0
        if self.give_up_at is not None:  # past KILL_GRACE: at every pass, until it is gone
            self.tree.signal(signal.SIGKILL)
        return self.give_up_at is not None and now >= self.give_up_at

    def _next_wait(self) -> float:
        now = time.monotonic()
        timers = [t for t in (None if self.timed_out else self.deadline, self.kill_at,
                              self.give_up_at) if t is not None]
        return max(min([0.2, *(t - now for t in timers)]), 0.0)

    def _read(self, fd: int) -> bool:
        """One read into the bounded tail; False at end of file."""
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            return False
        self.tail += chunk
        if len(self.tail) > TAIL_BYTES * 2:
            del self.tail[:-TAIL_BYTES]
        return bool(chunk)

    def _wait_exit(self, wait: float) -> None:
        import subprocess

        try:
            self.proc.wait(timeout=max(wait, 0.01))
        except subprocess.TimeoutExpired:
            pass


# -- pings -------------------------------------------------------------------------------------

def ping_url(base: str, suffix: str, rid: str | None = None) -> str:
    """``base`` + ``/suffix`` on the path, before any query string (``?create=1``), and
    healthchecks.io's run ID as ``rid=`` at the end of the query."""
    scheme, userinfo, rest = split_userinfo(base)
    path, q, query = rest.partition("?")
    path = path.partition("#")[0].rstrip("/")
    if rid is not None:
        query = query.partition("#")[0]
        q, query = "?", f"{query}&rid={rid}" if query else f"rid={rid}"
    prefix = scheme if userinfo is None else f"{scheme}{userinfo}@"
    return f"{prefix}{path}/{suffix}{q}{query}" if suffix else f"{prefix}{path}{q}{query}"


def body_tail(raw: bytes, limit: int) -> bytes:
    """The last ``limit`` bytes of ``raw``, from a whole UTF-8 character on."""
    if len(raw) <= limit:
        return raw
    tail = raw[len(raw) - limit:] if limit > 0 else b""
    return tail.lstrip(bytes(range(0x80, 0xC0)))  # no continuation bytes of a cut character


class Pinger:
    """healthchecks.io-style pings: ``start(run)`` sends URL/start; ``finish(run, …)`` sends
    URL/<exit status> (0 is success, anything else a failure) with the output tail as the POST
    body, or URL/fail for a run that failed without a status of its own (or with 0). A ping
    service knows no warning: a run recorded ``warning`` is done, and pings URL/0.

    Every ping carries the run's ID (``rid``, a UUID made for each run: the same on its start
    and its finish, for all of its attempts), so healthchecks.io pairs the pings of runs that
    overlap (a catch-up, another host). A server that answers with ``Ping-Body-Limit: N``
    gets at most the last N bytes of output in each later ping.

    Each ping goes from its own daemon thread, in order (a finish waits for its start), with
    two quick retries (0.5 s, 1 s) on connection errors, timeouts and 5xx. Nothing here
    raises or blocks the job; ``wait(max_seconds)`` before exiting gives pings a bounded
    chance and returns the errors as one-line messages, credentials in the URL redacted."""

    def __init__(self, url: str, timeout: float = 10, retries: int = 2) -> None:
        self.url, self.timeout, self.retries = url, timeout, retries
        self.errors: list[str] = []
        self.body_limit = PING_BODY_BYTES  # lowered by the server's Ping-Body-Limit
        self._threads: list[threading.Thread] = []
        self._rids: dict[str, str] = {}

    def start(self, run: str) -> None:
        """``run``: the run's run key (one slot's run, whichever attempt)."""
        self._send("start", self._rid(run), None)

    def finish(self, run: str, status: str, exit_code: int | None,
               output_tail: str | bytes | None) -> None:
        if status in DONE_STATUSES:
            suffix = "0"
        elif exit_code:
            suffix = str(exit_code)
        else:  # failed, timed out or killed with no status of its own: never report success
            suffix = "fail"
        raw = output_tail.encode("utf-8", "replace") if isinstance(output_tail, str) \
            else output_tail or b""
        self._send(suffix, self._rid(run), raw)

    def wait(self, max_seconds: float = 2.0) -> list[str]:
        """Wait up to ``max_seconds`` in all for pings in flight; then give up on them."""
        deadline = time.monotonic() + max_seconds
        for thread in self._threads:
            thread.join(max(deadline - time.monotonic(), 0.0))
        late = sum(t.is_alive() for t in self._threads)
        if late:
            self.errors.append(f"ping {redact(self.url)}: {late} ping(s) still unanswered after "
                               f"{max_seconds:g}s; gave up")
        return list(self.errors)

    def _rid(self, run: str) -> str:
        import uuid

        return self._rids.setdefault(run, str(uuid.uuid4()))

    def _send(self, suffix: str, rid: str, body: bytes | None) -> None:
        before = self._threads[-1] if self._threads else None
        thread = threading.Thread(target=self._deliver, args=(suffix, rid, body, before),
                                  name="cronwrap-ping", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _deliver(self, suffix: str, rid: str, body: bytes | None,
                 before: threading.Thread | None) -> None:
        url = ping_url(self.url, suffix)  # as errors name it: the rid is noise there
        try:
            if before is not None:
                before.join()  # its answer may have lowered body_limit
            if body is not None:
                body = body_tail(body, self.body_limit)
            for attempt in range(self.retries + 1):
                if attempt:
                    time.sleep(PING_BACKOFF[min(attempt - 1, len(PING_BACKOFF) - 1)])
                error, transient, limit = _request(ping_url(self.url, suffix, rid), body,
                                                   self.timeout)
                if limit is not None:
                    self.body_limit = min(limit, PING_BODY_BYTES)
                if error is None:
                    return
                if not transient:
                    break
            self.errors.append(f"ping {redact(url)}: {error}")
        except Exception as exc:  # never let a ping thread print a traceback over the job's output
            self.errors.append(f"ping {redact(url)}: {type(exc).__name__}: {exc}")


def _request(url: str, body: bytes | None,
             timeout: float) -> tuple[str | None, bool, int | None]:
    """One HTTP request. Returns (error or None, whether the error is worth a retry, the
    server's Ping-Body-Limit if it sent one)."""
    import urllib.error
    import urllib.request

    plain, headers = credentials(url)
    headers["User-Agent"] = f"cronwrap/{__version__}"
    if body is not None:
        headers["Content-Type"] = "text/plain; charset=utf-8"
    request = urllib.request.Request(plain, data=body, headers=headers,
                                     method="GET" if body is None else "POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read(1024)
            return None, False, _body_limit(response.headers.get("Ping-Body-Limit"))
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code} {exc.reason}", exc.code >= 500, None
    except urllib.error.URLError as exc:
        return one_line(exc.reason), True, None
    except (OSError, ValueError) as exc:  # timeouts, resets; ValueError: a malformed URL
        return one_line(exc), isinstance(exc, OSError), None


def _body_limit(value: str | None) -> int | None:
    """healthchecks.io's ``Ping-Body-Limit: 100000`` (bytes); None when absent or not a
    number."""
    text = (value or "").strip()
    return int(text) if text.isdigit() else None


def credentials(url: str) -> tuple[str, dict[str, str]]:
    """urllib does not take ``user:pass@`` in a URL: move it into a Basic auth header."""
    scheme, userinfo, rest = split_userinfo(url)
    if userinfo is None:
        return url, {}
    import base64
    from urllib.parse import unquote

    token = base64.b64encode(unquote(userinfo).encode()).decode("ascii")
    return f"{scheme}{rest}", {"Authorization": f"Basic {token}"}


def one_line(reason: object) -> str:
    text = str(reason) or type(reason).__name__
    return " ".join(text.split())[:300]
