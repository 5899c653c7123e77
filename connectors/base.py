"""Structural interfaces every source and sink implements.

Sources and sinks move raw bytes; they know nothing about formats, models
or machine learning.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol, Self, runtime_checkable

from connectors.record import Record

if TYPE_CHECKING:
    from connectors.line_block import LineBlock
    from connectors.message_block import MessageBlock

__all__ = [
    "BatchMessageSink",
    "BlockSource",
    "Closing",
    "CommittingSource",
    "MessageBlockSource",
    "MessageSink",
    "PartitionedSource",
    "Sink",
    "Source",
]

#: (source name or topic, partition or None)
PositionKey = tuple[str, "int | None"]


@runtime_checkable
class Source(Protocol):
    """A stream of records, delivered in batches.

    Concrete sources are also context managers whose exit calls
    :meth:`close`.

    Examples
    --------
    >>> from connectors.memory import MemorySource
    >>> isinstance(MemorySource([b"x"]), Source)
    True
    """

    def batches(self) -> Iterator[list[Record]]:
        """Yield lists of records in stream order; never an empty list."""
        ...

    def close(self) -> None:
        """Release resources; iteration stops at the next batch boundary."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc_info: object) -> None: ...


@runtime_checkable
class Sink(Protocol):
    """A destination for output lines.

    Examples
    --------
    >>> from connectors.memory import MemorySink
    >>> isinstance(MemorySink(), Sink)
    True
    """

    def write(self, line: bytes) -> None:
        """Write one output line; the sink appends the ``b"\\n"``."""
        ...

    def flush(self) -> None:
        """Make everything written so far durable / visible."""
        ...

    def close(self) -> None:
        """Flush and release resources."""
        ...


@runtime_checkable
class BlockSource(Source, Protocol):
    r"""A line source that can also hand whole reads as :class:`~connectors.LineBlock`\ s, so a
    vectorised parser takes them without a record per line."""

    def blocks(self) -> Iterator[LineBlock | list[Record]]:
        """Like :meth:`Source.batches`, with runs of good lines as one block each."""
        ...


@runtime_checkable
class MessageBlockSource(Source, Protocol):
    r"""A message source that can also hand each partition's run of one-record messages of a
    poll as one :class:`~connectors.MessageBlock` (columns of values, offsets and keys), so a
    vectorised parser takes them without a record per message."""

    def message_blocks(self) -> Iterator[MessageBlock | list[Record]]:
        """Like :meth:`Source.batches` (iterated instead of it, once), with runs of
        one-record messages as blocks; messages holding several lines come as records."""
        ...


@runtime_checkable
class CommittingSource(Source, Protocol):
    """A source whose positions are committed back to it once the model that learned them is
    saved (a Kafka consumer group)."""

    def commit(self, next_offsets: dict[PositionKey, int]) -> bool:
        """Record ``next_offsets`` (first offset not yet processed, per position) as done."""
        ...


@runtime_checkable
class PartitionedSource(CommittingSource, Protocol):
    """A committing source of partitions that can say how far behind it is."""

    rebalances: int

    def lag(self) -> dict[PositionKey, int]:
        """Records not yet read, per assigned partition."""
        ...

    def committed_offsets(self) -> dict[PositionKey, int]:
        """What this source committed, per partition."""
        ...


@runtime_checkable
class MessageSink(Sink, Protocol):
    """A sink of messages (a topic): besides lines, it takes a value with a key and headers."""

    def send(
        self,
        value: bytes,
        key: bytes | None = None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> None:
        """Send one message."""
        ...


@runtime_checkable
class BatchMessageSink(MessageSink, Protocol):
    """A message sink that also takes many messages in one call (a block's predictions)."""

    def send_many(self, values: list[bytes], keys: list[bytes | None]) -> None:
        """Send ``values[i]`` with ``keys[i]`` for each ``i``, in order; no headers."""
        ...


class Closing:
    """Context-manager support for sources and sinks: ``with`` calls :meth:`close` at exit."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()  # type: ignore[attr-defined]
