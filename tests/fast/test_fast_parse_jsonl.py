"""JsonLinesParser.parse_dense_block against parse(): the same floats and labels, or None."""

from __future__ import annotations

import io
import json
import math
import random
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connectors import LineSource, MemorySink
from stream_perceptron import Perceptron, native
from stream_perceptron.engine import Engine, Outputs
from stream_perceptron.errors import RecordError
from stream_perceptron.formats.jsonl import JsonLinesParser

pytestmark = pytest.mark.skipif(native.dense is None, reason="the C extension is not built")


def bits(v: float) -> str:
    return struct.pack("<d", v).hex()


def per_line(lines: list[bytes]) -> list[tuple[dict, object]] | None:
    """What parse() makes of each line, or None when one of them is bad."""
    p = JsonLinesParser("y")
    out = []
    for line in lines:
        try:
            out.append(tuple(p.parse(line)))
        except RecordError:
            return None
    return out


def check_block(lines: list[bytes]) -> bool:
    """parse_dense_block agrees with parse() on every line; True when it took the block."""
    p = JsonLinesParser("y")
    dense = p.parse_dense_block(b"".join(line + b"\n" for line in lines), len(lines))
    if dense is None:
        return False
    names, X, cells = dense
    want = per_line(lines)
    assert want is not None, "the dense path took a block with a bad line"
    for (x, y), row, cell in zip(want, X.tolist(), cells):
        assert list(x) == names
        assert [bits(v) for v in x.values()] == [bits(v) for v in row]
        assert p._labels[cell] == y and type(p._labels[cell]) is type(y)
    return True


NUMBERS = [
    "0", "-0", "-0.0", "0.0", "1", "-1", "123456789012345678", "12345678901234567890123",
    "9007199254740993", "1e5", "1E+5", "-2.5e-3", "0.1", "3.141592653589793238462643",
    "1e400", "-1e400", "1e-400", "4.9e-324", "2.2250738585072011e-308", "1.7976931348623157e308",
    "true", "false",
]  # fmt: skip
INVALID = ["01", "1.", ".5", "+1", "1e", "-", "NaN", "Infinity", "-Infinity", "0x10", "1_0"]


@pytest.mark.parametrize("text", NUMBERS + INVALID)
def test_each_number_form(text):
    lines = [b'{"a": %s, "b": 1.5, "y": 1}' % text.encode(), b'{"a": 2, "b": -1, "y": 0}']
    took = check_block(lines)
    if text in INVALID or text in ("1e400", "-1e400"):
        assert not took  # json.loads refuses it, or parse() does (non-finite)
    else:
        assert took


@pytest.mark.parametrize(
    "lines",
    [
        [b'{"a": 1, "y": 1}', b'{"y": 1, "a": 1}'],  # another key order
        [b'{"a": 1, "y": 1}', b'{"a": 1, "b": 2, "y": 1}'],  # another key set
        [b'{"a": 1, "y": 1}', b'{"a": 1, "a": 2, "y": 1}'],  # a duplicate key
        [b'{"a": "red", "y": 1}'],  # a string feature
        [b'{"a": null, "y": 1}'],  # a missing feature
        [b'{"x": {"a": 1}, "y": 1}'],  # the nested form
        [b'{"a": 1}'],  # no label
        [b'{"a": 1, "y": 1}', b'[1, 2]'],  # not an object
        [b'{"a": 1, "y": 1}', b'{"a": 1, "y": 1} x'],  # trailing garbage
        [b'{"a": 1, "y": 1}', b'{"a": 1, "y": [1]}'],  # a list label
        [b'{"a": 1, "y": 1}', b'{"a": 1, "y": tru}'],  # a bad literal
        [b'{"a": 1, "y": 1}', b'{"a": 1, "y": "\xff"}'],  # not UTF-8
        [b'{"a": 1, "y": 1}', b'{"\\u0061": 1, "y": 1}'],  # an escaped key: the slow way
        [b'{"a\\"b": 1, "y": 1}'],  # a key that needs an escape
        [b'{"a": 1, "y": 1}', b''],  # an empty line
        [b'{"a": 1, "y": NaN}'],
    ],
)
def test_lines_the_dense_path_leaves(lines):
    assert not check_block(lines)


@pytest.mark.parametrize(
    "label",
    [b"1", b"0", b"-1", b"1.0", b"2.5", b"true", b"false", b'"spam"', b'"a\\"b"', b'"\\u00e9"',
     b'"caf\xc3\xa9"', b'""', b"null", b"1e2"],
)  # fmt: skip
def test_labels(label):
    lines = [b'{"a": 1, "y": %s}' % label, b'{ "a" :2 ,"y":%s }' % label, b'\t{"a": 3,"y": 1}\r']
    assert check_block(lines)


