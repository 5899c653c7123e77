"""Kafka transactions for shared-model mode through confluent-kafka (librdkafka): the
:class:`~connectors.kafka_transactions.TransactionalOutput` of ``--kafka-client
confluent-kafka``, with the behaviour of
:class:`~connectors.kafka_transactions.KafkaTransactions` (the shared part is
:class:`~connectors.kafka_transactions.TransactionsBase`).

librdkafka's ``commit_transaction`` flushes the transaction's messages and fails when one of
them was not delivered, so no delivery callback is needed; the group metadata is the source
consumer's ``consumer_group_metadata()``.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from connectors.kafka_common import TopicPartitionKey, merge_client_options, servers_text
from connectors.kafka_transactions import (
    MAX_MESSAGE_BYTES,
    TRANSACTION_TIMEOUT_MS,
    TransactionsBase,
)
from connectors.rdkafka_source import QUIET_LOGS, require_confluent_kafka

__all__ = ["RdKafkaTransactions"]

logger = logging.getLogger(__name__)

FULL_QUEUE_WAIT_S = 0.05
STUCK_GRACE_S = 5.0  # past a call's own timeout, before the call is taken as stuck
_RESERVED = frozenset(
    {"bootstrap.servers", "transactional.id", "enable.idempotence", "error_cb", "on_delivery"}
)


class RdKafkaTransactions(TransactionsBase):
    """A confluent-kafka transactional producer.

    The parameters are those of :class:`~connectors.kafka_transactions.KafkaTransactions`,
    except that ``client_options`` are librdkafka producer settings. Defaults here:
    ``transaction.timeout.ms=10000``, ``linger.ms=5``, ``message.max.bytes`` 17 MiB (a 16 MiB
    model and its headers).

    Examples
    --------
    A client option overrides a default; the id is the source's own (no connection is made
    before the first send):

    >>> from connectors.kafka_transactions import TransactionalOutput
    >>> out = RdKafkaTransactions("h:9", "w0", client_options={"linger.ms": 20})
    >>> isinstance(out, TransactionalOutput), out._config["linger.ms"]
    (True, 20)
    >>> out._config["transactional.id"], out._config["transaction.timeout.ms"]
    ('w0', 10000)
    """

    def _configure(
        self, bootstrap_servers: str | list[str], client_options: dict[str, Any] | None
    ) -> dict[str, Any]:
        config = merge_client_options(
            {
                "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
                "linger.ms": 5,
                "message.max.bytes": MAX_MESSAGE_BYTES + 1024 * 1024,  # room for the headers
                "reconnect.backoff.max.ms": 5000,
                **QUIET_LOGS,
            },
            client_options,
            _RESERVED,
        )
        config.update(
            {
                "bootstrap.servers": servers_text(bootstrap_servers),
                "transactional.id": self.transactional_id,
                "error_cb": self._client_error,
            }
        )
        return config

    def _client_errors(self) -> tuple[type[BaseException], ...]:
        return (require_confluent_kafka().KafkaException,)

    def _fenced(self, exc: BaseException) -> bool:
        ck = require_confluent_kafka()
        error = exc.args[0] if exc.args else None
        if not isinstance(error, ck.KafkaError):
            return False
        return error.code() in _fencing_codes(ck) or (
            error.fatal() and error.code() != ck.KafkaError._TIMED_OUT
        )

    def _create(self) -> Any:
        producer = require_confluent_kafka().Producer(self._config)
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
        headers: list[tuple[str, bytes]] | None,
    ) -> Any:  # fmt: skip
        while True:
            try:
                producer.produce(topic, value, key, headers=headers)
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
