"""``cronwrap serve`` in-process: the listen rules, the WSGI application over an in-memory
ledger, the pages' escaping, and that ``run`` never imports the server."""

from __future__ import annotations

import io
import json
import threading
from datetime import datetime, timezone

import pytest

from cronwrap.errors import UsageError
from cronwrap.ledger.sqlite import SqliteLedger
from cronwrap.model import ClaimRequest, Finish, JobInfo, Run
from cronwrap.read import pages, serve
from tests.imports import modules_of_a_firing

NOW = datetime(2027, 1, 15, 8, 0, 30, tzinfo=timezone.utc)


@pytest.mark.parametrize("text, host, port", [("127.0.0.1:8080", "127.0.0.1", 8080),
                                              ("[::1]:0", "::1", 0), ("localhost:80", "localhost", 80),
                                              ("0.0.0.0:9000", "0.0.0.0", 9000)])
def test_parse_listen(text, host, port):
    assert serve.parse_listen(text) == serve.Listen(host, port)


@pytest.mark.parametrize("text", ["8080", ":8080", "host:", "host:http", "h:70000", "h:٣"])
def test_parse_listen_refuses(text):
    with pytest.raises(UsageError, match="--listen"):
        serve.parse_listen(text)


@pytest.mark.parametrize("host, loopback", [("127.0.0.1", True), ("127.8.9.1", True),
                                            ("::1", True), ("LocalHost", False),
                                            ("0.0.0.0", False), ("::", False), ("10.0.0.1", False),
                                            ("localhost.example.com", False), ("128.0.0.1", False)])
def test_loopback_is_an_address_not_a_name(host, loopback):
    assert serve.is_loopback(host) is loopback


def test_a_token_unless_no_auth_on_loopback():
    token, made = serve.token_for(serve.Listen("127.0.0.1", 8080), None, False)
    assert made and len(token) >= 40 and token != serve.token_for(serve.Listen("h", 1), None, False)[0]
    assert serve.token_for(serve.Listen("0.0.0.0", 8080), None, False)[1]  # beyond loopback too
    for host in ("127.0.0.1", "::1", "localhost"):  # localhost: checked again once bound
        assert serve.token_for(serve.Listen(host, 8080), None, True) == (None, False)
    for host in ("0.0.0.0", "::", "example.com"):
        with pytest.raises(UsageError, match="--no-auth"):
            serve.token_for(serve.Listen(host, 8080), None, True)
    with pytest.raises(UsageError, match="give one of them"):
        serve.token_for(serve.Listen("127.0.0.1", 8080), "/dev/null", True)


def test_a_ledger_that_never_answers_gives_a_deadline():
    release = threading.Event()
    try:
        with pytest.raises(serve.Deadline, match="did not answer within"):
            serve.within(0.05, release.wait)
    finally:
        release.set()


# -- the application over an in-memory ledger --------------------------------------------------

class Shared:
    """One in-memory ledger the application opens again and again (close keeps it)."""

    def __init__(self) -> None:
        self.ledger = SqliteLedger(None, clock=lambda: NOW.timestamp())
        self.ledger.close = lambda: None  # type: ignore[method-assign]

    def __call__(self):
        return self.ledger


def call(app, path: str, method: str = "GET", auth: str | None = None, cookie: str = "",
         headers: dict[str, str] | None = None, raw: bool = False):
    got: dict = {}

    def start_response(status, headers):
        got["status"], got["headers"] = int(status.split()[0]), dict(headers)

    environ = {"REQUEST_METHOD": method, "REQUEST_URI": path, "PATH_INFO": path.split("?")[0],
               "wsgi.input": io.BytesIO(), "SCRIPT_NAME": ""}
    if auth:
        environ["HTTP_AUTHORIZATION"] = auth
    if cookie:
        environ["HTTP_COOKIE"] = cookie
    environ.update(headers or {})
    body = b"".join(app(environ, start_response))
    return got["status"], got["headers"], body if raw else body.decode()


