"""Kafka topic sinks whatever the client: :class:`TopicSink` (argument checks, failure
accounting, flush and close; a client adapter adds how to open, produce to, flush and close its
producer) and :class:`TransactionalSink` (messages into the current transaction of a
:class:`~connectors.kafka.transactions.TransactionalOutput`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from itertools import repeat
from typing import Any

from connectors.base import BatchMessageSink, Closing, MessageSink
from connectors.errors import ConnectorError
from connectors.kafka.common import check_topic

__all__ = ["TopicSink", "TransactionalSink", "check_message"]

logger = logging.getLogger(__name__)

_BYTES = (bytes, bytearray, memoryview)


def check_message(value: object, key: object, headers: object) -> None:
    """Refuse a message whose parts have the wrong types.

    Raises
    ------
    ConnectorError
        Naming the part.

    Examples
    --------
    >>> check_message(b"v", None, [("reason", b"x")])
    >>> check_message("v", None, None)
    Traceback (most recent call last):
    ...
    connectors.errors.ConnectorError: value must be bytes, got str
    """
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


class TopicSink(Closing, BatchMessageSink):
    """Produce messages to a Kafka topic, whatever the client (a base class).

    The producer (``acks=all``, linger 5 ms, reconnect backoff at most 5 s, unless
    ``client_options`` say otherwise) is created on the first send. Sends are asynchronous;
    :meth:`flush` waits for all of them and reports any that failed.

    Parameters
    ----------
    bootstrap_servers
        ``"host:port"`` or a list of them.
    topic
        Topic to write to.
    client_options
        Further settings of the client's producer (security, ``acks``, linger...), in its own
        names.

    A client subclass implements ``_open()`` (create the producer), ``_produce(value, key,
    headers)`` (queue one message; delivery failures go to :meth:`_failure`),
    ``_flush_producer()`` and ``_close_producer()``.
    """

    def __init__(
        self,
        bootstrap_servers: str | list[str],
        topic: str,
        *,
        client_options: dict[str, Any] | None = None,
    ) -> None:
        self.topic = check_topic(topic)
        self._config = self._configure(bootstrap_servers, client_options)
        self._producer: Any = None
        self._lock = threading.Lock()  # guards the failures, recorded by the client's thread
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
            (too large, no metadata for the topic in time).
        """
        if self._closed:
            raise ConnectorError(f"send to closed Kafka sink {self.topic!r}")
        check_message(value, key, headers)
        if self._producer is None:
            self._producer = self._open()
        self._produce(bytes(value), key, headers)

    def send_many(self, values: list[bytes], keys: list[bytes | None]) -> None:
        """Queue ``values[i]`` with key ``keys[i]`` for each ``i``, as :meth:`send` would one by
        one (without headers), with the types checked once for all.

        Raises
        ------
        ConnectorError
            As :meth:`send`, or if ``values`` and ``keys`` differ in length.
        """
        if self._closed:
            raise ConnectorError(f"send to closed Kafka sink {self.topic!r}")
        if len(values) != len(keys):
            raise ConnectorError(f"{len(values)} values but {len(keys)} keys")
        if not all(map(isinstance, values, repeat(bytes))):
            raise ConnectorError("values must be bytes")
        if keys.count(None) != len(keys) and not all(
            k is None or isinstance(k, bytes) for k in keys
        ):
            raise ConnectorError("keys must be bytes or None")
        if self._producer is None:
            self._producer = self._open()
        self._produce_many(values, keys)

    def flush(self) -> None:
        """Wait until every message sent so far is acknowledged or has failed.

        Raises
        ------
        ConnectorError
            If the sink is closed, the flush fails, or any message sent
            since the previous flush was not delivered (the producer is then
            replaced by a new one at the next send).
        """
        if self._closed:
            raise ConnectorError(f"flush of closed Kafka sink {self.topic!r}")
        if self._producer is None:
            return
        self._flush_producer()
        with self._lock:
            failed, first = self._failed, self._first_failure
            self._failed, self._first_failure = 0, None
        if failed:
            # The producer may be unusable (idempotence: fatal error state); the next send
            # starts a new one.
            self._close_producer()
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
                self._close_producer()
                self._producer = None
                logger.debug("closed the Kafka producer of %r", self.topic)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(topic={self.topic!r})"

    # -- what a client implements --------------------------------------------------------------
    def _configure(
        self, bootstrap_servers: str | list[str], client_options: dict[str, Any] | None
    ) -> dict[str, Any]:
        """The producer's settings: its defaults, ``client_options``, what the sink sets."""
        raise NotImplementedError

    def _open(self) -> Any:
        raise NotImplementedError

    def _produce(
        self, value: bytes, key: bytes | None, headers: list[tuple[str, bytes]] | None
    ) -> None:
        raise NotImplementedError

    def _produce_many(self, values: list[bytes], keys: list[bytes | None]) -> None:
        for value, key in zip(values, keys):
            self._produce(value, key, None)

    def _flush_producer(self) -> None:
        raise NotImplementedError

    def _close_producer(self) -> None:
        raise NotImplementedError

    # -- delivery failures ---------------------------------------------------------------------
    def _failure(self, exc: BaseException) -> None:
        with self._lock:
            self._failed += 1
            first = self._first_failure is None
            if first:
                self._first_failure = exc
        if first:
            logger.warning("a message to Kafka topic %r was not delivered: %r", self.topic, exc)


class TransactionalSink(Closing, MessageSink):
    """A topic sink writing into a :class:`TransactionalOutput`'s current transaction.

    :meth:`flush` and :meth:`close` do nothing: the owner of the transactions commits them.
    ``headers`` gives headers added to every message (for instance the model version).

    Examples
    --------
    >>> class Memory:
    ...     def __init__(self): self.sent = []
    ...     def send(self, topic, value, key=None, headers=None):
    ...         self.sent.append((topic, value, key, headers))
    >>> out = Memory()
    >>> sink = TransactionalSink(out, "predictions", headers=lambda: [("v", b"3")])
    >>> sink.send(b"p", key=b"k"); sink.write(b"q")
    >>> out.sent
    [('predictions', b'p', b'k', [('v', b'3')]), ('predictions', b'q', None, [('v', b'3')])]
    """

    def __init__(
        self,
        output: Any,
        topic: str,
        *,
        headers: Callable[[], list[tuple[str, bytes]]] | None = None,
    ) -> None:
        self._output = output
        self.topic = check_topic(topic)
        self._headers = headers

    def write(self, line: bytes) -> None:
        self.send(line)

    def send(
        self,
        value: bytes,
        key: bytes | None = None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> None:
        extra = self._headers() if self._headers is not None else []
        merged = [*(headers or []), *extra] or None
        self._output.send(self.topic, value, key, merged)

    def flush(self) -> None:
        """Nothing: the transaction's commit makes the messages visible."""

    def close(self) -> None:
        """Nothing: the transactions' owner closes the producer."""

    def __repr__(self) -> str:
        return f"TransactionalSink(topic={self.topic!r})"
