"""Every format's parser on hostile records: an Example with finite numbers and a JSON-able
label, or a RecordError with a reason; never any other exception."""

from __future__ import annotations

import json
import math

from hypothesis import given
from hypothesis import strategies as st
from strategies import csv_line, json_line, libsvm_line

from stream_perceptron.errors import RecordError
from stream_perceptron.formats import make_parser


def _check(parser, line: bytes) -> None:
    try:
        example = parser.parse(line)
    except RecordError as e:
        assert e.reason and isinstance(e.detail, str)
        return
    if example is None:  # a CSV header
        return
    x, y = example
    assert all(isinstance(v, float) and math.isfinite(v) for v in x.values())
    for name in x:  # every name is text every exporter can write (no lone surrogate)
        name.encode("utf-8")
    if isinstance(y, str):
        y.encode("utf-8")
    json.dumps(y, allow_nan=False)  # every label can be written as strict JSON
    if isinstance(y, float):
        assert math.isfinite(y)


@given(st.lists(json_line(), max_size=10))
def test_json_lines(lines):
    parser = make_parser("jsonl")
    for line in lines:
        _check(parser, line)
    dense = parser.parse_dense(lines) if lines else None
    _check_dense(parser, lines, dense)


CSV_CASES = st.integers(1, 4).flatmap(
    lambda n: st.tuples(st.just(n), st.lists(csv_line(n), max_size=10))
)


@given(CSV_CASES)
def test_csv(case):
    columns, lines = case
    parser = make_parser("csv", "c0")
    parser.parse(",".join(f"c{i}" for i in range(columns)).encode())
    for line in lines:
        _check(parser, line)
    dense = parser.parse_dense(lines) if lines else None
    _check_dense(parser, lines, dense)


@given(st.lists(libsvm_line(), max_size=10))
def test_libsvm(lines):
    parser = make_parser("libsvm")
    for line in lines:
        _check(parser, line)


def _check_dense(parser, lines, dense) -> None:
    """A dense batch, when given, holds exactly what parse() gives line by line."""
    if dense is None:
        return
    names, X, cells = dense
    assert X.shape == (len(lines), len(names))
    for line, row, cell in zip(lines, X.tolist(), cells):
        x, y = parser.parse(line)
        assert {k: v for k, v in zip(names, row) if k in x} == x
        assert parser.label_cache[cell] == y
