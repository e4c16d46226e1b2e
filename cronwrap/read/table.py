"""Tables and styled lines for a person, drawn as rich draws ``Table(box=None)``, without rich.

rich's ``Table`` measured 350 ms for the 500 rows of a fleet's ``status`` (it builds a
measurement, segments and styles per cell); this draws the same characters in a few
milliseconds. Column widths, word wrapping on a narrow terminal, the ``…`` of a word too long
for its column, the padding and the SGR codes of each style follow rich 15
(``Table._calculate_column_widths``, ``Text.wrap``, ``Segment`` styles), and
tests/unit/test_table.py compares the two character for character. A cell is a ``Cell``:
pieces of text, each with a style, and a style for the whole cell. rich is imported only to
measure text that is not ASCII (``rich.cells``, a few milliseconds).

Styles are rich's words for the few this module knows: ``bold``, ``dim`` and the eight
standard colours. ``Screen`` decides, as rich's Console does, whether they are drawn.
"""

from __future__ import annotations

import os
import re
import sys

from cronwrap.record import TYPE_CHECKING, Record
from cronwrap.stdio import unicode_stdout

if TYPE_CHECKING:
    from collections.abc import Sequence

_WORD = re.compile(r"\s*\S+\s*")  # rich's word: the word and the blanks after it
_TRAILING = re.compile(r"\s+$")
_ATTRIBUTES = {"bold": 1, "dim": 2}
_COLOURS = {name: 30 + i for i, name in enumerate(
    ("black", "red", "green", "yellow", "blue", "magenta", "cyan", "white"))}
PIPE_WIDTH = 160  # piped or captured output (cron mail, scripts, tests): a wide fixed width


class Screen(Record):
    """Where the text goes: its width in cells, whether styles are drawn (a terminal that is
    not ``dumb``, or FORCE_COLOR), and whether colours are (not under NO_COLOR; bold and dim
    still are), as rich's Console decides them; and what ends a word cut to fit its column:
    ``…``, or ``+`` (as top(1) marks one) where the locale's charset has no ``…``."""

    width: int
    styled: bool
    coloured: bool
    ellipsis: str
    _defaults = dict(ellipsis="…")

    @classmethod
    def of_stdout(cls, environ: dict[str, str] | None = None) -> Screen:
        """stdout as rich's ``Console(width=None if a tty else 160)`` sees it (rich 15:
        TTY_COMPATIBLE, FORCE_COLOR, TERM=dumb, NO_COLOR, COLUMNS)."""
        env = os.environ if environ is None else environ
        try:
            tty = sys.stdout.isatty()
        except (AttributeError, ValueError):
            tty = False
        terminal = tty
        if env.get("TTY_COMPATIBLE", "") in ("0", "1"):
            terminal = env["TTY_COMPATIBLE"] == "1"
        elif "FORCE_COLOR" in env:
            terminal = env["FORCE_COLOR"] != ""
        dumb = terminal and env.get("TERM", "").lower() in ("dumb", "unknown")
        width = 80 if dumb else _terminal_width(env) if tty else PIPE_WIDTH
        styled = terminal and not dumb
        return cls(width=width, styled=styled, coloured=styled and not env.get("NO_COLOR"),
                   ellipsis="…" if unicode_stdout() else "+")


def _terminal_width(env: dict[str, str] | os._Environ[str]) -> int:
    width = 0
    for fd in (0, 1, 2):
        try:
            width = os.get_terminal_size(fd).columns
            break
        except (OSError, ValueError):
            continue
    columns = env.get("COLUMNS", "")
    return (int(columns) if columns.isdigit() else width) or 80


class Cell:
    """``pieces``: (text, style) in order; ``style``: the whole text's, and the blanks that
    fill its column (rich's ``Text(style=…)``). A plain class, not a Record: a fleet's table
    makes thousands (Record's checks cost 30 ms there)."""

    __slots__ = ("pieces", "style", "plain", "width", "spans")

    def __init__(self, pieces: list[tuple[str, str]], style: str = "") -> None:
        self.pieces, self.style = pieces, style
        self.plain = pieces[0][0] if len(pieces) == 1 else "".join(t for t, _ in pieces)
        self.width = cell_width(self.plain)
        self.spans, at = [], 0  # (start, end, style) of the styled pieces
        for text, piece_style in pieces:
            if piece_style and text:
                self.spans.append((at, at + len(text), piece_style))
            at += len(text)

    def __repr__(self) -> str:
        return f"Cell({self.pieces!r}, {self.style!r})"


