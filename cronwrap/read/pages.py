"""The HTML pages of ``cronwrap serve``: drawn from what ``status``, ``history``, ``explain``
and the history picture already compute (report.py, picture.py, monitor.py, schedule/).

Data first, rendering second: every function takes plain objects and ``now`` and returns
text; nothing here opens the ledger or a file. Everything a ledger or a job wrote (names,
hosts, keys, reasons, output) goes through ``h``: control characters shown as ``\\x1b``
(textsafe), then HTML-escaped, quotes included. Colours come from the registries (the
picture's style per status, monitor's severity per health), so a status added to the ledger
is drawn, only without a colour of its own. No script, no external fetch: a stylesheet inline
(light and dark by ``prefers-color-scheme``, cards on a narrow screen), ``<meta
http-equiv=refresh>`` for the auto-refresh, links and a GET form for the overview's filter.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone, tzinfo
from html import escape
from urllib.parse import quote, urlencode

from cronwrap import __version__
from cronwrap.errors import CHECK_CRITICAL
from cronwrap.model import (Run, RunAttempt, Status, Step, iso, job_host, memory_text, shown_job,
                            usage_text)
from cronwrap.options.durations import format_duration
from cronwrap.read.monitoring import HEALTH_STATES
from cronwrap.read.picture import MARKS, Picture, history_picture
from cronwrap.read.report import (OK, JobReport, ago, alerts_note, duration_text, run_why,
                                  step_status, trigger_words)
from cronwrap.record import TYPE_CHECKING, Record
from cronwrap.textsafe import safe_text

if TYPE_CHECKING:
    from cronwrap.read.why import Story
    from cronwrap.schedule import Explanation

REFRESH_OVERVIEW = 30  # seconds: the overview reloads itself (no JavaScript needed)
REFRESH_DETAIL = 60
STRIP = 30  # slots in the overview's strip per job
TAIL_LINE = 160  # characters of a failure's last line on the overview
FAILURE_LINES = 40  # lines of the last failure's output on the job's page
CHART_WIDTH, CHART_HEIGHT, CHART_PAD = 900, 180, 36

# rich style names (picture.MARKS, report's health) as CSS colours, light and dark.
STYLE_COLOURS = {"green": ("#1a7f37", "#3fb950"), "red": ("#cf222e", "#f85149"),
                 "magenta": ("#8250df", "#bc8cff"), "dim": ("#8c959f", "#6e7681"),
                 "yellow": ("#9a6700", "#d29922"), "cyan": ("#0969da", "#58a6ff"),
                 "white": ("#57606a", "#8d96a0")}
# by monitor's CHECK_OK, _WARNING, _CRITICAL
SEVERITY_COLOURS = (("#1a7f37", "#3fb950"), ("#9a6700", "#d29922"), ("#cf222e", "#f85149"))
# The page's own colours (CSS variables), light and dark (prefers-color-scheme).
PALETTE = {"fg": ("#1f2328", "#e6edf3"), "bg": ("#ffffff", "#0d1117"),
           "muted": ("#57606a", "#8d96a0"), "line": ("#eaeef2", "#30363d"),
           "code": ("#f6f8fa", "#161b22"), "link": ("#0969da", "#4493f8"),
           "banner": ("#fff5f5", "#2d1517"), "late": ("#fff0c2", "#3a2e0a"),
           "axis": ("#d0d7de", "#484f58")}
OPEN_BANNER = ("No authentication (cronwrap serve --no-auth): every user of this host can read "
               "this dashboard, job output included.")
# At this width and below the overview's rows become cards that keep the job, its health (and
# why, and the last failure's line), its last run with when, and its next due slot; exit,
# duration, host, running now and the strip are left to the job's page (a phone is ~390 px).
NARROW = "40em"


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


class Filter(Record):
    """What the overview shows (``?health=…&host=…&q=…``): the jobs of one health, one host's
    rows of host-scoped jobs (status --host), and the jobs whose shown name holds ``q`` (any
    case). Empty: everything."""

    health: str
    host: str
    q: str
    _defaults = dict(health="", host="", q="")

    def query(self, **changes: str) -> str:
        """The overview's link with these changes (``./`` alone when nothing is filtered)."""
        given = {"health": self.health, "host": self.host, "q": self.q, **changes}
        kept = {k: v for k, v in given.items() if v}
        return "./" + (f"?{urlencode(kept)}" if kept else "")

    def matches(self, job: str) -> bool:
        """The ledger's ``job`` is shown, whatever its health."""
        return self.q.casefold() in shown_job(job).casefold() and \
            (not self.host or job_host(job)[1] == self.host)


