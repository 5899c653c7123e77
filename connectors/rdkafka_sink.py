"""Kafka sink on confluent-kafka (librdkafka): one message per output line, as
:class:`~connectors.kafka_sink.KafkaSink` does, several times faster."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable
from itertools import repeat
from operator import length_hint
from typing import Any

from connectors.errors import ConnectorError
from connectors.kafka_common import make_client, merge_client_options, servers_text
from connectors.kafka_sink_base import TopicSink
from connectors.rdkafka_source import QUIET_LOGS, require_confluent_kafka

__all__ = ["RdKafkaSink"]

logger = logging.getLogger("connectors.kafka_sink")  # the sinks' own log

_RESERVED_PRODUCER_OPTIONS = frozenset({"bootstrap.servers", "on_delivery", "error_cb"})
_exhaust: Callable[[Iterable[Any]], None] = deque(maxlen=0).extend
POLL_EVERY = 1000  # messages queued between two serves of delivery reports
FULL_QUEUE_WAIT_S = 0.05  # the local queue is full: serve reports this long, then retry


class RdKafkaSink(TopicSink):
    """Produce messages to a Kafka topic with confluent-kafka.

    Behaves as :class:`~connectors.kafka_sink.KafkaSink` (``acks=all``, ``linger.ms=5``,
    delivery checked by :meth:`flush`); ``client_options`` are librdkafka producer settings
    (``security.protocol``, ``acks``, ``linger.ms``, ``batch.size``, ``compression.type``...).
    Only failed deliveries come back to Python (``delivery.report.only.error``); delivery
    reports are served every 1000 messages, and while librdkafka's local queue (up to a
    million messages here) is full.

    Examples
    --------
    No connection is made before the first send:

    >>> sink = RdKafkaSink("127.0.0.1:9", "predictions")
    >>> sink.flush(); sink.close()
    """

    def _configure(
        self, bootstrap_servers: str | list[str], client_options: dict[str, Any] | None
    ) -> dict[str, Any]:
        config = merge_client_options(
            {
                "acks": "all",
                "linger.ms": 5,
                "reconnect.backoff.max.ms": 5000,
                "queue.buffering.max.messages": 1_000_000,
                "delivery.report.only.error": True,
                **QUIET_LOGS,
            },
            client_options,
            _RESERVED_PRODUCER_OPTIONS,
        )
        config["bootstrap.servers"] = servers_text(bootstrap_servers)
        config["on_delivery"] = self._delivered
        config["error_cb"] = self._client_error
        self._unpolled = 0
        return config

    def _open(self) -> Any:
        ck = require_confluent_kafka()
        servers = self._config["bootstrap.servers"]
        producer = make_client(
            lambda: ck.Producer(self._config), "producer", servers, (ck.KafkaException,)
        )
        logger.debug("created the Kafka producer of %r (confluent-kafka)", self.topic)
        return producer

    def _produce(
        self, value: bytes, key: bytes | None, headers: list[tuple[str, bytes]] | None
    ) -> None:
        producer = self._producer
        while True:
            try:
                if headers is None:
                    producer.produce(self.topic, value, key)
                else:
                    producer.produce(self.topic, value, key, headers=headers)
                break
            except BufferError:  # the local queue is full: let librdkafka send some
                producer.poll(FULL_QUEUE_WAIT_S)
            except Exception as exc:  # confluent_kafka.KafkaException, TypeError...
                raise ConnectorError(f"cannot send to Kafka topic {self.topic!r}: {exc!r}") from exc
        self._unpolled += 1
        if self._unpolled >= POLL_EVERY:
            self._unpolled = 0
            producer.poll(0)

    def _produce_many(self, values: list[bytes], keys: list[bytes | None]) -> None:
        producer = self._producer
        n = len(values)
        pending_values, pending_keys = iter(values), iter(keys)
        while True:
            try:  # one C-level loop: no Python frame per message
                _exhaust(map(producer.produce, repeat(self.topic, n), pending_values, pending_keys))
                break
            except BufferError:  # the local queue is full: let librdkafka send some, go on
                # map took the failed message from both iterators: it is the one before
                # those left.
                failed = n - length_hint(pending_values) - 1
                self._produce(values[failed], keys[failed], None)
            except Exception as exc:  # confluent_kafka.KafkaException, TypeError...
                raise ConnectorError(f"cannot send to Kafka topic {self.topic!r}: {exc!r}") from exc
        self._unpolled = 0
        producer.poll(0)

    def _flush_producer(self) -> None:
        self._unpolled = 0
        remaining = self._producer.flush()
        if remaining:
            raise ConnectorError(
                f"flushing Kafka topic {self.topic!r} failed: {remaining} message(s) pending"
            )

    def _close_producer(self) -> None:
        # librdkafka has no close: flushing frees what is queued; the object goes with its
        # last reference.
        self._producer.flush(0)

    def _client_error(self, error: Any) -> None:
        """librdkafka's error callback: a lost broker is retried; deliveries report failures."""
        logger.debug("Kafka producer of %r: %r", self.topic, error)

    def _delivered(self, error: Any, _message: Any) -> None:
        if error is not None:
            self._failure(ConnectorError(f"delivery failed: {error!r}"))
