"""The confluent-kafka (librdkafka) adapter's producers: the topic sink and the transactional
producer, with the behaviour of the kafka-python ones, several times faster.

librdkafka's ``commit_transaction`` flushes the transaction's messages and fails when one of
them was not delivered, so no delivery callback is needed; the group metadata is the source
consumer's ``consumer_group_metadata()``.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable
from itertools import repeat
from operator import length_hint
from typing import Any

from connectors.errors import ConnectorError
from connectors.kafka.common import (
    TopicPartitionKey,
    make_client,
    merge_client_options,
    servers_text,
)
from connectors.kafka.librdkafka import CLIENT_DEFAULTS, rdkafka_errors, require_confluent_kafka
from connectors.kafka.topic_sink import TopicSink
from connectors.kafka.transactions import (
    MAX_MESSAGE_BYTES,
    TRANSACTION_TIMEOUT_MS,
    TransactionsBase,
)

__all__ = ["RdKafkaSink", "RdKafkaTransactions"]

logger = logging.getLogger(__name__)

_exhaust: Callable[[Iterable[Any]], None] = deque(maxlen=0).extend
POLL_EVERY = 1000  # messages queued between two serves of delivery reports
FULL_QUEUE_WAIT_S = 0.05  # the local queue is full: serve reports this long, then retry
CONNECT_FIRST_S = 0.5  # how long a transactional producer's start waits for a connection
STUCK_GRACE_S = 5.0  # past a call's own timeout, before the call is taken as stuck


class RdKafkaSink(TopicSink):
    """A :class:`~connectors.kafka.topic_sink.TopicSink` on confluent-kafka; ``client_options``
    are librdkafka producer settings (``security.protocol``, ``acks``, ``linger.ms``,
    ``batch.size``, ``compression.type``...). Only failed deliveries come back to Python
    (``delivery.report.only.error``); delivery reports are served every 1000 messages, and
    while librdkafka's local queue (up to a million messages here) is full.

    Examples
    --------
    No connection is made before the first send:

    >>> sink = RdKafkaSink("127.0.0.1:9", "predictions")
    >>> sink.flush(); sink.close()
    """

    def _configure(
        self, bootstrap_servers: str | list[str], client_options: dict[str, Any] | None
    ) -> dict[str, Any]:
        self._unpolled = 0
        return merge_client_options(
            {
                "acks": "all",
                "linger.ms": 5,
                "queue.buffering.max.messages": 1_000_000,
                "delivery.report.only.error": True,
                **CLIENT_DEFAULTS,
            },
            client_options,
            {"bootstrap.servers": servers_text(bootstrap_servers),
             "on_delivery": self._delivered, "error_cb": self._client_error},
        )  # fmt: skip

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


class RdKafkaTransactions(TransactionsBase):
    """A :class:`~connectors.kafka.transactions.TransactionsBase` on confluent-kafka;
    ``client_options`` are librdkafka producer settings (here ``message.max.bytes`` is 17 MiB:
    a 16 MiB model and its headers).

    Examples
    --------
    A client option overrides a default; the id is the source's own (no connection is made
    before the first send):

    >>> from connectors.kafka.transactions import TransactionalOutput
    >>> out = RdKafkaTransactions("h:9", "w0", client_options={"linger.ms": 20})
    >>> isinstance(out, TransactionalOutput), out._config["linger.ms"]
    (True, 20)
    >>> out._config["transactional.id"], out._config["transaction.timeout.ms"]
    ('w0', 10000)
    """

    def _configure(
        self, bootstrap_servers: str | list[str], client_options: dict[str, Any] | None
    ) -> dict[str, Any]:
        return merge_client_options(
            {
                "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
                # a transaction begun just after the last one committed meets the broker still
                # writing that one's markers (CONCURRENT_TRANSACTIONS) and retries: after
                # 100 ms by default, most of a commit's time when commits come every 10-30 ms
                # (row 17, 2 workers: 20-30 ms a commit; 10-14 ms with 5). The backoff doubles
                # on each retry up to retry.backoff.max.ms (1 s), as when the broker is away.
                "retry.backoff.ms": 5,
                "linger.ms": 5,
                "message.max.bytes": MAX_MESSAGE_BYTES + 1024 * 1024,  # room for the headers
                **CLIENT_DEFAULTS,
            },
            client_options,
            {"bootstrap.servers": servers_text(bootstrap_servers),
             "transactional.id": self.transactional_id, "error_cb": self._client_error},
            ("enable.idempotence", "on_delivery"),  # commits report undelivered messages
        )  # fmt: skip

    def _client_errors(self) -> tuple[type[BaseException], ...]:
        return rdkafka_errors()

    def _fenced(self, exc: BaseException) -> bool:
        ck = require_confluent_kafka()
        error = exc.args[0] if exc.args else None
        if not isinstance(error, ck.KafkaError):
            return False
        return error.code() in _fencing_codes(ck) or (
            error.fatal() and error.code() != ck.KafkaError._TIMED_OUT
        )

    def _create(self) -> Any:
        ck = require_confluent_kafka()
        producer = ck.Producer(self._config)
        # a broker connection first: init_transactions asked with none up yet waited for
        # librdkafka's next look for the transaction coordinator, 0.5 s, in one start of six
        # or so (measured here; with the metadata first: 20 ms, at most 34, in 30 starts)
        try:
            producer.list_topics(timeout=min(CONNECT_FIRST_S, self.call_timeout_s))
        except ck.KafkaException:
            pass  # no broker yet: init_transactions waits for one, and says why it cannot
        producer.init_transactions(self.call_timeout_s)
        return producer

    _abandoned: list[Any]  # producers stuck in a call (see _bounded)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._abandoned = []

    def _begin(self, producer: Any) -> None:
        producer.begin_transaction()

    def _send(
        self, producer: Any, topic: str, value: bytes | None, key: bytes | None,
        headers: list[tuple[str, bytes]] | None, partition: int | None = None,
    ) -> Any:  # fmt: skip
        where = {} if partition is None else {"partition": partition}
        while True:
            try:
                producer.produce(topic, value, key, headers=headers, **where)
                return None  # commit_transaction fails when a message was not delivered
            except BufferError:  # the local queue is full: let librdkafka send some
                producer.poll(FULL_QUEUE_WAIT_S)

    def _send_offsets(
        self, producer: Any, offsets: dict[TopicPartitionKey, int], group_metadata: Any
    ) -> None:
        ck = require_confluent_kafka()
        if offsets:
            partitions = [ck.TopicPartition(t, p, o) for (t, p), o in offsets.items()]
            self._bounded(producer, "send_offsets_to_transaction", partitions, group_metadata)

    def _end(self, producer: Any) -> None:
        self._ending = True  # from here on, the commit may land whatever this call reports
        self._bounded(producer, "commit_transaction")

    def _resume_commit(self, producer: Any) -> None:
        # librdkafka: a commit that failed retriably (timed out) is finished by calling
        # commit_transaction again, on the same producer
        if producer is None:  # it was stuck and is abandoned: nothing can finish the commit
            ck = require_confluent_kafka()
            raise ck.KafkaException(ck.KafkaError(
                ck.KafkaError._STATE, "the producer that sent the commit was abandoned"
            ))  # fmt: skip
        self._bounded(producer, "commit_transaction")

    def _bounded(self, producer: Any, method: str, *args: Any) -> None:
        """``producer.method(*args, call_timeout_s)``, waited for at most ``call_timeout_s``
        plus 5 s: librdkafka's send_offsets_to_transaction can wait past its timeout for a
        group coordinator that a broker restart took away (librdkafka issues 5456 and 5511,
        open). A call still running then is abandoned with its producer (the next
        transaction's new producer fences it) and reported as timed out."""
        ck = require_confluent_kafka()
        outcome: list[BaseException | None] = []

        def call() -> None:
            try:
                getattr(producer, method)(*args, self.call_timeout_s)
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
                outcome.append(exc)
            else:
                outcome.append(None)

        worker = threading.Thread(target=call, name=f"rdkafka-{method}", daemon=True)
        worker.start()
        worker.join(self.call_timeout_s + STUCK_GRACE_S)
        if not outcome:
            self._abandoned.append(producer)  # kept: destroying it would wait for the call
            self._producer = None
            self._open_txn = False
            logger.warning(
                "transactional producer %r: %s did not return within %g s (librdkafka issue "
                "5456): abandoning that producer", self.transactional_id, method,
                self.call_timeout_s + STUCK_GRACE_S,
            )  # fmt: skip
            raise ck.KafkaException(ck.KafkaError(
                ck.KafkaError._TIMED_OUT, f"{method} did not return", retriable=True
            ))  # fmt: skip
        if outcome[0] is not None:
            raise outcome[0]

    def _unanswered(self, exc: BaseException) -> bool:
        error = exc.args[0] if exc.args else None
        retriable = getattr(error, "retriable", None)
        requires_abort = getattr(error, "txn_requires_abort", None)
        return bool(callable(retriable) and retriable()) and not (
            callable(requires_abort) and requires_abort()
        )

    def _abort(self, producer: Any) -> None:
        producer.abort_transaction(self.call_timeout_s)

    def _close(self, producer: Any, timeout_s: float) -> None:
        # librdkafka has no close: what is queued is flushed (or dropped after the timeout);
        # the object goes with its last reference
        try:
            producer.flush(timeout_s)
        except self._client_errors() as exc:  # a fenced (fatal) producer refuses to flush
            logger.debug("closing the transactional producer %r: %r", self.transactional_id, exc)
        except SystemError as exc:
            # confluent-kafka 2.16.1's flush of a producer fenced in a transaction once raised
            # "SystemError: <built-in function isinstance> returned a result with an exception
            # set" (its C code; this session's soak): the worker died on a traceback instead
            # of its error line. The producer is dropped either way.
            logger.warning("closing the transactional producer %r: the client failed: %r",
                           self.transactional_id, exc)  # fmt: skip

    def _client_error(self, error: Any) -> None:
        """librdkafka's error callback: a lost broker is retried; commits report failures.
        Every broker gone: the next commit goes through a new producer (a broker restart can
        leave this one waiting for a group coordinator it still caches: librdkafka issue
        5511)."""
        if error.name() == "_ALL_BROKERS_DOWN":
            self.lost_brokers = True
        logger.debug("transactional producer %r: %r", self.transactional_id, error)


def _fencing_codes(ck: Any) -> set[int]:
    """librdkafka's codes for another producer or group member having taken over."""
    names = ("_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH", "FENCED_INSTANCE_ID",
             "ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
    return {getattr(ck.KafkaError, n) for n in names if hasattr(ck.KafkaError, n)}
