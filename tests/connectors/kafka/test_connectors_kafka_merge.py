"""The merge of co-partitioned topics by timestamp (:mod:`connectors.kafka.merge`), its rules
held against a scripted source: no broker (the Kafka form end to end is in
``tests/kafka/test_delayed_labels_kafka.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from connectors.kafka.merge import CoPartitionError, MergedSource
from connectors.record import Position, Record

EV, LAB = "events", "labels"


def rec(topic: str, offset: int, ts: int, partition: int = 0) -> Record:
    value = f"{topic}{partition}@{offset}".encode()
    return Record(value, Position(topic, offset, partition), None, None, ts)


class Scripted:
    """A group source's face, one poll a step: (records, partitions read to their end,
    assignment, assignments so far)."""

    def __init__(self, steps: list[tuple[list[Record], set, list, int]]) -> None:
        self.topics = [EV, LAB]
        self.steps = steps
        self.assignment: list = []
        self.assignments = 0
        self.done: set = set()
        self.check: Callable[[dict[str, int]], None] | None = None

    def co_partition(self, check: Callable[[dict[str, int]], None]) -> None:
        self.check = check

    def ended(self, keys: list) -> set:
        return {k for k in keys if k in self.done}

    def batches(self) -> Iterator[list[Record]]:
        for records, done, assignment, assignments in self.steps:
            self.done, self.assignment, self.assignments = done, assignment, assignments
            if records:
                yield records


BOTH = [(EV, 0), (LAB, 0)]


def merged(steps: list) -> list[list[str]]:
    source = MergedSource(Scripted(steps), [EV, LAB])  # type: ignore[arg-type]
    return [[r.value.decode() for r in batch] for batch in source.batches()]


def test_heads_go_by_timestamp_an_event_first_on_a_tie_and_a_queue_behind_holds_the_rest():
    steps = [
        ([rec(EV, 0, 5), rec(EV, 1, 8), rec(LAB, 0, 5)], set(), BOTH, 1),  # labels/0 then empty
        ([rec(LAB, 1, 6)], set(), BOTH, 1),
        ([rec(EV, 2, 9)], set(), BOTH, 1),  # labels/0 empty, not at its end: all wait
        ([rec(LAB, 2, 7)], set(), BOTH, 1),  # an older one came: it goes first
        ([], set(BOTH), BOTH, 1),  # read to the end: what waits goes
    ]
    assert merged(steps) == [["events0@0", "labels0@0"], ["labels0@1"], ["labels0@2"],
                             ["events0@1", "events0@2"]]  # fmt: skip


def test_a_queue_at_its_end_holds_nothing_back_and_partitions_interleave_by_timestamp():
    four = [(EV, 0), (EV, 1), (LAB, 0), (LAB, 1)]
    steps = [([rec(EV, 0, 3, 1), rec(EV, 0, 2), rec(LAB, 0, 2, 1)], {(LAB, 0), (EV, 0)}, four,
              1), ([], set(four), four, 1)]  # fmt: skip
    # labels/0 and events/0 are at their ends: they wait for nothing; (2, events, 0) goes
    # before (2, labels, 1); then labels/1, empty and not at its end, holds events/1 back
    assert merged(steps) == [["events0@0", "labels1@0"], ["events1@0"]]


def test_a_new_assignment_drops_what_the_queues_held_it_is_read_again():
    steps = [
        ([rec(EV, 0, 1)], set(), BOTH, 1),  # held: labels/0 may bring an older one
        ([rec(EV, 0, 1), rec(LAB, 0, 2)], set(BOTH), BOTH, 2),  # given back, read again
    ]
    assert merged(steps) == [["events0@0", "labels0@0"]]


def test_a_member_owning_partition_p_of_one_topic_only_is_an_error():
    steps = [([rec(EV, 0, 1)], set(), [(EV, 0), (LAB, 1)], 1)]
    with pytest.raises(CoPartitionError, match=r"events partitions \[0\]; labels partitions \[1\]"):
        merged(steps)


def test_partition_counts_must_be_equal_and_the_topics_there():
    source = Scripted([])
    MergedSource(source, [EV, LAB])  # type: ignore[arg-type]
    assert source.check is not None
    source.check({EV: 3, LAB: 3})
    with pytest.raises(CoPartitionError, match="'events' has 3 partitions, 'labels' has 2"):
        source.check({EV: 3, LAB: 2})
    with pytest.raises(CoPartitionError, match="the topic 'labels' does not exist"):
        source.check({EV: 3, LAB: 0})
    assert CoPartitionError("x").exit_code == 2
