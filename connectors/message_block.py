"""A run of consecutive one-record messages of one topic partition, kept as columns."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain, repeat
from operator import add, methodcaller

from connectors.record import Record, build_message_records

__all__ = ["MessageBlock"]

_ends_with_newline = methodcaller("endswith", b"\n")
_newlines = methodcaller("count", b"\n")


@dataclass(frozen=True, slots=True)
class MessageBlock:
    """Records of the messages of ``topic[partition]`` read in one poll, in offset order: their
    values, offsets and keys as lists, one entry per record (the lines of a message of several
    lines share its offset and key, see :meth:`split_lines`).

    A consumer that can take the values whole (a vectorised parser) reads the columns without
    a record per message; any other consumer calls :meth:`records`. Offsets increase but need
    not be consecutive (compaction, transaction markers). A tombstone's value is ``b""``.
    ``timestamps`` (milliseconds) when the source was asked for them, else ``None``.

    Examples
    --------
    >>> block = MessageBlock("events", 0, [b"1,2", b"3,4"], [7, 9], [None, b"k"])
    >>> [(r.value, str(r.position), r.key) for r in block.records()]
    [(b'1,2', 'events[0]@7', None), (b'3,4', 'events[0]@9', b'k')]
    >>> block.count, block.end
    (2, 10)
    """

    topic: str
    partition: int
    values: list[bytes]
    offsets: list[int]
    keys: list[bytes | None]
    timestamps: list[int] | None = None

    @property
    def count(self) -> int:
        """Records in the block."""
        return len(self.values)

    @property
    def end(self) -> int:
        """Offset after the block's last message."""
        return self.offsets[-1] + 1

    @classmethod
    def runs(
        cls, topics: list[str], partitions: list[int], values: list[bytes], offsets: list[int],
        keys: list[bytes | None], timestamps: list[int] | None = None,
    ) -> list[MessageBlock]:  # fmt: skip
        """Messages given as columns (in poll order, several partitions interleaved) as one block
        per run of one partition.

        Examples
        --------
        >>> MessageBlock.runs(["t"] * 3, [0, 1, 1], [b"a", b"b", b"c"], [5, 2, 3], [None] * 3)
        [MessageBlock(t[0]@5..6, 1 records), MessageBlock(t[1]@2..4, 2 records)]
        """
        n = len(values)
        if partitions.count(partitions[0]) == n and topics.count(topics[0]) == n:
            return [cls(topics[0], partitions[0], values, offsets, keys, timestamps)]
        blocks: list[MessageBlock] = []
        start = 0
        for i in range(1, n + 1):
            if i == n or partitions[i] != partitions[start] or topics[i] != topics[start]:
                times = None if timestamps is None else timestamps[start:i]
                blocks.append(cls(topics[start], partitions[start], values[start:i],
                                  offsets[start:i], keys[start:i], times))  # fmt: skip
                start = i
        return blocks

    def split_lines(self) -> MessageBlock | None:
        """The block with each message's lines as records (what
        :func:`~connectors.kafka.common.split_message` gives, each line with its message's
        offset and key), made by C-level loops; ``None`` when a line ends with ``\\r`` or a
        message with a newline (then split message by message).

        Examples
        --------
        >>> block = MessageBlock("t", 0, [b"a\\nb", b"c", b""], [4, 5, 6], [b"k", None, None])
        >>> lines = block.split_lines()
        >>> lines.values, lines.offsets, lines.keys
        ([b'a', b'b', b'c', b''], [4, 4, 5, 6], [b'k', b'k', None, None])
        >>> MessageBlock("t", 0, [b"a\\r\\n"], [0], [None]).split_lines() is None
        True
        """
        joined = b"\n".join(self.values)
        if b"\r" in joined or any(map(_ends_with_newline, self.values)):
            return None
        counts = list(map(add, map(_newlines, self.values), repeat(1)))
        times = self.timestamps
        return MessageBlock(
            self.topic,
            self.partition,
            joined.split(b"\n"),
            list(chain.from_iterable(map(repeat, self.offsets, counts))),
            list(chain.from_iterable(map(repeat, self.keys, counts))),
            None if times is None else list(chain.from_iterable(map(repeat, times, counts))),
        )

    def records(self) -> list[Record]:
        """The block as good records."""
        n = len(self.values)
        return build_message_records(
            self.values, self.keys, repeat(self.topic, n), self.offsets, repeat(self.partition, n),
            self.timestamps,
        )  # fmt: skip

    def __repr__(self) -> str:
        return (
            f"MessageBlock({self.topic}[{self.partition}]@{self.offsets[0]}..{self.end}, "
            f"{len(self.values)} records)"
        )
