"""The hostile records found so far (tests/fuzz/corpus/), replayed through every format's parser
on every run: each one an Example with finite values, or a RecordError with a reason."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from test_fuzz_parsers import _check

from stream_perceptron.formats import make_parser

CORPUS = Path(__file__).parent / "corpus" / "hostile_records.jsonl"


def corpus() -> list[bytes]:
    """The records, kept base64-encoded (some are not UTF-8)."""
    lines = CORPUS.read_text().splitlines()
    return [base64.b64decode(json.loads(line)["record_base64"]) for line in lines]


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "libsvm"])
def test_every_corpus_record_through_every_format(fmt):
    records = corpus()
    assert len(records) >= 30
    parser = make_parser(fmt, "c2" if fmt == "csv" else "y")
    if fmt == "csv":
        parser.parse(b"c0,c1,c2")
    for record in records:
        _check(parser, record)
    if fmt != "libsvm":  # a dense batch of them is refused or equals parse() line by line
        for record in records:
            dense = parser.parse_dense([record])
            if dense is not None:
                names, X, cells = dense
                x, y = parser.parse(record)
                assert dict(zip(names, X[0].tolist())) == x and parser.label_cache[cells[0]] == y
