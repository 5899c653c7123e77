"""Co-partitioned topics read as one stream, merged by message timestamp (as Kafka Streams
synchronises a task's input partitions), so that a run is reproducible.

The topics (events, then labels) have the same partition count and are keyed alike, so a key's
records of every topic are in the same partition number; the group's range assignor gives
partition p of every topic to one member. That member buffers what each poll returns, one queue
per partition it owns (in offset order, as read), and hands on the records of all its queues
in one merged order.

*The rule.* The head of every queue is compared by ``(timestamp, side, partition, offset)``:
``side`` is the topic's place in ``topics`` (events 0, labels 1), so on a tie in milliseconds
an event goes before its outcome, then the lower partition, then the lower offset (the lines
of one message share all four and keep their order). The smallest head is released only while
every owned queue holds a record or is *at its end*: empty, and its partition read up to the
end offset the client last saw (nothing of it waits on the broker). A queue that is behind
holds the others back until its records come.

*Why it is reproducible.* When the topics are written before the run (``--exit-at-end``), a
queue is at its end only when its whole partition is read, so the released order is the merge
of the full partitions, whatever the timing of the polls. The engine's positions (and so the
checkpoint and the commits) cover released records only: what waits in a queue is read again
after a crash, and a resumed run, whose queues start at the checkpoint's positions, continues
the same merge. On a live stream a queue caught up to its end does not hold the others back
(Kafka Streams' ``max.task.idle.ms`` 0): a record that comes later with an older timestamp is
merged as it comes.

*Ownership.* Every assignment (the range assignor is eager: all partitions are given up, then
assigned, each resuming at the checkpoint) drops what the queues held. A member owning partition
p of one topic and not of the other (a member of the group with another assignor) is an error,
as are topics with different partition counts, told before the first poll.
"""

from __future__ import annotations

import heapq
import logging
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from connectors.base import Closing, PartitionedSource
from connectors.errors import ConnectorError
from connectors.kafka.common import TopicPartitionKey
from connectors.kafka.group_source import GroupSource
from connectors.record import Record

__all__ = ["CoPartitionError", "MergedSource"]

logger = logging.getLogger(__name__)

Order = tuple[int, int, int, int]


#: Most records handed on in one batch: a merge can let a large backlog go at once (a fetch may
#: bring a whole partition while the others bring nothing yet), and a checkpoint comes only
#: between batches.
BATCH_RECORDS = 1000


def _batches_of(records: list[Record]) -> Iterator[list[Record]]:
    """``records`` in batches of about ``BATCH_RECORDS``, never cut inside a message (its
    lines share a position, and a checkpoint between them would skip the rest).

    Examples
    --------
    >>> from connectors.record import Position
    >>> lines = [Record(b"", Position("t", o, 0)) for o in [0] * 999 + [1, 1, 2]]
    >>> [len(batch) for batch in _batches_of(lines)]
    [1001, 1]
    """
    start, n = 0, len(records)
    while n - start > BATCH_RECORDS:
        cut = start + BATCH_RECORDS
        while cut < n and records[cut].position == records[cut - 1].position:
            cut += 1
        yield records[start:cut]
        start = cut
    if start < n:
        yield records[start:]


class CoPartitionError(ConnectorError):
    """The topics are not co-partitioned (partition counts), or this member was not given
    partition p of each: a join across them would miss its pairs (exit 2: the topics or the
    group's members must change)."""

    exit_code = 2


