"""Where the engine writes, and what it writes there: prediction lines and dead letters."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from connectors import BatchMessageSink, MessageSink, Record, Sink

__all__ = [
    "BlockOrigin",
    "Outputs",
    "PredictionBlock",
    "block_prediction_lines",
    "prediction_line",
    "dead_letter_line",
    "dead_letter_headers",
]



@dataclass(frozen=True, slots=True)
class BlockOrigin:
    """Where the rows of a block came from: their source (a file, ``stdin``, a topic), Kafka
    partition (``None`` for lines), offsets and, for messages, keys (``None``: no keys)."""

    source: str
    partition: int | None
    offsets: Sequence[int]
    keys: Sequence[bytes | None] | None = None


@dataclass(frozen=True, slots=True)
class PredictionBlock:
    """A block's predictions, coded: row ``i`` came from ``origin.offsets[i]`` and is the case
    ``cases[codes[i]]``, a ``(prediction, label, mistake)`` (label ``None``: unlabelled, its
    mistake ignored). A block has few distinct cases, so each is formatted once.

    Examples
    --------
    >>> block = PredictionBlock.of_rows(BlockOrigin("t", 0, [5, 6, 7]), [1, 0, 1], [0, 0, 0],
    ...                                 [True, False, True])
    >>> block.codes, block.cases
    ([0, 1, 0], [(1, 0, True), (0, 0, False)])
    """

    origin: BlockOrigin
    codes: list[int]
    cases: list[tuple[Any, Any, bool]]

    @classmethod
    def of_rows(
        cls, origin: BlockOrigin, predictions: list[Any], labels: list[Any], mistakes: list[bool]
    ) -> PredictionBlock:
        """The block of row ``i`` predicted ``predictions[i]``, labelled ``labels[i]``, a
        mistake or not (``mistakes[i]``); equal values of different types (``True`` and ``1``)
        are different cases."""
        rows = list(zip(predictions, labels, mistakes))
        kinds = set(map(type, predictions)) | set(map(type, labels))
        if not _CACHED_TYPE_SET.issuperset(kinds):  # floats (-0.0 == 0.0), numpy scalars...
            return cls(origin, list(range(len(rows))), rows)
        keys = list(zip(map(type, predictions), map(type, labels), rows))
        codes_of = {key: code for code, key in enumerate(dict.fromkeys(keys))}
        cases = [key[2] for key in codes_of]
        return cls(origin, list(map(codes_of.__getitem__, keys)), cases)


@dataclass
class Outputs:
    """Where the engine writes: predictions, dead letters, each optional.

    A sink is either a line sink (a file, stdout, memory) or a :class:`~connectors.MessageSink`
    (a Kafka topic), which also gets the record's key, and for dead letters the original bytes
    with the reason in headers.
    """

    predictions: Sink | None = None
    dead_letters: Sink | None = None
    # Paths of file outputs, so a checkpoint can record their sizes (exactly-once on resume).
    paths: dict[str, str] = field(default_factory=dict)

    def flush(self) -> None:
        for sink in (self.predictions, self.dead_letters):
            if sink is not None:
                sink.flush()

    def close(self) -> None:
        for sink in (self.predictions, self.dead_letters):
            if sink is not None:
                sink.close()

    def prediction_writer(self) -> Callable[[Record, bytes], None] | None:
        """A function that writes one prediction line for a record (``None``: no output)."""
        sink = self.predictions
        if sink is None:
            return None
        if isinstance(sink, MessageSink):
            send = sink.send
            return lambda record, line: send(line, key=record.key)
        write = sink.write
        return lambda _record, line: write(line)

    def prediction_block_writer(self) -> Callable[[PredictionBlock], None] | None:
        """A function that writes the prediction lines of a block at once (``None``: no
        output): a :class:`~connectors.BatchMessageSink` gets them in one call, each with the
        key of the message it came from."""
        sink = self.predictions
        if sink is None:
            return None
        if isinstance(sink, BatchMessageSink):
            send_many = sink.send_many

            def send_block(block: PredictionBlock) -> None:
                keys = block.origin.keys
                lines = block_prediction_lines(block)
                send_many(lines, list(keys) if keys is not None else [None] * len(lines))

            return send_block
        if isinstance(sink, MessageSink):
            send = sink.send

            def send_each(block: PredictionBlock) -> None:
                keys = block.origin.keys
                lines = block_prediction_lines(block)
                for line, key in zip(lines, keys if keys is not None else [None] * len(lines)):
                    send(line, key=key)

            return send_each
        write = sink.write

        def write_block(block: PredictionBlock) -> None:
            for line in block_prediction_lines(block):
                write(line)

        return write_block

    def dead_letter_writer(self) -> Callable[[Record, str, str], None] | None:
        """A function that keeps one bad record with its reason (``None``: no output)."""
        sink = self.dead_letters
        if sink is None:
            return None
        if isinstance(sink, MessageSink):
            send = sink.send

            def send_dead_letter(record: Record, reason: str, detail: str) -> None:
                headers = dead_letter_headers(record, reason, detail)
                send(record.value, key=record.key, headers=headers)

            return send_dead_letter
        write = sink.write
        return lambda record, reason, detail: write(dead_letter_line(record, reason, detail))


def prediction_line(record: Record, prediction: Any, y: Any = None, mistake: bool = False) -> bytes:
    """A prediction as a JSON line: the record's position, the prediction, and for a labelled
    record its label and whether the prediction was a mistake.

    The same bytes as ``json.dumps`` of ``{"position": ..., "prediction": ..., ("topic",
    "partition", "offset" for a Kafka record,) "label": ..., "mistake": ...}``, written with
    cached pieces: labels and predictions repeat, so each is turned into JSON once
    (``tests/engine/test_outputs.py`` holds the two equal).

    Examples
    --------
    >>> from connectors import Position
    >>> prediction_line(Record(b"", Position("stdin", 4)), 1, 0, True)
    b'{"position": {"source": "stdin", "offset": 4}, "prediction": 1, "label": 0, "mistake": true}'

    """
    position = record.position
    return _line(position.source, position.offset, position.partition, prediction, y, mistake)


def _line(
    source_name: str, offset: int, partition: int | None, prediction: Any, y: Any, mistake: bool
) -> bytes:
    source = _json(source_name)
    if partition is None:
        text = (
            f'{{"position": {{"source": {source}, "offset": {offset}}}, '
            f'"prediction": {_json(prediction)}'
        )
    else:
        text = (
            f'{{"position": {{"source": {source}, "offset": {offset}, "partition": {partition}}}, '
            f'"prediction": {_json(prediction)}, "topic": {source}, "partition": {partition}, '
            f'"offset": {offset}'
        )
    if y is not None:
        text += f', "label": {_json(y)}, "mistake": {"true" if mistake else "false"}}}'
    else:
        text += "}"
    return text.encode()


def block_prediction_lines(block: PredictionBlock) -> list[bytes]:
    """:func:`prediction_line` of each row of a block, the same bytes, made a block at a time:
    one ``bytes`` template per case of the block, filled with each row's offset by C-level
    loops, no Python call per row.

    Examples
    --------
    >>> from connectors import Position
    >>> block = PredictionBlock(BlockOrigin("t", 0, [5, 6]), [0, 1], [(1, 0, True), (0, 0, False)])
    >>> lines = block_prediction_lines(block)
    >>> lines == [prediction_line(Record(b"", Position("t", o, 0)), p, 0, m)
    ...           for o, p, m in ((5, 1, True), (6, 0, False))]
    True
    """
    origin = block.origin
    source, partition = origin.source, origin.partition
    templates = [_row_template(source, partition, *case) for case in block.cases]
    chosen = list(map(templates.__getitem__, block.codes))
    offsets = origin.offsets
    if partition is None:
        return list(map(bytes.__mod__, chosen, offsets))
    return list(map(bytes.__mod__, chosen, zip(offsets, offsets)))


def _row_template(
    source: str, partition: int | None, prediction: Any, y: Any, mistake: bool
) -> bytes:
    """The bytes of :func:`prediction_line` with ``%d`` for the offset (twice with a
    partition), everything else filled in."""
    name, text = _json(source).replace("%", "%%"), _json(prediction).replace("%", "%%")
    if partition is None:
        line = f'{{"position": {{"source": {name}, "offset": %d}}, "prediction": {text}'
    else:
        line = (
            f'{{"position": {{"source": {name}, "offset": %d, "partition": {partition}}}, '
            f'"prediction": {text}, "topic": {name}, "partition": {partition}, "offset": %d'
        )
    if y is not None:
        label = _json(y).replace("%", "%%")
        line += f', "label": {label}, "mistake": {"true" if mistake else "false"}}}'
    else:
        line += "}"
    return line.encode()


# JSON of the strings, ints, booleans and None that predictions, labels and sources are, cached
# by type and value (True and 1 are equal keys otherwise); bounded, like the label cache.
_JSON_CACHE: dict[tuple[type, Any], str] = {}
_JSON_CACHE_LIMIT = 10_000
_CACHED_TYPES = (str, int, bool, type(None))
_CACHED_TYPE_SET = frozenset(_CACHED_TYPES)


def _json(value: Any) -> str:
    kind = type(value)
    if kind not in _CACHED_TYPES:  # floats (-0.0 == 0.0 as keys), numpy scalars...
        return json.dumps(value)
    key = (kind, value)
    text = _JSON_CACHE.get(key)
    if text is None:
        text = json.dumps(value)
        if len(_JSON_CACHE) >= _JSON_CACHE_LIMIT:
            _JSON_CACHE.clear()
        _JSON_CACHE[key] = text
    return text


def dead_letter_line(record: Record, reason: str, detail: str) -> bytes:
    """A bad record as a JSON line: position, reason, detail and the original record (as text,
    or base64 when it is not UTF-8)."""
    entry: dict[str, Any] = {
        "position": record.position.to_dict(),
        "reason": reason,
        "detail": detail,
    }
    try:
        entry["record"] = record.value.decode("utf-8")
    except UnicodeDecodeError:
        entry["record_base64"] = base64.b64encode(record.value).decode("ascii")
    return json.dumps(entry).encode()


def dead_letter_headers(record: Record, reason: str, detail: str) -> list[tuple[str, bytes]]:
    """The headers of a dead letter sent to a topic (the value is the original bytes)."""
    position = record.position
    headers = [
        ("reason", reason.encode()),
        ("detail", detail.encode()),
        ("source", position.source.encode()),
        ("offset", str(position.offset).encode()),
    ]
    if position.partition is not None:
        headers.append(("partition", str(position.partition).encode()))
    return headers
