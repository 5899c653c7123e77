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

    Examples
    --------
    >>> from connectors import Position
    >>> prediction_line(Record(b"", Position("stdin", 4)), 1, 0, True)
    b'{"position": {"source": "stdin", "offset": 4}, "prediction": 1, "label": 0, "mistake": true}'

    """
    position = record.position
    entry: dict[str, Any] = {"position": position.to_dict(), "prediction": prediction}
    if position.partition is not None:
        entry.update(topic=position.source, partition=position.partition, offset=position.offset)
    if y is not None:
        entry["label"] = y
        entry["mistake"] = mistake
    return json.dumps(entry).encode()


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