def colours(dark: bool) -> str:
    """The CSS variables and classes of one scheme."""
    pick = 1 if dark else 0
    return (":root{" + "".join(f"--{k}:{v[pick]};" for k, v in PALETTE.items()) + "}"
            + "".join(f".s-{name}{{color:{c[pick]};fill:{c[pick]};stroke:{c[pick]}}}"
                      for name, c in STYLE_COLOURS.items())
            + "".join(f".sev-{n}{{color:{c[pick]}}}" for n, c in enumerate(SEVERITY_COLOURS)))


CSS = """
:root{color-scheme:light dark}
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:var(--fg);background:var(--bg)}
h1{font-size:1.4em;margin:0 0 .4em}h2{font-size:1.1em;margin:1.4em 0 .4em}
a{color:var(--link)}table{border-collapse:collapse}
th,td{text-align:left;padding:.25em .7em .25em 0;vertical-align:top;border-bottom:1px solid var(--line)}
th{font-weight:600}th,td{white-space:nowrap}td.why{white-space:normal;min-width:16em}
#fields td,#events td,#what td{white-space:normal;overflow-wrap:anywhere}
.mono,pre,.strip,.tail{font-family:ui-monospace,Menlo,Consolas,monospace}
pre{background:var(--code);padding:.7em;overflow:auto;white-space:pre-wrap;max-height:40em}
#fields pre{margin:0;padding:.3em;max-height:20em}
.strip{white-space:pre;letter-spacing:1px}.muted{color:var(--muted)}
.banner{padding:.5em .8em;border-left:4px solid #cf222e;background:var(--banner);margin:.6em 0}
.health{font-weight:600}footer{margin-top:2em;color:var(--muted);font-size:.9em}
.tail{display:block;font-size:.9em;max-width:60em;overflow-wrap:anywhere;white-space:normal}
#verdict{font-size:1.15em}.scroll{overflow-x:auto}
#filter{margin:.4em 0 .8em}#filter a[aria-current]{font-weight:700;text-decoration:none}
#filter form{display:inline-flex;flex-wrap:wrap;gap:.4em;margin-left:1em}
input,select,button{font:inherit;color:inherit;background:var(--bg);border:1px solid var(--axis);padding:.1em .4em}
details{margin-top:1.4em}summary{cursor:pointer;font-weight:600}
svg text{font-size:11px;fill:var(--muted)}.late{fill:var(--late)}.axis{stroke:var(--axis)}
svg{max-width:100%;height:auto}
""" + colours(False) + "@media (prefers-color-scheme:dark){" + colours(True) + "}" + f"""
@media (max-width:{NARROW}){{
body{{margin:.6em}}#filter form{{margin:.4em 0 0}}
#jobs,#jobs tbody,#jobs tr{{display:block}}#jobs tr.head{{display:none}}
#jobs tr{{padding:.5em 0;border-bottom:1px solid var(--line)}}
#jobs td{{display:inline-block;border:0;padding:.1em .6em .1em 0;white-space:normal}}
#jobs td:nth-child(1),#jobs td:nth-child(2){{display:block;min-width:0}}
#jobs td:nth-child(1){{font-weight:600}}
#jobs td:nth-child(4),#jobs td:nth-child(5),#jobs td:nth-child(6),#jobs td:nth-child(9),
#jobs td:nth-child(10){{display:none}}
#jobs td:nth-child(3)::before{{content:"last run ";color:var(--muted)}}
#jobs td:nth-child(8)::before{{content:"next due ";color:var(--muted)}}
}}
"""


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