class MergedSource(Closing, PartitionedSource):
    """A :class:`~connectors.kafka.group_source.GroupSource` of co-partitioned ``topics``, its
    records handed on merged by timestamp (see the module).

    Parameters
    ----------
    source
        The group source, subscribed to ``topics`` and not yet iterated.
    topics
        The topics in their order on a tie (events first, then labels).

    Examples
    --------
    >>> from connectors.kafka.kafka_python import KafkaSource
    >>> from connectors.record import Position
    >>> merged = MergedSource(KafkaSource("127.0.0.1:9", ["ev", "lab"], "g"), ["ev", "lab"])
    >>> merged.assignment, merged.lag(), merged.rebalances
    ([], {}, 0)
    >>> merged.order(Record(b"", Position("lab", 7, 2), None, None, 1000))
    (1000, 1, 2, 7)
    >>> merged.close()
    """

    def __init__(self, source: GroupSource, topics: list[str]) -> None:
        if sorted(source.topics) != sorted(topics) or len(set(topics)) != len(topics):
            raise ConnectorError(f"merge {topics!r}: the source reads {source.topics!r}")
        self.source = source
        self.topics = list(topics)
        self._side = {topic: i for i, topic in enumerate(topics)}
        self._queues: dict[TopicPartitionKey, deque[Record]] = {}
        self._generation = 0
        source.co_partition(self._check_counts)

    # -- the merge -----------------------------------------------------------------------------
    def batches(self) -> Iterator[list[Record]]:
        """The source's records, merged (each batch: what one poll let go)."""
        return self._merged(self.source.batches())

    def _merged(self, polls: Iterator[list[Record]]) -> Iterator[list[Record]]:
        for batch in polls:
            if self.source.assignments != self._generation:  # read again from the checkpoint
                self._generation = self.source.assignments
                self._queues.clear()
            queues = self._queues
            for record in batch:
                position = record.position
                tp = (position.source, position.partition)
                queue = queues.get(tp)
                if queue is None:
                    queue = queues[tp] = deque()
                queue.append(record)
            yield from _batches_of(self._release())
        yield from _batches_of(self._release())  # read to the end (--exit-at-end): all goes

    def order(self, record: Record) -> Order:
        """Where ``record`` goes in the merge: ``(timestamp, side, partition, offset)``."""
        position = record.position
        stamp = -1 if record.timestamp is None else record.timestamp
        return (stamp, self._side[position.source], position.partition or 0, position.offset)

    def _release(self) -> list[Record]:
        """The heads, smallest first, while every owned queue holds a record or is at its end."""
        owned = self._owned()
        queues = self._queues
        for tp in [tp for tp in queues if tp not in owned]:  # given up: read by another
            del queues[tp]
        empty = [tp for tp in owned if not queues.get(tp)]
        if empty and len(self.source.ended(empty)) < len(empty):
            return []  # a partition behind: its records may come first
        order = self.order
        heap = [(order(queue[0]), tp) for tp, queue in queues.items() if queue]
        heapq.heapify(heap)
        released: list[Record] = []
        while heap:
            _, tp = heapq.heappop(heap)
            queue = queues[tp]
            released.append(queue.popleft())
            if queue:
                heapq.heappush(heap, (order(queue[0]), tp))
            elif not self.source.ended([tp]):
                break
        return released

    def _owned(self) -> set[TopicPartitionKey]:
        """This member's partitions, checked to be partition p of every topic or of none."""
        owned = set(self.source.assignment)
        numbers = [{p or 0 for t, p in owned if t == topic} for topic in self.topics]
        if any(n != numbers[0] for n in numbers[1:]):
            raise CoPartitionError(
                "this member was assigned " + "; ".join(
                    f"{topic} partitions {sorted(n)}" for topic, n in zip(self.topics, numbers)
                ) + ": each partition number of every topic must go to one member (the range "
                "assignor; does another member of the group use another?)"
            )  # fmt: skip
        return owned

    def _check_counts(self, counts: dict[str, int]) -> None:
        missing = [t for t in self.topics if not counts.get(t)]
        if missing:
            raise CoPartitionError(
                f"the topic {', '.join(map(repr, missing))} does not exist: check the name, or "
                "create it with as many partitions as "
                + ", ".join(repr(t) for t in self.topics if t not in missing)
            )
        if len({counts[t] for t in self.topics}) > 1:
            raise CoPartitionError(
                "the topics are not co-partitioned: "
                + ", ".join(f"{t!r} has {counts[t]} partitions" for t in self.topics)
                + "; a key's records must be in the same partition number of each: give them "
                "the same partition count (and the same key, the join key, with the same "
                "partitioner)"
            )

    # -- the source's face ---------------------------------------------------------------------
    def stop_when(self, requested: Callable[[], bool]) -> None:
        self.source.stop_when(requested)

    def commit(self, next_offsets: dict[TopicPartitionKey, int]) -> bool:
        return self.source.commit(next_offsets)

    def lag(self) -> dict[TopicPartitionKey, int]:
        return self.source.lag()

    def committed_offsets(self) -> dict[TopicPartitionKey, int]:
        return self.source.committed_offsets()

    @property
    def rebalances(self) -> int:  # type: ignore[override]
        return self.source.rebalances

    @property
    def assignment(self) -> list[TopicPartitionKey]:
        return self.source.assignment

    def group_metadata(self) -> Any:
        return self.source.group_metadata()

    def close(self) -> None:
        self.source.close()

    def __repr__(self) -> str:
        return f"MergedSource({self.source!r}, topics={self.topics!r})"
