"""table.py draws what rich drew, character for character, without rich (issue 15 §1).

``status``, ``history`` and ``explain`` used rich's ``Table(box=None)`` and ``Console.print``;
table.py replaces them for speed. Each case below is drawn by both and compared: plain (piped)
and styled (a terminal, with and without NO_COLOR), wide and narrow screens, cells that wrap,
words cut with ``…``, wide (CJK) characters, text that folds.
"""

from __future__ import annotations

import io
import random

import pytest
from rich.console import Console
from rich.table import Table
from rich.text import Text

from cronwrap.read.table import Cell, Screen, render_table, render_text

WORDS = ["a", "ok", "failed", "succeeded (overlap)", "5m ago", "host-a:1234 lease 2m fence 17",
         "critical", "late: 3 slots passed without a run", "-", "job-007", "x" * 30,
         "日本語の仕事", "naïve", "\\x1b]0;OWNED\\x07", "[red]x", ":smile:", "✓✗T·○▶?"]
STYLES = ["", "", "green", "red", "bold red", "dim", "yellow", "cyan", "magenta", "white", "bold"]
HEADERS = ["JOB", "LAST RUN", "STATUS", "EXIT", "DURATION", "LAST SUCCESS", "NEXT DUE",
           "RUNNING", "HEALTH"]
SCREENS = [(160, False, False), (160, True, True), (120, True, False), (100, False, False),
           (80, True, True), (60, False, False), (40, True, True), (30, False, False),
           (20, True, True)]


def console(screen: Screen) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=screen.width, force_terminal=screen.styled,
                   color_system="standard" if screen.styled else None,
                   no_color=not screen.coloured), out


def rich_table(headers: list[str], rows: list[list[Cell]], screen: Screen) -> str:
    table = Table(box=None, header_style="bold")
    for header in headers:
        table.add_column(header)
    for row in rows:
        table.add_row(*(Text.assemble(*c.pieces, style=c.style) for c in row))
    printer, out = console(screen)
    printer.print(table)
    return out.getvalue()


def random_rows(rng: random.Random, columns: int) -> list[list[Cell]]:
    rows = []
    for _ in range(rng.randint(0, 6)):
        row = []
        for _ in range(columns):
            n = rng.choice([1, 1, 1, 2])
            pieces = [(rng.choice(WORDS) + (" " if i < n - 1 else ""), rng.choice(STYLES))
                      for i in range(n)]
            row.append(Cell(pieces, rng.choice(["", "", "red", "dim"])))
        rows.append(row)
    return rows


@pytest.mark.parametrize("width,styled,coloured", SCREENS)
def test_status_table_as_rich_draws_it(width, styled, coloured):
    screen = Screen(width=width, styled=styled, coloured=coloured)
    rows = [[Cell([("job-%03d" % i, "")]), Cell([("5m ago", "")]),
             Cell([("failed (overlap)" if i % 3 else "succeeded", "")], "red" if i % 3 else "green"),
             Cell([("1", "")]), Cell([("2.4s", "")]), Cell([("1h ago", "")]),
             Cell([("in 55m", "")]), Cell([("host-a:4242 lease 1m fence 17" if i == 2 else "-", "")]),
             Cell([("critical" if i % 3 else "ok", "bold red" if i % 3 else "green"),
                   (" last run failed" if i % 3 else " last run succeeded", "")])]
            for i in range(12)]
    assert render_table(HEADERS, rows, screen) == rich_table(HEADERS, rows, screen)


@pytest.mark.parametrize("seed", range(40))
def test_random_tables_as_rich_draws_them(seed):
    rng = random.Random(seed)
    for _ in range(10):
        columns = rng.randint(1, 10)
        headers = [rng.choice(HEADERS) for _ in range(columns)]
        rows = random_rows(rng, columns)
        screen = Screen(*rng.choice(SCREENS))
        assert render_table(headers, rows, screen) == rich_table(headers, rows, screen), \
            (headers, [[c.pieces for c in r] for r in rows], screen)


def rich_text(text: str, spans: list, style: str, screen: Screen) -> str:
    shown = Text(text, style=style)
    for start, end, span_style in spans:
        shown.stylize(span_style, start, end)
    printer, out = console(screen)
    printer.print(shown)
    return out.getvalue()


@pytest.mark.parametrize("seed", range(20))
def test_printed_text_as_rich_prints_it(seed):
    rng = random.Random(seed)
    pieces = ["a", "bc", " ", "  ", "\n", "✓", "日", "x" * 31, "\r\n", "é", "warning:"]
    for _ in range(100):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 40)))
        spans = []
        for _ in range(rng.randint(0, 3)):
            start = rng.randint(0, len(text))
            spans.append((start, rng.randint(start, len(text)), rng.choice(STYLES[2:])))
        style = rng.choice(["", "", "bold"])
        screen = Screen(*rng.choice(SCREENS))
        assert render_text(text, screen, spans, style) == rich_text(text, spans, style, screen), \
            (text, spans, style, screen)


def test_tabs_in_output_as_rich_prints_them():
    tail = "Traceback:\n\tFile \"x.py\", line 3\n  ab\tcd\t\tef\n"
    for screen in (Screen(160, False, False), Screen(12, True, True)):
        assert render_text(tail, screen) == rich_text(tail, [], "", screen)


def test_screen_follows_rich_console_rules(monkeypatch):
    class Piped(io.StringIO):
        def isatty(self) -> bool:
            return False

    monkeypatch.setattr("sys.stdout", Piped())
    assert Screen.of_stdout({}) == Screen(160, False, False)
    assert Screen.of_stdout({"FORCE_COLOR": "1"}) == Screen(160, True, True)
    assert Screen.of_stdout({"FORCE_COLOR": ""}) == Screen(160, False, False)
    assert Screen.of_stdout({"FORCE_COLOR": "1", "NO_COLOR": "1"}) == Screen(160, True, False)
    assert Screen.of_stdout({"TTY_COMPATIBLE": "1", "TERM": "dumb"}) == Screen(80, False, False)
    monkeypatch.setattr(Piped, "isatty", lambda self: True)
    assert Screen.of_stdout({"COLUMNS": "93"}) == Screen(93, True, True)
    assert Screen.of_stdout({"COLUMNS": "93", "TERM": "dumb"}) == Screen(80, False, False)
    assert Screen.of_stdout({"COLUMNS": "93", "TTY_COMPATIBLE": "0"}) == Screen(93, False, False)


def test_a_cut_word_in_a_locale_without_an_ellipsis_ends_in_a_plus_and_keeps_its_column():
    """Where stdout's charset has no "…" (LC_ALL=C, ISO-8859-1), a cut word ends in "+", as
    top(1) marks one, and every line is as wide as with "…" (issue 20 §6)."""
    rows = [[Cell([("a" * 40, "")]), Cell([("b", "")])], [Cell([("c", "")]), Cell([("d", "")])]]
    unicode = render_table(["NAME", "X"], rows, Screen(20, False, False)).splitlines()
    ascii_ = render_table(["NAME", "X"], rows, Screen(20, False, False, "+")).splitlines()
    assert "…" in unicode[1] and ascii_[1] == unicode[1].replace("…", "+")
    assert ascii_[1].isascii() and [len(line) for line in ascii_] == [len(line) for line in unicode]