def when_html(t: datetime | None, now: datetime, zone: tzinfo | None = None) -> str:
    """``3m ago``; its absolute time (in ``zone``, else UTC) on hover."""
    if t is None:
        return '<span class="muted">-</span>'
    return f'<span title="{h(wall(t, zone))}">{h(ago(t, now))}</span>'


def wall(t: datetime, zone: tzinfo | None) -> str:
    """An absolute time as the job's clock shows it: in its zone (its schedule's), else UTC."""
    return f"{t.astimezone(zone or timezone.utc):%Y-%m-%d %H:%M:%S %Z}"


def at_html(t: datetime | None, now: datetime, zone: tzinfo | None) -> str:
    """The absolute time in the job's zone, and how long ago, side by side."""
    if t is None:
        return '<span class="muted">-</span>'
    return (f'<time datetime="{h(iso(t))}">{h(wall(t, zone))}</time> '
            f'<span class="muted">{h(ago(t, now))}</span>')


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

class Selection(Record):
    """The overview's filter and what it chose from: ``counts`` by health of the jobs that
    match its host and name (each health's link says how many it shows), ``hosts`` the hosts
    of host-scoped jobs (the host menu), ``total`` every job of the ledger."""

    filter: Filter
    counts: dict[str, int]
    hosts: list[str]
    total: int
    _defaults = dict(filter=Filter(), counts={}, hosts=[], total=0)


def overview(reports: list[JobReport], strips: dict[str, str], now: datetime,
             site: Site = Site(), failures: dict[str, Run] | None = None,
             selection: Selection | None = None) -> str:
    """The jobs ``selection`` chose, critical first: health (with the last failure's line,
    ``failures``), last run, next due, running now, its last slots (``strips``: each job's
    ``strip_html``); above them the filter (links by health, a GET form for host and name)."""
    chosen = selection or Selection(total=len(reports), counts=tally(reports))
    ordered = sorted(reports, key=lambda r: (-severity(r.health), r.summary.job))
    if not chosen.total:
        body = ("<h1>cronwrap</h1><p>No jobs recorded yet: run one with "
                "<code>cronwrap run -n NAME -- COMMAND</code>.</p>")
        return document("all jobs", "./", body, REFRESH_OVERVIEW, site)
    head = ('<tr class="head"><th>job</th><th>health</th><th>last run</th><th>exit</th>'
            "<th>duration</th><th>host</th><th>when</th><th>next due</th><th>running now</th>"
            f"<th>last {STRIP} slots</th></tr>")
    rows = "".join(overview_row(rep, strips.get(rep.summary.job, ""),
                                (failures or {}).get(rep.summary.job), now) for rep in ordered)
    of = "" if len(ordered) == chosen.total else f" of {chosen.total}"
    title = f"<h1>cronwrap: {len(ordered)}{of} job{'s' if chosen.total != 1 else ''}</h1>"
    table = (f'<table id="jobs">{head}{rows}</table>' if ordered else
             f'<p id="none">No job matches this filter: <a href="./">show every job</a>.</p>')
    body = (f"{title}<p class=\"muted\">as of {h(iso(now))}</p>{filter_html(chosen)}{table}")
    return document("all jobs", "./", body, REFRESH_OVERVIEW, site)


