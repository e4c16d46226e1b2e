"""The HTML pages of ``cronwrap serve``: drawn from what ``status``, ``history``, ``explain``
and the history picture already compute (report.py, picture.py, monitor.py, schedule/).

Data first, rendering second: every function takes plain objects and ``now`` and returns
text; nothing here opens the ledger or a file. Everything a ledger or a job wrote (names,
hosts, keys, reasons, output) goes through ``h``: control characters shown as ``\\x1b``
(textsafe), then HTML-escaped, quotes included. Colours come from the registries (the
picture's style per status, monitor's severity per health), so a status added to the ledger
is drawn, only without a colour of its own. No script, no external fetch: a stylesheet inline
and ``<meta http-equiv=refresh>`` for the auto-refresh.
"""

from __future__ import annotations

from datetime import datetime
from html import escape
from urllib.parse import quote

from cronwrap import __version__
from cronwrap.errors import CHECK_CRITICAL
from cronwrap.model import Run, Status, iso, shown_job
from cronwrap.options.durations import format_duration
from cronwrap.read.monitoring import HEALTH_STATES
from cronwrap.read.picture import MARKS, Picture, history_picture
from cronwrap.read.report import JobReport, ago, duration_text
from cronwrap.record import TYPE_CHECKING, Record
from cronwrap.textsafe import safe_text

if TYPE_CHECKING:
    from cronwrap.schedule import Explanation

REFRESH_OVERVIEW = 30  # seconds: the overview reloads itself (no JavaScript needed)
REFRESH_DETAIL = 60
STRIP = 30  # slots in the overview's strip per job
CHART_WIDTH, CHART_HEIGHT, CHART_PAD = 900, 180, 36

# rich style names (picture.MARKS, report's health) as CSS colours.
STYLE_COLOURS = {"green": "#1a7f37", "red": "#cf222e", "magenta": "#8250df", "dim": "#8c959f",
                 "yellow": "#9a6700", "cyan": "#0969da", "white": "#57606a"}
SEVERITY_COLOURS = ("#1a7f37", "#9a6700", "#cf222e")  # by monitor's CHECK_OK, _WARNING, _CRITICAL
OPEN_BANNER = ("No authentication (cronwrap serve --no-auth): every user of this host can read "
               "this dashboard, job output included.")


class Site(Record):
    """What every page says about the server: the ledger it reads (``ledger``, its password
    redacted) and whether it is open to anyone who can reach it (``--no-auth``)."""

    ledger: str
    open: bool
    _defaults = dict(ledger="", open=False)


class Pager(Record):
    """The links of a page of runs, as query strings of the job's page (``""``: its newest
    runs; None: there is no such page)."""

    newer: str | None
    older: str | None
    _defaults = dict(newer=None, older=None)


CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#1f2328;background:#fff}
h1{font-size:1.4em;margin:0 0 .4em}h2{font-size:1.1em;margin:1.4em 0 .4em}
a{color:#0969da}table{border-collapse:collapse}
th,td{text-align:left;padding:.25em .7em .25em 0;vertical-align:top;border-bottom:1px solid #eaeef2}
th{font-weight:600}th,td{white-space:nowrap}td.why{white-space:normal;min-width:16em}
#fields td,#events td{white-space:normal;word-break:break-all}
.mono,pre,.strip{font-family:ui-monospace,Menlo,Consolas,monospace}
pre{background:#f6f8fa;padding:.7em;overflow:auto;white-space:pre-wrap;max-height:40em}
.strip{white-space:pre;letter-spacing:1px}.muted{color:#57606a}
.banner{padding:.5em .8em;border-left:4px solid #cf222e;background:#fff5f5;margin:.6em 0}
.health{font-weight:600}footer{margin-top:2em;color:#57606a;font-size:.9em}
svg text{font-size:11px;fill:#57606a}.late{fill:#fff0c2}
""" + "".join(f".s-{name}{{color:{colour};fill:{colour};stroke:{colour}}}"
              for name, colour in STYLE_COLOURS.items()) + \
    "".join(f".sev-{n}{{color:{colour}}}" for n, colour in enumerate(SEVERITY_COLOURS))


def h(value: object) -> str:
    """Text for the page from anything the ledger or a job wrote."""
    return escape(safe_text("" if value is None else str(value)), quote=True)


def h_lines(text: str) -> str:
    """Multi-line text (output, tails): lines kept, every other control character shown."""
    return escape(safe_text(text, lines=True), quote=True)


def job_href(root: str, job: str) -> str:
    """A link from a page at depth ``root`` to the job's page; the name is one path segment
    (a ``/`` in it is encoded), so any printable name has its page, and a host's share of a
    host-scoped job too (its separator encoded, %1F)."""
    return f"{root}jobs/{quote(job, safe='')}"


def style_class(status: str) -> str:
    return "s-" + MARKS.get(status, ("?", "white"))[1].replace(" ", "-")


def severity(health: str) -> int:
    """monitor's Nagios state of a health (0 ok, 1 warning, 2 critical): the sort order."""
    return HEALTH_STATES.get(health, CHECK_CRITICAL)


def status_html(run: Run | None, now: datetime) -> str:
    if run is None:
        return '<span class="muted">-</span>'
    shown = run.shown_status(now)
    reason = f" ({h(run.skip_reason)})" if run.skip_reason else ""
    return f'<span class="{style_class(shown)}">{h(shown)}{reason}</span>'


def when_html(t: datetime | None, now: datetime) -> str:
    if t is None:
        return '<span class="muted">-</span>'
    return f'<span title="{h(iso(t))}">{h(ago(t, now))}</span>'


def picture_html(picture: Picture, lines: int = 3) -> str:
    """The history picture's first ``lines`` lines, its style spans as CSS classes."""
    out = []
    for number, text in enumerate(picture.lines[:lines]):
        spans = sorted((s, e, style) for line, s, e, style in picture.spans if line == number)
        pieces, at = [], 0
        for start, end, style in spans:
            pieces.append(h(text[at:start]))
            css = "s-" + style.replace(" ", "-")
            pieces.append(f'<span class="{css}">{h(text[start:end])}</span>')
            at = end
        pieces.append(h(text[at:]))
        out.append("".join(pieces))
    return "\n".join(out)


def document(title: str, root: str, body: str, refresh: int | None = None,
             site: Site = Site()) -> str:
    meta = f'<meta http-equiv="refresh" content="{refresh}">' if refresh else ""
    ledger = site.ledger
    banner = f'<p class="banner" id="no-auth">{h(OPEN_BANNER)}</p>' if site.open else ""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">{meta}'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{h(title)} · cronwrap</title><style>{CSS}</style></head><body>"
            f'<nav><a href="{root or "./"}">all jobs</a></nav>{banner}{body}'
            f"<footer>cronwrap {h(__version__)}{' · ledger ' + h(ledger) if ledger else ''}"
            f"{f' · refreshes every {refresh}s' if refresh else ''}</footer></body></html>\n")


# -- the overview ------------------------------------------------------------------------------

def overview(reports: list[JobReport], strips: dict[str, str], now: datetime,
             site: Site = Site()) -> str:
    """Every job, critical first: health, last run, next due, running now, its last slots
    (``strips``: each job's ``strip_html``)."""
    ordered = sorted(reports, key=lambda r: (-severity(r.health), r.summary.job))
    if not ordered:
        body = ("<h1>cronwrap</h1><p>No jobs recorded yet: run one with "
                "<code>cronwrap run -n NAME -- COMMAND</code>.</p>")
        return document("all jobs", "./", body, REFRESH_OVERVIEW, site)
    counts: dict[str, int] = {}
    for rep in ordered:
        counts[rep.health] = counts.get(rep.health, 0) + 1
    tally = ", ".join(f'<span class="sev-{severity(k)}">{n} {h(k)}</span>'
                      for k, n in sorted(counts.items(), key=lambda kv: -severity(kv[0])))
    head = ("<tr><th>job</th><th>health</th><th>last run</th><th>exit</th><th>duration</th>"
            "<th>host</th><th>when</th><th>next due</th><th>running now</th>"
            f"<th>last {STRIP} slots</th></tr>")
    rows = "".join(overview_row(rep, strips.get(rep.summary.job, ""), now) for rep in ordered)
    body = (f"<h1>cronwrap: {len(ordered)} job{'s' if len(ordered) != 1 else ''}</h1>"
            f"<p>{tally} <span class=\"muted\">(as of {h(iso(now))})</span></p>"
            f'<table id="jobs">{head}{rows}</table>')
    return document("all jobs", "./", body, REFRESH_OVERVIEW, site)


def strip_html(runs: list[Run], now: datetime) -> str:
    """The marks of the picture ``status NAME`` draws, for the job's newest runs. It depends
    on ``now`` only while one of them is running (its lease may expire)."""
    return picture_html(history_picture(runs, STRIP, now), 1) if runs else ""


def overview_row(rep: JobReport, strip: str, now: datetime) -> str:
    s, last = rep.summary, rep.summary.last_run
    running = "<br>".join(f"{h(r.host or '-')} (lease {h(format_duration(r.lease_left(now)))} "
                          "left)" for r in rep.live) or '<span class="muted">-</span>'
    exit_code = "-" if last is None or last.exit_code is None else str(last.exit_code)
    cells = [
        f'<a href="{h(job_href("", s.job))}">{h(shown_job(s.job))}</a>',
        f'<span class="health sev-{severity(rep.health)}">{h(rep.health)}</span> '
        f'<span class="muted">{h(rep.why)}</span>',
        status_html(last, now), h(exit_code), h(duration_text(last)),
        h(last.host if last and last.host else "-"),
        when_html(last.started_at or last.scheduled_at if last else None, now),
        when_html(rep.next_due_at, now), running, f'<span class="strip">{strip}</span>',
    ]
    tds = "".join(f'<td class="why">{c}</td>' if i == 1 else f"<td>{c}</td>"
                  for i, c in enumerate(cells))
    return f'<tr data-health="{h(rep.health)}">{tds}</tr>'


# -- one job -----------------------------------------------------------------------------------

def job_page(rep: JobReport | None, name: str, runs: list[Run], chart_runs: list[Run],
             explanation: Explanation | None, words: str, pager: Pager, now: datetime,
             site: Site = Site(), root: str = "../") -> str:
    """The job's health, its schedule in words with the next fire times and DST notes, a
    duration chart and the history picture of its newest runs, and one page of its runs
    (newest first) with links to the pages beside it. ``root``: the way back to ``/`` from
    this page (``../``; deeper when a proxy decoded a ``/``)."""
    parts = [f"<h1>{h(shown_job(name))}</h1>"]
    if rep is not None:
        parts.append(f'<p><span class="health sev-{severity(rep.health)}">{h(rep.health)}</span> '
                     f"{h(rep.why)}; last success {when_html(rep.summary.last_success_at, now)}; "
                     f"next due {when_html(rep.next_due_at, now)}</p>")
        if rep.late:
            parts.append(f'<p class="banner" id="late">{rep.late} slot{"s" if rep.late != 1 else ""} '
                         f"passed without a run since {h(iso(rep.summary.last_slot))} "
                         "(late: the next firing records them missed)</p>")
    parts.append(schedule_html(rep, explanation, words))
    parts.append("<h2>Durations</h2>" + chart_svg(chart_runs, rep, now))
    if chart_runs:
        parts.append(f'<pre class="strip">{picture_html(history_picture(chart_runs, 60, now))}</pre>')
    parts.append(runs_table(job_href(root, name), runs, now, pager))
    return document(shown_job(name), root, "".join(parts), REFRESH_DETAIL, site)


def schedule_html(rep: JobReport | None, explanation: Explanation | None, words: str) -> str:
    s = rep.summary if rep else None
    if s is None or not s.schedule:
        return ("<h2>Schedule</h2><p class=\"muted\">No schedule recorded (the job runs without "
                "<code>--schedule</code>).</p>")
    out = [f'<h2>Schedule</h2><p id="schedule"><code>{h(s.schedule)}</code> in {h(s.tz or "UTC")}'
           + (f": {h(words)}" if words else "") + "</p>"]
    if explanation is not None:
        out.append("<p>Next fire times:</p><ul>" + "".join(
            f"<li class=\"mono\">{h(t.isoformat())} {h(f'{t:%a}')}</li>" for t in explanation.next)
            + "</ul>")
        out.extend(f"<p class=\"banner\">{h(w)}</p>" for w in explanation.warnings)
    return "".join(out)


def runs_table(base: str, runs: list[Run], now: datetime, pager: Pager) -> str:
    """``base``: the link to the job's page."""
    head = ("<tr><th>run</th><th>slot</th><th>trigger</th><th>status</th><th>attempt</th>"
            "<th>host</th><th>started</th><th>duration</th><th>exit</th></tr>")
    rows = []
    for r in runs:
        href = f"{base}/runs/{r.run_id}"
        cells = [f'<a href="{h(href)}">{r.run_id}</a>', f'<span class="mono">{h(r.run_key)}</span>',
                 h(r.trigger), status_html(r, now), str(r.attempt), h(r.host or "-"),
                 when_html(r.started_at, now), h(duration_text(r)),
                 h("-" if r.exit_code is None else r.exit_code)]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    nav = []
    if pager.newer:  # an older page: the newest runs are a page or more away
        nav.append(f'<a href="{h(base)}">newest</a>')
    if pager.newer is not None:
        nav.append(f'<a rel="prev" href="{h(base + pager.newer)}">newer</a>')
    if pager.older is not None:
        nav.append(f'<a rel="next" href="{h(base + pager.older)}">older</a>')
    links = f'<p id="pager">{" · ".join(nav)}</p>' if nav else ""
    if not runs:
        return f"<h2>Runs</h2><p class=\"muted\">No runs on this page.</p>{links}"
    return f'<h2>Runs</h2><table id="runs">{head}{"".join(rows)}</table>{links}'


def chart_svg(runs: list[Run], rep: JobReport | None, now: datetime) -> str:
    """Durations over time: a dot per run that has one (coloured by status), a mark on the
    axis for each slot without one (missed, skipped), and the late stretch shaded."""
    timed = [(t, r) for r in runs if (t := r.started_at or r.scheduled_at)]
    if not timed:
        return '<p class="muted">No runs to chart yet.</p>'
    start = min(t for t, _ in timed)
    span = max((now - start).total_seconds(), 1.0)
    top = max((r.duration_ms for _, r in timed if r.duration_ms is not None), default=0) or 1
    w, ht, pad = CHART_WIDTH, CHART_HEIGHT, CHART_PAD
    def x(t: datetime) -> float:
        return pad + (w - 2 * pad) * (t - start).total_seconds() / span
    def y(ms: float) -> float:
        return ht - pad - (ht - 2 * pad) * ms / top
    shapes = []
    last_slot = rep.summary.last_slot if rep else None
    if rep and rep.late and last_slot is not None:
        shapes.append(f'<rect class="late" x="{max(x(last_slot), pad):.1f}" y="{pad / 2:.1f}" '
                      f'width="{max(w - pad - max(x(last_slot), pad), 2):.1f}" '
                      f'height="{ht - 1.5 * pad:.1f}"><title>late: {rep.late} slots without a '
                      'run</title></rect>')
    for t, r in timed:
        shown = r.shown_status(now)
        label = f"<title>run {r.run_id} {h(r.run_key)}: {h(shown)} {h(duration_text(r))}</title>"
        if r.duration_ms is None:
            shapes.append(f'<path class="{style_class(shown)}" data-status="{h(shown)}" '
                          f'd="M{x(t):.1f},{ht - pad + 4} l-4,8 h8 z">{label}</path>')
        else:
            shapes.append(f'<circle class="{style_class(shown)}" data-status="{h(shown)}" '
                          f'cx="{x(t):.1f}" cy="{y(r.duration_ms):.1f}" r="3">{label}</circle>')
    axes = (f'<line x1="{pad}" y1="{ht - pad}" x2="{w - pad}" y2="{ht - pad}" stroke="#d0d7de"/>'
            f'<line x1="{pad}" y1="{pad / 2}" x2="{pad}" y2="{ht - pad}" stroke="#d0d7de"/>'
            f'<text x="2" y="{pad / 2 + 10}">{h(format_duration(top / 1000))}</text>'
            f'<text x="{pad}" y="{ht - 4}">{h(f"{start:%Y-%m-%d %H:%M} UTC")}</text>'
            f'<text x="{w - pad}" y="{ht - 4}" text-anchor="end">now</text>')
    return (f'<svg id="chart" role="img" aria-label="durations of the last {len(timed)} runs" '
            f'width="{w}" height="{ht}" viewBox="0 0 {w} {ht}" '
            f'xmlns="http://www.w3.org/2000/svg">{axes}{"".join(shapes)}</svg>')


# -- one run -----------------------------------------------------------------------------------

def run_page(run: Run, events: list[dict[str, object]], output: str | None, output_source: str,
             now: datetime, site: Site = Site(), root: str = "../../../") -> str:
    """Every ledger field of the run, its events from this host's run log, its output."""
    fields = run.to_json(now)
    rows = "".join(f"<tr><th>{h(k)}</th><td class=\"mono\">{h('-' if v is None else v)}</td></tr>"
                   for k, v in fields.items())
    parts = [f'<h1><a href="{h(job_href(root, run.job))}">{h(shown_job(run.job))}</a>: run {run.run_id}</h1>',
             f"<p>{status_html(run, now)}</p>", f'<table id="fields">{rows}</table>',
             "<h2>Events</h2>", events_table(events), "<h2>Output</h2>"]
    if output is None:
        parts.append('<p class="muted">No captured output here (none in this host\'s log '
                     "directories, and no tail in the ledger).</p>")
    else:
        parts.append(f'<p class="muted">{h(output_source)}</p><pre id="output">{h_lines(output)}</pre>')
    refresh = REFRESH_DETAIL if run.shown_status(now) == Status.RUNNING else None
    return document(f"{shown_job(run.job)} run {run.run_id}", root, "".join(parts), refresh, site)


def events_table(events: list[dict[str, object]]) -> str:
    if not events:
        return '<p class="muted">No events for this run in this host\'s run log.</p>'
    keys = ("ts", "event", "host", "attempt", "status", "skip_reason", "exit_code", "duration_ms")
    head = "<tr>" + "".join(f"<th>{k}</th>" for k in keys) + "<th>more</th></tr>"
    rows = []
    for e in events:
        rest = ", ".join(f"{k}={v}" for k, v in e.items() if k not in keys and k not in
                         ("job", "run_id", "run_key", "pid", "trigger", "scheduled_at"))
        cells = [h("-" if e.get(k) is None else e.get(k)) for k in keys] + [h(rest)]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return f'<table id="events">{head}{"".join(rows)}</table>'


# -- errors ------------------------------------------------------------------------------------

def problem_page(status: int, title: str, detail: str, site: Site = Site(),
                 root: str = "./") -> str:
    body = f'<h1>{h(title)}</h1><p class="banner">{h(detail)}</p>'
    refresh = REFRESH_OVERVIEW if status >= 500 else None
    return document(f"{status} {title}", root, body, refresh, site)
