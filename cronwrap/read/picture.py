"""The history picture of ``status NAME`` and ``history``: one mark per slot, a sparkline of
durations under them, a legend: plain lines and style spans, which report.py draws for a
terminal (table.py) and pages.py as CSS classes."""

from __future__ import annotations

from datetime import datetime

from cronwrap.model import Run, Status
from cronwrap.options.durations import format_duration
from cronwrap.record import Record


# Keyed by the stored string (Run.status): a row may hold a status this release does not know.
MARKS: dict[str, tuple[str, str]] = {
    Status.SUCCEEDED: ("✓", "green"), Status.WARNING: ("!", "yellow"),
    Status.FAILED: ("✗", "red"),
    Status.TIMEOUT: ("T", "magenta"), Status.KILLED: ("K", "red"),
    Status.SKIPPED: ("·", "dim"), Status.MISSED: ("○", "yellow"),
    Status.RUNNING: ("▶", "cyan"), Status.ABANDONED: ("?", "yellow")}
WORDS: dict[str, str] = {Status.SUCCEEDED: "ok"}
BARS = "▁▂▃▄▅▆▇█"


class Picture(Record):
    """Plain lines plus style spans ``(line, start, end, style)`` (rich style names), so a
    caller can print ``plain()`` or draw the styles. Line 0: one mark per slot, oldest
    first; line 1: a duration sparkline under the marks; line 2: the legend."""

    lines: list[str]
    spans: list[tuple[int, int, int, str]]

    def plain(self) -> str:
        return "\n".join(self.lines)


def history_picture(runs: list[Run], width: int = 60, now: datetime | None = None) -> Picture:
    """The newest ``width`` runs (one per slot), oldest on the left. ``now`` tells a live
    run from an abandoned one; without it, a running row is drawn as running."""
    ordered = sorted(runs, key=lambda r: (r.scheduled_at, r.run_id))[-max(width, 1):]
    shown = [r.shown_status(now) if now else r.status for r in ordered]
    styles = [MARKS.get(status, ("?", "white"))[1] for status in shown]
    marks = "".join(MARKS.get(status, ("?", "white"))[0] for status in shown)
    durations = [r.duration_ms / 1000 if r.duration_ms is not None else None for r in ordered]
    spark = sparkline(durations)
    codes = [r.exit_code for r in ordered]
    legend, legend_spans = _legend(shown, durations, codes)
    spans = _style_runs(0, styles) + _style_runs(1, styles) + legend_spans
    return Picture(lines=[marks, spark, legend], spans=spans)


def sparkline(values: list[float | None]) -> str:
    """One bar per value, scaled from 0 to the largest (a blank for an unknown value), so bar
    heights compare as durations do."""
    known = [v for v in values if v is not None]
    top = max(known, default=0.0)
    if top <= 0:
        return "".join(" " if v is None else BARS[0] for v in values)
    return "".join(" " if v is None else BARS[min(int(v / top * len(BARS)), len(BARS) - 1)]
                   for v in values)


def _style_runs(line: int, styles: list[str]) -> list[tuple[int, int, int, str]]:
    """Spans for consecutive characters that share a style."""
    spans, start = [], 0
    for i in range(1, len(styles) + 1):
        if i == len(styles) or styles[i] != styles[start]:
            spans.append((line, start, i, styles[start]))
            start = i
    return spans


def _legend(shown: list[str], durations: list[float | None],
            codes: list[int | None]) -> tuple[str, list[tuple[int, int, int, str]]]:
    """Counts per status; for the bad ones, the exit statuses cronwrap returned (timeouts:
    124, or 137 when KILL was needed)."""
    if not shown:
        return "no runs in this window", []
    parts, spans = [f"{len(shown)} slot{'s' if len(shown) != 1 else ''}, oldest first"], []
    for status, (mark, style) in MARKS.items():
        n = shown.count(status)
        if n:
            start = len("  ".join(parts)) + 2
            exits = sorted({c for s, c in zip(shown, codes) if s == status and c is not None})
            exit_text = f" (exit {', '.join(map(str, exits))})" if exits and status in \
                (Status.WARNING, Status.FAILED, Status.TIMEOUT, Status.KILLED) else ""
            parts.append(f"{mark} {n} {WORDS.get(status, status)}{exit_text}")
            spans.append((2, start, start + len(mark), style))
    known = [d for d in durations if d is not None]
    if known:
        parts.append(f"{BARS[-1]} = {format_duration(max(known))}")
    return "  ".join(parts), spans