@pytest.fixture
def app():
    shared = Shared()
    request = ClaimRequest(job=JobInfo("<b>j</b>", schedule="*/5 * * * *", tz="UTC"),
                           run_key="2027-01-15T08:00:00Z", scheduled_at=NOW.replace(second=0),
                           trigger="schedule", host="h<1>", pid=1, pid_start=1, lease=60.0)
    claim = shared.ledger.claim(request)
    shared.ledger.finish(claim.run, Finish(status="failed", duration_ms=5, exit_code=2, signal=None,
                                           timed_out=False, error_tail="<i>x</i>", log_path=None))
    return serve.Dashboard(shared, lambda name: [], None, clock=lambda: NOW)


def test_pages_escape_names_hosts_and_tails(app):
    for path in ("/", "/jobs/%3Cb%3Ej%3C%2Fb%3E", "/jobs/%3Cb%3Ej%3C%2Fb%3E/runs/1"):
        status, headers, body = call(app, path)
        assert status == 200, path
        assert "<b>j" not in body and "h<1>" not in body and "<i>" not in body
        assert "&lt;b&gt;j&lt;/b&gt;" in body
        assert "script-src" not in headers["Content-Security-Policy"]


def test_methods_and_unknowns(app):
    assert call(app, "/", "POST")[0] == 405
    assert call(app, "/", "HEAD")[2] == ""
    assert call(app, "/jobs/nope")[0] == 404 and call(app, "/jobs/%3Cb%3Ej%3C%2Fb%3E/runs/2")[0] == 404


def test_token(app):
    app.auth = serve.Auth("t0k")
    assert call(app, "/")[0] == 401 and call(app, "/", auth="Bearer t0")[0] == 401
    assert call(app, "/", auth="Bearer t0k")[0] == 200
    assert call(app, "/", "DELETE")[0] == 401  # who has no token learns nothing more
    assert call(app, "/", auth="Bearer t\u00f6k")[0] == 401  # any text is compared safely


@pytest.mark.parametrize("path, location", [
    ("/?token=t0k", "./"), ("/jobs/a%2Fb?token=t0k&before=7", "./a%2Fb?before=7"),
    ("/jobs/a/b?x=1&%74oken=t0k&token=t0k", "./b?x=1"), ("/metrics?token=t0k", "./metrics")])
def test_token_in_the_url_signs_in_once(app, path, location):
    app.auth = serve.Auth("t0k")
    status, headers, _ = call(app, path)
    assert status == 303 and headers["Location"] == location
    pair = headers["Set-Cookie"].split(";")[0]
    assert "t0k" not in headers["Set-Cookie"]
    assert call(app, "/", cookie=f"other=1; {pair}")[0] == 200
    assert call(app, "/", cookie=pair.replace("=", "=x"))[0] == 401
    assert serve.Auth("t0k").cookie != serve.Auth("t1k").cookie  # two dashboards, one host


def test_no_auth_is_said_on_every_page(app):
    for path in ("/", "/jobs/%3Cb%3Ej%3C%2Fb%3E", "/nothing", "/jobs/%3Cb%3Ej%3C%2Fb%3E/runs/1"):
        assert pages.OPEN_BANNER in call(app, path)[2], path
    assert call(app, "/healthz")[2] == f"ok\nwarning: {pages.OPEN_BANNER}\n"
    app.auth = serve.Auth("t0k")
    assert pages.OPEN_BANNER not in call(app, "/", auth="Bearer t0k")[2]


@pytest.mark.parametrize("items", [[], [{"a": [1, {"b": "x\ny"}]}], [{"n": i} for i in range(250)]])
def test_streamed_json_is_the_json_of_the_whole(items):
    import json

    assert b"".join(serve.json_array(items, dict)) == (json.dumps(items, indent=2) + "\n").encode()


def test_a_failing_ledger_gives_503(app):
    def broken():
        from cronwrap.errors import LedgerError

        raise LedgerError("cannot open postgresql://***@db/x: connection refused")

    app.open_ledger = broken
    status, _, body = call(app, "/")
    assert status == 503 and "connection refused" in body


def strip_of(body: str) -> str:
    import re

    return re.sub("<[^>]+>", "", re.search(r'<span class="strip">(.*?)</td>', body).group(1))


