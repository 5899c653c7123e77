"""Kafka sink: one message per output line (kafka-python 3.x, imported lazily)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from connectors.errors import ConnectorError
from connectors.kafka_common import make_client, merge_client_options
from connectors.kafka_sink_base import TopicSink

if TYPE_CHECKING:
    from kafka.producer import KafkaProducer

__all__ = ["KafkaSink"]

logger = logging.getLogger(__name__)

_RESERVED_PRODUCER_OPTIONS = frozenset({"bootstrap_servers", "key_serializer", "value_serializer"})


class KafkaSink(TopicSink):
    """Produce messages to a Kafka topic.

    The producer (``acks="all"``, ``linger_ms=5``) is created on the first
    send. Sends are asynchronous; :meth:`flush` waits for all of them and
    reports any that failed.

    Parameters
    ----------
    bootstrap_servers
        ``"host:port"`` or a list of them.
    topic
        Topic to write to.
    client_options
        Further kafka-python ``KafkaProducer`` settings (``security_protocol``,
        ``sasl_mechanism``, ``ssl_cafile``, ``acks``, ``linger_ms``,
        ``reconnect_backoff_max_ms`` (5000 here)...).

    Examples
    --------
    No connection is made before the first send:

    >>> sink = KafkaSink("127.0.0.1:9", "predictions")
    >>> sink.flush(); sink.close()
    """

    def _configure(
        self, bootstrap_servers: str | list[str], client_options: dict[str, Any] | None
    ) -> dict[str, Any]:
        config = merge_client_options(
            {"acks": "all", "linger_ms": 5, "reconnect_backoff_max_ms": 5000},
            client_options,
            _RESERVED_PRODUCER_OPTIONS,
        )
        config["bootstrap_servers"] = bootstrap_servers
        return config

    def _open(self) -> KafkaProducer:
        from kafka.errors import KafkaError
        from kafka.producer import KafkaProducer

        servers = self._config["bootstrap_servers"]
        producer = make_client(
            lambda: KafkaProducer(**self._config), "producer", servers, (KafkaError,), self._config
        )
        logger.debug("created the Kafka producer of %r", self.topic)
        return producer

    def _produce(
        self, value: bytes, key: bytes | None, headers: list[tuple[str, bytes]] | None
    ) -> None:
        from kafka.errors import KafkaError

        try:
            future = self._producer.send(self.topic, value=value, key=key, headers=headers)
        except (KafkaError, ValueError, TypeError) as exc:
            raise ConnectorError(f"cannot send to Kafka topic {self.topic!r}: {exc!r}") from exc
        future.add_errback(self._failure)

    def _flush_producer(self) -> None:
        from kafka.errors import KafkaError

        try:
            self._producer.flush()
        except KafkaError as exc:
            raise ConnectorError(f"flushing Kafka topic {self.topic!r} failed: {exc!r}") from exc

    def _close_producer(self) -> None:
        self._producer.close()
