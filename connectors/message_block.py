"""A run of consecutive one-record messages of one topic partition, kept as columns."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat

from connectors.record import Record, build_message_records

__all__ = ["MessageBlock"]


@dataclass(frozen=True, slots=True)
class MessageBlock:
    """Messages of ``topic[partition]`` read in one poll, in offset order, each holding one
    record (no newline in any value): their values, offsets and keys as lists.

    A consumer that can take the values whole (a vectorised parser) reads the columns without
    a record per message; any other consumer calls :meth:`records`. Offsets increase but need
    not be consecutive (compaction, transaction markers). A tombstone's value is ``b""``.

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

    @property
    def count(self) -> int:
        """Messages (and records) in the block."""
        return len(self.values)

    @property
    def end(self) -> int:
        """Offset after the block's last message."""
        return self.offsets[-1] + 1

    def records(self) -> list[Record]:
        """The messages as good records."""
        n = len(self.values)
        return build_message_records(
            self.values, self.keys, repeat(self.topic, n), self.offsets, repeat(self.partition, n)
        )

    def __repr__(self) -> str:
        return (
            f"MessageBlock({self.topic}[{self.partition}]@{self.offsets[0]}..{self.end}, "
            f"{len(self.values)} messages)"
        )
