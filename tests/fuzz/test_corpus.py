"""The hostile records found so far (tests/fuzz/corpus/), replayed through every format's parser
on every run: each one an Example with finite values, or a RecordError with a reason."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
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
                row = np.asarray(X)[0].tolist()  # the C scanner gives a memoryview
                assert dict(zip(names, row)) == x and parser.label_cache[cells[0]] == y


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "libsvm"])
@pytest.mark.parametrize("model", ["binary", "multiclass", "centroid"])
def test_the_corpus_through_the_engine(fmt, model):
    """The whole corpus as one stream, each format and learner: every record accounted for,
    every output strict JSON, the model finite."""
    from test_fuzz_engine import _finite, _strict

    from connectors import MemorySink, MemorySource
    from stream_perceptron import CentroidClassifier, MulticlassPerceptron, Perceptron
    from stream_perceptron.engine import Engine, Outputs

    learner = {"binary": Perceptron, "multiclass": MulticlassPerceptron}.get(
        model, CentroidClassifier
    )(**({"bias": "r2", "averaged": True} if model != "centroid" else {}))
    records = corpus()
    header = [b"c0,c1,c2"] if fmt == "csv" else []
    predictions, dead = MemorySink(), MemorySink()
    engine = Engine(learner, make_parser(fmt, "c2" if fmt == "csv" else "y"),
                    Outputs(predictions, dead), keep_recent=8)  # fmt: skip
    engine.run(MemorySource(header + records * 3, batch_size=7))
    stats = engine.stats
    assert stats.learned + stats.unlabelled + sum(stats.invalid.values()) == 3 * len(records)
    for line in predictions.lines + dead.lines:
        _strict(line)
    assert _finite(engine.learner.get_state())
