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
from connectors.kafka_common import TopicPartitionKey
from connectors.kafka_sink import KafkaSink
from connectors.kafka_source import KafkaSource
from connectors.line_block import LineBlock
from connectors.lines import LineSource
from connectors.memory import MemorySink, MemorySource
from connectors.message_block import MessageBlock
from connectors.open_lines import open_line_source
from connectors.rdkafka_sink import RdKafkaSink
from connectors.rdkafka_source import RdKafkaSource
from connectors.record import LINE_TOO_LONG, Position, Record, build_records

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
