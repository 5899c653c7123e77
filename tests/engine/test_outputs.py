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
    rows=st.lists(
        st.tuples(
            st.sampled_from(["t", "data.csv", 'a"%s\\', "é"]),
            st.integers(min_value=0, max_value=2**63),
            st.one_of(st.none(), st.integers(min_value=0, max_value=3)),
            VALUES,
            VALUES,
            st.booleans(),
        ),
        max_size=12,
    )
)
def test_block_prediction_lines_equal_line_by_line(rows):
    from stream_perceptron.engine.outputs import prediction_lines

    block = [
        (Record(b"", Position(source, offset, partition)), prediction, y, mistake)
        for source, offset, partition, prediction, y, mistake in rows
    ]
    assert prediction_lines(block) == [reference(*row) for row in block]
    assert prediction_lines(block) == [prediction_line(*row) for row in block]
