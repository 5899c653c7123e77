"""Hostile streams through the whole engine, every format and learner: no exception, every
record accounted for, every output line strict JSON, the model finite and its checkpoint
loadable."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import csv_line, json_line, libsvm_line

from connectors import MemorySink, MemorySource
from stream_perceptron import CentroidClassifier, MulticlassPerceptron, Perceptron
from stream_perceptron.checkpoint import Checkpoint
from stream_perceptron.engine import Engine, Outputs
from stream_perceptron.formats import make_parser

LEARNERS = {
    "binary": lambda: Perceptron(),
    "binary-r2-averaged": lambda: Perceptron(bias="r2", averaged=True),
    "multiclass": lambda: MulticlassPerceptron(),
    "multiclass-r2-averaged": lambda: MulticlassPerceptron(bias="r2", averaged=True),
    "centroid": lambda: CentroidClassifier(),
}

GOOD = {
    "jsonl": [b'{"a": 1.5, "b": -2, "y": 1}', b'{"a": -1, "b": 0.5, "y": 0}'],
    "csv": [b"1.5,-2,1", b"-1,0.5,0"],
    "libsvm": [b"1 1:1.5 2:-2", b"0 1:-1 2:0.5"],
}
LINES = {
    "jsonl": json_line(),
    "csv": csv_line(3),
    "libsvm": libsvm_line(),
}


def _strict(line: bytes) -> object:
    def refuse(name: str) -> None:
        raise AssertionError(f"{name} in an output line: {line[:200]!r}")

    return json.loads(line, parse_constant=refuse)


def _finite(value: object) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True


@pytest.mark.parametrize("learner", sorted(LEARNERS))
@pytest.mark.parametrize("fmt", sorted(LINES))
@given(data=st.data())
def test_hostile_streams(fmt, learner, data):
    lines = data.draw(st.lists(st.one_of(LINES[fmt], st.sampled_from(GOOD[fmt])), max_size=30))
    header = [b"a,b,y"] if fmt == "csv" else []
    predictions, dead = MemorySink(), MemorySink()
    engine = Engine(
        LEARNERS[learner](), make_parser(fmt), Outputs(predictions, dead), keep_recent=8
    )
    engine.run(MemorySource(header + lines, batch_size=data.draw(st.integers(1, 8))))
    stats = engine.stats
    # every record accounted for: learned, predicted only, or invalid
    assert stats.learned + stats.unlabelled + sum(stats.invalid.values()) == len(lines)
    assert len(predictions.lines) == stats.learned + stats.unlabelled
    assert len(dead.lines) == sum(stats.invalid.values())
    for line in predictions.lines + dead.lines:
        _strict(line)
    state = engine.learner.get_state()
    assert _finite(state), state
    checkpoint = Checkpoint(engine.learner, engine.next_offsets, stats.get_state())
    text = json.dumps(checkpoint.to_json(), allow_nan=False)
    again = Checkpoint.from_json(json.loads(text))
    assert again.model.get_state() == state