def cell(text: str, style: str = "") -> Cell:
    """One piece of text, unstyled but for the whole cell's ``style``: ``Cell([(text, "")],
    style)`` made without its loops (a fleet's table makes tens of thousands)."""
    made = Cell.__new__(Cell)
    made.pieces, made.style, made.plain, made.spans = [(text, "")], style, text, []
    made.width = len(text) if text.isascii() else cell_width(text)
    return made


def cell_width(text: str) -> int:
    """Terminal cells ``text`` takes (a CJK character takes two)."""
    if text.isascii():
        return len(text)
    from rich.cells import cell_len

    return cell_len(text)


def _fit(text: str, width: int) -> str:
    """``text`` cut or padded with blanks to ``width`` cells."""
    if text.isascii():
        return text[:width] + " " * (width - len(text))
    from rich.cells import set_cell_size

    return set_cell_size(text, width)


def sgr(text: str, style: str, screen: Screen) -> str:
    """``text`` in ``style``, as rich writes one segment: ``ESC[codes m`` … ``ESC[0m``."""
    codes = _codes(style, screen) if screen.styled and style else ""
    return f"\x1b[{codes}m{text}\x1b[0m" if codes else text


def _codes(style: str, screen: Screen) -> str:
    attributes, colour = [], None
    for word in style.split():
        if word in _ATTRIBUTES:
            attributes.append(_ATTRIBUTES[word])
        elif word in _COLOURS and screen.coloured:
            colour = _COLOURS[word]
    found = sorted(set(attributes)) + ([colour] if colour is not None else [])
    return ";".join(map(str, found))


def _merge(styles: list[str]) -> str:
    """Styles combined as rich combines them: attributes add up, the last colour wins."""
    attributes = [w for s in styles for w in s.split() if w in _ATTRIBUTES]
    colours = [w for s in styles for w in s.split() if w not in _ATTRIBUTES]
    return " ".join(attributes + colours[-1:])


# -- widths ------------------------------------------------------------------------------------

def _measure(cells: list[Cell], limit: int) -> int:
    """A column's width: its widest cell and one blank each side, at most ``limit``."""
    if limit < 1:
        return 0
    if limit - 2 < 1:
        return limit
    return max((min(c.width, limit - 2) + 2 for c in cells), default=limit)


def column_widths(columns: list[list[Cell]], width: int) -> list[int]:
    """The width of each column (blanks included), as rich's table computes it: each column
    as wide as its widest cell; if the table is wider than ``width``, the widest columns give
    way first, then all alike, and no cell is wider than its column."""
    widths = [_measure(col, width) or 1 for col in columns]
    if sum(widths) > width:
        widths = _collapse(widths, width)
        if sum(widths) > width:
            widths = _ratio_reduce(sum(widths) - width, [1] * len(widths), widths, widths)
        widths = [_measure(col, w) for col, w in zip(columns, widths)]
    return widths


def _collapse(widths: list[int], width: int) -> list[int]:
    """Narrow the widest columns down to the next widest, until the table fits (rich's
    ``Table._collapse_widths``)."""
    total = sum(widths)
    excess = total - width
    while total and excess > 0:
        widest = max(widths)
        second = max((w for w in widths if w != widest), default=0)
        difference = widest - second
        ratios = [1 if w == widest else 0 for w in widths]
        if not difference:
            break
        widths = _ratio_reduce(excess, ratios, [min(excess, difference)] * len(widths), widths)
        total = sum(widths)
        excess = total - width
    return widths


def _ratio_reduce(total: int, ratios: list[int], maximums: list[int],
                  values: list[int]) -> list[int]:
    """rich's ``_ratio.ratio_reduce``: take ``total`` off ``values`` in proportion to
    ``ratios``, at most ``maximums``."""
    ratios = [r if m else 0 for r, m in zip(ratios, maximums)]
    left_ratio, left = sum(ratios), total
    if not left_ratio:
        return values[:]
    result = []
    for ratio, maximum, value in zip(ratios, maximums, values):
        if ratio and left_ratio > 0:
            taken = min(maximum, round(ratio * left / left_ratio))
            result.append(value - taken)
            left -= taken
            left_ratio -= ratio
        else:
            result.append(value)
    return result