def test_unicode_keys_and_whitespace():
    lines = [
        '{"café": 1.25, "n°": -3, "y": "oui"}'.encode(),
        b' { "caf\xc3\xa9" : 0 , "n\xc2\xb0":1e1,"y":"non"} ',
    ]
    assert check_block(lines)


json_numbers = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(-(2**70), 2**70),
    st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.lists(json_numbers, min_size=3, max_size=3), st.sampled_from([0, 1, "x"])),
        min_size=1,
        max_size=20,
    ),
    st.sampled_from([", ", ",", " , "]),
)
def test_random_blocks_equal_parse(rows, sep):
    lines = [
        ("{" + sep.join(f'"f{j}": {json.dumps(v)}' for j, v in enumerate(values))
         + f'{sep}"y": {json.dumps(label)}}}').encode()
        for values, label in rows
    ]  # fmt: skip
    assert check_block(lines)


def test_the_schema_follows_the_stream():
    p = JsonLinesParser("y")
    first = b'{"a": 1, "b": 2, "y": 1}\n' * 3
    second = b'{"b": 1, "a": 2, "y": 0}\n' * 3
    assert p.parse_dense_block(first, 3)[0] == ["a", "b"]
    assert p.parse_dense_block(second, 3)[0] == ["b", "a"]


def _jsonl(seed: int, n: int = 3000) -> bytes:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        x = {f"f{j}": rng.gauss(0, 1) for j in range(4)}
        y = int(x["f0"] - 0.5 * x["f1"] > 0)
        obj = {**x, "y": y}
        if i % 97 == 5:
            obj["y"] = None  # unlabelled
        if i % 211 == 7:
            obj["f2"] = "red"  # a string feature: that block goes the per-record way
        if i % 331 == 9:
            out.append(b'{"f0": 1, "y": ')  # invalid JSON: dead-lettered
            continue
        if i % 613 == 11:
            obj["y"] = 7  # a third label: dead-lettered in either path
        if i % 500 == 13:
            obj["f3"] = math.floor(obj["f3"] * 1e6)  # an integer
        out.append(json.dumps(obj).encode())
    return b"".join(line + b"\n" for line in out)


def _run(data: bytes, dense: bool, chunk_size: int):
    predictions, dead = MemorySink(), MemorySink()
    engine = Engine(
        Perceptron(bias="r2"),
        JsonLinesParser("y"),
        Outputs(predictions=predictions, dead_letters=dead),
        dense=dense,
        keep_recent=50,
    )
    engine.run(LineSource(io.BytesIO(data), chunk_size=chunk_size))
    return engine, predictions.lines, dead.lines


@pytest.mark.parametrize("chunk_size", [900, 1 << 14])
def test_engine_with_json_blocks_equals_the_per_record_path(chunk_size, monkeypatch):
    data = _jsonl(chunk_size)
    calls = []
    original = Perceptron.learn_dense
    monkeypatch.setattr(Perceptron, "learn_dense", lambda *a: calls.append(1) or original(*a))
    a, preds_a, dead_a = _run(data, True, chunk_size)
    assert calls  # some blocks went the dense way
    monkeypatch.setattr(Perceptron, "learn_dense", original)
    b, preds_b, dead_b = _run(data, False, chunk_size)
    assert a._blocks is not None and b._blocks is None
    assert a.learner.get_state() == b.learner.get_state()
    assert a.stats.get_state() == b.stats.get_state()
    assert a.stats.learned > 2500 and a.stats.summary()["invalid"]["invalid_json"] == 10
    assert preds_a == preds_b and dead_a == dead_b
    assert [(x if isinstance(x, dict) else dict(zip(x[0], x[1].tolist())), y)
            for x, y in a.recent_window()] == b.recent_window()  # fmt: skip


def test_engine_takes_json_blocks(monkeypatch):
    calls = []
    original = Perceptron.learn_dense
    monkeypatch.setattr(Perceptron, "learn_dense", lambda *a: calls.append(1) or original(*a))
    data = b"".join(b'{"a": %r, "y": %d}\n' % (v, v > 0) for v in np.linspace(-1, 1, 5000).tolist())
    engine, _, _ = _run(data, True, 1 << 14)
    assert engine.stats.learned == 5000 and len(calls) >= 5
