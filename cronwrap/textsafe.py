"""Text from a job or from a shared ledger, made safe to show on a person's terminal.

A job's output, and every string a ledger holds (job names, hosts, run keys, skip reasons,
output tails: anyone who can write the ledger can put anything there), may carry terminal
control sequences: ``ESC ] 0 ; … BEL`` retitles the window, ``ESC [ 2 J`` clears it, OSC 52
writes the clipboard. What cronwrap shows a person has each control character (C0, DEL, C1)
written as its Python escape, ``\\x1b``; ``--json`` and ``logs --raw`` stay exact.
"""

from __future__ import annotations

import re

_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f]")
# Multi-line text keeps its lines: newline, tab, and a CR that ends a line (CRLF output).
_CONTROLS_IN_LINES = re.compile("\r(?!\n)|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def _visible(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


def safe_text(text: str, lines: bool = False) -> str:
    """``text`` with every control character shown as ``\\xNN``; with ``lines``, newline, tab
    and CRLF are kept (output tails, ``logs`` on a terminal)."""
    if text.isascii() and text.isprintable():  # no control character: most text, at once
        return text
    return (_CONTROLS_IN_LINES if lines else _CONTROLS).sub(_visible, text)
