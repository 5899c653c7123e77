"""What a Kafka poll hands on, whatever the client: a partition run's messages as one block
(read as columns by a vectorised parser) or as records, lines split, long values cut."""

from __future__ import annotations

import logging
from itertools import repeat
from operator import attrgetter

from connectors.kafka.common import TopicPartitionKey, needs_split, split_message
from connectors.message_block import MessageBlock
from connectors.record import LINE_TOO_LONG, Position, Record

__all__ = ["PollUnit", "held_to_limit", "units_of"]

logger = logging.getLogger(__name__)

#: What a poll hands on: a partition's run of one-record messages as a block, or records.
PollUnit = MessageBlock | list[Record]

_value_of = attrgetter("value")


def units_of(
    runs: list[MessageBlock], split_lines: bool, as_blocks: bool
) -> tuple[list[PollUnit], dict[TopicPartitionKey, int], int, int]:
    """The units of one poll's partition runs (values ``None`` for tombstones): with
    ``as_blocks`` each run as one block, else records built in bulk (C-level loops); a run
    holding a message of several lines, with ``split_lines``, as one record per line (a block
    when that can be done in bulk). Returns the units, the next offset of each partition, and
    the numbers of messages and records.

    Examples
    --------
    >>> runs = [MessageBlock("t", 0, [b"a\\nb", None], [4, 5], [None, b"k"])]
    >>> units, positions, messages, records = units_of(runs, True, False)
    >>> [(r.value, r.position.offset, r.key) for r in units[0]], positions, messages, records
    ([(b'a', 4, None), (b'b', 4, None), (b'', 5, b'k')], {('t', 0): 6}, 2, 3)
    >>> units_of(runs, True, True)[0]
    [MessageBlock(t[0]@4..6, 3 records)]
    """
    records: list[Record] = []
    units: list[PollUnit] = []
    positions: dict[TopicPartitionKey, int] = {}
    messages = read = 0
    for run in runs:
        values = run.values
        if None in values:  # tombstones
            values = [b"" if v is None else v for v in values]
            run = MessageBlock(run.topic, run.partition, values, run.offsets, run.keys,
                               run.timestamps)  # fmt: skip
        messages += run.count
        split = split_lines and needs_split(values)
        block = run.split_lines() if split else run
        if as_blocks and block is not None:
            if records:
                units.append(records)
                records = []
            units.append(block)
            read += block.count
        else:
            more = _split_records(run) if split else run.records()
            records += more
            read += len(more)
        positions[(run.topic, run.partition)] = run.end
    if records:
        units.append(records)
    return units, positions, messages, read


def _split_records(run: MessageBlock) -> list[Record]:
    """The records of ``run``'s messages, one per line (see :func:`split_message`)."""
    records: list[Record] = []
    times = run.timestamps or repeat(None)
    for value, offset, key, ts in zip(run.values, run.offsets, run.keys, times):
        position = Position(run.topic, offset, run.partition)
        if b"\n" in value or value.endswith(b"\r"):
            records.extend(Record(line, position, key, None, ts) for line in split_message(value))
        else:
            records.append(Record(value, position, key, None, ts))
    return records


def held_to_limit(unit: PollUnit, limit: int) -> PollUnit:
    """``unit`` with every value longer than ``limit`` bytes cut to it and marked
    ``line_too_long`` (a block holding one comes as records).

    Examples
    --------
    >>> [(r.value, r.error) for r in held_to_limit(MessageBlock("t", 0, [b"ab", b"abcd"],
    ...                                                          [0, 1], [None, None]), 3)]
    [(b'ab', None), (b'abc', 'line_too_long')]
    """
    if isinstance(unit, MessageBlock):
        if max(map(len, unit.values), default=0) <= limit:
            return unit
        records = unit.records()
    else:
        if max(map(len, map(_value_of, unit)), default=0) <= limit:
            return unit
        records = unit
    too_long = [i for i, r in enumerate(records) if len(r.value) > limit]
    logger.debug("%d messages longer than %d bytes: line_too_long", len(too_long), limit)
    held = list(records)
    for i in too_long:
        r = held[i]
        held[i] = Record(r.value[:limit], r.position, r.key, LINE_TOO_LONG, r.timestamp)
    return held
