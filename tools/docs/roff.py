"""roff and the small prose markup: `code` is bold, *PLACEHOLDER* italic, a paragraph is a
string, a list item a ``(tag, text)`` pair, and ``Example`` text is shown verbatim.
"""

from __future__ import annotations

import re
from typing import Iterable
from cronwrap.commands import Param
from cronwrap.options import spec

from tools.docs.facts import (
    Block, Example, argument_label, choices, default_text, is_argument, option_names,
    param_default, param_limits, value_label)


_CODE = re.compile(r"`([^`]+)`")


_ITALIC = re.compile(r"\*([^*\s](?:[^*]*[^*\s])?)\*")


# Non-ASCII characters of the prose that some device has no glyph for (… on -Tascii and
# -Tlatin1), in ASCII: a missing glyph is a warning and a gap in the text.
PORTABLE = {"\u2026": "..."}


def esc(text: str) -> str:
    """Plain text for roff: backslashes, hyphens as minus signs (so that options and commands
    copy and paste), every other non-ASCII character as a named glyph."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "".join(c if ord(c) < 128 else PORTABLE.get(c) or f"\\[u{ord(c):04X}]" for c in text)


def bold(text: str) -> str:
    return rf"\fB{esc(text)}\fR"


def italic(text: str) -> str:
    return rf"\fI{esc(text)}\fR"


def inline(text: str) -> str:
    """The prose markup: `code` bold, *PLACEHOLDER* italic; whitespace collapses."""
    parts = _CODE.split(" ".join(text.split()))
    return "".join(bold(part) if i % 2 else _ITALIC.sub(r"\\fI\1\\fR", esc(part))
                   for i, part in enumerate(parts))


def line(text: str) -> str:
    """A text line: one that would start with a control character is protected."""
    return "\\&" + text if text[:1] in (".", "'") else text


def item(tag: str, body: str) -> list[str]:
    return [".TP", line(tag), line(body)]


def blocks(items: Iterable[Block]) -> list[str]:
    out: list[str] = []
    for block in items:
        if isinstance(block, Example):
            out += [".PP", ".RS 4", ".nf",
                    *(line(esc(text)) if text else "\\&" for text in block.splitlines()),
                    ".fi", ".RE"]
        elif isinstance(block, tuple):
            out += item(inline(block[0]), inline(block[1]))
        else:
            out += [".PP", line(inline(block))]
    return out


_SYNOPSIS_WORD = re.compile(r"(--?[A-Za-z][\w-]*|--|\b[A-Z][A-Z_]*\b)")


def synopsis(text: str) -> str:
    """``cronwrap logs NAME [--follow]``: the command bold, options bold, placeholders italic."""
    words = text.split(" ")
    start = 3 if words[1:2] == ["db"] else 2
    head, rest = " ".join(words[:start]), " ".join(words[start:])
    parts = _SYNOPSIS_WORD.split(rest)
    body = "".join(esc(p) if i % 2 == 0 else bold(p) if p.startswith("-") else italic(p)
                   for i, p in enumerate(parts))
    return f"{bold(head)} {body}"


def run_option_tag(opt: spec.Option) -> str:
    names = (bold(f"-{opt.short}") + ", " if opt.short else "") + bold(f"--{opt.name}")
    if choices(opt):
        return names + " " + "|".join(bold(c) for c in choices(opt))
    return f"{names} {italic(opt.metavar)}" if opt.metavar else names


def run_option_body(opt: spec.Option) -> str:
    text = esc(opt.help)
    default = default_text(opt)
    if default is not None:
        text += f" Default: {bold(default)}."
    return f"{text} Environment: {bold(opt.env)}."


def param_tag(param: Param) -> str:
    if is_argument(param):
        return italic(argument_label(param))
    names = ", ".join(bold(n) for n in option_names(param))
    value = value_label(param)
    return f"{names} {italic(value)}" if value else names


def param_body(param: Param) -> str:
    default = param_default(param)
    text = esc(param.help) + (f" Default: {bold(default)}." if default else "")
    return f"{text} {esc(param_limits(param))}".rstrip()


def section(title: str) -> str:
    return f'.SH "{title}"' if " " in title else f".SH {title}"
