"""jsontext writes what json.dumps writes and reads what json.loads reads (issue 24 §1: the run
path's JSON without the json package), on hand-picked values and on random records."""

from __future__ import annotations

import json
import math
import random
from datetime import datetime, timezone

import pytest

from cronwrap import jsontext
from cronwrap.model import Event, Status

ODD_TEXT = ["", "plain", "é ü ß", "\u2028\u2029", "\x00\x01\x1f\x7f", '"\\/', "\ud800 lone",
            "emoji \U0001f600", "tab\tnew\nline\r"]
VALUES = [None, True, False, 0, -1, 2**70, 1.5, -0.0, 1e-7, 1e300, 0.1 + 0.2, float("inf"),
          float("-inf"), *ODD_TEXT, [], {}, (1, "2"), Status.FAILED, Event.START,
          {"nested": {"list": [1, [2, {"x": None}]]}}]


def random_value(rng: random.Random, depth: int = 0) -> object:
    kind = rng.randrange(9 if depth < 3 else 6)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.randint(-2**63, 2**63)
    if kind == 2:
        return rng.uniform(-1e6, 1e6) * 10 ** rng.randint(-30, 30)
    if kind in (3, 4, 5):
        return "".join(chr(rng.choice([rng.randrange(32, 127), rng.randrange(0, 0x110000)]))
                       for _ in range(rng.randrange(12)))
    if kind in (6, 7):
        return {str(random_value(rng, 3)): random_value(rng, depth + 1)
                for _ in range(rng.randrange(5))}
    return [random_value(rng, depth + 1) for _ in range(rng.randrange(5))]


@pytest.mark.parametrize("ascii", [True, False])
def test_dumps_writes_what_json_writes(ascii):
    rng = random.Random(24)
    for value in VALUES + [random_value(rng) for _ in range(2000)]:
        assert jsontext.dumps(value, ascii=ascii) == json.dumps(value, ensure_ascii=ascii), value


def test_dumps_falls_back_to_default_as_json_does():
    when = datetime(2026, 12, 6, tzinfo=timezone.utc)
    record = {"ts": when, "items": [when, "text"]}
    assert jsontext.dumps(record, ascii=False, default=str) == \
        json.dumps(record, ensure_ascii=False, default=str)
    with pytest.raises(TypeError):
        jsontext.dumps({"ts": when})
    with pytest.raises(TypeError):
        jsontext.dumps({1: "a key that is no string"})


def test_nan_is_written_as_json_writes_it():
    assert jsontext.dumps([float("nan")]) == json.dumps([float("nan")]) == "[NaN]"


def test_loads_reads_what_json_reads():
    rng = random.Random(6)
    for value in VALUES + [random_value(rng) for _ in range(2000)]:
        text = json.dumps(value)
        for given in (text, f" {text}\n", text.encode()):
            assert repr(jsontext.loads(given)) == repr(json.loads(given)), text
    assert math.isnan(jsontext.loads("NaN"))


@pytest.mark.parametrize("text", ["", " ", "{", "[1,]", "1 2", "nope", '"\x01"', '{"a" 1}',
                                  "[1] x", b"\xff"])
def test_loads_refuses_what_json_refuses(text):
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        jsontext.loads(text)