def test_the_overview_strip_follows_new_runs_and_finishes(app):
    ledger = app.open_ledger()
    assert strip_of(call(app, "/")[2]) == "✗"
    request = ClaimRequest(job=JobInfo("<b>j</b>", schedule="*/5 * * * *", tz="UTC"),
                           run_key="2027-01-15T08:05:00Z", scheduled_at=NOW.replace(minute=5),
                           trigger="manual", host="h", pid=2, pid_start=1, lease=600.0)
    claim = ledger.claim(request)
    assert strip_of(call(app, "/")[2]) == "✗▶"  # kept strips are not shown stale
    ledger.finish(claim.run, Finish(status="succeeded", duration_ms=5, exit_code=0, signal=None,
                                    timed_out=False, error_tail=None, log_path=None))
    assert strip_of(call(app, "/")[2]) == "✗✓"
    app.clock = lambda: NOW.replace(minute=30)  # later: the same strip, from what was kept
    assert strip_of(call(app, "/")[2]) == "✗✓"


def test_a_status_with_no_colour_of_its_own_is_still_drawn():
    run = Run(run_id=1, job="j", run_key="k", scheduled_at=NOW, trigger="schedule",
              status="brand-new", attempt=1)
    html = pages.status_html(run, NOW)
    assert "brand-new" in html and 'class="s-white"' in html


# -- run's imports -----------------------------------------------------------------------------

def test_run_never_imports_the_server(tmp_path):
    modules = modules_of_a_firing(tmp_path, ["run", "-n", "imports", "--schedule",
                                             "*/5 * * * *", "--", "true"])
    assert "cronwrap.run.runner" in modules and "cronwrap.run.attempt" in modules  # it did run
    assert [m for m in modules if m.split(".")[0] == "waitress"
            or m in ("cronwrap.read.serve", "cronwrap.read.pages")] == []


def test_a_paused_job_is_ok_and_says_so_on_the_page_the_api_and_metrics(app):
    """serve draws what status computes (report.job_reports): a pause shows everywhere."""
    ledger = app.open_ledger()
    ledger.pause("<b>j</b>", None, "maint <now>", "ops1")
    status, _, body = call(app, "/api/status")
    (job,) = json.loads(body)
    assert status == 200 and job["paused"] is True and job["health"] == "ok"
    assert job["why"] == "paused (maint <now>)" and job["pause"]["paused_by"] == "ops1"
    page = call(app, "/")[2]
    assert "paused (maint &lt;now&gt;)" in page
    assert 'cronwrap_paused{cronjob="<b>j</b>"} 1' in call(app, "/metrics")[2]


# -- the dashboard says why (issue 23 §2) --------------------------------------------------------

def ended(status: str, **fields) -> Run:
    return Run(run_id=1, job="j", run_key="k", scheduled_at=NOW, trigger="schedule",
               status=status, attempt=1, **fields)


@pytest.mark.parametrize("run, words", [
    (ended("failed", exit_code=3), "the job exited with status 3"),
    (ended("failed", exit_code=127), "exit 127: the command was not found"),
    (ended("failed", exit_code=143, signal=15), "ended by signal 15 (SIGTERM), exit 143"),
    (ended("timeout", exit_code=124, timed_out=True), "it reached its --timeout and was ended (exit 124)"),
    (ended("timeout", exit_code=137, timed_out=True), "was ended and needed KILL (exit 137)"),
    (ended("killed", exit_code=137, skip_reason="lease_lost"), "its lease was lost"),
    (ended("killed", exit_code=143, signal=15, skip_reason="memory"),
     "cronwrap ended its tree: it went over --max-memory (exit 143)"),
    (ended("killed", exit_code=137, signal=9, skip_reason="cpu"), "went over --max-cpu (exit 137)"),
    (ended("skipped", skip_reason="overlap"), "another run of the job was live"),
    (ended("skipped", skip_reason="too_late"), "older than --catchup-window"),
    (ended("missed"), "the slot passed without a run"),
    (ended("warning", exit_code=0, skip_reason="too_fast"), "faster than --min-duration"),
    (ended("warning", exit_code=3), "exit 3 is a --warning-exit status"),
    (ended("succeeded", exit_code=0), "the job exited with status 0"),
    (ended("running", locked_until=NOW.replace(minute=1, second=30)), "running; its lease has 1m00s left"),
    (ended("running", locked_until=NOW.replace(second=0)), "its runner is gone"),
])
def test_why_a_run_ended_in_words(run, words):
    from cronwrap.read.report import run_why

    assert words in run_why(run, NOW)


