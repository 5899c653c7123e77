"""Records flowing from sources to the engine, and where they came from.

A :class:`Record` carries the raw bytes of one input line (or message) plus
its :class:`Position` in the stream. Sources know nothing about the meaning
of the bytes; decoding and parsing happen downstream.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import repeat
from typing import Any

__all__ = ["LINE_TOO_LONG", "Position", "Record", "build_message_records", "build_records"]

#: ``Record.error`` value for a line longer than the source's limit.
LINE_TOO_LONG = "line_too_long"


@dataclass(frozen=True, slots=True)
class Position:
    """Location of a record in its stream.

    Parameters
    ----------
    source
        ``"stdin"``, a file path, or a Kafka topic.
    offset
        0-based line number for stdin and files (every line counts,
        including a CSV header, empty lines and over-long lines); the
        message offset for Kafka.
    partition
        Kafka partition, ``None`` for line-oriented sources.

    Examples
    --------
    >>> str(Position("stdin", 12))
    'stdin@12'
    >>> str(Position("topic", 12, partition=3))
    'topic[3]@12'
    >>> Position("data.csv", 0).to_dict()
    {'source': 'data.csv', 'offset': 0}
    """

    source: str
    offset: int
    partition: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-friendly mapping of the position.

        Returns
        -------
        dict
            ``{"source": ..., "offset": ...}`` plus ``"partition"`` when the
            partition is not ``None``.

        Examples
        --------
        >>> Position("t", 7, 1).to_dict()
        {'source': 't', 'offset': 7, 'partition': 1}
        """
        if self.partition is None:
            return {"source": self.source, "offset": self.offset}
        return {
            "source": self.source,
            "offset": self.offset,
            "partition": self.partition,
        }

    def __str__(self) -> str:
        if self.partition is None:
            return f"{self.source}@{self.offset}"
        return f"{self.source}[{self.partition}]@{self.offset}"


@dataclass(slots=True)
class Record:
    """One raw input record.

    Parameters
    ----------
    value
        The line without its terminator (``\\n`` or ``\\r\\n``) and, for the
        first line of a stream, without a UTF-8 byte order mark. When
        ``error`` is set, only the first bytes of the line (see the source).
    position
        Where the record was read.
    key
        Message key (Kafka); ``None`` for lines.
    error
        Set by the source when the record is already known to be bad, for
        example :data:`LINE_TOO_LONG`; ``None`` otherwise.
    timestamp
        The message's timestamp in milliseconds (Kafka, when the source is asked for it:
        a merge of co-partitioned topics orders by it); ``None`` otherwise.

    Examples
    --------
    >>> r = Record(b"1,2,3", Position("stdin", 0))
    >>> r.value, str(r.position), r.error
    (b'1,2,3', 'stdin@0', None)
    """

    value: bytes
    position: Position
    key: bytes | None = None
    error: str | None = None
    timestamp: int | None = None


# --- fast bulk construction ------------------------------------------------
#
# Calling the generated ``__init__`` of a frozen dataclass costs a Python
# frame plus one ``object.__setattr__`` per field, which caps a source at
# roughly 0.5-1 M records/s. ``build_records`` instead allocates the
# instances with ``object.__new__`` and fills each slot with its member
# descriptor's ``__set__`` driven by ``map``, so every pass is a C-level loop.
# The objects are ordinary, fully initialised instances (equal to, and
# hashing like, ones built through ``__init__``). If a field is added to
# ``Position`` or ``Record``, update ``build_records``; a test compares the
# field lists so that this cannot be forgotten silently.

_new = object.__new__
_exhaust: Callable[[Iterable[Any]], None] = deque(maxlen=0).extend
_pos_source = vars(Position)["source"].__set__  # the slot descriptor
_pos_offset = vars(Position)["offset"].__set__  # the slot descriptor
_pos_partition = vars(Position)["partition"].__set__  # the slot descriptor
_rec_value = vars(Record)["value"].__set__  # the slot descriptor
_rec_position = vars(Record)["position"].__set__  # the slot descriptor
_rec_key = vars(Record)["key"].__set__  # the slot descriptor
_rec_error = vars(Record)["error"].__set__  # the slot descriptor
_rec_timestamp = vars(Record)["timestamp"].__set__  # the slot descriptor


def build_records(values: list[bytes], source: str, start: int) -> list[Record]:
    """Build one good record per value, with consecutive offsets.

    Equivalent to ``[Record(v, Position(source, start + i)) for i, v in
    enumerate(values)]`` but several times faster.

    Parameters
    ----------
    values
        Record values, in stream order.
    source
        Source name for every position.
    start
        Offset of the first record.

    Returns
    -------
    list of Record
        Records with ``key``, ``error`` and ``timestamp`` set to ``None``.

    Examples
    --------
    >>> [str(r.position) for r in build_records([b"a", b"b"], "stdin", 5)]
    ['stdin@5', 'stdin@6']
    >>> build_records([b"a"], "s", 0) == [Record(b"a", Position("s", 0))]
    True
    """
    n = len(values)
    positions = list(map(_new, repeat(Position, n)))
    _exhaust(map(_pos_source, positions, repeat(source, n)))
    _exhaust(map(_pos_offset, positions, range(start, start + n)))
    _exhaust(map(_pos_partition, positions, repeat(None, n)))
    records = list(map(_new, repeat(Record, n)))
    _exhaust(map(_rec_value, records, values))
    _exhaust(map(_rec_position, records, positions))
    _exhaust(map(_rec_key, records, repeat(None, n)))
    _exhaust(map(_rec_error, records, repeat(None, n)))
    _exhaust(map(_rec_timestamp, records, repeat(None, n)))
    return records


def build_message_records(
    values: list[bytes],
    keys: Iterable[bytes | None],
    topics: Iterable[str],
    offsets: Iterable[int],
    partitions: Iterable[int],
    timestamps: Iterable[int | None] | None = None,
) -> list[Record]:
    """Build one good record per message (a Kafka poll), as :func:`build_records` does for lines.

    Equivalent to ``[Record(v, Position(t, o, p), k, None, ts) for v, k, t, o, p, ts in
    zip(values, keys, topics, offsets, partitions, timestamps)]`` (timestamps ``None`` when
    not given), several times faster.

    Examples
    --------
    >>> records = build_message_records([b"a", b"b"], [b"k", None], ["t", "t"], [7, 8], [0, 0])
    >>> records == [Record(b"a", Position("t", 7, 0), b"k"), Record(b"b", Position("t", 8, 0))]
    True
    """
    n = len(values)
    positions = list(map(_new, repeat(Position, n)))
    _exhaust(map(_pos_source, positions, topics))
    _exhaust(map(_pos_offset, positions, offsets))
    _exhaust(map(_pos_partition, positions, partitions))
    records = list(map(_new, repeat(Record, n)))
    _exhaust(map(_rec_value, records, values))
    _exhaust(map(_rec_position, records, positions))
    _exhaust(map(_rec_key, records, keys))
    _exhaust(map(_rec_error, records, repeat(None, n)))
    _exhaust(map(_rec_timestamp, records, repeat(None, n) if timestamps is None else timestamps))
    return records
