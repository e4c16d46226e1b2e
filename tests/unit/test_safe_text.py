"""textsafe.safe_text, and the terminal sink of ``logs`` that applies it across chunks."""

from __future__ import annotations

import unicodedata

import pytest

from cronwrap.read.logs import Terminal
from cronwrap.textsafe import safe_text


@pytest.mark.parametrize("text, shown", [
    ("plain [red]x[/] :smile: é", "plain [red]x[/] :smile: é"),
    ("\x1b]0;OWNED\x07", "\\x1b]0;OWNED\\x07"),
    ("a\x00b\x7fc\u009bd", "a\\x00b\\x7fc\\x9bd"),
    ("line\nnext\tcol\r\n", "line\\x0anext\\x09col\\x0d\\x0a"),
])
def test_one_line_text_shows_every_control_character(text, shown):
    assert safe_text(text) == shown


@pytest.mark.parametrize("text, shown", [
    ("line\nnext\tcol\r\n", "line\nnext\tcol\r\n"),
    ("50%\r100%\n", "50%\\x0d100%\n"),  # a bare CR could overwrite what was shown
    ("\x1b[2J\x0b\x0c", "\\x1b[2J\\x0b\\x0c"),
])
def test_lines_keep_newline_tab_and_crlf(text, shown):
    assert safe_text(text, lines=True) == shown


def test_no_control_character_survives():
    shown = safe_text("".join(map(chr, range(0x100))), lines=True)
    assert [c for c in shown if unicodedata.category(c) == "Cc"] == ["\t", "\n"]


def test_the_terminal_sink_escapes_across_chunk_boundaries(capsysbinary):
    out = Terminal()
    data = "é\x1b[2J\r\nü".encode() + b"\xff"
    for i in range(len(data)):  # one byte at a time: UTF-8 and CRLF split across writes
        out.write(data[i:i + 1])
    out.close()
    assert capsysbinary.readouterr().out.decode() == "é\\x1b[2J\r\nü\\xff"
