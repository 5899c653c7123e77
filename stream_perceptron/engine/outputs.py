"""Where the engine writes, and what it writes there: prediction lines and dead letters."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from connectors import MessageSink, Record, Sink

__all__ = ["Outputs", "prediction_line", "dead_letter_line", "dead_letter_headers"]


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