def test_events_read_as_the_log_wrote_them():
    table = pages.events_table([{"ts": "t", "event": "finish", "signal": None, "took_over": False,
                                 "forwarded": ["TERM"], "note": "a <b>"}])
    assert "<td>took_over=false forwarded=[&quot;TERM&quot;] note=a &lt;b&gt;</td>" in table
    assert "None" not in table and "signal" not in table


def test_a_filter_keeps_the_strips_of_the_jobs_it_hides(app):
    ledger = app.open_ledger()
    request = ClaimRequest(job=JobInfo("other"), run_key="k", scheduled_at=NOW,
                           trigger="manual", host="h", pid=2, pid_start=1, lease=60.0)
    ledger.finish(ledger.claim(request).run, Finish(status="succeeded", duration_ms=5, exit_code=0,
                                                    signal=None, timed_out=False, error_tail=None,
                                                    log_path=None))
    call(app, "/")
    kept = dict(app.strips.kept)
    assert set(kept) == {"<b>j</b>", "other"}
    status, _, body = call(app, "/?q=OTH")
    assert status == 200 and 'href="jobs/other"' in body and "&lt;b&gt;j" not in body
    assert app.strips.kept == kept  # the hidden job's strip is not read again when shown
    status, _, body = call(app, "/?health=critical")
    assert 'href="jobs/%3Cb%3Ej%3C%2Fb%3E"' in body and 'href="jobs/other"' not in body
    assert "run 1</a> failed (exit 2) 0ms ago: &lt;i&gt;x&lt;/i&gt;</span>" in body


# -- answers kept between requests (issue 24 §4) ----------------------------------------------

class Counted(Shared):
    """The shared ledger, counting the reads of summaries (what every kept answer is drawn
    from) and the opens."""

    def __init__(self, app) -> None:
        self.ledger, self.opens, self.reads = app.open_ledger(), 0, 0
        summaries = self.ledger.summaries

        def counted(*args, **kw):
            self.reads += 1
            return summaries(*args, **kw)

        self.ledger.summaries = counted  # type: ignore[method-assign]

    def __call__(self):
        self.opens += 1
        return self.ledger


def finish_a_run(ledger, key: str) -> None:
    request = ClaimRequest(job=JobInfo("<b>j</b>"), run_key=key, scheduled_at=NOW,
                           trigger="manual", host="h", pid=2, pid_start=1, lease=60.0)
    ledger.finish(ledger.claim(request).run, Finish(status="succeeded", duration_ms=5, exit_code=0,
                                                    signal=None, timed_out=False, error_tail=None,
                                                    log_path=None))


@pytest.mark.parametrize("path", ["/", "/metrics", "/?health=critical&q=j"])
def test_an_answer_is_drawn_once_while_the_ledger_is_unchanged(app, path):
    counted = app.open_ledger = Counted(app)
    first = call(app, path)
    assert first[0] == 200 and counted.reads == 1
    for _ in range(5):
        assert call(app, path) == first
    assert counted.reads == 1 and counted.opens == 2  # one drawing, and the token's own ledger
    finish_a_run(counted.ledger, "later")  # a change is never served from what was kept
    changed = call(app, path)
    assert counted.reads == 2 and changed != first
    assert call(app, path) == changed and counted.reads == 2


def test_time_passing_redraws_what_was_kept(app):
    counted = app.open_ledger = Counted(app)
    call(app, "/")
    app.clock = lambda: NOW.replace(second=59)  # past KEEP_FOR and STALE_FOR: drawn again now
    status, _, body = call(app, "/")
    assert counted.reads == 2 and "as of 2027-01-15T08:00:59.000+00:00" in body