# -- lines of a cell ---------------------------------------------------------------------------

def _breaks(text: str, width: int, fold: bool = False) -> list[int]:
    """Where rich's ``divide_line`` breaks ``text`` for ``width`` cells. A word too long for
    the width gets a line of its own, there cut with ``…`` (a table's cell) or, with ``fold``,
    folded over as many lines as it needs (printed text)."""
    breaks, offset = [], 0
    for match in _WORD.finditer(text):
        start, word = match.start(), match.group()
        length = cell_width(word.rstrip())
        if width - offset >= length:
            offset += cell_width(word)
        elif length > width and fold:
            chopped = _chop(word, width)
            for piece in chopped[:-1]:
                if start:
                    breaks.append(start)
                start += len(piece)
            if start:
                breaks.append(start)
            offset = cell_width(chopped[-1])
        elif length > width or (offset and start):
            if start:
                breaks.append(start)
            offset = cell_width(word)
    return breaks


def _chop(text: str, width: int) -> list[str]:
    if text.isascii():
        return [text[i:i + width] for i in range(0, len(text), width)]
    from rich.cells import chop_cells

    return chop_cells(text, width)


def _cell_lines(c: Cell, width: int, outer: str = "",
                ellipsis: str = "…") -> list[list[tuple[str, str]]]:
    """The lines of one cell, ``width - 2`` cells each (its blanks are added by the row), as
    (text, style) segments: rich's ``Text.wrap`` with overflow ``ellipsis``, left-justified.
    ``outer``: a style under all of it (the header's)."""
    text, inner, spans = c.plain, width - 2, c.spans
    base = _merge([outer, c.style]) if outer else c.style
    if c.width <= inner:  # the common case: the cell fits on one line
        return [_segments(text + " " * (inner - c.width), base, spans)]
    bounds = [0, *_breaks(text, inner), len(text)]
    lines = []
    for start, end in zip(bounds, bounds[1:]):
        line = text[start:end]
        if len(line) > inner:  # rstrip_end: the blanks past the width go
            trailing = _TRAILING.search(line)
            if trailing:
                line = line[:len(line) - min(len(trailing.group()), len(line) - inner)]
        used = cell_width(line)
        if used > inner:
            line = _fit(line, inner - 1) + ellipsis
        kept = [(max(s, start) - start, min(e, end) - start, st) for s, e, st in spans
                if s < end and e > start]
        kept = [(s, min(e, len(line)), st) for s, e, st in kept if s < len(line)]
        if used < inner:
            line += " " * (inner - used)
        lines.append(_segments(line, base, kept))
    return lines


def _segments(text: str, base: str, spans: list[tuple[int, int, str]]) -> list[tuple[str, str]]:
    """``text`` cut at every span's edges, each piece with the styles over it (rich's
    ``Text.render``: the base style first, then the spans in order)."""
    every = ([(0, len(text), base)] if base else []) + [sp for sp in spans if sp[1] > sp[0]]
    if not every:
        return [(text, "")]
    edges = sorted({0, len(text), *(s for s, _, _ in every), *(e for _, e, _ in every)})
    out = []
    for a, b in zip(edges, edges[1:]):
        if b > a:
            out.append((text[a:b], _merge([st for s, e, st in every if s <= a and e >= b])))
    return out


# -- printed text -----------------------------------------------------------------------------

_DROPPED = str.maketrans("", "", "\x07\x08\x0b\x0c\x0d")  # rich's Text drops these


