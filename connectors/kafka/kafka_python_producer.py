"""The kafka-python adapter's producers (kafka-python 3.x, imported lazily): the topic sink and
the transactional producer, and their uses of the library's private internals.

The transactional calls with a time limit: ``KafkaProducer.commit_transaction()`` and its kin
wait without one (a commit caught by a broker restart could hang a worker for good), and a
commit that timed out must be waited for again, never begun again (it may have landed). So
they are started through ``KafkaProducer._transaction_manager`` (:func:`begin_commit`,
:func:`begin_abort`, :func:`send_offsets_to_transaction`), ``KafkaProducer._sender`` is woken
and the request's result waited on with a limit (:func:`wait_transactional`);
:func:`require_producer_internals` checks them when the producer is created.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from connectors.errors import ConnectorError
from connectors.kafka.common import TopicPartitionKey, make_client, merge_client_options
from connectors.kafka.kafka_python import kafka_errors, offsets_of
from connectors.kafka.kafka_python_internals import TESTED_WITH, private_method
from connectors.kafka.kafka_python_logs import quiet_close_race
from connectors.kafka.topic_sink import TopicSink
from connectors.kafka.transactions import (
    CALL_TIMEOUT_S,
    MAX_MESSAGE_BYTES,
    TRANSACTION_TIMEOUT_MS,
    TransactionsBase,
)

__all__ = ["KafkaSink", "KafkaTransactions", "bound_by_transaction_timeout"]

logger = logging.getLogger(__name__)

_SERIALIZERS = ("key_serializer", "value_serializer")  # values are sent as given, bytes

#: kafka-python errors saying another producer or group member took over: retrying cannot help
_FENCED = frozenset(
    {"ProducerFencedError", "InvalidProducerEpochError", "FencedInstanceIdError",
     "IllegalGenerationError", "UnknownMemberIdError", "CommitFailedError",
     "TransactionalIdAuthorizationFailedError"}
)  # fmt: skip


def _producer_part(producer: Any, owner: str, method: str) -> Callable[..., Any]:
    return private_method(producer, owner, method, "KafkaProducer")


def require_producer_internals(producer: Any) -> None:
    """Check what the transactional calls below rely on, without calling it."""
    for method in ("begin_commit", "begin_abort", "send_offsets_to_transaction"):
        _producer_part(producer, "_transaction_manager", method)
    _producer_part(producer, "_sender", "wakeup")


def begin_commit(producer: Any) -> Any:
    """Start committing the open transaction; the request's result."""
    return _producer_part(producer, "_transaction_manager", "begin_commit")()


def begin_abort(producer: Any) -> Any:
    """Start aborting the open transaction; the request's result."""
    return _producer_part(producer, "_transaction_manager", "begin_abort")()


def send_offsets_to_transaction(producer: Any, offsets: Any, group_metadata: Any) -> Any:
    """Start adding consumed offsets to the open transaction; the request's result."""
    send = _producer_part(producer, "_transaction_manager", "send_offsets_to_transaction")
    return send(offsets, group_metadata)


def wait_transactional(producer: Any, result: Any, timeout_s: float, what: str) -> None:
    """Wake the producer's sender and wait up to ``timeout_s`` for ``result`` (its
    ``wait(timeout_ms=)`` returns whether it completed and raises its error);
    ``KafkaTimeoutError`` when it did not complete (waiting again picks it up)."""
    from kafka.errors import KafkaTimeoutError

    _producer_part(producer, "_sender", "wakeup")()
    wait = getattr(result, "wait", None)
    if not callable(wait):
        raise ConnectorError(
            f"kafka-python's transactional request result {result!r} has no wait() (tested "
            f"with {TESTED_WITH}): see connectors/kafka/kafka_python_producer.py"
        )
    if not wait(timeout_ms=int(timeout_s * 1000)):
        raise KafkaTimeoutError(f"{what} took more than {timeout_s:g} s")


