"""Model-topic records round-trip, and anything else is refused with a reason."""

from __future__ import annotations

import json

import pytest

from stream_perceptron import Perceptron
from stream_perceptron.sharing import Increment, Mixture, PartitionState, RecordFormatError
from stream_perceptron.sharing.records import KIND, decode


def test_round_trips() -> None:
    state = Perceptron().get_state()
    for record in (
        PartitionState("t", 3, 100, 90, 4, "w1"),
        Increment("w1", 8, 2, {"n": 55, "classes": []}, {"learner": "Perceptron"}, 12.5),
        Mixture(3, state, "w2", 13.0),
        Mixture(3, state, "w2", 13.0, {"w1": 8, "w2": 1}),
        Mixture(3, state, "w2", 13.0, {"w1": 8}, {"n": 0, "t0": 0, "classes": []}),
    ):
        assert decode(record.encode()) == record


@pytest.mark.parametrize(
    "value",
    [
        None,
        b"\xff\xfe",
        b"[1, 2]",
        json.dumps({"kind": "other"}).encode(),
        json.dumps({"kind": KIND, "schema_version": 2, "type": "mixture"}).encode(),
        json.dumps({"kind": KIND, "schema_version": 1, "type": "future"}).encode(),
        json.dumps({"kind": KIND, "schema_version": 1, "type": "partition", "topic": "t",
                    "partition": -1, "next_offset": 0, "n_seen": 0, "n_mistakes": 0}).encode(),
        json.dumps({"kind": KIND, "schema_version": 1, "type": "mixture", "version": 1,
                    "state": "x"}).encode(),
        json.dumps({"kind": KIND, "schema_version": 1, "type": "mixture", "version": 1,
                    "state": {}, "included": {"w1": "8"}}).encode(),
        json.dumps({"kind": KIND, "schema_version": 1, "type": "mixture", "version": 1,
                    "state": {}, "step": [1, 2]}).encode(),
        json.dumps({"kind": KIND, "schema_version": 1, "type": "increment", "worker": "w",
                    "seq": 1, "base_version": 0, "meta": {"learner": "Perceptron"},
                    "delta": {"n": 1.5, "classes": []}}).encode(),
        json.dumps({"kind": KIND, "schema_version": 1, "type": "increment", "worker": "w",
                    "seq": 1, "base_version": 0, "meta": {}, "delta": {"n": 1,
                    "classes": []}}).encode(),
    ],
)
def test_what_is_not_a_record(value: bytes | None) -> None:
    with pytest.raises(RecordFormatError):
        decode(value)
