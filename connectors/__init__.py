"""Sources and sinks of the streaming engine.

Connectors move raw bytes in and out: they know nothing of formats,
parsing or machine learning. Sources yield batches of
:class:`~connectors.record.Record`; sinks take output lines.

Examples
--------
>>> import io
>>> from connectors import LineSource, MemorySink
>>> sink = MemorySink()
>>> with LineSource(io.BytesIO(b"a\\nb\\n")) as source:
...     for batch in source.batches():
...         for record in batch:
...             sink.write(record.value.upper())
>>> sink.lines
[b'A', b'B']
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from connectors.base import (
    BatchMessageSink,
    BlockSource,
    CommittingSource,
    MessageBlockSource,
    MessageSink,
    PartitionedSource,
    PositionKey,
    Sink,
    Source,
)
from connectors.errors import ConnectorError
from connectors.files import FileSink, open_sink
from connectors.kafka.common import TopicPartitionKey
from connectors.line_block import LineBlock
from connectors.lines import LineSource
from connectors.memory import MemorySink, MemorySource
from connectors.message_block import MessageBlock
from connectors.open_lines import open_line_source
from connectors.record import LINE_TOO_LONG, Position, Record, build_records

if TYPE_CHECKING:
    from connectors.kafka.kafka_python import KafkaSource
    from connectors.kafka.kafka_python_producer import KafkaSink
    from connectors.kafka.librdkafka import RdKafkaSource
    from connectors.kafka.librdkafka_producer import RdKafkaSink

#: The Kafka connectors, imported when first used: a run on stdin does not load them (nor the
#: client libraries they import).
_KAFKA = {
    "KafkaSink": "connectors.kafka.kafka_python_producer",
    "KafkaSource": "connectors.kafka.kafka_python",
    "RdKafkaSink": "connectors.kafka.librdkafka_producer",
    "RdKafkaSource": "connectors.kafka.librdkafka",
}


def __getattr__(name: str) -> Any:
    if name in _KAFKA:
        return getattr(importlib.import_module(_KAFKA[name]), name)
    raise AttributeError(f"module 'connectors' has no attribute {name!r}")

__all__ = [
    "BatchMessageSink",
    "BlockSource",
    "CommittingSource",
    "MessageBlock",
    "MessageBlockSource",
    "MessageSink",
    "PartitionedSource",
    "PositionKey",
    "LINE_TOO_LONG",
    "ConnectorError",
    "FileSink",
    "KafkaSink",
    "KafkaSource",
    "LineBlock",
    "LineSource",
    "MemorySink",
    "MemorySource",
    "Position",
    "RdKafkaSink",
    "RdKafkaSource",
    "Record",
    "Sink",
    "Source",
    "TopicPartitionKey",
    "build_records",
    "open_line_source",
    "open_sink",
]