def render_text(text: str, screen: Screen, spans: Sequence[tuple[int, int, str]] = (),
                style: str = "") -> str:
    """``text`` as rich prints ``Text(text, style=style)`` stylized with ``spans`` (offsets
    into ``text``): lines longer than the screen wrapped at blanks, a word longer than a line
    folded, a tab to the next multiple of 8, and a newline at the end."""
    out = []
    at = 0
    for line in text.translate(_DROPPED).split("\n"):
        kept = [(max(s, at) - at, min(e, at + len(line)) - at, st) for s, e, st in spans
                if s < at + len(line) and e > at]
        at += len(line) + 1
        if "\t" in line:
            line, kept = _expand_tabs(line, kept)
        bounds = [0, *_breaks(line, screen.width, fold=True), len(line)]
        for start, end in zip(bounds, bounds[1:]):
            piece = line[start:end]
            if len(piece) > screen.width:
                trailing = _TRAILING.search(piece)
                if trailing:
                    piece = piece[:len(piece) - min(len(trailing.group()),
                                                    len(piece) - screen.width)]
            if cell_width(piece) > screen.width:
                piece = _fit(piece, screen.width)
            mine = [(max(s, start) - start, min(e, start + len(piece)) - start, st)
                    for s, e, st in kept if s < start + len(piece) and e > start]
            out += [sgr(t, st, screen) for t, st in _segments(piece, style, mine)]
            out.append("\n")
    return "".join(out)


def _expand_tabs(line: str, spans: list[tuple[int, int, str]]
                 ) -> tuple[str, list[tuple[int, int, str]]]:
    if line.isascii() and not spans:
        return line.expandtabs(8), spans
    from rich.text import Text

    expanded = Text(line)
    for start, end, style in spans:
        expanded.stylize(style, start, end)
    expanded.expand_tabs(8)
    return expanded.plain, [(s.start, s.end, str(s.style)) for s in expanded.spans]


# -- the table ---------------------------------------------------------------------------------

def render_table(headers: list[str], rows: list[list[Cell]], screen: Screen,
                 header_style: str = "bold") -> str:
    """The table as rich prints ``Table(box=None, header_style=…)``: a header row, then one
    row per ``rows`` item, columns one blank apart from each other and from the edge."""
    head = [Cell([(h, "")]) for h in headers]
    columns = [[head[i]] + [row[i] for row in rows] for i in range(len(headers))]
    widths = column_widths(columns, screen.width)
    if min(widths, default=3) < 3:  # a column too narrow for one character: rare enough for rich
        return _with_rich(headers, rows, screen, header_style)
    out = [_row(head, widths, screen, header_style)]
    out += [_row(row, widths, screen) for row in rows]
    return "".join(out)


def _row(cells: list[Cell], widths: list[int], screen: Screen, header: str | None = None) -> str:
    """One row of cells, its lines drawn side by side. ``header``: the header row's style,
    which rich gives the cells' blanks too, and its cells sit at the bottom of the row."""
    pad = sgr(" ", header or "", screen)
    if all(c.width <= w - 2 for c, w in zip(cells, widths)):  # one line: the common row
        parts = []
        for c, w in zip(cells, widths):
            filled = c.plain + " " * (w - 2 - c.width)
            if screen.styled and (c.style or c.spans or header):
                line = _cell_lines(c, w, header or "", screen.ellipsis)[0]
                filled = "".join(sgr(t, st, screen) for t, st in line)
            parts += [pad, filled, pad]
        return "".join(parts) + "\n"
    drawn = [_cell_lines(c, w, header or "", screen.ellipsis) for c, w in zip(cells, widths)]
    height = max(len(d) for d in drawn)
    lines = []
    for i in range(height):
        parts = []
        for w, d in zip(widths, drawn):
            index = i - (height - len(d)) if header is not None else i
            if 0 <= index < len(d):
                parts += [pad, *(sgr(t, st, screen) for t, st in d[index]), pad]
            else:
                parts.append(sgr(" " * w, header or "", screen))
        lines.append("".join(parts) + "\n")
    return "".join(lines)


def _with_rich(headers: list[str], rows: list[list[Cell]], screen: Screen,
               header_style: str) -> str:
    """The same table drawn by rich itself (a terminal too narrow for its columns)."""
    import io

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, header_style=header_style)
    for header in headers:
        table.add_column(header)
    for row in rows:
        table.add_row(*(Text.assemble(*c.pieces, style=c.style) for c in row))
    out = io.StringIO()
    Console(file=out, width=screen.width, force_terminal=screen.styled,
            color_system="standard" if screen.styled else None,
            no_color=not screen.coloured).print(table)
    return out.getvalue()
