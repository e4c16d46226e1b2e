"""JSON on the run path without the json package (issue 24 §1).

``import json`` loads its decoder, scanner and encoder and compiles six regular expressions:
~0.9 ms of every firing's start. A firing writes and reads only records of strings, numbers,
booleans and None (and lists and dicts of them): the run log's events, the settings it
records, the keeper's reports. ``_json``, the C half of the json package, does the work, as
it does for json itself: ``dumps`` writes the text ``json.dumps`` writes with its default
separators, and ``loads`` reads what ``json.loads`` reads (tests/unit/test_jsontext.py
compares them). Anything else (an indent, a sorted dump, an object hook) is json's.
"""

from __future__ import annotations

from _json import encode_basestring, encode_basestring_ascii, make_scanner

from cronwrap.record import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_NUMBERS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def _float(number: float) -> str:
    """As json writes a float: JavaScript's names for the three that are not numbers."""
    if number != number:
        return "NaN"
    if number in (_NUMBERS["Infinity"], _NUMBERS["-Infinity"]):
        return "Infinity" if number > 0 else "-Infinity"
    return float.__repr__(number)


def dumps(value: object, ascii: bool = True,
          default: Callable[[object], object] | None = None) -> str:
    """``json.dumps(value, ensure_ascii=ascii, default=default)``."""
    quote = encode_basestring_ascii if ascii else encode_basestring
    parts: list[str] = []

    def put(item: object) -> None:
        if isinstance(item, str):
            parts.append(quote(item))
        elif item is None:
            parts.append("null")
        elif item is True:
            parts.append("true")
        elif item is False:
            parts.append("false")
        elif isinstance(item, int):
            parts.append(int.__repr__(item))
        elif isinstance(item, float):
            parts.append(_float(item))
        elif isinstance(item, dict):
            parts.append("{")
            for n, (key, member) in enumerate(item.items()):
                if not isinstance(key, str):
                    raise TypeError(f"keys must be str, not {type(key).__name__}")
                parts.append(", " if n else "")
                parts.append(quote(key))
                parts.append(": ")
                put(member)
            parts.append("}")
        elif isinstance(item, (list, tuple)):
            parts.append("[")
            for n, member in enumerate(item):
                parts.append(", " if n else "")
                put(member)
            parts.append("]")
        elif default is not None:
            put(default(item))
        else:
            raise TypeError(f"Object of type {type(item).__name__} is not JSON serializable")

    put(value)
    return "".join(parts)


class _Reading:
    """What ``_json.make_scanner`` reads of a decoder: json.JSONDecoder()'s defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = _NUMBERS.__getitem__


_scan = make_scanner(_Reading())  # type: ignore[arg-type]  # a JSONDecoder, to typeshed


def loads(text: str | bytes) -> Any:
    """``json.loads(text)``; ValueError (json's JSONDecodeError) when it is not JSON."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    text = text.strip(" \t\n\r")
    try:
        value, end = _scan(text, 0)
    except StopIteration:
        raise ValueError("not JSON: expecting a value") from None
    if end != len(text):
        raise ValueError(f"not JSON: extra data at {end}")
    return value
