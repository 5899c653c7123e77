"""Where the engine writes, and what it writes there: prediction lines and dead letters."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from connectors import BatchMessageSink, MessageSink, Record, Sink

__all__ = [
    "Outputs",
    "prediction_line",
    "prediction_lines",
    "dead_letter_line",
    "dead_letter_headers",
]

#: A row of a block's output: the record, its prediction, its label (``None``: unlabelled) and
#: whether the prediction was a mistake.
OutputRow = tuple[Record, Any, Any, bool]


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

    def prediction_block_writer(self) -> Callable[[list[OutputRow]], None] | None:
        """A function that writes the prediction lines of a block's rows at once (``None``: no
        output): a :class:`~connectors.BatchMessageSink` gets them in one call."""
        sink = self.predictions
        if sink is None:
            return None
        if isinstance(sink, BatchMessageSink):
            send_many = sink.send_many

            def send_block(rows: list[OutputRow]) -> None:
                send_many(prediction_lines(rows), [row[0].key for row in rows])

            return send_block
        write_one = self.prediction_writer()
        assert write_one is not None

        def write_block(rows: list[OutputRow]) -> None:
            for line, row in zip(prediction_lines(rows), rows):
                write_one(row[0], line)

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
    source = _json(position.source)
    offset = position.offset
    partition = position.partition
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


def prediction_lines(rows: list[OutputRow]) -> list[bytes]:
    """:func:`prediction_line` of each row, the same bytes, made a block at a time: one
    ``%``-template per source and partition, the JSON of predictions and labels from the
    cache, no per-row function call.

    Examples
    --------
    >>> from connectors import Position
    >>> rows = [(Record(b"", Position("t", o, 0)), 1, 0, True) for o in (5, 6)]
    >>> prediction_lines(rows) == [prediction_line(*row) for row in rows]
    True
    """
    lines: list[str] = []
    append = lines.append
    cache_get = _JSON_CACHE.get
    templates: dict[tuple[str, int | None, bool], str] = {}
    truth = ("false", "true")
    for record, prediction, y, mistake in rows:
        position = record.position
        labelled = y is not None
        key = (position.source, position.partition, labelled)
        template = templates.get(key)
        if template is None:
            template = templates[key] = _template(*key)
        text = cache_get((type(prediction), prediction)) or _json(prediction)
        offset = position.offset
        if labelled:
            label = cache_get((type(y), y)) or _json(y)
            append(template % (offset, text, offset, label, truth[bool(mistake)]))
        else:
            append(template % (offset, text, offset))
    return list(map(str.encode, lines))


def _template(source: str, partition: int | None, labelled: bool) -> str:
    """The ``%``-template of :func:`prediction_lines` (offset, prediction, offset[, label,
    mistake]); a partition-less line repeats no offset, so its second one is cut out."""
    name = _json(source).replace("%", "%%")
    if partition is None:
        text = f'{{"position": {{"source": {name}, "offset": %d}}, "prediction": %s%.0s'
    else:
        text = (
            f'{{"position": {{"source": {name}, "offset": %d, "partition": {partition}}}, '
            f'"prediction": %s, "topic": {name}, "partition": {partition}, "offset": %d'
        )
    return text + (', "label": %s, "mistake": %s}' if labelled else "}")


# JSON of the strings, ints, booleans and None that predictions, labels and sources are, cached
# by type and value (True and 1 are equal keys otherwise); bounded, like the label cache.
_JSON_CACHE: dict[tuple[type, Any], str] = {}
_JSON_CACHE_LIMIT = 10_000
_CACHED_TYPES = (str, int, bool, type(None))


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
