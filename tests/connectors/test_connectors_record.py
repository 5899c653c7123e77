from __future__ import annotations

import dataclasses

import pytest

from connectors import LINE_TOO_LONG, Position, Record, build_records


def test_position_str_without_partition() -> None:
    assert str(Position("stdin", 12)) == "stdin@12"


def test_position_str_with_partition() -> None:
    assert str(Position("topic", 12, partition=3)) == "topic[3]@12"


def test_position_to_dict_omits_missing_partition() -> None:
    assert Position("data.csv", 4).to_dict() == {"source": "data.csv", "offset": 4}


def test_position_to_dict_includes_partition_zero() -> None:
    assert Position("t", 4, 0).to_dict() == {"source": "t", "offset": 4, "partition": 0}


def test_position_is_frozen_and_hashable() -> None:
    pos = Position("stdin", 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        pos.offset = 2  # type: ignore[misc]
    assert {pos, Position("stdin", 1)} == {pos}


def test_record_defaults() -> None:
    record = Record(b"x", Position("stdin", 0))
    assert (record.key, record.error, record.timestamp) == (None, None, None)
    assert not hasattr(record, "__dict__")


def test_build_records_matches_constructor() -> None:
    built = build_records([b"a", b"", b"c"], "src", 7)
    expected = [
        Record(b"a", Position("src", 7)),
        Record(b"", Position("src", 8)),
        Record(b"c", Position("src", 9)),
    ]
    assert built == expected
    assert [hash(r.position) for r in built] == [hash(r.position) for r in expected]
    assert [repr(r) for r in built] == [repr(r) for r in expected]


def test_build_records_empty() -> None:
    assert build_records([], "src", 0) == []


def test_build_records_knows_every_field() -> None:
    # build_records fills the slots by hand: adding a field to Position or
    # Record must come with an update of build_records (and of this test).
    assert [f.name for f in dataclasses.fields(Position)] == ["source", "offset", "partition"]
    assert [f.name for f in dataclasses.fields(Record)] == ["value", "position", "key", "error",
                                                       "timestamp"]


def test_line_too_long_constant() -> None:
    assert LINE_TOO_LONG == "line_too_long"