def test_a_kept_answer_is_gzipped_for_a_client_that_takes_it(app):
    import gzip

    for path in ("/", "/metrics"):
        _, plain, body = call(app, path, raw=True)
        for accept in ("gzip", "deflate, gzip;q=0.5, br", "GZIP"):
            _, headers, packed = call(app, path, raw=True,
                                      headers={"HTTP_ACCEPT_ENCODING": accept})
            assert headers["Content-Encoding"] == "gzip" and headers["Vary"] == "Accept-Encoding"
            assert gzip.decompress(packed) == body
            assert headers["Content-Length"] == str(len(packed))
            assert headers["Content-Security-Policy"] == plain["Content-Security-Policy"]
        for refused in ("identity", "gzip;q=0", "br"):
            _, headers, same = call(app, path, raw=True, headers={"HTTP_ACCEPT_ENCODING": refused})
            assert "Content-Encoding" not in headers and same == body
    # an answer that echoes the request (the filter's text) is never compressed
    _, headers, _ = call(app, "/?q=j", headers={"HTTP_ACCEPT_ENCODING": "gzip"})
    assert "Content-Encoding" not in headers


def test_a_failing_ledger_is_not_kept(app):
    shared = app.open_ledger
    call(app, "/")

    def broken():
        from cronwrap.errors import LedgerError

        raise LedgerError("connection refused")

    app.open_ledger = broken
    app.forget_prober()
    assert call(app, "/")[0] == 503  # the token cannot be had: nothing kept is shown
    app.open_ledger = shared
    assert call(app, "/")[0] == 200


def test_an_answer_only_old_is_served_while_the_next_is_drawn(app):
    counted = app.open_ledger = Counted(app)
    first = call(app, "/")[2]
    app.clock = lambda: NOW.replace(second=32)  # 2 s later, the ledger unchanged
    assert call(app, "/")[2] == first  # at once, as kept: the next one is drawn meanwhile
    for lock in app.kept.drawing:  # held by the drawing until it is done
        with lock:
            pass
    assert counted.reads == 2 and "as of 2027-01-15T08:00:32.000+00:00" in call(app, "/")[2]


def test_the_run_page_and_the_history_api_show_the_slots_steps():
    """cronwrap step's records (issue 26 §1): a Steps table on the run page, escaped, and
    "steps" in /api/jobs/NAME/history, as history --json has them."""
    shared = Shared()
    request = ClaimRequest(job=JobInfo("j"), run_key="k", scheduled_at=NOW, trigger="manual",
                           host="h1", pid=1, pid_start=1, lease=60.0)
    run = shared.ledger.claim(request).run
    for key, status, code in (("load <1>", "succeeded", 0), ("publish", "failed", 3)):
        assert shared.ledger.begin_step(run.run_id, "k", run.fence, key, "h1", 9, False, 0).action == "run"
        shared.ledger.end_step(run, key, status, code, None, 1500)
    shared.ledger.begin_step(run.run_id, "k", run.fence, "left", "h1", 9, False, 0)
    shared.ledger.finish(run, Finish(status="failed", duration_ms=5, exit_code=3, signal=None,
                                     timed_out=False, error_tail=None, log_path=None))
    app = serve.Dashboard(shared, lambda name: [], None, clock=lambda: NOW)
    status, _, body = call(app, f"/jobs/j/runs/{run.run_id}")
    assert status == 200 and '<table id="steps">' in body
    assert "load &lt;1&gt;" in body and "load <1>" not in body
    assert body.count("succeeded</td>") == 1 and ">abandoned</td>" in body  # "left": its attempt ended
    status, _, api = call(app, "/api/jobs/j/history")
    (row,) = json.loads(api)
    assert [(s["step"], s["status"], s["exit_code"], s["attempt"]) for s in row["steps"]] == [
        ("left", "running", None, 1), ("load <1>", "succeeded", 0, 1), ("publish", "failed", 3, 1)]
