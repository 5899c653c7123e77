"""Prediction lines are exactly json.dumps of the entry the README documents."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from connectors import Position, Record
from stream_perceptron.engine.outputs import prediction_line

VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)


def reference(record: Record, prediction: Any, y: Any = None, mistake: bool = False) -> bytes:
    position = record.position
    entry: dict[str, Any] = {"position": position.to_dict(), "prediction": prediction}
    if position.partition is not None:
        entry.update(topic=position.source, partition=position.partition, offset=position.offset)
    if y is not None:
        entry["label"] = y
        entry["mistake"] = mistake
    return json.dumps(entry).encode()


@given(
    source=st.text(max_size=10),
    offset=st.integers(min_value=0, max_value=2**63),
    partition=st.one_of(st.none(), st.integers(min_value=0, max_value=1000)),
    prediction=VALUES,
    y=VALUES,
    mistake=st.booleans(),
)
def test_prediction_lines_equal_json_dumps(source, offset, partition, prediction, y, mistake):
    record = Record(b"", Position(source, offset, partition))
    assert prediction_line(record, prediction, y, mistake) == reference(
        record, prediction, y, mistake
    )
    # True and 1, False and 0 stay apart in the cache
    for a, b in ((True, 1), (False, 0), (1, True)):
        assert prediction_line(record, a) == reference(record, a)
        assert prediction_line(record, b) == reference(record, b)


@given(
    source=st.sampled_from(["t", "data.csv", 'a"%s\\', "é"]),
    partition=st.one_of(st.none(), st.integers(min_value=0, max_value=3)),
    rows=st.lists(
        st.tuples(st.integers(min_value=0, max_value=2**63), VALUES, VALUES, st.booleans()),
        max_size=12,
    ),
    keyed=st.booleans(),
)
def test_block_prediction_lines_equal_line_by_line(source, partition, rows, keyed):
    from stream_perceptron.engine.outputs import (
        BlockOrigin,
        PredictionBlock,
        block_prediction_lines,
    )

    offsets = [offset for offset, *_ in rows]
    keys = [str(i).encode() for i in range(len(rows))] if keyed else None
    block = PredictionBlock.of_rows(
        BlockOrigin(source, partition, offsets, keys),
        [row[1] for row in rows],
        [row[2] for row in rows],
        [row[3] for row in rows],
    )
    records = [
        (Record(b"", Position(source, offset, partition)), prediction, y, mistake)
        for offset, prediction, y, mistake in rows
    ]
    assert block_prediction_lines(block) == [reference(*row) for row in records]
    assert block_prediction_lines(block) == [prediction_line(*row) for row in records]


def test_block_prediction_lines_keep_true_and_one_apart():
    from stream_perceptron.engine.outputs import (
        BlockOrigin,
        PredictionBlock,
        block_prediction_lines,
    )

    values = [True, 1, False, 0, 1, True, None, "1"]
    block = PredictionBlock.of_rows(
        BlockOrigin("t", 2, range(8)), values, values[::-1], [True] * 8
    )
    expected = [
        reference(Record(b"", Position("t", o, 2)), p, y, True)
        for o, p, y in zip(range(8), values, values[::-1])
    ]
    assert block_prediction_lines(block) == expected
