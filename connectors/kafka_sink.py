"""Kafka sink: one message per output line (kafka-python 3.x, imported lazily)."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from connectors.base import Closing, MessageSink
from connectors.errors import ConnectorError
from connectors.kafka_common import merge_client_options

if TYPE_CHECKING:
    from kafka.producer import KafkaProducer

__all__ = ["KafkaSink"]

logger = logging.getLogger(__name__)

_RESERVED_PRODUCER_OPTIONS = frozenset({"bootstrap_servers", "key_serializer", "value_serializer"})
_BYTES = (bytes, bytearray, memoryview)


class KafkaSink(Closing, MessageSink):
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

    def __init__(
        self,
        bootstrap_servers: str | list[str],
        topic: str,
        *,
        client_options: dict[str, Any] | None = None,
    ) -> None:
        if not isinstance(topic, str) or not topic:
            raise ConnectorError(f"topic must be a non-empty str, got {topic!r}")
        self._config = merge_client_options(
            {"acks": "all", "linger_ms": 5, "reconnect_backoff_max_ms": 5000},
            client_options,
            _RESERVED_PRODUCER_OPTIONS,
        )
        self._config["bootstrap_servers"] = bootstrap_servers
        self.topic = topic
        self._producer: KafkaProducer | None = None
        self._lock = threading.Lock()  # guards the failures, recorded by kafka-python's thread
        self._failed = 0
        self._first_failure: BaseException | None = None
        self._closed = False

    def write(self, line: bytes) -> None:
        """Send ``line`` as one message (no newline is added).

        Raises
        ------
        ConnectorError
            As :meth:`send`.
        """
        self.send(line)

    def send(
        self,
        value: bytes,
        key: bytes | None = None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> None:
        """Queue one message; delivery is checked by :meth:`flush`.

        Parameters
        ----------
        value
            Message value.
        key
            Message key (decides the partition), or ``None``.
        headers
            Message headers as ``(name, value)`` pairs.

        Raises
        ------
        ConnectorError
            If the sink is closed, an argument has the wrong type, the
            producer cannot be created, or the message cannot be queued
            (too large, no metadata for the topic within ``max_block_ms``).
        """
        from kafka.errors import KafkaError

        if self._closed:
            raise ConnectorError(f"send to closed Kafka sink {self.topic!r}")
        if not isinstance(value, _BYTES):
            raise ConnectorError(f"value must be bytes, got {type(value).__name__}")
        if key is not None and not isinstance(key, _BYTES):
            raise ConnectorError(f"key must be bytes or None, got {type(key).__name__}")
        if headers is not None and not (
            isinstance(headers, list)
            and all(
                isinstance(h, tuple)
                and len(h) == 2
                and isinstance(h[0], str)
                and isinstance(h[1], bytes)
                for h in headers
            )
        ):
            raise ConnectorError(f"headers must be a list of (str, bytes) pairs, got {headers!r}")
        producer = self._producer or self._open()
        try:
            future = producer.send(self.topic, value=bytes(value), key=key, headers=headers)
        except (KafkaError, ValueError, TypeError) as exc:
            raise ConnectorError(f"cannot send to Kafka topic {self.topic!r}: {exc!r}") from exc
        future.add_errback(self._failure)

    def flush(self) -> None:
        """Wait until every message sent so far is acknowledged or has failed.

        Raises
        ------
        ConnectorError
            If the sink is closed, the flush times out, or any message sent
            since the previous flush was not delivered (the producer is then
            replaced by a new one at the next send).
        """
        from kafka.errors import KafkaError

        if self._closed:
            raise ConnectorError(f"flush of closed Kafka sink {self.topic!r}")
        if self._producer is None:
            return
        try:
            self._producer.flush()
        except KafkaError as exc:
            raise ConnectorError(f"flushing Kafka topic {self.topic!r} failed: {exc!r}") from exc
        with self._lock:
            failed, first = self._failed, self._first_failure
            self._failed, self._first_failure = 0, None
        if failed:
            # kafka-python may leave the producer unusable (idempotence: fatal error state);
            # the next send starts a new one.
            self._producer.close()
            self._producer = None
            raise ConnectorError(
                f"{failed} message(s) to Kafka topic {self.topic!r} were not delivered: {first!r}"
            ) from first

    def close(self) -> None:
        """Flush and close the producer; calling it again is harmless.

        Raises
        ------
        ConnectorError
            If the final flush fails; the producer is closed anyway.
        """
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._closed = True
            if self._producer is not None:
                self._producer.close()
                self._producer = None
                logger.debug("closed the Kafka producer of %r", self.topic)

    def __repr__(self) -> str:
        return f"KafkaSink(topic={self.topic!r})"

    def _open(self) -> KafkaProducer:
        from kafka.errors import KafkaError
        from kafka.producer import KafkaProducer

        try:
            self._producer = KafkaProducer(**self._config)
        except (KafkaError, ValueError, TypeError) as exc:
            raise ConnectorError(
                f"cannot create a Kafka producer for {self._config['bootstrap_servers']!r}: {exc!r}"
            ) from exc
        logger.debug("created the Kafka producer of %r", self.topic)
        return self._producer

    def _failure(self, exc: BaseException) -> None:
        with self._lock:
            self._failed += 1
            first = self._first_failure is None
            if first:
                self._first_failure = exc
        if first:
            logger.warning("a message to Kafka topic %r was not delivered: %r", self.topic, exc)