def request_timed_out(exc: BaseException) -> bool:
    """Whether ``exc`` is kafka-python's failure of a request the broker did not answer within
    ``request_timeout_ms``: ``RequestTimedOutError`` itself, or the fatal ``KafkaError`` its
    transaction manager wraps it in (only the text carries it).

    >>> from kafka.errors import KafkaError, RequestTimedOutError
    >>> request_timed_out(KafkaError("Could not execute transactional request for unknown "
    ...                              "reasons: [Error 7] RequestTimedOutError: Request timed out"))
    True
    >>> request_timed_out(RequestTimedOutError()), request_timed_out(KafkaError("other"))
    (True, False)
    """
    from kafka.errors import KafkaError, RequestTimedOutError

    if isinstance(exc, RequestTimedOutError):
        return True
    return type(exc) is KafkaError and RequestTimedOutError.__name__ in str(exc)


def bound_by_transaction_timeout(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with the delivery and request timeouts that its caller left unset derived
    from its ``transaction_timeout_ms``, as librdkafka derives ``message.timeout.ms`` and
    ``socket.timeout.ms`` from ``transaction.timeout.ms``.

    A transaction's message not delivered within the transaction timeout is of no use: the
    coordinator aborts the transaction by then. kafka-python's own default (120 s) let a batch
    caught in flight by a broker restart hold the commit that waits for it for two minutes
    (seen in the outage test: a worker stalled 120 s after a 10 s outage).

    Examples
    --------
    >>> bound_by_transaction_timeout({"transaction_timeout_ms": 10_000, "linger_ms": 5})
    {'transaction_timeout_ms': 10000, 'linger_ms': 5, 'request_timeout_ms': 9895, \
'delivery_timeout_ms': 10000}
    >>> bound_by_transaction_timeout({"transaction_timeout_ms": 60_000, "linger_ms": 5,
    ...                               "delivery_timeout_ms": 90_000})["request_timeout_ms"]
    59895
    """
    txn_ms = int(config.get("transaction_timeout_ms", TRANSACTION_TIMEOUT_MS))
    bounded = dict(config)
    # kafka-python requires delivery >= linger + request; librdkafka keeps its socket timeout
    # 100 ms under the transaction timeout
    linger_ms = int(bounded.get("linger_ms", 0))
    request_ms = bounded.setdefault("request_timeout_ms", max(txn_ms - 100 - linger_ms, 1000))
    bounded.setdefault("delivery_timeout_ms", max(txn_ms, linger_ms + int(request_ms)))
    return bounded


class KafkaSink(TopicSink):
    """A :class:`~connectors.kafka.topic_sink.TopicSink` on kafka-python; ``client_options``
    are ``KafkaProducer`` settings (``security_protocol``, ``sasl_mechanism``, ``ssl_cafile``,
    ``acks``, ``linger_ms``...).

    Examples
    --------
    No connection is made before the first send:

    >>> sink = KafkaSink("127.0.0.1:9", "predictions")
    >>> sink.flush(); sink.close()
    """

    def _configure(
        self, bootstrap_servers: str | list[str], client_options: dict[str, Any] | None
    ) -> dict[str, Any]:
        return merge_client_options(
            {"acks": "all", "linger_ms": 5, "reconnect_backoff_max_ms": 5000},
            client_options,
            {"bootstrap_servers": bootstrap_servers},
            _SERIALIZERS,
        )

    def _open(self) -> Any:
        from kafka.errors import KafkaError
        from kafka.producer import KafkaProducer

        quiet_close_race()
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


class KafkaTransactions(TransactionsBase):
    """A :class:`~connectors.kafka.transactions.TransactionsBase` on kafka-python;
    ``client_options`` are ``KafkaProducer`` settings (here ``max_request_size`` is 16 MiB).

    Examples
    --------
    No connection is made before the first send:

    >>> from connectors.kafka.transactions import TransactionalOutput
    >>> out = KafkaTransactions("127.0.0.1:9", "workers-w0")
    >>> isinstance(out, TransactionalOutput)
    True
    >>> out.close()
    """

    #: how long the open transaction's messages may take to be delivered before its commit
    #: is begun (a limit of its own: ``call_timeout_s`` bounds the wait for the commit's answer)
    delivery_wait_s: float = CALL_TIMEOUT_S

    def _configure(
        self, bootstrap_servers: str | list[str], client_options: dict[str, Any] | None
    ) -> dict[str, Any]:
        config = merge_client_options(
            {
                "transaction_timeout_ms": TRANSACTION_TIMEOUT_MS,
                "linger_ms": 5,
                "max_request_size": MAX_MESSAGE_BYTES,
                "reconnect_backoff_max_ms": 5000,
            },
            client_options,
            {"bootstrap_servers": bootstrap_servers, "transactional_id": self.transactional_id},
            ("enable_idempotence", *_SERIALIZERS),
        )
        return bound_by_transaction_timeout(config)

    def _client_errors(self) -> tuple[type[BaseException], ...]:
        return kafka_errors()

    def _fenced(self, exc: BaseException) -> bool:
        return type(exc).__name__ in _FENCED

    def _create(self) -> Any:
        from kafka.producer import KafkaProducer

        quiet_close_race()
        producer = KafkaProducer(**self._config)
        require_producer_internals(producer)
        producer.init_transactions()
        return producer

    def _begin(self, producer: Any) -> None:
        producer.begin_transaction()

    def _send(
        self, producer: Any, topic: str, value: bytes | None, key: bytes | None,
        headers: list[tuple[str, bytes]] | None, partition: int | None = None,
    ) -> Any:  # fmt: skip
        return producer.send(topic, value=value, key=key, headers=headers, partition=partition)

    def _undelivered(self, delivery: Any) -> bool:
        return delivery is not None and bool(delivery.is_done) and bool(delivery.failed())

    def _pending(self, delivery: Any) -> bool:
        return delivery is not None and not delivery.is_done

    def _send_offsets(
        self, producer: Any, offsets: dict[TopicPartitionKey, int], group_metadata: Any
    ) -> None:
        if offsets:
            result = send_offsets_to_transaction(producer, offsets_of(offsets), group_metadata)
            wait_transactional(
                producer, result, self.call_timeout_s, "sending the offsets to the transaction"
            )

    def _end(self, producer: Any) -> None:
        self._deliver_all(producer)
        self._committing = begin_commit(producer)
        self._ending = True
        self._resume_commit(producer)

    def _deliver_all(self, producer: Any) -> None:
        """Flush the transaction's messages and raise the first one's failure, before the
        commit is begun: kafka-python fails a batch that reached its delivery timeout without
        making the transaction abortable, and would then commit the transaction without it
        (Java's producer refuses that commit). Raised here, the transaction is aborted and
        sent again whole by :meth:`retry`."""
        producer.flush(timeout=self.delivery_wait_s)
        for delivery in self._deliveries:
            if self._undelivered(delivery):
                raise delivery.exception

    def _resume_commit(self, producer: Any) -> None:
        wait_transactional(
            producer, self._committing, self.call_timeout_s, "committing the transaction"
        )

    def _unanswered(self, exc: BaseException) -> bool:
        from kafka.errors import KafkaTimeoutError

        return isinstance(exc, KafkaTimeoutError)

    def _commit_unanswered(self, exc: BaseException) -> bool:
        """Also the commit request that timed out inside the client: kafka-python fails its
        producer then (a fatal ``KafkaError`` naming ``RequestTimedOutError``, its
        ``TxnRequestHandler.on_complete``) while the broker may still take the commit. Taken
        for a plain failure, the transaction was sent again by a new producer and landed twice
        (soak of session 35: an EndTxn unanswered through a 10 s stall, 500 predictions
        committed twice). In doubt, the retry finds the producer unusable and the worker exits
        without sending it again; its restart reads what was committed."""
        return self._unanswered(exc) or request_timed_out(exc)

    def _abort(self, producer: Any) -> None:
        wait_transactional(
            producer, begin_abort(producer), self.call_timeout_s,
            "aborting the transaction",
        )  # fmt: skip

    def _close(self, producer: Any, timeout_s: float) -> None:
        producer.close(timeout=timeout_s)