def tally(reports: list[JobReport]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for rep in reports:
        counts[rep.health] = counts.get(rep.health, 0) + 1
    return counts


def filter_html(chosen: Selection) -> str:
    """Links by health (``all`` and each health with its count, worst first), then a plain GET
    form for the name and the host: no script, so it works under the page's CSP."""
    f = chosen.filter
    links = [(f.query(health=""), "all", sum(chosen.counts.values()), "", not f.health)]
    links += [(f.query(health=k), k, n, f"sev-{severity(k)}", f.health == k)
              for k, n in sorted(chosen.counts.items(), key=lambda kv: -severity(kv[0]))]
    if f.health and f.health not in chosen.counts:
        links.append((f.query(health=f.health), f.health, 0, f"sev-{severity(f.health)}", True))
    mark = ' aria-current="page"'
    shown = " · ".join(f'<a href="{h(href)}" class="{css}"{mark if current else ""}>'
                       f"{h(label)} {n}</a>" for href, label, n, css, current in links)
    hosts = ""
    if chosen.hosts or f.host:
        options = "".join(f'<option value="{h(x)}"{" selected" if x == f.host else ""}>{h(x)}'
                          "</option>" for x in sorted({*chosen.hosts, *([f.host] if f.host else [])}))
        hosts = ('<select name="host" aria-label="host"><option value="">every host</option>'
                 f"{options}</select>")
    health = f'<input type="hidden" name="health" value="{h(f.health)}">' if f.health else ""
    form = (f'<form method="get" action="./" role="search">{health}'
            f'<input type="search" name="q" value="{h(f.q)}" placeholder="job name contains" '
            f'aria-label="job name contains">{hosts}<button type="submit">filter</button></form>')
    return f'<nav id="filter">{shown}{form}</nav>'


def strip_html(runs: list[Run], now: datetime) -> str:
    """The marks of the picture ``status NAME`` draws, for the job's newest runs. It depends
    on ``now`` only while one of them is running (its lease may expire)."""
    return picture_html(history_picture(runs, STRIP, now), 1) if runs else ""


def tail_line(run: Run) -> str:
    """The last line of a run's output tail (redacted as the ledger keeps it), cut short."""
    lines = [line for line in (run.error_tail or "").splitlines() if line.strip()]
    if not lines:
        return "(no output kept)"
    last = lines[-1].strip()
    return last if len(last) <= TAIL_LINE else "…" + last[-TAIL_LINE:]


def failure_html(job: str, run: Run, now: datetime, root: str = "") -> str:
    """One line: the run, how it ended, and the last line of its output."""
    href = f"{job_href(root, job)}/runs/{run.run_id}"
    exit_text = "" if run.exit_code is None else f" (exit {run.exit_code})"
    return (f'<span class="tail" id="tail-{run.run_id}"><a href="{h(href)}">run {run.run_id}</a> '
            f"{h(run.shown_status(now))}{h(exit_text)} {h(ago(run.finished_at or run.started_at, now))}"
            f": {h(tail_line(run))}</span>")


def overview_row(rep: JobReport, strip: str, failure: Run | None, now: datetime) -> str:
    s, last = rep.summary, rep.summary.last_run
    running = "<br>".join(f"{h(r.host or '-')} (lease {h(format_duration(r.lease_left(now)))} "
                          "left)" for r in rep.live) or '<span class="muted">-</span>'
    exit_code = "-" if last is None or last.exit_code is None else str(last.exit_code)
    why = "" if failure is None or rep.health == OK else failure_html(s.job, failure, now)
    cells = [
        f'<a href="{h(job_href("", s.job))}">{h(shown_job(s.job))}</a>',
        f'<span class="health sev-{severity(rep.health)}">{h(rep.health)}</span> '
        f'<span class="muted">{h(rep.why + alerts_note(rep))}</span>{why}',
        status_html(last, now), h(exit_code), h(duration_text(last)),
        h(last.host if last and last.host else "-"),
        when_html(last.started_at or last.scheduled_at if last else None, now),
        when_html(rep.next_due_at, now), running, f'<span class="strip">{strip}</span>',
    ]
    tds = "".join(f'<td class="why">{c}</td>' if i == 1 else f"<td>{c}</td>"
                  for i, c in enumerate(cells))
    return f'<tr data-health="{h(rep.health)}">{tds}</tr>'


# -- one job -----------------------------------------------------------------------------------

class Output(Record):
    """A run's captured output as serve found it: the text (None: none found) and where it
    came from (its file on this host, or the ledger's tail)."""

    text: str | None
    source: str
    _defaults = dict(text=None, source="")


def job_page(rep: JobReport | None, name: str, runs: list[Run], chart_runs: list[Run],
             explanation: Explanation | None, words: str, pager: Pager, now: datetime,
             site: Site = Site(), root: str = "../", zone: tzinfo | None = None,
             failure: tuple[Run, Output] | None = None) -> str:
    """The job's health, its last failure's output (``failure``, while the job is not ok),
    its schedule in words with the next fire times and DST notes, a duration chart and the
    history picture of its newest runs, and one page of its runs (newest first) with links to
    the pages beside it. ``root``: the way back to ``/`` from this page (``../``; deeper when
    a proxy decoded a ``/``); ``zone``: the job's (its schedule's), for absolute times."""
    parts = [f"<h1>{h(shown_job(name))}</h1>"]
    if rep is not None:
        parts.append(f'<p><span class="health sev-{severity(rep.health)}">{h(rep.health)}</span> '
                     f"{h(rep.why + alerts_note(rep))}; last success {when_html(rep.summary.last_success_at, now, zone)}; "
                     f"next due {when_html(rep.next_due_at, now, zone)}</p>")
        if rep.late:
            parts.append(f'<p class="banner" id="late">{rep.late} slot{"s" if rep.late != 1 else ""} '
                         f"passed without a run since {h(iso(rep.summary.last_slot))} "
                         "(late: the next firing records them missed)</p>")
    if failure is not None:
        parts.append(last_failure_html(name, *failure, now, root, zone))
    parts.append(schedule_html(rep, explanation, words))
    if rep is not None and rep.summary.schedule:
        parts.append(f'<form method="get" action="{h(job_href(root, name))}/why"><label>Why '
                     'did a slot (not) run? <input name="at" placeholder="2026-12-05T01:30 or '
                     '2026-12-05"></label> <button>tell</button></form>')
    parts.append("<h2>Durations, by slot</h2>" + chart_svg(chart_runs, rep, now, zone))
    if chart_runs:
        parts.append(f'<pre class="strip">{picture_html(history_picture(chart_runs, 60, now))}</pre>')
    parts.append(runs_table(job_href(root, name), runs, now, pager, zone))
    return document(shown_job(name), root, "".join(parts), REFRESH_DETAIL, site)


def last_failure_html(name: str, run: Run, output: Output, now: datetime, root: str,
                      zone: tzinfo | None) -> str:
    """The last failure: which run, how and when it ended, and its output's last lines."""
    href = f"{job_href(root, name)}/runs/{run.run_id}"
    head = (f'<h2>Last failure: <a href="{h(href)}">run {run.run_id}</a></h2>'
            f'<p id="failure">{status_html(run, now)}: {h(run_why(run, now))}; '
            f"{at_html(run.finished_at or run.started_at or run.scheduled_at, now, zone)}"
            f"{' on ' + h(run.host) if run.host else ''}</p>")
    if output.text is None:
        return head + '<p class="muted">No output kept for it (none on this host, no tail in the ledger).</p>'
    lines = output.text.rstrip("\n").split("\n")
    cut = f"; its last {FAILURE_LINES} of {len(lines)} lines" if len(lines) > FAILURE_LINES else ""
    text = "\n".join(lines[-FAILURE_LINES:]) + "\n"
    return (head + f'<p class="muted">{h(output.source)}{h(cut)}</p>'
            f'<pre id="failure-output">{h_lines(text)}</pre>')


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


def runs_table(base: str, runs: list[Run], now: datetime, pager: Pager,
               zone: tzinfo | None = None) -> str:
    """``base``: the link to the job's page. Start times in ``zone`` and relative."""
    head = ("<tr><th>run</th><th>slot</th><th>trigger</th><th>status</th><th>attempt</th>"
            f"<th>host</th><th>started ({h(zone_label(zone))})</th><th>duration</th><th>exit</th>"
            "<th>cpu+sys mem</th></tr>")
    rows = []
    for r in runs:
        href = f"{base}/runs/{r.run_id}"
        cells = [f'<a href="{h(href)}">{r.run_id}</a>', f'<span class="mono">{h(r.run_key)}</span>',
                 h(r.trigger), status_html(r, now), str(r.attempt), h(r.host or "-"),
                 at_html(r.started_at, now, zone), h(duration_text(r)),
                 h("-" if r.exit_code is None else r.exit_code), h(usage_text(r))]
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
    return (f'<h2>Runs</h2><div class="scroll"><table id="runs">{head}{"".join(rows)}</table>'
            f"</div>{links}")


def zone_label(zone: tzinfo | None) -> str:
    return str(zone) if zone is not None else "UTC"


def slot_of(run: Run) -> datetime | None:
    """Where a run sits on the chart: its slot (a backfill's runs spread over the days they
    were for), else when it started."""
    return run.scheduled_at or run.started_at


def chart_svg(runs: list[Run], rep: JobReport | None, now: datetime,
              zone: tzinfo | None = None) -> str:
    """Durations by slot: a dot per run that has one (coloured by status) at its slot's time,
    a mark on the axis for each slot without one (missed, skipped), and the late stretch
    shaded."""
    timed = [(t, r) for r in runs if (t := slot_of(r))]
    if not timed:
        return '<p class="muted">No runs to chart yet.</p>'
    start = min(t for t, _ in timed)
    end = max(now, max(t for t, _ in timed))
    span = max((end - start).total_seconds(), 1.0)
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
        label = (f"<title>run {r.run_id}, slot {h(wall(t, zone))}: {h(shown)} "
                 f"{h(duration_text(r))}</title>")
        if r.duration_ms is None:
            shapes.append(f'<path class="{style_class(shown)}" data-status="{h(shown)}" '
                          f'd="M{x(t):.1f},{ht - pad + 4} l-4,8 h8 z">{label}</path>')
        else:
            shapes.append(f'<circle class="{style_class(shown)}" data-status="{h(shown)}" '
                          f'cx="{x(t):.1f}" cy="{y(r.duration_ms):.1f}" r="3">{label}</circle>')
    right = "now" if end == now else wall(end, zone)[:16]
    axes = (f'<line class="axis" x1="{pad}" y1="{ht - pad}" x2="{w - pad}" y2="{ht - pad}"/>'
            f'<line class="axis" x1="{pad}" y1="{pad / 2}" x2="{pad}" y2="{ht - pad}"/>'
            f'<text x="2" y="{pad / 2 + 10}">{h(format_duration(top / 1000))}</text>'
            f'<text x="{pad}" y="{ht - 4}">slot {h(wall(start, zone)[:16])} {h(zone_label(zone))}</text>'
            f'<text x="{w - pad}" y="{ht - 4}" text-anchor="end">{h(right)}</text>')
    return (f'<svg id="chart" role="img" aria-label="durations of the last {len(timed)} runs, '
            f'by slot" width="{w}" height="{ht}" viewBox="0 0 {w} {ht}" '
            f'xmlns="http://www.w3.org/2000/svg">{axes}{"".join(shapes)}</svg>')


# -- one run -----------------------------------------------------------------------------------

def run_page(run: Run, events: list[dict[str, object]], output: Output, now: datetime,
             site: Site = Site(), root: str = "../../../", zone: tzinfo | None = None,
             earlier: list[RunAttempt] | None = None, steps: list[Step] | None = None) -> str:
    """What happened, in words (status and why, how long, where, which attempt and the slot's
    ``earlier`` ones, why it ran, its slot: times in the job's ``zone``), the slot's ``steps``
    (cronwrap step), then its output, then every ledger field of the run and its events from
    this host's run log, folded."""
    fields = run.to_json(now)
    rows = "".join(f"<tr><th>{h(k)}</th><td class=\"mono\">{field_html(k, v)}</td></tr>"
                   for k, v in fields.items())
    parts = [f'<h1><a href="{h(job_href(root, run.job))}">{h(shown_job(run.job))}</a>: run {run.run_id}</h1>',
             f'<p id="verdict">{status_html(run, now)}: {h(run_why(run, now))}</p>',
             what_html(run, now, zone, earlier or []), steps_html(run, steps or [], now, zone),
             "<h2>Output</h2>"]
    if output.text is None:
        parts.append('<p class="muted">No captured output here (none in this host\'s log '
                     "directories, and no tail in the ledger).</p>")
    else:
        parts.append(f'<p class="muted">{h(output.source)}</p><pre id="output">{h_lines(output.text)}</pre>')
    parts.append('<details id="details"><summary>Ledger fields and events</summary>'
                 f'<table id="fields">{rows}</table><h2>Events</h2>{events_table(events)}</details>')
    refresh = REFRESH_DETAIL if run.shown_status(now) == Status.RUNNING else None
    return document(f"{shown_job(run.job)} run {run.run_id}", root, "".join(parts), refresh, site)


def what_html(run: Run, now: datetime, zone: tzinfo | None, earlier: list[RunAttempt]) -> str:
    """The run at a glance, a row a fact."""
    running = run.shown_status(now) == Status.RUNNING
    facts = [
        ("took", "still running" if running else duration_text(run)),
        ("exit", "-" if run.exit_code is None else str(run.exit_code)),
        ("used", usage_words(run)),
        ("host", (run.host or "-") + (f" (pid {run.pid})" if run.pid else "")),
        ("attempt", str(run.attempt)),
        ("trigger", trigger_words(run.trigger)),
    ]
    rows = "".join(f"<tr><th>{k}</th><td>{h(v)}</td></tr>" for k, v in facts)
    if earlier:
        rows += ("<tr><th>earlier</th><td>" + "<br>".join(attempt_html(a, now, zone)
                                                          for a in reversed(earlier)) + "</td></tr>")
    rows += (f"<tr><th>slot</th><td>{at_html(run.scheduled_at, now, zone)} (run key "
             f'<span class="mono">{h(run.run_key)}</span>)</td></tr>'
             f"<tr><th>started</th><td>{at_html(run.started_at, now, zone)}</td></tr>"
             f"<tr><th>finished</th><td>{at_html(run.finished_at, now, zone)}</td></tr>")
    return f'<table id="what">{rows}</table>'


def steps_html(run: Run, steps: list[Step], now: datetime, zone: tzinfo | None) -> str:
    """The slot's steps (cronwrap step), in the order they started: each as the attempt that
    last started it left it (``history`` lists them too)."""
    if not steps:
        return ""
    rows = []
    for s in steps:
        shown = step_status(s, run)
        rows.append(
            f'<tr><td class="mono">{h(s.key)}</td><td class="{style_class(shown)}">{h(shown)}</td>'
            f"<td>{s.attempt}</td><td>{h(s.host or '-')}</td>"
            f"<td>{at_html(s.started_at, now, zone)}</td>"
            f"<td>{'-' if s.duration_ms is None else h(format_duration(s.duration_ms / 1000))}</td>"
            f"<td>{'-' if s.exit_code is None else s.exit_code}</td><td>{s.fence}</td></tr>")
    return ('<h2>Steps</h2><table id="steps"><tr><th>step</th><th>status</th><th>attempt</th>'
            "<th>host</th><th>started</th><th>took</th><th>exit</th><th>fence</th></tr>"
            + "".join(rows) + "</table>")


def usage_words(run: Run) -> str:
    """What the run's tree used: ``CPU 1.2s user, 0.3s system; peak memory 240 MiB``."""
    if run.cpu_user_ms is None and run.max_rss_kb is None:
        return "-"
    cpu = "-" if run.cpu_user_ms is None else \
        f"{run.cpu_user_ms / 1000:g}s user, {(run.cpu_system_ms or 0) / 1000:g}s system"
    return f"CPU {cpu}; peak memory {memory_text(run.max_rss_kb)}"


def attempt_html(a: RunAttempt, now: datetime, zone: tzinfo | None) -> str:
    """An earlier attempt at the slot: how it ended, where and when (``history`` lists them)."""
    reason = f" ({a.reason})" if a.reason else ""
    exit_text = "" if a.exit_code is None else f", exit {a.exit_code}"
    return (f'attempt {a.attempt}: <span class="{style_class(a.status)}">{h(a.status)}</span>'
            f"{h(reason + exit_text)} on {h(a.host or '-')}, started {at_html(a.started_at, now, zone)}")


def field_html(key: str, value: object) -> str:
    """A ledger field: the output tail with its lines, the rest as one line."""
    if value is None:
        return "-"
    if key == "error_tail" and isinstance(value, str):
        return f"<pre>{h_lines(value)}</pre>"
    return h(value)


def event_value(value: object) -> str:
    """A run log value as the log has it (JSON): true, 3, "text" without its quotes."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def events_table(events: list[dict[str, object]]) -> str:
    if not events:
        return '<p class="muted">No events for this run in this host\'s run log.</p>'
    keys = ("ts", "event", "host", "attempt", "status", "skip_reason", "exit_code", "duration_ms")
    head = "<tr>" + "".join(f"<th>{k}</th>" for k in keys) + "<th>more</th></tr>"
    rows = []
    for e in events:
        rest = " ".join(f"{k}={event_value(v)}" for k, v in e.items() if v is not None
                        and k not in keys and k not in
                        ("job", "run_id", "run_key", "pid", "trigger", "scheduled_at",
                         "format", "level", "msg"))  # the row says what msg and level do
        cells = [h("-" if e.get(k) is None else event_value(e.get(k))) for k in keys] + [h(rest)]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return f'<div class="scroll"><table id="events">{head}{"".join(rows)}</table></div>'


# -- errors ------------------------------------------------------------------------------------

def why_page(story: Story, at: str | None, site: Site = Site(), root: str = "../../") -> str:
    """``why NAME --at WHEN``'s story, a form to ask about another slot, and a link to the
    slot's run. Every word of it is escaped: the time asked is the client's."""
    job = story.facts.job
    href = job_href(root, job)
    parts = [f'<h1><a href="{h(href)}">{h(shown_job(job))}</a>: why?</h1>',
             f'<form method="get" action="{h(href)}/why"><label>slot <input name="at" '
             f'value="{h(at or "")}" placeholder="2026-12-05T01:30 or 2026-12-05"></label> '
             '<button>tell</button> <span class="muted">(a time or a date in the job\'s zone; '
             'empty: the next slot)</span></form>',
             f'<p id="verdict"><span class="{h(style_class(story.status or story.verdict))}">'
             f"{h(story.verdict)}</span></p>",
             '<div id="story">' + "".join(f"<p>{h(line)}</p>" for line in story.lines) + "</div>"]
    row = story.facts.row
    if row is not None:
        parts.append(f'<p><a href="{h(href)}/runs/{row.run_id}">run {row.run_id}</a></p>')
    return document(f"{shown_job(job)}: why", root, "".join(parts), None, site)


def problem_page(status: int, title: str, detail: str, site: Site = Site(),
                 root: str = "./") -> str:
    body = f'<h1>{h(title)}</h1><p class="banner">{h(detail)}</p>'
    refresh = REFRESH_OVERVIEW if status >= 500 else None
    return document(f"{status} {title}", root, body, refresh, site)
